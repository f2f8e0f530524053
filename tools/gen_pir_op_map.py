"""Generate `pybackward/data/pir_op_map.json`: how each legacy op type becomes a PIR op.

Paddle 3.x names most computations differently in PIR (`matmul_v2` is
`pd_op.matmul`), names their arguments differently (slot `X` is operand `x`)
and passes some legacy attributes as operands fed by `pd_op.full_int_array` /
`pd_op.full` (IntArray / Scalar "mutable attributes"). pybackward's PIR
interpreter, converter and gradient pass key their work on this table.

The facts are measured, not typed: for every legacy op type Paddle 3.3.1 knows
(`core.get_all_op_protos()`), this script builds one-op ProgramDescs and runs
Paddle's own translator on them (`paddle.pir.translate_to_pir_with_param_map`):

  min          dispensable input slots left empty, attrs at their defaults
  with:<slot>  one dispensable input slot filled (shows which operand it feeds,
               e.g. `AxisTensor` -> `axis`, and ops it switches to)
  attr:<name>  one attr changed from its default (shows which PIR attr or
               mutable operand carries it, and ops it switches to, e.g.
               `split` with `num` -> `pd_op.split_with_num`)
  inplace      the first output var is the first input var (Paddle then picks
               the in-place op, `pd_op.relu_`; shows which operand it overwrites)

and, for every op type with a grad-op maker, the grad op descs the maker
emits (`core.get_grad_op_desc`), and their own grad ops (double grads), are
translated alone the same way. Each translated program is also written with
`serialize_pir_program` to see which attrs a file holds. Names come
from the PIR ops' own signatures (`Operation.get_input_names` & co, read for
every `pd_op.*` name found in libpaddle.so) and renames from the wheel's
`paddle/incubate/autograd/phi_ops_map.py` (op_compat.yaml as Python). Nothing
of Paddle's code is copied: only names, orders, defaults.

Paddle kills the process on a few one-op programs (`select_input`,
`select_output`, `sparse_full_like`), so the probes run in worker
subprocesses that the driver restarts past a crash.

Run (about two minutes; deterministic, same output for the same Paddle):

    PYTHONHASHSEED=0 /work/main/.paddle-venv/bin/python tools/gen_pir_op_map.py

Options: `--out FILE` writes the table elsewhere; `--raw FILE` also keeps the
raw observations (JSON lines, ~9 MB), and `--from-raw FILE` rebuilds the table
from them without Paddle (same output), for work on the table's shape.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "pybackward" / "data" / "pir_op_map.json"

BATCH = 400  # jobs per worker process (a crash costs at most a restart)
#: Legacy AttrTypes the attr:<name> probes change: INT, FLOAT, INTS, FLOATS,
#: BOOLEAN, LONG, LONGS, FLOAT64S, FLOAT64.
PERTURBABLE = (0, 1, 3, 4, 6, 9, 11, 12, 15)


# --------------------------------------------------------------------------
# Worker side: runs inside a Paddle process
# --------------------------------------------------------------------------
def _worker(job_file: str, out_file: str) -> None:
    """Run the jobs in `job_file` (JSON list), one JSON line each to `out_file`."""
    os.environ.pop("FLAGS_enable_pir_api", None)
    import paddle
    from paddle.base import core
    from paddle.base.proto import framework_pb2 as fpb

    paddle.enable_static()
    jobs = json.loads(pathlib.Path(job_file).read_text())
    protos = {}
    for raw in core.get_all_op_protos():
        p = fpb.OpProto()
        p.ParseFromString(raw)
        protos[p.type] = p
    T = fpb.AttrType
    placeholder = {T.INT: 1, T.FLOAT: 1.0, T.STRING: "", T.INTS: [1], T.FLOATS: [1.0],
                   T.STRINGS: [], T.BOOLEAN: False, T.BOOLEANS: [], T.LONG: 1, T.LONGS: [1],
                   T.FLOAT64S: [], T.FLOAT64: 1.0}
    setter = {T.INT: "_set_int32_attr", T.FLOAT: "_set_float32_attr", T.STRING: "_set_str_attr",
              T.INTS: "_set_int32s_attr", T.FLOATS: "_set_float32s_attr",
              T.STRINGS: "_set_strs_attr", T.BOOLEAN: "_set_bool_attr",
              T.BOOLEANS: "_set_bools_attr", T.LONG: "_set_int64_attr",
              T.LONGS: "_set_int64s_attr", T.FLOAT64S: "_set_float64s_attr",
              T.FLOAT64: "_set_float64_attr"}
    field = {T.INT: "i", T.FLOAT: "f", T.STRING: "s", T.INTS: "ints", T.FLOATS: "floats",
             T.STRINGS: "strings", T.BOOLEAN: "b", T.BOOLEANS: "bools", T.LONG: "l",
             T.LONGS: "longs", T.FLOAT64S: "float64s", T.FLOAT64: "float64"}

    def scalar(sc):
        return {1: sc.b, 2: sc.i, 3: sc.r}.get(sc.type, [sc.c.r, sc.c.i])

    def attr_json(a):
        if a.type == T.SCALAR:
            return scalar(a.scalar)
        if a.type == T.SCALARS:
            return [scalar(sc) for sc in a.scalars]
        f = field.get(a.type)
        if f is None:
            return None
        v = getattr(a, f)
        return list(v) if f not in ("s", "i", "f", "b", "l", "float64") else v

    def legacy_json(desc) -> dict:
        m = fpb.OpDesc()
        m.ParseFromString(desc.serialize_to_string())
        return {"type": m.type,
                "inputs": {v.parameter: list(v.arguments) for v in m.inputs},
                "outputs": {v.parameter: list(v.arguments) for v in m.outputs},
                "attrs": {a.name: [a.type, attr_json(a)] for a in sorted(m.attrs, key=lambda a: a.name)
                          if a.type in field or a.type in (T.SCALAR, T.SCALARS)}}

    def fill_attrs(desc, proto) -> None:
        for _ in range(len(proto.attrs) + 1):
            try:
                desc.check_attrs()
                return
            except Exception as e:
                missing = [a for a in proto.attrs if not desc.has_attr(a.name) and a.type in setter]
                named = [a for a in missing if a.name in str(e)]
                if not (named or missing):
                    raise
                a = (named or missing)[0]
                getattr(desc, setter[a.type])(a.name, placeholder[a.type])

    def perturbed(a_type, value):
        if a_type == T.BOOLEAN:
            return not value
        if a_type in (T.INT, T.LONG):
            return value + 3 if value not in (-1,) else 2
        if a_type in (T.FLOAT, T.FLOAT64):
            return value + 0.25
        if a_type in (T.INTS, T.LONGS):
            return [v + 1 for v in value] if value else [2, 3]
        if a_type in (T.FLOATS, T.FLOAT64S):
            return [v + 0.5 for v in value] if value else [0.5, 1.5]
        return None

    def new_block():
        desc = core.ProgramDesc()
        return desc, desc.block(0)

    VT = core.VarDesc.VarType
    #: Var kinds to retry a translation with when Paddle's type check refuses
    #: float32 dense tensors: (kind name, input (type, dtype), output (type, dtype)).
    dense = (VT.DENSE_TENSOR, VT.FP32)
    kinds = [("dense", dense, dense),
             ("array_in", (VT.DENSE_TENSOR_ARRAY, VT.FP32), dense),
             ("array_out", dense, (VT.DENSE_TENSOR_ARRAY, VT.FP32)),
             ("array", (VT.DENSE_TENSOR_ARRAY, VT.FP32), (VT.DENSE_TENSOR_ARRAY, VT.FP32)),
             ("rows_in", (VT.SELECTED_ROWS, VT.FP32), dense),
             ("rows", (VT.SELECTED_ROWS, VT.FP32), (VT.SELECTED_ROWS, VT.FP32)),
             ("bool_in", (VT.DENSE_TENSOR, VT.BOOL), dense),
             ("int64_in", (VT.DENSE_TENSOR, VT.INT64), dense),
             ("coo_in", (VT.SPARSE_COO, VT.FP32), dense),
             ("coo", (VT.SPARSE_COO, VT.FP32), (VT.SPARSE_COO, VT.FP32))]

    def declare(block, name, kind=dense):
        v = block.var(name.encode())
        v.set_type(kind[0])
        v.set_dtype(kind[1])
        v.set_shape([2, 3])

    def forward_desc(t, variant, kind=kinds[0]):
        """A one-op program of type t; returns (ProgramDesc, op desc)."""
        proto = protos[t]
        desc, block = new_block()
        d = block.append_op()
        d.set_type(t)
        filled = variant[5:] if variant.startswith("with:") else None
        for s in proto.inputs:
            if s.dispensable and s.name != filled:
                d.set_input(s.name, [])
                continue
            names = [f"{s.name}.{i}" for i in range(2 if s.duplicable else 1)]
            for n in names:
                declare(block, n, kind[1])
            d.set_input(s.name, names)
        first_in = next((d.input(s.name)[0] for s in proto.inputs if d.input(s.name)), None)
        for s in proto.outputs:
            names = [f"{s.name}.out{i}" for i in range(2 if s.duplicable else 1)]
            if variant == "inplace" and first_in and s is proto.outputs[0]:
                names[0] = first_in  # the op overwrites its input: Paddle picks the x_ op
            for n in names:
                declare(block, n, kind[2])
            d.set_output(s.name, names)
        fill_attrs(d, proto)
        if variant.startswith("attr:"):
            name = variant[5:]
            m = legacy_json(d)["attrs"][name]
            new = perturbed(m[0], m[1])
            getattr(d, setter[m[0]])(name, new)
        return desc, d

    def translate_forward(t, variant) -> dict:
        """describe() of the first var kind Paddle's type checks accept."""
        first_error = None
        for kind in kinds:
            desc, d = forward_desc(t, variant, kind)
            try:
                rec = describe(desc, d)
            except Exception as e:
                if first_error is None:
                    first_error = e
                if "Type validation failed" not in str(first_error):
                    raise
                continue
            if kind is not kinds[0]:
                rec["var_kind"] = kind[0]
            return rec
        raise first_error

    def grad_descs(t, variant):
        keep, fwd = forward_desc(t, variant)  # the ProgramDesc owns the op desc
        grads, _ = core.get_grad_op_desc(fwd, set(), [])
        return keep, grads

    def grad_program(g):
        desc, block = new_block()
        d = block.append_op()
        d.copy_from(g)
        for n in list(g.input_arg_names()) + list(g.output_arg_names()):
            declare(block, n)
        return desc, d

    def describe(desc, d) -> dict:
        legacy = legacy_json(d)
        prog, vm = core.pir.translate_to_pir_with_param_map(desc)
        var_of = {}
        for name, values in vm.items():
            for v in values:
                var_of.setdefault(v.id, []).append(name)
        where = {}
        ops = []
        for i, op in enumerate(prog.global_block().ops):
            name = op.name()
            rec = {"name": name, "in": [], "out": []}
            for src in op.operands_source():
                if not src.initialized():
                    rec["in"].append(None)
                elif src.id in where:
                    rec["in"].append(where[src.id])
                else:
                    rec["in"].append({"v": sorted(var_of.get(src.id, []))})
            for j, r in enumerate(op.results()):
                where[r.id] = {"op": i, "r": j}
                rec["out"].append(sorted(var_of.get(r.id, [])))
            rec["attrs"] = {a["N"]: a["AT"] for a in json.loads(core.pir.get_attrs_map_json(op))
                            if a["N"] not in ("persistable", "stop_gradient")}
            if name.startswith("pd_op."):
                rec["attr_order"] = list(op.get_attr_names())
                if name.endswith("_"):  # {result index: operand index it overwrites}
                    rec["inplace"] = {str(k): v for k, v in
                                      sorted(core.pir.get_op_inplace_info(op).items())}
            ops.append(rec)
        saved = saved_attrs(prog)
        if saved is not None and len(saved) == len(ops):
            for rec, names in zip(ops, saved):
                rec["saved"] = names
        return {"legacy": legacy, "pir": ops}

    def saved_attrs(prog):
        """The attr names Paddle's writer puts in the file, per op (None if it fails)."""
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "p.json")
            try:
                core.serialize_pir_program(prog, path, True, False, True)
                with open(path) as f:
                    doc = json.load(f)
            except Exception:
                return None
        return [[a["N"] for a in op.get("A", []) if isinstance(a, dict)]
                for op in doc["program"]["regions"][0]["blocks"][0]["ops"]]

    def signature(names):
        ops = [{"#": "1." + n, "A": [], "I": [], "O": [], "OA": []} for n in names]
        doc = {"base_code": {"magic": "pir", "trainable": True, "version": 4},
               "program": {"regions": [{"#": "region_0", "blocks": [
                   {"#": "block_0", "args": [], "ops": ops}]}]}}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "sig.json")
            with open(path, "w") as f:
                json.dump(doc, f)
            prog = paddle.static.Program()
            core.deserialize_pir_program(path, prog, -1)
        out = {}
        for op in prog.global_block().ops:
            n = op.name()[6:]
            if not op.name().startswith("pd_op.") or n not in names:
                continue  # not registered: the loader gave it an empty name
            rec = {"vjp": bool(core.has_vjp(op)), "fwd_only": bool(core.is_forward_only(op))}
            try:
                rec.update({"in": list(op.get_input_names()), "attrs": list(op.get_attr_names()),
                            "out": list(op.get_output_names()),
                            "inter": list(op.get_output_intermediate_status())})
            except Exception:  # no OpYamlInfoInterface (if, while, ...): names unknown
                pass
            out[n] = rec
        return out

    with open(out_file, "a") as out:
        for job in jobs:
            rec = dict(job)
            try:
                if job["kind"] == "sig":
                    rec["sig"] = signature(job["names"])
                elif job["kind"] == "proto":
                    rec["protos"] = {}
                    for t in sorted(protos):
                        p = protos[t]
                        try:
                            desc, d = forward_desc(t, "min")
                            defaults = legacy_json(d)["attrs"]
                            err = None
                        except Exception as e:
                            defaults, err = {}, _one_line(e)
                        rec["protos"][t] = {
                            "inputs": [[s.name, s.duplicable, s.dispensable] for s in p.inputs],
                            "outputs": [[s.name, s.duplicable, s.intermediate] for s in p.outputs],
                            "attrs": [a.name for a in p.attrs if not a.extra],
                            "defaults": defaults, "error": err,
                            "maker": bool(core.has_grad_op_maker(t))
                            and not core.has_empty_grad_op_maker(t)}
                elif job["kind"] == "dtypes":
                    rec["dtypes"] = {}
                    for n in job["numbers"]:
                        desc, block = new_block()
                        d = block.append_op()
                        d.set_type("cast")
                        for v, slot, put in (("x", "X", d.set_input), ("o", "Out", d.set_output)):
                            declare(block, v)
                            put(slot, [v])
                        d._set_int32_attr("in_dtype", 5)
                        d._set_int32_attr("out_dtype", n)
                        try:
                            prog = core.pir.translate_to_pir(desc)
                            op = prog.global_block().ops[-1]
                            rec["dtypes"][str(n)] = next(
                                a["AT"]["D"] for a in json.loads(core.pir.get_attrs_map_json(op))
                                if a["N"] == "dtype")
                        except Exception:
                            pass
                elif job["kind"] == "fwd":
                    desc, d = forward_desc(job["op"], job["variant"])
                    rec["legacy"] = legacy_json(d)
                    if job["variant"] == "min":
                        rec["unregistered"] = list(core.pir.check_unregistered_ops(desc))
                    rec.update(translate_forward(job["op"], job["variant"]))
                elif job["kind"] == "grad":
                    rec["grads"] = []
                    keep, grads = grad_descs(job["op"], job["variant"])
                    todo = [(g, job["op"]) for g in grads]
                    if job["variant"] == "min":  # and the double grads: grad ops of grad ops
                        for g in grads:
                            if core.has_grad_op_maker(g.type()) and \
                                    not core.has_empty_grad_op_maker(g.type()):
                                try:
                                    todo += [(g2, g.type()) for g2 in
                                             core.get_grad_op_desc(g, set(), [])[0]]
                                except Exception:
                                    pass
                    for g, of in todo:
                        try:
                            rec["grads"].append(dict(describe(*grad_program(g)), of=of))
                        except Exception as e:
                            rec["grads"].append({"legacy": legacy_json(g), "of": of,
                                                 "error": _one_line(e)})
            except Exception as e:
                rec["error"] = _one_line(e)
            out.write(json.dumps(rec, sort_keys=True) + "\n")
            out.flush()


