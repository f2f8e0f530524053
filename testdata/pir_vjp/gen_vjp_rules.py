#!/usr/bin/env python
"""Generate `pybackward/data/pir_vjp_rules.json`: what each PIR op's VJP rule emits, per Paddle 3.3.1.

Paddle's PIR gradient pass (`paddle.autograd.ir_backward`) differentiates one
forward op by calling its C++ VJP rule, `core.call_vjp(op, inputs, outputs,
out_grads, stop_gradients)`, which appends grad ops to the block and returns
one gradient value (or None) per differentiable input. pybackward's own PIR
pass must append the same ops; this script records, for every op Paddle 3.3.1
reports `core.has_vjp` for, what its rule appends, as data:

- the ops in order, each with its operands' sources (forward input i / its
  element k, forward output j, out_grad j, a result of an earlier appended
  op), its attributes (copied from a forward attribute, or a constant written
  as a PIR file writes it: `full` / `full_int_array` constants carry their
  value this way), its results' types (the type of a forward value, named by
  that value's source, or the literal type; null for a null result) and
  `stop_gradient` flags where any is set;
- which value is returned as each input's gradient;
- how it changes with the stop_gradient flags, the optional operands and the
  attribute values ("variants"): a variant where only the stopped inputs'
  gradients become null results is checked, not stored; any other difference
  is stored whole.

How: for each op, a one-op program is built through the op's static API
(`paddle._pir_ops.<op>`, i.e. `core.pir.ops`), with arguments planned from
the op's C++ `Build` signature as Paddle's installed header
`paddle/include/.../pd_op.h` declares it (names, types, defaults: facts only,
no code is copied) and per-op input shapes, dtypes and attrs where the plain
plan does not satisfy the op's InferMeta (`SPECIAL` below). An op with no
static API is made the way a program gets it: a grad op by its forward op's
VJP (`via`), an in-place op as its out-of-place twin renamed in a PIR file
(`twin`), a legacy-only op by Paddle's translator (`legacy`). Each input is a
`pd_op.data` value (a sparse one goes through dense_to_coo_sp / _csr_sp);
each out_grad is a fresh `pd_op.data` of its output's type; the rule is then
called exactly as `ir_backward.append_backward_ops` calls it (combine
operands opened into their elements, vector results taken through their
`builtin.split`, stop flags only for inputs with grad semantics, the
array_read / array_write_ / assign_out_ special cases). Whether an appended
attribute copies a forward one is not guessed from equal values: each
forward attribute is set to another value in turn (`_perturbations`) and the
appended attributes that follow it are the copies. Prim is off and the flags
are Paddle's defaults. Ops whose probe fails are recorded with the reason.

Paddle kills the process on some calls (every sparse VJP of 3.3.1 on CPU), so
each op is probed in a child forked from a worker that has imported Paddle;
a child that dies is recorded as failed ("crash", with what it was doing).

Run (about two minutes on 2 cores; deterministic: the same bytes for the same Paddle,
whatever `--jobs`):

    /work/main/.paddle-venv/bin/python testdata/pir_vjp/gen_vjp_rules.py

It re-executes itself with PYTHONHASHSEED=0 and PIR on. Options: `--ops
a,b,...` probes only those ops (`pd_op.` may be left out) and `--out FILE`
writes the table elsewhere (the default run writes the table and
`testdata/pir_vjp/coverage.md`); `--raw FILE` keeps every probe (JSON lines);
`--jobs N` worker processes (default 2).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = ROOT / "pybackward" / "data" / "pir_vjp_rules.json"
COVERAGE = HERE / "coverage.md"
OP_NAMES = ROOT / "pybackward" / "data" / "pir_op_names.json"
GENERATED_BY = "testdata/pir_vjp/gen_vjp_rules.py"
HEADERS = ("pd_op.h", "manual_op.h", "control_flow_op.h")
BATCH = 120  # ops per worker process


# --------------------------------------------------------------------------
# The ops' C++ Build signatures, read from Paddle's installed header
# --------------------------------------------------------------------------
def include_dir() -> pathlib.Path:
    spec = importlib.util.find_spec("paddle")
    if spec is None or spec.origin is None:
        sys.exit("run this with Paddle's Python (paddlepaddle==3.3.1)")
    return pathlib.Path(spec.origin).parent / "include/paddle/fluid/pir/dialect/operator/ir"


def _split_params(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "<({"
        depth -= ch in ">)}"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + ([cur.strip()] if cur.strip() else [])


def _param(text: str) -> list:
    """'const std::vector<int>& strides={1, 1}' -> ['const std::vector<int>&', 'strides', '{1, 1}']."""
    decl, eq, default = text.partition("=")
    ctype, _, name = decl.strip().rpartition(" ")
    return [ctype.strip(), name.strip().rstrip("_"), default.strip() if eq else None]


def signatures() -> dict[str, dict]:
    """op name -> {params: [[c++ type, name, default | None]]}, from the op's first Build."""
    sigs: dict[str, dict] = {}
    for header in HEADERS:
        text = re.sub(r"//[^\n]*", "", (include_dir() / header).read_text())
        text = re.sub(r"\s*&\s*", "& ", text)  # 'const T &name' -> 'const T& name'
        for m in re.finditer(r"class\s+(?:TEST_API\s+)?\w+\s*:\s*public\s+pir::Op<.*?>\s*\{(.*?)\n\};",
                             text, re.S):
            name = re.search(r'name\(\)\s*\{\s*return\s*"([\w.]+)"', m.group(1))
            if not name:
                continue
            builds = re.findall(r"static void Build\(\s*pir::Builder& builder,\s*pir::OperationArgument"
                                r"& argument(.*?)\);", m.group(1), re.S)
            params = [_param(p) for p in _split_params(builds[0].strip(", "))] if builds else None
            sigs[name.group(1)] = {"params": params}
    return sigs


# --------------------------------------------------------------------------
# Probe plans: how to build each op's one-op program
# --------------------------------------------------------------------------
#: Shapes tried in turn for the float inputs when the op's plan names none.
PROFILES = ([3, 3], [2, 3, 4, 4], [2, 3, 4], [3], [2, 3, 4, 4, 4])
#: Input names that are integer tensors unless the plan says otherwise.
INT_INPUTS = {"index", "indices", "ids", "label", "labels", "idx", "seed_tensor", "repeats",
              "lengths", "segment_ids", "dst_index", "src_index", "x_num", "index_num",
              "sorted_sequence", "expert_id", "shape", "repeats_tensor", "num_samples",
              "target_shape", "position_ids", "cu_seqlens_q", "cu_seqlens_k", "colptr", "row",
              "eids", "count", "classes", "bias_qk_num", "dst_count", "tokens", "lod"}
BOOL_INPUTS = {"mask", "condition", "cond"}
#: Attr values for attrs without a C++ default, by name (else by type, `_ATTR_BY_TYPE`).
ATTR_BY_NAME = {
    "data_format": "NCHW", "data_layout": "NCHW", "padding_algorithm": "EXPLICIT",
    "epsilon": 1e-5, "momentum": 0.9, "min": -1.0, "max": 1.0, "alpha": 1.0, "beta": 1.0,
    "threshold": 20.0, "negative_slope": 0.02, "groups": 1, "strides": [1, 1], "paddings": [0, 0],
    "dilations": [1, 1], "axis": 0, "axes": [0], "dim": 0, "dims": [0], "k": 1, "num": 1,
    "normalization": "backward", "forward": True, "reduction": "mean", "equation": "ij,jk->ik",
    "onesided": True, "is_test": False, "use_global_stats": False, "trainable_statistics": False,
    "dtype": "float64", "repeat_times": [1, 1], "perm": [1, 0], "p": 2.0, "porder": 2.0,
    "pad_value": 0.0, "output_size": [], "output_padding": [], "kernel_size": [2, 2],
    "ksize": [2, 2], "pooling_type": "max", "values": [1.0],
}
_ATTR_BY_TYPE = {"bool": False, "int": 1, "int64_t": 1, "float": 1.0, "double": 1.0,
                 "const std::string&": "", "const std::vector<int>&": [1],
                 "const std::vector<int64_t>&": [1], "const std::vector<float>&": [1.0],
                 "const std::vector<double>&": [], "const std::vector<std::string>&": [],
                 "phi::DataType": "float32", "std::vector<phi::Scalar>": [1.0]}

#: Per-op plans where the defaults do not build: input shapes and dtypes (by
#: input name; a list of shapes for a vector input), attrs (by name), inputs
#: left null (`absent`). An op not listed here is tried with each of PROFILES.
_IMG = [2, 3, 4, 4]
_VOL = [2, 3, 4, 4, 4]
_BN = {"shape": _IMG, "shapes": {"mean": [3], "variance": [3], "scale": [3], "bias": [3]}}
_TRANSPOSE_CONV = {"shapes": {"x": _IMG, "filter": [3, 2, 3, 3]}}
_ROI = {"shapes": {"x": _IMG, "boxes": [1, 4], "boxes_num": [1]}, "dtypes": {"boxes_num": "int32"}}
_RNN = {"shapes": {"x": [5, 2, 3], "pre_state": [[1, 2, 4]], "weight_list": [[4, 3], [4, 4], [4], [4]],
                   "sequence_length": [2], "dropout_state_in": [1]},
        "dtypes": {"sequence_length": "int32", "dropout_state_in": "uint8"},
        "attrs": {"input_size": 3, "hidden_size": 4},
        "vector": ["pre_state", "weight_list"]}
