"""A user's golden test: the backward section of the model must not change
unnoticed. Run `pytest --update-goldens` to accept a change, then review the
new goldens/*.pbtxt with `git diff`."""
from pathlib import Path

import pybackward
from pybackward.testing import assert_program_matches

HERE = Path(__file__).parent


def test_fit_a_line_backward_is_unchanged():
    prog = pybackward.load(HERE / "model" / "fit_a_line.pb")
    pybackward.append_backward("mean_0.tmp_0", program=prog)
    assert_program_matches(prog, HERE / "goldens" / "fit_a_line.backward.pb")