def _one_line(e: BaseException) -> str:
    """The first informative line of a Paddle exception."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith(("(InvalidArgument)", "(NotFound)", "(PreconditionNotMet)",
                          "(Unimplemented)", "(Unavailable)", "(OutOfRange)", "(Fatal)")):
            return ln[:300]
    return (lines[0] if lines else type(e).__name__)[:300]


# --------------------------------------------------------------------------
# Driver side
# --------------------------------------------------------------------------
def run_jobs(jobs: list[dict], python: str) -> list[dict]:
    """Run jobs in worker processes, restarting past a job that kills its process."""
    results: list[dict] = []
    env = dict(os.environ, PYTHONHASHSEED="0", GLOG_minloglevel="3")
    env.pop("FLAGS_enable_pir_api", None)
    pending = list(jobs)
    with tempfile.TemporaryDirectory() as tmp:
        while pending:
            batch, pending = pending[:BATCH], pending[BATCH:]
            job_file, out_file = pathlib.Path(tmp, "jobs.json"), pathlib.Path(tmp, "out.jsonl")
            while batch:
                job_file.write_text(json.dumps(batch))
                out_file.write_text("")
                r = subprocess.run([python, __file__, "--worker", str(job_file), str(out_file)],
                                   env=env, capture_output=True, text=True)
                done = [json.loads(ln) for ln in out_file.read_text().splitlines() if ln.strip()]
                results.extend(done)
                batch = batch[len(done):]
                if batch:  # the process died on batch[0]
                    tail = [ln for ln in r.stderr.splitlines() if ln.strip()][-1:] or ["?"]
                    results.append(dict(batch[0], error=f"process died (rc {r.returncode}): "
                                                        f"{tail[0][:200]}", crashed=True))
                    batch = batch[1:]
            print(f"  {len(results)} jobs done", file=sys.stderr)
    return results


def pir_candidates(paddle_dir: pathlib.Path, extra: set[str]) -> list[str]:
    """Every `pd_op.*` name libpaddle.so mentions, plus names worth trying."""
    data = (paddle_dir / "base" / "libpaddle.so").read_bytes()
    names = {m.group(1).decode() for m in re.finditer(rb"(?<![A-Za-z0-9_])pd_op\.([a-z][a-z0-9_]*)", data)}
    return sorted(names | extra)


# --------------------------------------------------------------------------
# Building the table from the observations (no Paddle needed)
# --------------------------------------------------------------------------
#: PIR attribute tags -> the type names the table uses.
ATTR_TYPES = {"0.a_bool": "bool", "0.a_i32": "int32", "0.a_i64": "int64", "0.a_f32": "float32",
              "0.a_f64": "float64", "0.a_str": "str", "1.a_dtype": "DataType",
              "1.a_place": "Place", "1.a_intarray": "IntArray", "1.a_scalar": "Scalar",
              "0.a_index": "index"}
#: op_compat's C++ element types of list attrs -> ours (to type an empty list).
YAML_LIST_TYPES = {"int[]": "int32[]", "int64_t[]": "int64[]", "float[]": "float32[]",
                   "double[]": "float64[]", "str[]": "str[]", "bool[]": "bool[]",
                   "Scalar[]": "Scalar[]"}
CONST_OPS = ("pd_op.full_int_array", "pd_op.full")
#: Legacy ops with sub-blocks: the program translator, not an op translator,
#: makes their PIR ops (reference/pir.md, section 3.3).
SUB_BLOCK_PIR = {"conditional_block": "pd_op.if", "conditional_block_infer": "pd_op.if",
                 "while": "pd_op.while", "pylayer": "pd_op.pylayer"}


def attr_type(at: dict, known: str | None = None) -> str:
    """The table's type name of a PIR attribute object ({"#": tag, "D": data});
    `known` types an empty list."""
    tag = at.get("#")
    if tag == "0.a_array":
        elems = at.get("D") or []
        if elems:
            return ATTR_TYPES.get(elems[0].get("#"), "?") + "[]"
        return known if known and known.endswith("[]") else "array"
    return ATTR_TYPES.get(tag) or known or "?"  # "NULL": a null attribute


def attr_value(at: dict):
    """The plain JSON value of a PIR attribute object."""
    if at.get("#") == "0.a_array":
        return [attr_value(e) for e in at.get("D") or []]
    if "VD" in at:
        return {"NaN": float("nan"), "INF": float("inf"), "-INF": float("-inf")}[at["VD"]]
    return at.get("D")


def same_value(a, b) -> bool:
    """Legacy and PIR attribute values equal (ints and floats compared as numbers,
    float32 rounding allowed)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return a == b


