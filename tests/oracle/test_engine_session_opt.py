"""The engine fuses every graph it opens (wm_opt_config_engine: the extended fusions, plus MatMul + bias +
activation into its own ai.winml MatMulBias and Conv + residual + activation into FusedConv). Checked against
onnxruntime on the graph as written:
  * handmade graphs, one per MatMulBias form (bias Add, BiasGelu, FastGelu with bias, Add then
    Gelu/Relu/Sigmoid/Tanh/QuickGelu, activation alone) and the forms it must leave alone (product used twice,
    product or bias sum a graph output, a non-constant or 2-D bias, a float16 MatMul that matmul_group joins
    with a sibling): the pass fires exactly where it should (`winml optimize --enable-matmul_epilogue` report)
    and the engine's outputs match; float16 forms under both float16 weight policies (half panels, float32);
  * tiny bert / xlm-roberta / gpt2 / llama torch.onnx exports: the default session (optimized) and
    wm_run --no-optimize both match onnxruntime within 1e-4."""
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import engine_util as E
import opt_models as M
import oracle_util as U

K, N = 24, 40


def graph(tail, bias_dims=(N,), extra_outputs=(), dtype=np.float32):
    """x[2,3,K] @ W[K,N] then `tail` nodes (which read "y" and the bias "b"); output "out"."""
    rng = np.random.default_rng(5)
    tp = TensorProto.FLOAT if dtype == np.float32 else TensorProto.FLOAT16
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, (K, N)).astype(dtype), "W"),
             numpy_helper.from_array(rng.normal(0, 0.5, bias_dims).astype(dtype), "b")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")] + tail
    outs = [helper.make_tensor_value_info("out", tp, None)]
    outs += [helper.make_tensor_value_info(o, tp, None) for o in extra_outputs]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", tp, [2, 3, K])], outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m


def ms(op, ins, outs):
    return helper.make_node(op, ins, outs, domain="com.microsoft")


CASES = {
    # name: (tail nodes, extra graph outputs, fused?, activation expected)
    "bias": ([helper.make_node("Add", ["y", "b"], ["out"])], (), True, None),
    "bias_first": ([helper.make_node("Add", ["b", "y"], ["out"])], (), True, None),
    "biasgelu": ([ms("BiasGelu", ["y", "b"], ["out"])], (), True, "Gelu"),
    "fastgelu_bias": ([ms("FastGelu", ["y", "b"], ["out"])], (), True, "FastGelu"),
    "add_relu": ([helper.make_node("Add", ["y", "b"], ["z"]), helper.make_node("Relu", ["z"], ["out"])], (), True,
                 "Relu"),
    "add_gelu_ms": ([helper.make_node("Add", ["y", "b"], ["z"]), ms("Gelu", ["z"], ["out"])], (), True, "Gelu"),
    "add_sigmoid": ([helper.make_node("Add", ["y", "b"], ["z"]), helper.make_node("Sigmoid", ["z"], ["out"])], (),
                    True, "Sigmoid"),
    "tanh_only": ([helper.make_node("Tanh", ["y"], ["out"])], (), True, "Tanh"),
    # CLIP's MLP: x * sigmoid(1.702 x) as com.microsoft QuickGelu; the alpha travels in activation_params
    "add_quickgelu": ([helper.make_node("Add", ["y", "b"], ["z"]), ms("QuickGelu", ["z"], ["out"])], (), True,
                      "QuickGelu"),
    "quickgelu_alpha": ([helper.make_node("QuickGelu", ["y"], ["out"], domain="com.microsoft", alpha=0.75)], (),
                        True, "QuickGelu"),
    # the bias sum is a graph output too: bias fuses, the activation stays separate
    "sum_is_output": ([helper.make_node("Add", ["y", "b"], ["z"]), helper.make_node("Relu", ["z"], ["out"])],
                      ("z",), True, None),
    # not fused
    "used_twice": ([helper.make_node("Add", ["y", "b"], ["z"]), helper.make_node("Add", ["z", "y"], ["out"])], (),
                   False, None),
    "product_is_output": ([helper.make_node("Add", ["y", "b"], ["out"])], ("y",), False, None),
}


