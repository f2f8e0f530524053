"""Paddle's saved files (`pybackward.tensors.paddle_files`): what Paddle 3.3.1 wrote
(testdata/paddle_files, by gen_paddle_files.py) reads bit-exact, what we
write is byte-identical to it, and a hostile pickle runs nothing."""
from __future__ import annotations

import io
import json
import os
import pickle
import zipfile

import numpy as np
import pytest

import pybackward
from pybackward.tensors import paddle_files as pf

from conftest import TESTDATA

PF = TESTDATA / "paddle_files"
MLP, ADAM, DTYPES = PF / "mlp", PF / "adam", PF / "dtypes"


def values(case) -> dict:
    with np.load(case / "values.npz") as z:
        return {k: z[k] for k in z.files}


def assert_bit_exact(got: dict, want: dict, keys=None):
    keys = sorted(want) if keys is None else keys
    assert sorted(got) == sorted(keys)
    for k in keys:
        assert got[k].dtype == want[k].dtype, k
        assert got[k].shape == want[k].shape, k
        assert got[k].tobytes() == want[k].tobytes(), k


# -- reading what Paddle wrote -------------------------------------------
@pytest.mark.parametrize("path", ["mlp/m.pdparams", "mlp/p2.pdparams", "adam/adam.pdparams", "adam/adam.pdopt"])
def test_reads_pdparams_and_pdopt_bit_exact(path):
    got = pf.load_arrays(PF / path)
    want = values(PF / path.split("/")[0])
    assert got and set(got) <= set(want)
    assert_bit_exact(got, want, sorted(got))


def test_adam_files_split_params_and_optimizer_state():
    params = pf.load_arrays(ADAM / "adam.pdparams")
    opt = pf.load_arrays(ADAM / "adam.pdopt")
    assert sorted(params) == ["fc_0.b_0", "fc_0.w_0", "fc_1.b_0", "fc_1.w_0"]
    assert "learning_rate_0" in opt and opt["learning_rate_0"].shape == ()   # 0-D stays 0-D
    assert sorted([*params, *opt]) == sorted(values(ADAM))
    assert pf.load_arrays(MLP / "m.pdopt") == {}       # no optimizer: an empty dict


def test_reads_pdiparams_with_the_program_beside_it_or_given():
    assert_bit_exact(pf.load_arrays(MLP / "inf.pdiparams"), values(MLP))
    prog = pybackward.load(MLP / "inf.pdmodel")
    assert_bit_exact(pf.load_arrays(MLP / "inf.pdiparams", prog), values(MLP))
    assert_bit_exact(pf.read_combined(DTYPES / "dtypes.pdiparams"), values(DTYPES))


def test_reads_per_var_directories():
    assert_bit_exact(pf.load_arrays(MLP / "vars"), values(MLP))
    assert_bit_exact(pf.load_arrays(MLP / "vars", pybackward.load(MLP / "m.pdmodel")), values(MLP))
    want = values(DTYPES)
    no_kernel = {"a_bool", "i_complex64"}       # Paddle's save op cannot write these
    assert_bit_exact(pf.load_arrays(DTYPES / "vars"), want, sorted(set(want) - no_kernel))


def test_persistable_names_are_paddles_save_combine_order():
    prog = pybackward.load(MLP / "inf.pdmodel")        # has feed and fetch vars, both persistable
    assert pf.persistable_names(prog) == ["fc_0.b_0", "fc_0.w_0", "fc_1.b_0", "fc_1.w_0"]
    assert pf.persistable_names(pybackward.load(DTYPES / "dtypes.pdmodel")) == sorted(values(DTYPES))


def test_tensor_format_round_trips_byte_for_byte_lod_included():
    raw = (DTYPES / "dtypes.pdiparams").read_bytes()
    records = pf.decode_tensors(raw, "dtypes.pdiparams")
    lods = json.loads((DTYPES / "lod.json").read_text())
    names = sorted(values(DTYPES))
    assert [lod for _, lod in records] == [lods.get(n, []) for n in names]
    assert b"".join(pf.encode_tensor(a, lod) for a, lod in records) == raw
    for f in sorted((DTYPES / "vars").iterdir()):
        arr, lod, end = pf.decode_tensor(f.read_bytes(), 0, str(f), f.name)
        assert end == f.stat().st_size
        assert pf.encode_tensor(arr, lod) == f.read_bytes()


