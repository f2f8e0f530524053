"""The PIR bad-input corpus (tests/bad_inputs/pir/): every case fails cleanly.

Each file must make `pybackward.pir.load` raise ProgramFileError with one
line (no newline, no traceback needed to understand it) that names the file
and, where the case is about an op, the op's index in file order and its name
and the value id involved (the case's `fragments`). The corpus is exactly
what make_corpus.py writes (regenerate with `python tests/bad_inputs/pir/make_corpus.py`).
"""
from __future__ import annotations

import importlib.util
import json
import sys
import tracemalloc
from pathlib import Path

import pytest

from pybackward.base.errors import ProgramFileError
from pybackward import pir

CORPUS = Path(__file__).resolve().parent.parent / "bad_inputs" / "pir"
CASES = json.loads((CORPUS / "cases.json").read_text(encoding="utf-8"))["cases"]


def _corpus_module():
    spec = importlib.util.spec_from_file_location("pir_make_corpus", CORPUS / "make_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


MAKE = _corpus_module()


def test_corpus_is_reproducible():
    files, cases = MAKE.build()
    stale = "the PIR corpus is stale: run python tests/bad_inputs/pir/make_corpus.py"
    assert cases == CASES, stale
    for name, data in files.items():
        assert (CORPUS / name).read_bytes() == data, f"{name}: {stale}"
    assert len(CASES) >= 25


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bad_input(case, tmp_path):
    if "generated" in case:
        path = MAKE.generated(case["generated"], tmp_path)
    else:
        path = CORPUS / case["file"]
    before = path.stat().st_size
    with pytest.raises(ProgramFileError) as info:
        pir.load(path, **case.get("load", {}))
    msg = str(info.value)
    assert "\n" not in msg, msg
    for frag in case["fragments"]:
        assert frag.replace("{file}", str(path)) in msg, f"{frag!r} not in {msg!r}"
    assert path.stat().st_size == before


def test_nesting_bomb_is_cheap(tmp_path):
    """100,000 nested regions: refused without a RecursionError and without building anything."""
    path = MAKE.generated("nesting_bomb", tmp_path)
    limit = sys.getrecursionlimit()
    with pytest.raises(ProgramFileError):
        pir.load(path)
    assert sys.getrecursionlimit() == limit


def test_deep_but_allowed_nesting(tmp_path):
    """150 nested ifs read with max_depth=200: no recursion limit is hit reading, writing or printing."""
    path = tmp_path / "deep.json"
    path.write_bytes(MAKE.nested_ifs(150))
    prog = pir.load(path, max_depth=200)
    assert prog.num_ops() == 1 + 150 * 3         # data, then an if and two yields a level
    assert pir.dumps(prog) == pir.dumps(pir.loads(pir.dumps(prog), max_depth=200))
    assert pir.to_text(prog).count("} else {") == 150
    assert len(pir.canonical(prog)) > 300


def test_huge_file_is_not_read(tmp_path):
    """A 300 MB file is refused from its size: memory stays small."""
    path = MAKE.generated("huge_file", tmp_path)
    tracemalloc.start()
    try:
        with pytest.raises(ProgramFileError, match="past the limit"):
            pir.load(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10 << 20


def test_bytes_limit_for_loads():
    with pytest.raises(ProgramFileError, match="past the limit of 10"):
        pir.loads(b'{"base_code": {"magic": "pir", "version": 4}}', max_bytes=10)


def test_unknown_ops_allowed_on_request():
    data = (CORPUS / "custom_op.json").read_bytes()
    prog = pir.loads(data, "custom", allow_unknown_ops=True)
    assert any(op.name == "custom_op.my_relu" for op in prog.walk())
    assert pir.dumps(prog) == data.replace(b" ", b"") or pir.loads(pir.dumps(prog), allow_unknown_ops=True)


def test_not_bytes():
    with pytest.raises(ProgramFileError, match="bytes, not str"):
        pir.loads("{}")  # type: ignore[arg-type]


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(ProgramFileError, match="no such file"):
        pir.load(tmp_path / "nope.json")
    with pytest.raises(ProgramFileError, match="directory"):
        pir.load(tmp_path)
