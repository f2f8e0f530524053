"""Random well-formed forward programs over the registered differentiable ops,
and a large-program builder for the fault and limit measurements.

    rp = random_program(seed)           # a RandomProgram
    rp.program, rp.loss, rp.feeds, rp.params, rp.detached

Each program is a random DAG written the way Paddle writes one: FP32 vars
declared with their concrete shapes and sorted by name, XShape outputs declared
`[0] + shape`, every op carrying Paddle's default attrs (from the registry's
recorded defaults) and `op_role=0`. What it exercises:

* ops: elementwise_add/sub/mul/div (same shapes, Paddle's `axis` alignment,
  NumPy-style size-1 broadcasting, X the smaller operand), mul with
  `x_num_col_dims`, matmul_v2 with `trans_x`/`trans_y` and a broadcast batch,
  relu/tanh/sigmoid/exp/square, scale, reduce_sum/reduce_mean over dims (with
  and without keep_dim, or reduce_all), reshape2 (with 0 and -1 in `shape`),
  transpose2, concat, split (num or sections, outputs left unused), sum;
* shared vars: a var read by several ops, or twice by one op (`x * x`,
  `sum([a, a])`), parameters used more than once;
* stop_gradient: feeds (as `paddle.static.data` makes them), intermediate
  vars (their gradient must not flow back: see `detached`), and parameters
  flagged stop_gradient in the file (Paddle's parse clears the flag);
* several losses, each reduced to a scalar, added into one scalar loss;
* with `control_flow=True` (issue #35): `while` loops carrying a var (nested
  up to three deep, the inner counter made afresh in each outer step), with
  if/else branches in their bodies (on the step counter, so the loss is
  smooth) that reassign the loop var - from a value computed before the
  branch, or from the loop var itself read inside the branch - and
  accumulators updated beside the nested loops;
* with `inplace=True`: ops that update a var in place (`tanh(X=h, Out=h)`,
  `elementwise_mul(X=h, Y=g, Out=h)`, `X=h, Y=h`), in block 0 and on loop
  vars, and ops naming one var twice among their outputs (`split ->
  Out=[p, p]`), which the pass must refuse naming its rule (`expect_refusal`
  lists the vars).

Values are screened: the forward pass (float64) must be finite and moderate,
and no relu/max-like kink may sit within 1e-3 of an input, so central finite
differences are a sound reference.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

import pybackward
from pybackward.base import attrs as _attrs
from pybackward._proto import framework_pb2 as pb
from pybackward.backward.emit import fill_op_desc
from pybackward.ops.registry import fresh_op
from pybackward.legacy.program import Program

#: Op kinds the generator draws from, with weights.
OP_WEIGHTS = {
    "elementwise": 6, "unary": 5, "scale": 2, "mul": 2, "matmul_v2": 3, "reduce": 2,
    "reshape2": 2, "transpose2": 2, "concat": 2, "split": 2, "sum": 2,
}
UNARY = ("relu", "tanh", "sigmoid", "exp", "square")
ELEMENTWISE = ("elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div")


@dataclasses.dataclass
class VarSpec:
    name: str
    shape: tuple[int, ...]
    kind: str = "tmp"                 # "param", "feed", "tmp", "xshape", "int", "bool", "scopes"
    stop_gradient: bool = False
    block: int = 0


@dataclasses.dataclass
class OpSpec:
    type: str
    inputs: dict[str, list[str]]
    outputs: dict[str, list[str]]
    attrs: dict[str, Any]
    block: int = 0


@dataclasses.dataclass
class RandomProgram:
    seed: int
    program: Program
    loss: str
    feeds: dict[str, np.ndarray]
    params: dict[str, np.ndarray]
    #: Intermediate vars declared stop_gradient: their gradient must not flow
    #: back, so the reference for finite differences feeds them as constants.
    detached: list[str]
    ops: list[OpSpec]
    #: Vars some op names twice among its outputs: the pass may refuse the program.
    expect_refusal: list[str] = dataclasses.field(default_factory=list)

    def to_bytes(self) -> bytes:
        return pybackward.dumps(self.program)

    def describe(self) -> str:
        return f"seed {self.seed}: " + ", ".join(o.type for o in self.ops)


class _Gen:
    def __init__(self, seed: int, max_ops: int, control_flow: bool = False, inplace: bool = False):
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.max_ops = max_ops
        self.vars: dict[str, VarSpec] = {}
        self.ops: list[OpSpec] = []
        self.counters: dict[str, int] = {}
        self.pool: list[str] = []          # float vars ops may read
        self.uses: dict[str, int] = {}
        self.values: dict[str, np.ndarray] = {}
        self.control_flow = control_flow
        self.inplace = inplace
        self.blocks: list[int] = [-1]      # parent of each block
        self.cur = 0                       # the block ops go into
        self.aliased: list[str] = []

    # -- helpers -----------------------------------------------------------
    def r(self, n: int) -> int:
        return int(self.rng.integers(n))

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def choice(self, seq):
        return seq[self.r(len(seq))]

    def new_name(self, prefix: str) -> str:
        k = self.counters.get(prefix, 0)
        self.counters[prefix] = k + 1
        return f"{prefix}_{k}"

    def declare(self, name: str, shape, kind: str = "tmp", stop_gradient: bool = False) -> str:
        block = 0 if kind in ("param", "feed") else self.cur
        self.vars[name] = VarSpec(name, tuple(int(d) for d in shape), kind, stop_gradient, block)
        if kind in ("param", "feed", "tmp") and block == 0:
            self.pool.append(name)
        return name

    def shape(self, name: str) -> tuple[int, ...]:
        return self.vars[name].shape

    def random_shape(self, rank: int | None = None) -> tuple[int, ...]:
        rank = self.choice([1, 2, 2, 3]) if rank is None else rank
        return tuple(int(self.rng.integers(1, 5)) for _ in range(rank))

    def param(self, shape, positive: bool = False) -> str:
        name = self.declare(self.new_name("p"), shape, "param",
                            stop_gradient=self.chance(0.1))   # Paddle's parse clears it
        v = self.rng.uniform(0.5, 1.5, shape) if positive else self.rng.uniform(-1.0, 1.0, shape)
        self.values[name] = v
        return name

    def feed(self, shape) -> str:
        name = self.declare(self.new_name("x"), shape, "feed", stop_gradient=self.chance(0.8))
        self.values[name] = self.rng.uniform(-1.0, 1.0, shape)
        return name

    def pick(self, pred=None) -> str | None:
        """A pool var (recent ones more likely; used ones now and then: shared vars)."""
        cands = [n for n in self.pool if pred is None or pred(self.shape(n))]
        if not cands:
            return None
        w = np.array([1.0 + i for i in range(len(cands))])
        w = w / w.sum()
        name = cands[int(self.rng.choice(len(cands), p=w))]
        return name

    def out(self, op_type: str, shape, j: int = 0, stop_ok: bool = True) -> str:
        k = self.counters.get(op_type, 0)
        name = f"{op_type}_{k}.tmp_{j}"
        stop = stop_ok and self.chance(0.08)
        self.declare(name, shape, "tmp", stop_gradient=stop)
        return name

    def bump(self, op_type: str) -> None:
        self.counters[op_type] = self.counters.get(op_type, 0) + 1

    def emit(self, op_type: str, inputs, outputs, attrs) -> None:
        for args in inputs.values():
            for a in args:
                self.uses[a] = self.uses.get(a, 0) + 1
        self.ops.append(OpSpec(op_type, inputs, outputs, attrs, self.cur))
        self.bump(op_type)

    # -- ops ---------------------------------------------------------------
    def op_unary(self) -> bool:
        a = self.pick()
        t = self.choice(UNARY)
        self.emit(t, {"X": [a]}, {"Out": [self.out(t, self.shape(a))]}, {})
        return True

    def op_scale(self) -> bool:
        a = self.pick()
        attrs = {"scale": float(self.choice([0.5, 2.0, -1.5, 0.75])),
                 "bias": float(self.choice([0.0, 0.0, 0.3, -0.2])),
                 "bias_after_scale": self.chance(0.5)}
        self.emit("scale", {"X": [a]}, {"Out": [self.out("scale", self.shape(a))]}, attrs)
        return True

    def _positive(self, shape) -> str:
        """A var that stays positive: a positive param, or scale(sigmoid(v), bias=0.5)."""
        if self.chance(0.5):
            return self.param(shape, positive=True)
        v = self.pick(lambda s: s == tuple(shape)) or self.param(shape)
        s = self.out("sigmoid", shape, stop_ok=False)
        self.emit("sigmoid", {"X": [v]}, {"Out": [s]}, {})
        o = self.out("scale", shape, stop_ok=False)
        self.emit("scale", {"X": [s]}, {"Out": [o]}, {"scale": 1.0, "bias": 0.5, "bias_after_scale": True})
        return o

    def op_elementwise(self) -> bool:
        t = self.choice(ELEMENTWISE)
        div = t == "elementwise_div"
        x = self.pick()
        xs = self.shape(x)
        modes = ["same", "same", "ones", "x_smaller"] + (["self"] if not div else []) + \
            (["axis", "axis", "suffix"] if len(xs) >= 2 else [])
        mode = self.choice(modes)
        axis, out_shape = -1, xs
        if mode == "self":
            y = x
        elif mode == "x_smaller" and len(xs) <= 2:
            # X broadcast against a bigger Y (NumPy rule, axis -1).
            ys = (int(self.rng.integers(2, 4)),) + xs
            y = self._positive(ys) if div else (self.pick(lambda s: s == ys) or self.param(ys))
            out_shape = ys
        else:
            if mode == "axis":
                # Paddle's rule: Y's dims line up with X's from `axis` on.
                start = self.r(len(xs))
                stop = start + 1 + self.r(len(xs) - start)
                ys = xs[start:stop]
                axis = start
                if stop == len(xs) and self.chance(0.5):
                    axis = -1
                elif stop < len(xs) and self.chance(0.3):
                    ys = ys + (1,)
            elif mode == "ones":
                ys = tuple(1 if self.chance(0.5) else d for d in xs)
            elif mode == "suffix":
                ys = xs[1:]
            else:
                ys = xs
            if div:
                y = self._positive(ys)
            else:
                y = self.pick(lambda s: s == ys) if self.chance(0.6) else None
                y = y or self.param(ys)
        self.emit(t, {"X": [x], "Y": [y]}, {"Out": [self.out(t, out_shape)]}, {"axis": axis})
        return True

    def op_mul(self) -> bool:
        x = self.pick(lambda s: len(s) >= 2)
        if x is None:
            return False
        xs = self.shape(x)
        k = 1 + self.r(len(xs) - 1)
        inner = int(np.prod(xs[k:]))
        n = int(self.rng.integers(1, 5))
        if self.chance(0.3) and inner % 2 == 0:
            ys, ky = (2, inner // 2, n), 2
        else:
            ys, ky = (inner, n), 1
        y = self.param(ys)
        self.emit("mul", {"X": [x], "Y": [y]}, {"Out": [self.out("mul", xs[:k] + ys[ky:])]},
                  {"x_num_col_dims": k, "y_num_col_dims": ky})
        return True

    def op_matmul_v2(self) -> bool:
        x = self.pick(lambda s: len(s) in (2, 3))
        if x is None:
            return False
        xs = self.shape(x)
        tx, ty = self.chance(0.3), self.chance(0.3)
        m, k = (xs[-1], xs[-2]) if tx else (xs[-2], xs[-1])
        n = int(self.rng.integers(1, 5))
        ymat = (n, k) if ty else (k, n)
        ys = ymat if (len(xs) == 2 or self.chance(0.5)) else xs[:1] + ymat
        y = self.pick(lambda s: s == ys) if self.chance(0.3) else None
        y = y or self.param(ys)
        out = xs[:-2] + (m, n)
        self.emit("matmul_v2", {"X": [x], "Y": [y]}, {"Out": [self.out("matmul_v2", out)]},
                  {"trans_x": tx, "trans_y": ty})
        return True

    def op_reduce(self) -> bool:
        x = self.pick(lambda s: len(s) >= 1)
        xs = self.shape(x)
        t = self.choice(["reduce_sum", "reduce_mean"])
        keep = self.chance(0.4)
        if self.chance(0.25):
            dims, reduce_all = [], True
            out = (1,) * len(xs) if keep else ()
        else:
            nd = 1 + self.r(len(xs))
            axes = sorted(int(a) for a in self.rng.choice(len(xs), nd, replace=False))
            dims = [a - len(xs) if self.chance(0.3) else a for a in axes]
            reduce_all = len(axes) == len(xs)
            out = tuple(1 if i in axes else d for i, d in enumerate(xs)) if keep else \
                tuple(d for i, d in enumerate(xs) if i not in axes)
        self.emit(t, {"X": [x]}, {"Out": [self.out(t, out)]},
                  {"dim": dims, "keep_dim": keep, "reduce_all": reduce_all})
        return True

    def _xshape(self, op_type: str, xs) -> str:
        k = self.counters.get(op_type, 0)
        name = f"{op_type}_{k}.tmp_1"
        self.declare(name, (0,) + tuple(xs), "xshape")
        return name

    def op_reshape2(self) -> bool:
        x = self.pick()
        xs = self.shape(x)
        numel = int(np.prod(xs))
        factors = [f for f in range(1, numel + 1) if numel % f == 0]
        rank = self.choice([1, 2, 2, 3])
        dims, rest = [], numel
        for _ in range(rank - 1):
            f = self.choice([f for f in factors if rest % f == 0])
            dims.append(f)
            rest //= f
        dims.append(rest)
        target = list(dims)
        if self.chance(0.4):
            target[self.r(len(target))] = -1
        if self.chance(0.3):
            i = self.r(len(target))
            if i < len(xs) and xs[i] == dims[i] and target[i] != -1:
                target[i] = 0
        self.emit("reshape2", {"X": [x]},
                  {"Out": [self.out("reshape2", dims)], "XShape": [self._xshape("reshape2", xs)]},
                  {"shape": target})
        return True

    def op_transpose2(self) -> bool:
        x = self.pick(lambda s: len(s) >= 2)
        if x is None:
            return False
        xs = self.shape(x)
        perm = [int(p) for p in self.rng.permutation(len(xs))]
        self.emit("transpose2", {"X": [x]},
                  {"Out": [self.out("transpose2", [xs[p] for p in perm])],
                   "XShape": [self._xshape("transpose2", xs)]},
                  {"axis": perm})
        return True

    def op_concat(self) -> bool:
        x = self.pick(lambda s: len(s) >= 1)
        xs = self.shape(x)
        axis = self.r(len(xs))
        parts = [x]
        for _ in range(1 + self.r(2)):
            same = self.pick(lambda s: len(s) == len(xs) and all(
                a == b for i, (a, b) in enumerate(zip(s, xs)) if i != axis))
            if same is not None and self.chance(0.6):
                parts.append(same)
            else:
                s = list(xs)
                s[axis] = int(self.rng.integers(1, 4))
                parts.append(self.param(s))
        out = list(xs)
        out[axis] = sum(self.shape(p)[axis] for p in parts)
        a = axis - len(xs) if self.chance(0.3) else axis
        self.emit("concat", {"X": parts}, {"Out": [self.out("concat", out)]}, {"axis": a})
        return True

    def op_split(self) -> bool:
        x = self.pick(lambda s: any(d >= 2 for d in s))
        if x is None:
            return False
        xs = self.shape(x)
        axis = self.choice([i for i, d in enumerate(xs) if d >= 2])
        d = xs[axis]
        divisors = [k for k in range(2, d + 1) if d % k == 0]
        if self.chance(0.5):
            num = self.choice(divisors)
            sizes, attrs = [d // num] * num, {"num": num, "sections": []}
        else:
            cut = sorted(int(c) for c in self.rng.choice(np.arange(1, d), 1 + self.r(min(2, d - 1)), replace=False))
            sizes = [b - a for a, b in zip([0] + cut, cut + [d])]
            secs = list(sizes)
            if self.chance(0.3):
                secs[self.r(len(secs))] = -1
            attrs = {"num": 0, "sections": secs}
        attrs["axis"] = axis - len(xs) if self.chance(0.3) else axis
        outs = []
        for j, s in enumerate(sizes):
            shape = list(xs)
            shape[axis] = s
            outs.append(self.out("split", shape, j, stop_ok=False))
        self.emit("split", {"X": [x]}, {"Out": outs}, attrs)
        return True

    def op_sum(self) -> bool:
        x = self.pick()
        xs = self.shape(x)
        parts = [x]
        for _ in range(1 + self.r(2)):
            if self.chance(0.25):
                parts.append(x)                      # the same var twice
            else:
                same = self.pick(lambda s: s == xs)
                parts.append(same if same is not None and self.chance(0.5) else self.param(xs))
        self.emit("sum", {"X": parts}, {"Out": [self.out("sum", xs)]}, {})
        return True

    # -- in place and aliased outputs (inplace=True) -------------------------
    def op_inplace(self) -> bool:
        """An op writing the var it reads: `tanh/sigmoid/square/scale(X=h, Out=h)`,
        `elementwise_mul(X=h, Y=g, Out=h)` or `(X=h, Y=h, Out=h)`, on an
        intermediate var (never a feed or a parameter)."""
        h = self.pick(lambda s: True)
        if h is None or self.vars[h].kind != "tmp" or self.vars[h].stop_gradient:
            return False
        kind = self.choice(["unary", "unary", "mul", "mul_self"])
        if kind == "unary":
            t = self.choice(["tanh", "sigmoid", "square", "scale"])
            attrs = {"scale": 0.5, "bias": 0.1, "bias_after_scale": True} if t == "scale" else {}
            self.emit(t, {"X": [h]}, {"Out": [h]}, attrs)
        elif kind == "mul":
            g = self.pick(lambda s: s == self.shape(h))
            if g is None or g == h:
                g = self.param(self.shape(h))
            self.emit("elementwise_mul", {"X": [h], "Y": [g]}, {"Out": [h]}, {"axis": -1})
        else:
            self.emit("elementwise_mul", {"X": [h], "Y": [h]}, {"Out": [h]}, {"axis": -1})
        return True

    def op_alias(self) -> bool:
        """`split(x) -> Out=[p, p]`: one var named twice among the outputs."""
        x = self.pick(lambda s: len(s) >= 1 and s[-1] % 2 == 0)
        if x is None:
            return False
        xs = self.shape(x)
        p = self.out("split", xs[:-1] + (xs[-1] // 2,), stop_ok=False)
        self.emit("split", {"X": [x]}, {"Out": [p, p]}, {"axis": len(xs) - 1, "num": 2, "sections": []})
        self.aliased.append(p)
        return True

    # -- control flow (control_flow=True) ------------------------------------
    def new_block(self) -> int:
        self.blocks.append(self.cur)
        return len(self.blocks) - 1

    def int_var(self, value: int) -> str:
        name = self.declare(self.new_name("fill_constant") + ".tmp_0", (1,), "int")
        self.emit("fill_constant", {}, {"Out": [name]}, {"shape": [1], "dtype": pb.VarType.INT64,
                                                         "value": float(value)})
        return name

    def less_than(self, x: str, y: str, out: str | None = None) -> str:
        out = out or self.declare(self.new_name("less_than") + ".tmp_0", (1,), "bool")
        self.emit("less_than", {"X": [x], "Y": [y]}, {"Out": [out]}, {"axis": -1, "force_cpu": False})
        return out

    def assign(self, x: str, out: str) -> None:
        self.emit("assign", {"X": [x]}, {"Out": [out]}, {})

    def local(self, op_type: str, inputs, shape, attrs=None) -> str:
        """A op writing a new var of the current block."""
        o = self.out(op_type, shape, stop_ok=False)
        self.emit(op_type, inputs, {"Out": [o]}, attrs or {})
        return o

    def _outer_io(self, first: int, block: int) -> tuple[list[str], list[str]]:
        """The vars the ops from `first` on (in `block` and the blocks inside it)
        read and write that live outside `block`: a sub-block op's X / Input
        and Out, as Paddle's While and ConditionalBlock collect them."""
        inside = {block}
        for b in range(block + 1, len(self.blocks)):
            if self.blocks[b] in inside:
                inside.add(b)
        reads: dict[str, None] = {}
        writes: dict[str, None] = {}
        for o in self.ops[first:]:
            if o.block not in inside:
                continue
            for args in o.inputs.values():
                for a in args:
                    if self.vars[a].block not in inside:
                        reads.setdefault(a)
            for args in o.outputs.values():
                for a in args:
                    if self.vars[a].block not in inside:
                        writes.setdefault(a)
        return list(reads), list(writes)

    def branch(self, cond: str, then) -> None:
        """`if cond: then()` as a ConditionalBlock in the current block."""
        parent, first = self.cur, len(self.ops)
        self.cur = self.new_block()
        blk = self.cur
        then()
        self.cur = parent
        reads, writes = self._outer_io(first, blk)
        scope = self.declare(self.new_name("_generated_var"), (), "scopes")
        self.emit("conditional_block", {"Cond": [cond], "Input": [r for r in reads if r != cond]},
                  {"Out": writes, "Scope": [scope]},
                  {"sub_block": (blk, pb.AttrType.BLOCK), "is_scalar_condition": True})

    def loop(self, h: str, steps: int, body) -> None:
        """`for _ in range(steps): body(i)` as a While in the current block; h is
        the loop var (declared outside)."""
        i, n = self.int_var(0), self.int_var(steps)
        cond = self.less_than(i, n)
        parent, first = self.cur, len(self.ops)
        self.cur = self.new_block()
        blk = self.cur
        body(i)
        self.emit("increment", {"X": [i]}, {"Out": [i]}, {"step": 1.0})
        self.less_than(i, n, cond)
        self.cur = parent
        reads, writes = self._outer_io(first, blk)
        scopes = self.declare(self.new_name("_generated_var"), (), "scopes")
        self.emit("while", {"Condition": [cond], "X": [r for r in reads if r != cond]},
                  {"Out": writes, "StepScopes": [scopes]}, {"sub_block": (blk, pb.AttrType.BLOCK), "is_test": False})

    def body_ops(self, h: str, i: str, depth: int) -> None:
        """One to three steps of a loop body, each reassigning h."""
        shape = self.shape(h)
        d = shape[-1]
        for _ in range(1 + self.r(2)):
            kinds = ["tanh_mm", "tanh_mm", "cond", "cond_reads"] + (["nested"] if depth < 3 else []) + \
                (["inplace"] if self.inplace else []) + (["accumulate"] if depth < 3 else [])
            kind = self.choice(kinds)
            if kind == "tanh_mm":
                w = self.param((d, d))
                self.assign(self.local("tanh", {"X": [self.local("matmul_v2", {"X": [h], "Y": [w]}, shape,
                                                                 {"trans_x": False, "trans_y": False})]},
                                       shape), h)
            elif kind in ("cond", "cond_reads"):
                # if i < k: h = tanh(...) else: h = sigmoid(...)
                k = self.int_var(self.r(3) + 1)
                pos = self.less_than(i, k)
                neg = self.declare(self.new_name("logical_not") + ".tmp_0", (1,), "bool")
                self.emit("logical_not", {"X": [pos]}, {"Out": [neg]}, {})
                w, v = self.param((d, d)), self.param((d, d))
                mm = {"trans_x": False, "trans_y": False}
                if kind == "cond":      # the branches read a value computed before them
                    t = self.local("matmul_v2", {"X": [h], "Y": [w]}, shape, mm)
                    self.branch(pos, lambda: self.assign(self.local("tanh", {"X": [t]}, shape), h))
                    self.branch(neg, lambda: self.assign(self.local("sigmoid", {"X": [self.local(
                        "matmul_v2", {"X": [t], "Y": [v]}, shape, mm)]}, shape), h))
                else:                   # the branches read h itself (issue #35 item 2)
                    self.branch(pos, lambda: self.assign(self.local("tanh", {"X": [self.local(
                        "matmul_v2", {"X": [h], "Y": [w]}, shape, mm)]}, shape), h))
                    self.branch(neg, lambda: self.assign(self.local("sigmoid", {"X": [self.local(
                        "matmul_v2", {"X": [h], "Y": [v]}, shape, mm)]}, shape), h))
            elif kind == "nested":
                self.loop(h, 1 + self.r(3), lambda j: self.body_ops(h, j, depth + 1))
            elif kind == "inplace":
                self.emit(self.choice(["tanh", "sigmoid"]), {"X": [h]}, {"Out": [h]}, {})
            else:                       # s = s + sigmoid(h @ v), s carried beside h
                s = self._accumulators[-1]
                v = self.param((d, d))
                self.assign(self.local("elementwise_add", {"X": [s], "Y": [self.local("sigmoid", {"X": [
                    self.local("matmul_v2", {"X": [h], "Y": [v]}, shape, {"trans_x": False, "trans_y": False})]},
                    shape)]}, shape, {"axis": -1}), s)

    def op_loop(self) -> bool:
        """h = assign(x); s = 0 * x; a While (possibly with nested Whiles and
        branches) reassigning h and adding to s; both join the pool."""
        x = self.pick(lambda s: len(s) == 2)
        if x is None:
            return False
        shape = self.shape(x)
        h = self.out("assign", shape, stop_ok=False)
        self.assign(x, h)
        s = self.out("scale", shape, stop_ok=False)
        self.emit("scale", {"X": [x]}, {"Out": [s]}, {"scale": 0.0, "bias": 0.0, "bias_after_scale": True})
        self._accumulators = [s]
        self.loop(h, 1 + self.r(3), lambda i: self.body_ops(h, i, 1))
        return True

    # -- whole program -----------------------------------------------------
    def build(self) -> None:
        for _ in range(1 + self.r(2)):
            self.feed(self.random_shape())
        for _ in range(1 + self.r(3)):
            self.param(self.random_shape())
        weights = dict(OP_WEIGHTS)
        if self.control_flow:
            weights["loop"] = 4
        if self.inplace:
            weights.update(inplace=3, alias=1)
        kinds = list(weights)
        w = np.array([weights[k] for k in kinds], dtype=float)
        w /= w.sum()
        n_ops = int(self.rng.integers(3, self.max_ops + 1))
        tries = 0
        while len(self.ops) < n_ops and tries < 10 * n_ops:
            tries += 1
            kind = kinds[int(self.rng.choice(len(kinds), p=w))]
            getattr(self, f"op_{kind}")()
        if self.control_flow and not any(o.type == "while" for o in self.ops):
            self.op_loop()
        # Losses: prefer vars nothing reads yet, so most of the DAG counts.
        unused = [n for n in self.pool if self.uses.get(n, 0) == 0 and self.vars[n].kind == "tmp"]
        n_loss = 1 + self.r(3)
        heads = unused[-n_loss:] if unused else []
        while len(heads) < n_loss:
            heads.append(self.pick())
        scalars = []
        for h in heads:
            t = self.choice(["reduce_mean", "reduce_sum", "mean"])
            o = self.out(t, (), stop_ok=False)
            attrs = {} if t == "mean" else {"dim": [], "keep_dim": False, "reduce_all": True}
            self.emit(t, {"X": [h]}, {"Out": [o]}, attrs)
            scalars.append(o)
        if len(scalars) == 1:
            self.loss = scalars[0]
        elif self.chance(0.5) or len(scalars) > 2:
            self.loss = self.out("sum", (), stop_ok=False)
            self.emit("sum", {"X": scalars}, {"Out": [self.loss]}, {})
        else:
            self.loss = self.out("elementwise_add", (), stop_ok=False)
            self.emit("elementwise_add", {"X": scalars[:1], "Y": scalars[1:]}, {"Out": [self.loss]},
                      {"axis": -1})
        self.vars[self.loss].stop_gradient = False


