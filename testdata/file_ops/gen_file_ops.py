"""Programs with save / save_combine / load / load_combine ops, and the files Paddle 3.3.1 writes and reads
with them (needs live Paddle; FLAGS_enable_pir_api=0).

    FLAGS_enable_pir_api=0 python testdata/file_ops/gen_file_ops.py

Writes, beside this script:
  save.pb       x (fed) -> y = 2x + 1; save(y, "out/y.t", save_as_fp16=False); save_combine([x, y], "out/xy.comb")
  paddle_out/   the files Paddle's Executor wrote running save.pb (relative paths, from this directory)
  load.pb       load("in/w.t") -> w; load_combine("in/ab.comb") -> a, b; z = w + a * b
  in/           the files load.pb reads (written by Paddle's save ops from values.npz)
  values.npz    x, and w, a, b (the loaded values), and z as Paddle computed it
pybackward's interpreter must write byte-identical files and compute Paddle's z (tests/ops/test_io_file_ops.py).
"""
import os
import pathlib
import shutil

os.environ.setdefault("FLAGS_enable_pir_api", "0")
import numpy as np  # noqa: E402
import paddle  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent


def main() -> None:
    paddle.enable_static()
    os.chdir(HERE)
    for d in ("paddle_out", "in", "out"):
        shutil.rmtree(d, ignore_errors=True)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4)).astype("float32")
    w = rng.standard_normal((2, 3)).astype("float32")
    a = rng.standard_normal((2, 3)).astype("float32")
    b = rng.standard_normal((2, 3)).astype("float32")
    exe = paddle.static.Executor(paddle.CPUPlace())

    save = paddle.static.Program()
    with paddle.static.program_guard(save, paddle.static.Program()):
        xv = paddle.static.data("x", [3, 4], "float32")
        y = xv * 2.0 + 1.0
        blk = save.global_block()
        blk.append_op(type="save", inputs={"X": [y]}, attrs={"file_path": "out/y.t", "overwrite": True})
        raw = blk.create_var(name="saved", type=paddle.base.core.VarDesc.VarType.RAW)
        blk.append_op(type="save_combine", inputs={"X": [xv, y]}, outputs={"Y": [raw]},
                      attrs={"file_path": "out/xy.comb"})
    exe.run(save, feed={"x": x})
    shutil.move("out", "paddle_out")
    (HERE / "save.pb").write_bytes(save.desc.serialize_to_string())

    # the inputs of load.pb, written by Paddle's own save ops
    writer = paddle.static.Program()
    with paddle.static.program_guard(writer, paddle.static.Program()):
        vs = [paddle.static.data(n, [2, 3], "float32") for n in ("w", "a", "b")]
        blk = writer.global_block()
        blk.append_op(type="save", inputs={"X": [vs[0]]}, attrs={"file_path": "in/w.t"})
        raw = blk.create_var(name="saved", type=paddle.base.core.VarDesc.VarType.RAW)
        blk.append_op(type="save_combine", inputs={"X": vs[1:]}, outputs={"Y": [raw]},
                      attrs={"file_path": "in/ab.comb"})
    exe.run(writer, feed={"w": w, "a": a, "b": b})

    load = paddle.static.Program()
    with paddle.static.program_guard(load, paddle.static.Program()):
        blk = load.global_block()
        lw = blk.create_var(name="w", shape=[2, 3], dtype="float32")
        la = blk.create_var(name="a", shape=[2, 3], dtype="float32")
        lb = blk.create_var(name="b", shape=[2, 3], dtype="float32")
        blk.append_op(type="load", outputs={"Out": [lw]}, attrs={"file_path": "in/w.t"})
        blk.append_op(type="load_combine", outputs={"Out": [la, lb]}, attrs={"file_path": "in/ab.comb"})
        ab = blk.create_var(name="ab", shape=[2, 3], dtype="float32")
        z = blk.create_var(name="z", shape=[2, 3], dtype="float32")
        blk.append_op(type="elementwise_mul", inputs={"X": [la], "Y": [lb]}, outputs={"Out": [ab]})
        blk.append_op(type="elementwise_add", inputs={"X": [lw], "Y": [ab]}, outputs={"Out": [z]})
    (zv,) = exe.run(load, fetch_list=[z])
    (HERE / "load.pb").write_bytes(load.desc.serialize_to_string())
    np.savez(HERE / "values.npz", x=x, w=w, a=a, b=b, z=zv, z_name=np.array(z.name))
    print("wrote", sorted(p.name for p in HERE.iterdir()))


if __name__ == "__main__":
    main()
