"""The public API: `__all__`, the `py.typed` marker, type hints, and the API
reference pdoc builds (pdoc comes with the `test` extra; CI has it)."""
from __future__ import annotations

import configparser
import inspect
import subprocess
import sys

import pybackward
from conftest import ROOT


def _public_callables():
    for name in pybackward.__all__:
        obj = getattr(pybackward, name)
        if inspect.isfunction(obj):
            yield name, obj
        elif inspect.isclass(obj) and obj.__module__.startswith("pybackward") and not issubclass(obj, Exception):
            for k, v in vars(obj).items():
                if inspect.isfunction(v) and (not k.startswith("_") or k == "__init__"):
                    yield f"{name}.{k}", v


def test_all_lists_the_public_api():
    assert len(pybackward.__all__) == len(set(pybackward.__all__))
    for name in pybackward.__all__:
        assert hasattr(pybackward, name), name
    for name in ("load", "save", "append_backward", "gradients", "Program", "PyBackwardError", "Executor"):
        assert name in pybackward.__all__
    ns: dict = {}
    exec("from pybackward import *", ns)
    assert {n for n in ns if n != "__builtins__"} == set(pybackward.__all__)


def test_py_typed_is_shipped():
    assert (ROOT / "pybackward" / "py.typed").exists()
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert "py.typed" in cfg["options.package_data"]["pybackward"]
    extras = cfg["options.extras_require"]
    assert "pdoc" in extras["docs"] and "pdoc" in extras["test"]
    assert "pdoc" not in cfg["options"]["install_requires"]


def test_public_functions_have_type_hints():
    missing = []
    for name, fn in _public_callables():
        sig = inspect.signature(fn)
        for p in sig.parameters.values():
            if p.name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) \
                    and p.annotation is inspect.Parameter.empty:
                missing.append(f"{name}({p.name})")
        if sig.return_annotation is inspect.Signature.empty:
            missing.append(f"{name} -> ?")
    assert not missing, missing


def test_api_docs_build(tmp_path):
    import pdoc  # noqa: F401  (the `test` extra installs it; a missing pdoc is a broken install)
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "build_api_docs.py"), str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    top = (tmp_path / "pybackward.html").read_text()
    for name in pybackward.__all__:
        if name != "__version__":
            obj = getattr(pybackward, name)
            if inspect.ismodule(obj):                                     # modules: a page of their own
                assert (tmp_path / f"{obj.__name__.replace('.', '/')}.html").exists(), name
            else:
                assert f'id="{name}"' in top, name
    assert "Append the backward section of" in top                  # docstrings are there
    for page in ("backward/api", "views/paddle_text", "views/graph", "views/html", "views/dot", "testing", "views/diff",
                 "legacy/program", "ops/math/activation"):
        assert (tmp_path / "pybackward" / f"{page}.html").exists(), page
    assert (tmp_path / "index.html").exists()
