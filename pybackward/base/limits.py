"""Limits that guard runs, read where no kernel is loaded (the CLI's help text)."""
from __future__ import annotations

#: Guard against a `while` whose condition never turns false: the default
#: limit on the steps of one run of a `while` op (`Executor(max_while_steps=)`,
#: `pybackward run --max-steps`). Each step keeps a step scope for while_grad,
#: so the limit also bounds the memory a runaway loop takes.
MAX_WHILE_STEPS = 10_000
