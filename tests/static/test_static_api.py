"""pybackward.static piece by piece: names, vars, operators, parameters,
initializers, programs, running."""
from __future__ import annotations

import math

import numpy as np
import pytest

import pybackward
from pybackward import static
from pybackward.static import initializer as init
from pybackward.static import unique_name
from test_static_support import STATIC_DATA

F = static.nn.functional


@pytest.fixture
def progs():
    main, startup = static.Program(), static.Program()
    with static.program_guard(main, startup):
        yield main, startup


def _types(prog):
    return [op.type for op in prog.global_block().ops]


# --------------------------------------------------------------------------
# names
# --------------------------------------------------------------------------
def test_unique_name_generator_and_guard():
    g = unique_name.UniqueNameGenerator()
    assert [g("fc"), g("fc"), g("conv2d"), g("fc")] == ["fc_0", "fc_1", "conv2d_0", "fc_2"]
    with unique_name.guard():
        a = unique_name.generate("fc")
    with unique_name.guard():
        b = unique_name.generate("fc")
    with unique_name.guard("A"):
        c = unique_name.generate("fc")
    with unique_name.guard(b"B"):
        d = unique_name.generate("fc")
    assert (a, b, c, d) == ("fc_0", "fc_0", "Afc_0", "Bfc_0")
    clone = g.clone()
    assert clone("fc") == "fc_3" and g("fc") == "fc_3"


def test_layer_names_come_from_the_programs_generator(progs):
    main, _ = progs
    x = static.data("x", [None, 4])
    a = static.nn.fc(x, 3)
    with unique_name.guard():  # the global namespace only, as in Paddle 3.3.1
        b = static.nn.fc(x, 3)
    c = static.nn.fc(x, 3, name="my_fc")
    m = static.mean(c)
    t = (a + b) * 2.0 - c
    assert (a.name, b.name, c.name, m.name) == ("fc_0.tmp_1", "fc_1.tmp_1", "my_fc.tmp_1",
                                                "mean_0.tmp_0")
    assert t.name == "tmp_2"
    assert [p.name for p in main.all_parameters()] == [
        "fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0", "my_fc.w_0", "my_fc.b_0"]
    with static.program_guard(static.Program(), static.Program()):
        assert static.nn.fc(static.data("x", [None, 4]), 3).name == "fc_0.tmp_1"


def test_fc_with_activation_names_its_third_tmp(progs):
    x = static.data("x", [None, 4])
    assert static.nn.fc(x, 3, activation="relu").name == "fc_0.tmp_2"
    assert static.nn.fc(x, 3, bias_attr=False).name == "fc_1.tmp_0"


# --------------------------------------------------------------------------
# data and vars
# --------------------------------------------------------------------------
def test_data(progs):
    main, _ = progs
    x = static.data("x", [None, 3, -1], "int64")
    assert x.shape == (-1, 3, -1) and x.dtype == np.int64 and x.stop_gradient
    assert x.desc.need_check_feed and not x.persistable and x.lod_level == 0
    assert static.data("y", [2]).dtype == np.float32
    with pytest.raises(ValueError, match="Only -1"):
        static.data("z", [-2, 3])
    with pytest.raises(TypeError):
        static.data("z", 3)


def test_stop_gradient_passes_through_ops_whose_inputs_all_stop_it(progs):
    x = static.data("x", [None, 4])
    assert F.relu(x).stop_gradient          # every input stops the gradient
    h = static.nn.fc(x, 4)                  # the weight does not
    assert not h.stop_gradient
    h.stop_gradient = True
    assert h.desc.stop_gradient
    assert F.sigmoid(h).stop_gradient