def fused_ops(winml, src, dst):
    r = U.run([winml, "optimize", "-m", src, "-o", dst, "--level", "basic", "--enable-matmul_epilogue", "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    rep = json.loads(r.stdout)["report"]
    return {p["name"]: p["fired"] for p in rep["passes"]}["matmul_epilogue"], onnx.load(dst)


@pytest.mark.parametrize("case", sorted(CASES))
def test_matmul_epilogue_forms(winml, build_dir, tmp_path, case):
    tail, extra, fused, act = CASES[case]
    src = str(tmp_path / "m.onnx")
    onnx.save(graph(tail, extra_outputs=extra), src)
    fired, opt = fused_ops(winml, src, str(tmp_path / "o.onnx"))
    assert fired == (1 if fused else 0), case
    if fused:
        node = next(n for n in opt.graph.node if n.op_type == "MatMulBias")
        assert node.domain == "ai.winml"
        attrs = {a.name: a.s.decode() for a in node.attribute}
        assert attrs.get("activation") == act, (case, attrs)
        if act == "QuickGelu":
            tail_alpha = next((a.f for a in tail[-1].attribute if a.name == "alpha"), np.float32(1.702))
            params = next(list(a.floats) for a in node.attribute if a.name == "activation_params")
            assert params == [pytest.approx(tail_alpha)], (case, params)
    x = np.random.default_rng(1).normal(0, 1.5, (2, 3, K)).astype(np.float32)
    ref = E.ort_run(src, {"x": x})
    ours, st = E.engine_run(build_dir, src, {"x": x}, tmp_path)
    E.assert_close(ours, ref, atol=1e-5, label=case)
    # the session fused the same way (fewer nodes than the graph as written), or left the graph alone
    _, st_plain = E.engine_run(build_dir, src, {"x": x}, tmp_path, extra=("--no-optimize",))
    assert (st["nodes"] < st_plain["nodes"]) == fused, (case, st, st_plain)


FP16_CASES = ["bias", "add_relu", "add_gelu_ms", "add_quickgelu", "tanh_only", "biasgelu"]


@pytest.mark.parametrize("policy", ["half", "float"])
@pytest.mark.parametrize("case", FP16_CASES)
def test_matmul_epilogue_fp16(winml, build_dir, tmp_path, monkeypatch, case, policy):
    """float16 MatMul + bias / activation fuses into a float16 MatMulBias: the epilogue runs in float32 on the
    half GEMM (WM_F16_WEIGHTS=half: a decoder's form) or the float32 GEMM (=float: an encoder's), the output
    rounded to half once; within one float16 rounding of numpy's float64 on the same half values (the unfused
    graph rounds the product to half before the activation: onnxruntime's figure is a second reference)."""
    monkeypatch.setenv("WM_F16_WEIGHTS", policy)
    tail, extra, fused, act = CASES[case]
    src = str(tmp_path / "m16.onnx")
    m = graph(tail, extra_outputs=extra, dtype=np.float16)
    onnx.save(m, src)
    fired, _ = fused_ops(winml, src, str(tmp_path / "o16.onnx"))
    assert fired == 1, case
    x = np.random.default_rng(1).normal(0, 1.5, (2, 3, K)).astype(np.float16)
    w = numpy_helper.to_array(m.graph.initializer[0]).astype(np.float64)
    b = numpy_helper.to_array(m.graph.initializer[1]).astype(np.float64)
    from scipy.special import erf
    y = x.astype(np.float64) @ w
    z = y + b if case != "tanh_only" else y
    ref = {"bias": lambda v: v, "add_relu": lambda v: np.maximum(v, 0), "tanh_only": np.tanh,
           "add_gelu_ms": lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))),
           "biasgelu": lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))),
           "add_quickgelu": lambda v: v / (1 + np.exp(-1.702 * v))}[case](z)
    ours, st = E.engine_run(build_dir, src, {"x": x}, tmp_path)
    _, st_plain = E.engine_run(build_dir, src, {"x": x}, tmp_path, extra=("--no-optimize",))
    assert st["nodes"] < st_plain["nodes"], (case, st, st_plain)
    got = ours["out"]
    assert got.dtype == np.float16 and got.shape == ref.shape
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=2e-3, atol=2e-3 * np.abs(ref).max())
    ort = E.ort_run(src, {"x": x})["out"].astype(np.float64)
    np.testing.assert_allclose(got.astype(np.float64), ort, rtol=1e-2, atol=1e-2 * np.abs(ref).max())


