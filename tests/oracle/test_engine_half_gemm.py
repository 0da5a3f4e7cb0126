"""float16 / bfloat16 MatMul and Gemm, and float16 Softmax rows, in our engine against numpy (float64 on the same
half values): constant fp16 weights read as is by the half-weight GEMM (GEMV for decode, panels for prefill) or
widened once to float32 (the session's float16 weight policy, WM_F16_WEIGHTS: both are run, and the packed bytes
say which one the session took), transB, biases, alpha/beta, batched A, a runtime (non-constant) B (a decoder's
cache, head by head), bfloat16 widened and packed."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from engine_util import engine_run


def bf16_round(x):
    """float32 -> nearest bfloat16 value (as float32) and its raw bits."""
    u = x.astype(np.float32).view(np.uint32)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return (r.astype(np.uint32) << 16).view(np.float32), r


def save(path, node, inputs, outputs, inits):
    g = h.make_graph([node], "g", inputs, outputs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    path.write_bytes(m.SerializeToString())


def half_bytes(K, N):
    """packed bytes of a [K, N] float16 weight in the half GEMM's 64-column panels"""
    return (N + 63) // 64 * 64 * K * 2


def float_bytes(K, N):
    """packed bytes of a [K, N] weight widened for the float32 GEMM (16-column panels)"""
    return (N + 15) // 16 * 16 * K * 4


def check(got, ref, dtype):
    tol = 2e-2 if dtype == np.float16 else 6e-2
    got = got.astype(np.float32)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("policy", ["half", "float"])
@pytest.mark.parametrize("M", [1, 3, 40])
@pytest.mark.parametrize("batched", [False, True])
def test_matmul_fp16_constant_weight(build_dir, tmp_path, monkeypatch, M, batched, policy):
    monkeypatch.setenv("WM_F16_WEIGHTS", policy)
    rng = np.random.default_rng(M + 10 * batched)
    K, N = 67, 45
    w = rng.standard_normal((K, N)).astype(np.float16)
    shape = [2, M, K] if batched else [M, K]
    a = rng.standard_normal(shape).astype(np.float16)
    p = tmp_path / "mm.onnx"
    save(p, h.make_node("MatMul", ["a", "w"], ["y"]), [h.make_tensor_value_info("a", T.FLOAT16, shape)],
         [h.make_tensor_value_info("y", T.FLOAT16, None)], [nh.from_array(w, "w")])
    out, stats = engine_run(build_dir, p, {"a": a}, tmp_path)
    assert stats["packed_bytes"] == (half_bytes if policy == "half" else float_bytes)(K, N)
    check(out["y"], (a.astype(np.float64) @ w.astype(np.float64)).astype(np.float32), np.float16)


@pytest.mark.parametrize("policy", ["half", "float"])
@pytest.mark.parametrize("M", [1, 2, 33])
@pytest.mark.parametrize("case", ["transB_bias", "plain", "alpha_beta_matrix_c", "runtime_b"])
def test_gemm_fp16(build_dir, tmp_path, monkeypatch, M, case, policy):
    monkeypatch.setenv("WM_F16_WEIGHTS", policy)
    rng = np.random.default_rng(M * 7 + len(case))
    K, N = 70, 131
    a = rng.standard_normal((M, K)).astype(np.float16)
    w = rng.standard_normal((K, N)).astype(np.float16)
    attrs, inits, ins, feeds = {}, [], ["a", "w"], {"a": a}
    alpha, beta, c = 1.0, 1.0, None
    if case == "transB_bias":
        attrs["transB"] = 1
        inits.append(nh.from_array(np.ascontiguousarray(w.T), "w"))
        c = rng.standard_normal(N).astype(np.float16)
    elif case == "alpha_beta_matrix_c":
        alpha, beta = 0.5, -2.0
        attrs.update(alpha=alpha, beta=beta)
        inits.append(nh.from_array(w, "w"))
        c = rng.standard_normal((M, N)).astype(np.float16)
    else:
        inits.append(nh.from_array(w, "w"))
    if c is not None:
        ins.append("c")
        inits.append(nh.from_array(c, "c"))
    vis = [h.make_tensor_value_info("a", T.FLOAT16, [M, K])]
    if case == "runtime_b":  # B is an input: widened per run
        inits = []
        vis.append(h.make_tensor_value_info("w", T.FLOAT16, [K, N]))
        feeds["w"] = w
    p = tmp_path / "gemm.onnx"
    save(p, h.make_node("Gemm", ins, ["y"], **attrs), vis, [h.make_tensor_value_info("y", T.FLOAT16, None)], inits)
    out, stats = engine_run(build_dir, p, feeds, tmp_path)
    # alpha != 1 is widened under either policy (the half GEMM has no alpha); a runtime B is not packed
    want = 0 if case == "runtime_b" else half_bytes(K, N) if policy == "half" and alpha == 1 else float_bytes(K, N)
    assert stats["packed_bytes"] == want
    ref = alpha * (a.astype(np.float64) @ w.astype(np.float64))
    if c is not None:
        ref = ref + beta * c.astype(np.float64)
    check(out["y"], ref.astype(np.float32), np.float16)


