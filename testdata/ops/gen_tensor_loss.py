#!/usr/bin/env python
"""Reference values for the tensor / loss / random op kernels, from a live
PaddlePaddle 3.3.1 (legacy ProgramDesc IR).

    FLAGS_enable_pir_api=0 /path/to/paddle-venv/bin/python testdata/ops/gen_tensor_loss.py

For every case one op is appended (``block.append_op``) to a fresh program
with its inputs as ``static.data`` vars. When the case has loss slots, the
loss is ``sum_i reduce_sum(out_i * cot_i)`` with random cotangents ``cot_i``
fed as data, and ``append_backward`` is run, so the fetched ``<input>@GRAD``
are the vector-Jacobian products of Paddle's own grad kernels. The grad ops
Paddle created for the op are recorded with symbolic var names
(``in:X:0``, ``out:Out:0``, ``d(in:X:0)``, ``d(out:Out:0)``, ``@EMPTY@``).

Writes ``tensor_loss.json`` (op, attrs as Paddle stored them, slot -> array keys,
grad ops) and ``tensor_loss.npz`` (inputs, outputs, cotangents, grads) next to
this script. Tests read them with NumPy only; Paddle is never imported there.
"""
from __future__ import annotations

import os
import sys

if os.environ.get("FLAGS_enable_pir_api") != "0":
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
              dict(os.environ, FLAGS_enable_pir_api="0"))

import json  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

warnings.filterwarnings("ignore")
import paddle  # noqa: E402
from paddle import static  # noqa: E402
from paddle.base.layer_helper import LayerHelper  # noqa: E402
from paddle.base.proto import framework_pb2  # noqa: E402

paddle.enable_static()
HERE = os.path.dirname(os.path.abspath(__file__))
NOISE = {"op_callstack", "op_namescope", "op_device", "with_quant_attr", "op_role_var",
         "op_role", "use_mkldnn", "use_onednn", "onednn_data_type", "mkldnn_data_type",
         "use_cudnn", "use_quantizer"}
F32 = np.float32
I64 = np.int64
R = np.random.RandomState(7)


def randn(*shape, dtype=F32):
    return R.standard_normal(shape).astype(dtype)


def uniform(lo, hi, *shape, dtype=F32):
    return R.uniform(lo, hi, shape).astype(dtype)


CASES: list[dict] = []


def case(name, op, inputs, attrs=None, outputs=None, loss=(), stop=(), run=True):
    """inputs: slot -> [arrays]; outputs: slot -> n | (n, dtype); loss: output
    slots (or 'slot:i') that the loss reads; stop: input 'slot' / 'slot:i'
    with stop_gradient=True (integer and bool inputs always are)."""
    CASES.append(dict(name=name, op=op, inputs=inputs, attrs=attrs or {},
                      outputs=outputs or {"Out": 1}, loss=tuple(loss), stop=set(stop), run=run))


# ------------------------------------------------------------------ tensor
x34 = randn(3, 4)
case("fill_constant_f32", "fill_constant", {}, {"shape": [2, 3], "dtype": 5, "value": 1.5})
case("fill_constant_str_i64", "fill_constant", {}, {"shape": [2], "dtype": 3, "value": 0.0, "str_value": "7.9"},
     {"Out": (1, "int64")})
case("fill_constant_f64_value", "fill_constant", {}, {"shape": [2], "dtype": 6, "value": 0.1}, {"Out": (1, "float64")})
case("fill_constant_f64_str", "fill_constant", {}, {"shape": [2], "dtype": 6, "value": 0.1, "str_value": "0.1"},
     {"Out": (1, "float64")})
case("fill_constant_scalar_shape", "fill_constant", {}, {"shape": [], "dtype": 5, "value": -2.0})
case("fill_constant_bool", "fill_constant", {}, {"shape": [3], "dtype": 0, "value": 1.0}, {"Out": (1, "bool")})
case("fill_constant_value_tensor", "fill_constant", {"ValueTensor": [np.array([4.25], F32)]},
     {"shape": [2, 2], "dtype": 5, "value": 1.0})
case("fill_constant_shape_tensor", "fill_constant", {"ShapeTensor": [np.array([2, 3], I64)]},
     {"shape": [7], "dtype": 5, "value": 3.0})
case("fill_constant_shape_list", "fill_constant", {"ShapeTensorList": [np.array([2], I64), np.array([1], np.int32)]},
     {"shape": [7], "dtype": 5, "value": 3.0})
case("fill_any_like", "fill_any_like", {"X": [x34]}, {"value": 2.5, "dtype": -1})
case("fill_any_like_i64", "fill_any_like", {"X": [x34]}, {"value": 3.0, "dtype": 3}, {"Out": (1, "int64")})
case("assign", "assign", {"X": [randn(2, 3)]}, loss=["Out"])
case("assign_value_f32", "assign_value", {}, {"shape": [2, 2], "dtype": 5, "values": [1.5, -2.0, 3.0, 0.25]})
case("assign_value_i64", "assign_value", {}, {"shape": [3], "dtype": 3, "values": [1, -5, 2 ** 40]},
     {"Out": (1, "int64")})
