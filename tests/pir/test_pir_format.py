"""PIR files against Paddle's own: reading, writing back, printing, upgrading, sniffing.

The goldens in testdata/pir/ were written by Paddle 3.3.1 (testdata/pir/gen_pir.py):
each program as Paddle saved it, Paddle's print of it, Paddle's re-save of it
(kept where it differs: Paddle's JSON is not canonical), readable variants,
and files turned back into format versions 1-3 with Paddle's re-save after
loading them. None of the expected bytes or text comes from pybackward.
"""
from __future__ import annotations

import json

import pytest

from conftest import PROGRAMS, TESTDATA
from pybackward import pir

PIR = TESTDATA / "pir"
MANIFEST = json.loads((PIR / "manifest.json").read_text())
CASES = sorted(MANIFEST["cases"])
VERSIONS = sorted(MANIFEST["versions"])
READABLE = [c for c in CASES if MANIFEST["cases"][c]["readable"]]
UNSTABLE = [c for c in CASES if MANIFEST["cases"][c]["byte_stable"] is False]


@pytest.fixture(scope="module")
def programs() -> dict[str, pir.Program]:
    return {c: pir.load(PIR / f"{c}.json") for c in CASES}


def test_goldens_are_paddle_331():
    assert MANIFEST["paddle"] == "3.3.1"
    assert {"mlp", "mlp_bwd", "cnn", "cnn_bwd", "transformer", "transformer_bwd", "cond", "cond_bwd", "while",
            "while_bwd", "cond_in_while", "cond_in_while_bwd", "cnn_infer", "jit"} <= set(CASES)
    assert {1, 2, 3} == {v["version"] for v in MANIFEST["versions"].values()}
    assert READABLE and UNSTABLE


@pytest.mark.parametrize("case", CASES)
def test_reads(case, programs):
    prog = programs[case]
    assert prog.num_ops() == MANIFEST["cases"][case]["ops"]
    assert prog.file_version == 4
    assert prog.source == str(PIR / f"{case}.json")


@pytest.mark.parametrize("case", CASES)
def test_writes_paddle_bytes(case, programs):
    """Written back, a file is byte for byte the file Paddle wrote."""
    assert pir.dumps(programs[case]) == (PIR / f"{case}.json").read_bytes()


@pytest.mark.parametrize("case", READABLE)
def test_writes_paddle_readable_bytes(case, programs):
    """readable=True gives Paddle's serialize_pir_program(readable=True) bytes (indent 4)."""
    assert pir.dumps(programs[case], readable=True) == (PIR / f"{case}.readable.json").read_bytes()
    assert pir.equal(pir.load(PIR / f"{case}.readable.json"), programs[case])


@pytest.mark.parametrize("case", [c for c in CASES if MANIFEST["cases"][c]["byte_stable"] is not None])
def test_paddle_resave(case, programs):
    """Where Paddle's own re-save changes bytes (an unordered attribute map), it is still
    the same program canonically; where it does not, our bytes are its bytes."""
    resave = PIR / f"{case}.resave.json"
    if MANIFEST["cases"][case]["byte_stable"]:
        assert not resave.exists()
        return
    assert resave.read_bytes() != (PIR / f"{case}.json").read_bytes()
    other = pir.load(resave)
    assert pir.equal(programs[case], other), "\n".join(pir.diff(programs[case], other))
    assert pir.dumps(other) == resave.read_bytes()


@pytest.mark.parametrize("case", CASES)
def test_text_is_paddles_print(case, programs):
    """to_text is Paddle's print(program) of the program it read from the file."""
    assert pir.to_text(programs[case]) == (PIR / f"{case}.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", VERSIONS)
def test_upgrades_like_paddle(name):
    """A version 1-3 file reads as version 4: what Paddle 3.3.1 writes after loading it."""
    spec = MANIFEST["versions"][name]
    old = pir.load(PIR / f"{name}.json")
    assert old.file_version == spec["version"]
    expected = PIR / f"{name}.upgraded.json"
    paddle = pir.load(expected)
    assert pir.equal(old, paddle), "\n".join(pir.diff(old, paddle))
    assert pir.dumps(old) == expected.read_bytes()
    raw = json.loads((PIR / f"{name}.json").read_text())
    assert raw["base_code"]["version"] == spec["version"]
    assert json.loads(pir.dumps(old))["base_code"]["version"] == 4


