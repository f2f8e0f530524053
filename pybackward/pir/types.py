"""PIR types and attributes: what a value is, and what an op is configured with.

A PIR file names every type and attribute by a tag, `<dialect id>.<name>`
("0.t_dtensor", "0.a_f32", "1.a_intarray"), and gives its data under "D".
The tag is kept on every object here, so a program writes back with the exact
tag it was read with (an `a_f32` stays an `a_f32` even where an `a_f64`
would hold the same number), which is what byte-exact round trips need.

Types are immutable and compared by value; the reader shares one object per
distinct type. Attributes are immutable too; `Attr.py()` gives the plain
Python value (bool, int, float, str, list) for code that only reads them.
The facts (tags, data layouts, printed names) are Paddle 3.3.1's, see
docs/pir.md.
"""
from __future__ import annotations

import json
import math
import struct
from typing import Any

#: Scalar (element) type tags -> the dtype name Paddle uses for them.
SCALAR_TAGS: dict[str, str] = {
    "0.t_bool": "bool", "0.t_bf16": "bfloat16", "0.t_f16": "float16", "0.t_f32": "float32",
    "0.t_f64": "float64", "0.t_i8": "int8", "0.t_ui8": "uint8", "0.t_i16": "int16", "0.t_i32": "int32",
    "0.t_i64": "int64", "0.t_index": "index", "0.t_c64": "complex64", "0.t_c128": "complex128",
    "0.t_f8e4m3fn": "float8_e4m3fn", "0.t_f8e5m2": "float8_e5m2",
}
#: dtype name -> scalar type tag.
DTYPE_TAG: dict[str, str] = {v: k for k, v in SCALAR_TAGS.items()}
FLOAT_DTYPES = frozenset({"bfloat16", "float16", "float32", "float64", "float8_e4m3fn", "float8_e5m2"})

#: Layout strings Paddle 3.3.1 reads (`StringToDataLayout`, upper-cased first) and
#: the name it prints for each.
LAYOUTS: dict[str, str] = {
    "NHWC": "NHWC", "NCHW": "NCHW", "NCDHW": "NCDHW", "NDHWC": "NDHWC", "ANYLAYOUT": "Undefined(AnyLayout)",
    "UNDEFINED(ANYLAYOUT)": "Undefined(AnyLayout)", "SPARSE_COO": "SPARSE_COO", "SPARSE_CSR": "SPARSE_CSR",
    "STRIDED": "STRIDED", "PSTRING_UNION": "PSTRING_UNION",
}

#: dtype strings an `a_dtype` attribute may hold (`phi::StringToDataType`), and how
#: Paddle prints each.
DTYPE_NAMES: dict[str, str] = {n: n for n in (
    "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "bfloat16", "float16",
    "float32", "float64", "complex64", "complex128", "pstring", "float8_e4m3fn")}
DTYPE_NAMES["Undefined(ALL_DTYPE)"] = "Undefined"

#: `a_scalar` dtypes Paddle 3.3.1 can read back, and how many numbers follow the dtype.
SCALAR_ATTR_DTYPES: dict[str, int] = {"float32": 1, "float64": 1, "int32": 1, "int64": 1, "bool": 1,
                                      "complex64": 2, "complex128": 2}

#: `a_place` allocation types Paddle 3.3.1 knows, with their printed names.
PLACE_KINDS: dict[int, str] = {0: "undefined", 1: "cpu", 2: "gpu", 3: "gpu_pinned", 4: "xpu", 5: "xpu_pinned",
                               7: "ipu", 9: "npu"}

INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)


class Type:
    """Base of every PIR type. Subclasses define `_key()` (equality) and `to_json()`."""

    __slots__ = ("tag", "_json")

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self._json: dict | None = None

    def _key(self) -> tuple:
        return (self.tag,)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Type) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def to_json(self) -> dict:
        """The type as Paddle writes it (shared: do not modify the result)."""
        if self._json is None:
            self._json = self._make_json()
        return self._json

    def _make_json(self) -> dict:
        return {"#": self.tag}

    def __repr__(self) -> str:
        return f"<pir type {json.dumps(self.to_json(), separators=(',', ':'))}>"


