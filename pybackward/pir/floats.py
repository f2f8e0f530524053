"""Floats as Paddle's JSON library (nlohmann::json) writes them, and as it prints them.

nlohmann writes the shortest digits that read back to the same double (as
Python's `repr` does) but switches to exponent form one decade earlier: it
writes 1e15 as `1e+15` where `repr` gives `1000000000000000.0`. Its digit
search (Grisu2) also picks different 17-digit strings than `repr` for a few
doubles; a float read from a file therefore keeps its text when that text is
not what `nl_format` would give back, so a file writes back byte for byte.

Paddle's `print(program)` writes attribute floats with C++'s default stream
format (`%g`, 6 significant digits): `c_format`.
"""
from __future__ import annotations

import struct


class FloatText(float):
    """A float read from a file whose text `nl_format` would not reproduce."""

    text: str

    def __new__(cls, text: str) -> "FloatText":
        self = super().__new__(cls, text)
        self.text = text
        return self


def nl_format(x: float) -> str:
    """`x` as nlohmann::json dumps a finite double."""
    r = repr(x)
    if not 1e15 <= abs(x) < 1e16 or "e" in r:
        return r
    whole, frac = r.lstrip("-").split(".")        # 16 digits before the point
    digits = (whole + frac).rstrip("0")
    mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return ("-" if x < 0 else "") + mant + "e+15"


def parse_float(text: str) -> float:
    """The `parse_float` hook of the reader: a plain float, or a FloatText that remembers
    its spelling when writing the float back would spell it differently."""
    x = float(text)
    if x != x or x in (float("inf"), float("-inf")) or nl_format(x) == text:
        return x
    return FloatText(text)


def float_text(x: float) -> str | None:
    """The text to write for `x` when the JSON encoder's own (`repr`) would be wrong, else None."""
    if type(x) is FloatText:
        return x.text
    if 1e15 <= abs(x) < 1e16:
        return nl_format(x)
    return None


def to_f32(x: float) -> float:
    """`x` rounded to float32, as a double: what Paddle stores for an `a_f32` attribute."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def c_format(x: float, f32: bool = False) -> str:
    """`x` as C++ `std::ostream << x` prints it (precision 6, `%g`); `f32` rounds to float first."""
    if f32:
        try:
            x = to_f32(x)
        except OverflowError:
            x = float("inf") if x > 0 else float("-inf")
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return format(x, ".6g")
