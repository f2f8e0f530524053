"""The NumPy interpreter: run a program, forward and backward, and check its gradients.

`executor` (`Executor`, `Scope`: runs blocks op by op through the registry's
kernels, control flow included), `gradcheck` (`check_gradients`: the
backward section against finite differences on a float64 copy). For PIR
programs (`.json`): `pir_executor` (`run`, `PirExecutor`: the same kernels
through `pybackward.pir.opmap`), `pir_glue` (the PIR-only glue ops and the op
map lookup), `pir_grads` (which value is `NAME@GRAD`), `pir_gradcheck`.
May import: every layer below it (base, legacy, pir, tensors, ops, analysis, backward).
"""

from .executor import Executor, Scope  # noqa: F401  (the public names, as before the move)
