"""Tree-based deep model (TDM) ops (no grads), as Paddle 3.3.1's CPU kernels compute them:

* tdm_child: for each node id of X, its child_nums children from TreeInfo
  (rows: item_id, layer_id, ancestor_id, child ids...) and whether each child
  is an item (item_id != 0); node 0 and childless nodes give zeros. Output
  shape X.shape + [child_nums], dtype the `dtype` attr (int32/int64).
* tdm_sampler: for each id of X, layer by layer along its Travel path, the
  positive node (when output_positive) then neg_samples_num_list[l] distinct
  negatives drawn uniformly from the layer's nodes Layer[layer_offset[l]:
  layer_offset[l+1]], redrawing the positive and repeats; a padding (0) node
  gives zeros and mask 0. Out, Labels, Mask have shape [numel(X), sum of
  (negatives + positive)].

tdm_sampler's draws: Paddle's UniformSampler is libstdc++'s
uniform_int_distribution<int>(0, n - 1) over a std::mt19937_64 seeded with
the `seed` attr, one fresh engine per layer; reproduced here, so a nonzero
seed gives Paddle's values. Seed 0 draws from Paddle's global generator (one
engine for all layers), whose state a program does not hold: the
interpreter's generator seeds it instead.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..random.engine import MT19937_64, engine
from ..registry import Call, Sample, register
from ..tensor.creation import np_dtype

_M64 = (1 << 64) - 1


class IntDraws:
    """libstdc++'s uniform_int_distribution(0, span - 1) over a std::mt19937_64,
    one draw at a time (Lemire's multiply-and-reject on the 128-bit product)."""

    def __init__(self, mt: MT19937_64):
        self.mt = mt
        self._buf: list[int] = []

    def _raw(self) -> int:
        if not self._buf:
            self._buf = [int(v) for v in self.mt.raw(64)][::-1]
        return self._buf.pop()

    def draw(self, span: int) -> int:
        product = self._raw() * span
        low = product & _M64
        if low < span:
            threshold = ((1 << 64) - span) % span
            while low < threshold:
                product = self._raw() * span
                low = product & _M64
        return product >> 64


def _int_input(c: Call, slot: str) -> np.ndarray:
    v = np.asarray(c.x(slot))
    if v.dtype not in (np.int32, np.int64):
        raise ExecutionError(f"op {c.op_type}: Input({slot}) holds the wrong type, it holds {v.dtype}, "
                             "but desires to be int32 or int64")
    return v


def _out_dtype(c: Call) -> np.dtype:
    value = c.attr("dtype", 2)
    dt = np_dtype(c, "dtype", value)
    if dt not in (np.int32, np.int64):
        raise c.unsupported("dtype", value, "the outputs are int32 (2) or int64 (3)")
    return dt


# --------------------------------------------------------------------------
# tdm_child
# --------------------------------------------------------------------------
def _tdm_child(c: Call):
    x = _int_input(c, "X")
    info = _int_input(c, "TreeInfo")
    if info.ndim != 2:
        raise ExecutionError(f"op tdm_child: TreeInfo must be 2-D, got shape {info.shape}")
    n = int(c.attr("child_nums"))
    dt = _out_dtype(c)
    nodes, length = info.shape
    ids = x.reshape(-1).astype(np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= nodes):
        raise ExecutionError(f"op tdm_child: input id expected >= 0 and < {nodes}, got "
                             f"{ids.min() if ids.min() < 0 else ids.max()}")
    flat = info.reshape(-1).astype(np.int64)
    first = ids * length + 3  # Paddle reads the first child id there, past the row if the row is short
    if np.any((ids != 0) & (first >= flat.size)):
        raise ExecutionError(f"op tdm_child: TreeInfo of shape {info.shape} holds no child ids")
    has = (ids != 0) & (flat[np.where(ids != 0, first, 0)] != 0)
    where = first[has, None] + np.arange(n)
    if where.size and where.max() >= flat.size:
        raise ExecutionError(f"op tdm_child: child_nums {n} reads past TreeInfo of shape {info.shape}")
    child = np.zeros((ids.size, n), np.int64)
    child[has] = flat[where]
    if child.size and (child.min() < 0 or child.max() >= nodes):
        raise ExecutionError(f"op tdm_child: TreeInfo holds child ids outside [0, {nodes})")
    mask = np.where(has[:, None], flat[child * length] != 0, False)
    shape = x.shape + (n,)
    return {"Child": child.reshape(shape).astype(dt), "LeafMask": mask.reshape(shape).astype(dt)}


def _tree():
    # node 0 padding; 1 root; 2, 3 layer 1; 4..7 leaves, items 10, 11, 12 (7 is no item)
    return np.array([[0, 0, 0, 0, 0], [0, 0, 0, 2, 3], [0, 1, 1, 4, 5], [0, 1, 1, 6, 7],
                     [10, 2, 2, 0, 0], [11, 2, 2, 0, 0], [12, 2, 3, 0, 0], [0, 2, 3, 0, 0]], np.int32)


def _child_samples(rng):
    return [
        Sample({"X": [np.array([[1], [2], [3], [5], [0]], np.int64)], "TreeInfo": [_tree()]},
               {"child_nums": 2, "dtype": 2}),
        Sample({"X": [np.array([3, 1, 2], np.int32)], "TreeInfo": [_tree().astype(np.int64)]},
               {"child_nums": 2, "dtype": 3}, note="int32 ids, int64 tree, int64 outputs"),
        Sample({"X": [np.array([[1, 2], [3, 0]], np.int64)], "TreeInfo": [_tree()]},
               {"child_nums": 1, "dtype": 2}, note="first child only, 2-D ids"),
    ]


register(paddle_opdef("tdm_child", _tdm_child, samples=_child_samples, attrs_handled=("child_nums", "dtype"),
                      doc="children of each tree node and whether each is an item"))


# --------------------------------------------------------------------------
# tdm_sampler
# --------------------------------------------------------------------------
def _tdm_sampler(c: Call):
    x = _int_input(c, "X").reshape(-1).astype(np.int64)
    travel = _int_input(c, "Travel")
    layer = _int_input(c, "Layer").reshape(-1).astype(np.int64)
    if travel.dtype != np.asarray(c.x("Layer")).dtype:
        raise ExecutionError(f"op tdm_sampler: Input(Travel) must hold the same type as Input(Layer), got "
                             f"{travel.dtype} and {np.asarray(c.x('Layer')).dtype}")
    dt = _out_dtype(c)
    positive = bool(c.attr("output_positive", True))
    negs = [int(v) for v in c.attr("neg_samples_num_list")]
    offs = [int(v) for v in c.attr("layer_offset")]
    seed = int(c.attr("seed", 0))
    if len(offs) < len(negs) + 1:
        raise ExecutionError(f"op tdm_sampler: layer_offset needs {len(negs) + 1} entries, got {len(offs)}")
    travel = travel.reshape(travel.shape[0], -1).astype(np.int64)
    if travel.shape[1] < len(negs):
        raise ExecutionError(f"op tdm_sampler: Travel has {travel.shape[1]} layers, {len(negs)} sampled")
    width = sum(negs) + len(negs) * int(positive)
    out = np.zeros((x.size, width), np.int64)
    label = np.zeros((x.size, width), np.int64)
    mask = np.ones((x.size, width), np.int64)
    if x.size and (x.min() < 0 or x.max() >= travel.shape[0]):
        raise ExecutionError(f"op tdm_sampler: input ids expected >= 0 and < {travel.shape[0]}, got "
                             f"[{x.min()}, {x.max()}]")
    if seed == 0:
        shared = IntDraws(engine(c, 0))
        draws = [shared] * len(negs)
    else:
        draws = [IntDraws(MT19937_64(seed)) for _ in negs]
    for i, xid in enumerate(x.tolist()):
        col = 0
        for l, k in enumerate(negs):
            lo, hi = offs[l], offs[l + 1]
            n = hi - lo
            if k > n - 1:
                raise ExecutionError(f"op tdm_sampler: Neg sample nums at layer {l} expected <= {n} - 1 "
                                     f"(positive included), got {k}")
            pos_id = int(travel[xid, l])
            step = k + int(positive)
            if pos_id == 0:  # padding
                mask[i, col:col + step] = 0
                col += step
                continue
            if not lo <= pos_id <= hi:
                raise ExecutionError(f"op tdm_sampler: positive node id at layer {l} expected >= {lo} and "
                                     f"<= {hi}, got {pos_id}")
            if positive:
                out[i, col], label[i, col] = pos_id, 1
                col += 1
            chosen: list[int] = []
            for _ in range(k):
                while True:
                    r = draws[l].draw(n)
                    if layer[lo + r] != pos_id and r not in chosen:
                        break
                chosen.append(r)
                node = int(layer[lo + r])
                if node > hi:
                    raise ExecutionError(f"op tdm_sampler: negative node id at layer {l} expected >= {lo} and "
                                         f"<= {hi}, got {node}")
                out[i, col] = node
                col += 1
    return {"Out": out.astype(dt), "Labels": label.astype(dt), "Mask": mask.astype(dt)}


def _sampler_samples(rng):
    travel = np.array([[1, 3], [1, 4], [2, 5], [2, 0]], np.int32)
    layer = np.array([1, 2, 3, 4, 5, 6], np.int32)
    x = np.array([[0], [1], [2], [3]], np.int64)
    base = {"output_positive": True, "neg_samples_num_list": [1, 2], "layer_offset": [0, 2, 6], "dtype": 2}
    return [
        Sample({"X": [x], "Travel": [travel], "Layer": [layer]}, {**base, "seed": 7}, note="seed 7: Paddle's draws"),
        Sample({"X": [x[::-1].copy()], "Travel": [travel.astype(np.int64)], "Layer": [layer.astype(np.int64)]},
               {**base, "seed": 3, "output_positive": False, "neg_samples_num_list": [1, 3], "dtype": 3},
               note="no positives, int64"),
    ]


register(paddle_opdef("tdm_sampler", _tdm_sampler, samples=_sampler_samples,
                      attrs_handled=("output_positive", "neg_samples_num_list", "layer_offset", "seed", "dtype"),
                      doc="positive and uniformly drawn negative tree nodes per layer"))
