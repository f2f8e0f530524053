"""Tidiness the users see: no deprecated click calls, bounded dependencies,
`check`'s table whole, `--help` summaries whole, the README's first command."""
from __future__ import annotations

import configparser
import os
import re
import shlex
import subprocess
import sys

from click.testing import CliRunner

from conftest import PROGRAMS, ROOT
from pybackward_cli.main import cli


def test_no_deprecated_click_calls(tmp_path):
    src = "\n".join(p.read_text() for p in (ROOT / "cli").glob("*.py"))
    assert "get_text_stream" not in src
    r = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-m", "pybackward_cli.main", "append",
                        "--loss", "mean_0.tmp_0", str(PROGRAMS / "fit_a_line" / "forward.pb"),
                        str(PROGRAMS / "fit_a_line" / "forward.pb"), "--out-dir", str(tmp_path)],
                       capture_output=True, text=True)
    assert "DeprecationWarning" not in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_dependencies_have_upper_bounds():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    reqs = [r.strip() for r in cfg["options"]["install_requires"].splitlines() if r.strip()]
    assert {re.split(r"[<>=!~ ]", r)[0] for r in reqs} == {"protobuf", "numpy", "click"}
    for r in reqs:
        assert re.search(r"<\d+", r), f"{r}: no upper bound on the major version"


def test_check_table_columns_are_whole():
    case = PROGRAMS / "fit_a_line"
    r = CliRunner().invoke(cli, ["check", str(case / "forward.pb"), "--loss", "mean_0.tmp_0", "--max-elements", "4",
                                 "--params", str(case / "params.npz"), "--feeds", str(case / "feeds.npz")])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert "4 directions" in r.output and re.search(r"\b1 element\b", r.output)
    starts = [ln.index("result") for ln in lines[:1]] + [max(ln.rfind(" ok"), ln.rfind(" FAIL")) + 1 for ln in lines[1:]]
    assert len(set(starts)) == 1, r.output                          # the last column lines up


def test_help_summaries_are_whole():
    for width in (80, 120):
        r = CliRunner().invoke(cli, ["--help"], terminal_width=width)
        cmds = r.output.split("Commands:")[1]
        assert "..." not in cmds, cmds
        assert set(re.findall(r"^  (\w+) ", cmds, re.M)) == set(cli.commands)
    for name, cmd in cli.commands.items():
        assert cmd.get_short_help_str(limit=1000).endswith("."), name


def test_readme_main_job_names_its_output_and_runs(tmp_path):
    text = (ROOT / "README.md").read_text()
    first = re.search(r"```bash\n(.*?)\n```", text, re.S).group(1)
    job = first.split("&& ")[-1]
    assert job.startswith("pybackward append") and job.endswith(" /tmp/pybackward-out.pb")
    assert "/tmp/pybackward-out.pb" in text.split("```", 2)[2][:400]      # and the text says where it goes
    out = tmp_path / "out.pb"
    argv = shlex.split(job)[1:-1] + [str(out)]
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    r = subprocess.run(["pybackward", *argv], cwd=ROOT, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert out.exists() and "my_fc.w_0@GRAD" in r.stdout
