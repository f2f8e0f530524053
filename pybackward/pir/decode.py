"""Types and attributes from their JSON, checked: the part of the reader that knows the tags.

Every PIR type and attribute is `{"#": tag, "D": data}` (or `"VD"` for a
non-finite float). `Decoder` turns one into a `Type` / `Attr` after checking
the tag is one Paddle 3.3.1 reads and the data has the shape that tag needs;
anything else fails with one line naming the op and the attribute. Equal
types and small attributes are shared (one object each), which keeps reading
fast and the model small.
"""
from __future__ import annotations

import json
from typing import Any, NoReturn

from ..base.errors import ProgramFileError, where
from .types import (DTYPE_NAMES, INT32, INT64, LAYOUTS, NULL_TYPE, PLACE_KINDS, SCALAR_ATTR_DTYPES, SCALAR_TAGS,
                    VOID_DATA, Attr, DenseTensorArrayType, DenseTensorType, OpaqueType, ScalarType, SelectedRowsType,
                    SparseCooTensorType, SparseCsrTensorType, Type, VectorType, scalar)

#: Dialect ids of a PIR file (Paddle's `DialectIdMap`).
DIALECT_IDS = {"0": "builtin", "1": "pd_op", "2": "cf", "3": "custom_op", "4": "pd_dist"}
DIALECT_ID_OF = {v: k for k, v in DIALECT_IDS.items()}
#: Attribute arrays and types nested deeper than this are refused.
MAX_ATTR_DEPTH = 32


def json_kind(x: Any) -> str:
    """What JSON value `x` is, in words: object, array, string, ..."""
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(x), "number")


