"""The other array readers and the directory writer, on hostile files: `.npz`
members checked before they are inflated (`npz_format`), `.npy` headers before
the array is allocated, Paddle tensor dims before they are multiplied
(`tensor_format.shape_problem`), per-var directories read and written only
inside the directory and all or nothing (`paddle_files`)."""
from __future__ import annotations

import io
import os
import struct
import tracemalloc
import zipfile

import numpy as np
import pytest

import pybackward
from pybackward.tensors import paddle_files as pf, tensor_format
from conftest import TESTDATA

MLP = TESTDATA / "paddle_files" / "mlp"


def npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


# -- .npz ---------------------------------------------------------------------
ARRAYS = {"f4": np.arange(6, dtype=np.float32).reshape(2, 3), "be": np.arange(3, dtype=">i4"),
          "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)), "zero_d": np.array(2.5),
          "empty": np.zeros((0, 4), np.int8), "c8": np.array([1 + 2j], np.complex64),
          "b": np.array([True, False]), "a/b@GRAD": np.ones(2, np.float16)}


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_reads_what_numpy_writes_as_numpy_reads_it(tmp_path, save):
    save(tmp_path / "a.npz", **ARRAYS)
    got = pf.load_arrays(tmp_path / "a.npz")
    with np.load(tmp_path / "a.npz") as z:
        assert list(got) == list(z.files)
        for k in z.files:
            assert got[k].dtype == z[k].dtype and got[k].shape == z[k].shape and (got[k] == z[k]).all(), k
            assert got[k].flags.writeable and got[k].flags.f_contiguous == z[k].flags.f_contiguous, k
    for k, a in ARRAYS.items():
        np.save(tmp_path / "one.npy", a)
        b = pf.read_npy(tmp_path / "one.npy")
        assert b.dtype == a.dtype and b.shape == a.shape and (b == a).all(), k


def _zip(members: dict[str, bytes], method=zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name), data)
    return buf.getvalue()


def _header(shape, descr="<f4") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


@pytest.mark.parametrize("members,match", [
    ({"w.npy": npy(np.ones(2)), "readme.txt": b"hi"}, "member 'readme.txt' is not an array"),
    ({"d/": b""}, "member 'd/' is not an array"),
    ({"w.npy": _header((2**40,))}, r"header declares 4398046511104 bytes of data, the file holds 0"),
    ({"w.npy": _header((2,)) + bytes(12)}, "header declares 8 bytes of data, the file holds 12"),
    ({"w.npy": _header((2,) * 65)}, "header declares 65 dims"),
    ({"w.npy": _header((2**62, 2**62, 0))}, r"more than 2\^63 bytes"),
    ({"w.npy": _header((1,), "|O")}, "holds Python objects"),
    ({"w.npy": b"\x93NUMPY\x03\x00" + bytes(8)}, "version 3.0"),
    ({"w.npy": b"not an array"}, "cannot read array 'w': it is damaged"),
])
def test_npz_members_are_checked_before_they_are_read(tmp_path, members, match):
    p = tmp_path / "x.npz"
    p.write_bytes(_zip(members))
    with pytest.raises(pybackward.ArrayFileError, match=match) as e:
        pf.load_arrays(p)
    assert str(p) in str(e.value) and len(str(e.value)) < 400


def _rewrite(data: bytes, index: int, **fields) -> bytes:
    """The zip with the central-directory entry `index` changed (and its local header)."""
    out = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        info = zf.infolist()[index]
        central = data.rfind(b"PK\x01\x02", 0, len(data))
        while struct.unpack_from("<I", out, central + 42)[0] != info.header_offset:
            central = data.rfind(b"PK\x01\x02", 0, central)
    offsets = {"method": (10, 8, "<H"), "compress_size": (20, 18, "<I"), "file_size": (24, 22, "<I"),
               "flags": (8, 6, "<H"), "offset": (42, None, "<I")}
    for name, value in fields.items():
        c, loc, fmt = offsets[name]
        struct.pack_into(fmt, out, central + c, value)
        if loc is not None:
            struct.pack_into(fmt, out, info.header_offset + loc, value)
    return bytes(out)