def test_variables_keep_identity_through_append_backward(progs):
    main, _ = progs
    x = static.data("x", [None, 4])
    h = static.nn.fc(x, 4)
    loss = static.mean(h)
    before = main.global_block().var(h.name)
    static.append_backward(loss)
    assert main.global_block().var(h.name) is before is h
    assert h.desc is main.global_block().desc.vars[[v.name for v in main.global_block().desc.vars].index(h.name)]
    assert h in {h} and hash(h) == object.__hash__(h)
    assert str(h) == "var fc_0.tmp_1 : DENSE_TENSOR.shape(-1, 4).dtype(float32).stop_gradient(False)"
    w = main.var("fc_0.w_0")
    assert isinstance(w, static.Parameter)
    assert str(w).startswith("persist trainable param fc_0.w_0 : DENSE_TENSOR.shape(4, 4)")


def test_desc_lists_vars_sorted_parameters_in_creation_order(progs):
    main, _ = progs
    x = static.data("x", [None, 4])
    static.nn.fc(static.nn.fc(x, 4, name="zz"), 2, name="aa")
    names = [v.name for v in main.desc.blocks[0].vars]
    assert names == sorted(names)
    assert [p.name for p in main.global_block().all_parameters()] == ["zz.w_0", "zz.b_0",
                                                                      "aa.w_0", "aa.b_0"]
    assert [v.name for v in main.list_vars()][:3] == ["x", "zz.w_0", "zz.tmp_0"]


# --------------------------------------------------------------------------
# operators
# --------------------------------------------------------------------------
def _last(prog):
    op = prog.global_block().ops[-1]
    return op.type, op.all_attrs


def test_variable_with_scalar_is_one_scale_op(progs):
    main, _ = progs
    x = static.data("x", [None, 4])
    for expr, scale, bias in ((lambda: x + 2.0, 1.0, 2.0), (lambda: x - 2, 1.0, -2.0),
                              (lambda: 3 * x, 3.0, 0.0), (lambda: x / 4.0, 0.25, 0.0),
                              (lambda: 1.0 - x, -1.0, 1.0), (lambda: -x, -1.0, 0.0),
                              (lambda: 2.0 + x, 1.0, 2.0)):
        out = expr()
        t, attrs = _last(main)
        assert t == "scale" and attrs["scale"] == scale and attrs["bias"] == bias
        assert out.name.startswith("tmp_") and out.shape == (-1, 4)
        assert not out.desc.HasField("persistable")  # Paddle leaves it unset on tmp_N


def test_variable_with_variable_ops(progs):
    main, _ = progs
    x = static.data("x", [None, 4])
    w = static.data("w", [4, 3])
    b = static.data("b", [4])
    for expr, op_type in ((lambda: x + b, "elementwise_add"), (lambda: x - b, "elementwise_sub"),
                          (lambda: x * b, "elementwise_mul"), (lambda: x / b, "elementwise_div"),
                          (lambda: x ** b, "elementwise_pow")):
        out = expr()
        t, attrs = _last(main)
        assert t == op_type and attrs["axis"] == -1 and out.shape == (-1, 4)
    out = x @ w
    t, attrs = _last(main)
    assert t == "matmul_v2" and attrs["trans_x"] is False and attrs["trans_y"] is False
    assert "axis" not in attrs and out.shape == (-1, 3)


def test_reversed_and_powered_scalars_make_a_constant(progs):
    main, _ = progs
    x = static.data("x", [None, 4])
    _ = 2.0 / x
    ops = main.global_block().ops[-2:]
    assert [o.type for o in ops] == ["fill_constant_batch_size_like", "elementwise_div"]
    assert ops[0].attr("shape") == [-1, 4] and ops[0].attr("value") == 2.0
    assert ops[1].input("X") == [ops[0].output("Out")[0]]
    _ = x ** 2
    ops = main.global_block().ops[-2:]
    assert [o.type for o in ops] == ["fill_constant", "elementwise_pow"]
    assert ops[0].attr("shape") == [] and main.var(ops[0].output("Out")[0]).stop_gradient
    y = static.data("y", [2, 3])
    _ = 1.0 / y
    assert _types(main)[-2:] == ["fill_constant", "elementwise_div"]
    assert main.global_block().ops[-2].attr("shape") == [2, 3]