@pytest.mark.parametrize("M", [1, 20])
def test_gemm_bf16_transB(build_dir, tmp_path, M):
    rng = np.random.default_rng(M)
    K, N = 48, 37
    a, a_bits = bf16_round(rng.standard_normal((M, K)).astype(np.float32))
    w, w_bits = bf16_round(rng.standard_normal((N, K)).astype(np.float32))
    wt = h.make_tensor("w", T.BFLOAT16, [N, K], w_bits.tobytes(), raw=True)
    p = tmp_path / "gemm.onnx"
    # bf16 IO travels as float32 here: a Cast pair around a bf16 Gemm keeps the file format simple
    m_nodes = [h.make_node("Cast", ["a"], ["a16"], to=T.BFLOAT16), h.make_node("Gemm", ["a16", "w"], ["y16"], transB=1),
               h.make_node("Cast", ["y16"], ["y"], to=T.FLOAT)]
    g = h.make_graph(m_nodes, "g", [h.make_tensor_value_info("a", T.FLOAT, [M, K])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], [wt])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    p.write_bytes(m.SerializeToString())
    out, _ = engine_run(build_dir, p, {"a": a}, tmp_path)
    check(out["y"], (a.astype(np.float64) @ w.T.astype(np.float64)).astype(np.float32), "bf16")


