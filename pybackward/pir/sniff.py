"""Tell a PIR JSON program from a legacy ProgramDesc by its content, cheaply.

Every command that takes a program file calls `is_pir_bytes` on its bytes to
pick the IR, so a `.json` named `.pdmodel` (or the reverse) still works. It
looks only at the first and last 64 KiB, so it costs the same on any size.
"""
from __future__ import annotations

import re

#: How many bytes `is_pir_bytes` looks at, at each end of the data.
SNIFF_BYTES = 1 << 16
_HEAD = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"base_code"\s*:\s*\{[^{}]*"magic"\s*:\s*"pir"')
_TAIL = re.compile(rb'"base_code"\s*:\s*\{[^{}]*"magic"\s*:\s*"pir"[^{}]*\}\s*\}\s*\Z')
_OPEN = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{')


def is_pir_bytes(data: bytes) -> bool:
    """True when `data` looks like a PIR JSON program (a JSON object whose
    base_code.magic is "pir"), judged from its first and last 64 KiB only, so it
    is cheap on any size. Paddle writes base_code first; a file with it last is
    recognised too. Legacy ProgramDesc files (.pb, .pbtxt) are never PIR."""
    head = bytes(data[:SNIFF_BYTES])
    if not _OPEN.match(head):
        return False
    if _HEAD.match(head):
        return True
    return bool(_TAIL.search(bytes(data[-SNIFF_BYTES:])))