SPECIAL: dict[str, dict] = {
    "pd_op.affine_grid": {"shapes": {"input": [2, 2, 3]}, "attrs": {"output_shape": [2, 3, 4, 4]}},
    "pd_op.as_complex": {"shape": [3, 2]},
    "pd_op.as_real": {"shape": [3, 3], "dtypes": {"x": "complex64"}},
    "pd_op.real": {"shape": [3, 3], "dtypes": {"x": "complex64"}},
    "pd_op.imag": {"shape": [3, 3], "dtypes": {"x": "complex64"}},
    "pd_op.fft_c2c": {"shape": [3, 4], "dtypes": {"x": "complex64"}, "attrs": {"axes": [1]}},
    "pd_op.fft_c2r": {"shape": [3, 4], "dtypes": {"x": "complex64"}, "attrs": {"axes": [1]}},
    "pd_op.baddbmm": {"shape": [2, 3, 3]},
    "pd_op.baddbmm_": {"shape": [2, 3, 3]},
    "pd_op.bmm": {"shape": [2, 3, 3]},
    "pd_op.batch_norm": _BN,
    "pd_op.batch_norm_": _BN,
    "pd_op.bilinear": {"shapes": {"x": [2, 3], "y": [2, 4], "weight": [5, 3, 4], "bias": [1, 5]}},
    "pd_op.c_softmax_with_cross_entropy": {"shapes": {"logits": [3, 5], "label": [3, 1]}},
    "pd_op.conv2d_transpose": _TRANSPOSE_CONV,
    "pd_op.depthwise_conv2d_transpose": {"shapes": {"x": _IMG, "filter": [3, 1, 3, 3]},
                                         "attrs": {"groups": 3}},
    "pd_op.conv3d_transpose": {"shapes": {"x": _VOL, "filter": [3, 2, 3, 3, 3]}},
    "pd_op.crop": {"shape": [3, 3], "attrs": {"shape": [2, 2], "offsets": [0, 0]}},
    "pd_op.cross_entropy_with_softmax": {"shapes": {"input": [3, 5], "label": [3, 1]}},
    "pd_op.cross_entropy_with_softmax_": {"shapes": {"input": [3, 5], "label": [3, 1]}},
    "pd_op.fold": {"shape": [2, 12, 9], "attrs": {"output_sizes": [4, 4], "kernel_sizes": [2, 2],
                                                  "strides": [1, 1], "paddings": [0, 0, 0, 0],
                                                  "dilations": [1, 1]}},
    "pd_op.unfold": {"shape": _IMG, "attrs": {"kernel_sizes": [2, 2], "strides": [1, 1],
                                              "paddings": [0, 0, 0, 0], "dilations": [1, 1]}},
    "pd_op.fractional_max_pool2d": {"shape": _IMG, "attrs": {"output_size": [2, 2]}},
    "pd_op.fractional_max_pool3d": {"shape": _VOL, "attrs": {"output_size": [2, 2, 2]}},
    "pd_op.max_pool3d_with_index": {"shape": _VOL, "attrs": {"kernel_size": [2, 2, 2]}},
    "pd_op.gather_grad": {"shapes": {"x": [3, 3], "index": [2], "out_grad": [2, 3]}},
    "pd_op.index_select_grad": {"shapes": {"x": [3, 3], "index": [2], "out_grad": [2, 3]}},
    "pd_op.grid_sample": {"shapes": {"x": _IMG, "grid": [2, 4, 4, 2]}},
    "pd_op.group_norm": {"shapes": {"x": _IMG, "scale": [3], "bias": [3]}, "attrs": {"groups": 3}},
    "pd_op.instance_norm": {"shapes": {"x": _IMG, "scale": [3], "bias": [3]}},
    "pd_op.layer_norm": {"shapes": {"x": [2, 3, 4], "scale": [12], "bias": [12]}},
    "pd_op.gru": {"shapes": {"input": [5, 6], "h0": [1, 2], "weight": [2, 6], "bias": [1, 6]}},
    "pd_op.gru_unit": {"shapes": {"input": [2, 6], "hidden_prev": [2, 2], "weight": [2, 6], "bias": [1, 6]}},
    "pd_op.lstm": {"shapes": {"input": [5, 8], "h0": [1, 2], "c0": [1, 2], "weight": [2, 8],
                              "bias": [1, 14]}},
    "pd_op.hinge_loss": {"shapes": {"logits": [3, 1], "labels": [3, 1]}, "dtypes": {"labels": "float32"}},
    "pd_op.huber_loss": {"shape": [3, 1], "dtypes": {"label": "float32"}},
    "pd_op.label_smooth": {"shapes": {"label": [3, 4], "prior_dist": [1, 4]}, "dtypes": {"label": "float32"}},
    "pd_op.log_loss": {"shape": [3, 1], "dtypes": {"label": "float32"}},
    "pd_op.linear_v2": {"shapes": {"input": [2, 3], "weight": [3, 4], "bias": [4]}},
    "pd_op.maxout": {"shape": [2, 4, 3, 3], "attrs": {"groups": 2}},
    "pd_op.multiplex": {"shapes": {"inputs": [[3, 3], [3, 3]], "index": [3, 1]}, "dtypes": {"index": "int32"},
                        "vector": ["inputs"]},
    "pd_op.mv": {"shapes": {"x": [3, 4], "vec": [4]}},
    "pd_op.nll_loss": {"shapes": {"input": [3, 5], "label": [3], "weight": [5]}},
    "pd_op.pad3d": {"shape": _VOL, "attrs": {"paddings": [1, 1, 1, 1, 1, 1]}},
    "pd_op.pad3d_grad": {"via": "pd_op.pad3d"},
    "pd_op.pad_grad": {"via": "pd_op.pad"},
    "pd_op.pool2d_grad": {"via": "pd_op.pool2d"},
    "pd_op.pool2d": {"shape": _IMG},
    "pd_op.pad": {"shape": [3, 3], "attrs": {"paddings": [1, 1, 1, 1]}},
    "pd_op.prelu": {"shapes": {"x": _IMG, "alpha": [1]}},
    "pd_op.psroi_pool": {"shapes": {"x": [2, 4, 4, 4], "boxes": [1, 4], "boxes_num": [1]},
                         "dtypes": {"boxes_num": "int32"}, "attrs": {"output_channels": 4}},
    "pd_op.roi_align": _ROI,
    "pd_op.roi_pool": _ROI,
    "pd_op.pyramid_hash": {"shapes": {"x": [4, 1], "w": [20, 1], "white_list": [2, 1], "black_list": [2, 1]},
                           "dtypes": {"x": "int32", "white_list": "int32", "black_list": "int32"},
                           "attrs": {"num_emb": 4, "space_len": 16, "rand_len": 4}},
    "pd_op.rank_attention": {"shapes": {"x": [2, 3], "rank_offset": [2, 7], "rank_param": [27, 2]},
                             "dtypes": {"rank_offset": "int32"}},
    "pd_op.repeat_interleave_with_tensor_index_grad": {"via": "pd_op.repeat_interleave_with_tensor_index"},
    "pd_op.repeat_interleave_with_tensor_index": {"shapes": {"x": [3, 3], "repeats": [3]},
                                                  "dtypes": {"repeats": "int64"}},
    "pd_op.rnn": _RNN,
    "pd_op.cudnn_lstm": {"shapes": {"x": [5, 2, 3], "init_h": [1, 2, 4], "init_c": [1, 2, 4], "w": [64],
                                    "weight_list": [[16, 3], [16, 4], [16], [16]], "sequence_length": [2]},
                         "dtypes": {"sequence_length": "int32"}, "attrs": {"hidden_size": 4},
                         "vector": ["weight_list"]},
    "pd_op.rnn_": _RNN,
    "pd_op.roll": {"shape": [3, 3], "attrs": {"shifts": [1], "axis": [0]}},
    "pd_op.split": {"shape": [4, 3], "attrs": {"sections": [1, 3], "axis": 0}},
    "pd_op.stft": {"shapes": {"x": [2, 16], "window": [8]}, "attrs": {"n_fft": 8, "hop_length": 4}},
    "pd_op.strided_slice": {"shape": [3, 3], "attrs": {"axes": [0], "starts": [0], "ends": [2],
                                                       "strides": [1]}},
    "pd_op.unpool": {"shapes": {"x": [2, 3, 2, 2], "indices": [2, 3, 2, 2]}, "dtypes": {"indices": "int32"},
                     "attrs": {"ksize": [2, 2], "strides": [2, 2], "padding": [0, 0],
                               "output_size": [4, 4], "data_format": "NCHW"}},
    "pd_op.unstack": {"shape": [2, 3], "attrs": {"num": 2}},
    "pd_op.view_shape": {"shape": [3, 4], "attrs": {"dims": [4, 3]}},
    "pd_op.yolo_loss": {"shapes": {"x": [2, 14, 4, 4], "gt_box": [2, 3, 4], "gt_label": [2, 3],
                                   "gt_score": [2, 3]},
                        "dtypes": {"gt_label": "int32"},
                        "attrs": {"anchors": [10, 13, 16, 30], "anchor_mask": [0, 1], "class_num": 2}},
    "pd_op.correlation": {"shape": _IMG, "attrs": {"pad_size": 1, "kernel_size": 1, "max_displacement": 1,
                                                   "stride1": 1, "stride2": 1}},
    "pd_op.max_with_index": {"shape": [3, 3], "attrs": {"dim": 0}},
    "pd_op.batch_fc": {"legacy": {"type": "batch_fc", "shapes": {"Input": [2, 3, 4], "W": [2, 4, 5],
                                                               "Bias": [2, 5]}}},
    "pd_op.fused_elemwise_activation": {"legacy": {"type": "fused_elemwise_activation",
                                                   "attrs": {"functor_list": ["elementwise_add", "relu"]}}},
    "pd_op.fused_elemwise_add_activation": {"legacy": {"type": "fused_elemwise_add_activation",
                                                       "attrs": {"functor_list": ["elementwise_add",
                                                                                  "relu"]}}},
    "pd_op.fused_seqpool_cvm": {"legacy": {"type": "fused_seqpool_cvm", "shapes": {"X": [[4, 3], [4, 3]],
                                                                                   "CVM": [2, 2]}}},
    "pd_op.global_gather": {"legacy": {"type": "global_gather", "shapes": {"local_count": [2],
                                                                          "global_count": [2]},
                                       "dtypes": {"local_count": "int64", "global_count": "int64"}}},
    "pd_op.global_scatter": {"legacy": {"type": "global_scatter", "shapes": {"local_count": [2],
                                                                            "global_count": [2]},
                                        "dtypes": {"local_count": "int64", "global_count": "int64"}}},
    "pd_op.legacy_reshape": {"legacy": {"type": "reshape", "attrs": {"shape": [9]}}},
    "pd_op.lrn": {"legacy": {"type": "lrn", "shapes": {"X": [2, 3, 4, 4]}}},
    "pd_op.match_matrix_tensor": {"legacy": {"type": "match_matrix_tensor",
                                             "shapes": {"X": [4, 3], "Y": [4, 3], "W": [3, 2, 3]},
                                             "attrs": {"dim_t": 2}}},
    "pd_op.max_pool2d_v2": {"legacy": {"type": "max_pool2d_v2", "shapes": {"x": [2, 3, 4, 4]},
                                       "attrs": {"kernel_size": [2, 2], "strides": [1, 1],
                                                 "paddings": [0, 0]}}},
    "pd_op.nce": {"legacy": {"type": "nce", "shapes": {"Input": [3, 4], "Label": [3, 1], "Weight": [5, 4],
                                                       "Bias": [5]},
                             "dtypes": {"Label": "int64"}, "attrs": {"num_total_classes": 5}}},
    "pd_op.partial_concat": {"legacy": {"type": "partial_concat"}},
    "pd_op.legacy_matmul": {"legacy": {"type": "matmul"}},
    "pd_op.lookup_table": {"legacy": {"type": "lookup_table", "shapes": {"W": [5, 3], "Ids": [4, 1]},
                                      "dtypes": {"Ids": "int64"}}},
    "pd_op.lookup_table_sr": {"legacy": {"type": "lookup_table", "shapes": {"W": [5, 3], "Ids": [4, 1]},
                                         "dtypes": {"Ids": "int64"}, "kinds": {"W": "rows"}}},
    "pd_op.sparse_weight_embedding": {"legacy": {"type": "lookup_table_v2", "shapes": {"W": [5, 3],
                                                                                      "Ids": [4]},
                                                 "dtypes": {"Ids": "int64"}, "kinds": {"W": "rows"}}},
    "pd_op.scale_sr": {"legacy": {"type": "scale", "kinds": {"X": "rows"}}},
    "pd_op.sqrt_sr": {"legacy": {"type": "sqrt", "kinds": {"X": "rows"}}},
    "pd_op.square_sr": {"legacy": {"type": "square", "kinds": {"X": "rows"}}},
    "pd_op.multiply_sr": {"legacy": {"type": "elementwise_mul", "kinds": {"X": "rows"}}},
    "pd_op.partial_sum": {"legacy": {"type": "partial_sum"}},
    "pd_op.array_read": {"custom": "array"},
    "pd_op.increment": {"shape": [1]},
    "pd_op.increment_": {"shape": [1]},
    "pd_op.array_write_": {"custom": "array"},
    "pd_op.array_to_tensor": {"custom": "array"},
    "pd_op.fused_gemm_epilogue": {"params": [["pir::Value", "x", None], ["pir::Value", "y", None],
                                             ["pir::Value", "bias", None], ["bool", "trans_x", "false"],
                                             ["bool", "trans_y", "false"],
                                             ["const std::string&", "activation", '"none"']],
                                  "shapes": {"x": [2, 3], "y": [3, 4], "bias": [4]}},
    "pd_op.min_with_index": {"shape": [3, 3], "attrs": {"dim": 0}},
}