class Decoder:
    """Decodes types and attributes for one file; `op_index` / `op_name` say where, for errors."""

    def __init__(self, loc: str) -> None:
        self.loc = loc
        self.op_index: int | None = None
        self.op_name: str | None = None
        self.types: dict[tuple, Type] = {}
        self.attrs: dict[tuple, Attr] = {}
        self.keep: list[tuple] = []

    def fail(self, msg: str) -> NoReturn:
        loc = where(self.loc, op_index=self.op_index, op_type=self.op_name)
        raise ProgramFileError(f"{loc}: {msg}")

    # ------------------------------------------------------------------ attributes
    def attr_map(self, entries: Any, key: str) -> dict[str, Attr]:
        if type(entries) is not list:
            self.fail(f"'{key}' (attributes) must be an array")
        out: dict[str, Attr] = {}
        for e in entries:
            if type(e) is not dict or len(e) != 2 or "N" not in e or "AT" not in e:
                self.fail(f"an attribute in '{key}' must be an object with 'N' and 'AT', not {json.dumps(e)[:60]}")
            name = e["N"]
            if type(name) is not str:
                self.fail(f"an attribute name in '{key}' must be a string, not {name!r}")
            if name in out:
                self.fail(f"attribute {name!r} is given twice")
            out[name] = self.attr(e["AT"], name, 0)
        return out

    def attr(self, aj: Any, name: str, depth: int) -> Attr:
        # Fast path: attributes repeat (flags, dtypes, places, stop_gradient arrays) and are
        # immutable, so one object serves every equal one. The key holds the data's type:
        # true and 1 are different attributes. Floats are not shared (-0.0 == 0.0).
        if type(aj) is dict and len(aj) == 2:
            d = aj.get("D", _BAD)
            td = type(d)
            if td is bool or td is int or td is str:
                key = (aj.get("#"), td, d)
                a = self.attrs.get(key)
                if a is None:
                    a = self.attrs[key] = self.attr_slow(aj, name, depth)
                return a
            if td is list and aj.get("#") == "0.a_array" and depth < MAX_ATTR_DEPTH:
                if len(d) == 1:               # [one flag]: stop_gradient / persistable of one result
                    e = d[0]
                    if type(e) is dict and len(e) == 2:
                        ed = e.get("D", _BAD)
                        key = ("0.a_array", e.get("#"), type(ed), ed) if type(ed) in (bool, int, str) else None
                        a = self.attrs.get(key) if key is not None else None
                        if a is not None:
                            return a
                        if key is not None:
                            a = self.attrs[key] = Attr("0.a_array", (self.attr(e, name, depth + 1),))
                            return a
                items = tuple(self.attr(x, name, depth + 1) for x in d)
                key = ("0.a_array", tuple(map(id, items)))
                a = self.attrs.get(key)
                if a is None:
                    a = self.attrs[key] = Attr("0.a_array", items)
                    self.keep.append(items)          # the ids in the key stay valid
                return a
        return self.attr_slow(aj, name, depth)

    def attr_slow(self, aj: Any, name: str, depth: int) -> Attr:
        if type(aj) is not dict:
            self.fail(f"attribute {name!r} must be an object with '#' and 'D', not {json_kind(aj)}")
        tag = aj.get("#")
        if "VD" in aj:
            vd = aj["VD"]
            if tag not in ("0.a_f32", "0.a_f64") or set(aj) != {"#", "VD"} or vd not in VOID_DATA:
                self.fail(f"attribute {name!r}: 'VD' is only for a_f32/a_f64 and holds \"INF\", \"-INF\" or "
                          f"\"NAN\", not {tag!r} / {vd!r}")
            return Attr(tag, VOID_DATA[vd], vd)
        if set(aj) != {"#", "D"}:
            self.fail(f"attribute {name!r} must have '#' and 'D' (got {', '.join(sorted(map(str, aj)))})")
        d = aj["D"]
        check = _ATTR_CHECKS.get(tag) if type(tag) is str else None
        if check is None:
            if type(tag) is str and tag.partition(".")[0] not in DIALECT_IDS:
                self.fail(f"attribute {name!r}: unknown dialect id in tag {tag!r}")
            self.fail(f"attribute {name!r}: unknown attribute tag {tag!r}")
        if tag == "0.a_array":
            if type(d) is not list:
                self.fail(f"attribute {name!r} ({tag}): 'D' must be an array")
            if depth >= MAX_ATTR_DEPTH:
                self.fail(f"attribute {name!r}: arrays nested more than {MAX_ATTR_DEPTH} deep")
            return Attr(tag, tuple(self.attr(x, name, depth + 1) for x in d))
        if tag == "0.a_type":
            return Attr(tag, self.type(d))
        value = check(d)
        if value is _BAD:
            self.fail(f"attribute {name!r} ({tag}): 'D' must be {_ATTR_WANT[tag]}, not {json.dumps(d)[:60]}")
        return Attr(tag, value)

    # ------------------------------------------------------------------ types
    def type(self, tj: Any, depth: int = 0) -> Type:
        if type(tj) is not dict:
            self.fail(f"a type must be an object with '#', not {json_kind(tj)}")
        tag = tj.get("#")
        if tag == "0.t_dtensor":
            d = tj.get("D")
            if type(d) is list and len(d) == 5 and len(tj) == 2:
                dt, dims, layout, lod, offset = d
                if type(dt) is dict and type(dims) is list and not lod and type(lod) is list:
                    try:
                        key = (dt.get("#"), *dims, layout, offset)
                        t = self.types.get(key)
                    except TypeError:
                        t = None
                    if t is not None and len(dt) == 1 and all(type(x) is int for x in dims) \
                            and type(offset) is int:
                        return t
                    t = self.dense(tag, d, depth)
                    if not t.lod:
                        self.types[key] = t
                    return t
            return self.dense(tag, d, depth)
        if depth > MAX_ATTR_DEPTH:
            self.fail(f"types nested more than {MAX_ATTR_DEPTH} deep")
        if tag == "NULL":
            if len(tj) != 1:
                self.fail("the NULL type has no data")
            return NULL_TYPE
        if tag in SCALAR_TAGS:
            if len(tj) != 1:
                self.fail(f"scalar type {tag} has no 'D'")
            return scalar(tag)
        d = tj.get("D")
        if tag == "0.t_vec":
            if type(d) is not list or len(tj) != 2:
                self.fail("0.t_vec: 'D' must be an array of types")
            return VectorType(tuple(self.type(x, depth + 1) for x in d))
        if tag == "1.t_selected_rows":
            t = self.dense(tag, d, depth)
            return SelectedRowsType(t.dtype_type, t.dims, t.layout, t.lod, t.offset)
        if tag == "1.t_dense_tensor_array":
            if type(d) is not list or len(d) != 3 or len(tj) != 2:
                self.fail(f"{tag}: 'D' must be [dtype, dims, layout], not {json.dumps(d)[:60]}")
            return DenseTensorArrayType(self.dtype_of(d[0], tag), self.dims(d[1], tag), self.layout(d[2], tag))
        if tag == "1.t_sparse_coo_tensor":
            if type(d) is not list or len(d) != 6 or len(tj) != 2:
                self.fail(f"{tag}: 'D' must be [dtype, dims, non-zero dims, layout, indices, values]")
            return SparseCooTensorType(self.dtype_of(d[0], tag), self.dims(d[1], tag), self.dims(d[2], tag),
                                       self.layout(d[3], tag), self.dense_only(d[4], depth),
                                       self.dense_only(d[5], depth))
        if tag == "1.t_sparse_csr_tensor":
            if type(d) is not list or len(d) != 6 or len(tj) != 2:
                self.fail(f"{tag}: 'D' must be [dtype, dims, layout, crows, cols, values]")
            return SparseCsrTensorType(self.dtype_of(d[0], tag), self.dims(d[1], tag), self.layout(d[2], tag),
                                       self.dense_only(d[3], depth), self.dense_only(d[4], depth),
                                       self.dense_only(d[5], depth))
        if tag in ("2.t_stack", "2.t_inlet", "2.t_outlet"):
            if len(tj) != 1:
                self.fail(f"{tag} has no 'D'")
            return OpaqueType(tag)
        if tag == "4.t_dist_dtensor":
            if type(d) is not list or len(d) != 3 or len(tj) != 2:
                self.fail(f"{tag}: 'D' must be [dense tensor type, tensor dist attribute, local dims]")
            self.dense_only(d[0], depth)
            self.dims(d[2], tag)
            return OpaqueType(tag, d)
        if type(tag) is str and tag.partition(".")[0] not in DIALECT_IDS and tag != "NULL":
            self.fail(f"unknown dialect id in type tag {tag!r}")
        self.fail(f"unknown type tag {tag!r}")

    def dense_only(self, tj: Any, depth: int) -> DenseTensorType:
        if type(tj) is not dict or tj.get("#") != "0.t_dtensor":
            self.fail(f"a sparse tensor's parts must be 0.t_dtensor types, not {json.dumps(tj)[:60]}")
        return self.type(tj, depth + 1)  # type: ignore[return-value]

    def dense(self, tag: str, d: Any, depth: int) -> DenseTensorType:
        if type(d) is not list or len(d) != 5:
            self.fail(f"{tag}: 'D' must be [dtype, dims, layout, lod, offset], not {json.dumps(d)[:80]}")
        dt, dims, layout, lod, offset = d
        if type(lod) is not list or any(type(x) is not list or any(type(y) is not int or y < 0 for y in x)
                                        for x in lod):
            self.fail(f"{tag}: the LoD must be an array of arrays of non-negative integers, not "
                      f"{json.dumps(lod)[:60]}")
        if type(offset) is not int or not 0 <= offset <= INT64[1]:
            self.fail(f"{tag}: the offset must be a non-negative integer, not {offset!r}")
        return DenseTensorType(self.dtype_of(dt, tag), self.dims(dims, tag), self.layout(layout, tag),
                               tuple(tuple(x) for x in lod), offset)

    def dtype_of(self, tj: Any, tag: str) -> ScalarType:
        t = tj.get("#") if type(tj) is dict else None
        if t not in SCALAR_TAGS or len(tj) != 1:
            self.fail(f"{tag}: the element type must be a scalar type such as {{\"#\": \"0.t_f32\"}}, not "
                      f"{json.dumps(tj)[:60]}")
        return scalar(t)

    def dims(self, dims: Any, tag: str) -> tuple[int, ...]:
        if type(dims) is not list or any(type(x) is not int or not INT64[0] <= x <= INT64[1] or x < -1
                                         for x in dims):
            self.fail(f"{tag}: dims must be an array of integers >= -1 (-1: unknown), not {json.dumps(dims)[:60]}")
        return tuple(dims)

    def layout(self, layout: Any, tag: str) -> str:
        if type(layout) is not str or layout.upper() not in LAYOUTS:
            self.fail(f"{tag}: unknown layout {layout!r} (known: NCHW, NHWC, NCDHW, NDHWC, ANYLAYOUT, ...)")
        return layout