# -- writing what Paddle reads -------------------------------------------
def test_writes_pdiparams_and_var_files_byte_identical_to_paddles(tmp_path):
    prog = pybackward.load(MLP / "inf.pdmodel")
    pf.save_arrays(tmp_path / "inf.pdiparams", values(MLP), prog)
    assert (tmp_path / "inf.pdiparams").read_bytes() == (MLP / "inf.pdiparams").read_bytes()
    pf.save_arrays(tmp_path / "noprog.pdiparams", values(MLP))     # sorted by name, as Paddle
    assert (tmp_path / "noprog.pdiparams").read_bytes() == (MLP / "inf.pdiparams").read_bytes()
    pf.save_arrays(f"{tmp_path}/vars/", values(MLP))
    for f in (MLP / "vars").iterdir():
        assert (tmp_path / "vars" / f.name).read_bytes() == f.read_bytes()
    dvals = values(DTYPES)
    pf.save_arrays(tmp_path / "d.pdiparams", dvals, pybackward.load(DTYPES / "dtypes.pdmodel"))
    # Paddle's file carries e_lod's LoD; we write none, and the rest is the same bytes.
    ours = pf.decode_tensors((tmp_path / "d.pdiparams").read_bytes())
    theirs = pf.decode_tensors((DTYPES / "dtypes.pdiparams").read_bytes())
    assert [(a.tobytes(), a.dtype, a.shape) for a, _ in ours] == [(a.tobytes(), a.dtype, a.shape) for a, _ in theirs]


@pytest.mark.skipif(not np.__version__.startswith("2."), reason="numpy 1.x pickles under numpy.core")
@pytest.mark.parametrize("path", ["mlp/m.pdparams", "mlp/m.pdopt", "adam/adam.pdparams", "adam/adam.pdopt"])
def test_writes_pdparams_byte_identical_to_paddles(tmp_path, path):
    pf.save_arrays(tmp_path / "x.pdparams", pf.load_arrays(PF / path))
    assert (tmp_path / "x.pdparams").read_bytes() == (PF / path).read_bytes()


def test_npz_round_trip_any_key(tmp_path):
    arrays = {"file": np.arange(3.0), "a/b@GRAD": np.ones((2, 0), np.int8), "s": np.array(5, np.int64)}
    pf.save_arrays(tmp_path / "a.npz", arrays)
    assert_bit_exact(pf.load_arrays(tmp_path / "a.npz"), arrays)
    assert_bit_exact(dict(np.load(tmp_path / "a.npz")), arrays)     # numpy reads it too


def test_every_format_to_every_other_is_lossless(tmp_path):
    want = values(MLP)
    prog = pybackward.load(MLP / "inf.pdmodel")
    paths = ["a.npz", "b.pdparams", "c.pdopt", "d.pdiparams", "e/"]
    for src in paths:
        pf.save_arrays(f"{tmp_path}/{src}", want, prog)
    for src in paths:
        got = pf.load_arrays(f"{tmp_path}/{src}", prog)
        assert_bit_exact(got, want)


def test_pickle_of_big_arrays_split_by_paddle_is_joined(tmp_path):
    # What paddle.static.save(protocol=2|3) writes for arrays past 4 GB, in small.
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    flat = w.ravel()
    obj = {"w@@.0": flat[:5], "w@@.1": flat[5:], "b": np.ones(2, np.float32),
           "UnpackBigParamInfor@@": {"w": {"OriginShape": (3, 4), "slices": ["w@@.0", "w@@.1"]}}}
    (tmp_path / "big.pdparams").write_bytes(pickle.dumps(obj, protocol=3))
    got = pf.load_arrays(tmp_path / "big.pdparams")
    assert sorted(got) == ["b", "w"] and got["w"].tobytes() == w.tobytes() and got["w"].shape == (3, 4)


def test_dygraph_state_dict_comes_back_under_parameter_names(tmp_path):
    obj = {"weight": np.ones((2, 2), np.float32), "bias": np.zeros(2, np.float32),
           "StructuredToParameterName@@": {"weight": "linear_0.w_0", "bias": "linear_0.b_0"},
           "LR_Scheduler": {"last_epoch": 3, "last_lr": 0.1}}
    (tmp_path / "dy.pdparams").write_bytes(pickle.dumps(obj, protocol=4))
    assert sorted(pf.load_arrays(tmp_path / "dy.pdparams")) == ["linear_0.b_0", "linear_0.w_0"]


# -- hostile and foreign files -------------------------------------------
class _RunsShell:
    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


class _Evals:
    def __reduce__(self):
        return (eval, ("__import__('os').system('true')",))