# --------------------------------------------------------------------------
# Worker side: runs inside a Paddle process
# --------------------------------------------------------------------------
def _worker(job_file: str, out_file: str) -> None:
    import warnings
    warnings.filterwarnings("ignore")
    import paddle
    from paddle.base import core
    paddle.enable_static()
    jobs = json.loads(pathlib.Path(job_file).read_text())

    def write(rec: dict) -> None:
        with open(out_file, "a") as out:
            out.write(json.dumps(rec, sort_keys=True) + "\n")

    for job in jobs:
        if job["op"] in CONTROL_FLOW:
            write({"op": job["op"], "fail": {"stage": "skipped", "reason": "control flow: "
                                             + CONTROL_FLOW[job["op"]]}})
            continue
        # each op is probed in a child forked from this Paddle process: Paddle kills the
        # process on some calls (every sparse VJP), and a child starts from the same state
        pid = os.fork()
        if pid == 0:
            try:
                rec = Prober(paddle, core, job).probe()
            except Exception as e:  # a bug of the probe itself: say so, do not stop
                rec = {"op": job["op"], "fail": {"stage": "probe", "reason": _first_line(e)}}
            write(rec)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            write({"op": job["op"], "fail": {"stage": "crash", "reason": _died(status, job)}})


def _died(status: int, job: dict) -> str:
    """Why a probe's process ended, and what it was doing then (its stage file)."""
    stage = pathlib.Path(job.get("stage_file") or "/nonexistent")
    at = stage.read_text().split(" ", 1) if stage.exists() else []
    where = f" {at[1]}" if len(at) == 2 and at[0] == job["op"] else ""
    if os.WIFSIGNALED(status):
        return f"Paddle's process died (signal {os.WTERMSIG(status)}){where}"
    return f"Paddle's process exited with {os.WEXITSTATUS(status) if os.WIFEXITED(status) else status}{where}"


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("---", "C++ Traceback", "Error Message Summary")) \
                and not re.match(r"^\d+\s+\w", line):
            text = line
            break
    text = re.sub(r"\s*\(at /paddle/.*?\)\s*$", "", text)
    text = re.sub(r"\[Hint:.*$", "", text).strip()
    return (type(e).__name__ + ": " + text)[:300]