def yaml_attr_types(op_info: dict) -> dict[str, dict[str, str]]:
    """{phi op: {arg name: C++ type}} from op_compat's signature strings."""
    out: dict[str, dict[str, str]] = {}
    for op, info in op_info.items():
        args, depth, cur = [], 0, ""
        for ch in info.get("args", ""):
            depth += ch in "({[" and 1 or (-1 if ch in ")}]" else 0)
            if ch == "," and depth == 0:
                args.append(cur)
                cur = ""
            else:
                cur += ch
        args.append(cur)
        types = {}
        for a in args:
            decl = a.split("=")[0].strip().split()
            if len(decl) >= 2:
                types[decl[-1]] = " ".join(decl[:-1])
        out[op] = types
    return out


class Translation:
    """One translated one-op program: which PIR op is the legacy op's own, and
    where each of its operands and results comes from."""

    def __init__(self, rec: dict):
        self.legacy = rec["legacy"]
        self.ops = rec["pir"]
        self.in_slot = {v: s for s, vs in self.legacy["inputs"].items() for v in vs}
        self.out_slot = {v: s for s, vs in self.legacy["outputs"].items() for v in vs}
        self.consumers: dict[tuple[int, int], list[int]] = {}
        for k, op in enumerate(self.ops):
            for src in op["in"]:
                if src and "op" in src:
                    self.consumers.setdefault((src["op"], src["r"]), []).append(k)
        self.main, self.composite = self._find_main()

    def _is_input(self, i: int) -> bool:
        """An op that makes a legacy input var from nothing (data, create_array)."""
        outs = self.ops[i]["out"]
        return not self.ops[i]["in"] and bool(outs) and \
            all(vs and all(v in self.in_slot for v in vs) for vs in outs)

    def _is_const(self, i: int) -> bool:
        return self.ops[i]["name"] in CONST_OPS and not self.ops[i]["in"]

    def _is_new_array(self, i: int) -> bool:
        return self.ops[i]["name"] == "pd_op.create_array" and not self.ops[i]["in"]

    def _is_trivial_feeder(self, i: int) -> bool:
        op = self.ops[i]
        if self._is_input(i) or self._is_const(i) or self._is_new_array(i):
            return True
        return op["name"] == "builtin.combine" and all(
            s and "op" in s and self._is_trivial_feeder(s["op"]) for s in op["in"])

    def _result_vars(self, i: int, j: int) -> list[str]:
        vs = list(self.ops[i]["out"][j])
        for k in self.consumers.get((i, j), []):
            if self.ops[k]["name"] == "builtin.split":
                vs += [v for out in self.ops[k]["out"] for v in out]
        return vs

    def _find_main(self) -> tuple[int | None, list[str]]:
        ops = self.ops
        body = [i for i in range(len(ops)) if not self._is_input(i)]
        glue = ("builtin.combine", "builtin.split")
        for own in (lambda n: not n.startswith("builtin."), lambda n: n not in glue):
            producers = [i for i in body if own(ops[i]["name"]) and not self._is_new_array(i)
                         and any(v in self.out_slot for j in range(len(ops[i]["out"]))
                                 for v in self._result_vars(i, j))]
            if not producers:  # an op without outputs (assert, print, save ...)
                producers = [i for i in body if own(ops[i]["name"]) and not any(
                    self.consumers.get((i, j)) for j in range(len(ops[i]["out"])))]
            if producers:
                break
        if len(producers) == 1:
            m = producers[0]
            unpack = {k for j in range(len(ops[m]["out"])) for k in self.consumers.get((m, j), [])
                      if ops[k]["name"] == "builtin.split"}
            rest = [i for i in body if i != m and i not in unpack and not self._is_trivial_feeder(i)]
            if not rest:
                return m, []
        return None, [ops[i]["name"] for i in body]

    @property
    def pir(self) -> str:
        return self.ops[self.main]["name"] if self.main is not None else \
            "composite:" + ",".join(self.composite)

    def operand(self, k: int) -> dict:
        """Where the main op's k-th operand comes from: {"slot"}, {"const"}, {"null"} or {"via"}."""
        src = self.ops[self.main]["in"][k]
        if src is None:
            return {"null": True}
        i = src["op"]
        op = self.ops[i]
        if self._is_input(i):
            return {"slot": self.in_slot[op["out"][src["r"]][0]]}
        if self._is_const(i):
            return {"const": attr_value(op["attrs"].get("value", {})), "by": op["name"]}
        if self._is_new_array(i):
            return {"via": op["name"]}
        if op["name"] == "builtin.combine":
            parts = [self.operand_of(s) for s in op["in"]]
            slots = {p.get("slot") for p in parts}
            if len(slots) == 1 and None not in slots:
                return {"slot": slots.pop()}
            return {"combine": parts}
        return {"via": op["name"]}

    def operand_of(self, src: dict | None) -> dict:
        if src is None:
            return {"null": True}
        op = self.ops[src["op"]]
        if self._is_input(src["op"]):
            return {"slot": self.in_slot[op["out"][src["r"]][0]]}
        if self._is_const(src["op"]):
            return {"const": attr_value(op["attrs"].get("value", {})), "by": op["name"]}
        return {"via": op["name"]}

    def result_slot(self, j: int) -> str | None:
        for v in self._result_vars(self.main, j):
            if v in self.out_slot:
                return self.out_slot[v]
        return None

    def attrs(self) -> dict[str, dict]:
        return self.ops[self.main]["attrs"]


