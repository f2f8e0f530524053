"""read_file (a file's bytes as a uint8 tensor) and faster_tokenizer (BERT's
tokenizer over a vocabulary and a batch of strings).

read_file reads the file its `filename` attr names, as Paddle's CPU kernel
does, into a 1-D uint8 tensor of the file's size (an empty file gives shape
[0]). Like the save / load ops (ops/io/file_io.py) it runs only with the
executor's file permission (`Executor(files=DIR)`, `run --files DIR`): a
relative filename is taken from DIR and a path that leaves DIR is refused.

faster_tokenizer's inputs are not tensors. Paddle holds its `Vocab` input as
a map token -> id (a VOCAB var) and `Text` / `TextPair` as lists of strings
(STRINGS vars). pybackward keeps them as plain Python values in the scope
(docs/ops.md): a Vocab value is a `dict[str, int]`, a strings value a
`list[str]`; a NumPy array of str / bytes / objects (what a feed of a list
turns into) and a 0-D object array holding a dict are accepted too. The
kernel follows Paddle's CPU kernel step by step:

* basic tokenization: characters 0, U+FFFD and control characters (Unicode
  Cc / Cf, but not tab, newline, carriage return) are dropped; with
  `do_lower_case` each character is lower-cased alone (its simple mapping);
  CJK ideographs and punctuation (ASCII symbols and Unicode P*) become tokens
  of their own; white space (space, \\t, \\n, \\r, Unicode Zs) splits;
* WordPiece: a token longer than 100 characters is [UNK]; a token in the
  vocabulary is its id; otherwise greedy longest-match pieces, the ones after
  the first looked up with "##"; one piece not found makes the whole token
  one [UNK];
* `is_split_into_words`: every character of the text is looked up as is (no
  lower-casing, no splitting; [UNK] if absent), and TextPair is not read;
* a pair (a non-empty TextPair entry) gives [CLS] a [SEP] b [SEP] with
  segment ids 0 ... 0 1 ... 1; `max_seq_len` > 0 drops tokens one at a time
  from the end of the longer sequence (of the pair's on a tie, of the text's
  once the pair's is empty - which leaves the one-sequence form), and
  `pad_to_max_seq_len` pads the ids and the segment ids with the [PAD] id;
* a text (or pair text) with no tokens at all gives [CLS] [SEP] (with a
  pair: [CLS] [SEP] [CLS], segments 0 0 1), not padded to max_seq_len;
* the batch is padded to its longest row. Paddle fills that padding with
  `memset(pad_id)`, which repeats the pad id's low byte in all eight bytes
  of each int64 - so a [PAD] id of 0 pads with 0 and a [PAD] id of 3 pads
  with 0x0303030303030303. pybackward writes the same values.

The vocabulary must hold [UNK], [PAD], [CLS], [MASK] and [SEP]. Inputs on
which Paddle's kernel has no defined result are refused: a TextPair of
another length than Text (Paddle leaves the outputs unwritten), a negative
max_seq_len, and a max_seq_len too small for the special tokens.
"""
from __future__ import annotations

import unicodedata
from typing import Any, Mapping

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, register


# --------------------------------------------------------------------------
# read_file
# --------------------------------------------------------------------------
def _read_file(c: Call):
    env = c.env
    if env is None or not hasattr(env, "read_bytes"):
        raise ExecutionError(f"op {c.op_type} reads a file: it runs only in the interpreter")
    name = c.attr("filename", "")
    if not name:
        raise ExecutionError(f"op {c.op_type}: its filename attr is empty")
    data = env.read_bytes(c.op_type, str(name))      # regular files only: a FIFO never blocks
    return {"Out": np.frombuffer(data, dtype=np.uint8).copy()}


register(paddle_opdef("read_file", _read_file, attrs_handled=("filename",),
                      doc="Out = the bytes of the file `filename` (uint8, 1-D); needs Executor(files=DIR)"))