class Prober:
    """Builds one op's one-op program and calls its VJP under each variant."""

    def __init__(self, paddle, core, job: dict, prefix: str = "", ctx: dict | None = None) -> None:
        self.paddle, self.core, self.job, self.prefix = paddle, core, job, prefix
        self.route = "api"
        self.ctx = {} if ctx is None else ctx  # shared with the probers of related ops
        self.name = job["op"]
        self.params = job["params"]
        self.plan = dict(job.get("plan") or {})
        self.vector: set[str] = set(self.plan.get("vector", ()))
        self.coerce: dict[str, str] = {}

    # ---- building the forward op
    def _input(self, pname: str, shape: list, k: int | None = None):
        paddle = self.paddle
        dtype = self.plan.get("dtypes", {}).get(pname)
        if dtype is None:
            dtype = "int64" if pname in INT_INPUTS else "bool" if pname in BOOL_INPUTS else "float32"
        var = paddle.static.data(self.prefix + (pname if k is None else f"{pname}_{k}"), shape, dtype)
        var.stop_gradient = dtype not in ("float32", "float64", "complex64", "complex128")
        return self._sparse(var, self.plan.get("sparse", {}).get(pname, "dense"))

    def _sparse(self, dense, kind: str):
        """A dense value as the sparse kind asked for (dense_to_coo_sp / dense_to_csr_sp)."""
        if kind == "coo":
            return self.core.pir.ops.sparse_to_sparse_coo(dense, len(dense.shape))
        if kind == "csr":
            self._mark("making a CSR value (dense_to_csr_sp)")
            return self.core.pir.ops.sparse_to_sparse_csr(dense)
        return dense

    def _attr(self, ctype: str, pname: str, default: str | None, shape: list):
        value = self._plain_attr(ctype, pname, default, shape)
        want = self.ctx.get("perturb")
        if want is not None and want[0] == pname:
            self.ctx["perturbed"] = True
            return _perturbations(ctype, pname, value, self.paddle)[want[1]]
        return value

    def _plain_attr(self, ctype: str, pname: str, default: str | None, shape: list):
        attrs = self.plan.get("attrs", {})
        if pname in attrs:
            return attrs[pname]
        if default is not None:
            return _cpp_value(ctype, default)
        if pname == "shape":
            return list(shape)
        if pname in ATTR_BY_NAME:
            value = ATTR_BY_NAME[pname]
        else:
            value = _ATTR_BY_TYPE.get(ctype, None)
        if ctype in ("int", "int64_t") and isinstance(value, list):
            value = value[0]
        if ctype.startswith("const std::vector") and not isinstance(value, list):
            value = [value]
        if ctype in ("float", "double") and not isinstance(value, (int, float)):
            value = 1.0
        if ctype == "phi::DataType":
            value = getattr(self.paddle, value if isinstance(value, str) else "float32")
        return value

    def _mark(self, stage: str) -> None:
        """Say what the worker is doing, for the driver to name it if Paddle kills the process."""
        path = self.job.get("stage_file")
        if path:
            with open(path, "w") as f:
                f.write(f"{self.job['op']} {stage}")

    def build(self, absent: tuple[str, ...] = ()):
        """A fresh program holding the op; returns (program, startup, op) or raises.

        Through the op's static API when it has one; else, for a grad op, as
        what its forward op's VJP appends (`via`), and for an in-place op, as
        its out-of-place twin written to a PIR file, renamed and read back
        (`twin`: Paddle reads ops unverified, and the two share operands,
        attributes and results)."""
        self._mark("while building the one-op program")
        api_name = self.plan.get("api", self.name.split(".", 1)[1])
        if "via" in self.plan or ("twin" not in self.plan and not hasattr(self.core.pir.ops, api_name)
                                  and self.job.get("via")):
            return self._build_via(absent)
        if "twin" in self.plan or (not hasattr(self.core.pir.ops, api_name) and self.job.get("twin")):
            return self._build_twin(absent)
        if self.plan.get("custom") == "array":
            return self._build_array(absent)
        if "legacy" in self.plan:
            return self._build_legacy(absent)
        return self._build_api(getattr(self.core.pir.ops, api_name, None), absent)

    def _related(self, name: str) -> "Prober":
        job = self.job["related"].get(name)
        if job is None:
            raise LookupError(f"no static API core.pir.ops.{self.name.split('.', 1)[1]}, and no "
                              f"signature for {name} to build it from")
        return Prober(self.paddle, self.core, {**job, "related": self.job["related"],
                                               "stage_file": self.job.get("stage_file")},
                      prefix=self.prefix + "v", ctx=self.ctx)

    def _build_via(self, absent: tuple[str, ...]):
        if absent:
            raise LookupError("an op built through its forward's VJP has all its operands")
        via = self.plan.get("via") or self.job["via"]
        parent = self._related(via)
        main, startup, fwd = parent.build()
        emitted, _, _, _ = parent.run_vjp(main, startup, fwd, set())
        op = next((o for o in emitted if o.name() == self.name), None)
        if op is None:
            raise LookupError(f"the VJP of {via} appends {[o.name() for o in emitted]}, not {self.name}")
        self.route = f"via {via}"
        return main, startup, op

    def _build_twin(self, absent: tuple[str, ...]):
        paddle, core = self.paddle, self.core
        twin_name = self.plan.get("twin") or self.job["twin"]
        twin = self._related(twin_name)
        main, _, op = twin.build(absent)
        with tempfile.TemporaryDirectory() as d:
            path = pathlib.Path(d) / "twin.json"
            core.serialize_pir_program(main, str(path), True, False, True)
            data = json.loads(path.read_text())
            ops = data["program"]["regions"][0]["blocks"][0]["ops"]
            tag = "1." + twin_name.split(".", 1)[1]
            target = next((o for o in reversed(ops) if o.get("#") == tag), None)
            if target is None:
                raise LookupError(f"{twin_name} is not in its program's file")
            target["#"] = "1." + self.name.split(".", 1)[1]
            path.write_text(json.dumps(data))
            prog = paddle.static.Program()
            core.deserialize_pir_program(str(path), prog, -1)
        op = next((o for o in reversed(prog.global_block().ops) if o.name() == self.name), None)
        if op is None:
            raise LookupError(f"Paddle read {self.name} back as something else")
        self.route = f"twin {twin_name}"
        return prog, paddle.static.Program(), op

    def _build_array(self, absent: tuple[str, ...]):
        """The tensor-array ops, on an array written once: create_array, array_write_, then the op."""
        paddle = self.paddle
        if absent:
            raise LookupError("the array ops have no optional operands")
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = self._input("x", [3, 3])
            i = paddle.full([1], 0, "int64")
            array = paddle.tensor.array_write(x, i, array=paddle.tensor.create_array("float32"))
            if self.name == "pd_op.array_read":
                paddle.tensor.array_read(array, i)
            elif self.name == "pd_op.array_to_tensor":
                paddle.tensor.manipulation.tensor_array_to_tensor(array, axis=0, use_stack=False)
        op = next((o for o in reversed(main.global_block().ops) if o.name() == self.name), None)
        if op is None:
            raise LookupError(f"the array APIs built no {self.name}")
        self.route = "array"
        return main, startup, op

    def _build_legacy(self, absent: tuple[str, ...]):
        """An op PIR has no API for, as Paddle's translator makes it from a one-op legacy
        ProgramDesc (`translate_to_pir`): the plan's `legacy` names the legacy type, input
        shapes / dtypes / var types by slot and attrs; other inputs are float32 [3, 3]."""
        core = self.core
        if absent:
            raise LookupError("a translated op is probed with its planned operands only")
        from paddle.base.proto import framework_pb2 as fpb
        spec = self.plan["legacy"]
        proto = next(p for p in (fpb.OpProto.FromString(raw) for raw in core.get_all_op_protos())
                     if p.type == spec["type"])
        VT = core.VarDesc.VarType
        desc = core.ProgramDesc()
        block = desc.block(0)
        d = block.append_op()
        d.set_type(spec["type"])

        def declare(name, shape, dtype="float32", kind="dense"):
            v = block.var(name.encode())
            v.set_type({"dense": VT.DENSE_TENSOR, "rows": VT.SELECTED_ROWS}[kind])
            v.set_dtype({"float32": VT.FP32, "int64": VT.INT64, "int32": VT.INT32}[dtype])
            v.set_shape(shape)

        for slot in proto.inputs:
            shape = spec.get("shapes", {}).get(slot.name)
            if shape is None and slot.dispensable:
                d.set_input(slot.name, [])
                continue
            shapes = shape if shape and isinstance(shape[0], list) else [shape or [3, 3]] * (
                2 if slot.duplicable else 1)
            names = [f"{self.prefix}{slot.name}_{k}" for k in range(len(shapes))]
            for n, shp in zip(names, shapes):
                declare(n, shp, spec.get("dtypes", {}).get(slot.name, "float32"),
                        spec.get("kinds", {}).get(slot.name, "dense"))
            d.set_input(slot.name, names)
        for slot in proto.outputs:
            names = [f"{self.prefix}{slot.name}_out{k}" for k in range(2 if slot.duplicable else 1)]
            for n in names:
                declare(n, [3, 3])
            d.set_output(slot.name, names)
        T = fpb.AttrType
        setter = {T.INT: "_set_int32_attr", T.FLOAT: "_set_float32_attr", T.STRING: "_set_str_attr",
                  T.INTS: "_set_int32s_attr", T.FLOATS: "_set_float32s_attr", T.BOOLEAN: "_set_bool_attr",
                  T.LONG: "_set_int64_attr", T.LONGS: "_set_int64s_attr", T.STRINGS: "_set_strs_attr"}
        placeholder = {T.INT: 1, T.FLOAT: 1.0, T.STRING: "", T.INTS: [1], T.FLOATS: [1.0], T.BOOLEAN: False,
                       T.LONG: 1, T.LONGS: [1], T.STRINGS: []}
        types = {a.name: a.type for a in proto.attrs}
        for _ in range(len(proto.attrs) + 1):
            try:
                d.check_attrs()
                break
            except Exception as e:
                missing = [a for a in proto.attrs if not d.has_attr(a.name) and a.type in setter]
                named = [a for a in missing if a.name in str(e)] or missing
                if not named:
                    raise
                getattr(d, setter[named[0].type])(named[0].name, placeholder[named[0].type])
        for name, value in spec.get("attrs", {}).items():
            getattr(d, setter[types[name]])(name, value)
        want = self.ctx.get("perturb")
        if want is not None and want[0] in types and types[want[0]] in _LEGACY_CTYPE:
            ctype = _LEGACY_CTYPE[types[want[0]]]
            value = _perturbations(ctype, want[0], d.attr(want[0]), self.paddle)[want[1]]
            getattr(d, setter[types[want[0]]])(want[0], value)
            self.ctx["perturbed"] = True
        prog = core.pir.translate_to_pir(desc)
        op = next((o for o in reversed(prog.global_block().ops) if o.name() == self.name), None)
        if op is None:
            made = sorted({o.name() for o in prog.global_block().ops})
            raise LookupError(f"Paddle translated legacy {spec['type']} into {made}, not {self.name}")
        self.route = f"legacy {spec['type']}"
        return prog, self.paddle.static.Program(), op

    def _build_api(self, api, absent: tuple[str, ...]):
        paddle = self.paddle
        if api is None:
            raise LookupError(f"no static API core.pir.ops.{self.name.split('.', 1)[1]}")
        if self.params is None:
            raise LookupError("no Build signature in Paddle's header and no plan for its arguments")
        profiles = [self.plan["shape"]] if "shape" in self.plan else list(PROFILES)
        if ("shape", self.name) in self.ctx:  # the shape the default built with: keep it
            profiles = [self.ctx[("shape", self.name)]]
        last: Exception | None = None
        tries = 0
        while profiles and tries < 12:
            tries += 1
            shape = profiles[0]
            main, startup = paddle.static.Program(), paddle.static.Program()
            try:
                with paddle.static.program_guard(main, startup):
                    args = []
                    for ctype, pname, default in self.params:
                        if ctype == "pir::Value":
                            if pname in absent or pname in self.plan.get("absent", ()):
                                args.append(None)
                                continue
                            shp = self.plan.get("shapes", {}).get(pname, shape)
                            if pname in self.vector:
                                shapes = shp if shp and isinstance(shp[0], list) else [shp, shp]
                                args.append([self._input(pname, s, k) for k, s in enumerate(shapes)])
                            else:
                                args.append(self._input(pname, shp))
                        else:
                            value = self._attr(ctype, pname, default, shape)
                            if pname in self.coerce:
                                value = _COERCE[self.coerce[pname]](value)
                            args.append(value)
                    api(*args)
                op = next((o for o in reversed(main.global_block().ops) if o.name() == self.name), None)
                if op is None:
                    made = sorted({o.name() for o in main.global_block().ops} - {"pd_op.data"})
                    raise LookupError(f"the API built {made}, not {self.name}")
                self.route = "api"
                self.ctx.setdefault(("shape", self.name), shape)
                return main, startup, op
            except Exception as e:  # adapt the plan to what Paddle says, or try the next shape
                last = e
                m = re.search(r"argument \(position (\d+)\) must be ([\w<>]+)", str(e))
                if m and int(m.group(1)) <= len(self.params):
                    pname, want = self.params[int(m.group(1)) - 1][1], m.group(2)
                    if want == "Vector<>" and pname not in self.vector:
                        self.vector.add(pname)
                        continue
                    if want in _COERCE and self.coerce.get(pname) != want:
                        self.coerce[pname] = want
                        continue
                profiles.pop(0)
        assert last is not None
        raise last

    # ---- calling the rule
    def run_vjp(self, main, startup, op, stop: set[str]):
        """Call `op`'s VJP as ir_backward does, the inputs named in `stop` (tokens)
        stopped: (appended ops, what call_vjp returned, the value tokens, grad semantics)."""
        paddle, core = self.paddle, self.core
        block = main.global_block()
        with paddle.static.program_guard(main, startup):
            tokens = _Tokens()
            inputs, stops = [], []
            semantics = list(op.get_input_grad_semantics())
            for i, (v, sem) in enumerate(zip(op.operands_source(), semantics)):
                tokens.add(v, f"in{i}")
                d = v.get_defining_op() if v.initialized() else None
                if d is not None and d.name() == "builtin.combine":
                    elems = list(d.operands_source())
                    for k, e in enumerate(elems):
                        tokens.add(e, f"in{i}.{k}")
                    names = [f"in{i}.{k}" for k in range(len(elems))]
                else:
                    elems, names = [v], [f"in{i}"]
                inputs.append(elems)
                if sem:
                    stops.append([n in stop or n.split(".")[0] in stop or "all" in stop for n in names])
            outputs, grads = [], []
            # ir_backward's make_output_with_output_grad: array_write_'s "output" is its array
            # operand, assign_out_'s its output operand; array_read also gets its array's gradient
            results = list(op.results())
            if op.name() == "pd_op.array_write_":
                results = [op.operand_source(0)]
            elif op.name() == "pd_op.assign_out_":
                results = [op.operand_source(1)]
            for j, r in enumerate(results):
                tokens.add(r, f"out{j}")
                split = next((u for u in r.all_used_ops() if u.name() == "builtin.split"), None) \
                    if r.initialized() else None
                if split is None and r.initialized() and _type_json(r)["#"] == "0.t_vec":
                    split = core.pir.ops.builtin_split(r)[0].get_defining_op()
                elems = list(split.results()) if split is not None else [r]
                names = [f"out{j}.{k}" for k in range(len(elems))] if split is not None else [f"out{j}"]
                gl = []
                for e, n in zip(elems, names):
                    tokens.add(e, n)
                    g = self._grad_for(e, self.prefix + "g" + n[3:].replace(".", "_"))
                    tokens.add(g, "grad" + n[3:])
                    gl.append(g)
                outputs.append(elems)
                grads.append(gl)
            if op.name() == "pd_op.array_read":
                g = self._grad_for(op.operand_source(0), self.prefix + "g_array")
                tokens.add(g, f"grad{len(results)}")
                grads.append([g])
            before = len(block.ops)
            self._mark(f"inside call_vjp({op.name()})")
            returned = core.call_vjp(op, inputs, outputs, grads, stops)
            self._mark("recording")
            emitted = list(block.ops)[before:]
        return emitted, returned, tokens, semantics

    def call(self, stop: set[str], absent: tuple[str, ...] = ()) -> dict:
        """Build, call the VJP with the inputs named in `stop` (tokens) stopped; the record."""
        core = self.core
        main, startup, op = self.build(absent)
        emitted, returned, tokens, semantics = self.run_vjp(main, startup, op, stop)
        recs = []
        for m, e in enumerate(emitted):
            recs.append(self._emitted(e, tokens, op))
            for r, v in enumerate(e.results()):
                tokens.add(v, f"op{m}.{r}")
        returns = {}
        sem_inputs = [i for i, s in enumerate(semantics) if s]
        for i, got in zip(sem_inputs, returned):
            one = len(got) == 1 and not _is_combined(op.operand_source(i))
            for k, v in enumerate(got):
                key = f"in{i}" if one else f"in{i}.{k}"
                returns[key] = None if v is None else tokens.name(v)
        # a returned gradient's type is named after its own input when that input has it
        for key, src in returns.items():
            m = re.fullmatch(r"op(\d+)\.(\d+)", src or "")
            if m:
                results = recs[int(m.group(1))]["results"]
                r = int(m.group(2))
                if results[r] is not None and tokens.type_of_token(key) == tokens.type_of_token(results[r]):
                    results[r] = key
        fattrs = {k: v for k, v in _attrs(core, op).items() if k not in ("op_callstack", "stop_gradient",
                                                                        "persistable")}
        return {"ops": recs, "returns": returns, "fwd_attrs": fattrs}

    def _grad_for(self, value, name: str):
        paddle = self.paddle
        t = json.loads(_type_line(value.get_defining_op(), value)) if value.initialized() else None
        if t is None or t.get("#") == "NULL":
            return value  # a null result: its out_grad is null too
        # an out_grad is not stop_gradient (Paddle's seed is a full_like of the loss): the
        # appended ops' stop_gradient flags, which Paddle infers from their operands', depend on it
        if t["#"] == "1.t_dense_tensor_array":
            g = paddle.tensor.create_array(value.dtype)
        elif t["#"] in ("1.t_sparse_coo_tensor", "1.t_sparse_csr_tensor"):
            kind = "coo" if "coo" in t["#"] else "csr"
            g = self._sparse(paddle.static.data(name, value.shape, value.dtype), kind)
        elif t["#"] == "0.t_dtensor":
            g = paddle.static.data(name, value.shape, value.dtype)
        else:
            raise ValueError(f"an output of type {t['#']} (no out_grad to make)")
        g.stop_gradient = False
        return g

    def _emitted(self, e, tokens: "_Tokens", fwd) -> dict:
        core = self.core
        # builtin / cf ops have no YAML info (get_attr_names would crash): all their attrs count
        names = set(e.get_attr_names()) if e.name().startswith("pd_op.") else None
        attrs = {}
        sg = None
        for a in json.loads(core.pir.get_attrs_map_json(e)):
            if a["N"] == "stop_gradient":
                sg = [x["D"] for x in a["AT"]["D"]]
            elif names is None or a["N"] in names:
                if a["N"] in ("op_callstack", "persistable"):
                    continue
                attrs[a["N"]] = a["AT"]
        types = [json.loads(t) for t in core.pir.get_outputs_type_json(e).splitlines()] \
            if e.num_results() else []
        results = []
        for t in types:
            if t.get("#") == "NULL":
                results.append(None)
            else:
                results.append(tokens.type_of(t) or t)
        rec = {"op": e.name(), "operands": [tokens.name(v) if v.initialized() else None
                                            for v in e.operands_source()],
               "attrs": attrs, "results": results}
        if e.num_regions():
            rec["regions"] = e.num_regions()
        if sg and any(sg):
            rec["stop_gradient"] = sg
        elif sg is None and e.num_results():
            rec["stop_gradient"] = []  # the op sets no flags (array_write_): its file has none
        return rec

    # ---- one op: its signature and every variant
    def probe(self) -> dict:
        rec: dict = {"op": self.name}
        try:
            main, startup, op = self.build()  # the op lives as long as its program: keep it
        except Exception as e:
            rec["fail"] = {"stage": "build", "reason": _first_line(e)}
            return rec
        sem = list(op.get_input_grad_semantics())
        ins = list(op.get_input_names())
        combined = [_is_combined(v) for v in op.operands_source()]
        rec["sig"] = {"inputs": ins, "grad": [n for n, s in zip(ins, sem) if s],
                      "vector": [n for n, c in zip(ins, combined) if c],
                      "outputs": list(op.get_output_names()),
                      "attrs": list(op.get_attr_names())}
        rec["route"] = self.route
        rec["plan"] = {k: sorted(v) if isinstance(v, set) else v
                       for k, v in {**self.plan, "vector": self.vector}.items() if v and k != "params"}
        # optional operands: those the op builds without
        optional = []
        for ctype, pname, _ in self.params:
            if ctype == "pir::Value" and pname not in self.plan.get("absent", ()):
                try:
                    self.build(absent=(pname,))
                    optional.append(pname)
                except Exception:
                    pass
        absent_now = [p for p in self.plan.get("absent", ())]
        if optional or absent_now:
            rec["sig"]["optional"] = sorted(set(optional) | set(absent_now), key=ins.index
                                            if all(p in ins for p in optional + absent_now) else str)
        variants = {}
        try:
            variants["default"] = self.call(set())
        except Exception as e:
            rec["fail"] = {"stage": "vjp", "reason": _first_line(e)}
            return rec
        keys = []
        grad_inputs = [i for i, s in enumerate(sem) if s]
        for i in grad_inputs:
            keys.append(f"in{i}")
            if combined[i]:
                keys.append(f"in{i}.0")
        if len(grad_inputs) > 1 or keys[-1:] and "." in keys[-1]:
            keys.append("all")
        for k in keys:
            try:
                variants["stop:" + k] = self.call({k})
            except Exception as e:
                variants["stop:" + k] = {"error": _first_line(e)}
        for p in optional:
            try:
                variants["absent:" + p] = self.call(set(), absent=(p,))
            except Exception as e:
                variants["absent:" + p] = {"error": _first_line(e)}
        # which appended attrs follow which forward attrs: perturb each forward attr alone
        base = variants["default"]
        follows: dict[tuple[int, str], list] = {}
        unverified = []
        for a in rec["sig"]["attrs"]:
            got = self._perturbed_call(a, base)
            if got is None:
                unverified.append(a)
                continue
            rec.setdefault("attrs_perturbed", []).append(a)
            if _structure(got) != _structure(base):
                variants[f"attr:{a}"] = got
            else:
                for m, (x, y) in enumerate(zip(base["ops"], got["ops"])):
                    for n, v in y["attrs"].items():
                        if x["attrs"].get(n) != v:
                            follows.setdefault((m, n), []).append([a, v == got["fwd_attrs"].get(a)])
        notes: dict = {}
        for v in variants.values():
            if "ops" in v:
                _classify(v, base, follows, unverified, notes)
        rec["attr_notes"] = {k: sorted(v) if isinstance(v, set) else v for k, v in notes.items()}
        rec["variants"] = variants
        return rec

    def _perturbed_call(self, attr: str, base: dict) -> dict | None:
        """The default call with forward attr `attr` set to another value (the first of a
        few that Paddle builds), or None when no other value builds or takes effect."""
        try:
            for k in range(3):
                self.ctx["perturb"], self.ctx["perturbed"] = (attr, k), False
                try:
                    got = self.call(set())
                except Exception:
                    continue
                if not self.ctx["perturbed"]:
                    return None  # the attr is not an argument of what builds the op
                if got["fwd_attrs"].get(attr) != base["fwd_attrs"].get(attr):
                    return got
            return None
        finally:
            self.ctx.pop("perturb", None)