class Facts:
    """What every entry builder reads: PIR signatures, op_compat's attr types and
    renames, and the legacy dtype -> PIR DataType names."""

    def __init__(self, sigs: dict, phi: dict, dtypes: dict[str, str]):
        self.sigs, self.op_map, self.dtypes = sigs, phi["op_map"], dtypes
        self.ytypes = yaml_attr_types(phi["op_info"])

    def sig(self, pir: str) -> dict | None:
        return self.sigs.get(pir[6:]) if pir.startswith("pd_op.") else None

    def types(self, pir: str) -> dict[str, str]:
        return {a: YAML_LIST_TYPES.get(ty, ty)
                for a, ty in self.ytypes.get(pir[6:].rstrip("_"), {}).items()}

    def renames(self, legacy_type: str) -> dict[str, str]:
        """op_compat's {PIR attr or operand: legacy attr} for a legacy type."""
        return dict(self.op_map.get(legacy_type, {}).get("attrs", {}))


def _pick(preferred: str | None, changed: list[str], fallback: str | None) -> str | None:
    if preferred is not None and preferred in changed:
        return preferred
    return changed[0] if changed else fallback


def operand_row(k: int, name: str, group: list, legacy_attrs: dict, renames: dict) -> list:
    """[PIR operand name, its legacy source] for operand k of the group's main op: a
    legacy input slot, a legacy attr carried as a constant tensor (and the
    *Tensor slots that replace it), or None."""
    srcs = [(v, t.operand(k)) for v, t in group if k < len(t.ops[t.main]["in"])]
    slots = [src["slot"] for _v, src in srcs if "slot" in src]
    consts = [(v, src) for v, src in srcs if "const" in src]
    if not consts:
        if slots:
            return [name, slots[0]]
        other = next((src for _v, src in srcs if "null" not in src), None)
        return [name, other]
    base_value = consts[0][1]["const"]
    changed = [v[5:] for v, src in consts if v.startswith("attr:")
               and not same_value(src["const"], base_value)]
    legacy = renames.get(name, name)
    attr = _pick(legacy, changed, legacy if legacy in legacy_attrs else None)
    d: dict = {"attr": attr, "by": consts[0][1]["by"]}
    if slots:
        d["tensor"] = sorted(set(slots))
    if attr is None:
        d["value"] = base_value
    return [name, d]