class NullType(Type):
    """The type of a result nobody computes (a gradient that is not wanted)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("NULL")


NULL_TYPE = NullType()


class ScalarType(Type):
    """An element type: f32, i64, bool, ... (`dtype` gives Paddle's name: float32, int64, bool)."""

    __slots__ = ()

    @property
    def dtype(self) -> str:
        return SCALAR_TAGS[self.tag]


class OpaqueType(Type):
    """A type pybackward carries but does not look into: the control-flow stack types
    (`2.t_stack`, `2.t_inlet`, `2.t_outlet`) and the dist dialect's tensor type."""

    __slots__ = ("data",)

    def __init__(self, tag: str, data: Any = None) -> None:
        super().__init__(tag)
        self.data = data

    def _key(self) -> tuple:
        return (self.tag, _freeze(self.data))

    def _make_json(self) -> dict:
        return {"#": self.tag} if self.data is None else {"#": self.tag, "D": self.data}


class DenseTensorType(Type):
    """A dense tensor: element type, dims (-1 = unknown), layout, LoD and offset."""

    __slots__ = ("dtype_type", "dims", "layout", "lod", "offset")

    def __init__(self, dtype: ScalarType, dims: tuple[int, ...], layout: str = "NCHW",
                 lod: tuple[tuple[int, ...], ...] = (), offset: int = 0, tag: str = "0.t_dtensor") -> None:
        super().__init__(tag)
        self.dtype_type, self.dims, self.layout, self.lod, self.offset = dtype, tuple(dims), layout, tuple(lod), offset

    @property
    def dtype(self) -> str:
        return self.dtype_type.dtype

    @property
    def shape(self) -> list[int]:
        return list(self.dims)

    def numel(self) -> int | None:
        """The element count, None when a dim is unknown."""
        n = 1
        for d in self.dims:
            if d < 0:
                return None
            n *= d
        return n

    def _key(self) -> tuple:
        return (self.tag, self.dtype_type.tag, self.dims, self.layout, self.lod, self.offset)

    def _make_json(self) -> dict:
        return {"#": self.tag, "D": [self.dtype_type.to_json(), list(self.dims), self.layout,
                                     [list(x) for x in self.lod], self.offset]}


class SelectedRowsType(DenseTensorType):
    """Paddle's SelectedRows (a sparse set of rows); same data as a dense tensor."""

    __slots__ = ()

    def __init__(self, dtype: ScalarType, dims: tuple[int, ...], layout: str = "NCHW",
                 lod: tuple[tuple[int, ...], ...] = (), offset: int = 0) -> None:
        super().__init__(dtype, dims, layout, lod, offset, tag="1.t_selected_rows")


class DenseTensorArrayType(Type):
    """A tensor array (`create_array`, `array_write_`): element type, dims, layout."""

    __slots__ = ("dtype_type", "dims", "layout")

    def __init__(self, dtype: ScalarType, dims: tuple[int, ...], layout: str = "NCHW") -> None:
        super().__init__("1.t_dense_tensor_array")
        self.dtype_type, self.dims, self.layout = dtype, tuple(dims), layout

    @property
    def dtype(self) -> str:
        return self.dtype_type.dtype

    def _key(self) -> tuple:
        return (self.tag, self.dtype_type.tag, self.dims, self.layout)

    def _make_json(self) -> dict:
        return {"#": self.tag, "D": [self.dtype_type.to_json(), list(self.dims), self.layout]}


class SparseCooTensorType(Type):
    """A COO sparse tensor: dtype, dims, non-zero dims, layout, indices and values types."""

    __slots__ = ("dtype_type", "dims", "non_zero_dims", "layout", "indices", "elements")

    def __init__(self, dtype: ScalarType, dims: tuple[int, ...], non_zero_dims: tuple[int, ...], layout: str,
                 indices: DenseTensorType, elements: DenseTensorType) -> None:
        super().__init__("1.t_sparse_coo_tensor")
        self.dtype_type, self.dims, self.non_zero_dims = dtype, tuple(dims), tuple(non_zero_dims)
        self.layout, self.indices, self.elements = layout, indices, elements

    @property
    def dtype(self) -> str:
        return self.dtype_type.dtype

    def _key(self) -> tuple:
        return (self.tag, self.dtype_type.tag, self.dims, self.non_zero_dims, self.layout, self.indices._key(),
                self.elements._key())

    def _make_json(self) -> dict:
        return {"#": self.tag, "D": [self.dtype_type.to_json(), list(self.dims), list(self.non_zero_dims),
                                     self.layout, self.indices.to_json(), self.elements.to_json()]}


class SparseCsrTensorType(Type):
    """A CSR sparse tensor: dtype, dims, layout, and the crows / cols / values types."""

    __slots__ = ("dtype_type", "dims", "layout", "crows", "cols", "elements")

    def __init__(self, dtype: ScalarType, dims: tuple[int, ...], layout: str, crows: DenseTensorType,
                 cols: DenseTensorType, elements: DenseTensorType) -> None:
        super().__init__("1.t_sparse_csr_tensor")
        self.dtype_type, self.dims, self.layout = dtype, tuple(dims), layout
        self.crows, self.cols, self.elements = crows, cols, elements

    @property
    def dtype(self) -> str:
        return self.dtype_type.dtype

    def _key(self) -> tuple:
        return (self.tag, self.dtype_type.tag, self.dims, self.layout, self.crows._key(), self.cols._key(),
                self.elements._key())

    def _make_json(self) -> dict:
        return {"#": self.tag, "D": [self.dtype_type.to_json(), list(self.dims), self.layout,
                                     self.crows.to_json(), self.cols.to_json(), self.elements.to_json()]}


class VectorType(Type):
    """A vector of types: the result of `builtin.combine`, the operand of `builtin.split`."""

    __slots__ = ("items",)

    def __init__(self, items: tuple[Type, ...]) -> None:
        super().__init__("0.t_vec")
        self.items = tuple(items)

    def _key(self) -> tuple:
        return (self.tag, tuple(t._key() for t in self.items))

    def _make_json(self) -> dict:
        return {"#": self.tag, "D": [t.to_json() for t in self.items]}


_SCALARS: dict[str, ScalarType] = {tag: ScalarType(tag) for tag in SCALAR_TAGS}


def scalar(dtype: str) -> ScalarType:
    """The scalar type for a dtype name ("float32") or tag ("0.t_f32")."""
    t = _SCALARS.get(dtype) or _SCALARS.get(DTYPE_TAG.get(dtype, ""))
    if t is None:
        raise ValueError(f"unknown PIR dtype {dtype!r}; known: {', '.join(DTYPE_TAG)}")
    return t


def dense(dtype: str, dims: tuple[int, ...] | list[int]) -> DenseTensorType:
    """A dense tensor type with Paddle's defaults (NCHW, no LoD, offset 0)."""
    return DenseTensorType(scalar(dtype), tuple(dims))


def _freeze(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_freeze(e) for e in x)
    if isinstance(x, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in x.items()))
    return x