def test_matmul_epilogue_fp16_leaves_groups(winml, build_dir, tmp_path):
    """Two float16 MatMuls by constants of the same K on one input (a decoder's q / v projections, each with a
    bias) stay for matmul_group (one weight stream at decode) instead of fusing their biases."""
    rng = np.random.default_rng(6)
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, (K, N)).astype(np.float16), nm) for nm in ("W1", "W2")]
    inits += [numpy_helper.from_array(rng.normal(0, 0.5, (N,)).astype(np.float16), nm) for nm in ("b1", "b2")]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["y1"]), helper.make_node("Add", ["y1", "b1"], ["o1"]),
             helper.make_node("MatMul", ["x", "W2"], ["y2"]), helper.make_node("Add", ["y2", "b2"], ["o2"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 3, K])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT16, None) for o in ("o1", "o2")], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    src = str(tmp_path / "g16.onnx")
    onnx.save(m, src)
    assert fused_ops(winml, src, str(tmp_path / "og16.onnx"))[0] == 0
    x = np.random.default_rng(3).normal(0, 1, (2, 3, K)).astype(np.float16)
    ours, _ = E.engine_run(build_dir, src, {"x": x}, tmp_path)
    ref = E.ort_run(src, {"x": x})
    for k in ("o1", "o2"):
        np.testing.assert_allclose(ours[k].astype(np.float64), ref[k].astype(np.float64), rtol=1e-2,
                                   atol=1e-2 * np.abs(ref[k]).max())


def test_matmul_epilogue_leaves_other_biases(winml, build_dir, tmp_path):
    """A 2-D [1, N] bias and a bias that is a graph input are not fused (and still run)."""
    src = str(tmp_path / "m2.onnx")
    onnx.save(graph([helper.make_node("Add", ["y", "b"], ["out"])], bias_dims=(1, N)), src)
    assert fused_ops(winml, src, str(tmp_path / "o2.onnx"))[0] == 0
    x = np.random.default_rng(2).normal(0, 1, (2, 3, K)).astype(np.float32)
    E.assert_close(E.engine_run(build_dir, src, {"x": x}, tmp_path)[0], E.ort_run(src, {"x": x}), atol=1e-5)
    m = graph([helper.make_node("Add", ["y", "bias_in"], ["out"])])
    m.graph.input.append(helper.make_tensor_value_info("bias_in", TensorProto.FLOAT, [N]))
    src_in = str(tmp_path / "min.onnx")
    onnx.save(m, src_in)
    assert fused_ops(winml, src_in, str(tmp_path / "oin.onnx"))[0] == 0


def test_matmul_bias_rejects_bad_use(build_dir, tmp_path):
    """MatMulBias written into a file by hand: a non-constant weight or an unknown activation is named at
    session creation (exit 2), not at run time."""
    rng = np.random.default_rng(0)
    for bad in ("weight_input", "activation"):
        w = numpy_helper.from_array(rng.normal(0, 1, (K, N)).astype(np.float32), "W")
        ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, K])]
        node = helper.make_node("MatMulBias", ["x", "W"], ["out"], domain="ai.winml",
                                activation="Swish" if bad == "activation" else "Relu")
        inits = [w]
        if bad == "weight_input":
            ins.append(helper.make_tensor_value_info("W", TensorProto.FLOAT, [K, N]))
            inits = []
        g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.winml", 1)])
        src = str(tmp_path / f"{bad}.onnx")
        onnx.save(m, src)
        feeds = {"x": rng.normal(0, 1, (2, K)).astype(np.float32)}
        if bad == "weight_input":
            feeds["W"] = rng.normal(0, 1, (K, N)).astype(np.float32)
        with pytest.raises(AssertionError) as e:
            E.engine_run(build_dir, src, feeds, tmp_path)
        msg = str(e.value)
        assert "(2)" in msg and "MatMulBias" in msg, msg
        assert ("Swish" in msg) if bad == "activation" else ("constant" in msg), msg


