"""Analyses of a program that the passes and the memory report build on; none changes a program.

`path` (the ops between the inputs and the targets, the no-grad set),
`liveness` (live ranges and the activation-memory peak), `checkpoint_choice`
(which checkpoints recompute should take), `residuals` (the forward values
the backward section reads).
May import: `pybackward.base`, `pybackward.legacy`, `pybackward.ops`.
"""
