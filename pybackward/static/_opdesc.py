"""Writing op and var descs the way Paddle 3.3.1's legacy `Block.append_op`
and `Variable.__init__` write them.

* Input slots: when the layer passes an inputs dict, *every* input slot of the
  op's proto is written, the ones it did not give as empty slots
  (`ScaleTensor: []` on `scale`); with no inputs dict, none. Output slots:
  the given ones. Slots are written sorted by name (the C++ OpDesc keeps them
  in a map).
* Attrs: Paddle's checker defaults for the type (`registry.default_attrs`,
  recorded from Paddle; `_FALLBACK_ATTRS` below for the few types that
  recording skipped because they have a required attr), overridden by what the
  layer passed - attrs the proto does not know are dropped, as Paddle drops
  them - then `op_role=0`, `op_namescope="/"`. Order: the type's extra attrs
  first, then the rest, each sorted by name. `op_callstack` is left empty
  (Paddle records the Python stack that created the op).
* Vars: fields are set exactly when Paddle's `Variable.__init__` sets them
  (so `persistable: false` is present on layer outputs and absent on the
  `tmp_N` vars of Variable operators), `legacy_lod_level: 0` on the outputs
  whose shape inference shares the LoD (`shares_lod`).
"""
from __future__ import annotations

import struct
from typing import Any, Mapping, Sequence

from ..base import attrs as _attrs
from ..base import dtypes
from .._proto import framework_pb2 as pb
from ..ops import registry

VarType = pb.VarType

#: ProgramDesc.version and op_version_map of every program Paddle 3.3.1 writes.
PROGRAM_VERSION = 3003001
OP_VERSION_MAP = (
    ("distribute_fpn_proposals", 2), ("elementwise_add", 1), ("elementwise_sub", 1),
    ("moving_average_abs_max_scale", 2), ("not_equal", 1), ("linspace", 1), ("less_than", 1),
    ("less_equal", 1), ("matrix_nms", 1), ("kldiv_loss", 1), ("truncated_gaussian_random", 1),
    ("assign_value", 1), ("depthwise_conv2d_transpose", 1), ("lstsq", 1), ("quantize", 2),
    ("global_scatter", 1), ("grid_sampler", 1), ("generate_proposals_v2", 1), ("flip", 1),
    ("global_gather", 1), ("dequantize", 1), ("greater_equal", 1), ("depthwise_conv2d", 1),
    ("instance_norm", 1), ("coalesce_tensor", 2), ("thresholded_relu", 1), ("greater_than", 1),
    ("cumprod", 1), ("weight_quantize", 1), ("matmul", 1), ("for_pybind_test__", 4),
    ("hard_shrink", 1), ("gather", 1), ("max_pool3d_with_index", 1), ("conv2d", 1),
    ("histogram", 1), ("yolo_box", 1), ("affine_grid", 1), ("allclose", 2),
    ("conv3d_transpose", 1), ("argsort", 1), ("fake_channel_wise_quantize_abs_max", 1),
    ("conv2d_transpose", 2), ("conv3d", 1), ("clip", 1), ("fill_constant", 2), ("cumsum", 1),
    ("collect_fpn_proposals", 1), ("momentum", 1), ("lamb", 1), ("p_norm", 1), ("round", 1),
    ("partial_allgather", 1), ("pixel_shuffle", 1), ("auc", 1), ("roi_align", 3),
    ("lookup_table", 1), ("roi_pool", 2), ("roll", 2), ("elementwise_div", 1),
    ("max_pool2d_with_index", 1), ("leaky_relu", 1), ("trace", 1), ("weight_dequantize", 1),
    ("softplus", 1), ("print", 1), ("unique_consecutive", 1), ("weight_only_linear", 1),
    ("equal", 1), ("elementwise_mul", 1), ("set_value", 4), ("seed", 1), ("requantize", 1),
    ("generate_proposals", 2), ("elementwise_pow", 1), ("lookup_table_v2", 1),
)

