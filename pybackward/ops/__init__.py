"""The op registry and the op families.

Importing this package registers every op family: each module of the package
is a family, except the registry's own machinery (`MACHINERY`) and helper
modules (a leading underscore). Nothing lists op types or families by hand; a
new family module is picked up by being there. The registry
(`pybackward.ops.registry`) knows none of the families: they register
themselves into it when this package imports them, and any import of
`pybackward.ops.<module>` runs this first.
"""
import importlib
import pkgutil

#: Modules of the package that declare no ops: the registry and what it reads.
MACHINERY = {"registry", "paddle_table", "paddle_data", "opcheck", "custom"}

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _info.name.startswith("_") and _info.name not in MACHINERY:
        importlib.import_module(f"{__name__}.{_info.name}")

from .paddle_table import register_paddle_ops  # noqa: E402  (after the families: it fills the gaps)

register_paddle_ops()