def attr_row(a: str, group: list, legacy_attrs: dict, renames: dict, types: dict,
             fwd_attr_map: dict, dtypes: dict) -> list:
    """[PIR attr, legacy attr | None, type (, value)] for attr a of the group's main op."""
    base = group[0][1]
    at = base.attrs().get(a)
    if at is None:
        return [a, None, "?"]
    value = attr_value(at)
    changed = [v[5:] for v, t in group if v.startswith("attr:") and a in t.attrs()
               and not same_value(attr_value(t.attrs()[a]), value)]
    legacy = renames.get(a, a)
    fallback = fwd_attr_map.get(a) if fwd_attr_map.get(a) in legacy_attrs else \
        (legacy if legacy in legacy_attrs else None)
    lname = _pick(legacy, changed, fallback)
    row = [a, lname, attr_type(at, types.get(a))]
    old = legacy_attrs.get(lname, [None, None])[1]
    if row[2] == "DataType" and isinstance(old, int):
        old = dtypes.get(str(old), old)
    if lname is None or not same_value(old, value):
        row.append(value)
    return row


def op_entry(pir: str, group: list[tuple[str, Translation]], legacy_attrs: dict,
             op_attrs: list[str], renames: dict, facts: Facts, types: dict[str, str],
             fwd_attr_map: dict[str, str] | None = None) -> dict:
    """The entry of one legacy op (one variant group) -> one PIR op.

    group: (variant, translation) pairs that translated to `pir`, the base
    variant first. legacy_attrs: the legacy op's attrs in the base variant
    ({name: [AttrType, value]}); op_attrs: its computational attrs."""
    if pir.startswith("composite:"):
        return {"pir": None, "composite": pir[10:].split(",")}
    base = group[0][1]
    main = base.ops[base.main]
    sig = facts.sig(pir) or {}
    in_names = sig.get("in") or [f"#{k}" for k in range(len(main["in"]))]
    out_names = sig.get("out") or [f"#{j}" for j in range(len(main["out"]))]
    attr_names = sig.get("attrs") or main.get("attr_order") or sorted(main["attrs"])
    entry: dict = {"pir": pir}
    entry["in"] = [operand_row(k, n, group, legacy_attrs, renames) for k, n in enumerate(in_names)]
    results = []
    for j, name in enumerate(out_names):
        slots = [t.result_slot(j) for _v, t in group if j < len(t.ops[t.main]["out"])]
        results.append([name, next((s for s in slots if s), None)])
    entry["out"] = results
    produced = {s for _n, s in results}
    dropped = [s for s in base.legacy["outputs"] if s not in produced]
    if dropped:
        entry["dropped_out"] = dropped
    saved = main.get("saved")
    if saved is not None:  # what Paddle's writer puts in a file, in its order
        extra = [a for a in attr_names if a not in saved]
        attr_names = [a for a in saved if a in attr_names or a in main["attrs"]]
    else:
        extra = []
    rows = {a: attr_row(a, group, legacy_attrs, renames, types, fwd_attr_map or {}, facts.dtypes)
            for a in attr_names + extra}
    entry["attrs"] = [rows[a] for a in attr_names]
    if extra:
        entry["extra_attrs"] = [rows[a] for a in extra]
    used = {row[1] for row in rows.values()} | \
        {src["attr"] for _n, src in entry["in"] if isinstance(src, dict) and src.get("attr")}
    unused = [a for a in op_attrs if a not in used]
    if unused:
        entry["unused_attrs"] = unused
    if "vjp" in sig:
        entry["vjp"] = sig["vjp"]
    return entry