#: Paddle's attrs for op types whose defaults the registry has not recorded
#: (name, AttrType, default), in the order Paddle 3.3.1 writes them (copied
#: from transpose2 ops in testdata/programs/transformer_encoder/forward.pb).
_PADDLE_DEFAULTS = {
    "transpose2": [("data_format", pb.AttrType.STRING, "AnyLayout"),
                   ("mkldnn_data_type", pb.AttrType.STRING, "float32"),
                   ("onednn_data_type", pb.AttrType.STRING, ""),
                   ("use_mkldnn", pb.AttrType.BOOLEAN, False), ("use_onednn", pb.AttrType.BOOLEAN, False),
                   ("axis", pb.AttrType.INTS, []), ("op_callstack", pb.AttrType.STRINGS, []),
                   ("op_device", pb.AttrType.STRING, ""), ("op_namescope", pb.AttrType.STRING, "/"),
                   ("op_role", pb.AttrType.INT, 0), ("op_role_var", pb.AttrType.STRINGS, []),
                   ("with_quant_attr", pb.AttrType.BOOLEAN, False)],
}


def _op_desc(o: OpSpec) -> pb.OpDesc:
    d = pb.OpDesc()
    table = _PADDLE_DEFAULTS.get(o.type)
    if table is None:
        fill_op_desc(d, fresh_op(o.type, o.inputs, o.outputs, dict(o.attrs, op_role=0)), role=None)
        return d
    d.type = o.type
    for slot in sorted(o.inputs):
        d.inputs.add(parameter=slot, arguments=o.inputs[slot])
    for slot in sorted(o.outputs):
        d.outputs.add(parameter=slot, arguments=o.outputs[slot])
    for name, t, default in table:
        _attrs.encode(d.attrs.add(), name, o.attrs.get(name, default), t)
    return d