case("assign_value_bool", "assign_value", {}, {"shape": [2], "dtype": 0, "values": [True, False]},
     {"Out": (1, "bool")})
case("cast_f32_f64", "cast", {"X": [randn(2, 3)]}, {"in_dtype": 5, "out_dtype": 6}, {"Out": (1, "float64")},
     loss=["Out"])
case("cast_f32_i32", "cast", {"X": [np.array([-1.7, 2.5, 0.0, 300.0, -0.2], F32)]},
     {"in_dtype": 5, "out_dtype": 2}, {"Out": (1, "int32")})
case("cast_f32_u8", "cast", {"X": [np.array([-1.7, 2.5, 0.0, 300.0, 255.9], F32)]},
     {"in_dtype": 5, "out_dtype": 20}, {"Out": (1, "uint8")})
case("cast_f32_bool", "cast", {"X": [np.array([-1.7, 0.0, 0.3], F32)]}, {"in_dtype": 5, "out_dtype": 0},
     {"Out": (1, "bool")})
case("cast_i64_f32", "cast", {"X": [np.array([3, -4, 2 ** 25 + 1], I64)]}, {"in_dtype": 3, "out_dtype": 5})
case("shape", "shape", {"Input": [randn(3, 1, 4)]}, {}, {"Out": (1, "int32")})
case("reshape2_attr", "reshape2", {"X": [randn(3, 4)]}, {"shape": [0, 2, -1]}, {"Out": 1, "XShape": 1}, ["Out"])
case("reshape2_shape_tensor", "reshape2", {"X": [randn(3, 4)], "Shape": [np.array([2, -1], np.int32)]},
     {"shape": [12]}, {"Out": 1, "XShape": 1}, ["Out"])
case("reshape2_shape_list", "reshape2", {"X": [randn(3, 4)], "ShapeTensor": [np.array([4], np.int32),
                                                                             np.array([-1], I64)]},
     {"shape": [12]}, {"Out": 1, "XShape": 1}, ["Out"])
case("transpose2", "transpose2", {"X": [randn(2, 3, 4)]}, {"axis": [2, 0, 1]}, {"Out": 1, "XShape": 1}, ["Out"])
case("transpose2_neg", "transpose2", {"X": [randn(2, 3, 4)]}, {"axis": [-1, 1, 0]}, {"Out": 1, "XShape": 1}, ["Out"])
case("squeeze2_axes", "squeeze2", {"X": [randn(3, 1, 4, 1)]}, {"axes": [1, 0]}, {"Out": 1, "XShape": 1}, ["Out"])
case("squeeze2_all", "squeeze2", {"X": [randn(1, 3, 1, 4, 1)]}, {"axes": []}, {"Out": 1, "XShape": 1}, ["Out"])
case("squeeze2_neg", "squeeze2", {"X": [randn(3, 1, 4, 1)]}, {"axes": [-1]}, {"Out": 1, "XShape": 1}, ["Out"])
case("unsqueeze2", "unsqueeze2", {"X": [randn(3, 4)]}, {"axes": [-1, 0, -2]}, {"Out": 1, "XShape": 1}, ["Out"])
case("unsqueeze2_dup", "unsqueeze2", {"X": [randn(3, 4)]}, {"axes": [1, 1]}, {"Out": 1, "XShape": 1}, ["Out"])
case("unsqueeze2_axes_tensor", "unsqueeze2", {"X": [randn(3, 4)], "AxesTensor": [np.array([2, 0], np.int32)]},
     {"axes": [5]}, {"Out": 1, "XShape": 1}, ["Out"])
case("flatten_1_2", "flatten_contiguous_range", {"X": [randn(2, 3, 4, 2)]}, {"start_axis": 1, "stop_axis": 2},
     {"Out": 1, "XShape": 1}, ["Out"])
case("flatten_all", "flatten_contiguous_range", {"X": [randn(2, 3, 4)]}, {"start_axis": 0, "stop_axis": -1},
     {"Out": 1, "XShape": 1}, ["Out"])
case("flatten_0d", "flatten_contiguous_range", {"X": [np.array(3.0, F32)]}, {"start_axis": 0, "stop_axis": -1},
     {"Out": 1, "XShape": 1})
case("concat", "concat", {"X": [randn(2, 3), randn(2, 2), randn(2, 1)]}, {"axis": 1}, loss=["Out"])
case("concat_neg_stop", "concat", {"X": [randn(2, 3), randn(2, 2)]}, {"axis": -1}, loss=["Out"], stop=["X:1"])
case("concat_axis_tensor", "concat", {"X": [randn(2, 3), randn(1, 3)], "AxisTensor": [np.array([0], np.int32)]},
     {"axis": 1}, loss=["Out"])
