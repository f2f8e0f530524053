"""Record how Paddle 3.3.1's translator turns ~40 legacy ops into PIR ops.

Each sample is a one-op legacy ProgramDesc, built here with attrs away from
their defaults (so a map that only knew defaults would fail), translated by
`paddle.pir.translate_to_pir_with_param_map` and saved by
`paddle.base.core.serialize_pir_program` (the JSON Paddle writes). A few
samples instead translate the grad op desc that the op's legacy grad maker
(`core.get_grad_op_desc`) emits. `tests/pir/test_opmap.py` checks that
`pybackward/data/pir_op_map.json` predicts each translation: the PIR op name,
the operand order (which legacy slot, or which attr via
`full_int_array`/`full`), the results and the attribute values.

samples.json: [{"name", "legacy": {"type", "inputs", "outputs", "attrs":
{name: [AttrType, value]}}, "pir": <serialized program>, "vars": {legacy var:
[op index, result index] in the program's block}}]

Run with Paddle 3.3.1 (PIR mode, the default; deterministic):
    PYTHONHASHSEED=0 /work/main/.paddle-venv/bin/python testdata/pir_opmap/gen_samples.py
(`--out FILE` writes elsewhere; the live test uses it to check this file is current.)
"""
import argparse
import json
import os
import pathlib
import tempfile

import paddle
from paddle.base import core
from paddle.base.proto import framework_pb2 as fpb

HERE = pathlib.Path(__file__).resolve().parent
T = fpb.AttrType
FRAMEWORK_ATTRS = {"op_role", "op_role_var", "op_namescope", "op_callstack", "op_device",
                   "with_quant_attr"}

