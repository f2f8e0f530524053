"""Probe Paddle 3.3.1's CPU executor on the k4-io op types (issue #22): point-to-point and partial
collectives, read_file, decode_jpeg, faster_tokenizer. Each op runs alone in a one-op legacy program
with paddle.static.Executor(paddle.CPUPlace()) in one process; the script prints, per op, either
"RUNS" with the fetched values or the exact error Paddle raises (its kind and first message line).
The values it prints for read_file and faster_tokenizer are what tests/ops/test_io_read_file_tokenizer.py compares
pybackward's kernels with (testdata/kernels/io_ops.ref.json, written by this script).

    FLAGS_enable_pir_api=0 /path/to/paddle/python testdata/kernels/probe_k4-io.py > testdata/kernels/probe_k4-io.txt
"""
import json
import os
import pathlib
import re
import warnings

os.environ["FLAGS_enable_pir_api"] = "0"
os.environ.setdefault("GLOG_v", "0")
warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import paddle  # noqa: E402
from paddle.base import core  # noqa: E402

paddle.enable_static()
HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE.parent / "file_ops" / "io_ops"
VT = core.VarDesc.VarType


def _error(e: Exception) -> str:
    """Paddle's error kind and message, without the Python call stack it prepends."""
    text = str(e)
    for pattern in (r"(\w+Error|\w+Exception): (\S.*)", r"\((\w+)\) (\S.*)"):
        m = re.search(pattern, text)
        if m:
            return f"{m.group(1)}: {m.group(2).strip()}"
    return f"{type(e).__name__}: {text.strip().splitlines()[-1] if text.strip() else ''}"


def run(op_type, build, feed=None, scope=None):
    """Build a one-op program with build(block) -> fetch vars; run it on CPU."""
    main, start = paddle.static.Program(), paddle.static.Program()
    try:
        with paddle.static.program_guard(main, start):
            fetch = build(main.global_block())
        exe = paddle.static.Executor(paddle.CPUPlace())
        if scope is None:
            scope = core.Scope()
        with paddle.static.scope_guard(scope):
            out = exe.run(main, feed=feed or {}, fetch_list=fetch, scope=scope)
        return {"runs": True, "values": [np.asarray(o).tolist() for o in out],
                "shapes": [list(np.shape(o)) for o in out], "dtypes": [str(np.asarray(o).dtype) for o in out]}
    except Exception as e:  # noqa: BLE001 - the error is what we record
        return {"runs": False, "error": _error(e)}


def data(block, name, shape, dtype="float32"):
    return paddle.static.data(name, shape, dtype)


X = np.arange(6, dtype="float32").reshape(2, 3)
FEED = {"x": X}
P2P = {"ring_id": 0, "peer": 0}


