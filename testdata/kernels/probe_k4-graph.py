"""Probe k4-graph's op types on live Paddle 3.3.1 (legacy IR, CPU executor): one-op programs.

    FLAGS_enable_pir_api=0 /root/pdenv/bin/python testdata/kernels/probe_k4-graph.py > testdata/kernels/probe_k4-graph.txt
Prints each op's fetched outputs, or Paddle's exact error.
"""
import os
import sys
import traceback

os.environ["FLAGS_enable_pir_api"] = "0"
import numpy as np  # noqa: E402
import paddle  # noqa: E402

paddle.enable_static()
EXE = paddle.static.Executor(paddle.CPUPlace())


def report_error(title, e):
    """One line: the first line of Paddle's error that names it."""
    msg = [m for m in str(e).splitlines() if m.strip()]
    key = [m for m in msg if "Error" in m or "Expected" in m]
    print(f"== {title}: ERROR {type(e).__name__}: {(key or msg or [''])[0][:400]}")


def run(title, op, ins, outs, attrs, alias=None, out_dtypes=None):
    """ins: slot -> list of arrays; outs: slot -> count; alias: out slot -> input slot."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    feed = {}
    try:
        with paddle.static.program_guard(main, startup):
            block = main.global_block()
            iv = {}
            for slot, arrs in ins.items():
                iv[slot] = []
                for i, a in enumerate(arrs):
                    v = paddle.static.data(f"in_{slot}_{i}", list(a.shape), str(a.dtype))
                    feed[v.name] = a
                    iv[slot].append(v)
            ov = {}
            for slot, n in outs.items():
                if alias and slot in alias:
                    ov[slot] = iv[alias[slot]]
                    continue
                dt = (out_dtypes or {}).get(slot, "float32")
                ov[slot] = [block.create_var(name=f"out_{slot}_{i}", dtype=dt) for i in range(n)]
            block.append_op(type=op, inputs=iv, outputs=ov, attrs=attrs)
        fetch = [(s, v) for s, vs in ov.items() for v in vs]
        vals = EXE.run(main, feed=feed, fetch_list=[v for _, v in fetch])
        print(f"== {title}: OK")
        for (s, _), v in zip(fetch, vals):
            v = np.asarray(v)
            print(f"   {s}: {v.dtype} {v.shape} {v.tolist()}")
    except Exception as e:  # noqa: BLE001
        report_error(title, e)
    sys.stdout.flush()


def i64(*v):
    return np.array(v, np.int64)


# CSC graph: 5 nodes
row = i64(1, 2, 3, 0, 2, 4, 0, 1, 3, 4, 0, 2, 1)
colptr = i64(0, 3, 6, 10, 12, 13)
eids = np.arange(13, dtype=np.int64) + 100
nodes = i64(0, 2, 4)
which = sys.argv[1:] or ["graph", "tdm", "misc", "sr"]
if "graph" in which:
    run("graph_reindex", "graph_reindex",
        {"X": [i64(3, 7, 5)], "Neighbors": [i64(7, 9, 3, 11, 9, 5)], "Count": [np.array([2, 3, 1], np.int32)]},
        {"Reindex_Src": 1, "Reindex_Dst": 1, "Out_Nodes": 1}, {},
        out_dtypes={"Reindex_Src": "int64", "Reindex_Dst": "int64", "Out_Nodes": "int64"})
    run("graph_reindex int64 Count", "graph_reindex",
        {"X": [i64(3, 7, 5)], "Neighbors": [i64(7, 9, 3, 11, 9, 5)], "Count": [i64(2, 3, 1)]},
        {"Reindex_Src": 1, "Reindex_Dst": 1, "Out_Nodes": 1}, {},
        out_dtypes={"Reindex_Src": "int64", "Reindex_Dst": "int64", "Out_Nodes": "int64"})
    for ss in (-1, 4, 2):
        run(f"graph_sample_neighbors sample_size={ss}", "graph_sample_neighbors",
            {"Row": [row], "Col_Ptr": [colptr], "X": [nodes], "Eids": [eids]},
            {"Out": 1, "Out_Count": 1, "Out_Eids": 1},
            {"sample_size": ss, "return_eids": True, "flag_perm_buffer": False},
            out_dtypes={"Out": "int64", "Out_Count": "int32", "Out_Eids": "int64"})
    run("graph_sample_neighbors no eids", "graph_sample_neighbors",
        {"Row": [row], "Col_Ptr": [colptr], "X": [nodes]},
        {"Out": 1, "Out_Count": 1, "Out_Eids": 1},
        {"sample_size": 5, "return_eids": False, "flag_perm_buffer": False},
        out_dtypes={"Out": "int64", "Out_Count": "int32", "Out_Eids": "int64"})
    w = np.linspace(0.5, 2, 13).astype(np.float32)
    for ss in (-1, 5, 2):
        run(f"weighted_sample_neighbors sample_size={ss}", "weighted_sample_neighbors",
            {"row": [row], "colptr": [colptr], "edge_weight": [w], "input_nodes": [nodes], "eids": [eids]},
            {"out_neighbors": 1, "out_count": 1, "out_eids": 1},
            {"sample_size": ss, "return_eids": True},
            out_dtypes={"out_neighbors": "int64", "out_count": "int32", "out_eids": "int64"})
    which = which + ["khop:5"]
for arg in which:  # "khop:5,5": one multi-layer case per process (Paddle's kernel may abort it)
    if arg.startswith("khop:"):
        ss = [int(v) for v in arg[5:].split(",")]
        run(f"graph_khop_sampler sample_sizes={ss}", "graph_khop_sampler",
            {"Row": [row], "Col_Ptr": [colptr], "X": [nodes], "Eids": [eids]},
            {"Out_Src": 1, "Out_Dst": 1, "Sample_Index": 1, "Reindex_X": 1, "Out_Eids": 1},
            {"sample_sizes": ss, "return_eids": True},
            out_dtypes={k: "int64" for k in ("Out_Src", "Out_Dst", "Sample_Index", "Reindex_X", "Out_Eids")})
if "tdm" in which:
    # tree: node 0 padding; 1 root; 2,3 layer 1; 4..7 layer 2 leaves (items)
    info = np.array([[0, 0, 0, 0, 0], [0, 0, 0, 2, 3], [0, 1, 1, 4, 5], [0, 1, 1, 6, 7],
                     [10, 2, 2, 0, 0], [11, 2, 2, 0, 0], [12, 2, 3, 0, 0], [0, 2, 3, 0, 0]], np.int32)
    run("tdm_child", "tdm_child", {"X": [np.array([[1], [2], [3], [5], [0]], np.int64)], "TreeInfo": [info]},
        {"Child": 1, "LeafMask": 1}, {"child_nums": 2, "dtype": 2},
        out_dtypes={"Child": "int32", "LeafMask": "int32"})
    # Paddle checks node ids against layer_offset: ids are numbered like the Layer positions, 1-based
    travel = np.array([[1, 3], [1, 4], [2, 5], [2, 0]], np.int32)
    layer = np.array([1, 2, 3, 4, 5, 6], np.int32)
    for seed in (0, 7, 7):
        run(f"tdm_sampler seed={seed}", "tdm_sampler",
            {"X": [np.array([[0], [1], [2], [3]], np.int64)], "Travel": [travel], "Layer": [layer]},
            {"Out": 1, "Labels": 1, "Mask": 1},
            {"output_positive": True, "neg_samples_num_list": [1, 2], "layer_offset": [0, 2, 6],
             "seed": seed, "dtype": 2}, out_dtypes={"Out": "int32", "Labels": "int32", "Mask": "int32"})
if "misc" in which:
    for fix, seed in ((True, 5), (False, 0)):
        run(f"class_center_sample fix_seed={fix} seed={seed}", "class_center_sample",
            {"Label": [i64(3, 8, 3, 1, 15)]}, {"RemappedLabel": 1, "SampledLocalClassCenter": 1},
            {"num_classes": 20, "num_samples": 8, "ring_id": 0, "rank": 0, "nranks": 1, "fix_seed": fix,
             "seed": seed}, out_dtypes={"RemappedLabel": "int64", "SampledLocalClassCenter": "int64"})
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    for step, ramp in ((np.array([5.0], np.float32), 2.0), (np.array([1.0], np.float32), 2.0),
                       (np.array([5.0], np.float32), -1.0)):
        run(f"dgc_clip_by_norm step={step[0]} rampup={ramp} (Out fresh)", "dgc_clip_by_norm",
            {"X": [x], "current_step": [step]}, {"Out": 1}, {"max_norm": 1.5, "rampup_begin_step": ramp})
        run(f"dgc_clip_by_norm step={step[0]} rampup={ramp} (Out=X)", "dgc_clip_by_norm",
            {"X": [x], "current_step": [step]}, {"Out": 1}, {"max_norm": 1.5, "rampup_begin_step": ramp},
            alias={"Out": "X"})
    p = np.linspace(-1, 1, 6).astype(np.float32).reshape(2, 3)
    g = np.linspace(0.3, -0.2, 6).astype(np.float32).reshape(2, 3)
    v = np.linspace(0.1, 0.2, 6).astype(np.float32).reshape(2, 3)
    lr = np.array([0.1], np.float32)
    for step, nr, ramp in ((1.0, 2.0, 3.0), (5.0, 2.0, 3.0), (5.0, 1.0, 3.0), (5.0, 2.0, -1.0)):
        run(f"dgc_momentum step={step} nranks={nr} rampup={ramp}", "dgc_momentum",
            {"Param": [p], "Grad": [g], "Velocity": [v], "LearningRate": [lr],
             "current_step": [np.array([step], np.float32)], "nranks": [np.array([nr], np.float32)]},
            {"ParamOut": 1, "VelocityOut": 1, "Grad_out": 1},
            {"mu": 0.9, "use_nesterov": False, "rampup_begin_step": ramp},
            alias={"ParamOut": "Param", "VelocityOut": "Velocity", "Grad_out": "Grad"})
    run("distributed_fused_lamb_init", "distributed_fused_lamb_init",
        {"Param": [p], "Grad": [g]},
        {k: 1 for k in ("FP32FusedParam", "FP32FusedGrad", "FP16FusedParam", "FP16FusedGrad", "Moment1", "Moment2",
                        "Beta1Pow", "Beta2Pow", "FusedParamOffsets", "FP32ShardFusedParamOffsets",
                        "FP16ShardFusedParamOffsets", "ParamInfo", "ParamOrder", "ParamOut", "MasterParamOut",
                        "GradOut", "GlobalScale", "Step")},
        {"beta1": 0.9, "beta2": 0.99, "apply_weight_decay": [1], "alignment": 128, "rank": 0, "nranks": 1})
    run("set", "set", {"x": [np.zeros((2, 3), np.float32)], "source": [np.arange(6, dtype=np.float32)]},
        {"out": 1}, {"dims": [2, 3], "stride": [3, 1], "offset": 0})
if "set" in which:
    src = np.arange(12, dtype=np.float32)
    for dims, stride, offset in (([2, 3], [1, 2], 0), ([2, 2], [3, 1], 4), ([2, 2], [3, 1], 8), ([3], [4], 0)):
        run(f"set dims={dims} stride={stride} offset={offset}", "set",
            {"x": [np.zeros((2, 3), np.float32)], "source": [src]}, {"out": 1},
            {"dims": dims, "stride": stride, "offset": offset})
        run(f"set dims={dims} stride={stride} offset={offset} (out=x)", "set",
            {"x": [np.zeros((2, 3), np.float32)], "source": [src]}, {"out": 1},
            {"dims": dims, "stride": stride, "offset": offset}, alias={"out": "x"})


def run_sr(title, op, rows, height, value, outs, attrs, extra=None):
    """X a SelectedRows set in the scope (no feed); SelectedRows outputs read back from the scope."""
    main = paddle.static.Program()
    scope = paddle.static.Scope()
    try:
        with paddle.static.program_guard(main), paddle.static.scope_guard(scope):
            block = main.global_block()
            x = block.create_var(name="sr_x", type=paddle.base.core.VarDesc.VarType.SELECTED_ROWS,
                                 dtype="float32", shape=[height, value.shape[1]], persistable=True)
            sr = scope.var("sr_x").get_selected_rows()
            sr.set_height(height)
            sr.set_rows(list(rows))
            sr.get_tensor().set(value, paddle.CPUPlace())
            ins = {"X": [x]}
            feed = {}
            for slot, a in (extra or {}).items():
                v = paddle.static.data(f"in_{slot}", list(a.shape), str(a.dtype))
                feed[v.name] = a
                ins[slot] = [v]
            ov = {}
            for slot, kind in outs.items():
                if kind == "X":
                    ov[slot] = [x]
                elif kind == "sr":
                    ov[slot] = [block.create_var(name=f"out_{slot}", type=paddle.base.core.VarDesc.VarType.SELECTED_ROWS,
                                                 dtype="float32", persistable=True)]
                else:
                    ov[slot] = [block.create_var(name=f"out_{slot}", dtype="float32", persistable=True)]
            block.append_op(type=op, inputs=ins, outputs=ov, attrs=attrs)
            EXE.run(main, feed=feed)
            print(f"== {title}: OK")
            for slot, kind in outs.items():
                var = scope.find_var(ov[slot][0].name)
                if kind in ("sr", "X") and ov[slot][0].type == paddle.base.core.VarDesc.VarType.SELECTED_ROWS:
                    o = var.get_selected_rows()
                    print(f"   {slot}: SelectedRows height={o.height()} rows={list(o.rows())} "
                          f"value={np.array(o.get_tensor()).tolist()}")
                else:
                    print(f"   {slot}: {np.array(var.get_tensor()).tolist()}")
    except Exception as e:  # noqa: BLE001
        report_error(title, e)
    sys.stdout.flush()


if "sr2" in which:
    val = np.arange(8, dtype=np.float32).reshape(4, 2)
    run_sr("get_tensor_from_selected_rows (SelectedRows X, rows [4,1,4,0], height 6)",
           "get_tensor_from_selected_rows", [4, 1, 4, 0], 6, val, {"Out": "dense"}, {})
    run_sr("merge_selected_rows (SelectedRows X, rows [4,1,4,0], height 6)",
           "merge_selected_rows", [4, 1, 4, 0], 6, val, {"Out": "sr"}, {})
if "sr" in which:
    run("get_tensor_from_selected_rows (dense X)", "get_tensor_from_selected_rows",
        {"X": [np.arange(6, dtype=np.float32).reshape(3, 2)]}, {"Out": 1}, {})
    run("merge_selected_rows (dense X)", "merge_selected_rows",
        {"X": [np.arange(6, dtype=np.float32).reshape(3, 2)]}, {"Out": 1}, {})
    p = np.linspace(-1, 1, 12).astype(np.float32).reshape(4, 3)
    v = np.linspace(0.1, 0.2, 12).astype(np.float32).reshape(4, 3)
    for axis, idx, gshape in ((0, i64(2, 0, 2), (3, 3)), (1, i64(1, 1), (4, 2))):
        g = np.linspace(0.3, -0.2, int(np.prod(gshape))).astype(np.float32).reshape(gshape)
        run(f"sparse_momentum axis={axis}", "sparse_momentum",
            {"Param": [p], "Grad": [g], "Velocity": [v], "Index": [idx], "LearningRate": [np.array([0.1], np.float32)]},
            {"ParamOut": 1, "VelocityOut": 1}, {"mu": 0.9, "axis": axis, "use_nesterov": axis == 1})
