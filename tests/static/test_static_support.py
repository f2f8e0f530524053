"""Helpers for the `pybackward.static` tests (no tests here).

The builders live in `testdata/gen_static.py`: each is a function of
`(paddle, static, F)`. The generator ran them with Paddle 3.3.1 and stored
what Paddle built under `testdata/static/<case>/`; here they run with
pybackward's namespaces, so both sides run literally the same code.
"""
from __future__ import annotations

import importlib.util
import json
import types
from pathlib import Path

from pybackward import static
from pybackward._proto import framework_pb2 as pb

ROOT = Path(__file__).resolve().parents[2]
STATIC_DATA = ROOT / "testdata" / "static"
GEN_PATH = ROOT / "testdata" / "gen_static.py"


def load_gen():
    spec = importlib.util.spec_from_file_location("gen_static", GEN_PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = load_gen()

#: `paddle` as the builders use it: pybackward.static plays both `paddle`
#: (tensor functions, ParamAttr, nn.initializer) and `paddle.static`.
PADDLE = types.SimpleNamespace(**{k: getattr(static, k) for k in dir(static)
                                  if not k.startswith("__")})
PADDLE.static = static
F = static.nn.functional


def case_names() -> list[str]:
    return [b.__name__ for b in GEN.CASES]


def case_meta(case: str) -> dict:
    return json.loads((STATIC_DATA / case / "case.json").read_text())


def build(case: str):
    """(main, startup, info) built by pybackward from the case's builder,
    exactly as the generator built Paddle's (fresh programs, seeds 2024)."""
    builder = getattr(GEN, case)
    main, startup = static.Program(), static.Program()
    main.random_seed = GEN.SEED
    startup.random_seed = GEN.SEED
    with static.unique_name.guard(), static.program_guard(main, startup):
        info = builder(PADDLE, static, F)
    return main, startup, info


def read_desc(path: Path) -> pb.ProgramDesc:
    d = pb.ProgramDesc()
    d.ParseFromString(path.read_bytes())
    return d


def strip_callstack(desc: pb.ProgramDesc) -> pb.ProgramDesc:
    """A copy without op_callstack contents (Paddle records the Python stack
    that created each op; the builder leaves the attr empty)."""
    d = pb.ProgramDesc()
    d.CopyFrom(desc)
    for b in d.blocks:
        for op in b.ops:
            for a in op.attrs:
                if a.name == "op_callstack":
                    del a.strings[:]
    return d


def golden(case: str, name: str) -> pb.ProgramDesc:
    return strip_callstack(read_desc(STATIC_DATA / case / name))


def diff_descs(ours: pb.ProgramDesc, gold: pb.ProgramDesc) -> list[str]:
    """Readable differences between two ProgramDescs ([] when equal)."""
    from google.protobuf import text_format
    if ours == gold:
        return []
    out = []
    if ours.version != gold.version or ours.op_version_map != gold.op_version_map:
        out.append("version / op_version_map differ")
    for bo, bg in zip(ours.blocks, gold.blocks):
        vo = {v.name: v for v in bo.vars}
        vg = {v.name: v for v in bg.vars}
        for n in sorted(set(vo) | set(vg)):
            if vo.get(n) != vg.get(n):
                out.append(f"var {n}: ours {text_format.MessageToString(vo[n], as_one_line=True) if n in vo else None}"
                           f" | paddle {text_format.MessageToString(vg[n], as_one_line=True) if n in vg else None}")
        if [v.name for v in bo.vars] != [v.name for v in bg.vars] and not out:
            out.append("var order differs")
        for i, (oo, og) in enumerate(zip(bo.ops, bg.ops)):
            if oo != og:
                out.append(f"op {i} {og.type}: ours {text_format.MessageToString(oo, as_one_line=True)}"
                           f"\n   paddle {text_format.MessageToString(og, as_one_line=True)}")
        if len(bo.ops) != len(bg.ops):
            out.append(f"op count: ours {len(bo.ops)}, paddle {len(bg.ops)}")
    if len(ours.blocks) != len(gold.blocks):
        out.append(f"block count: ours {len(ours.blocks)}, paddle {len(gold.blocks)}")
    return out or ["descs differ (field order?)"]