# (sample name, legacy type, inputs, outputs, attrs, grad?) -- attrs as (AttrType, value)
SAMPLES = [
    ("matmul_v2", "matmul_v2", {"X": ["a"], "Y": ["b"]}, {"Out": ["c"]},
     {"trans_x": (T.BOOLEAN, True)}, False),
    ("elementwise_add", "elementwise_add", {"X": ["a"], "Y": ["b"]}, {"Out": ["c"]},
     {"axis": (T.INT, 1)}, False),
    ("elementwise_mul", "elementwise_mul", {"X": ["a"], "Y": ["b"]}, {"Out": ["c"]}, {}, False),
    ("reduce_mean", "reduce_mean", {"X": ["a"]}, {"Out": ["m"]},
     {"dim": (T.INTS, [1]), "keep_dim": (T.BOOLEAN, True)}, False),
    ("reduce_sum", "reduce_sum", {"X": ["a"]}, {"Out": ["s"]},
     {"dim": (T.INTS, [0, 1]), "out_dtype": (T.INT, 6)}, False),
    ("pool2d", "pool2d", {"X": ["img"]}, {"Out": ["p"]},
     {"ksize": (T.INTS, [3, 3]), "strides": (T.INTS, [2, 2]), "pooling_type": (T.STRING, "avg"),
      "paddings": (T.INTS, [1, 1])}, False),
    ("dropout", "dropout", {"X": ["a"]}, {"Out": ["d"], "Mask": ["mask"]},
     {"dropout_prob": (T.FLOAT, 0.25), "dropout_implementation": (T.STRING, "upscale_in_train"),
      "seed": (T.INT, 7)}, False),
    ("scale", "scale", {"X": ["a"]}, {"Out": ["s"]},
     {"scale": (T.FLOAT, 2.5), "bias": (T.FLOAT, 0.5), "bias_after_scale": (T.BOOLEAN, False)},
     False),
    ("scale_tensor", "scale", {"X": ["a"], "ScaleTensor": ["st"]}, {"Out": ["s"]},
     {"bias": (T.FLOAT, 1.0)}, False),
    ("concat", "concat", {"X": ["a", "b", "c"]}, {"Out": ["o"]}, {"axis": (T.INT, 1)}, False),
    ("concat_axis_tensor", "concat", {"X": ["a", "b"], "AxisTensor": ["ax"]}, {"Out": ["o"]}, {},
     False),
    ("split_sections", "split", {"X": ["a"]}, {"Out": ["p", "q"]},
     {"sections": (T.INTS, [1, 2]), "axis": (T.INT, 1)}, False),
    ("split_num", "split", {"X": ["a"]}, {"Out": ["p", "q"]}, {"num": (T.INT, 2)}, False),
    ("reshape2", "reshape2", {"X": ["a"]}, {"Out": ["r"], "XShape": ["xs"]},
     {"shape": (T.INTS, [3, -1])}, False),
    ("reshape2_shape_list", "reshape2", {"X": ["a"], "ShapeTensor": ["d0", "d1"]},
     {"Out": ["r"], "XShape": ["xs"]}, {}, False),
    ("batch_norm", "batch_norm",
     {"X": ["x"], "Scale": ["g"], "Bias": ["b"], "Mean": ["mu"], "Variance": ["var"]},
     {"Y": ["y"], "MeanOut": ["mu"], "VarianceOut": ["var"], "SavedMean": ["sm"],
      "SavedVariance": ["sv"], "ReserveSpace": ["rs"]},
     {"momentum": (T.FLOAT, 0.8), "epsilon": (T.FLOAT, 1e-3), "data_layout": (T.STRING, "NHWC")},
     False),
    ("transpose2", "transpose2", {"X": ["a"]}, {"Out": ["t"], "XShape": ["xs"]},
     {"axis": (T.INTS, [1, 0])}, False),
    ("softmax", "softmax", {"X": ["a"]}, {"Out": ["s"]}, {"axis": (T.INT, 0)}, False),
    ("conv2d", "conv2d", {"Input": ["img"], "Filter": ["w"]}, {"Output": ["o"]},
     {"strides": (T.INTS, [2, 2]), "paddings": (T.INTS, [1, 1]), "dilations": (T.INTS, [1, 1]),
      "groups": (T.INT, 1), "data_format": (T.STRING, "NCHW")}, False),
    ("layer_norm", "layer_norm", {"X": ["x"], "Scale": ["g"], "Bias": ["b"]},
     {"Y": ["y"], "Mean": ["m"], "Variance": ["v"]},
     {"begin_norm_axis": (T.INT, 1), "epsilon": (T.FLOAT, 1e-3)}, False),
    ("lookup_table_v2", "lookup_table_v2", {"Ids": ["ids"], "W": ["emb"]}, {"Out": ["o"]},
     {"padding_idx": (T.LONG, 0)}, False),
    ("cast", "cast", {"X": ["a"]}, {"Out": ["b"]},
     {"in_dtype": (T.INT, 5), "out_dtype": (T.INT, 3)}, False),
    ("fill_constant", "fill_constant", {}, {"Out": ["c"]},
     {"shape": (T.LONGS, [2, 3]), "value": (T.FLOAT, 1.5), "dtype": (T.INT, 6)}, False),
    ("fill_constant_value_tensor", "fill_constant", {"ValueTensor": ["v"]}, {"Out": ["c"]},
     {"shape": (T.LONGS, [2, 3]), "dtype": (T.INT, 5)}, False),
    ("slice", "slice", {"Input": ["a"]}, {"Out": ["s"]},
     {"axes": (T.INTS, [0]), "starts": (T.INTS, [0]), "ends": (T.INTS, [1]),
      "decrease_axis": (T.INTS, [0])}, False),
    ("unsqueeze2", "unsqueeze2", {"X": ["a"]}, {"Out": ["u"], "XShape": ["xs"]},
     {"axes": (T.INTS, [0, 2])}, False),
    ("expand_v2", "expand_v2", {"X": ["a"]}, {"Out": ["e"]}, {"shape": (T.INTS, [4, 2, 3])},
     False),
    ("tril", "tril_triu", {"X": ["a"]}, {"Out": ["t"]},
     {"lower": (T.BOOLEAN, True), "diagonal": (T.INT, 1)}, False),
    ("triu", "tril_triu", {"X": ["a"]}, {"Out": ["t"]}, {"diagonal": (T.INT, -1)}, False),
    ("top_k_v2", "top_k_v2", {"X": ["a"]}, {"Out": ["v"], "Indices": ["i"]},
     {"k": (T.INT, 2), "axis": (T.INT, 0), "largest": (T.BOOLEAN, False)}, False),
    ("arg_max", "arg_max", {"X": ["a"]}, {"Out": ["i"]},
     {"axis": (T.LONG, 1), "keepdims": (T.BOOLEAN, True), "dtype": (T.INT, 2)}, False),
    ("clip", "clip", {"X": ["a"]}, {"Out": ["c"]},
     {"min": (T.FLOAT, -1.0), "max": (T.FLOAT, 2.0)}, False),
    ("sum", "sum", {"X": ["a", "b", "c"]}, {"Out": ["s"]}, {}, False),
    ("mean", "mean", {"X": ["a"]}, {"Out": ["m"]}, {}, False),
    ("gelu", "gelu", {"X": ["a"]}, {"Out": ["g"]}, {"approximate": (T.BOOLEAN, True)}, False),
    ("uniform_random", "uniform_random", {}, {"Out": ["u"]},
     {"shape": (T.LONGS, [2, 3]), "min": (T.FLOAT, -2.0), "max": (T.FLOAT, 2.0),
      "seed": (T.INT, 7), "dtype": (T.INT, 5)}, False),
    ("cumsum", "cumsum", {"X": ["a"]}, {"Out": ["c"]},
     {"axis": (T.INT, 1), "reverse": (T.BOOLEAN, True)}, False),
    ("stack", "stack", {"X": ["a", "b"]}, {"Y": ["s"]}, {"axis": (T.INT, 1)}, False),
    ("unstack", "unstack", {"X": ["a"]}, {"Y": ["p", "q"]},
     {"axis": (T.INT, 0), "num": (T.INT, 2)}, False),
    ("softmax_with_cross_entropy", "softmax_with_cross_entropy",
     {"Logits": ["z"], "Label": ["y"]}, {"Softmax": ["sm"], "Loss": ["l"]},
     {"axis": (T.INT, -1), "ignore_index": (T.INT, 3)}, False),
    ("pow", "pow", {"X": ["a"]}, {"Out": ["p"]}, {"factor": (T.FLOAT, 3.0)}, False),
    ("flatten_contiguous_range", "flatten_contiguous_range", {"X": ["a"]},
     {"Out": ["f"], "XShape": ["xs"]}, {"start_axis": (T.INT, 0), "stop_axis": (T.INT, 1)}, False),
    # grad ops, as Paddle's legacy grad makers emit them
    ("matmul_v2_grad", "matmul_v2", {"X": ["a"], "Y": ["b"]}, {"Out": ["c"]},
     {"trans_y": (T.BOOLEAN, True)}, True),
    ("elementwise_add_grad", "elementwise_add", {"X": ["a"], "Y": ["b"]}, {"Out": ["c"]},
     {"axis": (T.INT, -1)}, True),
    ("reduce_mean_grad", "reduce_mean", {"X": ["a"]}, {"Out": ["m"]},
     {"dim": (T.INTS, [0]), "keep_dim": (T.BOOLEAN, True)}, True),
    ("reshape2_grad", "reshape2", {"X": ["a"]}, {"Out": ["r"], "XShape": ["xs"]},
     {"shape": (T.INTS, [6])}, True),
    ("dropout_grad", "dropout", {"X": ["a"]}, {"Out": ["d"], "Mask": ["mask"]},
     {"dropout_prob": (T.FLOAT, 0.1)}, True),
    ("pool2d_grad", "pool2d", {"X": ["img"]}, {"Out": ["p"]},
     {"ksize": (T.INTS, [2, 2]), "strides": (T.INTS, [2, 2])}, True),
    ("batch_norm_grad", "batch_norm",
     {"X": ["x"], "Scale": ["g"], "Bias": ["b"], "Mean": ["mu"], "Variance": ["var"]},
     {"Y": ["y"], "MeanOut": ["mu"], "VarianceOut": ["var"], "SavedMean": ["sm"],
      "SavedVariance": ["sv"], "ReserveSpace": ["rs"]}, {"epsilon": (T.FLOAT, 1e-4)}, True),
    ("softmax_with_cross_entropy_grad", "softmax_with_cross_entropy",
     {"Logits": ["z"], "Label": ["y"]}, {"Softmax": ["sm"], "Loss": ["l"]},
     {"soft_label": (T.BOOLEAN, True)}, True),
    ("transpose2_grad", "transpose2", {"X": ["a"]}, {"Out": ["t"], "XShape": ["xs"]},
     {"axis": (T.INTS, [1, 0])}, True),
    ("concat_grad", "concat", {"X": ["a", "b"]}, {"Out": ["o"]}, {"axis": (T.INT, 0)}, True),
]
SETTER = {T.INT: "_set_int32_attr", T.FLOAT: "_set_float32_attr", T.STRING: "_set_str_attr",
          T.INTS: "_set_int32s_attr", T.BOOLEAN: "_set_bool_attr", T.LONG: "_set_int64_attr",
          T.LONGS: "_set_int64s_attr", T.FLOATS: "_set_float32s_attr"}