def test_int_variable_meets_float_scalar_through_cast(progs):
    main, _ = progs
    i = static.data("i", [3], "int64")
    out = i * 0.5
    assert _types(main)[-2:] == ["cast", "scale"] and out.dtype == np.float32
    with pytest.raises(TypeError, match="different data type"):
        _ = static.data("f", [3]) @ static.data("d", [3], "float64")


def test_shape_inference_broadcast_and_mismatch(progs):
    x = static.data("x", [None, 4, 5])
    y = static.data("y", [4, 5])
    assert (x + y).shape == (-1, 4, 5)
    assert (x + static.data("s", [], "float32")).shape == (-1, 4, 5)
    assert static.matmul(x, y, transpose_y=True).shape == (-1, 4, 4)


# --------------------------------------------------------------------------
# parameters, ParamAttr, initializers
# --------------------------------------------------------------------------
def test_shared_parameter_is_created_and_initialised_once(progs):
    main, startup = progs
    x = static.data("x", [None, 4])
    attr = static.ParamAttr(name="shared")
    static.nn.fc(x, 4, weight_attr=attr, bias_attr=False)
    static.nn.fc(x, 4, weight_attr=attr, bias_attr=False)
    assert [p.name for p in main.all_parameters()] == ["shared"]
    assert _types(startup) == ["uniform_random"]
    assert [o.input("Y") for o in main.global_block().ops] == [["shared"], ["shared"]]


def test_non_trainable_parameter_gets_no_gradient(progs):
    main, _ = progs
    x = static.data("x", [None, 4])
    h = static.nn.fc(x, 4, weight_attr=static.ParamAttr(name="frozen", trainable=False))
    loss = static.mean(h)
    frozen = main.var("frozen")
    assert frozen.stop_gradient and not frozen.trainable and frozen.is_parameter
    pairs = static.append_backward(loss)
    assert [p.name for p, _ in pairs] == ["fc_0.b_0"]
    assert not main.global_block().has_var("frozen@GRAD")


def test_parameter_attrs_forms(progs):
    main, _ = progs
    x = static.data("x", [None, 4])
    static.nn.fc(x, 2, weight_attr="named_w", bias_attr=init.Constant(0.5))
    assert [p.name for p in main.all_parameters()] == ["named_w", "fc_0.b_0"]
    with pytest.raises(TypeError):
        static.ParamAttr(trainable="yes")
    with pytest.raises(ValueError):
        static.ParamAttr(name="")


def _startup_op(startup, name):
    return next(op for op in startup.global_block().ops if op.output("Out") == [name])


@pytest.mark.parametrize("make,op_type,check", [
    (lambda: init.XavierUniform(), "uniform_random",
     lambda a: math.isclose(a["max"], math.sqrt(6 / (6 + 5)), rel_tol=1e-6) and a["min"] == -a["max"]),
    (lambda: init.XavierNormal(gain=2.0), "gaussian_random",
     lambda a: math.isclose(a["std"], 2 * math.sqrt(2 / 11), rel_tol=1e-6)),
    (lambda: init.KaimingUniform(), "uniform_random",
     lambda a: math.isclose(a["max"], math.sqrt(2) * math.sqrt(3 / 6), rel_tol=1e-6)),
    (lambda: init.KaimingNormal(mode="fan_out"), "gaussian_random",
     lambda a: math.isclose(a["std"], math.sqrt(2) / math.sqrt(5), rel_tol=1e-6)),
    (lambda: init.KaimingNormal(nonlinearity="leaky_relu", negative_slope=0.2), "gaussian_random",
     lambda a: math.isclose(a["std"], math.sqrt(2 / 1.04) / math.sqrt(6), rel_tol=1e-6)),
    (lambda: init.Normal(1.0, 0.1), "gaussian_random",
     lambda a: a["mean"] == 1.0 and math.isclose(a["std"], 0.1, rel_tol=1e-6)),
    (lambda: init.TruncatedNormal(0.0, 0.5, a=-1.0, b=1.0), "truncated_gaussian_random",
     lambda a: a["a"] == -1.0 and a["b"] == 1.0 and a["std"] == 0.5),
    (lambda: init.Uniform(-0.5, 0.25), "uniform_random",
     lambda a: a["min"] == -0.5 and a["max"] == 0.25),
    (lambda: init.Constant(3.0), "fill_constant",
     lambda a: a["value"] == 3.0 and a["str_value"] == "3.0"),
])
def test_initializers(progs, make, op_type, check):
    main, startup = progs
    startup.random_seed = 7
    x = static.data("x", [None, 6])
    static.nn.fc(x, 5, weight_attr=make(), bias_attr=False)
    op = _startup_op(startup, "fc_0.w_0")
    assert op.type == op_type and op.attr("shape") == [6, 5]
    assert check(op.all_attrs)
    if op_type != "fill_constant":
        assert op.attr("seed") == 7