def group_translations(recs: list[dict]) -> dict[str, list[tuple[str, Translation]]]:
    """{PIR op name (or composite:...): [(variant, Translation)]}, min variant first."""
    groups: dict[str, list[tuple[str, Translation]]] = {}
    for r in sorted(recs, key=lambda r: (r["variant"] != "min", r["variant"])):
        if "error" not in r and "pir" in r:
            t = Translation(r)
            groups.setdefault(t.pir, []).append((r["variant"], t))
    return groups


def forward_entry(t: str, p: dict, fwd: list[dict], facts: Facts) -> dict | None:
    """The entry of legacy type t from its forward probes; None if none translated."""
    groups = group_translations([r for r in fwd if r["variant"] != "inplace"])
    if not groups:
        return None
    base_key = next(iter(groups))
    legacy_attrs = groups[base_key][0][1].legacy["attrs"]
    entries = {key: op_entry(key, g, g[0][1].legacy["attrs"], p["attrs"], facts.renames(t),
                             facts, facts.types(key))
               for key, g in groups.items()}
    entry = entries.pop(base_key)

    def when(variants: list[str]) -> dict:
        """The probes that gave this PIR op: with:<slot> (a slot filled) and
        attr:<name> (an attr away from the base value), as {"with", "attr_not"}."""
        w: dict = {}
        for v in variants:
            if v.startswith("with:"):
                w.setdefault("with", []).append(v[5:])
            elif v.startswith("attr:"):
                w.setdefault("attr_not", {})[v[5:]] = legacy_attrs[v[5:]][1]
        return w

    if groups[base_key][0][0] != "min":
        entry["when"] = when([v for v, _ in groups[base_key]])
    for key, e in entries.items():
        e["when"] = when([v for v, _ in groups[key]])
    if entries:
        entry["alt"] = list(entries.values())
    pir = entry.get("pir") or ""
    inplace_sig = facts.sig(pir + "_") if pir.startswith("pd_op.") else None
    sig = facts.sig(pir) or {}
    if inplace_sig and not pir.endswith("_") and \
            [inplace_sig.get(k) for k in ("in", "out")] == [sig.get(k) for k in ("in", "out")]:
        entry["inplace"] = pir + "_"  # same operands and results: the same map applies
    inplace_op = entry.get("inplace") or (pir if pir.endswith("_") else None)
    for r in fwd:
        if inplace_op and "error" not in r and r["variant"] in ("inplace", "min"):
            tr = Translation(r)
            main = tr.ops[tr.main] if tr.main is not None else {}
            if main.get("name") == inplace_op and main.get("inplace") is not None:
                sig = facts.sig(inplace_op) or {}
                ins, outs = sig.get("in", []), sig.get("out", [])
                entry["inplace_map"] = [[ins[i], outs[int(o)]] for o, i in main["inplace"].items()
                                        if i < len(ins) and int(o) < len(outs)]
                break
    kind = next((r["var_kind"] for r in fwd if r.get("var_kind") and "error" not in r), None)
    if kind:
        entry["var_kind"] = kind
    return entry


def grad_entries(t: str, protos: dict, entry: dict, grad_recs: list[dict], facts: Facts,
                 grad_ops: dict) -> None:
    """Add to grad_ops the legacy grad op types t's maker emits; list them in entry."""
    p = protos[t]
    fwd_attr_map = {row[0]: row[1] for row in entry.get("attrs", []) if row[1]}
    fwd_types = {row[0]: row[2] for row in entry.get("attrs", []) if row[2] != "array"}
    by_type: dict[str, list[dict]] = {}
    of: dict[str, str] = {}
    for g in sorted(grad_recs, key=lambda r: (r["variant"] != "min", r["variant"])):
        for tr in g.get("grads", []):
            gtype, parent = tr["legacy"]["type"], tr.get("of", t)
            if g["variant"] == "min" and parent == t and gtype not in entry.setdefault("grad", []):
                entry["grad"].append(gtype)
            of.setdefault(gtype, parent)
            by_type.setdefault(gtype, []).append(dict(tr, variant=g["variant"]))
    for gtype, trs in by_type.items():
        if gtype in grad_ops or gtype in protos:  # a forward type (scale, concat ...): in ops
            continue
        groups = group_translations(trs)
        if not groups:
            grad_ops[gtype] = {"pir": None, "of": of[gtype], "error": trs[0].get("error", "?")}
            continue
        key = next(iter(groups))
        gattrs = groups[key][0][1].legacy["attrs"]
        own = [a for a in gattrs if a not in NON_OP_ATTRS
               and (a in p["attrs"] or a not in p["defaults"])]
        ge = op_entry(key, groups[key], gattrs, own, facts.renames(t), facts,
                      {**fwd_types, **facts.types(key)}, fwd_attr_map)
        ge["of"] = of[gtype]
        if len(groups) > 1:
            ge["alt_pir"] = [k for k in groups if k != key]
        grad_ops[gtype] = ge
    for gtype, parent in of.items():  # double grads, listed on their grad op
        if parent != t and gtype in grad_ops and parent in grad_ops:
            lst = grad_ops[parent].setdefault("grad", [])
            if gtype not in lst:
                lst.append(gtype)


#: Attrs every legacy op carries for the framework, never for the computation.
NON_OP_ATTRS = {"op_role", "op_role_var", "op_namescope", "op_callstack", "op_device",
                "with_quant_attr"}


def why_unmapped(t: str, p: dict, minrec: dict | None) -> dict:
    """Why legacy type t has no measured PIR counterpart: {"why", "category", ...}."""
    if t in SUB_BLOCK_PIR:
        return {"category": "sub_block", "pir": SUB_BLOCK_PIR[t],
                "why": "has sub-blocks: Paddle's program translator makes it, not the op translator"}
    if p.get("error"):
        return {"category": "probe", "why": "no one-op program: " + p["error"]}
    if minrec is None:
        return {"category": "probe", "why": "not probed"}
    err = minrec.get("error", "")
    if minrec.get("crashed"):
        return {"category": "crash", "why": "Paddle's translator kills the process on it"}
    m = re.search(r"should have corresponding OpInfo (pd_op\.\w+)", err)
    if m:
        return {"category": "no_pir_op", "expected": m.group(1),
                "why": f"the translator asks for {m.group(1)}, which PIR does not register"}
    if "should have corresponding OpInfo" in err:
        return {"category": "no_pir_op", "why": "no PIR op (the translator has no rule for it)"}
    if "Type validation failed" in err:
        return {"category": "input_types", "why": "needs input types a one-op probe cannot make "
                                                  "(selected rows, sparse, arrays): " + err[:120]}
    return {"category": "translator_error", "why": err[:200]}