case("split_num", "split", {"X": [randn(2, 6)]}, {"axis": 1, "num": 3}, {"Out": 3}, ["Out"])
case("split_sections", "split", {"X": [randn(5, 2)]}, {"axis": 0, "sections": [2, -1, 1]}, {"Out": 3}, ["Out"])
case("split_unused", "split", {"X": [randn(2, 4)]}, {"axis": 1, "num": 2}, {"Out": 2}, ["Out:1"])
case("split_axis_tensor", "split", {"X": [randn(2, 4)], "AxisTensor": [np.array([1], np.int32)]},
     {"axis": 0, "num": 2}, {"Out": 2}, ["Out"])
case("slice_decrease", "slice", {"Input": [randn(3, 4, 5)]},
     {"axes": [0, 2], "starts": [1, -3], "ends": [2, 100], "decrease_axis": [0], "infer_flags": [1, 1]},
     loss=["Out"])
case("slice_decrease_all", "slice", {"Input": [randn(3, 4)]},
     {"axes": [0, 1], "starts": [1, 2], "ends": [2, 3], "decrease_axis": [0, 1], "infer_flags": [1, 1]}, loss=["Out"])
case("slice_empty", "slice", {"Input": [randn(3, 4)]}, {"axes": [1], "starts": [3], "ends": [1]})
# Paddle 3.3.1's slice kernel ignores a negative axis (Out == Input) and slice_grad
# segfaults on it; pybackward rejects negative axes (tests/ops/test_tensor_shape_index.py checks both).
case("slice_neg_axis", "slice", {"Input": [randn(3, 4)]}, {"axes": [-1], "starts": [1], "ends": [-1]})
case("slice_tensors", "slice", {"Input": [randn(3, 6)], "StartsTensor": [np.array([1, 2], I64)],
                                "EndsTensorList": [np.array([3], I64), np.array([-1], np.int32)]},
     {"axes": [0, 1], "starts": [0, 0], "ends": [1, 1], "infer_flags": [-1, -1]}, loss=["Out"])
case("gather", "gather", {"X": [randn(5, 3)], "Index": [np.array([4, 0, 4, 2], I64)]}, {}, loss=["Out"])
case("gather_axis1", "gather", {"X": [randn(2, 5, 3)], "Index": [np.array([1, 3, 1], np.int32)]}, {"axis": 1},
     loss=["Out"])
case("gather_axis_tensor", "gather", {"X": [randn(2, 5)], "Index": [np.array([0, 4], I64)],
                                      "Axis": [np.array([1], np.int32)]}, {"axis": 0}, loss=["Out"])
case("gather_scalar_index", "gather", {"X": [randn(3, 4)], "Index": [np.array(2, I64)]}, {}, loss=["Out"])
case("gather_neg_index", "gather", {"X": [randn(3, 4)], "Index": [np.array([-1, 1], I64)]}, {}, loss=["Out"])
case("gather_nd", "gather_nd", {"X": [randn(3, 4, 5)], "Index": [np.array([[0, 1], [2, 3], [0, 1]], I64)]},
     loss=["Out"])
case("gather_nd_full", "gather_nd", {"X": [randn(3, 4)], "Index": [np.array([[[0, 1]], [[2, 3]]], I64)]},
     loss=["Out"])
case("index_select", "index_select", {"X": [randn(3, 5)], "Index": [np.array([4, 0, 4], I64)]}, {"dim": 1},
     loss=["Out"])
case("index_select_neg_dim", "index_select", {"X": [randn(3, 5)], "Index": [np.array([2, 1], np.int32)]},
     {"dim": -2}, loss=["Out"])
upd = randn(3, 4)
case("scatter_overwrite", "scatter", {"X": [randn(5, 4)], "Ids": [np.array([3, 0, 3], I64)], "Updates": [upd]},
     {"overwrite": True}, loss=["Out"])
case("scatter_add", "scatter", {"X": [randn(5, 4)], "Ids": [np.array([3, 0, 3], I64)], "Updates": [upd]},
     {"overwrite": False}, loss=["Out"])
case("stack", "stack", {"X": [randn(2, 3), randn(2, 3), randn(2, 3)]}, {"axis": 1}, {"Y": 1}, ["Y"])
case("stack_neg_stop", "stack", {"X": [randn(2, 3), randn(2, 3)]}, {"axis": -1}, {"Y": 1}, ["Y"], stop=["X:0"])
case("unstack", "unstack", {"X": [randn(2, 3, 4)]}, {"axis": 1, "num": 3}, {"Y": 3}, ["Y"])
case("unstack_unused", "unstack", {"X": [randn(3, 2)]}, {"axis": 0, "num": 3}, {"Y": 3}, ["Y:1"])
case("expand_v2", "expand_v2", {"X": [randn(3, 1)]}, {"shape": [2, -1, 4]}, loss=["Out"])
case("expand_v2_shape_tensor", "expand_v2", {"X": [randn(1, 4)], "Shape": [np.array([3, 4], np.int32)]},
     {"shape": [1, 1]}, loss=["Out"])