FIELD = {T.INT: "i", T.FLOAT: "f", T.STRING: "s", T.INTS: "ints", T.FLOATS: "floats",
         T.STRINGS: "strings", T.BOOLEAN: "b", T.BOOLEANS: "bools", T.LONG: "l", T.LONGS: "longs",
         T.FLOAT64S: "float64s", T.FLOAT64: "float64"}


def declare(block, name):
    if block.has_var(name.encode()):
        return
    v = block.var(name.encode())
    v.set_type(core.VarDesc.VarType.DENSE_TENSOR)
    v.set_dtype(core.VarDesc.VarType.FP32)
    v.set_shape([2, 3])


def legacy_json(d) -> dict:
    m = fpb.OpDesc()
    m.ParseFromString(d.serialize_to_string())
    attrs = {}
    for a in sorted(m.attrs, key=lambda a: a.name):
        f = FIELD.get(a.type)
        if f is None or a.name in FRAMEWORK_ATTRS:
            continue
        v = getattr(a, f)
        attrs[a.name] = [a.type, list(v) if f not in ("i", "f", "s", "b", "l", "float64") else v]
    return {"type": m.type, "inputs": {v.parameter: list(v.arguments) for v in m.inputs},
            "outputs": {v.parameter: list(v.arguments) for v in m.outputs}, "attrs": attrs}