#: The input slots of each op type's proto (all written when inputs are given).
INPUT_SLOTS: dict[str, tuple[str, ...]] = {
    "mul": ("X", "Y"), "matmul_v2": ("X", "Y"),
    "elementwise_add": ("X", "Y"), "elementwise_sub": ("X", "Y"),
    "elementwise_mul": ("X", "Y"), "elementwise_div": ("X", "Y"),
    "elementwise_pow": ("X", "Y"), "elementwise_floordiv": ("X", "Y"),
    "elementwise_mod": ("X", "Y"),
    "scale": ("X", "ScaleTensor", "BiasTensor"),
    "lookup_table_v2": ("Ids", "W"),
    "conv2d": ("Input", "Filter"), "depthwise_conv2d": ("Input", "Filter"),
    "batch_norm": ("X", "Scale", "Bias", "Mean", "Variance", "MomentumTensor"),
    "layer_norm": ("X", "Scale", "Bias"),
    "relu": ("X",), "sigmoid": ("X",), "tanh": ("X",), "softmax": ("X",), "gelu": ("X",),
    "square": ("X",), "cast": ("X",), "stack": ("X",), "sum": ("X",), "transpose2": ("X",),
    "reduce_mean": ("X",), "reduce_sum": ("X",), "pool2d": ("X",),
    "reshape2": ("X", "Shape", "ShapeTensor"),
    "concat": ("X", "AxisTensor"),
    "split": ("X", "AxisTensor", "SectionsTensorList"),
    "slice": ("Input", "StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList"),
    "gather": ("X", "Index", "Axis"),
    "dropout": ("X", "Seed"),
    "softmax_with_cross_entropy": ("Logits", "Label"),
    "unsqueeze2": ("X", "AxesTensor", "AxesTensorList"), "squeeze2": ("X",),
    "fill_constant": ("ValueTensor", "ShapeTensor", "ShapeTensorList"),
    "fill_constant_batch_size_like": ("Input",),
    "uniform_random": ("ShapeTensor", "ShapeTensorList"),
    "gaussian_random": ("ShapeTensor", "ShapeTensorList"),
    "truncated_gaussian_random": (),
}

#: (op type, output slot) whose var Paddle's shape inference leaves without a
#: LoD level; every other output gets `legacy_lod_level: 0`.
NO_LOD = frozenset({
    ("batch_norm", "MeanOut"), ("batch_norm", "VarianceOut"), ("batch_norm", "SavedMean"),
    ("batch_norm", "SavedVariance"), ("batch_norm", "ReserveSpace"),
    ("conv2d", "Output"), ("depthwise_conv2d", "Output"), ("dropout", "Mask"),
    ("layer_norm", "Mean"), ("layer_norm", "Variance"),
    ("reduce_mean", "Out"), ("reduce_sum", "Out"), ("transpose2", "Out"),
    ("fill_constant", "Out"), ("uniform_random", "Out"), ("gaussian_random", "Out"),
    ("truncated_gaussian_random", "Out"), ("fill_constant_batch_size_like", "Out"),
})

_I, _F, _S, _INTS, _STRS, _B = (_attrs.INT, _attrs.FLOAT, _attrs.STRING, _attrs.INTS,
                                _attrs.STRINGS, _attrs.BOOLEAN)
_GENERATED = (("op_callstack", _STRS, []), ("op_device", _S, ""), ("op_namescope", _S, ""),
              ("op_role", _I, 4096), ("op_role_var", _STRS, []), ("with_quant_attr", _B, False))
_ONEDNN = (("mkldnn_data_type", _S, "float32"), ("onednn_data_type", _S, ""),
           ("use_mkldnn", _B, False), ("use_onednn", _B, False))
_ELEMENTWISE_EXTRAS = (("Scale_out", _F, 1.0), ("Scale_x", _F, 1.0), ("Scale_y", _F, 1.0),
                       *_ONEDNN, ("use_quantizer", _B, False))

#: (extras, attrs) of the op types `fresh_attrs.json` lacks (recorded from
#: Paddle 3.3.1 the same way; required attrs carry a placeholder default the
#: layers always override).
_FALLBACK_ATTRS: dict[str, tuple[tuple, tuple]] = {
    "transpose2": ((("data_format", _S, "AnyLayout"), *_ONEDNN), (("axis", _INTS, [0]),)),
    "slice": (_ONEDNN, (("axes", _INTS, [0]), ("decrease_axis", _INTS, []), ("ends", _INTS, []),
                        ("infer_flags", _INTS, []), ("starts", _INTS, []))),
    "pool2d": ((("is_test", _B, False), *_ONEDNN, ("use_quantizer", _B, False)),
               (("adaptive", _B, False), ("ceil_mode", _B, False), ("data_format", _S, "NCHW"),
                ("exclusive", _B, True), ("global_pooling", _B, False), ("ksize", _INTS, [1, 1]),
                ("padding_algorithm", _S, "EXPLICIT"), ("paddings", _INTS, [0, 0]),
                ("pooling_type", _S, ""), ("strides", _INTS, [1, 1]), ("use_cudnn", _B, False))),
    "truncated_gaussian_random": ((), (("a", _F, -2.0), ("b", _F, 2.0), ("dtype", _I, 5),
                                       ("mean", _F, 0.0), ("seed", _I, 0), ("shape", _INTS, [1]),
                                       ("std", _F, 1.0))),
    "flatten_contiguous_range": (_ONEDNN, (("start_axis", _I, 1), ("stop_axis", _I, 1))),
    "fill_constant_batch_size_like": ((), (("dtype", _I, 5), ("force_cpu", _B, False),
                                           ("input_dim_idx", _I, 0), ("output_dim_idx", _I, 0),
                                           ("shape", _INTS, [1]), ("str_value", _S, ""),
                                           ("value", _F, 0.0))),
    "elementwise_floordiv": (_ELEMENTWISE_EXTRAS, (("axis", _I, -1),)),
    "elementwise_mod": (_ELEMENTWISE_EXTRAS, (("axis", _I, -1),)),
}

