"""Helpers for users who check programs against golden files from pytest
(registered as a pytest plugin through the `pytest11` entry point).

    import pybackward
    from pybackward.testing import assert_program_matches

    def test_backward_is_unchanged():
        prog = pybackward.load("model/forward.pb")
        pybackward.append_backward("mean_0.tmp_0", program=prog)
        assert_program_matches(prog, "goldens/backward.pb")

When the program differs from the golden, the test fails with a readable
diff (as `pybackward diff GOLDEN PROGRAM` prints it). Run
`pytest --update-goldens` (or set `PYBACKWARD_UPDATE_GOLDENS=1`) to rewrite
the goldens that differ or are missing - the binary and a `.pbtxt` beside
it, each written atomically - and review them with `git diff`.

The plugin loads by itself once pybackward is installed. Where plugin
autoloading is off (`PYTEST_DISABLE_PLUGIN_AUTOLOAD`), add
`-p pybackward.testing` to pytest's command line or `addopts`.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, Union

if TYPE_CHECKING:  # keep the plugin light: pytest imports it on every run
    from .views.diff import GoldenResult
    from .legacy.program import Program

#: Set to 1 to update goldens without the pytest option (e.g. outside pytest).
UPDATE_ENV = "PYBACKWARD_UPDATE_GOLDENS"

_config = None


def pytest_addoption(parser) -> None:
    group = parser.getgroup("pybackward", "pybackward golden programs")
    group.addoption("--update-goldens", action="store_true", default=False,
                    help="Rewrite the golden programs that assert_program_matches finds changed or "
                         "missing (binary and .pbtxt) instead of failing.")


def pytest_configure(config) -> None:
    global _config
    _config = config


def pytest_unconfigure(config) -> None:
    global _config
    if _config is config:
        _config = None


def update_requested() -> bool:
    """True under `pytest --update-goldens` or with PYBACKWARD_UPDATE_GOLDENS=1."""
    if _config is not None:
        try:
            if _config.getoption("update_goldens"):
                return True
        except ValueError:  # the option is not registered (plugin loaded late)
            pass
    return os.environ.get(UPDATE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def assert_program_matches(program: Union["Program", str, os.PathLike, bytes],
                           golden_path: Union[str, os.PathLike], *,
                           ignore_attrs: Iterable[str] | None = None,
                           update: bool | None = None) -> "GoldenResult":
    """Fail (AssertionError with the diff) unless `program` equals the golden.

    `program` is a Program, a path or program bytes; `golden_path` a binary
    program (`.pbtxt` is written beside it on update) or a `.pbtxt`.
    Attrs in `ignore_attrs` (default: op_callstack, op_namescope, op_device)
    are not compared. `update` (default: `--update-goldens` / the
    environment) rewrites a golden that differs or is missing instead of
    failing. Returns the comparison (`.equal`, `.updated`, `.diff`).
    """
    __tracebackhide__ = True
    from .legacy import io
    from .views.diff import check_golden
    from .legacy.program import Program
    if isinstance(program, (bytes, bytearray, memoryview)):
        prog = io.loads(bytes(program), source="<program>")
    elif isinstance(program, Program):
        prog = program
    elif isinstance(program, (str, os.PathLike)):
        prog = io.load(program)
    else:
        raise TypeError(f"assert_program_matches() takes a Program, a path or bytes, "
                        f"not {type(program).__name__}")
    do_update = update_requested() if update is None else update
    label = f"{prog.source} (under test)" if prog.source else "<program under test>"
    res = check_golden(prog, golden_path, update=do_update, ignore_attrs=ignore_attrs, label=label)
    if res.updated or res.equal:
        return res
    if not res.exists:
        raise AssertionError(f"golden program {golden_path} does not exist; run pytest with "
                             f"--update-goldens to write it")
    raise AssertionError(f"program differs from golden {golden_path} (run pytest with --update-goldens "
                         f"to accept the change):\n{res.diff.to_text()}")


__all__ = ["assert_program_matches", "update_requested", "UPDATE_ENV"]
