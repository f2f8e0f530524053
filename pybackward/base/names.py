"""Names from a program shown to people: escaped (`printable`, the one escaping
helper of every view) and suggested (`close_names`, "did you mean ...?").

A program file names its vars, ops and blocks; those names reach the
terminal (listings, diffs, summaries, error lines, progress lines) and
pictures (DOT, SVG, HTML). A name holding control characters could move the
cursor, erase lines (a program could forge "wrote out.pb"), reorder text
(bidirectional overrides), or make Graphviz write an SVG that no XML parser
opens. `printable` shows each such character as a visible escape instead:
`\\x1b`, `\\x0a`, `\\u202e`. Every other character, non-ASCII letters
included, is kept, so ordinary names print exactly as before.
"""
from __future__ import annotations

import re
from typing import Iterable

#: C0 and C1 control characters and DEL, the Unicode line and paragraph separators,
#: the bidirectional marks and overrides ("Trojan source"), and lone surrogates (a
#: name decoded with errors="surrogateescape"; a terminal's encoder would raise on them).
#: (compiled on first use: ~0.8 ms, and most names are printable ASCII, which never reach it)
_UNSAFE_CLASS = "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
_unsafe: re.Pattern | None = None


def _escape(m: re.Match) -> str:
    o = ord(m.group())
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def printable(s: object) -> str:
    """`s` (as str) with every control character shown as an escape (`\\x1b`, `\\u202e`):
    what a terminal or a picture may show of a name a program gives."""
    s = s if isinstance(s, str) else str(s)
    if s.isascii() and s.isprintable():           # the common case: nothing to do, in C
        return s
    global _unsafe
    if _unsafe is None:
        _unsafe = re.compile(_UNSAFE_CLASS)
    return _unsafe.sub(_escape, s)


def printable_lines(text: str) -> str:
    """`text` with its line breaks kept and every other control character escaped
    (a whole listing whose names were not escaped one by one)."""
    return "\n".join(printable(line) for line in text.split("\n"))


#: `close_names` suggests nothing for a name longer than this, and never suggests a longer one:
#: the similarity it ranks by costs len(a) * len(b) per pair (a 100 000-character --fetch
#: name against a program's long names took 8 s).
MAX_SUGGESTED_LEN = 256
#: The character pairs `close_names` may compare in all, whatever the number of names.
SUGGESTION_BUDGET = 4_000_000


def close_names(name: str, names: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The `n` names most like `name` (best first), as `difflib.get_close_matches`
    ranks them, in bounded time: nothing for a name past MAX_SUGGESTED_LEN characters,
    no candidate past it, and at most SUGGESTION_BUDGET character pairs compared (the
    names looked at by then are ranked). For the "did you mean" of an error message."""
    if not isinstance(name, str) or len(name) > MAX_SUGGESTED_LEN:
        return []
    import difflib      # here, not at the top: a few % of every command's start-up, for error messages only
    import heapq
    s = difflib.SequenceMatcher()
    s.set_seq2(name)
    budget = SUGGESTION_BUDGET
    scored: list[tuple[float, str]] = []
    for x in names:
        if not isinstance(x, str) or len(x) > MAX_SUGGESTED_LEN:
            continue
        s.set_seq1(x)
        if s.real_quick_ratio() < cutoff:
            continue
        budget -= len(x) + len(name)
        if budget < 0:
            break
        if s.quick_ratio() < cutoff:
            continue
        budget -= len(x) * len(name)
        if budget < 0:
            break
        r = s.ratio()
        if r >= cutoff:
            scored.append((r, x))
    return [x for _, x in heapq.nlargest(n, scored)]