_TABLES: dict[str, tuple[tuple[str, int, Any], ...]] = {}


def attr_list(op_type: str) -> tuple[tuple[str, int, Any], ...]:
    """[(name, AttrType, default), ...] of an op type in Paddle's serialised
    order: the extra attrs sorted, then the others sorted. A name that is both
    an extra and a proto attr (reshape2's `use_quantizer`) is written twice,
    as Paddle writes it."""
    hit = _TABLES.get(op_type)
    if hit is not None:
        return hit
    defaults = registry.default_attrs(op_type)
    if defaults is not None:
        entries = tuple((name, t, default) for name, t, default in defaults)
    elif op_type in _FALLBACK_ATTRS:
        ex, rest = _FALLBACK_ATTRS[op_type]
        entries = tuple(sorted(ex)) + tuple(sorted((*rest, *_GENERATED)))
    else:
        raise KeyError(f"pybackward.static does not know Paddle's attrs of op type '{op_type}'")
    _TABLES[op_type] = entries
    return entries


def make_op_desc(op_type: str, inputs: Mapping[str, Sequence[str]] | None,
                 outputs: Mapping[str, Sequence[str]],
                 attrs: Mapping[str, Any] | None, op_role: int = 0) -> pb.OpDesc:
    """An OpDesc as Paddle's legacy `Block.append_op` serialises it."""
    desc = pb.OpDesc()
    fill_op_desc(desc, op_type, inputs, outputs, attrs, op_role)
    return desc


def fill_op_desc(desc: pb.OpDesc, op_type: str, inputs: Mapping[str, Sequence[str]] | None,
                 outputs: Mapping[str, Sequence[str]],
                 attrs: Mapping[str, Any] | None, op_role: int = 0
                 ) -> tuple[dict[str, Sequence[str]], dict[str, Sequence[str]]]:
    """Fill an empty OpDesc (one just added to a block) as `make_op_desc` makes
    it. Returns the input and output slots as written, in order."""
    template, where = _TEMPLATES.get((op_type, op_role)) or _attr_template(op_type, op_role)
    if inputs is None:
        in_slots: dict[str, Sequence[str]] = {}
    else:
        given = dict.fromkeys(INPUT_SLOTS.get(op_type, ()), ())
        given.update({k: v for k, v in inputs.items() if v is not None})
        in_slots = {slot: given[slot] for slot in sorted(given)}
    out_slots = {slot: outputs[slot] for slot in sorted(outputs)}
    # The type and slots go in as wire bytes, merged together with the attrs
    # below: one parse costs less than a message add per slot.
    try:
        head = _encode_head(op_type, in_slots, out_slots)
    except Exception:  # not all str: the setters raise what they raise
        head = b""
        desc.type = op_type
        for slot, args in in_slots.items():
            desc.inputs.add(parameter=slot, arguments=args)
        for slot, args in out_slots.items():
            desc.outputs.add(parameter=slot, arguments=args)
    # The defaults come encoded from the type's template; only the attrs the
    # layer passed are encoded here (op_role and op_namescope are the builder's).
    if not attrs:
        desc.MergeFromString(head + template)
        return in_slots, out_slots
    # Layers pass the same attrs over and over (every fc's mul, every
    # initializer's uniform_random): the filled attr list is made once per
    # (type, role, attrs) and merged from its bytes.
    key = _filled_key(op_type, op_role, attrs)
    data = _FILLED.get(key) if key is not None else None
    if data is None:
        target = desc if key is None else pb.OpDesc()
        target.MergeFromString(head + template if key is None else template)
        descs = target.attrs
        for name, value in attrs.items():
            if value is not None:
                for k, t, default in where.get(name, ()):
                    if isinstance(value, tuple):
                        value = list(value)
                    if not _same_value(value, default):  # else the template holds it already
                        _attrs.encode(descs[k], name, value, t)
        if key is None:
            return in_slots, out_slots
        data = target.SerializePartialToString()
        if len(_FILLED) >= 20000:
            _FILLED.clear()
        _FILLED[key] = data
    desc.MergeFromString(head + data)
    return in_slots, out_slots