def _structure(call: dict) -> tuple:
    """What a call appended, but for attribute values."""
    return (tuple((o["op"], tuple(o["operands"]), tuple(sorted(o["attrs"])), len(o["results"]))
                  for o in call["ops"]), tuple(sorted(call["returns"].items(), key=str)))


def _classify(call: dict, base: dict, follows: dict, unverified: list[str], notes: dict) -> None:
    """Rewrite a call's appended attrs: '@A' where the attr followed forward attr A when A was
    perturbed (or, for an attr no perturbation reached, where it equals the forward attr of its
    name, which is then noted unverified), else the constant."""
    fwd = call["fwd_attrs"]
    for m, op in enumerate(call["ops"]):
        same_op = m < len(base["ops"]) and base["ops"][m]["op"] == op["op"]
        for n, value in list(op["attrs"].items()):
            deps = follows.get((m, n), []) if same_op else []
            copies = [a for a, copied in deps if copied]
            if copies:
                op["attrs"][n] = "@" + (n if n in copies else copies[0])
            elif deps:
                notes.setdefault("derived", {})[f"op{m}.{n}"] = sorted({a for a, _ in deps})
            elif n in fwd and fwd[n] == value and (n in unverified or not same_op):
                op["attrs"][n] = "@" + n
                notes.setdefault("unverified", set()).add(f"op{m}.{n}")


