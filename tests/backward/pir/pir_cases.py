"""Loader for the PIR gradient-pass goldens in testdata/pir_backward/ (Paddle 3.3.1's PIR pass).

    from pir_cases import cases
    for case in cases():                       # or cases(group="control_flow"), cases(names=["mlp"])
        fwd = case.forward()                   # pybackward.pir.Program of <c>.json (before Paddle's call)
        want = case.backward()                 # <c>.bwd.json: the program after Paddle's call (None if refused)
        loss = fwd.value(case.args["loss"]["id"])
        case.feeds(), case.params(), case.values()   # name -> array, name -> array, "%N" (in bwd) -> array

`case.entry` is the manifest entry (testdata/pir_backward/README.md describes every key). Pure
pybackward: Paddle is not needed to read the goldens. `gen_pir_backward.py` beside the data writes them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from pybackward import pir
from pybackward.tensors.paddle_files import read_npz, read_pickle

DATA = Path(__file__).resolve().parents[3] / "testdata" / "pir_backward"
MANIFEST = DATA / "manifest.json"

#: The entry's arguments: one value reference ({"id": "%N" or None, "name": str or None}) or a list of them.
ARG_KEYS = ("loss", "parameter_list", "no_grad_set", "targets", "inputs", "target_gradients")


@lru_cache(maxsize=1)
def manifest() -> dict[str, Any]:
    """The whole manifest.json (read once)."""
    return json.loads(MANIFEST.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Case:
    """One golden: Paddle's forward program, its call, what Paddle's pass gave."""

    name: str
    entry: dict[str, Any] = field(repr=False)

    # ---- the manifest's facts -------------------------------------------------------------
    @property
    def group(self) -> str:
        """"option", "control_flow" or "model"."""
        return self.entry["group"]

    @property
    def call(self) -> str:
        """"append_backward", "gradients" or "calc_gradient"."""
        return self.entry["call"]

    @property
    def args(self) -> dict[str, Any]:
        """The call's arguments as references into the forward file (`<c>.json`)."""
        return self.entry["args"]

    @property
    def args_bwd(self) -> dict[str, Any] | None:
        """The same arguments as references into `<c>.bwd.json` (ids shift under control flow)."""
        return self.entry.get("args_bwd")

    @property
    def error(self) -> str | None:
        """Paddle's error text when Paddle refused the call (then there is no backward file)."""
        return self.entry["error"]

    @property
    def returned(self) -> list | None:
        """append_backward: [["%param", "%grad" or None], ...]; gradients/calc_gradient:
        ["%grad" or None, ...] (ids in `<c>.bwd.json`)."""
        return self.entry.get("returned")

    # ---- paths -----------------------------------------------------------------------------
    def path(self, kind: str) -> Path | None:
        """The file of `kind` ("forward", "params", "backward", "feeds", "values"), None if absent.
        Identical files are shared between cases, so the name may be another case's."""
        name = self.entry["files"].get(kind)
        return None if name is None else DATA / name

    @property
    def forward_path(self) -> Path:
        return self.path("forward")  # type: ignore[return-value]

    @property
    def backward_path(self) -> Path | None:
        return self.path("backward")

    # ---- loaders ---------------------------------------------------------------------------
    def forward(self) -> pir.Program:
        """The forward program (a fresh load each call: the pass under test may change it)."""
        return pir.load(self.forward_path)

    def backward(self) -> pir.Program | None:
        """Paddle's program after its call; None when Paddle refused it."""
        p = self.backward_path
        return None if p is None else pir.load(p)

    def feeds(self) -> dict[str, np.ndarray]:
        """Data name -> array (np.random.RandomState(0))."""
        return read_npz(self.path("feeds"))

    def params(self) -> dict[str, np.ndarray]:
        """Parameter name -> array after the startup program (paddle.seed(2024))."""
        return read_pickle(self.path("params"))

    def values(self) -> dict[str, np.ndarray]:
        """"%N" (in `<c>.bwd.json`) -> Paddle's Executor value (float32) of the loss / targets and
        every returned gradient; {} when Paddle refused the call or its Executor failed."""
        p = self.path("values")
        return {} if p is None else read_npz(p)

    def refs(self, key: str, bwd: bool = False) -> list[dict[str, Any]]:
        """The argument `key` as a list of references (empty when not given)."""
        a = (self.args_bwd if bwd else self.args) or {}
        v = a.get(key)
        if v is None:
            return []
        return v if isinstance(v, list) else [v]


def cases(group: str | None = None, names: list[str] | None = None) -> list[Case]:
    """The goldens in manifest order, optionally one group's or some names'."""
    out = [Case(n, e) for n, e in manifest()["cases"].items()]
    if group is not None:
        out = [c for c in out if c.group == group]
    if names is not None:
        unknown = set(names) - {c.name for c in out}
        if unknown:
            raise KeyError(f"no PIR backward golden {sorted(unknown)}")
        out = [c for c in out if c.name in names]
    return out
