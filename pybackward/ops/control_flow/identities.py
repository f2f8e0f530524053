"""Copies the CPU runs as identities: memcpy*, depend, nop, share_data."""
from __future__ import annotations

import numpy as np
from ..registry import Call, Sample
from .._inputs import register_plain
from .._inputs import input_value


# --------------------------------------------------------------------------
# identities on CPU
# --------------------------------------------------------------------------
def _copy_x(c: Call):
    return {"Out": np.array(input_value(c, "X"), copy=True)}


def _copy_samples(rng):
    return [Sample({"X": [rng.standard_normal((2, 3))]}, {"dst_place_type": 0}),
            Sample({"X": [np.arange(4, dtype=np.int64)]}, {"dst_place_type": 0}, note="int64")]


for _name in ("memcpy", "memcpy_d2h", "memcpy_h2d"):
    register_plain(_name, _copy_x, _copy_samples, ("dst_place_type",),
         "Out = X (a device copy; on CPU the same values)")
register_plain("share_data", _copy_x, _copy_samples, (), "Out = X (shares X's data)")


def _depend(c: Call):
    return {"Out": np.array(input_value(c, "X"), copy=True)}


def _depend_samples(rng):
    return [Sample({"X": [rng.standard_normal((2, 3))], "Dep": [rng.standard_normal(2)]})]


register_plain("depend", _depend, _depend_samples, (), "Out = X; Dep only orders the ops")


def _nop(c: Call):
    return {"Out": [np.array(x, copy=True) for x in c.xs("X")]}


register_plain("nop", _nop, None, (), "Out = X (an op that does nothing: it only orders ops)")