def one_op(op_type, inputs, outputs, attrs):
    desc = core.ProgramDesc()
    block = desc.block(0)
    d = block.append_op()
    d.set_type(op_type)
    for slots, put in ((inputs, d.set_input), (outputs, d.set_output)):
        for slot, names in slots.items():
            for n in names:
                declare(block, n)
            put(slot, names)
    for name, (t, value) in attrs.items():
        getattr(d, SETTER[t])(name, value)
    d.check_attrs()
    return desc, d


def grad_program(fwd):
    grads, _ = core.get_grad_op_desc(fwd, set(), [])
    desc = core.ProgramDesc()
    block = desc.block(0)
    d = block.append_op()
    d.copy_from(grads[0])
    for n in list(d.input_arg_names()) + list(d.output_arg_names()):
        declare(block, n)
    return desc, d


def record(name, desc, d) -> dict:
    prog, var_map = core.pir.translate_to_pir_with_param_map(desc)
    where = {}
    ops = prog.global_block().ops
    for i, op in enumerate(ops):
        for j, r in enumerate(op.results()):
            where[r.id] = [i, j]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "p.json")
        core.serialize_pir_program(prog, path, True, False, True)
        saved = json.loads(pathlib.Path(path).read_text())
    names = [o["#"] for o in saved["program"]["regions"][0]["blocks"][0]["ops"]]
    assert len(names) == len(ops), name
    return {"name": name, "legacy": legacy_json(d), "pir": saved,
            "vars": {v: where[vals[0].id] for v, vals in sorted(var_map.items())
                     if vals and vals[0].id in where}}


def main() -> None:
    ap = argparse.ArgumentParser(description="record legacy -> PIR translations")
    ap.add_argument("--out", default=str(HERE / "samples.json"))
    args = ap.parse_args()
    paddle.enable_static()
    out = []
    for name, op_type, inputs, outputs, attrs, grad in SAMPLES:
        desc, d = one_op(op_type, inputs, outputs, attrs)
        if grad:  # (the forward desc lives until grad_program has copied from d)
            desc, d = grad_program(d)
        out.append(record(name, desc, d))
    text = "[\n" + ",\n".join(json.dumps(s, sort_keys=True, separators=(",", ":")) for s in out)
    pathlib.Path(args.out).write_text(text + "\n]\n")
    print(f"{len(out)} samples, {len(text) // 1024} KB")


if __name__ == "__main__":
    main()
