"""The op registry and the op families, one subpackage per domain.

Importing this package registers every op family: each public module of a
domain subpackage (`math/`, `linalg/`, `nn/`, `loss/`, `shape/`, `tensor/`,
`index/`, `sequence/`, `control_flow/`, `detection/`, `random/`, `optim/`,
`quant/`, `dist/`, `io/`, `graph/`, `recsys/`, `metrics/`, `fusion/`) is a
family, and a module whose name starts with `_` is a helper. Nothing lists
op types or families by hand: a new family module is picked up by being
there. The modules at this level are the machinery every family uses:

* `registry`: the one place that knows op types (`OpDef`, `register`, `get`);
* `paddle_data` / `paddle_table`: Paddle 3.3.1's facts about every op type,
  read from `pybackward/data/paddle_ops.json`, and the ops declared from them;
* `custom`: grad rules for a user's own op types; `opcheck`: run one op and
  check its gradient; `lod`: LoD offsets; `_util`, `_unary`, `_inputs`,
  `_precision`, `_stl`: helpers shared by the families.

The registry knows none of the families (an import-linter contract holds it):
they register themselves into it when this package imports them.
May import: `pybackward.base` and `pybackward._proto` only.
"""
import importlib
import pkgutil

for _pkg in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _pkg.ispkg:
        continue
    _domain = importlib.import_module(f"{__name__}.{_pkg.name}")
    for _info in sorted(pkgutil.iter_modules(_domain.__path__), key=lambda m: m.name):
        if not _info.name.startswith("_"):
            importlib.import_module(f"{_domain.__name__}.{_info.name}")

from .paddle_table import register_paddle_ops  # noqa: E402  (after the families: it fills the gaps)

register_paddle_ops()