@pytest.mark.parametrize("kind", ("bert", "xlmr", "gpt2", "llama"))
def test_session_optimization_matches_ort(build_dir, tmp_path, kind):
    src = M.export(kind, "ts")
    if kind in M.ENCODERS:
        f = M.encoder_feeds(2, 7, seed=11)
    else:
        f = M.decoder_feeds(src, 2, 5, 3, seed=11)
    names = {i.name for i in onnx.load(src, load_external_data=False).graph.input}
    f = {k: v for k, v in f.items() if k in names}
    ref = E.ort_run(src, f, optimized=False)
    fused, st = E.engine_run(build_dir, src, f, tmp_path)
    plain, st_plain = E.engine_run(build_dir, src, f, tmp_path, extra=("--no-optimize",))
    assert st["nodes"] < st_plain["nodes"], (kind, st, st_plain)  # the session did fuse
    w1 = E.assert_close(fused, ref, label=f"{kind} optimized session")
    w2 = E.assert_close(plain, ref, label=f"{kind} graph as written")
    U.note(f"{kind}: max abs diff vs onnxruntime {max(w1.values()):.2e} fused, {max(w2.values()):.2e} as written")


def conv_graph(tail, extra_inputs=(), extra_outputs=()):
    """Conv(x[1,4,9,9], W[6,4,3,3], B, pad 1) -> "c", then `tail`; output "out"; r[1,6,9,9] is an input."""
    rng = np.random.default_rng(8)
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, (6, 4, 3, 3)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.normal(0, 0.3, (6,)).astype(np.float32), "B"),
             numpy_helper.from_array(rng.normal(0, 0.3, (1, 6, 1, 1)).astype(np.float32), "bc")]
    conv = helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 9, 9])]
    ins += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 6, 9, 9]) for n in extra_inputs]
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("out",) + tuple(extra_outputs)]
    g = helper.make_graph([conv] + tail, "g", ins, outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


CONV_CASES = {
    # name: (tail, extra inputs, extra outputs, fused?, activation, has Z)
    "relu": ([helper.make_node("Relu", ["c"], ["out"])], (), (), True, "Relu", False),
    "leaky": ([helper.make_node("LeakyRelu", ["c"], ["out"], alpha=0.2)], (), (), True, "LeakyRelu", False),
    "residual_relu": ([helper.make_node("Add", ["c", "r"], ["s"]), helper.make_node("Relu", ["s"], ["out"])], ("r",),
                      (), True, "Relu", True),
    "residual_first": ([helper.make_node("Add", ["r", "c"], ["out"])], ("r",), (), True, None, True),
    "residual_sum_output": ([helper.make_node("Add", ["c", "r"], ["s"]), helper.make_node("Relu", ["s"], ["out"])],
                            ("r",), ("s",), True, None, True),
    # not fused: a constant broadcast addend, the conv output used twice, the conv output a graph output
    "const_add": ([helper.make_node("Add", ["c", "bc"], ["out"])], (), (), False, None, False),
    "used_twice": ([helper.make_node("Add", ["c", "c"], ["out"])], (), (), False, None, False),
    "conv_is_output": ([helper.make_node("Relu", ["c"], ["out"])], (), ("c",), False, None, False),
}


@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv_activation_forms(winml, build_dir, tmp_path, case):
    tail, ins, outs, fused, act, has_z = CONV_CASES[case]
    src, dst = str(tmp_path / "c.onnx"), str(tmp_path / "co.onnx")
    onnx.save(conv_graph(tail, ins, outs), src)
    r = U.run([winml, "optimize", "-m", src, "-o", dst, "--level", "basic", "--enable-conv_activation", "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    fired = {p["name"]: p["fired"] for p in json.loads(r.stdout)["report"]["passes"]}["conv_activation"]
    assert fired == (1 if fused else 0), case
    if fused:
        node = next(n for n in onnx.load(dst).graph.node if n.op_type == "FusedConv")
        attrs = {a.name: a for a in node.attribute}
        assert (attrs["activation"].s.decode() if "activation" in attrs else None) == act
        assert list(attrs["pads"].ints) == [1, 1, 1, 1] and list(attrs["kernel_shape"].ints) == [3, 3]
        assert (len(node.input) == 4 and node.input[3] == "r") == has_z
        if act == "LeakyRelu":
            assert list(attrs["activation_params"].floats) == pytest.approx([0.2])
    rng = np.random.default_rng(3)
    feeds = {"x": rng.normal(0, 1, (1, 4, 9, 9)).astype(np.float32)}
    for n in ins:
        feeds[n] = rng.normal(0, 1, (1, 6, 9, 9)).astype(np.float32)
    ref = E.ort_run(src, feeds, optimized=False)
    ours, st = E.engine_run(build_dir, src, feeds, tmp_path)
    E.assert_close(ours, ref, atol=1e-5, label=case)
    _, st_plain = E.engine_run(build_dir, src, feeds, tmp_path, extra=("--no-optimize",))
    assert (st["nodes"] < st_plain["nodes"]) == fused, (case, st, st_plain)
    if fused:  # the fused file runs in onnxruntime too (FusedConv is its CPU contrib op)
        E.assert_close(E.ort_run(dst, feeds), ref, atol=1e-5, label=case + " fused in onnxruntime")


def nhwc_chain_graph(shape=(2, 5, 13, 11), ch=(8, 6), z_branch=False):
    """A chain the engine runs channels-last, on odd sizes and every window option: x[2,5,13,11] ->
    Conv(asymmetric pads, stride 2x1, dilation 1x2) + Relu -> MaxPool(3x2, pads, ceil_mode) -> 1x1 Conv (no bias)
    + residual Add + LeakyRelu -> "mid" (also read by a ReduceMean: NCHW again) -> Conv(SAME_UPPER, stride 2)
    + Sigmoid -> "out"; plus a lone Conv on x ("lone"), which keeps NCHW. ch: the output channels of the first and
    the last Conv. z_branch: the residual is a 1x1 Conv of the pooled value instead of that value itself (X and Z
    then differ, and the output may take Z's bytes)."""
    rng = np.random.default_rng(11)
    C, C1, C3 = shape[1], ch[0], ch[1]
    w = lambda *s: numpy_helper.from_array(rng.normal(0, 0.3, s).astype(np.float32), f"W{len(inits)}")
    inits = []
    inits.append(w(C1, C, 3, 3)), inits.append(numpy_helper.from_array(rng.normal(0, 0.3, (C1,)).astype(np.float32), "B0"))
    inits.append(w(C1, C1, 1, 1)), inits.append(w(C3, C1, 3, 3)), inits.append(w(3, C, 1, 1)), inits.append(w(C1, C1, 1, 1))
    n = helper.make_node
    nodes = [n("Conv", ["x", "W0", "B0"], ["c1"], pads=[1, 2, 0, 1], strides=[2, 1], dilations=[1, 2]),
             n("Relu", ["c1"], ["r1"]),
             n("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], ceil_mode=1),
             n("Conv", ["p1", "W2"], ["c2"]),
             n("Conv", ["p1", "W5"], ["zb"]),
             n("Add", ["c2", "zb" if z_branch else "p1"], ["s"]),
             n("LeakyRelu", ["s"], ["mid"], alpha=0.1),
             n("ReduceMean", ["mid"], ["mean"], axes=[2, 3]),
             n("Conv", ["mid", "W3"], ["c3"], auto_pad="SAME_UPPER", strides=[2, 2]),
             n("Sigmoid", ["c3"], ["out"]),
             n("Conv", ["x", "W4"], ["lone"])]
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("out", "mid", "mean", "lone")]
    if not z_branch:
        del nodes[4], inits[-1]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))], outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_nhwc_chain_threads_bit_identical(build_dir, tmp_path):
    """Images large enough for the channels-last convolutions' claimed tiles (16+ per conv, any thread takes any
    tile, scratch per thread; at 8 threads too few tiles: an image's GEMM split over the threads): the outputs are
    the same bits on 1, 2, 3 and 8 threads and match onnxruntime."""
    src = str(tmp_path / "big.onnx")
    onnx.save(nhwc_chain_graph((2, 5, 96, 80)), src)
    feeds = {"x": np.random.default_rng(5).normal(0, 1, (2, 5, 96, 80)).astype(np.float32)}
    runs = {t: E.engine_run(build_dir, src, feeds, tmp_path, threads=t)[0] for t in (1, 2, 3, 8)}
    for o in ("out", "mid", "mean", "lone"):
        assert all(np.array_equal(runs[1][o], runs[t][o]) for t in runs), o
    E.assert_close(runs[2], E.ort_run(src, feeds, optimized=False), atol=1e-4, label="nhwc chain, large")