def test_compute_fans():
    class V:
        def __init__(self, shape):
            self.shape = shape
    fans = init.Initializer()._compute_fans
    assert fans(V(())) == (1, 1) and fans(V((7,))) == (7, 7) and fans(V((3, 4))) == (3, 4)
    assert fans(V((8, 3, 5, 5))) == (75, 200)


def test_default_initializers_of_layers(progs):
    main, startup = progs
    img = static.data("img", [None, 3, 8, 8])
    c = static.nn.conv2d(img, 4, 3)
    static.nn.batch_norm(c)
    static.nn.layer_norm(c)
    static.nn.embedding(static.data("ids", [None, 2], "int64"), size=[10, 4])
    got = {op.output("Out")[0]: (op.type, op.all_attrs) for op in startup.global_block().ops}
    assert got["conv2d_0.w_0"][0] == "gaussian_random"
    assert math.isclose(got["conv2d_0.w_0"][1]["std"], math.sqrt(2 / 27), rel_tol=1e-6)
    assert got["conv2d_0.b_0"][0] == "fill_constant" and got["conv2d_0.b_0"][1]["value"] == 0.0
    assert [got[f"batch_norm_0.{n}"][1]["value"] for n in ("w_0", "b_0", "w_1", "w_2")] == \
        [1.0, 0.0, 0.0, 1.0]
    assert [got[f"layer_norm_0.{n}"][1]["value"] for n in ("w_0", "b_0")] == [1.0, 0.0]
    emb = got["embedding_0.w_0"]
    assert emb[0] == "uniform_random" and math.isclose(emb[1]["max"], math.sqrt(6 / 14), rel_tol=1e-6)
    mean, var = main.var("batch_norm_0.w_1"), main.var("batch_norm_0.w_2")
    assert mean.stop_gradient and var.stop_gradient and not mean.trainable


# --------------------------------------------------------------------------
# layers: errors as Paddle raises them
# --------------------------------------------------------------------------
def test_layer_argument_errors(progs):
    x = static.data("x", [None, 4])
    with pytest.raises(TypeError):
        static.nn.fc(static.data("i", [None, 4], "int64"), 3)
    with pytest.raises(TypeError):
        static.nn.embedding(x, size=[10, 3])
    img = static.data("img", [None, 3, 8, 8])
    with pytest.raises(ValueError, match="divisible"):
        static.nn.conv2d(img, 4, 3, groups=2)
    with pytest.raises(ValueError, match="Input size should be 4"):
        static.nn.conv2d(x, 4, 3)
    with pytest.raises(ValueError):
        F.dropout(x, p=1.5)
    with pytest.raises(ValueError, match="Expected input_dims"):
        F.cross_entropy(x, static.data("lab", [None, 1, 1, 1], "int64"))