# ---------------------------------------------------------------------- attribute data checks
_BAD = object()


def _int_in(lo: int, hi: int):
    def check(d: Any) -> Any:
        return d if type(d) is int and lo <= d <= hi else _BAD
    return check


def _number(d: Any) -> Any:
    if type(d) is int and INT64[0] <= d <= INT64[1]:
        return d
    if isinstance(d, float) and d - d == 0.0:
        return d
    return _BAD


def _string(d: Any) -> Any:
    return d if type(d) is str else _BAD


def _complex(d: Any) -> Any:
    if type(d) is list and len(d) == 2 and all(_number(x) is not _BAD for x in d):
        return tuple(d)
    return _BAD


def _int_array(d: Any) -> Any:
    if type(d) is list and all(type(x) is int and INT64[0] <= x <= INT64[1] for x in d):
        return tuple(d)
    return _BAD


def _scalar_attr(d: Any) -> Any:
    if type(d) is not list or not d or d[0] not in SCALAR_ATTR_DTYPES or len(d) != 1 + SCALAR_ATTR_DTYPES[d[0]]:
        return _BAD
    if d[0] == "bool":
        return tuple(d) if type(d[1]) is bool else _BAD
    if d[0] in ("int32", "int64"):
        lo, hi = INT32 if d[0] == "int32" else INT64
        return tuple(d) if type(d[1]) is int and lo <= d[1] <= hi else _BAD
    return tuple(d) if all(_number(x) is not _BAD for x in d[1:]) else _BAD