@pytest.mark.parametrize("protocol", [0, 2, 4])
def test_hostile_pdparams_is_refused_without_running_anything(tmp_path, protocol):
    marker = tmp_path / "pwned"
    payload = {"fc_0.w_0": np.ones(2, np.float32), "fc_0.b_0": _RunsShell(f"touch {marker}")}
    path = tmp_path / "evil.pdparams"
    path.write_bytes(pickle.dumps(payload, protocol=protocol))
    with pytest.raises(pybackward.ArrayFileError) as e:
        pf.load_arrays(path)
    assert not marker.exists()
    msg = str(e.value)
    assert str(path) in msg and "posix.system" in msg and "refused" in msg
    # Confirm the payload is live: plain pickle would have run it.
    pickle.loads(path.read_bytes())
    assert marker.exists()


@pytest.mark.parametrize("obj,global_name", [
    (_Evals(), "builtins.eval"),
    (np.ma.masked_array([1.0, 2.0]), "numpy.ma.core._mareconstruct"),
    (np.float32(1.5), "numpy._core.multiarray.scalar"),
    (np.array([1, "a"], dtype=object), None),          # an object array
    (np.array([1.0]).view(np.recarray), "numpy.rec.recarray"),
])
def test_pickle_refuses_everything_but_plain_numeric_arrays(tmp_path, obj, global_name):
    path = tmp_path / "x.pdparams"
    path.write_bytes(pickle.dumps({"a": obj}, protocol=4))
    with pytest.raises(pybackward.ArrayFileError) as e:
        pf.load_arrays(path)
    assert str(path) in str(e.value)
    if global_name:
        assert global_name in str(e.value) or global_name.replace("_core", "core") in str(e.value)