@pytest.mark.parametrize("z_branch", [False, True])
@pytest.mark.parametrize("shape,ch", [((1, 19, 14, 12), (24, 17)), ((2, 16, 40, 36), (33, 16)),
                                      ((1, 16, 20, 16), (1024, 16))])
def test_nhwc_chain_indirect(build_dir, tmp_path, shape, ch, z_branch):
    """16+ input channels: the 3x3 convolutions (asymmetric pads, stride 2x1 with dilation 1x2; SAME_UPPER
    stride 2) read each tap's channels in place through an indirection table instead of copying patches (one
    tile split over the threads, and claimed tiles). The residual is the 1x1 convolution's own input (which its
    output must not overwrite), or another value (whose bytes the output takes over: Z accumulated in place).
    With 1024 channels the 1x1 convolution's rows are 4 KiB apart: the GEMM packs them into panels (AVX2 and
    AVX-512 tables) and the 3x3 one, whose taps are as far apart, copies its patches to a padded stride.
    Same bits on 1, 2, 3 and 8 threads (at 8, an image is one GEMM split over the threads), and onnxruntime's
    values."""
    src = str(tmp_path / "ind.onnx")
    onnx.save(nhwc_chain_graph(shape, ch, z_branch), src)
    feeds = {"x": np.random.default_rng(6).normal(0, 1, shape).astype(np.float32)}
    runs = {t: E.engine_run(build_dir, src, feeds, tmp_path, threads=t)[0] for t in (1, 2, 3, 8)}
    for o in ("out", "mid", "mean", "lone"):
        assert all(np.array_equal(runs[1][o], runs[t][o]) for t in runs), o
    ref = E.ort_run(src, feeds, optimized=False)
    # 1e-4, or 1e-6 of the largest value (sums of 1024 products reach ~200 there: float rounding, not an error)
    atol = max(1e-4, 1e-6 * max(float(np.abs(v).max()) for v in ref.values()))
    E.assert_close(runs[2], ref, atol=atol, label=f"nhwc chain {shape}")


