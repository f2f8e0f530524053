"""`pir.dumps` joins the compact file from texts (issue #37: the 3,000-layer MLP's write was
~0.6 s building a JSON object per op and attribute for json.dumps). Its bytes must be json.dumps'
of `program_json`, the object it no longer builds: `writer.dumps_via_json` makes them that way.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from pybackward import pir
from pybackward.base.errors import PyBackwardError, ProgramFileError
from pybackward.pir import writer
from pybackward.pir.model import Operation
from pybackward.pir.types import Attr, dense

ROOT = Path(__file__).resolve().parents[2]
PIR_FILES = sorted(p for d in ("pir", "pir_backward", "pir_vjp", "pir_values", "pir_opmap")
                   for p in (ROOT / "testdata" / d).rglob("*.json"))


def _programs():
    for path in PIR_FILES:
        try:
            yield path, pir.load(path, max_depth=400, allow_unknown_ops=True)
        except (PyBackwardError, ValueError):
            continue            # not a program (a manifest, a table), or a bad input on purpose


def test_every_program_of_testdata_is_written_as_json_dumps_writes_it():
    n = 0
    for path, prog in _programs():
        assert pir.dumps(prog) == writer.dumps_via_json(prog), path
        n += 1
    assert n >= 100, n          # the corpus is there: control flow, parameters, dist attrs, every version


def _full(value: Attr, name: str = "pd_op.full") -> pir.Program:
    prog = pir.Program()
    prog.block.append(Operation(name, [], [dense("float32", (1,))],
                                {"shape": Attr.int_array([1]), "value": value, "dtype": Attr.dtype("float32"),
                                 "place": Attr.place(1),
                                 "n\u00e4me \"quoted\"\n": Attr.str_("caf\u00e9 \u2028 \\ \x01")},
                                {"stop_gradient": Attr.bools([True])}))
    return prog


@pytest.mark.parametrize("value", [Attr.f64(1e15), Attr.f64(-1234567890123456.8), Attr.f32(0.1), Attr.f64(0.1),
                                   Attr.f64(math.inf), Attr.f64(math.nan), Attr.f64(-0.0), Attr.i64(-(1 << 62)),
                                   Attr.array([Attr.f64(0.1), Attr.f64(1e16), Attr.f32(2.5)]),
                                   Attr("1.a_scalar", ("float64", 1e15)), Attr.str_("\u00e9\x7f")])
def test_attribute_values_names_and_strings(value):
    """Floats Paddle spells differently (markers swapped after), VD, escapes, non-ASCII, result attrs."""
    prog = _full(value)
    assert pir.dumps(prog) == writer.dumps_via_json(prog)
    assert pir.loads(pir.dumps(prog), allow_unknown_ops=True) is not None


def test_shared_attributes_and_types_are_written_each_time():
    """The texts are kept per Attr object and name: one Attr under two names, and many ops sharing it."""
    prog = pir.Program()
    a = Attr.f64(0.30000000000000004)
    for k in range(5):
        prog.block.append(Operation("pd_op.full", [], [dense("float32", (k + 1,))],
                                    {"value": a, "other": a, "shape": Attr.int_array([k + 1]),
                                     "dtype": Attr.dtype("float32"), "place": Attr.place(1)}))
    data = pir.dumps(prog)
    assert data == writer.dumps_via_json(prog) and data.count(b"0.30000000000000004") == 10


def test_a_non_finite_float_without_vd_is_refused_the_same_way():
    prog = _full(Attr("0.a_f64", math.inf))
    with pytest.raises(ProgramFileError) as fast:
        pir.dumps(prog)
    with pytest.raises(ProgramFileError) as slow:
        writer.dumps_via_json(prog)
    assert str(fast.value) == str(slow.value) and "VD" in str(fast.value)


def test_a_lone_surrogate_is_refused():
    prog = _full(Attr.str_("\ud800"))
    with pytest.raises(ProgramFileError, match="surrogate"):
        pir.dumps(prog)