case("tile", "tile", {"X": [randn(2, 3)]}, {"repeat_times": [2, 1, 3]}, loss=["Out"])
case("tile_short", "tile", {"X": [randn(2, 3)]}, {"repeat_times": [2]}, loss=["Out"])
case("tile_tensor", "tile", {"X": [randn(2, 3)], "RepeatTimes": [np.array([3, 2], np.int32)]},
     {"repeat_times": [1]}, loss=["Out"])
cond = np.array([[True, False, True], [False, False, True]])
case("where", "where", {"Condition": [cond], "X": [randn(2, 3)], "Y": [randn(2, 3)]}, loss=["Out"])
case("where_stop_y", "where", {"Condition": [cond], "X": [randn(2, 3)], "Y": [randn(2, 3)]}, loss=["Out"],
     stop=["Y"])
tk = np.array([[0.3, -1.2, 2.5, 0.7, 1.1, -0.4], [1.5, 0.2, -0.8, 2.2, -1.9, 0.9]], F32)
case("top_k_v2", "top_k_v2", {"X": [tk]}, {"k": 3}, {"Out": 1, "Indices": (1, "int64")}, ["Out"])
case("top_k_v2_smallest_axis0", "top_k_v2", {"X": [tk]}, {"k": 1, "axis": 0, "largest": False},
     {"Out": 1, "Indices": (1, "int64")}, ["Out"])
case("top_k_v2_k_tensor", "top_k_v2", {"X": [tk], "K": [np.array([2], np.int32)]}, {"k": 5},
     {"Out": 1, "Indices": (1, "int64")}, ["Out"])
# ties and sorted=False: Paddle's order comes from libstdc++'s nth_element /
# sort / partial_sort (partial_sort when k * 64 < width)
tie_rows = np.array([[3, 1, 3, 2, 1, 3, 0, 2, 2, 3], [1, 1, 1, 0, 0, 2, 2, 1, 0, 2]], F32)
case("top_k_v2_ties", "top_k_v2", {"X": [tie_rows]}, {"k": 6}, {"Out": 1, "Indices": (1, "int64")}, ["Out"])
case("top_k_v2_ties_smallest_axis0", "top_k_v2", {"X": [tie_rows.T.copy()]}, {"k": 4, "axis": 0, "largest": False},
     {"Out": 1, "Indices": (1, "int64")}, ["Out"])
case("top_k_v2_unsorted", "top_k_v2", {"X": [R.permutation(40).reshape(2, 20).astype(F32)]},
     {"k": 7, "sorted": False}, {"Out": 1, "Indices": (1, "int64")}, ["Out"])
case("top_k_v2_partial_sort_ties", "top_k_v2",
     {"X": [R.randint(0, 5, (3, 200)).astype(F32)]}, {"k": 3}, {"Out": 1, "Indices": (1, "int64")}, ["Out"])
case("top_k_v2_unsorted_ties", "top_k_v2", {"X": [R.randint(0, 6, (4, 30)).astype(F32)]},
     {"k": 9, "sorted": False, "largest": False}, {"Out": 1, "Indices": (1, "int64")}, ["Out"])
case("one_hot_v2", "one_hot_v2", {"X": [np.array([[1], [3], [0]], I64)]}, {"depth": 4})
case("one_hot_v2_f64", "one_hot_v2", {"X": [np.array([2, 0], np.int32)]}, {"depth": 3, "dtype": 6},
     {"Out": (1, "float64")})
am = np.array([[0.5, 2.0, 2.0, -1.0], [3.0, 1.0, 0.0, 3.0], [-1.0, -2.0, 0.5, 0.4]], F32)
case("arg_max", "arg_max", {"X": [am]}, {"axis": 1}, {"Out": (1, "int64")})
case("arg_max_keep_i32", "arg_max", {"X": [am]}, {"axis": -2, "keepdims": True, "dtype": 2}, {"Out": (1, "int32")})
case("arg_max_flatten", "arg_max", {"X": [am]}, {"axis": 0, "flatten": True}, {"Out": (1, "int64")})
case("arg_max_flatten_keep", "arg_max", {"X": [am]}, {"axis": 0, "flatten": True, "keepdims": True},
     {"Out": (1, "int64")})
case("range_f32", "range", {"Start": [np.array([0.0], F32)], "End": [np.array([1.0], F32)],
                            "Step": [np.array([0.1], F32)]})