def probes():
    res = {}

    def send(t, slot, attrs):
        def build(b):
            x = data(b, "x", [2, 3])
            outs = {}
            if t == "p_send_array":
                arr = b.create_var(name="arr", type=VT.DENSE_TENSOR_ARRAY, dtype="float32")
                i0 = paddle.zeros([1], "int64")
                b.append_op(type="write_to_array", inputs={"X": [x], "I": [i0]}, outputs={"Out": [arr]})
                x = arr
                outs = {"out": [b.create_var(name="o", dtype="float32")]}
            b.append_op(type=t, inputs={slot: [x]}, outputs=outs, attrs=attrs)
            return []
        return run(t, build, FEED)

    def recv(t, slot, attrs, array=False):
        def build(b):
            if array:
                o = b.create_var(name="o", type=VT.DENSE_TENSOR_ARRAY, dtype="float32")
            else:
                o = b.create_var(name="o", dtype="float32", shape=[2, 3])
            b.append_op(type=t, inputs={}, outputs={slot: [o]}, attrs=attrs)
            return [] if array else [o]
        return run(t, build)

    shape = {"dtype": int(VT.FP32), "out_shape": [2, 3]}
    res["p_send"] = send("p_send", "x", {**P2P, "dynamic_shape": False})
    res["p_send_array"] = send("p_send_array", "x", {**P2P, "dynamic_shape": False})
    res["send_v2"] = send("send_v2", "X", {**P2P, "use_calc_stream": True, "dynamic_shape": False})
    res["partial_send"] = send("partial_send", "X", {**P2P, "num": 1, "id": 0})
    res["p_recv"] = recv("p_recv", "out", {**P2P, **shape, "dynamic_shape": False})
    res["p_recv_array"] = recv("p_recv_array", "out", {**P2P, **shape}, array=True)
    res["recv_v2"] = recv("recv_v2", "Out", {**P2P, **shape, "use_calc_stream": True, "dynamic_shape": False})
    res["partial_recv"] = recv("partial_recv", "Out", {**P2P, **shape, "num": 1, "id": 0})

    def allgather(nranks):
        def build(b):
            x = data(b, "x", [2, 3])
            o = b.create_var(name="o", dtype="float32")
            b.append_op(type="partial_allgather", inputs={"X": [x]}, outputs={"Out": [o]},
                        attrs={"nranks": nranks, "rank": 0, "ring_id": 0})
            return [o]
        return build
    res["partial_allgather"] = run("partial_allgather", allgather(1), FEED)
    res["partial_allgather|nranks=2"] = run("partial_allgather", allgather(2), FEED)

    def barrier(b):
        x = data(b, "x", [2, 3])
        o = b.create_var(name="o", dtype="float32")
        b.append_op(type="fetch_barrier", inputs={"X": [x]}, outputs={"Out": [o]},
                    attrs={"trainer_id": 0, "endpoints": ["127.0.0.1:6170"]})
        return [o]      # fetched as None: the op never writes it
    res["fetch_barrier"] = run("fetch_barrier", barrier, FEED)

    def read_file(name):
        def build(b):
            o = b.create_var(name="o", dtype="uint8")
            b.append_op(type="read_file", inputs={}, outputs={"Out": [o]},
                        attrs={"filename": str(DATA / name)})
            return [o]
        return build
    res["read_file"] = run("read_file", read_file("bytes.bin"))
    res["read_file|empty"] = run("read_file", read_file("empty.bin"))
    res["read_file|jpeg"] = run("read_file", read_file("tiny.jpg"))
    res["read_file|missing"] = run("read_file", read_file("no_such_file.bin"))

    jpeg = np.frombuffer((DATA / "tiny.jpg").read_bytes(), dtype=np.uint8)

    def decode(mode):
        def build(b):
            x = data(b, "x", [len(jpeg)], "uint8")
            o = b.create_var(name="o", dtype="uint8")
            b.append_op(type="decode_jpeg", inputs={"X": [x]}, outputs={"Out": [o]}, attrs={"mode": mode})
            return [o]
        return build
    res["decode_jpeg"] = run("decode_jpeg", decode("unchanged"), {"x": jpeg})
    res["decode_jpeg|rgb"] = run("decode_jpeg", decode("rgb"), {"x": jpeg})

    for case, spec in TOKENIZER_CASES.items():
        res["faster_tokenizer|" + case] = tokenizer(spec)
    return res


VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "quick", "brown", "fox", "jump", "##s",
         "##ed", "over", "lazy", "dog", ",", ".", "!", "un", "##aff", "##able", "中", "国", "a", "##b",
         "##c", "é", "hello", "world", "h", "##e", "##l", "##o", "'", "s"]
TEXTS = ["The quick brown fox jumps over the lazy dog.", "unaffable, hello world!", "中国 人 hello",
         "  \t ", "Héllo\u00a0WORLD\x07 fox's", "abc abd jumped"]
