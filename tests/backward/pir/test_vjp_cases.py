"""Every recorded PIR VJP rule, in every recorded variant, through pybackward's PIR pass,
against Paddle 3.3.1's pass on the same one-op program (testdata/pir_vjp/cases/, written by
testdata/pir_vjp/gen_vjp_cases.py).

Per case: load Paddle's forward program (the variant's stop_gradient flags are in it),
run `calc_gradient(outputs, inputs)` with the manifest's value ids, write the program and
read it back, and compare canonically with Paddle's program after its own call. Where
Paddle refused the call, pybackward must refuse too. Parametrized by op, so a failure
names the op (and lists its variants that differ, with the diff)."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

from pybackward.backward.pir.api import calc_gradient
from pybackward.base.errors import PyBackwardError
from pybackward.pir import codec
from pybackward.pir.canonical import diff, equal

CASES = Path(__file__).resolve().parents[3] / "testdata" / "pir_vjp" / "cases"
MANIFEST = CASES / "manifest.json"


@lru_cache(maxsize=1)
def manifest() -> dict:
    return json.loads(MANIFEST.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def by_op() -> dict[str, list[dict]]:
    """op -> its cases, in manifest order."""
    out: dict[str, list[dict]] = {}
    for c in manifest()["cases"]:
        out.setdefault(c["op"], []).append(c)
    return out


@lru_cache(maxsize=4)
def programs(file: str) -> tuple[bytes, ...]:
    return tuple((CASES / file).read_bytes().splitlines())


def run_case(case: dict) -> str | None:
    """None when pybackward's program equals Paddle's (or both refuse), else why not."""
    lines = programs(case["file"])
    prog = codec.loads(lines[case["forward"]], f"{case['file']}:{case['forward'] + 1}")
    try:
        calc_gradient(case["outputs"], case["inputs"], program=prog)
    except PyBackwardError as e:
        if case["error"] is not None:
            return None
        return f"pybackward refuses ({type(e).__name__}: {e}); Paddle does not"
    if case["error"] is not None:
        return f"Paddle refuses ({case['error']}); pybackward does not"
    got = codec.loads(codec.dumps(prog))
    want = codec.loads(lines[case["backward"]], f"{case['file']}:{case['backward'] + 1}")
    if equal(got, want):
        return None
    return "\n".join(diff(got, want, names=("pybackward", "paddle"))[:60])


def _params():
    for op, cases in by_op().items():
        if all(c["file"] is None for c in cases):
            continue  # Paddle's process died on every variant: nothing to compare
        yield pytest.param(op, id=op.replace("pd_op.", ""))


@pytest.mark.parametrize("op", list(_params()))
def test_vjp_rule_equals_paddles_pass(op):
    bad = []
    for case in by_op()[op]:
        if case["file"] is None:
            continue
        why = run_case(case)
        if why is not None:
            bad.append(f"--- {op} [{case['variant']}]\n{why}")
    assert not bad, "\n".join(bad)


def test_manifest_covers_every_recorded_rule():
    from pybackward.pir.vjp_rules import rule_names
    assert set(by_op()) == set(rule_names())
    m = manifest()
    assert m["counts"]["cases"] == len(m["cases"])


def test_a_difference_is_caught():
    """The comparison can fail: matmul's default run against Paddle's program for x stopped."""
    cases = {c["variant"]: c for c in by_op()["pd_op.matmul"]}
    wrong = dict(cases["default"], backward=cases["stop:in0"]["backward"])
    why = run_case(wrong)
    assert why is not None and "matmul_grad" in why
    assert run_case(dict(cases["default"], error="refused")) is not None