case("range_i64_neg", "range", {"Start": [np.array([5], I64)], "End": [np.array([-4], I64)],
                                "Step": [np.array([-3], I64)]}, {}, {"Out": (1, "int64")})
case("range_empty", "range", {"Start": [np.array([0.0], F32)], "End": [np.array([5.0], F32)],
                              "Step": [np.array([-1.0], F32)]})
emb = randn(6, 4)
case("lookup_table_v2", "lookup_table_v2", {"W": [emb], "Ids": [np.array([[1, 5], [1, 0]], I64)]}, {},
     loss=["Out"])
case("lookup_table_v2_padding", "lookup_table_v2", {"W": [emb], "Ids": [np.array([2, 0, 2, 3], I64)]},
     {"padding_idx": 2}, loss=["Out"])
case("increment_f32", "increment", {"X": [np.array([1.5], F32)]}, {"step": 2.0}, loss=["Out"])
case("increment_i64", "increment", {"X": [np.array([3], I64)]}, {"step": 2.7}, {"Out": (1, "int64")})

# -------------------------------------------------------------------- loss
logits = randn(4, 5)
hard = np.array([[1], [4], [0], [2]], I64)
soft = R.dirichlet(np.ones(5), size=4).astype(F32)
SWCE = {"Softmax": 1, "Loss": 1}
case("swce_hard", "softmax_with_cross_entropy", {"Logits": [logits], "Label": [hard]}, {}, SWCE, ["Loss"])
case("swce_ignore", "softmax_with_cross_entropy",
     {"Logits": [logits], "Label": [np.array([[1], [-1], [0], [-1]], I64)]}, {"ignore_index": -1}, SWCE, ["Loss"])
case("swce_soft", "softmax_with_cross_entropy", {"Logits": [logits], "Label": [soft]}, {"soft_label": True},
     SWCE, ["Loss"], stop=["Label"])
case("swce_axis1", "softmax_with_cross_entropy", {"Logits": [randn(2, 3, 4)],
                                                 "Label": [np.array([[[0, 2, 1, 2]], [[1, 1, 0, 2]]], I64)]},
     {"axis": 1}, SWCE, ["Loss"])
probs = R.dirichlet(np.ones(5), size=4).astype(F32)
case("swce_no_softmax", "softmax_with_cross_entropy", {"Logits": [probs], "Label": [hard]}, {"use_softmax": False},
     SWCE, ["Loss"])
case("swce_no_softmax_soft", "softmax_with_cross_entropy", {"Logits": [probs], "Label": [soft]},
     {"use_softmax": False, "soft_label": True}, SWCE, ["Loss"], stop=["Label"])
case("swce_extreme", "softmax_with_cross_entropy", {"Logits": [np.array([[0.0, 80.0, -30.0], [100.0, 0.0, 1.0]], F32)],
                                                   "Label": [np.array([[0], [1]], I64)]}, {}, SWCE, ["Loss"])
CE2 = {"Y": 1, "MatchX": 1, "XShape": 1}
case("cross_entropy2", "cross_entropy2", {"X": [probs], "Label": [hard]}, {}, CE2, ["Y"])
case("cross_entropy2_ignore", "cross_entropy2", {"X": [probs], "Label": [np.array([[1], [7], [0], [7]], I64)]},
     {"ignore_index": 7}, CE2, ["Y"])
sx = randn(3, 4) * 2
slab = R.uniform(0, 1, (3, 4)).astype(F32)
case("sigmoid_ce", "sigmoid_cross_entropy_with_logits", {"X": [sx], "Label": [slab]}, {}, loss=["Out"],
     stop=["Label"])
lab_ign = slab.copy()
lab_ign[0, 1] = -100.0
lab_ign[2, 3] = -100.0
case("sigmoid_ce_normalize", "sigmoid_cross_entropy_with_logits", {"X": [sx], "Label": [lab_ign]},
     {"normalize": True}, loss=["Out"], stop=["Label"])
case("sigmoid_ce_pos_weight", "sigmoid_cross_entropy_with_logits",
     {"X": [sx], "Label": [slab], "pos_weight": [uniform(0.5, 2.0, 3, 4)]}, {}, loss=["Out"],
     stop=["Label", "pos_weight"])
hx, hy = randn(4, 1), randn(4, 1)
hy[0] = hx[0] + 2.5  # |residual| > delta
case("huber_loss", "huber_loss", {"X": [hx], "Y": [hy]}, {"delta": 1.0}, {"Out": 1, "Residual": 1}, ["Out"])
case("huber_loss_stop_y", "huber_loss", {"X": [hx], "Y": [hy]}, {"delta": 0.5}, {"Out": 1, "Residual": 1},
     ["Out"], stop=["Y"])
