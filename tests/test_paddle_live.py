"""Cross-checks against a live Paddle 3.3.1 (skipped cleanly when it is absent).

Paddle is never imported into pybackward's process (the two protobuf schemas
would clash); a Python that has Paddle runs scripts in a subprocess: set
$PYBACKWARD_PADDLE_PYTHON, or install paddlepaddle in this environment.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import pybackward
from conftest import PROGRAMS, run_paddle
from golden import replay

EXECUTE = r"""
import json, os, sys
import numpy as np
import paddle
paddle.enable_static()
path, params, feeds, fetch = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
prog = paddle.static.Program.parse_from_string(open(path, "rb").read())
scope = paddle.static.Scope()
place = paddle.CPUPlace()
with paddle.static.scope_guard(scope):
    for k, v in np.load(params).items():
        scope.var(k).get_tensor().set(v, place)
    exe = paddle.static.Executor(place)
    out = exe.run(prog, feed=dict(np.load(feeds)), fetch_list=fetch)
np.savez(sys.argv[5], **dict(zip(fetch, out)))
print("ok", len(prog.global_block().ops))
"""

CASES = ["fit_a_line", "doc_append_backward", "mlp_softmax_ce", "cnn_bn_pool", "attention",
         "shared_weights", "concat_split_slice_gather"]


@pytest.mark.parametrize("case", CASES)
def test_paddle_runs_our_backward_and_gets_its_own_gradients(case, tmp_path):
    """Our output loads in Paddle (parse_from_string) and Paddle's Executor
    computes the same gradients from it as from Paddle's own append_backward."""
    prog, *_ = replay(case, "default", record_callbacks=False)
    ours = tmp_path / "ours.pb"
    pybackward.save(prog, ours)
    expected = dict(np.load(PROGRAMS / case / "grads.npz"))
    out = tmp_path / "out.npz"
    r = run_paddle(EXECUTE, str(ours), str(PROGRAMS / case / "params.npz"),
                   str(PROGRAMS / case / "feeds.npz"), json.dumps(sorted(expected)), str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("ok")
    got = np.load(out)
    for name, want in expected.items():
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-6, err_msg=name)