def compat_entry(t: str, p: dict, facts: Facts) -> dict | None:
    """An unverified entry from op_compat's names alone, for a type the probe could
    not translate but whose op_compat PIR op exists."""
    m = facts.op_map.get(t)
    if not m or m["phi_name"] not in facts.sigs or "in" not in facts.sigs[m["phi_name"]]:
        return None
    sig = facts.sigs[m["phi_name"]]
    renames = m.get("attrs", {})
    mutable = {**m.get("int_array", {}), **m.get("scalar", {})}
    ins = []
    for name in sig["in"]:
        if name in mutable:
            d = {"attr": renames.get(name, name)}
            tensors = [mutable[name][k] for k in ("tensor_name", "tensors_name") if k in mutable[name]]
            if tensors:
                d["tensor"] = tensors
            ins.append([name, d])
        else:
            ins.append([name, m.get("inputs", {}).get(name)])
    types = facts.types("pd_op." + m["phi_name"])
    known = set(p["defaults"]) | set(p["attrs"])
    attrs = [[a, renames.get(a, a) if renames.get(a, a) in known else None,
              types.get(a, "?")] for a in sig["attrs"]]
    return {"pir": "pd_op." + m["phi_name"], "in": ins,
            "out": [[name, m.get("outputs", {}).get(name)] for name in sig["out"]],
            "attrs": attrs, "vjp": sig["vjp"], "verified": False}


def reverse_map(ops: dict, grad_ops: dict, op_map: dict) -> dict[str, str]:
    """{PIR op name: the legacy type to convert it back to}. Where several legacy
    types translate to one PIR op, prefer op_compat's own pairing, then a
    measured base mapping, then the newest version of the legacy op."""
    cands: dict[str, list[tuple]] = {}

    def version(t: str) -> int:
        m = re.search(r"(?:_v|[a-z])(\d+)$", t)
        return int(m.group(1)) if m else 0

    for t, e in ops.items():
        for i, sub in enumerate([e, *e.get("alt", [])]):
            pir = sub.get("pir")
            if pir:
                compat = op_map.get(t, {}).get("phi_name") == pir[6:]
                rank = (not compat, i > 0, e.get("verified") is False, -version(t), t)
                cands.setdefault(pir, []).append((rank, t))
    for g, e in grad_ops.items():
        if e.get("pir"):
            cands.setdefault(e["pir"], []).append(((False, False, False, -version(g), g), g))
    return {pir: min(c)[1] for pir, c in sorted(cands.items())}


FORMAT_DOC = {
    "ops": "legacy type -> {pir: 'pd_op.x' | null, in: [[PIR operand, legacy input slot | null | "
           "{attr: legacy attr carried as a tensor, by: 'pd_op.full_int_array'|'pd_op.full', "
           "tensor: [legacy *Tensor / *TensorList slots that feed it instead], value: constant "
           "when no legacy attr}]], out: [[PIR result, legacy output slot | null]], "
           "attrs: [[PIR attr, legacy attr | null, type, value if it differs from the legacy "
           "default or has no legacy attr]], dropped_out: [legacy output slots PIR does not make], "
           "unused_attrs: [legacy attrs PIR does not carry], vjp: PIR op has a VJP, "
           "inplace: 'pd_op.x_' (Paddle's translator picks it when a legacy output var is "
           "also an input var), inplace_map: [[operand, result it overwrites]], "
           "extra_attrs: [PIR attrs the op has in memory but Paddle does not write to a file], "
           "grad: [legacy grad op types the maker emits], "
           "alt: [same form + when: {with: [slots whose presence selects it], attr_not: "
           "{legacy attr: value; another value selects it}}, tried in order], "
           "composite: [PIR ops] when it is not one op, "
           "var_kind: input/output var kind the probe needed, verified: false when only "
           "op_compat names (no translation) back it, why_unverified}",
    "grad_ops": "legacy grad op type -> same form as ops, slots named as in the grad op "
                "(X@GRAD, Out@GRAD); of: the op it is the grad of (a forward legacy type, or a "
                "grad type for a double grad), grad: its own grad op types (double grads)",
    "unmapped": "legacy type -> {category, why, pir/expected}: no PIR counterpart measured",
    "pir": "PIR op name -> the legacy type it converts back to",
    "pir_vjp_unmapped": "PIR ops with a VJP and no legacy counterpart, by kind",
    "dtypes": "legacy VarType dtype number -> PIR DataType name (as in DataType attrs)",
}


def pir_kind(name: str) -> str:
    if name.endswith("_sp"):
        return "sparse"
    if name.endswith("_xpu"):
        return "xpu"
    if re.search(r"_grad_?$", name) or "_grad_" in name:
        return "grad"
    if name.endswith("_"):
        return "inplace"
    return "dense"


def vjp_coverage(sigs: dict, table: dict) -> dict[str, list[str]]:
    """PIR ops with a VJP, split into those with a legacy counterpart and the rest
    by kind. An inplace op counts as covered when its out-of-place op is."""
    mapped = set(table["pir"])
    out: dict[str, list[str]] = {"mapped": []}
    for n in sorted(sigs):
        if not sigs[n]["vjp"]:
            continue
        name = "pd_op." + n
        if name in mapped or (n.endswith("_") and "pd_op." + n[:-1] in mapped):
            out["mapped"].append(name)
        else:
            out.setdefault(pir_kind(n), []).append(name)
    return out