@pytest.mark.parametrize("M", [1, 3, 12])
@pytest.mark.parametrize("case", ["heads", "heads_bcast", "plain_2d", "fused_transB"])
def test_matmul_fp16_runtime_b(build_dir, tmp_path, M, case):
    """float16 A @ a computed float16 B (a decoder's key / value cache): the half GEMM reads B as stored, head by
    head (GEMV below 8 rows, converted panels from 8), one float16 rounding of a float32 sum, so within 2 units of
    the last place of numpy's float64 product of the same half values; transB through FusedMatMul."""
    rng = np.random.default_rng(M * 13 + len(case))
    K, N = 70, 37
    a_shape, b_shape = {"heads": ([2, 3, M, K], [2, 3, K, N]), "heads_bcast": ([2, 3, M, K], [3, K, N]),
                        "plain_2d": ([2, M, K], [K, N]), "fused_transB": ([2, 3, M, K], [2, 3, N, K])}[case]
    a = rng.standard_normal(a_shape).astype(np.float16)
    b = rng.standard_normal(b_shape).astype(np.float16)
    if case == "fused_transB":
        node = h.make_node("FusedMatMul", ["a", "b"], ["y"], domain="com.microsoft", transB=1)
        ref = a.astype(np.float64) @ np.swapaxes(b.astype(np.float64), -1, -2)
    else:
        node = h.make_node("MatMul", ["a", "b"], ["y"])
        ref = a.astype(np.float64) @ b.astype(np.float64)
    g = h.make_graph([node], "g", [h.make_tensor_value_info("a", T.FLOAT16, a_shape),
                                   h.make_tensor_value_info("b", T.FLOAT16, b_shape)],
                     [h.make_tensor_value_info("y", T.FLOAT16, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    p = tmp_path / "mm.onnx"
    p.write_bytes(m.SerializeToString())
    out, _ = engine_run(build_dir, p, {"a": a, "b": b}, tmp_path)
    assert out["y"].dtype == np.float16 and out["y"].shape == ref.shape
    np.testing.assert_allclose(out["y"].astype(np.float64), ref, rtol=2e-3, atol=2e-3 * np.abs(ref).max())


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax_fp16_rows(build_dir, tmp_path, op, axis):
    """float16 Softmax / LogSoftmax (a decoder's cross-attention scores, 1500 keys) against numpy in float64 on the
    same half values: rows along the last axis (converted whole, the vector row kernel) and along axis 1 (strided),
    with -inf entries (a mask) and a length that is no multiple of 8."""
    rng = np.random.default_rng(3 + axis + len(op))
    x = (rng.standard_normal((2, 6, 1501)) * 4).astype(np.float16)
    x[0, 1, 5:40] = -np.inf
    x[1, 2, :3] = -np.inf
    p = tmp_path / "sm.onnx"
    save(p, h.make_node(op, ["x"], ["y"], axis=axis), [h.make_tensor_value_info("x", T.FLOAT16, list(x.shape))],
         [h.make_tensor_value_info("y", T.FLOAT16, None)], [])
    out, _ = engine_run(build_dir, p, {"x": x}, tmp_path)
    xd = x.astype(np.float64)
    sh = xd - xd.max(axis=axis, keepdims=True)
    lse = np.log(np.exp(sh).sum(axis=axis, keepdims=True))
    ref = np.exp(sh - lse) if op == "Softmax" else sh - lse
    got = out["y"].astype(np.float64)
    assert out["y"].dtype == np.float16 and got.shape == ref.shape
    fin = np.isfinite(ref)
    assert np.array_equal(fin, np.isfinite(got))
    np.testing.assert_allclose(got[fin], ref[fin], rtol=2e-3, atol=1e-6 if op == "Softmax" else 2e-3)


@pytest.mark.parametrize("inputs", ["encoder", "past_input", "present_output"])
def test_fp16_weight_policy_auto(build_dir, tmp_path, monkeypatch, inputs):
    """WM_F16_WEIGHTS unset (auto): a graph without a KV cache (an encoder) holds its float16 weights as float32,
    one with an input named with "past" or an output named with "present" (a decoder step) keeps them half; the
    outputs of the two policies equal each other (the same float32 sums of the same exact values; one 64-row
    product here, whose order of summation both paths share) and numpy's product within one float16 rounding."""
    monkeypatch.delenv("WM_F16_WEIGHTS", raising=False)
    rng = np.random.default_rng(len(inputs))
    M, K, N = 64, 96, 77
    a = rng.standard_normal((M, K)).astype(np.float16)
    w = (rng.standard_normal((K, N)) / 8).astype(np.float16)
    nodes = [h.make_node("MatMul", ["a", "w"], ["y"])]
    ins = [h.make_tensor_value_info("a", T.FLOAT16, [M, K])]
    outs = [h.make_tensor_value_info("y", T.FLOAT16, None)]
    feeds = {"a": a}
    if inputs == "past_input":
        ins.append(h.make_tensor_value_info("past_key_values.0.key", T.FLOAT16, [1, 2]))
        nodes.append(h.make_node("Identity", ["past_key_values.0.key"], ["kv"]))
        outs.append(h.make_tensor_value_info("kv", T.FLOAT16, None))
        feeds["past_key_values.0.key"] = np.ones((1, 2), np.float16)
    elif inputs == "present_output":
        nodes.append(h.make_node("Identity", ["y"], ["present.0.key"]))
        outs.append(h.make_tensor_value_info("present.0.key", T.FLOAT16, None))
    g = h.make_graph(nodes, "g", ins, outs, [nh.from_array(w, "w")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    p = tmp_path / "mm.onnx"
    p.write_bytes(m.SerializeToString())
    got = {}
    for policy in ["auto", "half", "float"]:
        monkeypatch.setenv("WM_F16_WEIGHTS", policy)
        out, stats = engine_run(build_dir, p, feeds, tmp_path)
        got[policy] = (out["y"], stats["packed_bytes"])
    auto_float = inputs == "encoder"
    assert got["auto"][1] == (float_bytes(K, N) if auto_float else half_bytes(K, N))
    assert got["half"][1] == half_bytes(K, N) and got["float"][1] == float_bytes(K, N)
    np.testing.assert_array_equal(got["auto"][0], got["float" if auto_float else "half"][0])
    np.testing.assert_array_equal(got["half"][0], got["float"][0])
    check(got["auto"][0], (a.astype(np.float64) @ w.astype(np.float64)).astype(np.float32), np.float16)


def test_fp16_weight_policy_bad_value(build_dir, tmp_path, monkeypatch):
    """A WM_F16_WEIGHTS that is no policy is refused when the session is made, naming the variable."""
    monkeypatch.setenv("WM_F16_WEIGHTS", "fp32")
    w = np.ones((4, 3), np.float16)
    p = tmp_path / "mm.onnx"
    save(p, h.make_node("MatMul", ["a", "w"], ["y"]), [h.make_tensor_value_info("a", T.FLOAT16, [2, 4])],
         [h.make_tensor_value_info("y", T.FLOAT16, None)], [nh.from_array(w, "w")])
    with pytest.raises(AssertionError, match="WM_F16_WEIGHTS: 'fp32' is not auto, half or float"):
        engine_run(build_dir, p, {"a": np.ones((2, 4), np.float16)}, tmp_path)