def test_upgrade_changes_what_the_patches_say():
    old = json.loads((PIR / "v1_bare_ops.json").read_text())
    ops = old["program"]["regions"][0]["blocks"][0]["ops"]
    assert ops[0]["A"][0]["AT"]["D"][0]["#"] == "0.a_i32"          # lp_pool2d strides, v1 form
    new = pir.load(PIR / "v1_bare_ops.json")
    lp = new.ops[0]
    assert lp.name == "pd_op.lp_pool2d"
    assert [a.tag for a in lp.attrs["strides"].value] == ["0.a_i64", "0.a_i64"]
    permute = next(op for op in new.ops if op.name == "pd_op.moe_permute")
    assert permute.attr("override_buffer_size") == -1 and permute.attrs["override_buffer_size"].tag == "0.a_i32"


def test_version_4_is_not_patched():
    """Patch set 4 turns a_f32 into a_f64, but only for older files."""
    data = (PIR / "v3_zoo.json").read_bytes().replace(b'"version":3', b'"version":4', 1)
    prog = pir.loads(data)
    relu = next(op for op in prog.walk() if op.name == "pd_op.leaky_relu")
    assert relu.attrs["negative_slope"].tag == "0.a_f32"


def test_roundtrip_is_idempotent(programs):
    for case, prog in programs.items():
        again = pir.loads(pir.dumps(prog))
        assert pir.equal(prog, again), case
        assert pir.to_text(again) == pir.to_text(prog)


def test_nan_file():
    """Paddle writes a NaN constant as "VD": "NaN" (and then cannot read it); it round-trips here."""
    data = (PIR / "nan.json").read_bytes()
    assert b'"VD":"NaN"' in data
    prog = pir.loads(data)
    full = next(op for op in prog.walk() if op.attrs.get("value") and op.attrs["value"].vd)
    assert full.attrs["value"].value != full.attrs["value"].value
    assert pir.dumps(prog) == data
    assert pir.to_text(prog) == (PIR / "nan.txt").read_text(encoding="utf-8")


# --------------------------------------------------------------------------
# sniffing
# --------------------------------------------------------------------------
def test_sniff_recognises_every_golden():
    files = sorted(PIR.glob("*.json"))
    assert len(files) > 30
    for f in files:
        if f.name != "manifest.json":
            assert pir.is_pir_bytes(f.read_bytes()), f.name


def test_sniff_rejects_legacy_and_other_files():
    legacy = sorted(PROGRAMS.glob("*/*.pb"))[:40] + sorted(PROGRAMS.glob("*/*.pbtxt"))[:10]
    assert legacy
    for f in legacy:
        assert not pir.is_pir_bytes(f.read_bytes()), f
    for data in (b"", b"{}", b"[]", b'{"base_code": {"magic": "pil"}}', (PIR / "manifest.json").read_bytes(),
                 b"\x0a\x0b" + bytes(range(256)), b'{"program": {}}'):
        assert not pir.is_pir_bytes(data)


def test_sniff_finds_base_code_at_the_end():
    """A writer that sorts no keys may put base_code last; the tail is looked at too."""
    obj = json.loads((PIR / "mlp.json").read_text())
    moved = json.dumps({"program": obj["program"], "base_code": obj["base_code"]}, indent=2).encode()
    assert pir.is_pir_bytes(moved)
    assert pir.equal(pir.loads(moved), pir.load(PIR / "mlp.json"))


def test_sniff_is_cheap_on_big_data():
    big = b'{"base_code":{"magic":"pir","version":4},"program":' + b" " * (50 << 20) + b"}"
    assert pir.is_pir_bytes(big)
    assert not pir.is_pir_bytes(b" " * (50 << 20))