def test_pickle_of_another_shape_or_protocol_5_is_refused(tmp_path):
    cases = {
        "list.pdparams": pickle.dumps([np.ones(2)], protocol=4),                 # not a dict
        "p5.pdparams": pickle.dumps({"a": np.ones(2)}, protocol=5),              # numpy's _frombuffer
        "trunc.pdparams": pickle.dumps({"a": np.ones(200)}, protocol=4)[:-40],   # truncated
        "pid.pdparams": b"\x80\x04\x95\x07\x00\x00\x00\x00\x00\x00\x00X\x01\x00\x00\x00aQ.",  # persistent id
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(pybackward.ArrayFileError, match=name):
            pf.load_arrays(tmp_path / name)


class _ForgedArray:
    """Pickles as numpy does, but with 12 bytes of data for a [4] float32 array."""

    def __reduce__(self):
        reconstruct = np.zeros(1).__reduce__()[0]
        return (reconstruct, (np.ndarray, (0,), b"b"), (1, (4,), np.dtype("f4"), False, b"\0" * 12))


def test_pickle_array_whose_data_does_not_fit_its_shape_is_refused(tmp_path):
    (tmp_path / "x.pdparams").write_bytes(pickle.dumps({"a": _ForgedArray()}, protocol=4))
    with pytest.raises(pybackward.ArrayFileError, match="12 bytes, not 16"):
        pf.load_arrays(tmp_path / "x.pdparams")


def test_pdiparams_with_the_wrong_program_says_so(tmp_path):
    dtypes_prog = pybackward.load(DTYPES / "dtypes.pdmodel")
    with pytest.raises(pybackward.ArrayFileError, match=r"holds 4 tensors, but .* has 12 persistable vars"):
        pf.load_arrays(MLP / "inf.pdiparams", dtypes_prog)
    # Same count, other dtypes or shapes: named.
    swapped = tmp_path / "inf.pdiparams"
    vals = values(MLP)
    vals["fc_0.w_0"] = vals["fc_0.w_0"].T.copy()
    pf.save_arrays(swapped, vals)
    with pytest.raises(pybackward.ArrayFileError, match=r"var 'fc_0.w_0' has shape \[8, 4\]"):
        pf.load_arrays(swapped, pybackward.load(MLP / "inf.pdmodel"))
    vals["fc_0.w_0"] = values(MLP)["fc_0.w_0"].astype(np.float64)
    pf.save_arrays(swapped, vals)
    with pytest.raises(pybackward.ArrayFileError, match=r"'fc_0.w_0' is float64, but .* declares it FP32"):
        pf.load_arrays(swapped, pybackward.load(MLP / "inf.pdmodel"))


def test_pdiparams_without_a_program_names_the_fix(tmp_path):
    (tmp_path / "w.pdiparams").write_bytes((MLP / "inf.pdiparams").read_bytes())
    with pytest.raises(pybackward.ArrayFileError, match=r"no w.pdmodel beside it: give the program"):
        pf.load_arrays(tmp_path / "w.pdiparams")


def test_damaged_tensor_files_are_named(tmp_path):
    raw = (MLP / "inf.pdiparams").read_bytes()
    prog = pybackward.load(MLP / "inf.pdmodel")
    for name, data, msg in [("trunc.pdiparams", raw[:-3], "ends inside the data"),
                            ("version.pdiparams", b"\x01" + raw[1:], "version 1, not 0"),
                            ("tail.pdiparams", raw + b"\0" * 3, "ends inside the header")]:
        (tmp_path / name).write_bytes(data)
        with pytest.raises(pybackward.ArrayFileError, match=msg):
            pf.load_arrays(tmp_path / name, prog)
    d = tmp_path / "vars"
    d.mkdir()
    (d / "fc_0.w_0").write_bytes(raw)                 # a combined file where one tensor belongs
    with pytest.raises(pybackward.ArrayFileError, match="bytes after the tensor"):
        pf.load_arrays(d)


def test_foreign_and_missing_files_are_explained(tmp_path):
    png = tmp_path / "params.npz"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    npy = tmp_path / "x.npz"
    np.save(npy.with_suffix(".npy"), np.ones(3))
    os.replace(npy.with_suffix(".npy"), npy)
    txt = tmp_path / "p.pdparams"
    txt.write_text("hello world\n")
    zipped = tmp_path / "z.npz"
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("a.npy", b"not an array")
    objs = tmp_path / "o.npz"
    np.savez(objs, a=np.array([{}], dtype=object))
    for path, msg in [(tmp_path / "missing.npz", "missing.npz: no such file"),
                      (png, "not a .npz archive: this is a PNG image"),
                      (npy, "single NumPy .npy array"),
                      (txt, "not a Paddle pickle .*: this is text"),
                      (zipped, "cannot read array 'a': it is damaged"),
                      (objs, "holds Python objects"),
                      (tmp_path / "nodir" / "x.pdiparams", "no such file")]:
        with pytest.raises(pybackward.ArrayFileError, match=msg) as e:
            pf.load_arrays(path, pybackward.load(MLP / "inf.pdmodel"))
        assert "Errno" not in str(e.value) and str(path) in str(e.value)


def test_writing_needs_a_suffix_that_names_a_format_and_safe_names(tmp_path):
    with pytest.raises(pybackward.ArrayFileError, match="cannot tell which format"):
        pf.save_arrays(tmp_path / "out.png", {"a": np.ones(1)})
    with pytest.raises(pybackward.ArrayFileError, match="cannot be a file name"):
        pf.save_arrays(f"{tmp_path}/d/", {"../escape": np.ones(1)})
    assert not (tmp_path / "escape").exists()
    with pytest.raises(pybackward.ArrayFileError, match=r"no value for 'fc_1.w_0'"):
        vals = values(MLP)
        del vals["fc_1.w_0"]
        pf.save_arrays(tmp_path / "x.pdiparams", vals, pybackward.load(MLP / "inf.pdmodel"))
    assert not (tmp_path / "x.pdiparams").exists()


def test_unknown_suffix_is_sniffed_when_reading(tmp_path):
    (tmp_path / "__params__").write_bytes((MLP / "inf.pdiparams").read_bytes())
    (tmp_path / "weights.bin").write_bytes((MLP / "m.pdparams").read_bytes())
    assert pf.array_format(tmp_path / "__params__") == "combined"
    assert pf.array_format(tmp_path / "weights.bin") == "pickle"
    assert_bit_exact(pf.load_arrays(tmp_path / "__params__", pybackward.load(MLP / "inf.pdmodel")), values(MLP))
    assert_bit_exact(pf.load_arrays(tmp_path / "weights.bin"), values(MLP))


def test_npz_bytes_match_numpy_savez_reading():
    arrays = {"x": np.arange(4, dtype=np.float16)}
    with np.load(io.BytesIO(pf.npz_bytes(arrays))) as z:
        assert z["x"].tobytes() == arrays["x"].tobytes()


def test_devices_and_pipes_are_not_read(tmp_path):
    with pytest.raises(pybackward.ArrayFileError, match="not a regular file"):
        pf.load_arrays("/dev/zero")
    os.mkfifo(tmp_path / "p.npz")
    with pytest.raises(pybackward.ArrayFileError, match="not a regular file"):
        pf.load_arrays(tmp_path / "p.npz")