def _perturbations(ctype: str, pname: str, value, paddle) -> list:
    """Other values to give a forward attr, to see which appended attrs follow it."""
    if ctype == "bool":
        return [not value]
    if ctype in ("int", "int64_t"):
        return [v for v in dict.fromkeys([value + 1, value - 1, 2]) if v != value]
    if ctype in ("float", "double"):
        return [value + 0.25, value * 0.5 + 0.125, 0.75]
    if ctype == "const std::string&":
        return list(_OTHER_STRINGS.get(value, ()))
    if ctype in ("const std::vector<int>&", "const std::vector<int64_t>&"):
        if pname in ("perm", "axis", "axes", "dims") and len(value) > 1:
            return [value[1:] + value[:1], value[::-1]]
        return [[v + 1 for v in value], [2] * len(value)] if value else [[1]]
    if ctype in ("const std::vector<float>&", "const std::vector<double>&"):
        return [[v + 0.5 for v in value]] if value else [[0.5]]
    if ctype == "phi::DataType":
        return [paddle.float64 if value == paddle.float32 else paddle.float32]
    if ctype == "std::vector<phi::Scalar>":
        return [[2.0]]
    return []


#: Another value for a string attr, to perturb it with.
_OTHER_STRINGS = {
    "NCHW": ["NHWC"], "NHWC": ["NCHW"], "NCDHW": ["NDHWC"], "NDHWC": ["NCDHW"], "EXPLICIT": ["SAME", "VALID"],
    "downgrade_in_infer": ["upscale_in_train"], "upscale_in_train": ["downgrade_in_infer"],
    "mean": ["sum"], "sum": ["mean"], "avg": ["max"], "max": ["avg"], "bilinear": ["nearest"],
    "zeros": ["border"], "constant": ["reflect"], "reflect": ["constant"], "none": ["relu"],
    "tanh": ["sigmoid"], "sigmoid": ["tanh"], "relu": ["sigmoid"], "backward": ["forward", "ortho"],
    "ij,jk->ik": ["ij,jk->ki"], "RNN_TANH": ["RNN_RELU"], "L": ["U"], "all": ["channel"],
    "reduced": ["complete"], "ADD": ["MUL"], "SUM": ["MEAN"], "AVERAGE": ["SUM"], "assign": ["add"],
}
#: Legacy AttrType -> the C++ type of the same kind (for `_perturbations`).
_LEGACY_CTYPE = {0: "int", 1: "float", 2: "const std::string&", 3: "const std::vector<int>&",
                 4: "const std::vector<float>&", 6: "bool", 9: "int64_t", 11: "const std::vector<int64_t>&",
                 15: "double"}


#: Python types Paddle's static API asks for in its "argument (position N) must be T" errors.
_COERCE = {"int": lambda v: int(v[0] if isinstance(v, list) else v),
           "float": lambda v: float(v[0] if isinstance(v, list) else v),
           "bool": lambda v: bool(v[0] if isinstance(v, list) else v),
           "list": lambda v: v if isinstance(v, list) else [v]}


def _is_combined(v) -> bool:
    d = v.get_defining_op() if v.initialized() else None
    return d is not None and d.name() == "builtin.combine"


def _attrs(core, op) -> dict:
    return {a["N"]: a["AT"] for a in json.loads(core.pir.get_attrs_map_json(op))}


class _Tokens:
    """Values of one probe -> their source tokens, and types -> the first value of that type."""

    def __init__(self) -> None:
        self.by_hash: dict[int, list] = {}
        self.types: list = []
        self.all_types: list = []

    def add(self, value, token: str) -> None:
        if not value.initialized() and not token.startswith("op"):
            return  # a null operand; an appended op's null result keeps its name
        bucket = self.by_hash.setdefault(value.hash(), [])
        if not any(v.is_same(value) for v, _ in bucket):
            bucket.append((value, token))
        if token.startswith(("in", "out", "grad")) and value.initialized():
            op = value.get_defining_op()
            if op is not None:
                t = json.loads(_type_line(op, value))
                self.all_types.append((t, token))
                if t not in [x for x, _ in self.types]:
                    self.types.append((t, token))

    def name(self, value) -> str:
        for v, token in self.by_hash.get(value.hash(), []):
            if v.is_same(value):
                return token
        op = value.get_defining_op()
        return "?" + (op.name() if op is not None else "block_arg")

    def type_of(self, t) -> str | None:
        """The first forward value's token whose type is `t`."""
        return next((token for x, token in self.types if x == t), None)

    def type_of_token(self, token) -> object:
        """The type of the value named `token` (a literal type stands for itself)."""
        if not isinstance(token, str):
            return token
        return next((x for x, tok in self.all_types if tok == token), None)


def _type_json(value) -> dict:
    return json.loads(_type_line(value.get_defining_op(), value))


def _type_line(op, value) -> str:
    import paddle
    return paddle.base.core.pir.get_outputs_type_json(op).splitlines()[value.index()]


def _cpp_value(ctype: str, text: str):
    """A C++ default argument as a Python value."""
    t = text.strip()
    if t in ("true", "false"):
        return t == "true" if ctype != "int" else int(t == "true")
    if t.startswith('"'):
        return t.strip('"')
    if t.startswith("{"):
        inner = t.strip("{}").strip()
        return [_cpp_value(ctype, x) for x in inner.split(",")] if inner else []
    if t.startswith("phi::DataType::"):
        import paddle
        dt = t.split("::")[-1].lower()
        return getattr(paddle, dt, None) if dt != "undefined" else paddle.base.core.DataType.UNDEFINED
    t = t.rstrip("fL") if re.match(r"^[-\d.e]+[fL]$", t) else t
    if "/" in t:
        a, b = t.split("/")
        return float(a.rstrip("f")) / float(b)
    if ctype in ("float", "double") or "." in t or "e" in t:
        return float(t)
    return int(t)


# --------------------------------------------------------------------------
# Driver side
# --------------------------------------------------------------------------
_LIST = r"""
import json, sys, warnings
warnings.filterwarnings("ignore")
import paddle
from paddle.base import core
paddle.enable_static()
names = json.load(open(sys.argv[1]))
ids = {"builtin": "0", "pd_op": "1", "cf": "2"}
ops = [{"#": ids[n.split(".", 1)[0]] + "." + n.split(".", 1)[1], "A": [], "I": [], "O": [], "OA": []}
       for n in names]
data = {"base_code": {"magic": "pir", "trainable": True, "version": 4},
        "program": {"regions": [{"#": "region_0", "blocks": [{"#": "block_0", "args": [], "ops": ops}]}]}}
json.dump(data, open(sys.argv[2], "w"))
prog = paddle.static.Program()
core.deserialize_pir_program(sys.argv[2], prog, -1)
json.dump({"paddle": paddle.__version__, "commit": paddle.version.commit,
           "vjp": sorted(op.name() for op in prog.global_block().ops if core.has_vjp(op))},
          open(sys.argv[3], "w"))
"""


def kind_of(name: str) -> str:
    """dense | inplace | grad | sparse | control: the classes of reference/pir.md §4."""
    base = name.split(".", 1)[1]
    if not name.startswith("pd_op."):
        return "control"
    if base.endswith(("_sp", "_sp_")):
        return "sparse"
    if re.search(r"_grad_?$", base):
        return "grad"
    return "inplace" if base.endswith("_") else "dense"