case("label_smooth", "label_smooth", {"X": [soft]}, {"epsilon": 0.1}, loss=["Out"])
case("label_smooth_prior", "label_smooth", {"X": [soft], "PriorDist": [R.dirichlet(np.ones(5), 1).astype(F32)]},
     {"epsilon": 0.25}, loss=["Out"], stop=["PriorDist"])

# ------------------------------------------------------------------ random
case("uniform_random", "uniform_random", {}, {"shape": [4, 5], "min": -2.0, "max": 3.0, "seed": 17, "dtype": 5})
case("uniform_random_f64", "uniform_random", {}, {"shape": [7], "min": 0.0, "max": 1.0, "seed": 3, "dtype": 6},
     {"Out": (1, "float64")})
case("uniform_random_diag", "uniform_random", {}, {"shape": [3, 4], "seed": 5, "dtype": 5, "diag_num": 3,
                                                   "diag_step": 4, "diag_val": 9.0})
# ShapeTensor is used only when the shape attr is empty; ShapeTensorList always wins
case("uniform_random_shape_tensor", "uniform_random", {"ShapeTensor": [np.array([2, 3], I64)]},
     {"shape": [1], "seed": 11, "dtype": 5})
case("uniform_random_shape_tensor_no_attr", "uniform_random", {"ShapeTensor": [np.array([2, 3], I64)]},
     {"shape": [], "seed": 11, "dtype": 5})
case("uniform_random_shape_list", "uniform_random", {"ShapeTensorList": [np.array([2], I64), np.array([2], I64)]},
     {"shape": [1], "seed": 12, "dtype": 5})
case("gaussian_random_shape_tensor", "gaussian_random", {"ShapeTensor": [np.array([3, 2], I64)]},
     {"shape": [4], "seed": 13, "dtype": 5})
case("gaussian_random_shape_list", "gaussian_random", {"ShapeTensorList": [np.array([3], I64), np.array([1], I64)]},
     {"shape": [4], "seed": 13, "dtype": 5})
case("gaussian_random", "gaussian_random", {}, {"shape": [5, 7], "mean": 1.0, "std": 2.0, "seed": 23, "dtype": 5})
case("gaussian_random_odd", "gaussian_random", {}, {"shape": [9], "seed": 2024, "dtype": 5})
case("gaussian_random_f64", "gaussian_random", {}, {"shape": [6], "mean": -1.0, "std": 0.5, "seed": 9, "dtype": 6},
     {"Out": (1, "float64")})
case("truncated_gaussian_random", "truncated_gaussian_random", {},
     {"shape": [6, 5], "mean": 0.5, "std": 2.0, "seed": 31, "dtype": 5})
case("truncated_gaussian_random_ab", "truncated_gaussian_random", {},
     {"shape": [40], "mean": 0.0, "std": 1.0, "a": -0.5, "b": 1.5, "seed": 4, "dtype": 5})
case("seed", "seed", {}, {"seed": 1234}, {"Out": (1, "int32")})
dx = randn(4, 6)
DROP = {"Out": 1, "Mask": (1, "uint8")}
case("dropout_fix_seed", "dropout", {"X": [dx]}, {"dropout_prob": 0.35, "fix_seed": True, "seed": 77}, DROP, ["Out"])
case("dropout_upscale", "dropout", {"X": [dx]}, {"dropout_prob": 0.35, "fix_seed": True, "seed": 77,
                                                 "dropout_implementation": "upscale_in_train"}, DROP, ["Out"])
case("dropout_seed_input", "dropout", {"X": [dx], "Seed": [np.array([77], np.int32)]},
     {"dropout_prob": 0.35}, DROP, ["Out"])
case("dropout_is_test", "dropout", {"X": [dx]}, {"dropout_prob": 0.35, "is_test": True}, DROP)
case("dropout_is_test_upscale", "dropout", {"X": [dx]}, {"dropout_prob": 0.35, "is_test": True,
                                                         "dropout_implementation": "upscale_in_train"}, DROP)
case("dropout_p1", "dropout", {"X": [dx]}, {"dropout_prob": 1.0, "fix_seed": True, "seed": 3,
                                            "dropout_implementation": "upscale_in_train"}, DROP, ["Out"])


# --------------------------------------------------------------------------
def _jsonable(v):
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return repr(v)


def _proto_scalar(v):
    if v.type == framework_pb2.Scalar.BOOLEAN:
        return v.b
    if v.type == framework_pb2.Scalar.LONG:
        return v.i
    if v.type == framework_pb2.Scalar.FLOAT64:
        return v.r
    return [v.c.r, v.c.i]