_KINDS = {"int": ("int64", pb.VarType.DENSE_TENSOR), "bool": ("bool", pb.VarType.DENSE_TENSOR),
          "scopes": ("float32", pb.VarType.STEP_SCOPES)}


def materialize(vars_: dict[str, VarSpec], ops: list[OpSpec], blocks: list[int] | None = None) -> Program:
    """A Program as Paddle would write it: vars sorted by name, each with its
    stop_gradient flag written out, ops with Paddle's default attrs; the
    sub-blocks of control-flow ops with their parents (`blocks`)."""
    prog = Program()
    for parent in (blocks or [-1])[1:]:
        prog.create_block(parent_idx=parent)
    for name in sorted(vars_):
        v = vars_[name]
        dtype, vtype = _KINDS.get(v.kind, ("float32", pb.VarType.DENSE_TENSOR))
        var = prog.block(v.block).create_var(name, shape=v.shape, dtype=dtype, type=vtype,
                                             persistable=v.kind == "param", is_parameter=v.kind == "param",
                                             need_check_feed=v.kind == "feed")
        var.desc.stop_gradient = v.stop_gradient or v.kind in _KINDS
    for b in range(len(prog.blocks)):
        prog.block(b).extend_op_descs([_op_desc(o) for o in ops if o.block == b])
    return prog