def test_npz_sizes_names_and_methods_of_the_zip(tmp_path):
    p = tmp_path / "x.npz"
    good = _zip({"a.npy": npy(np.ones(4)), "b.npy": npy(np.zeros(4))})
    with zipfile.ZipFile(io.BytesIO(good)) as zf:
        a_at = zf.infolist()[0].header_offset
    for data, match in [
        (_rewrite(good, 1, offset=a_at), "share bytes of the file"),
        (_rewrite(good, 0, flags=1), "is encrypted"),
        (_rewrite(good, 0, method=12), "compressed with method 12"),
        (_rewrite(good, 0, file_size=10**6), r"declares 1000000 bytes from \d+ compressed"),
        (_rewrite(good, 1, offset=len(good) - 10), "not where the zip's directory says"),
        (good[:len(good) // 2], "a damaged .npz archive"),
    ]:
        p.write_bytes(data)
        with pytest.raises(pybackward.ArrayFileError, match=match):
            pf.load_arrays(p)
    dup = bytearray(good)
    dup[dup.rfind(b"b.npy")] = ord("a")           # the central directory's name of b: now a.npy twice
    p.write_bytes(bytes(dup))
    with pytest.raises(pybackward.ArrayFileError, match="'a' is in the archive twice"):
        pf.load_arrays(p)


def test_an_npy_header_is_checked_against_the_file_before_the_array_is_allocated(tmp_path):
    """A 128-byte .npy declaring 4 TiB: refused with no allocation (not a MemoryError)."""
    p = tmp_path / "x.npy"
    p.write_bytes(_header((2**40,)))
    tracemalloc.start()
    try:
        with pytest.raises(pybackward.ArrayFileError, match="header declares 4398046511104 bytes"):
            pf.read_npy(p)
        assert tracemalloc.get_traced_memory()[1] < 4 << 20
    finally:
        tracemalloc.stop()


def test_inflating_reads_in_pieces_and_checks_the_crc(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("w.npy", npy(np.zeros(3 << 20, np.uint8)))
    data = bytearray(buf.getvalue())
    p = tmp_path / "z.npz"
    p.write_bytes(bytes(data))
    assert pf.load_arrays(p)["w"].shape == (3 << 20,)
    crc_at = data.rfind(b"PK\x01\x02") + 16
    data[crc_at] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(pybackward.ArrayFileError, match="cannot read array 'w': it is damaged"):
        pf.load_arrays(p)


# -- Paddle tensor dims -----------------------------------------------------------
@pytest.mark.parametrize("dims,itemsize,problem", [
    ([], 4, None), ([0] * 64, 4, None), ([2**62, 0], 1, None), ([2**31, 2**31], 1, None),
    ([1] * 65, 4, "65 dims (NumPy holds at most 64)"),
    ([3, -1], 4, "negative dims [3, -1]"),
    ([2**62, 2**62, 0], 4, "dims [4611686018427387904, 4611686018427387904, 0], more than 2^63 bytes"),
    ([2**61, 2], 8, "more than 2^63 bytes"),
    ([2] * 200_000, 4, "200000 dims"),
])
def test_shape_problem(dims, itemsize, problem):
    got = tensor_format.shape_problem(dims, itemsize)
    assert got == problem if problem is None else problem in got


def test_dims_text_is_bounded():
    assert tensor_format.dims_text([2, 3]) == "[2, 3]"
    assert tensor_format.dims_text(list(range(100))) == "[0, 1, 2, 3, 4, 5, 6, ..., 99] (100 dims)"
    assert "~2^" in tensor_format.dims_text([10**100])


def test_a_combined_file_with_absurd_dims_is_one_clear_error():
    raw = (MLP / "inf.pdiparams").read_bytes()
    first = pf.decode_tensor(raw)[2]
    from pybackward._proto import framework_pb2 as pb
    desc = pb.VarType.TensorDesc(data_type=pb.VarType.FP32, dims=[1] * 70).SerializeToString()
    bad = struct.pack("<IQIi", 0, 0, 0, len(desc)) + desc + raw[first:]
    with pytest.raises(pybackward.ArrayFileError, match="tensor at byte 0: 70 dims"):
        pf.decode_tensors(bad, "x.pdiparams")


# -- per-var directories: inside the directory, all or nothing ----------------
def test_skipped_names_are_what_the_reader_skips(tmp_path):
    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    names = ["w", "sub/w", ".h", "sub/.h", "__model__", "sub/__params__", "m.pdmodel", "x.PB", "a.npz", "b.json"]
    for n in names:
        (d / n).write_bytes(pf.encode_tensor(np.ones(1, np.float32)))
    assert sorted(pf.read_var_dir(d)) == sorted(n for n in names if pf.skipped_name(n) is None) == ["sub/w", "w"]


def test_writes_into_an_existing_directory_keep_other_files_and_modes(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "a").write_bytes(b"old")
    os.chmod(d / "a", 0o640)
    (d / "other").write_bytes(b"not ours")
    pf.save_arrays(f"{d}/", {"a": np.ones(2, np.float32), "x/y/z": np.zeros(1, np.int64)})
    assert os.stat(d / "a").st_mode & 0o777 == 0o640
    assert (d / "other").read_bytes() == b"not ours"
    assert sorted(p.relative_to(d).as_posix() for p in d.rglob("*")) == ["a", "other", "x", "x/y", "x/y/z"]
    assert pf.decode_tensor((d / "x/y/z").read_bytes())[0].dtype == np.int64


@pytest.mark.parametrize("arrays,match", [
    ({"a": np.ones(1), "a/b": np.ones(1)}, "one would be the other's directory"),
    ({"../x": np.ones(1)}, "cannot be a file name"),
    ({"": np.ones(1)}, "cannot be a file name"),
    ({"ok": np.ones(1), "bad": np.array(["s"])}, "'bad' is not a numeric array"),
])
def test_the_directory_writer_checks_everything_first(tmp_path, arrays, match):
    with pytest.raises(pybackward.ArrayFileError, match=match):
        pf.save_arrays(f"{tmp_path}/d/", arrays)
    assert not (tmp_path / "d").exists()


def test_the_directory_writer_refuses_what_it_cannot_replace(tmp_path):
    d = tmp_path / "d"
    (d / "a").mkdir(parents=True)
    (d / "f").write_bytes(b"x")
    with pytest.raises(pybackward.OutputError, match="is a directory, not a per-var file"):
        pf.save_arrays(f"{d}/", {"a": np.ones(1, np.float32)})
    with pytest.raises(pybackward.OutputError, match="is a file, not a directory"):
        pf.save_arrays(f"{d}/", {"f/g": np.ones(1, np.float32)})
    (d / "link").symlink_to(d / "f")
    with pytest.raises(pybackward.ArrayFileError, match="lead to one file"):
        pf.save_arrays(f"{d}/", {"f": np.ones(1, np.float32), "link": np.ones(1, np.float32)})
    assert (d / "f").read_bytes() == b"x"
    pf.save_arrays(f"{d}/", {"link": np.ones(1, np.float32)})       # a link inside: written through
    assert (d / "link").is_symlink() and pf.decode_tensor((d / "f").read_bytes())[0].tolist() == [1.0]


def test_a_program_name_or_a_link_leading_out_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(pf.encode_tensor(np.ones(1, np.float32)))
    d = tmp_path / "d"
    d.mkdir()
    (d / "up").symlink_to("..")                  # a directory link out: never descended
    with pytest.raises(pybackward.ArrayFileError, match="holds no per-var tensor files"):
        pf.read_var_dir(d)
    (d / "up").unlink()
    (d / "s").symlink_to(outside / "secret")
    with pytest.raises(pybackward.ArrayFileError, match=r"d/s: leads out of"):
        pf.read_var_dir(d)
    (d / "s").unlink()
    (d / "in").write_bytes(pf.encode_tensor(np.ones(1, np.float32)))
    (d / "alias").symlink_to(d / "in")           # inside: read
    assert sorted(pf.read_var_dir(d)) == ["alias", "in"]


def test_big_files_are_read_into_one_buffer(tmp_path, monkeypatch):
    """Files from `ONE_BUFFER_FROM` (1 GiB) on are read by one readall, not as 2 GiB
    reads joined (which held a 5 GB .pdparams twice); the bytes are the same."""
    from pybackward.base import files
    p = tmp_path / "a.npz"
    np.savez(p, **ARRAYS)
    want = pf.load_arrays(p)
    monkeypatch.setattr(files, "ONE_BUFFER_FROM", 0)
    assert files.read_input_file(p) == p.read_bytes()
    got = pf.load_arrays(p)
    assert all((got[k] == want[k]).all() and got[k].dtype == want[k].dtype for k in want)
    with pytest.raises(pybackward.ArgumentError, match="is past the limit of 10"):
        files.read_input_file(p, limit=10)
