"""The PIR IR: Paddle 3.x's default program format (`.json`), beside the legacy `ProgramDesc`.

PIR programs are SSA values, `pd_op.*` / `builtin.*` / `cf.*` ops and regions
for `if` / `while`. This package holds PIR's own program model and its JSON
codec (format versions 1-4); the PIR gradient pass goes in
`pybackward/backward/pir/`, and both IRs share the op facts and kernels of
`pybackward.ops`. See `docs/pir.md`.
May import: `pybackward.base`, `pybackward.ops` (op facts), `pybackward.data` files.
"""
