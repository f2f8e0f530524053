"""class_center_sample (PartialFC's sampling of class centres), as Paddle 3.3.1's CPU kernel computes it:

* class_center_sample (a world of one process, as Paddle's CPU kernel always
  is): the sorted distinct labels, then distinct negative classes drawn from
  [0, num_classes) until num_samples centres; RemappedLabel each label's
  index among the sorted distinct ones. With fix_seed and a nonzero seed the
  draws are Paddle's (libstdc++'s uniform_int_distribution over a
  std::mt19937_64(seed)); otherwise Paddle seeds from std::random_device or
  its global generator and the interpreter's generator stands in.
* get_tensor_from_selected_rows, merge_selected_rows: pybackward holds a
  SelectedRows as its dense equivalent (docs/ops.md), on which both are the
  identity.

"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..random.engine import MT19937_64, engine
from ..registry import Call, Sample, register
from ..recsys.tdm import IntDraws




# --------------------------------------------------------------------------
# class_center_sample
# --------------------------------------------------------------------------
def _class_center_sample(c: Call):
    label = np.asarray(c.x("Label"))
    if label.dtype not in (np.int32, np.int64):
        raise ExecutionError(f"op class_center_sample: Label must be int32 or int64, got {label.dtype}")
    num_classes, num_samples = int(c.attr("num_classes")), int(c.attr("num_samples"))
    if num_classes <= 0 or num_samples <= 0 or num_samples > num_classes:
        raise ExecutionError(f"op class_center_sample: need 0 < num_samples <= num_classes, got num_samples "
                             f"{num_samples}, num_classes {num_classes}")
    if label.ndim != 1:
        raise ExecutionError(f"op class_center_sample: Label must be 1-D, got shape {label.shape}")
    uniq, remapped = np.unique(label, return_inverse=True)
    sampled = [int(v) for v in uniq]
    if len(sampled) < num_samples:
        seed = int(c.attr("seed", 0)) if c.attr("fix_seed", False) else 0
        draws = IntDraws(MT19937_64(seed) if seed else engine(c, 0))
        have = set(sampled)
        while len(sampled) < num_samples:
            neg = draws.draw(num_classes)
            if neg not in have:
                have.add(neg)
                sampled.append(neg)
    return {"RemappedLabel": remapped.reshape(-1).astype(label.dtype),
            "SampledLocalClassCenter": np.array(sampled, label.dtype)}


def _ccs_samples(rng):
    base = {"num_classes": 20, "num_samples": 8, "ring_id": 0, "rank": 0, "nranks": 1, "fix_seed": True}
    return [
        Sample({"Label": [np.array([3, 8, 3, 1, 15])]}, {**base, "seed": 5}, note="seed 5: Paddle's draws"),
        Sample({"Label": [np.array([4, 0, 7, 4], np.int32)]}, {**base, "num_classes": 1000, "num_samples": 30,
                                                               "seed": 11}, note="int32"),
        Sample({"Label": [np.array([2, 0, 1, 2])]}, {**base, "num_classes": 3, "num_samples": 2, "seed": 1},
               note="more positives than num_samples: all kept, no draws"),
    ]


register(paddle_opdef("class_center_sample", _class_center_sample, samples=_ccs_samples,
                      attrs_handled=("num_classes", "num_samples", "fix_seed", "seed", "ring_id", "rank", "nranks"),
                      doc="positive class centres plus sampled negatives; labels remapped to them"))
