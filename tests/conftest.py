"""Shared fixtures: paths to the golden data, and the optional live Paddle."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTDATA = ROOT / "testdata"
PROGRAMS = TESTDATA / "programs"


def golden_cases() -> list[str]:
    return sorted(p.name for p in PROGRAMS.iterdir() if (p / "case.json").exists())


def case_json(case: str) -> dict:
    return json.loads((PROGRAMS / case / "case.json").read_text())


def all_golden_files() -> list[Path]:
    return sorted(PROGRAMS.glob("*/*.pb"))


def paddle_python() -> str | None:
    """A Python that can import paddle: $PYBACKWARD_PADDLE_PYTHON, or this one."""
    cand = os.environ.get("PYBACKWARD_PADDLE_PYTHON")
    if cand and shutil.which(cand) or (cand and Path(cand).exists()):
        return cand
    try:
        import importlib.util
        if importlib.util.find_spec("paddle") is not None:
            return sys.executable
    except Exception:
        pass
    return None


def run_paddle(script: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    py = paddle_python()
    if py is None:
        pytest.skip("PaddlePaddle is not installed (set PYBACKWARD_PADDLE_PYTHON to a Python that has it)")
    env = dict(os.environ, FLAGS_enable_pir_api="0")
    return subprocess.run([py, "-c", script, *args], capture_output=True, text=True, env=env, timeout=timeout)