# --------------------------------------------------------------------------
# Strings and vocabularies: the values of STRINGS and VOCAB vars
# --------------------------------------------------------------------------
def as_strings(value: Any, what: str) -> list[str]:
    """A STRINGS value as a list of str (from a list, or a 1-D array of str / bytes / objects)."""
    if isinstance(value, np.ndarray):
        if value.ndim != 1 or value.dtype.kind not in "USO":
            raise ExecutionError(f"{what} must be a list of strings, not an array of {value.dtype} "
                                 f"and shape {list(value.shape)}")
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise ExecutionError(f"{what} must be a list of strings, not {type(value).__name__}")
    out = []
    for s in value:
        if isinstance(s, bytes):
            try:
                s = s.decode("utf-8")
            except UnicodeDecodeError:
                raise ExecutionError(f"{what}: {s[:20]!r} is not UTF-8") from None
        if not isinstance(s, str):
            raise ExecutionError(f"{what} must be a list of strings; it holds a {type(s).__name__}")
        out.append(s)
    return out


def as_vocab(value: Any, what: str) -> Mapping[str, int]:
    """A VOCAB value: a dict token -> id (or a 0-D object array holding one)."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype == object:
        value = value.item()
    if not isinstance(value, Mapping):
        raise ExecutionError(f"{what} must be a vocabulary (a dict token -> id), not {type(value).__name__}")
    return value


# --------------------------------------------------------------------------
# faster_tokenizer
# --------------------------------------------------------------------------
_SPECIAL = ("[UNK]", "[PAD]", "[CLS]", "[MASK]", "[SEP]")
_MAX_WORD_CHARS = 100
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_cjk(ch: str) -> bool:
    o = ord(ch)
    return any(lo <= o <= hi for lo, hi in _CJK)


def _is_control(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf")


def _is_space(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_punct(ch: str) -> bool:
    o = ord(ch)
    return 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126 \
        or unicodedata.category(ch).startswith("P")


def _lower(ch: str) -> str:
    """The simple (one character) lower-case mapping, as utf8proc_tolower."""
    low = ch.lower()
    return low if len(low) == 1 else low[0]


def _basic_tokens(text: str, lower: bool) -> list[str]:
    tokens, word = [], []
    for ch in text:
        if ch in "\x00\ufffd" or _is_control(ch):
            continue
        if lower:
            ch = _lower(ch)
        if _is_cjk(ch) or _is_punct(ch):
            if word:
                tokens.append("".join(word))
                word = []
            tokens.append(ch)
        elif _is_space(ch):
            if word:
                tokens.append("".join(word))
                word = []
        else:
            word.append(ch)
    if word:
        tokens.append("".join(word))
    return tokens


class _Bert:
    """Paddle's BertTokenizer over one vocabulary."""

    def __init__(self, c: Call, vocab: Mapping[str, int], lower: bool):
        missing = [t for t in _SPECIAL if t not in vocab]
        if missing:
            raise ExecutionError(f"op {c.op_type}: the vocabulary has no {', '.join(missing)} "
                                 f"(it must hold {', '.join(_SPECIAL)})")
        self.vocab, self.lower = vocab, lower
        self.unk, self.pad, self.cls, self.sep = (int(vocab[t]) for t in ("[UNK]", "[PAD]", "[CLS]", "[SEP]"))

    def wordpiece(self, word: str, out: list[int]) -> None:
        vocab = self.vocab
        if len(word) > _MAX_WORD_CHARS:
            out.append(self.unk)
            return
        if word in vocab:
            out.append(int(vocab[word]))
            return
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while start < end:
                sub = word[start:end] if start == 0 else "##" + word[start:end]
                if sub in vocab:
                    pieces.append(int(vocab[sub]))
                    break
                end -= 1
            if start == end:
                out.append(self.unk)
                return
            start = end
        out.extend(pieces)

    def tokenize(self, text: str) -> list[int]:
        ids: list[int] = []
        for tok in _basic_tokens(text, self.lower):
            if len(tok) == 1 and _is_cjk(tok):
                ids.append(int(self.vocab.get(tok, self.unk)))
            else:
                self.wordpiece(tok, ids)
        return ids

    def encode(self, c: Call, text: str, pair: str, split: bool, max_len: int,
               pad: bool) -> tuple[list[int], list[int]] | None:
        """(ids, segment ids), or None where Paddle's Encode fails (no tokens)."""
        if not split:
            ids = self.tokenize(text)
            if not ids:
                return None
            pair_ids = self.tokenize(pair) if pair else []
            if pair and not pair_ids:
                return None
        else:
            ids = [int(self.vocab.get(ch, self.unk)) for ch in text]
            pair_ids = []
        total = len(ids) + len(pair_ids) + (3 if pair_ids else 2)
        if max_len > 0 and total > max_len:
            remove = total - max_len
            if remove > len(ids) + len(pair_ids):
                raise ExecutionError(f"op {c.op_type}: max_seq_len {max_len} cannot hold the special tokens "
                                     f"around {text!r} (Paddle's kernel has no defined result for it)")
            for _ in range(remove):
                if not pair_ids or len(ids) > len(pair_ids):
                    ids.pop()
                else:
                    pair_ids.pop()
        if pair_ids:
            seq = [self.cls, *ids, self.sep, *pair_ids, self.sep]
            seg = [0] * (len(ids) + 2) + [1] * (len(pair_ids) + 1)
        else:
            seq, seg = [self.cls, *ids, self.sep], [0] * (len(ids) + 2)
        if pad and max_len > 0 and len(seq) < max_len:
            fill = [self.pad] * (max_len - len(seq))
            seq, seg = seq + fill, seg + fill
        return seq, seg