def _forward_values(prog: Program, feeds: dict, params: dict) -> dict[str, np.ndarray]:
    from pybackward.interpreter.gradcheck import to_float64
    from pybackward.interpreter.executor import Executor, Scope
    p64 = to_float64(prog)
    names = [n for n, v in p64.global_block().vars.items() if n not in feeds and n not in params
             and v.desc.type.type == pb.VarType.DENSE_TENSOR and v.dtype == np.float64]
    scope = Scope()
    for k, v in params.items():
        scope.set(k, v)
    vals = Executor().run(p64, feed=feeds, fetch_list=names, scope=scope)
    return dict(zip(names, vals))


def _kink_free(ops: list[OpSpec], vals: dict[str, np.ndarray], given: dict[str, np.ndarray]) -> bool:
    """relu inputs away from 0, so finite differences do not straddle the kink."""
    for o in ops:
        if o.type == "relu":
            x = vals.get(o.inputs["X"][0], given.get(o.inputs["X"][0]))
            if x is not None and np.min(np.abs(x)) < 1e-3:
                return False
    return True


def random_program(seed: int, max_ops: int = 12, attempts: int = 50, control_flow: bool = False,
                   inplace: bool = False) -> RandomProgram:
    """A random program whose values are finite, moderate and kink-free (retries
    with derived seeds; deterministic in `seed`). `control_flow` and `inplace`
    add the op kinds the module doc lists (off: the programs are as before)."""
    for attempt in range(attempts):
        g = _Gen(seed * 1000 + attempt, max_ops, control_flow, inplace)
        g.build()
        prog = materialize(g.vars, g.ops, g.blocks)
        feeds = {n: g.values[n] for n, v in g.vars.items() if v.kind == "feed"}
        params = {n: g.values[n] for n, v in g.vars.items() if v.kind == "param"}
        vals = _forward_values(prog, feeds, params)
        arrays = [np.asarray(v) for v in vals.values()]
        if not all(np.all(np.isfinite(a)) for a in arrays):
            continue
        if any(a.size and np.max(np.abs(a)) > 1e3 for a in arrays):
            continue
        if not _kink_free(g.ops, vals, {**feeds, **params}):
            continue
        detached = [n for n, v in g.vars.items() if v.kind == "tmp" and v.stop_gradient]
        return RandomProgram(seed, prog, g.loss,
                             {k: v.astype(np.float32) for k, v in feeds.items()},
                             {k: v.astype(np.float32) for k, v in params.items()},
                             detached, g.ops, list(g.aliased))
    raise RuntimeError(f"seed {seed}: no acceptable program in {attempts} attempts")