def _dtype(d: Any) -> Any:
    return d if d in DTYPE_NAMES and type(d) is str else _BAD


def _place(d: Any) -> Any:
    if type(d) is list and len(d) == 3 and type(d[0]) is int and d[0] in PLACE_KINDS and type(d[1]) is int \
            and -128 <= d[1] <= 127 and type(d[2]) is str:
        return tuple(d)
    return _BAD


def _layout(d: Any) -> Any:
    return d if type(d) is str and d.upper() in LAYOUTS else _BAD


def _bool(d: Any) -> Any:
    return d if type(d) is bool else _BAD


def _mesh(d: Any) -> Any:
    if type(d) is list and len(d) == 3 and _int_array(d[0]) is not _BAD and _int_array(d[1]) is not _BAD \
            and type(d[2]) is list and all(type(x) is str for x in d[2]):
        return d
    return _BAD


def _raw(d: Any) -> Any:
    return d if type(d) is list else _BAD


_ATTR_CHECKS = {
    "0.a_bool": _bool, "0.a_i32": _int_in(*INT32), "0.a_i64": _int_in(*INT64), "0.a_index": _int_in(*INT64),
    "0.a_f32": _number, "0.a_f64": _number, "0.a_str": _string, "0.a_tensorname": _string,
    "0.a_array": _raw, "0.a_type": _raw, "0.a_c64": _complex, "0.a_c128": _complex,
    "1.a_intarray": _int_array, "1.a_scalar": _scalar_attr, "1.a_dtype": _dtype, "1.a_place": _place,
    "1.a_layout": _layout, "4.a_process_mesh": _mesh, "4.a_tensor_dist": _raw, "4.a_op_dist": _raw,
}
_ATTR_WANT = {
    "0.a_bool": "true or false", "0.a_i32": "an int32", "0.a_i64": "an int64", "0.a_index": "an int64",
    "0.a_f32": "a finite number", "0.a_f64": "a finite number", "0.a_str": "a string",
    "0.a_tensorname": "a string", "0.a_c64": "[re, im]", "0.a_c128": "[re, im]",
    "1.a_intarray": "an array of int64", "1.a_scalar": "[dtype, value] (dtype float32/float64/int32/int64/bool, "
    "or complex64/complex128 with re, im)", "1.a_dtype": "a dtype name such as \"float32\"",
    "1.a_place": "[allocation type, device id, device type]", "1.a_layout": "a layout name such as \"NCHW\"",
    "4.a_process_mesh": "[shape, process ids, dim names]", "4.a_tensor_dist": "an array",
    "4.a_op_dist": "an array",
}