def _memset_fill(pad_id: int) -> np.int64:
    """What memset(pad_id) writes into an int64: the id's low byte in all eight bytes."""
    return np.full(8, pad_id & 0xFF, dtype=np.uint8).view(np.int64)[0]


def _faster_tokenizer(c: Call):
    vocab = as_vocab(c.x("Vocab"), f"op {c.op_type}: Vocab")
    texts = as_strings(c.x("Text"), f"op {c.op_type}: Text")
    pairs = as_strings(c.x("TextPair"), f"op {c.op_type}: TextPair") if c.has("TextPair") else None
    if pairs is not None and len(pairs) != len(texts):
        raise ExecutionError(f"op {c.op_type}: TextPair has {len(pairs)} strings, Text {len(texts)}; they must "
                             "pair up one to one")
    max_len = int(c.attr("max_seq_len", 0))
    if max_len < 0:
        raise c.unsupported("max_seq_len", max_len, "a negative length")
    split, pad = bool(c.attr("is_split_into_words", False)), bool(c.attr("pad_to_max_seq_len", False))
    bert = _Bert(c, vocab, bool(c.attr("do_lower_case", False)))
    rows = []
    for i, text in enumerate(texts):
        pair = pairs[i] if pairs else ""
        enc = bert.encode(c, text, pair, split, max_len, pad)
        if enc is None:
            enc = ([bert.cls, bert.sep, bert.cls], [0, 0, 1]) if pairs else ([bert.cls, bert.sep], [0, 0])
        rows.append(enc)
    width = max((len(s) for s, _ in rows), default=0)
    ids = np.full((len(rows), width), _memset_fill(bert.pad), dtype=np.int64)
    seg = ids.copy()
    for i, (s, g) in enumerate(rows):
        ids[i, :len(s)] = s
        seg[i, :len(g)] = g
    return {"InputIds": ids, "SegmentIds": seg}


register(paddle_opdef("faster_tokenizer", _faster_tokenizer,
                      attrs_handled=("do_lower_case", "is_split_into_words", "max_seq_len", "pad_to_max_seq_len"),
                      doc="BERT tokenizer (basic + WordPiece) of Text (and TextPair) over Vocab: ids, segment ids"))