def test_depthwise_conv_without_cudnn(progs):
    main, _ = progs
    img = static.data("img", [None, 4, 8, 8])
    out = static.nn.conv2d(img, 8, 3, groups=4, use_cudnn=False, act="relu")
    assert _types(main) == ["depthwise_conv2d", "elementwise_add", "relu"]
    assert main.var("depthwise_conv2d_0.w_0").shape == (8, 1, 3, 3) and out.shape == (-1, 8, 6, 6)


def test_conv_activation_carries_use_cudnn(progs):
    main, _ = progs
    static.nn.conv2d(static.data("img", [None, 3, 8, 8]), 4, 3, act="relu")
    assert main.global_block().ops[-1].attr("use_cudnn") is True


# --------------------------------------------------------------------------
# programs
# --------------------------------------------------------------------------
def test_program_guard_and_defaults():
    main, startup = static.Program(), static.Program()
    before = static.default_main_program()
    with static.program_guard(main, startup):
        assert static.default_main_program() is main
        assert static.default_startup_program() is startup
    assert static.default_main_program() is before
    with pytest.raises(TypeError):
        with static.program_guard("main"):
            pass


def test_program_text_and_random_seed(progs):
    main, _ = progs
    assert main.random_seed == 0
    main.random_seed = 5
    assert main.random_seed == 5
    x = static.data("x", [None, 4])
    F.dropout(static.nn.fc(x, 4), 0.3)
    text = str(main)
    assert "mul(X=x, Y=fc_0.w_0)" in text and "dropout" in text
    assert main.to_string(True) == text
    assert "op_callstack" in main.to_string(True, with_details=True)
    assert main.global_block().ops[-1].attr("seed") == 5
    assert main.global_block().ops[-1].attr("fix_seed") is True


def test_clone(progs):
    main, _ = progs
    x = static.data("x", [None, 3, 4, 4])
    h = static.nn.batch_norm(x)
    loss = static.mean(F.dropout(h, 0.5))
    static.append_backward(loss)
    plain = main.clone()
    assert plain.desc == main.desc and plain is not main
    assert [p.name for p in plain.all_parameters()] == [p.name for p in main.all_parameters()]
    assert plain.appending_grad_times == 1 and not plain.var("batch_norm_0.w_1").trainable
    test = main.clone(for_test=True)
    types = _types(test)
    assert types == ["batch_norm", "dropout", "reduce_mean"]
    assert all(op.attr("is_test") for op in test.global_block().ops if op.has_attr("is_test"))
    assert "ReserveSpace" not in test.global_block().ops[0].output_names
    assert not any(n.endswith("@GRAD") for n in test.global_block().vars)
    assert len(_types(main)) > 3   # the original keeps its backward section


def test_parse_from_string_is_pauldes_parse(progs):
    data = (STATIC_DATA / "doc_append_backward" / "main.pb").read_bytes()
    prog = static.Program.parse_from_string(data)
    assert isinstance(prog, static.Program)
    assert [p.name for p in prog.all_parameters()] == ["embedding_0.w_0", "my_fc.b_0", "my_fc.w_0"]
    other = pybackward.load(STATIC_DATA / "doc_append_backward" / "main.pb")
    a = static.append_backward(prog.var("mean_0.tmp_0"))
    b = pybackward.append_backward(other.var("mean_0.tmp_0"))
    assert [(p.name, g.name) for p, g in a] == [(p.name, g.name) for p, g in b]
    assert prog.desc == other.desc


def test_save_and_load_round_trip(progs, tmp_path):
    main, _ = progs
    static.mean(static.nn.fc(static.data("x", [None, 4]), 2))
    pybackward.save(main, tmp_path / "main.pb")
    assert (tmp_path / "main.pb").read_bytes() == main.desc.SerializeToString()
    assert pybackward.load(tmp_path / "main.pb").desc == main.desc


def test_pybackward_append_backward_takes_builder_programs(progs):
    main, _ = progs
    loss = static.mean(static.nn.fc(static.data("x", [None, 4]), 2))
    pairs = pybackward.append_backward(loss)
    assert [(p.name, g.name) for p, g in pairs] == [("fc_0.w_0", "fc_0.w_0@GRAD"),
                                                     ("fc_0.b_0", "fc_0.b_0@GRAD")]