def build_table(protos: dict, results: list[dict], sigs: dict, phi: dict, dtypes: dict,
                paddle_version: str, paddle_commit: str) -> dict:
    """The whole table; its `_format` key says what each part holds."""
    by_op: dict[str, dict[str, list[dict]]] = {}
    for r in results:
        if "op" in r:
            by_op.setdefault(r["op"], {}).setdefault(r["kind"], []).append(r)
    facts = Facts(sigs, phi, dtypes)
    ops: dict = {}
    grad_ops: dict = {}
    unmapped: dict = {}
    for t in sorted(protos):
        p = protos[t]
        recs = by_op.get(t, {})
        entry = forward_entry(t, p, recs.get("fwd", []), facts)
        if entry is None:
            minrec = next((r for r in recs.get("fwd", []) if r["variant"] == "min"), None)
            why = why_unmapped(t, p, minrec)
            compat = compat_entry(t, p, facts) if why["category"] != "sub_block" else None
            if compat is None:
                unmapped[t] = why
                continue
            compat["why_unverified"] = why["why"]
            entry = compat
        grad_entries(t, protos, entry, recs.get("grad", []), facts, grad_ops)
        ops[t] = entry
    table: dict = {"_generated_by": "tools/gen_pir_op_map.py",
                   "_paddle": f"{paddle_version} ({paddle_commit})",
                   "_format": FORMAT_DOC,
                   "ops": ops, "grad_ops": dict(sorted(grad_ops.items())), "unmapped": unmapped}
    table["pir"] = reverse_map(ops, table["grad_ops"], facts.op_map)
    table["dtypes"] = dict(sorted(dtypes.items(), key=lambda kv: int(kv[0])))
    cov = vjp_coverage(sigs, table)
    table["pir_vjp_unmapped"] = {k: v for k, v in cov.items() if k != "mapped"}
    table["_counts"] = {
        "legacy_types": len(protos), "mapped": sum(1 for e in ops.values() if e.get("pir")
                                                   and e.get("verified") is not False),
        "composite": sum(1 for e in ops.values() if e.get("composite")),
        "op_compat_only": sum(1 for e in ops.values() if e.get("verified") is False),
        "unmapped": len(unmapped), "grad_ops": len(grad_ops),
        "pir_registered": len(sigs), "pir_vjp": sum(1 for s in sigs.values() if s["vjp"]),
        "pir_vjp_mapped": len(cov["mapped"])}
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--raw", default=None, help="also write the raw observations here (JSON lines)")
    ap.add_argument("--from-raw", default=None, help="build from saved observations, no probing")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(*args.worker)
        return
    if args.from_raw:
        recs = [json.loads(ln) for ln in pathlib.Path(args.from_raw).read_text().splitlines()]
        head, results, sigs = recs[0], recs[1:-1], recs[-1]["sigs"]
    else:
        head, results, sigs = probe_all()
        if args.raw:
            with open(args.raw, "w") as f:
                for rec in [head, *results, {"kind": "sigs", "sigs": sigs}]:
                    f.write(json.dumps(rec, sort_keys=True) + "\n")
    table = build_table(head["protos"], results, sigs, head["phi"], head["dtypes"],
                        head["paddle_version"], head["paddle_commit"])
    text = dump_table(table)
    pathlib.Path(args.out).write_text(text)
    print(f"wrote {args.out}: {len(text) // 1024} KB; {json.dumps(table['_counts'])}",
          file=sys.stderr)


def probe_all() -> tuple[dict, list[dict], dict]:
    """Run every probe: (legacy protos + op_compat facts, translations, PIR signatures)."""
    import importlib.util
    spec = importlib.util.find_spec("paddle")
    if spec is None or spec.origin is None:
        sys.exit("gen_pir_op_map: run me with a Python that has paddlepaddle==3.3.1")
    paddle_dir = pathlib.Path(spec.origin).parent
    phi = _load_phi_map(paddle_dir / "incubate" / "autograd" / "phi_ops_map.py")
    version = (paddle_dir / "version" / "__init__.py").read_text()
    head = {"kind": "head", "phi": phi,
            "paddle_version": re.search(r"full_version\s*=\s*'([^']+)'", version).group(1),
            "paddle_commit": re.search(r"commit\s*=\s*'([^']+)'", version).group(1)}
    py = sys.executable
    print("probing legacy op protos", file=sys.stderr)
    info = run_jobs([{"kind": "proto"}], py)[0]
    if "protos" not in info:
        sys.exit(f"gen_pir_op_map: reading Paddle's op protos failed: {info.get('error')}")
    head["protos"] = protos = info["protos"]
    seen = run_jobs([{"kind": "dtypes", "numbers": list(range(-1, 40))}], py)[0]["dtypes"]
    head["dtypes"] = {k: v for k, v in sorted(seen.items(), key=lambda kv: int(kv[0]))
                      if k == "-1" or not v.startswith("Undefined")}
    jobs: list[dict] = []
    for t in sorted(protos):
        p = protos[t]
        if p["error"]:
            continue
        jobs.append({"kind": "fwd", "op": t, "variant": "min"})
        jobs.append({"kind": "fwd", "op": t, "variant": "inplace"})
        dispensable = [name for name, _dup, disp in p["inputs"] if disp]
        jobs += [{"kind": "fwd", "op": t, "variant": f"with:{n}"} for n in dispensable]
        for name in p["attrs"]:
            a = p["defaults"].get(name)
            if a is not None and a[0] in PERTURBABLE:
                jobs.append({"kind": "fwd", "op": t, "variant": f"attr:{name}"})
        if p["maker"]:
            jobs.append({"kind": "grad", "op": t, "variant": "min"})
            jobs += [{"kind": "grad", "op": t, "variant": f"with:{n}"} for n in dispensable]
    print(f"translating: {len(jobs)} probes", file=sys.stderr)
    results = run_jobs(jobs, py)
    extra = set()
    for e in phi["op_map"].values():
        extra |= {e["phi_name"], e["phi_name"] + "_grad"}
    names = pir_candidates(paddle_dir, extra)
    print(f"reading signatures of {len(names)} candidate PIR names", file=sys.stderr)
    sigs: dict = {}
    for rec in run_jobs([{"kind": "sig", "names": names[i:i + 100]}
                         for i in range(0, len(names), 100)], py):
        if "error" in rec:
            print(f"  signature batch failed: {rec['error']}", file=sys.stderr)
        sigs.update(rec.get("sig", {}))
    return head, results, dict(sorted(sigs.items()))


def _load_phi_map(path: pathlib.Path) -> dict:
    """The wheel's phi_ops_map.py holds two dict literals; read them as data."""
    import ast
    tree = ast.parse(path.read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def dump_table(table: dict) -> str:
    """One top-level entry per line: compact, and reviewable as a diff."""
    lines = []
    for key, value in table.items():
        if isinstance(value, dict) and key in ("ops", "grad_ops", "unmapped", "pir"):
            inner = [f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}"
                     for k, v in value.items()]
            lines.append(f" {json.dumps(key)}: {{\n" + ",\n".join(inner) + "\n }")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value, separators=(',', ':'))}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


if __name__ == "__main__":
    main()
