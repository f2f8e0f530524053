"""The import contracts of pyproject.toml ([tool.importlinter]; drawn in
docs/architecture.md): layers import downward only, never in a circle; the op
registry knows no family; each CLI command is a module over the library and
`common`.

`lint-imports` runs on the installed tree, and - so that a green run cannot
mean "checked nothing" - on copies of the tree with one bad import each, and
with a deliberately false contract, which must all fail.
"""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "pyproject.toml"

# import-linter is in the test extra (pip install -e '.[test]'): without it this
# module fails to import rather than skip, so the contracts are never skipped.
import importlinter  # noqa: E402,F401

RUN = ("import sys; from importlinter.cli import lint_imports; "
       "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))")


def lint(config: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    """lint-imports with `config`; `pythonpath` puts a copy of the tree first."""
    env = None if pythonpath is None else {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([sys.executable, "-c", RUN, str(config)], capture_output=True, text=True,
                          cwd=pythonpath or ROOT, env=env, timeout=300)


def contract_names() -> dict[str, str]:
    from importlinter.api import read_configuration
    return {c["id"]: c["name"] for c in read_configuration(str(CONFIG))["contracts_options"]}


def test_the_contracts_hold():
    r = lint(CONFIG)
    assert r.returncode == 0, r.stdout + r.stderr
    n = len(contract_names())
    assert n >= 7
    assert f"Contracts: {n} kept, 0 broken." in r.stdout, r.stdout


def test_a_false_contract_fails(tmp_path):
    """The real graph against a contract it breaks: the model below its formats."""
    text = CONFIG.read_text()               # the same root options, one contract that is false
    head = text[:text.index("[[tool.importlinter.contracts]]")]
    config = tmp_path / "false_contract.toml"
    config.write_text(head + textwrap.dedent("""
            [[tool.importlinter.contracts]]
            id = "false"
            name = "program below io (false)"
            type = "layers"
            containers = ["pybackward"]
            layers = ["legacy.program", "legacy.io"]
        """))
    r = lint(config)
    assert r.returncode != 0
    assert "BROKEN" in r.stdout and "pybackward.legacy.io -> pybackward.legacy.program" in r.stdout, r.stdout


def _tree(tmp_path: Path) -> Path:
    """pybackward and pybackward_cli copied where PYTHONPATH finds them first."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.json", "*.npz")
    shutil.copytree(ROOT / "pybackward", tmp_path / "pybackward", ignore=ignore)
    shutil.copytree(ROOT / "cli", tmp_path / "pybackward_cli", ignore=ignore)
    shutil.copy(CONFIG, tmp_path / "pyproject.toml")
    return tmp_path


# (file, code appended to it, the contract that must break, what it stands for)
BAD = [
    ("pybackward/base/errors.py", "from ..legacy import program  # noqa\n", "layers", "an upward import (and a circle)"),
    ("pybackward/legacy/io.py", "from ..tensors import paddle_files  # noqa\n", "layers", "a circle across two layers"),
    ("pybackward/views/diff.py", "from ..tensors import paddle_files  # noqa\n", "layers",
     "independent siblings of one layer"),
    ("pybackward/analysis/liveness.py", "def _late():\n    from ..backward import recompute  # noqa\n",
     "layers", "an upward import hidden in a function"),
    ("pybackward/ops/registry.py", "def _late():\n    from .math import core  # noqa\n",
     "registry", "the registry importing a family"),
    ("pybackward/ops/control_flow/cond_while.py", "from ..math import core  # noqa\n", "acyclic-packages",
     "a circle of families"),
    ("pybackward/ops/tensor/creation.py", "from ..math import scan  # noqa\n", "ops-domains",
     "a low op domain importing a higher one"),
    ("pybackward/pir/__init__.py", "from ..legacy import program  # noqa\n", "two-irs", "one IR using the other"),
    ("pybackward/legacy/program.py", "import pybackward_cli.common  # noqa\n", "library-not-cli", "the library using the CLI"),
    ("pybackward_cli/cmd_append.py", "from . import cmd_memory  # noqa\n", "cli", "one command importing another"),
    ("pybackward/analysis/path.py", "from .. import backward  # noqa\n", "facades", "the pass importing its facade"),
]


@pytest.mark.parametrize("path, code, contract, what", BAD, ids=[b[2] + ":" + b[0].rsplit("/", 1)[1] for b in BAD])
def test_a_bad_import_breaks_its_contract(tmp_path, path, code, contract, what):
    root = _tree(tmp_path)
    f = root / path
    f.write_text(f.read_text() + "\n\n" + code)
    r = lint(root / "pyproject.toml", pythonpath=root)
    assert r.returncode != 0, f"{what} went unnoticed:\n{r.stdout}{r.stderr}"
    names = contract_names()
    out = " ".join(r.stdout.split())       # contract names wrap at 80 columns
    broken = out[out.index("Broken contracts"):] if "Broken contracts" in out else ""
    assert f"{' '.join(names[contract].split())} BROKEN" in out and names[contract].split(":")[0] in broken, \
        f"{what}: expected contract {contract!r} broken:\n{r.stdout}"


def test_the_tree_says_what_is_where():
    """Every package says what it holds and may import; no module is named after a work order."""
    undocumented, vague = [], []
    for path in sorted((ROOT / "pybackward").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if path.name == "__init__.py" and not ast.get_docstring(ast.parse(path.read_text())):
            undocumented.append(rel)
        stem = path.stem
        if stem.endswith(("_more", "_extra")) or stem.startswith(("misc", "last_")):
            vague.append(rel)
    assert not undocumented, f"packages without a docstring: {undocumented}"
    assert not vague, f"modules named after a work order, not their contents: {vague}"


def test_every_package_is_installed():
    """setup.cfg lists every package of the tree (a package left out is missing from a non-editable install)."""
    import configparser
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    listed = set(cfg["options"]["packages"].split())
    found = {p.relative_to(ROOT).parent.as_posix().replace("/", ".")
             for p in (ROOT / "pybackward").rglob("__init__.py")} | {"pybackward_cli"}
    assert listed == found, f"missing: {sorted(found - listed)}; not packages: {sorted(listed - found)}"