# --------------------------------------------------------------------------
# Large programs (fault injection, limits)
# --------------------------------------------------------------------------
def large_program(n_layers: int, width: int = 8) -> RandomProgram:
    """An MLP-like chain of `n_layers` (mul, elementwise_add, tanh) layers with a
    mean loss: 3 ops, 2 parameters and 3 activations per layer."""
    vars_: dict[str, VarSpec] = {}
    ops: list[OpSpec] = []
    vars_["x"] = VarSpec("x", (2, width), "feed", True)
    h = "x"
    for i in range(n_layers):
        w, b = f"fc_{i}.w_0", f"fc_{i}.b_0"
        vars_[w] = VarSpec(w, (width, width), "param")
        vars_[b] = VarSpec(b, (width,), "param")
        t0, t1, t2 = f"fc_{i}.tmp_0", f"fc_{i}.tmp_1", f"tanh_{i}.tmp_0"
        for t in (t0, t1, t2):
            vars_[t] = VarSpec(t, (2, width))
        ops.append(OpSpec("mul", {"X": [h], "Y": [w]}, {"Out": [t0]}, {"x_num_col_dims": 1, "y_num_col_dims": 1}))
        ops.append(OpSpec("elementwise_add", {"X": [t0], "Y": [b]}, {"Out": [t1]}, {"axis": 1}))
        ops.append(OpSpec("tanh", {"X": [t1]}, {"Out": [t2]}, {}))
        h = t2
    vars_["loss"] = VarSpec("loss", ())
    ops.append(OpSpec("mean", {"X": [h]}, {"Out": ["loss"]}, {}))
    prog = materialize(vars_, ops)
    rng = np.random.default_rng(0)
    params = {n: rng.uniform(-0.3, 0.3, v.shape).astype(np.float32) for n, v in vars_.items() if v.kind == "param"}
    return RandomProgram(-1, prog, "loss", {"x": rng.uniform(-1, 1, (2, width)).astype(np.float32)},
                         params, [], ops)