# Wire tags of OpDesc: inputs = 1, outputs = 2, type = 3 (length-delimited);
# of OpDesc.Var: parameter = 1, arguments = 2.
_INPUTS, _OUTPUTS, _TYPE, _PARAMETER, _ARGUMENT = b"\n", b"\x12", b"\x1a", b"\n", b"\x12"
_SHORT = tuple(bytes((n,)) for n in range(128))


def _varint(n: int) -> bytes:
    if n < 128:
        return _SHORT[n]
    out = bytearray()
    while n >= 128:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _encode_head(op_type: str, in_slots: Mapping[str, Sequence[str]],
                 out_slots: Mapping[str, Sequence[str]]) -> bytes:
    """`type`, `inputs` and `outputs` of an OpDesc as wire bytes (the slots in
    the order given). Raises unless the type, slots and arguments are all str.

    Built as a str first, each length as one character: when the result is
    ASCII, every name was ASCII (a byte per character) and every length below
    128 (a one-byte varint), so its encoding is the wire bytes; otherwise they
    are encoded exactly, name by name."""
    parts = ["\x1a", chr(len(op_type)), op_type]
    for tag, slots in (("\n", in_slots), ("\x12", out_slots)):
        for slot, args in slots.items():
            var = ["\n", chr(len(slot)), slot]
            for a in args:
                var += ("\x12", chr(len(a)), a)
            var = "".join(var)
            parts += (tag, chr(len(var)), var)
    head = "".join(parts)
    if head.isascii():
        return head.encode()
    return _encode_head_exact(op_type, in_slots, out_slots)


def _encode_head_exact(op_type: str, in_slots: Mapping[str, Sequence[str]],
                       out_slots: Mapping[str, Sequence[str]]) -> bytes:
    t = op_type.encode()
    parts = [_TYPE, _varint(len(t)), t]
    for tag, slots in ((_INPUTS, in_slots), (_OUTPUTS, out_slots)):
        for slot, args in slots.items():
            s = slot.encode()
            body = [_PARAMETER, _varint(len(s)), s]
            for a in args:
                e = a.encode()
                body += (_ARGUMENT, _varint(len(e)), e)
            var = b"".join(body)
            parts += (tag, _varint(len(var)), var)
    return b"".join(parts)


_FILLED: dict[tuple, bytes] = {}
_PLAIN_TYPES = frozenset((int, float, bool, str, type(None)))


def _filled_key(op_type: str, op_role: int, attrs: Mapping[str, Any]) -> tuple | None:
    """(type, role, repr of attrs) when every value is plain Python, whose repr
    says exactly how it encodes; None otherwise (NumPy values, objects)."""
    if type(attrs) is not dict:
        return None
    plain = _PLAIN_TYPES
    for v in attrs.values():
        t = type(v)
        if t in plain:
            continue
        if t is list or t is tuple:
            for e in v:
                te = type(e)
                if te not in plain and not ((te is list or te is tuple)
                                            and all(type(x) in plain for x in e)):
                    return None
            continue
        return None
    return (op_type, op_role, repr(attrs))


#: (op type, op_role) -> (the serialised default attrs of an OpDesc, and for
#: each attr a layer may set, its positions, AttrType and default there).
_TEMPLATES: dict[tuple[str, int], tuple[bytes, dict[str, tuple[tuple[int, int, Any], ...]]]] = {}
_BUILDER_ATTRS = ("op_role", "op_namescope")


def _attr_template(op_type: str, op_role: int) -> tuple[bytes, dict[str, tuple[tuple[int, int, Any], ...]]]:
    hit = _TEMPLATES.get((op_type, op_role))
    if hit is None:
        template = pb.OpDesc()
        where: dict[str, tuple[tuple[int, int, Any], ...]] = {}
        for k, (name, t, default) in enumerate(attr_list(op_type)):
            value = op_role if name == "op_role" else "/" if name == "op_namescope" else default
            _attrs.encode(template.attrs.add(), name, _plain(value), t)
            if name not in _BUILDER_ATTRS:
                where[name] = where.get(name, ()) + ((k, t, _plain(value)),)
        hit = _TEMPLATES[(op_type, op_role)] = (template.SerializePartialToString(), where)
    return hit


