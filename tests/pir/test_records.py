"""`pir.records`: what @dataclass gave the VJP rule table's and the summary's records, without
compiling methods when their modules are imported (issue #37 item 5: ~0.9 ms a class, ~6% of
`pybackward append`'s start-up on a PIR program)."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pybackward.pir.records import FrozenInstanceError, FrozenRecord, Record, as_plain, replace, set_fields
from pybackward.pir.summary import PirSummary, ValueInfo
from pybackward.pir.vjp_rules import EmittedOp, Source

ROOT = Path(__file__).resolve().parents[2]


class Point(FrozenRecord):
    _fields = ("x", "y", "tags")

    def __init__(self, x: int, y: int = 0, tags: tuple = ()) -> None:
        set_fields(self, x=x, y=y, tags=tags)


@dataclasses.dataclass(frozen=True)
class DPoint:
    x: int
    y: int = 0
    tags: tuple = ()


class Box(Record):
    _fields = ("items", "meta")

    def __init__(self, items: list, meta: dict) -> None:
        set_fields(self, items=items, meta=meta)


@dataclasses.dataclass
class DBox:
    items: list
    meta: dict


def test_frozen_record_behaves_as_a_frozen_dataclass():
    p, d = Point(1, 2, ("a",)), DPoint(1, 2, ("a",))
    assert repr(p) == repr(d).replace("DPoint", "Point")
    assert hash(p) == hash(d) and p == Point(1, 2, ("a",)) and p != Point(1, 3, ("a",))
    assert (p == d) is False and p.__eq__(d) is NotImplemented       # another class: not equal
    with pytest.raises(FrozenInstanceError):
        p.x = 5
    with pytest.raises(AttributeError):                                # as dataclasses.FrozenInstanceError
        del p.y
    assert replace(p, y=7) == Point(1, 7, ("a",)) and p.y == 2
    with pytest.raises(TypeError):
        replace(p, z=1)
    assert {p: 1}[Point(1, 2, ("a",))] == 1


def test_mutable_record_behaves_as_a_dataclass():
    b, d = Box([Point(1), [2]], {"k": (3,)}), DBox([DPoint(1), [2]], {"k": (3,)})
    with pytest.raises(TypeError):
        hash(b)
    b.items = [1]
    assert b == Box([1], {"k": (3,)}) and repr(b) == "Box(items=[1], meta={'k': (3,)})"
    b = Box([Point(1), [2]], {"k": (3,)})
    assert as_plain(b) == dataclasses.asdict(d)
    plain = as_plain(b)
    plain["items"][1].append(9)
    assert b.items[1] == [2]                                           # copied, as asdict copies


def test_the_records_of_the_rule_table_and_the_summary():
    s = Source("op", 1, 2)
    assert (s.kind, s.index, s.elem) == ("op", 1, 2) and str(s) == "op1.2" and Source.parse("op1.2") == s
    assert repr(Source("in", 0)) == "Source(kind='in', index=0, elem=None)"
    e = EmittedOp("pd_op.x_grad", (s, None), {}, (s,))
    assert (e.stop_gradient, e.regions) == (None, 0)
    assert e.with_null_results([0]).results == (None,) and e.results == (s,)
    v = ValueInfo("x", [2, 3], "float32")
    summary = PirSummary("f.json", 4, 3, 3, [v], [], 0, 0, 0, [], [v], 0)
    assert summary.op_types == {} and json.dumps(summary.to_json())
    assert summary.to_json()["feeds"] == [{"name": "x", "shape": [2, 3], "dtype": "float32"}]


def test_the_pir_pass_and_reader_compile_no_dataclass_at_import():
    """The guard: importing the PIR package and pass (what `append` on a .json does) makes no
    dataclass, so the `dataclasses` module is not even imported."""
    code = ("import sys, pybackward.pir, pybackward.backward.pir.api, pybackward.pir.vjp_rules, "
            "pybackward.pir.summary\nprint('dataclasses' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