# --------------------------------------------------------------------------
# Attributes
# --------------------------------------------------------------------------
#: Every attribute tag Paddle 3.3.1 reads, with what its "D" holds.
ATTR_TAGS: dict[str, str] = {
    "0.a_bool": "bool", "0.a_i32": "int32", "0.a_i64": "int64", "0.a_index": "index", "0.a_f32": "float32",
    "0.a_f64": "float64", "0.a_str": "string", "0.a_tensorname": "tensor name", "0.a_array": "list of attributes",
    "0.a_type": "a type", "0.a_c64": "[re, im]", "0.a_c128": "[re, im]",
    "1.a_intarray": "list of int64", "1.a_scalar": "[dtype, value...]", "1.a_dtype": "dtype name",
    "1.a_place": "[allocation type, device id, device type]", "1.a_layout": "layout name",
    "4.a_process_mesh": "[shape, process ids, dim names]", "4.a_tensor_dist": "dist dialect data",
    "4.a_op_dist": "dist dialect data",
}

#: The spellings of non-finite floats under "VD" (Paddle writes "NaN", reads only "NAN").
VOID_DATA: dict[str, float] = {"NaN": math.nan, "NAN": math.nan, "INF": math.inf, "-INF": -math.inf}


class Attr:
    """One attribute: its tag and its data.

    `value` holds the data as read: bool / int / float / str for scalars, a tuple
    of `Attr` for `0.a_array`, a `Type` for `0.a_type`, a tuple for the
    structured ones (place, scalar, complex, int array), the JSON data for the
    dist dialect's. `vd` is the "VD" spelling of a non-finite float (None for a
    finite one).
    """

    __slots__ = ("tag", "value", "vd")

    def __init__(self, tag: str, value: Any, vd: str | None = None) -> None:
        self.tag, self.value, self.vd = tag, value, vd

    def py(self) -> Any:
        """The plain Python value: arrays become lists, complex numbers complex."""
        tag, v = self.tag, self.value
        if tag == "0.a_array":
            return [a.py() for a in v]
        if tag in ("0.a_c64", "0.a_c128"):
            return complex(v[0], v[1])
        if tag == "1.a_intarray":
            return list(v)
        if tag == "1.a_scalar":
            return complex(v[1], v[2]) if len(v) == 3 else v[1]
        if tag == "1.a_place":
            return list(v)
        return v

    def _key(self) -> tuple:
        v = self.value
        if self.tag == "0.a_array":
            v = tuple(a._key() for a in v)
        elif isinstance(v, Type):
            v = v._key()
        elif isinstance(v, float) and v != v:
            v = "nan"
        else:
            v = _freeze(v)
        return (self.tag, v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Attr) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Attr({self.tag!r}, {self.py()!r})"

    # Constructors for code that builds programs.
    @classmethod
    def bool_(cls, v: bool) -> "Attr":
        return TRUE if v else FALSE

    @classmethod
    def i32(cls, v: int) -> "Attr":
        return cls("0.a_i32", int(v))

    @classmethod
    def i64(cls, v: int) -> "Attr":
        return cls("0.a_i64", int(v))

    @classmethod
    def f32(cls, v: float) -> "Attr":
        """A float32 attribute; the value is rounded to float32, as Paddle holds it."""
        v = float(v)
        if v - v == 0.0:
            try:
                v = struct.unpack("<f", struct.pack("<f", v))[0]
            except OverflowError:
                v = math.inf if v > 0 else -math.inf
        return _float_attr("0.a_f32", v)

    @classmethod
    def f64(cls, v: float) -> "Attr":
        return _float_attr("0.a_f64", float(v))

    @classmethod
    def str_(cls, v: str) -> "Attr":
        return cls("0.a_str", str(v))

    @classmethod
    def array(cls, items: list["Attr"]) -> "Attr":
        return cls("0.a_array", tuple(items))

    @classmethod
    def bools(cls, values: list[bool]) -> "Attr":
        """An array of bools: the form of `stop_gradient` / `persistable` result attributes."""
        return cls("0.a_array", tuple(TRUE if v else FALSE for v in values))

    @classmethod
    def int_array(cls, values: list[int]) -> "Attr":
        return cls("1.a_intarray", tuple(int(v) for v in values))

    @classmethod
    def dtype(cls, name: str) -> "Attr":
        if name not in DTYPE_NAMES:
            raise ValueError(f"unknown dtype name {name!r}")
        return cls("1.a_dtype", name)

    @classmethod
    def place(cls, kind: int = 0, device: int = 0, device_type: str = "") -> "Attr":
        return cls("1.a_place", (kind, device, device_type))


def _float_attr(tag: str, v: float) -> Attr:
    if math.isnan(v):
        return Attr(tag, v, "NAN")        # the spelling Paddle 3.3.1 can read back
    if math.isinf(v):
        return Attr(tag, v, "INF" if v > 0 else "-INF")
    return Attr(tag, v)


TRUE = Attr("0.a_bool", True)
FALSE = Attr("0.a_bool", False)
