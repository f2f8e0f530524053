"""`append_backward` and `gradients` for builder programs, with Paddle's
in-memory semantics: the default `parameter_list` is the trainable parameters
in creation order, and `stop_gradient` flags are honoured as the program holds
them (a `trainable=False` parameter gets no gradient). pybackward's
`append_backward` on a *file* clears parameters' `stop_gradient` first, as
Paddle's parse does; a program built here has not been through a file."""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from ..backward import api as _api
from ..legacy.program import Variable as _Variable
from .framework import Program

__all__ = ["append_backward", "gradients"]


def append_backward(loss: _Variable, parameter_list: Sequence[Any] | None = None,
                    no_grad_set: Iterable[Any] | None = None, callbacks: Sequence[Any] | None = None,
                    checkpoints: Any = None, distop_context: Any = None):
    """Append the backward ops of `loss`; return `[(param, param@GRAD), ...]`
    (Paddle's `paddle.static.append_backward`)."""
    if not isinstance(loss, _Variable):
        raise TypeError("The type of 'loss' in paddle.static.append_backward must be "
                        f"<class 'Variable'>, but received {type(loss)}. ")
    if callbacks is not None and not isinstance(callbacks, (list, tuple)):
        raise TypeError("The type of 'callbacks' in paddle.static.append_backward must be "
                        f"(<class 'list'>, <class 'tuple'>), but received {type(callbacks)}. ")
    program = loss.block.program
    in_memory = isinstance(program, Program)
    if parameter_list is None and in_memory:
        parameter_list = [p for p in program.global_block().all_parameters() if p.trainable]
    return _api.append_backward(loss, parameter_list, no_grad_set, callbacks, checkpoints,
                                keep_param_stop_gradient=in_memory)


def gradients(targets: Any, inputs: Any, target_gradients: Any = None,
              no_grad_set: Iterable[Any] | None = None) -> list:
    """Append the grad ops of `targets` w.r.t. `inputs`; one grad var (or
    None) per input (Paddle's `paddle.static.gradients`)."""
    for what, v in (("targets", targets), ("inputs", inputs)):
        if not isinstance(v, (_Variable, list, tuple)):
            raise TypeError(f"The type of '{what}' in paddle.static.gradients must be "
                            f"(<class 'Variable'>, <class 'list'>, <class 'tuple'>), but "
                            f"received {type(v)}. ")
    first = targets if isinstance(targets, _Variable) else targets[0]
    in_memory = isinstance(first.block.program, Program)
    return _api.gradients(targets, inputs, target_gradients, no_grad_set,
                          keep_param_stop_gradient=in_memory)