PAIRS = ["the dog", "fox", "", "world", "quick brown", "!!"]
TOKENIZER_CASES = {
    "plain": {"text": TEXTS, "attrs": {}},
    "lower": {"text": TEXTS, "attrs": {"do_lower_case": True}},
    "pair": {"text": TEXTS, "pair": PAIRS, "attrs": {"do_lower_case": True}},
    "max_len": {"text": TEXTS, "pair": PAIRS, "attrs": {"do_lower_case": True, "max_seq_len": 7}},
    "pad": {"text": TEXTS, "attrs": {"do_lower_case": True, "max_seq_len": 9, "pad_to_max_seq_len": True}},
    "split": {"text": ["hello", "中国x", ""], "attrs": {"is_split_into_words": True, "max_seq_len": 5}},
    "pad_id_3": {"text": ["the fox", "the quick brown fox"], "vocab_shift": 3, "attrs": {}},
    "pad_id_3_pad": {"text": ["the fox", "", "the quick brown fox"], "vocab_shift": 3,
                     "attrs": {"max_seq_len": 5, "pad_to_max_seq_len": True}},
    "odd_chars": {"text": ["x" * 101, "h" * 100, "hellox hel\u200blo", "\u0130\u00c9 \u00b6\u00a7 \u4e2d\u56fd\u4eba",
                           "\ufffd\x00fox\u3000dog\u2014the", "ABC\u00bfabc", "foxes jumpsed"],
                  "attrs": {"do_lower_case": True}},
    "pair_truncate": {"text": ["the quick brown fox", "fox", "the", "the dog"],
                      "pair": ["fox", "the quick brown fox jumps", "dog", ""],
                      "attrs": {"max_seq_len": 4}},
    "pair_min": {"text": ["the quick", "fox"], "pair": ["dog dog", "the"], "attrs": {"max_seq_len": 3}},
    "single_min": {"text": ["the quick", "fox"], "attrs": {"max_seq_len": 2, "pad_to_max_seq_len": True}},
    "pair_pad": {"text": ["the", "   "], "pair": ["dog", "fox"], "attrs": {"max_seq_len": 8, "pad_to_max_seq_len": True}},
    "split_pair": {"text": ["hel", "a"], "pair": ["dog", "fox"], "attrs": {"is_split_into_words": True}},
    "empty_batch": {"text": [], "attrs": {}},
}


def tokenizer(spec):
    vocab = {w: (i + spec.get("vocab_shift", 0)) % len(VOCAB) for i, w in enumerate(VOCAB)}
    scope = core.Scope()
    scope.var("vocab").set_vocab(vocab)
    scope.var("text").set_string_list(spec["text"])
    if "pair" in spec:
        scope.var("pair").set_string_list(spec["pair"])

    def build(b):
        v = b.create_var(name="vocab", type=VT.VOCAB, persistable=True)
        t = b.create_var(name="text", type=VT.STRINGS, persistable=True)
        ins = {"Vocab": [v], "Text": [t]}
        if "pair" in spec:
            ins["TextPair"] = [b.create_var(name="pair", type=VT.STRINGS, persistable=True)]
        ids = b.create_var(name="ids", dtype="int64")
        seg = b.create_var(name="seg", dtype="int64")
        attrs = {"do_lower_case": False, "is_split_into_words": False, "max_seq_len": 0,
                 "pad_to_max_seq_len": False, **spec["attrs"]}
        b.append_op(type="faster_tokenizer", inputs=ins, outputs={"InputIds": [ids], "SegmentIds": [seg]},
                    attrs=attrs)
        return [ids, seg]
    out = run("faster_tokenizer", build, scope=scope)
    out["vocab"] = vocab
    return out


if __name__ == "__main__":
    results = probes()
    for k, v in results.items():
        if v["runs"]:
            print(f"{k}: RUNS -> {json.dumps(v['values'])[:300]}")
        else:
            print(f"{k}: {v['error']}")
    refs = {k: v for k, v in results.items() if k.startswith(("read_file", "faster_tokenizer", "decode_jpeg",
                                                                "partial_allgather", "fetch_barrier"))}
    refs["tokenizer_cases"] = TOKENIZER_CASES
    (HERE / "io_ops.ref.json").write_text(json.dumps(refs, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