def wino_chain_graph(shape, ch):
    """3x3 stride-1 convolutions the engine runs as Winograd F(4x4, 3x3) or F(2x2, 3x3): x -> Conv(pads 1) + Relu
    -> "a" -> Conv(no pads) -> "b" -> Conv(pads 1) + residual "b" + Relu -> "c" -> Conv(pads 2,1,0,2) + LeakyRelu
    (an activation Winograd leaves to the direct path) -> "d" -> Conv(pads 0,2,1,0, no bias) -> "out"."""
    rng = np.random.default_rng(12)
    C, C1 = shape[1], ch
    inits = []
    def w(*s):  # weights scaled to keep values near 1 from layer to layer
        sd = (s[1] * 9) ** -0.5 if len(s) == 4 else 0.3
        inits.append(numpy_helper.from_array(rng.normal(0, sd, s).astype(np.float32), f"W{len(inits)}"))
        return inits[-1].name
    n = helper.make_node
    nodes = [n("Conv", ["x", w(C1, C, 3, 3), w(C1)], ["c1"], pads=[1, 1, 1, 1]), n("Relu", ["c1"], ["a"]),
             n("Conv", ["a", w(C1, C1, 3, 3), w(C1)], ["b"]),
             n("Conv", ["b", w(C1, C1, 3, 3), w(C1)], ["c3"], pads=[1, 1, 1, 1]), n("Add", ["c3", "b"], ["s3"]),
             n("Relu", ["s3"], ["c"]),
             n("Conv", ["c", w(C1, C1, 3, 3), w(C1)], ["c4"], pads=[2, 1, 0, 2]), n("LeakyRelu", ["c4"], ["d"], alpha=0.1),
             n("Conv", ["d", w(C, C1, 3, 3)], ["out"], pads=[0, 2, 1, 0])]
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("a", "c", "out")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))], outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("shape,ch", [((2, 16, 15, 13), 24), ((2, 17, 40, 36), 33), ((1, 16, 9, 30), 16)])
def test_nhwc_winograd(winml, build_dir, tmp_path, monkeypatch, shape, ch):
    """nhwc_layout marks the 3x3 stride-1 convolutions of 16+ channels with a static output of 7 x 7 or more for
    Winograd (the winograd attribute: tile 4 from 12 x 12, else 2; not the one whose output is under 7 x 7), and the
    engine runs those as Winograd (the LeakyRelu one directly): outputs match onnxruntime within 5e-6 of the largest
    value (F(4x4, 3x3) rounds a few times worse than a direct sum: 1.5e-5 here where the direct path is off by
    3e-6, with values up to 5), the same bits on 1, 2, 3 and 8 threads (claimed
    blocks of tiles, or stage after stage over all tiles when few), and WM_WINOGRAD=0 (direct) is within the same
    tolerance but not the same bits."""
    src, dst = str(tmp_path / "w.onnx"), str(tmp_path / "wo.onnx")
    onnx.save(wino_chain_graph(shape, ch), src)
    r = U.run([winml, "optimize", "-m", src, "-o", dst, "--level", "basic", "--enable-conv_activation",
               "--enable-nhwc_layout", "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    from onnx import shape_inference
    inf = shape_inference.infer_shapes(onnx.load(src))
    dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in list(inf.graph.value_info) + list(inf.graph.output)}
    want = []
    for node in onnx.load(src).graph.node:
        if node.op_type == "Conv":
            oh, ow = dims[node.output[0]][2:]
            want.append(0 if oh < 7 or ow < 7 else 4 if oh >= 12 and ow >= 12 else 2)
    got = [next((a.i for a in x.attribute if a.name == "winograd"), 0) for x in onnx.load(dst).graph.node
           if x.op_type == "NhwcConv"]
    assert got == want and any(got), (got, want)
    feeds = {"x": np.random.default_rng(7).normal(0, 1, shape).astype(np.float32)}
    runs = {t: E.engine_run(build_dir, src, feeds, tmp_path, threads=t)[0] for t in (1, 2, 3, 8)}
    for o in ("a", "c", "out"):
        assert all(np.array_equal(runs[1][o], runs[t][o]) for t in runs), o
    ref = E.ort_run(src, feeds, optimized=False)
    atol = max(1e-5, 5e-6 * max(float(np.abs(v).max()) for v in ref.values()))
    E.assert_close(runs[2], ref, atol=atol, label=f"winograd chain {shape}")
    monkeypatch.setenv("WM_WINOGRAD", "0")
    direct, _ = E.engine_run(build_dir, src, feeds, tmp_path, threads=2)
    E.assert_close(direct, ref, atol=atol, label=f"direct chain {shape}")
    assert not np.array_equal(direct["out"], runs[2]["out"])


def test_nhwc_winograd_empty_batch(build_dir, tmp_path):
    """An empty batch through the Winograd chain (no tiles: the plan must not divide by zero) gives onnxruntime's
    empty outputs on 1 and 2 threads."""
    shape = (0, 16, 15, 13)
    src = str(tmp_path / "w0.onnx")
    onnx.save(wino_chain_graph(shape, 24), src)
    feeds = {"x": np.zeros(shape, np.float32)}
    ref = E.ort_run(src, feeds, optimized=False)
    for t in (1, 2):
        ours, _ = E.engine_run(build_dir, src, feeds, tmp_path, threads=t)
        assert {k: v.shape for k, v in ours.items()} == {k: v.shape for k, v in ref.items()}


def test_nhwc_layout_chain(winml, build_dir, tmp_path):
    """nhwc_layout converts the linked Conv / MaxPool nodes (3 + 1) to ai.winml NhwcConv / NhwcMaxPool with one
    Transpose into the chain and one back per value an NCHW reader or a graph output needs; the lone Conv stays;
    the engine's session (which runs the pass) matches onnxruntime on the graph as written."""
    src, dst = str(tmp_path / "n.onnx"), str(tmp_path / "no.onnx")
    onnx.save(nhwc_chain_graph(), src)
    r = U.run([winml, "optimize", "-m", src, "-o", dst, "--level", "basic", "--enable-conv_activation",
               "--enable-nhwc_layout", "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    fired = {p["name"]: p["fired"] for p in json.loads(r.stdout)["report"]["passes"]}
    assert fired["nhwc_layout"] == 4, fired
    ops = [x.op_type for x in onnx.load(dst).graph.node]
    assert ops.count("NhwcConv") == 3 and ops.count("NhwcMaxPool") == 1, ops
    assert ops.count("Conv") == 1 and "MaxPool" not in ops, ops  # the lone Conv
    assert ops.count("Transpose") == 3, ops  # x in; "mid" (ReduceMean, graph output) and "out" back
    feeds = {"x": np.random.default_rng(4).normal(0, 1, (2, 5, 13, 11)).astype(np.float32)}
    ref = E.ort_run(src, feeds, optimized=False)
    ours, _ = E.engine_run(build_dir, src, feeds, tmp_path)
    E.assert_close(ours, ref, atol=1e-5, label="nhwc chain")
    for o in ("out", "mid", "mean", "lone"):
        assert ours[o].shape == ref[o].shape, o


@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_matmul_transpose(winml, build_dir, tmp_path, dt):
    """matmul_transpose: q[2,3,5,8] @ Transpose(k, perm 0,1,3,2) (an attention's scores over a key cache) becomes
    com.microsoft FusedMatMul(q, k, transB 1) and the Transpose goes; a Transpose of other axes, a constant B and a
    Transpose read elsewhere too (a graph output: kept, the MatMul still fused) are checked beside it. The engine's
    session (which runs the pass) matches onnxruntime on the graph as written (float32), or numpy's float64 products
    of the same half values (float16: an fp16 build's key cache; its FusedMatMul runs on the half GEMM)."""
    rng = np.random.default_rng(8)
    f = TensorProto.FLOAT if dt == np.float32 else TensorProto.FLOAT16
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Transpose", ["v"], ["vt"], perm=[1, 0, 3, 2]),  # swaps a batch axis too: left alone
             helper.make_node("MatMul", ["q", "vt"], ["s2"]),
             helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),  # a constant: folded, not fused
             helper.make_node("MatMul", ["s", "wt"], ["s3"]),
             helper.make_node("Transpose", ["k2"], ["k2t"], perm=[0, 1, 3, 2]),  # also a graph output
             helper.make_node("MatMul", ["q", "k2t"], ["s4"])]
    ins = [helper.make_tensor_value_info("q", f, [2, 3, 5, 8]), helper.make_tensor_value_info("k", f, [2, 3, 7, 8]),
           helper.make_tensor_value_info("v", f, [3, 2, 7, 8]), helper.make_tensor_value_info("k2", f, [2, 3, 4, 8])]
    outs = [helper.make_tensor_value_info(o, f, None) for o in ("s", "s2", "s3", "s4", "k2t")]
    g = helper.make_graph(nodes, "g", ins, outs, [numpy_helper.from_array(rng.normal(0, 1, (6, 7)).astype(dt), "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    src, dst = str(tmp_path / "t.onnx"), str(tmp_path / "to.onnx")
    onnx.save(m, src)
    r = U.run([winml, "optimize", "-m", src, "-o", dst, "--level", "basic", "--enable-matmul_transpose", "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    fired = {p["name"]: p["fired"] for p in json.loads(r.stdout)["report"]["passes"]}
    assert fired["matmul_transpose"] == 2, fired
    out = onnx.load(dst)
    fused = [n for n in out.graph.node if n.op_type == "FusedMatMul"]
    assert sorted(n.input[1] for n in fused) == ["k", "k2"], [(n.op_type, list(n.input)) for n in out.graph.node]
    assert all({a.name: a.i for a in n.attribute}["transB"] == 1 for n in fused)
    assert [n.input[0] for n in out.graph.node if n.op_type == "Transpose"] == ["v", "k2"]
    feeds = {"q": rng.normal(0, 1, (2, 3, 5, 8)).astype(dt), "k": rng.normal(0, 1, (2, 3, 7, 8)).astype(dt),
             "v": rng.normal(0, 1, (3, 2, 7, 8)).astype(dt), "k2": rng.normal(0, 1, (2, 3, 4, 8)).astype(dt)}
    ours, _ = E.engine_run(build_dir, src, feeds, tmp_path)
    if dt == np.float32:
        E.assert_close(ours, E.ort_run(src, feeds, optimized=False), atol=1e-5,
                       label="matmul_transpose")
        return
    d = {k: v.astype(np.float64) for k, v in feeds.items()}
    w = numpy_helper.to_array(g.initializer[0]).astype(np.float64)
    s_ = d["q"] @ d["k"].transpose(0, 1, 3, 2)
    ref = {"s": s_, "s2": d["q"] @ d["v"].transpose(1, 0, 3, 2), "s4": d["q"] @ d["k2"].transpose(0, 1, 3, 2),
           "k2t": d["k2"].transpose(0, 1, 3, 2)}
    ref["s3"] = s_.astype(np.float16).astype(np.float64) @ w.T  # s is rounded to float16 before it is read
    for k, r in ref.items():  # one float16 rounding of a float32 sum: within 2 units of the last place
        assert ours[k].dtype == np.float16, k
        np.testing.assert_allclose(ours[k].astype(np.float64), r, rtol=2e-3, atol=2e-3 * np.abs(r).max(), err_msg=k)