# --------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------
def test_executor_runs_startup_then_main_in_the_global_scope():
    main, startup = static.Program(), static.Program()
    startup.random_seed = 3
    with static.program_guard(main, startup):
        x = static.data("x", [None, 4])
        out = static.nn.fc(x, 2, activation="relu")
        loss = static.mean(out)
        static.append_backward(loss)
    scope = static.Scope()
    with static.scope_guard(scope):
        exe = static.Executor(static.CPUPlace())
        exe.run(startup)
        w = scope["fc_0.w_0"].copy()
        feed = {"x": np.ones((2, 4), "float32")}
        lv, gw = exe.run(main, feed=feed, fetch_list=[loss, "fc_0.w_0@GRAD"])
    ref = np.maximum(feed["x"] @ w + scope["fc_0.b_0"], 0)
    np.testing.assert_allclose(lv, ref.mean(), rtol=1e-6)
    assert gw.shape == (4, 2)
    again = static.Scope()
    static.Executor().run(startup, scope=again)
    assert np.array_equal(again["fc_0.w_0"], w)   # fixed seed: same values every run


def test_clone_for_test_makes_dropout_deterministic():
    main, startup = static.Program(), static.Program()
    with static.program_guard(main, startup):
        x = static.data("x", [None, 8])
        y = F.dropout(x, 0.5)
    test = main.clone(for_test=True)
    feed = {"x": np.ones((3, 8), "float32")}
    exe = static.Executor()
    (train_out,) = exe.run(main, feed=feed, fetch_list=[y], scope=static.Scope())
    (test_out,) = exe.run(test, feed=feed, fetch_list=[y.name], scope=static.Scope())
    assert set(np.unique(train_out)) <= {0.0, 2.0}
    np.testing.assert_array_equal(test_out, feed["x"])


def test_op_slots_with_long_or_non_ascii_names_are_written_exactly(progs):
    # fill_op_desc encodes the type and slots itself (one ASCII str when it
    # can): long and non-ASCII names take the exact per-name encoding.
    from pybackward._proto import framework_pb2 as pb
    main, _ = progs
    block = main.global_block()
    names = ["x" * 127, "y" * 200, "größe", "z"]
    for n in names:
        block.create_var(name=n, shape=[2], dtype="float32")
    op = block.append_op(type="sum", inputs={"X": names[:3]}, outputs={"Out": [names[3]]})
    expected = pb.OpDesc()
    expected.type = "sum"
    expected.inputs.add(parameter="X", arguments=names[:3])
    expected.outputs.add(parameter="Out", arguments=[names[3]])
    assert list(op.desc.inputs) == list(expected.inputs)
    assert list(op.desc.outputs) == list(expected.outputs) and op.desc.type == "sum"
    assert op.input_arg_names == tuple(names[:3]) and op.output_arg_names == (names[3],)


def test_creation_op_with_another_shape_still_sets_its_output_dims(progs):
    # An initializer's op skips shape inference (its shape attr is its var's
    # dims); any other shape is still written to the output.
    main, _ = progs
    block = main.global_block()
    v = block.create_var(name="c", shape=[3, 4], dtype="float32")
    block.append_op(type="fill_constant", outputs={"Out": [v]},
                    attrs={"shape": [5, 6], "dtype": 5, "value": 1.0})
    assert v.shape == (5, 6)
    block.append_op(type="fill_constant", outputs={"Out": [v]},
                    attrs={"shape": (7,), "dtype": 5, "value": 1.0})
    assert v.shape == (7,)
    block.append_op(type="uniform_random", outputs={"Out": [v]},
                    attrs={"shape": [7], "dtype": 5, "min": -1.0, "max": 1.0, "seed": 0})
    assert v.shape == (7,)