def attr_positions(op_type: str, op_role: int) -> dict[str, int]:
    """Where each attr sits in the descs `fill_op_desc` writes for this type
    (the last copy of a name written twice)."""
    hit = _POSITIONS.get((op_type, op_role))
    if hit is None:
        names = [name for name, _, _ in attr_list(op_type)]
        hit = _POSITIONS[(op_type, op_role)] = {name: k for k, name in enumerate(names)}
    return hit


_POSITIONS: dict[tuple[str, int], dict[str, int]] = {}


def _same_value(value: Any, default: Any) -> bool:
    """Whether `value` encodes exactly as `default` does (same types, same
    values, floats bit for bit - so -0.0 is not 0.0)."""
    t = type(value)
    if t is not type(default):
        return False
    if t is float:
        return _F64.pack(value) == _F64.pack(default)
    if t is list:
        return len(value) == len(default) and all(map(_same_value, value, default))
    return t in (int, bool, str) and value == default


_F64 = struct.Struct("<d")


def _plain(value: Any) -> Any:
    """Attr values as plain Python (tuples as lists)."""
    return list(value) if isinstance(value, tuple) else value


def fill_var_desc(desc: pb.VarDesc, name: str, *, type: int = VarType.DENSE_TENSOR,
                  dims: tuple[int, ...] | None = None, dtype: Any = None,
                  lod_level: int | None = None, persistable: bool | None = None,
                  stop_gradient: bool = False, need_check_feed: bool = False,
                  is_parameter: bool = False) -> None:
    """A new VarDesc, with exactly the fields Paddle's `Variable.__init__` sets
    (`dims`: the shape as `create_var` normalises it, ints with -1 unknown).

    Everything but the name comes from a serialised template per distinct
    (type, dtype, shape, flags): a program's vars share a few of them, and one
    parse costs less than the setter calls."""
    field = dtypes.TENSOR_VAR_TYPES.get(type)
    key = (type, _data_type("float32" if dtype is None else dtype) if field is not None else None,
           dims,
           None if lod_level is None else int(lod_level),
           None if persistable is None else bool(persistable),
           bool(stop_gradient), bool(need_check_feed), bool(is_parameter))
    template = _VAR_TEMPLATES.get(key)
    if template is None:
        if len(_VAR_TEMPLATES) >= 4096:
            _VAR_TEMPLATES.clear()
        template = _VAR_TEMPLATES[key] = _var_template(*key)
    desc.MergeFromString(template)
    desc.name = name


_VAR_TEMPLATES: dict[tuple, bytes] = {}


def _var_template(type: int, data_type: int | None, shape: tuple[int, ...] | None,
                  lod_level: int | None, persistable: bool | None, stop_gradient: bool,
                  need_check_feed: bool, is_parameter: bool) -> bytes:
    desc = pb.VarDesc()
    desc.type.type = type
    field = dtypes.TENSOR_VAR_TYPES.get(type)
    if field is not None:
        sub = getattr(desc.type, field)
        t = sub if field == "selected_rows" else sub.tensor
        # data_type is a required proto field: Paddle's default is FP32.
        t.data_type = data_type
        if shape is not None:
            t.dims.extend(shape)
        if lod_level is not None and field != "selected_rows":
            sub.legacy_lod_level = lod_level
    if persistable is not None:
        desc.persistable = persistable
    if need_check_feed:
        desc.need_check_feed = True
    if is_parameter:
        desc.is_parameter = True
    desc.stop_gradient = stop_gradient
    return desc.SerializePartialToString()


_NAMES: dict[tuple[type, Any], str] = {}


def dtype_name(dtype: Any) -> str:
    """`str(getattr(dtype, "name", dtype))`, remembered (NumPy's `dtype.name`
    is slow, and layers ask it for every parameter)."""
    key = (type(dtype), dtype)
    try:
        return _NAMES[key]
    except KeyError:
        name = _NAMES[key] = str(getattr(dtype, "name", dtype))
        return name
    except TypeError:  # unhashable
        return str(getattr(dtype, "name", dtype))


_DATA_TYPES: dict[tuple[type, Any], int] = {}


def _data_type(dtype: Any) -> int:
    """`dtypes.from_any`, remembered per dtype (layers pass the same few, often
    as NumPy dtypes, whose conversion is slow)."""
    key = (type(dtype), dtype)  # the type too: True == 1 == 1.0
    try:
        return _DATA_TYPES[key]
    except KeyError:
        value = _DATA_TYPES[key] = dtypes.from_any(dtype)
        return value
    except TypeError:  # unhashable
        return dtypes.from_any(dtype)
