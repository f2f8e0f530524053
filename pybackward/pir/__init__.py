"""The PIR IR: Paddle 3.x's default program format (`.json`), beside the legacy `ProgramDesc`.

PIR programs are SSA values, `pd_op.*` / `builtin.*` / `cf.*` ops and regions
for `if` / `while`. This package holds PIR's own program model and its JSON
codec (format versions 1-4); the PIR gradient pass goes in
`pybackward/backward/pir/`, and both IRs share the op facts and kernels of
`pybackward.ops`. See `docs/pir.md`.

    from pybackward import pir
    prog = pir.load("model.json")           # checked; versions 1-3 upgraded to 4
    print(pir.to_text(prog))                # what Paddle's print(program) shows
    pir.save(prog, "out.json")              # Paddle's bytes (readable=True: indented)
    pir.summary(prog).losses                # feeds, parameters, loss candidates, ...
    pir.equal(a, b); pir.diff(a, b)         # compare canonically

Modules: `model` (Program, Region, Block, Operation, Value), `types` (types
and attributes), `reader` / `writer` / `codec` (the JSON format), `versions`
(format versions and Paddle's patch sets), `text` (the printer), `sniff`
(PIR or legacy, by content), `canonical` (comparison), `summary`, `records` (the record classes
of `summary` and `vjp_rules`: a dataclass's methods without compiling them at import); `opmap` (PIR <-> legacy
op names and arguments) and `vjp_rules` (what Paddle's VJP rule of each op appends), both read from
`pybackward/data/`.
May import: `pybackward.base`, `pybackward.ops` (op facts), `pybackward.data` files.
"""
from __future__ import annotations

from .canonical import canonical, diff, equal
from .codec import dumps, load, loads, save
from .reader import MAX_PIR_BYTES  # noqa: F401  (the size past which a file is refused unread)
from .model import Block, Operation, Program, Region, Value
from .sniff import is_pir_bytes
from .summary import PirSummary, summary
from .text import to_text
from .types import NULL_TYPE, Attr, DenseTensorType, Type, VectorType

__all__ = [
    "load", "loads", "dumps", "save", "is_pir_bytes", "to_text", "summary", "PirSummary",
    "canonical", "equal", "diff", "MAX_PIR_BYTES",
    "Program", "Region", "Block", "Operation", "Value",
    "Type", "DenseTensorType", "VectorType", "NULL_TYPE", "Attr",
]
