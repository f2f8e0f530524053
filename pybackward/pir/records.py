"""Record classes with what `@dataclass` gives them, without its cost at import.

`@dataclass` writes each method it adds (`__init__`, `__repr__`, `__eq__`,
`__hash__`, `__setattr__`, `__delattr__`) as source text and compiles it when
the class statement runs: ~0.9 ms per class on the 2-core machine of
benchmarks/README.md, every time a process imports the module. The seven
record classes `pybackward append` meets on a PIR program (the VJP rule table's
and the summary's) cost ~6% of its start-up that way (issue #37 item 5). Here
the same methods are written once, as ordinary functions reading `_fields`;
each record class writes its own `__init__` (its signature and defaults).

    class Copied(FrozenRecord):
        _fields = ("name",)
        def __init__(self, name: str) -> None:
            set_fields(self, name=name)

What a dataclass of the same fields gives, and these give: `repr` as
`Copied(name='x')`, `==` between instances of the same class comparing the
fields in order, a hash of the fields (frozen), unhashable (mutable),
assignment refused on a frozen record (`FrozenInstanceError`, an
AttributeError, as `dataclasses.FrozenInstanceError` is), `replace(r, **changes)`
and `as_plain(r)` (`dataclasses.asdict`: nested records, lists, tuples and dicts
copied).
"""
from __future__ import annotations

from typing import Any, ClassVar

__all__ = ["Record", "FrozenRecord", "FrozenInstanceError", "set_fields", "replace", "as_plain"]


class FrozenInstanceError(AttributeError):
    """An assignment to (or deletion of) a field of a frozen record."""


def set_fields(self: Record, **values: Any) -> None:
    """Set the fields of a new record (also on a frozen one)."""
    self.__dict__.update(values)


class Record:
    """A mutable record: `__init__` sets `_fields`; repr and == by field, unhashable (as `@dataclass`)."""

    _fields: ClassVar[tuple[str, ...]] = ()

    def __repr__(self) -> str:
        return (f"{type(self).__qualname__}("
                + ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields) + ")")

    def _values(self) -> tuple:
        return tuple([getattr(self, f) for f in self._fields])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()        # type: ignore[attr-defined]
        return NotImplemented

    __hash__ = None         # type: ignore[assignment]  # == by value on a mutable record: unhashable


class FrozenRecord(Record):
    """A frozen record: no assignment after `__init__`, hashable by its fields."""

    def __hash__(self) -> int:
        return hash(self._values())

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


def replace(record: Record, **changes: Any) -> Any:
    """A new record of the same class with `changes` to its fields (`dataclasses.replace`)."""
    unknown = set(changes) - set(record._fields)
    if unknown:
        raise TypeError(f"{type(record).__qualname__} has no field {sorted(unknown)[0]!r}")
    values = {f: getattr(record, f) for f in record._fields}
    values.update(changes)
    return type(record)(**values)


def as_plain(value: Any) -> Any:
    """`value` with every record a dict of its fields, recursively, lists, tuples and dicts
    copied (`dataclasses.asdict`, for the records and containers of str / int / float / None
    that these records hold)."""
    if isinstance(value, Record):
        return {f: as_plain(getattr(value, f)) for f in value._fields}
    if isinstance(value, list):
        return [as_plain(v) for v in value]
    if isinstance(value, tuple):
        return type(value)(as_plain(v) for v in value)
    if isinstance(value, dict):
        return type(value)((as_plain(k), as_plain(v)) for k, v in value.items())
    return value
