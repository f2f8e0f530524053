"""read_file and faster_tokenizer (ops/io/read_file_and_tokenizer.py) against the values Paddle 3.3.1's CPU kernels gave
(testdata/kernels/io_ops.ref.json, written by testdata/kernels/probe_k4-io.py)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import pybackward
from pybackward.base.dtypes import VarType
from pybackward.base.errors import ExecutionError
from pybackward.interpreter.executor import Executor, Scope
from pybackward.ops import opcheck
from conftest import TESTDATA

REF = json.loads((TESTDATA / "kernels" / "io_ops.ref.json").read_text())
CASES = REF["tokenizer_cases"]
FILES = TESTDATA / "file_ops" / "io_ops"
TOKENIZER_OUT = {"InputIds": ["ids"], "SegmentIds": ["seg"]}


def _tokenize(vocab, text, pair=None, **attrs):
    ins = {"Vocab": [vocab], "Text": [text]}
    if pair is not None:
        ins["TextPair"] = [pair]
    out = opcheck.run_kernel("faster_tokenizer", ins, attrs, TOKENIZER_OUT)
    return out["InputIds"][0], out["SegmentIds"][0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_faster_tokenizer_equals_paddle(case):
    spec, want = CASES[case], REF["faster_tokenizer|" + case]
    assert want["runs"], want
    ids, seg = _tokenize(want["vocab"], spec["text"], spec.get("pair"), **spec["attrs"])
    for got, values, shape in zip((ids, seg), want["values"], want["shapes"]):
        assert got.dtype == np.int64 and list(got.shape) == shape
        np.testing.assert_array_equal(got, np.asarray(values, dtype=np.int64).reshape(shape))


def _tokenizer_program(with_pair=False):
    prog = pybackward.Program()
    b = prog.global_block()
    b.create_var("vocab", type=VarType.VOCAB, persistable=True)
    ins = {"Vocab": ["vocab"], "Text": ["text"]}
    b.create_var("text", type=VarType.STRINGS)
    if with_pair:
        b.create_var("pair", type=VarType.STRINGS)
        ins["TextPair"] = ["pair"]
    for n in ("ids", "seg"):
        b.create_var(n, shape=(-1, -1), dtype="int64")
    b.append_op("faster_tokenizer", ins, {"InputIds": ["ids"], "SegmentIds": ["seg"]},
                {"do_lower_case": True, "max_seq_len": 7})
    return pybackward.loads(prog.to_bytes())


def test_faster_tokenizer_runs_in_a_program_with_vocab_in_the_scope_and_text_fed():
    want = REF["faster_tokenizer|max_len"]
    scope = Scope()
    scope.set("vocab", want["vocab"])                      # a VOCAB value: dict token -> id
    ids, seg = Executor().run(_tokenizer_program(True), feed={"text": CASES["max_len"]["text"],
                                                               "pair": CASES["max_len"]["pair"]},
                              fetch_list=["ids", "seg"], scope=scope)
    np.testing.assert_array_equal(ids, want["values"][0])
    np.testing.assert_array_equal(seg, want["values"][1])
    # the vocabulary may be fed too (a feed of a dict becomes a 0-D object array)
    ids2, = Executor().run(_tokenizer_program(True), feed={"vocab": want["vocab"], "text": CASES["max_len"]["text"],
                                                            "pair": CASES["max_len"]["pair"]},
                           fetch_list=["ids"], scope=Scope())
    np.testing.assert_array_equal(ids2, ids)


VOCAB = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "the": 5}


@pytest.mark.parametrize("vocab,text,pair,attrs,match", [
    ({"[PAD]": 0, "[CLS]": 2}, ["the"], None, {}, r"the vocabulary has no \[UNK\], \[MASK\], \[SEP\]"),
    (VOCAB, ["the", "the"], ["the"], {}, "TextPair has 1 strings, Text 2"),
    (VOCAB, ["the the"], None, {"max_seq_len": 1}, "max_seq_len 1 cannot hold the special tokens"),
    (VOCAB, ["the"], ["the"], {"max_seq_len": 2}, "max_seq_len 2 cannot hold the special tokens"),
    (VOCAB, ["the"], None, {"max_seq_len": -1}, r"attr max_seq_len=-1 is not supported"),
    (VOCAB, [3, "the"], None, {}, "Text must be a list of strings; it holds a int"),
    (VOCAB, np.zeros((2, 2)), None, {}, "Text must be a list of strings, not an array of float64"),
    (["the"], ["the"], None, {}, r"Vocab must be a vocabulary \(a dict token -> id\), not list"),
])
def test_faster_tokenizer_refuses_inputs_paddle_has_no_result_for(vocab, text, pair, attrs, match):
    with pytest.raises(ExecutionError, match=match):
        _tokenize(vocab, text, pair, **attrs)


def test_faster_tokenizer_accepts_string_arrays_and_utf8_bytes():
    ids, _ = _tokenize(VOCAB, np.array(["the x", "THE"]))
    ids_b, _ = _tokenize(VOCAB, [b"the x", "THE"])
    np.testing.assert_array_equal(ids, [[2, 5, 1, 3], [2, 1, 3, 0]])
    np.testing.assert_array_equal(ids_b, ids)


# --------------------------------------------------------------------------
# read_file
# --------------------------------------------------------------------------
def _read_program(filename):
    prog = pybackward.Program()
    b = prog.global_block()
    b.create_var("out", shape=(-1,), dtype="uint8")
    b.append_op("read_file", {}, {"Out": ["out"]}, {"filename": filename})
    return pybackward.loads(prog.to_bytes())


@pytest.mark.parametrize("name,case", [("bytes.bin", "read_file"), ("empty.bin", "read_file|empty"),
                                       ("tiny.jpg", "read_file|jpeg")])
def test_read_file_reads_the_bytes_paddle_reads(tmp_path, name, case):
    shutil.copy(FILES / name, tmp_path / name)
    want = REF[case]
    (out,) = Executor(files=tmp_path).run(_read_program(name), fetch_list=["out"], scope=Scope())
    assert out.dtype == np.uint8 and list(out.shape) == want["shapes"][0] and want["dtypes"] == ["uint8"]
    np.testing.assert_array_equal(out, np.asarray(want["values"][0], dtype=np.uint8))
    (out_abs,) = Executor(files=tmp_path).run(_read_program(str(tmp_path / name)), fetch_list=["out"],
                                              scope=Scope())
    np.testing.assert_array_equal(out_abs, out)


def test_read_file_needs_the_file_permission_and_stays_inside_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f.bin").write_bytes(b"abc")
    with pytest.raises(ExecutionError, match=r"op 0 \(read_file\): op read_file reads or writes the file "
                                             r"'f.bin': a program touches files only when allowed to"):
        Executor().run(_read_program("f.bin"), fetch_list=["out"], scope=Scope())
    (tmp_path / "d").mkdir()
    for path in ("../f.bin", str(tmp_path / "f.bin")):
        with pytest.raises(ExecutionError, match="is outside the directory the run may use"):
            Executor(files=tmp_path / "d").run(_read_program(path), fetch_list=["out"], scope=Scope())


def test_read_file_of_a_missing_file_says_so_in_one_line(tmp_path):
    # Paddle: "PreconditionNotMetError: The meta data must be valid when call the mutable data function."
    assert not REF["read_file|missing"]["runs"]
    with pytest.raises(ExecutionError, match=r"op read_file: cannot read 'nope.bin': No such file or directory$"):
        Executor(files=tmp_path).run(_read_program("nope.bin"), fetch_list=["out"], scope=Scope())
    with pytest.raises(ExecutionError, match="its filename attr is empty"):
        Executor(files=tmp_path).run(_read_program(""), fetch_list=["out"], scope=Scope())


def test_decode_jpeg_is_gpu_only_in_paddle():
    # Recorded, not implemented: Paddle 3.3.1's CPU kernel only raises (testdata/kernels/probe_k4-io.txt).
    assert REF["decode_jpeg"]["error"].startswith("UnimplementedError: DecodeJpeg op only supports GPU now.")
