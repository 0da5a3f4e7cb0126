"""float16 / bfloat16 MatMul and Gemm in our engine against numpy (float64 products of the same half values):
constant fp16 weights read as is by the half-weight GEMM (GEMV for decode, panels for prefill), transB,
biases, alpha/beta, batched A, a runtime (non-constant) B, bfloat16 widened and packed."""
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


def check(got, ref, dtype):
    tol = 2e-2 if dtype == np.float16 else 6e-2
    got = got.astype(np.float32)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("M", [1, 3, 40])
@pytest.mark.parametrize("batched", [False, True])
def test_matmul_fp16_constant_weight(build_dir, tmp_path, M, batched):
    rng = np.random.default_rng(M + 10 * batched)
    K, N = 67, 45
    w = rng.standard_normal((K, N)).astype(np.float16)
    shape = [2, M, K] if batched else [M, K]
    a = rng.standard_normal(shape).astype(np.float16)
    p = tmp_path / "mm.onnx"
    save(p, h.make_node("MatMul", ["a", "w"], ["y"]), [h.make_tensor_value_info("a", T.FLOAT16, shape)],
         [h.make_tensor_value_info("y", T.FLOAT16, None)], [nh.from_array(w, "w")])
    out, _ = engine_run(build_dir, p, {"a": a}, tmp_path)
    check(out["y"], (a.astype(np.float64) @ w.astype(np.float64)).astype(np.float32), np.float16)


@pytest.mark.parametrize("M", [1, 2, 33])
@pytest.mark.parametrize("case", ["transB_bias", "plain", "alpha_beta_matrix_c", "runtime_b"])
def test_gemm_fp16(build_dir, tmp_path, M, case):
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
    out, _ = engine_run(build_dir, p, feeds, tmp_path)
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