def _proto_attr(a):
    """An OpDesc.Attr's value by its declared type (as pybackward decodes it)."""
    T = framework_pb2.AttrType
    simple = {T.INT: "i", T.FLOAT: "f", T.STRING: "s", T.BOOLEAN: "b", T.LONG: "l", T.FLOAT64: "float64",
              T.BLOCK: "block_idx", T.VAR: "var_name"}
    lists = {T.INTS: "ints", T.FLOATS: "floats", T.STRINGS: "strings", T.BOOLEANS: "bools",
             T.LONGS: "longs", T.FLOAT64S: "float64s", T.BLOCKS: "blocks_idx", T.VARS: "vars_name"}
    if a.type in simple:
        return getattr(a, simple[a.type])
    if a.type in lists:
        return list(getattr(a, lists[a.type]))
    if a.type == T.SCALAR:
        return _proto_scalar(a.scalar)
    if a.type == T.SCALARS:
        return [_proto_scalar(v) for v in a.scalars]
    raise TypeError(f"attr {a.name}: unknown type {a.type}")


def build_and_run(c, out_shapes=None):
    """Build and run the case; with `out_shapes` (runtime output shapes from a
    first, forward-only run) also the loss and its backward."""
    c = dict(c, loss=c["loss"] if out_shapes is not None else ())
    main, startup = static.Program(), static.Program()
    arrays: dict[str, np.ndarray] = {}
    with static.program_guard(main, startup):
        helper = LayerHelper(c["op"])
        ins, feed, in_keys, in_names = {}, {}, {}, {}
        for slot, arrs in c["inputs"].items():
            ins[slot], in_keys[slot] = [], []
            for i, a in enumerate(arrs):
                name = f"in_{slot}_{i}"
                v = static.data(name, list(a.shape), str(a.dtype))
                v.stop_gradient = (not np.issubdtype(a.dtype, np.floating)) or slot in c["stop"] \
                    or f"{slot}:{i}" in c["stop"]
                ins[slot].append(v)
                feed[name] = a
                key = f"{c['name']}/in/{slot}/{i}"
                arrays[key] = a
                in_keys[slot].append(key)
                in_names[name] = f"in:{slot}:{i}"
        outs, out_names = {}, {}
        for slot, spec in c["outputs"].items():
            n, dt = spec if isinstance(spec, tuple) else (spec, "float32")
            outs[slot] = [helper.create_variable_for_type_inference(dt) for _ in range(n)]
            for i, v in enumerate(outs[slot]):
                out_names[v.name] = f"out:{slot}:{i}"
        helper.append_op(type=c["op"], inputs=ins, outputs=outs, attrs=dict(c["attrs"]))
        fwd_op = main.global_block().ops[-1]
        if out_shapes is not None:  # compile-time shapes can be off when a shape comes from a tensor
            for (slot, i), shp in out_shapes.items():
                outs[slot][i].desc.set_shape(list(shp))
        cots = {}
        terms = []
        for spec in c["loss"]:
            slot, _, idx = spec.partition(":")
            vs = list(enumerate(outs[slot])) if not idx else [(int(idx), outs[slot][int(idx)])]
            for i, v in vs:
                cname = f"cot_{slot}_{i}"
                cv = static.data(cname, list(out_shapes[(slot, i)]), v.dtype)
                cv.stop_gradient = True
                carr = R.standard_normal(out_shapes[(slot, i)]).astype(str(v.dtype).replace("paddle.", ""))
                feed[cname] = carr
                cots[f"{slot}:{i}"] = carr
                m = helper.create_variable_for_type_inference(v.dtype)
                helper.append_op(type="elementwise_mul", inputs={"X": [v], "Y": [cv]}, outputs={"Out": [m]},
                                 attrs={"axis": -1})
                s = helper.create_variable_for_type_inference(v.dtype)
                helper.append_op(type="reduce_sum", inputs={"X": [m]}, outputs={"Out": [s]},
                                 attrs={"dim": [], "keep_dim": False, "reduce_all": True})
                terms.append(s)
        if terms:
            if len(terms) > 1:
                loss = helper.create_variable_for_type_inference(terms[0].dtype)
                helper.append_op(type="sum", inputs={"X": terms}, outputs={"Out": [loss]})
            else:
                loss = terms[0]
            paddle.static.append_backward(loss)

    # attrs as Paddle serialized them (including "extra" ones like fix_seed)
    desc = framework_pb2.OpDesc.FromString(fwd_op.desc.serialize_to_string())
    attrs = {a.name: _proto_attr(a) for a in desc.attrs if a.name not in NOISE}

    grad_ops = []
    if terms:
        sym = dict(in_names)
        sym.update(out_names)
        for k, v in list(sym.items()):
            sym[k + "@GRAD"] = f"d({v})"
        sym["@EMPTY@"] = "@EMPTY@"
        fwd_grads_out = {k + "@GRAD" for k in out_names}
        fwd_grads_in = {k + "@GRAD" for k in in_names}
        pdesc = framework_pb2.ProgramDesc.FromString(main.desc.serialize_to_string())
        lod_set = {v.name: v.type.dense_tensor.HasField("legacy_lod_level") for v in pdesc.blocks[0].vars
                   if v.name.endswith("@GRAD") and v.type.HasField("dense_tensor")}
        started = False
        for op in main.global_block().ops:
            if op.type == "fill_constant" and op.attr("op_role") == 257:
                started = True
                continue
            if not started:
                continue
            ins_ = {s: op.input(s) for s in op.input_names}
            outs_ = {s: op.output(s) for s in op.output_names}
            reads = {a for v in ins_.values() for a in v}
            writes = {a for v in outs_.values() for a in v}
            relevant = (reads & fwd_grads_out) or (writes & fwd_grads_in) or \
                (op.type == "fill_any_like" and writes & fwd_grads_out) or \
                (op.type == c["op"] and not (reads & fwd_grads_out))  # increment's reverse op
            if not relevant:
                continue
            gattrs = {k: _jsonable(op.attr(k)) for k in op.attr_names if k not in NOISE}
            # does Paddle's shape inference of this grad op write legacy_lod_level
            # on the grad vars it outputs? (-> OpDef.sets_lod_level)
            lod = {sym.get(a, "?" + a): lod_set[a] for v in outs_.values() for a in v if a in lod_set}
            grad_ops.append({"type": op.type, "lod_level_set": lod,
                             "inputs": {s: [sym.get(a, "?" + a) for a in v] for s, v in ins_.items()},
                             "outputs": {s: [sym.get(a, "?" + a) for a in v] for s, v in outs_.items()},
                             "attrs": gattrs})

    fetch_out = [(slot, i, v.name) for slot in outs if slot != "XShape" for i, v in enumerate(outs[slot])]
    fetch_grad = []
    if terms:
        blk = main.global_block()
        for slot, vs in ins.items():
            for i, v in enumerate(vs):
                if not v.stop_gradient and blk.has_var(v.name + "@GRAD"):
                    fetch_grad.append((slot, i, v.name + "@GRAD"))
    exe = paddle.static.Executor(paddle.CPUPlace())
    res = exe.run(main, feed=feed, fetch_list=[n for *_, n in fetch_out + fetch_grad])
    out_keys, grad_keys, cot_keys = {}, {}, {}
    for (slot, i, _), r in zip(fetch_out + fetch_grad, res):
        if r is None:  # not written by the kernel (dropout's Mask when is_test)
            continue
        is_grad = (slot, i, _) in fetch_grad
        key = f"{c['name']}/{'grad' if is_grad else 'out'}/{slot}/{i}"
        arrays[key] = np.asarray(r)
        if is_grad:
            grad_keys.setdefault(slot, {})[str(i)] = key
        else:
            out_keys.setdefault(slot, []).append(key)
    for k, carr in cots.items():
        slot, i = k.split(":")
        key = f"{c['name']}/cot/{slot}/{i}"
        arrays[key] = carr
        cot_keys.setdefault(slot, {})[i] = key
    sym_fwd = dict(in_names)
    sym_fwd.update(out_names)
    meta = {"name": c["name"], "op": c["op"], "attrs": attrs, "inputs": in_keys, "outputs": out_keys,
            # the forward op's slots as Paddle wrote them (empty optional slots included)
            "fwd_inputs": {s: [sym_fwd[a] for a in fwd_op.input(s)] for s in fwd_op.input_names},
            "fwd_outputs": {s: [sym_fwd[a] for a in fwd_op.output(s)] for s in fwd_op.output_names},
            "output_counts": {s: len(v) for s, v in outs.items()},
            "stop_gradient": sorted(f"{s}:{i}" for s, vs in ins.items() for i, v in enumerate(vs)
                                    if v.stop_gradient),
            "cotangents": cot_keys, "grads": grad_keys, "grad_ops": grad_ops}
    return meta, arrays


def main():
    metas, arrays = [], {}
    for c in CASES:
        meta, arrs = build_and_run(c)
        if c["loss"]:
            shapes = {(s, i): arrs[k].shape for s, ks in meta["outputs"].items() for i, k in enumerate(ks)}
            meta, arrs = build_and_run(c, shapes)
        metas.append(meta)
        arrays.update(arrs)
        print(f"{c['name']:32s} {c['op']:36s} grad ops: {[g['type'] for g in meta['grad_ops']]}")
    with open(os.path.join(HERE, "tensor_loss.json"), "w") as f:
        json.dump({"paddle": paddle.__version__, "cases": metas}, f, indent=1, sort_keys=True)
    np.savez_compressed(os.path.join(HERE, "tensor_loss.npz"), **arrays)
    print(f"{len(metas)} cases, {len(arrays)} arrays")


if __name__ == "__main__":
    main()