def vjp_ops(tmp: pathlib.Path) -> tuple[dict, list[str]]:
    """Paddle's version and every op name it reports has_vjp for (bare ops read unverified)."""
    names = json.loads(OP_NAMES.read_text())["ops"]
    every = [f"{d}.{n}" for d in ("pd_op", "cf") for n in names[d]]
    src, prog, out = tmp / "names.json", tmp / "bare.json", tmp / "vjp.json"
    src.write_text(json.dumps(every))
    subprocess.run([sys.executable, "-c", _LIST, str(src), str(prog), str(out)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    got = json.loads(out.read_text())
    return {"paddle": got["paddle"], "commit": got["commit"]}, got["vjp"]


def related_names(name: str) -> tuple[str | None, str | None]:
    """(via, twin): the op whose VJP appends `name` (a grad op's forward: `x_grad` -> `x`,
    `x_double_grad` -> `x_grad`), and the out-of-place twin of an in-place op (`relu_` -> `relu`)."""
    if name.endswith("_") and not name.endswith("__"):
        return None, name[:-1]
    for suffix, parent in (("_triple_grad", "_double_grad"), ("_double_grad", "_grad"), ("_grad", "")):
        if name.endswith(suffix):
            return name[: -len(suffix)] + parent, None
    return None, None


#: Ops whose VJP ir_backward drives itself (sub-blocks, stacks, recursion): not probed.
CONTROL_FLOW = {
    "pd_op.if": "ir_backward builds the grad `if` through call_vjp twice (once to copy the inputs, once "
                "for the op) and fills both branches by recursion, with cf stacks fed by tuple_push",
    "pd_op.while": "ir_backward makes cf.has_elements and a grad `while` whose body it fills by "
                   "recursion, popping the cf stacks the forward body pushed",
    "cf.tuple_push": "exists only inside control flow, where ir_backward pairs it with tuple_pop",
}


#: Sparse ops whose static API and operand kinds the name does not spell.
_SPARSE_API = {"coo_to_dense": ("to_dense", ["coo"]), "csr_to_dense": ("to_dense", ["csr"]),
               "csr_to_coo": ("to_sparse_coo", ["csr"]), "dense_to_coo": ("to_sparse_coo", ["dense"]),
               "mask_as_coo": ("mask_as", ["dense", "coo"]), "mask_as_csr": ("mask_as", ["dense", "csr"]),
               "masked_matmul": ("masked_matmul", ["dense", "dense", "csr"]),
               "fused_attention": ("fused_attention", ["dense", "dense", "dense", "csr"]),
               "sparse_coo_tensor": ("sparse_coo_tensor", [])}
_SPARSE_PLANS = {
    "conv3d": {"shapes": {"x": [1, 4, 4, 4, 3], "kernel": [3, 3, 3, 3, 2]},
               "attrs": {"paddings": [1, 1, 1], "dilations": [1, 1, 1], "strides": [1, 1, 1]}},
    "maxpool": {"shape": [1, 4, 4, 4, 3], "attrs": {"kernel_sizes": [2, 2, 2], "paddings": [0, 0, 0],
                                                    "dilations": [1, 1, 1], "strides": [1, 1, 1]}},
    "batch_norm": {"shapes": {"x": [1, 4, 4, 4, 3], "mean": [3], "variance": [3], "scale": [3], "bias": [3]},
                   "attrs": {"data_format": "NDHWC"}},
    "sync_batch_norm": {"shapes": {"x": [1, 4, 4, 4, 3], "mean": [3], "variance": [3], "scale": [3],
                                   "bias": [3]}, "attrs": {"data_format": "NDHWC"}},
    "sparse_coo_tensor": {"shapes": {"values": [3], "indices": [2, 3]}, "attrs": {"shape": [3, 3]}},
    "mv": {"shapes": {"x": [3, 4], "vec": [4]}},
    "fused_attention": {"shapes": {"query": [1, 2, 4, 8], "key": [1, 2, 4, 8], "value": [1, 2, 4, 8],
                                   "sparse_mask": [2, 4, 4], "key_padding_mask": [1, 4],
                                   "attn_mask": [4, 4]}, "dtypes": {"key_padding_mask": "float32"}},
    "mask_as": {"dtypes": {"mask": "float32"}}, "masked_matmul": {"dtypes": {"mask": "float32"}},
    "transpose": {"attrs": {"perm": [1, 0]}}, "reshape": {"attrs": {"shape": [9]}},
    "slice": {"attrs": {"axes": [0], "starts": [0], "ends": [2]}},
}


def sparse_plan(name: str, params: list | None) -> dict:
    """The probe plan of a sparse op: its static API (`sparse_<op>`, which picks the COO or CSR
    op from its operands' kinds) and which operands are COO / CSR values (made from dense ones
    by dense_to_coo_sp / dense_to_csr_sp), as its name spells them."""
    base = name.split(".", 1)[1]
    inplace = base.endswith("_")
    base = base.rstrip("_").removesuffix("_sp")
    if base in _SPARSE_API:
        api, kinds = _SPARSE_API[base]
    else:
        toks = base.split("_")
        kinds = []
        while toks and toks[-1] in ("coo", "csr", "dense"):
            kinds.insert(0, toks.pop())
        api, kinds = "_".join(toks), kinds or ["coo"]
    values = [p[1] for p in params or () if p[0] == "pir::Value"]
    if api == "addmm" and len(kinds) == 2:  # addmm_X_Y: x is X, y is Y, input is X when both are
        kinds = [kinds[0] if kinds[0] == kinds[1] else "dense", *kinds]
    plan = {"api": f"sparse_{api}" + ("_" if inplace else ""),
            "sparse": {v: k for v, k in zip(values, kinds) if k != "dense"}}
    extra = _SPARSE_PLANS.get(api, {})
    return {**plan, **extra, "dtypes": {"indices": "int64", **extra.get("dtypes", {})}}


def job_for(name: str, sigs: dict) -> dict:
    """The worker's job for `name`: its Build signature (or plan's), plan, and the related ops' jobs."""
    def one(n: str) -> dict:
        sig = sigs.get(n) or {}
        plan = SPECIAL.get(n) or (sparse_plan(n, sig.get("params")) if kind_of(n) == "sparse" else {})
        via, twin = related_names(n)
        return {"op": n, "params": plan.get("params", sig.get("params")), "plan": plan,
                "via": via, "twin": twin}
    job = one(name)
    related, todo = {}, [job["via"], job["twin"], job["plan"].get("via"), job["plan"].get("twin")]
    while todo:
        n = todo.pop()
        if n and n not in related and (n in sigs or n in SPECIAL):
            related[n] = one(n)
            todo += [related[n]["via"], related[n]["twin"], related[n]["plan"].get("via"),
                     related[n]["plan"].get("twin")]
    job["related"] = related
    return job


def run_probes(jobs: list[dict], tmp: pathlib.Path, workers: int) -> dict[str, dict]:
    """Probe every job in worker processes; a job whose process dies is recorded as a crash."""
    results: dict[str, dict] = {}
    pending = [jobs[i:i + BATCH] for i in range(0, len(jobs), BATCH)]
    running: list[tuple[subprocess.Popen, list[dict], pathlib.Path]] = []
    n = 0
    while pending or running:
        while pending and len(running) < workers:
            batch = pending.pop(0)
            n += 1
            jf, of = tmp / f"jobs{n}.json", tmp / f"out{n}.jsonl"
            for job in batch:
                job["stage_file"] = str(tmp / f"stage{n}.txt")
            jf.write_text(json.dumps(batch))
            of.write_text("")
            env = dict(os.environ, GLOG_minloglevel="3")
            p = subprocess.Popen([sys.executable, __file__, "--worker", str(jf), str(of)], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            running.append((p, batch, of))
        p, batch, of = running.pop(0)
        p.wait()
        done = [json.loads(line) for line in of.read_text().splitlines() if line.strip()]
        for rec in done:
            results[rec["op"]] = rec
        if len(done) < len(batch):
            dead = batch[len(done)]
            status = (-p.returncode) if p.returncode < 0 else (p.returncode << 8)
            results[dead["op"]] = {"op": dead["op"], "fail": {"stage": "crash", "reason": _died(status, dead)}}
            if batch[len(done) + 1:]:
                pending.insert(0, batch[len(done) + 1:])
        print(f"  {len(results)}/{len(jobs)} probed", file=sys.stderr)
    return results


# --------------------------------------------------------------------------
# Assembling the table
# --------------------------------------------------------------------------
def _standard(default: dict, variant: dict, stopped: list[str]) -> bool:
    """Whether `variant` is `default` with the stopped inputs' gradients null results, and nothing else."""
    if "error" in variant or len(variant["ops"]) != len(default["ops"]):
        return False
    expect_null = set()
    for key, src in default["returns"].items():
        if src is None:
            continue
        hit = any(key == s or key.startswith(s + ".") for s in stopped) or "all" in stopped
        if hit:
            m = re.fullmatch(r"op(\d+)\.(\d+)", src)
            if not m:
                return False  # a pass-through gradient cannot become a null result
            expect_null.add((int(m.group(1)), int(m.group(2))))
            if variant["returns"].get(key) is not None:
                return False
        elif variant["returns"].get(key) != src:
            return False
    for m, (a, b) in enumerate(zip(default["ops"], variant["ops"])):
        if {k: v for k, v in a.items() if k != "results"} != {k: v for k, v in b.items() if k != "results"}:
            return False
        want = [None if (m, r) in expect_null else t for r, t in enumerate(a["results"])]
        if b["results"] != want:
            return False
    return set(variant["returns"]) == set(default["returns"])


_OP_KEYS = ("op", "operands", "attrs", "results", "stop_gradient", "regions")
_SIG_KEYS = ("inputs", "grad", "vector", "optional", "outputs", "attrs")


def _ordered_ops(ops: list[dict]) -> list[dict]:
    return [{k: o[k] for k in _OP_KEYS if k in o} for o in ops]


def _ordered_variant(v: dict) -> dict:
    if "error" in v:
        return {"error": v["error"]}
    return {"ops": _ordered_ops(v["ops"]), "returns": v["returns"]}


def rule_of(rec: dict) -> dict:
    """One probe record -> the table entry: the default rule, compact when it is one op."""
    variants = rec["variants"]
    default = _ordered_variant(variants["default"])
    entry: dict = {"kind": kind_of(rec["op"]), "probe": rec.get("route", "api"),
                   "sig": {k: rec["sig"][k] for k in _SIG_KEYS if k in rec["sig"]}}
    if len(default["ops"]) == 1:
        entry.update(default["ops"][0])
    else:
        entry["ops"] = default["ops"]
    entry["returns"] = default["returns"]
    checked, other = [], {}
    for key, raw in sorted(variants.items()):
        if key == "default":
            continue
        v = _ordered_variant(raw)
        if key.startswith("attr:"):
            v = {"value": raw["fwd_attrs"].get(key[5:]), **v}
        if key.startswith("stop:") and _standard(default, v, [key[5:]]) or \
                key.startswith("absent:") and v == default:
            checked.append(key)
        else:
            other[key] = v
    entry["variants_checked"] = checked
    if other:
        entry["variants"] = other
    notes = rec.get("attr_notes", {})
    if notes.get("derived"):
        entry["attrs_derived"] = notes["derived"]
    if notes.get("unverified"):
        entry["attrs_unverified"] = notes["unverified"]
    return entry


def is_grad_of(name: str, entry: dict) -> bool:
    """Whether a one-op rule appends the op's own grad op: x -> x_grad, x_ -> x_grad,
    x_grad -> x_double_grad, x_double_grad -> x_triple_grad."""
    base = name.split(".", 1)[1].removesuffix("_") if name.endswith("_") and not name.endswith("__") \
        else name.split(".", 1)[1]
    for suffix, nxt in (("_double_grad", "_triple_grad"), ("_grad", "_double_grad")):
        if base.endswith(suffix):
            return entry.get("op") == "pd_op." + base[: -len(suffix)] + nxt
    return entry.get("op") == f"pd_op.{base}_grad"


def assemble(meta: dict, vjp: list[str], results: dict[str, dict]) -> dict:
    rules, failed = {}, {}
    for name in sorted(vjp):
        rec = results.get(name)
        if rec is None:
            continue
        if "fail" in rec:
            reason = rec["fail"]["reason"]
            if re.search(r"expected_dtype:\s*$", reason):
                reason = "no kernel in Paddle's CPU build (its API accepts no dtype): " + reason
            failed[name] = {"kind": kind_of(name), "stage": rec["fail"]["stage"], "reason": reason}
        else:
            rules[name] = rule_of(rec)
    kinds = ("dense", "inplace", "grad", "sparse", "control")
    one = {n: e for n, e in rules.items() if "ops" not in e}
    counts = {
        "has_vjp": {k: sum(kind_of(n) == k for n in vjp) for k in kinds},
        "recorded": {k: sum(e["kind"] == k for e in rules.values()) for k in kinds},
        "failed": {k: sum(e["kind"] == k for e in failed.values()) for k in kinds},
        "single_op": len(one),
        "single_own_grad_op": sum(is_grad_of(n, e) for n, e in one.items()),
        "multi_op": sum("ops" in e and len(e["ops"]) > 1 for e in rules.values()),
        "no_op": sum("ops" in e and not e["ops"] for e in rules.values()),
        "variants_probed": sum(1 + len(e["variants_checked"]) + len(e.get("variants", {}))
                               for e in rules.values()),
        "variants_stored": sum(len(e.get("variants", {})) for e in rules.values()),
        "attrs": sum(len(e["sig"]["attrs"]) for e in rules.values()),
        "attrs_perturbed": sum(len(results[n].get("attrs_perturbed", ())) for n in rules),
        "failed_by_stage": _tally(e["stage"] for e in failed.values()),
        "probed_by": _tally(e["probe"].split()[0] for e in rules.values()),
    }
    return {
        "_generated_by": GENERATED_BY,
        "_what": "what each PIR op's VJP rule (core.call_vjp) appends, recorded from Paddle on one-op "
                 "programs; prim off, default flags",
        "_format": FORMAT,
        "paddle": meta["paddle"], "paddle_commit": meta["commit"],
        "counts": counts,
        "rules": rules,
        "failed": failed,
    }


def dumps(table: dict) -> str:
    """The table as JSON, one line per rule and per failure (reviewable diffs, ~1 MB less)."""
    out = ["{"]
    keys = list(table)
    for i, k in enumerate(keys):
        comma = "," if i < len(keys) - 1 else ""
        v = table[k]
        if k in ("rules", "failed") and v:
            out.append(f" {json.dumps(k)}: {{")
            names = list(v)
            for j, n in enumerate(names):
                out.append(f"  {json.dumps(n)}: {json.dumps(v[n])}" + ("," if j < len(names) - 1 else ""))
            out.append(" }" + comma)
        else:
            out.append(f" {json.dumps(k)}: {json.dumps(v)}{comma}")
    return "\n".join(out + ["}"]) + "\n"


def _tally(items) -> dict:
    out: dict = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return dict(sorted(out.items()))


FORMAT = {
    "rules": "PIR op -> {kind, probe, sig, then op, operands, attrs, results (and stop_gradient) when "
             "the rule appends one op, else ops: [such records]; returns, variants_checked, variants?}",
    "kind": "dense (forward ops, with if and while) | inplace | grad (a grad op's own VJP: double and "
            "triple grads) | sparse | control (cf.tuple_push)",
    "probe": "how the one-op program was made: api (the op's static API), via X (the op X's VJP "
             "appended it), twin X (its out-of-place twin X written to a file, renamed, read back: "
             "Paddle reads ops unverified), legacy T (Paddle's translator, from legacy op type T), "
             "array (the tensor-array APIs)",
    "sig": "the forward op: inputs (operand names in order), grad (those with grad semantics: the "
           "inputs call_vjp returns a gradient for), vector (inputs fed by builtin.combine), optional "
           "(inputs the op builds without), outputs, attrs",
    "source": "inI: forward operand I; inI.K: element K of the builtin.combine feeding operand I; "
              "outJ / outJ.K: forward result J / element K of its builtin.split (array_write_'s and "
              "assign_out_'s out0 is the operand ir_backward takes as their output); gradJ / gradJ.K: "
              "the out_grad of outJ / outJ.K (array_read: gradN, N its result count, is its array's "
              "gradient); opM.R: result R of the rule's M-th appended op, from 0; null: a null operand",
    "operands": "one source per operand of the appended op",
    "attrs": "name -> '@name' (the forward op's attribute of that name, copied) or the attribute "
             "as a PIR file writes it ({'#': tag, 'D': data}): constants, e.g. a full's value",
    "results": "one per result: a source whose type it has (the input it is the gradient of when "
               "that fits), the literal PIR type when no forward value has it, null for a null result",
    "stop_gradient": "the results' stop_gradient flags, only when some is true; [] when the op sets "
                     "none (array_write_: a file writes no flags for it)",
    "returns": "inI (inI.K for a combine's elements) -> the source call_vjp returns as that input's "
               "gradient, or null",
    "variants_checked": "stop:inI / stop:inI.K / stop:all: probed with those inputs stop_gradient and "
                        "equal to the default but for their gradients: null results, returned as null "
                        "(Paddle's ConstructVjpResultByStopGradients); absent:NAME: probed with the "
                        "optional operand NAME null and equal to the default",
    "variants": "variant -> {ops, returns} in full where it differs otherwise, or {error} where "
                "Paddle refused it; attr:A: the forward attr A set to another value ('value') changes "
                "which ops are appended or what they read",
    "attrs_derived": "opM.NAME -> forward attrs it changes with but does not copy (set by code)",
    "attrs_unverified": "opM.NAME written '@NAME' because it equals the forward attr of its name, "
                        "where no other value of that attr could be probed",
    "failed": "PIR op -> {kind, stage (build: making the one-op program; vjp: call_vjp; crash: the "
              "process died; skipped: not probed), reason}",
}


def coverage_md(table: dict) -> str:
    c = table["counts"]
    lines = ["# PIR VJP rules: coverage", "",
             f"Written by `{GENERATED_BY}` with Paddle {table['paddle']} "
             f"(`{table['paddle_commit']}`); the table is `pybackward/data/pir_vjp_rules.json`.", "",
             "| kind | has_vjp | recorded | failed |", "|---|---|---|---|"]
    for k in c["has_vjp"]:
        lines.append(f"| {k} | {c['has_vjp'][k]} | {c['recorded'][k]} | {c['failed'][k]} |")
    lines.append(f"| **total** | {sum(c['has_vjp'].values())} | {sum(c['recorded'].values())} "
                 f"| {sum(c['failed'].values())} |")
    lines += ["", f"- rules appending one op: {c['single_op']} ({c['single_own_grad_op']} of them the "
              f"op's own grad op: `x` -> `x_grad`, `x_grad` -> `x_double_grad`, ...); several ops: "
              f"{c['multi_op']}; none: {c['no_op']}",
              f"- variants probed (the default, each stop flag, each optional operand left out): "
              f"{c['variants_probed']}; stored whole because they differ otherwise: {c['variants_stored']}",
              f"- forward attributes set to another value to see which appended attributes copy "
              f"them: {c['attrs_perturbed']} of {c['attrs']} (the rest: `attrs_unverified` where an "
              f"equal value was taken for a copy)",
              f"- probed by: {c['probed_by']}",
              f"- failures by stage: {c['failed_by_stage']}", "", "## Failed", "",
              "| op | kind | stage | reason |", "|---|---|---|---|"]
    for n, f in table["failed"].items():
        lines.append(f"| `{n}` | {f['kind']} | {f['stage']} | {f['reason'].replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", help="comma-separated op names to probe (default: every op with a VJP)")
    ap.add_argument("--out", type=pathlib.Path, default=None)
    ap.add_argument("--raw", type=pathlib.Path, default=None)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(*args.worker)
        return
    if os.environ.get("PYTHONHASHSEED") != "0" or os.environ.get("FLAGS_enable_pir_api", "1") in ("0", "false"):
        env = dict(os.environ, PYTHONHASHSEED="0")
        env.pop("FLAGS_enable_pir_api", None)
        os.execve(sys.executable, [sys.executable, str(pathlib.Path(__file__).resolve()), *sys.argv[1:]], env)
    sigs = signatures()
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        meta, vjp = vjp_ops(tmp)
        wanted = vjp
        if args.ops:
            wanted = [n if "." in n else f"pd_op.{n}" for n in args.ops.split(",")]
            unknown = [n for n in wanted if n not in vjp]
            if unknown:
                sys.exit(f"no VJP in Paddle for: {', '.join(unknown)}")
        jobs = [job_for(name, sigs) for name in wanted]
        results = run_probes(jobs, tmp, args.jobs)
    if args.raw:
        args.raw.write_text("".join(json.dumps(results[n], sort_keys=True) + "\n" for n in sorted(results)))
    table = assemble(meta, wanted, results)
    out = args.out or OUT
    out.write_text(dumps(table))
    if not args.out:
        COVERAGE.write_text(coverage_md(table))
    c = table["counts"]
    print(f"wrote {out}: {sum(c['recorded'].values())} rules, {sum(c['failed'].values())} failed",
          file=sys.stderr)


if __name__ == "__main__":
    main()