# --------------------------------------------------------------------------
# The end-to-end check: append_backward + interpreter against finite differences
# --------------------------------------------------------------------------
@dataclasses.dataclass
class GradCheck:
    var: str
    analytic: np.ndarray | None      # None: the pass gave the var no gradient
    numeric: np.ndarray
    ok: bool


def check_program(rp: RandomProgram, eps: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-6
                  ) -> list[GradCheck]:
    """Gradients from pybackward.append_backward run by the interpreter (in
    float64) against central differences of the loss, for every parameter and
    every feed that is not stop_gradient.

    The reference function is the program with each stop_gradient
    intermediate var fed as a constant (its producing op removed), which is
    what stop_gradient means. A var the pass gives no gradient must have a
    zero numeric gradient (so a missed path is caught too).
    """
    from pybackward.interpreter.gradcheck import to_float64
    from pybackward.interpreter.executor import Executor, Scope

    fwd = to_float64(rp.program)
    feeds = {k: v.astype(np.float64) for k, v in rp.feeds.items()}
    params = {k: v.astype(np.float64) for k, v in rp.params.items()}
    exe = Executor()

    def run(prog, feed, fetch):
        scope = Scope()
        for k, v in params_now.items():
            scope.set(k, v)
        return exe.run(prog, feed=feed, fetch_list=fetch, scope=scope)

    params_now = params
    # Analytic: the backward section pybackward appends, run by the interpreter.
    bwd = fwd.clone()
    pairs = pybackward.append_backward(rp.loss, program=bwd)
    grads = {p.name: g.name for p, g in pairs if g is not None}
    blk = bwd.global_block()
    wrt = list(params) + [f for f in feeds if not blk.var(f).stop_gradient]
    for f in wrt[len(params):]:
        if blk.has_var(f + "@GRAD"):
            grads[f] = f + "@GRAD"
    fetched = run(bwd, feeds, [grads[n] for n in wrt if n in grads])
    analytic = dict(zip([n for n in wrt if n in grads], fetched))

    # Reference: stop_gradient intermediates become constants.
    ref = fwd.clone()
    const = {}
    if rp.detached:
        const = dict(zip(rp.detached, run(fwd, feeds, rp.detached)))
        rb = ref.global_block()
        for i in reversed(range(len(rb.ops))):
            if any(n in const for n in rb.ops[i].output_arg_names):
                rb.remove_op(i)

    def loss_at(name: str, value: np.ndarray) -> float:
        nonlocal params_now
        if name in params:
            params_now = dict(params, **{name: value})
            try:
                (v,) = run(ref, {**feeds, **const}, [rp.loss])
            finally:
                params_now = params
        else:
            (v,) = run(ref, {**feeds, name: value, **const}, [rp.loss])
        return float(np.sum(v))

    (loss0,) = run(ref, {**feeds, **const}, [rp.loss])
    scale = max(1.0, abs(float(np.sum(loss0))))
    out = []
    for name in wrt:
        x0 = params[name] if name in params else feeds[name]
        num = np.zeros_like(x0)
        for i in range(x0.size):
            xp, xm = x0.copy(), x0.copy()
            xp.reshape(-1)[i] += eps
            xm.reshape(-1)[i] -= eps
            num.reshape(-1)[i] = (loss_at(name, xp) - loss_at(name, xm)) / (2 * eps)
        a = analytic.get(name)
        ref_a = np.zeros_like(num) if a is None else np.asarray(a, dtype=np.float64).reshape(num.shape)
        ok = bool(np.allclose(ref_a, num, rtol=rtol, atol=atol * scale))
        out.append(GradCheck(name, None if a is None else np.asarray(a), num, ok))
    return out
