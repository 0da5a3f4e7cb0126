"""winml optimize on small graphs spelled the way other exporters (and winml's own builder) write them:
decomposed LayerNorm and RMSNorm, residual Add + norm, GELU in erf and tanh forms, QuickGelu/SiLU, 2-D
MatMul + Add, rotate-half RoPE, scaled dot-product attention, static shape arithmetic, duplicates and dead
nodes. Each is checked for the fused op and for onnxruntime giving the same outputs as before."""
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import opt_models as M
import oracle_util as U

RNG = np.random.default_rng(0)


def const(name, arr):
    return nh.from_array(np.asarray(arr), name)


def model(nodes, inputs, outputs, inits, opset=17):
    g = h.make_graph(nodes, "g", inputs, outputs, inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def fvi(name, shape):
    return h.make_tensor_value_info(name, T.FLOAT, shape)


def run_case(winml, tmp_path, m, feeds, *extra):
    src, dst = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, src)
    r = U.run([winml, "optimize", "-m", src, "-o", dst, "-f", "json", *extra])
    assert r.returncode == 0, U.describe(r)
    rep = json.loads(r.stdout)["report"]
    worst, cos = M.compare(M.run_model(src, feeds), M.run_model(dst, feeds))
    assert worst <= 1e-4 and cos >= 0.99999, (worst, cos)
    return rep["ops_after"], rep


def reduce_mean(x, out, opset):
    if opset >= 18:
        return [h.make_node("ReduceMean", [x, "axes_last"], [out], keepdims=1)]
    return [h.make_node("ReduceMean", [x], [out], axes=[-1], keepdims=1)]


@pytest.mark.parametrize("opset", (13, 17, 18))
def test_layernorm_decomposed(winml, tmp_path, opset):
    n = reduce_mean("x", "mu", opset) + [h.make_node("Sub", ["x", "mu"], ["d"]),
                                         h.make_node("Pow", ["d", "two"], ["d2"])] + reduce_mean("d2", "var", opset) + [
        h.make_node("Add", ["var", "eps"], ["ve"]), h.make_node("Sqrt", ["ve"], ["sd"]),
        h.make_node("Div", ["d", "sd"], ["nx"]), h.make_node("Mul", ["nx", "gamma"], ["sx"]),
        h.make_node("Add", ["sx", "beta"], ["y"])]
    inits = [const("two", np.float32(2)), const("eps", np.float32(1e-5)),
             const("gamma", RNG.standard_normal(16).astype(np.float32)),
             const("beta", RNG.standard_normal(16).astype(np.float32)), const("axes_last", np.array([-1], np.int64))]
    m = model(n, [fvi("x", ["b", "s", 16])], [fvi("y", None)], inits, opset)
    ops, _ = run_case(winml, tmp_path, m, {"x": RNG.standard_normal((2, 5, 16)).astype(np.float32)})
    assert ops == {"LayerNormalization": 1}, ops


@pytest.mark.parametrize("form", ("div", "reciprocal", "mulsq", "noweight"))
def test_rmsnorm_decomposed(winml, tmp_path, form):
    sq = h.make_node("Mul", ["x", "x"], ["x2"]) if form == "mulsq" else h.make_node("Pow", ["x", "two"], ["x2"])
    n = [sq] + reduce_mean("x2", "ms", 18) + [h.make_node("Add", ["ms", "eps"], ["me"]),
                                             h.make_node("Sqrt", ["me"], ["rt"])]
    if form == "div":
        n += [h.make_node("Div", ["x", "rt"], ["nx"])]
    else:
        n += [h.make_node("Reciprocal", ["rt"], ["inv"]), h.make_node("Mul", ["x", "inv"], ["nx"])]
    last = "nx"
    if form != "noweight":
        n += [h.make_node("Mul", ["w", "nx"], ["y"])]
        last = "y"
    inits = [const("two", np.float32(2)), const("eps", np.float32(1e-6)), const("axes_last", np.array([-1], np.int64)),
             const("w", RNG.standard_normal(16).astype(np.float32))]
    m = model(n, [fvi("x", ["b", "s", 16])], [fvi(last, None)], inits, 18)
    ops, _ = run_case(winml, tmp_path, m, {"x": RNG.standard_normal((2, 5, 16)).astype(np.float32)})
    assert ops == {"SimplifiedLayerNormalization": 1}, ops


@pytest.mark.parametrize("with_bias", (False, True))
def test_skip_layernorm(winml, tmp_path, with_bias):
    n = [h.make_node("MatMul", ["a", "W"], ["p"])]
    if with_bias:
        n += [h.make_node("Add", ["p", "bias"], ["pb"])]
    n += [h.make_node("Add", ["pb" if with_bias else "p", "r"], ["s"]),
          h.make_node("LayerNormalization", ["s", "gamma", "beta"], ["y"], epsilon=1e-5),
          h.make_node("Relu", ["s"], ["z"])]  # the sum is used elsewhere too: the fused node's 4th output
    inits = [const("W", RNG.standard_normal((16, 16)).astype(np.float32)),
             const("bias", RNG.standard_normal(16).astype(np.float32)),
             const("gamma", RNG.standard_normal(16).astype(np.float32)),
             const("beta", RNG.standard_normal(16).astype(np.float32))]
    m = model(n, [fvi("a", ["b", "s", 16]), fvi("r", ["b", "s", 16])], [fvi("y", None), fvi("z", None)], inits)
    f = {"a": RNG.standard_normal((2, 3, 16)).astype(np.float32), "r": RNG.standard_normal((2, 3, 16)).astype(np.float32)}
    ops, _ = run_case(winml, tmp_path, m, f)
    assert ops.get("SkipLayerNormalization") == 1 and "Add" not in ops and "LayerNormalization" not in ops, ops


@pytest.mark.parametrize("form", ("div", "mul", "half_first"))
def test_gelu_erf(winml, tmp_path, form):
    if form == "mul":
        pre = h.make_node("Mul", ["x", "rs2"], ["xs"])
    else:
        pre = h.make_node("Div", ["x", "s2"], ["xs"])
    n = [h.make_node("Add", ["v", "bias"], ["x"]), pre, h.make_node("Erf", ["xs"], ["e"]),
         h.make_node("Add", ["e", "one"], ["e1"])]
    if form == "half_first":
        n += [h.make_node("Mul", ["x", "half"], ["hx"]), h.make_node("Mul", ["hx", "e1"], ["y"])]
    else:
        n += [h.make_node("Mul", ["x", "e1"], ["xe"]), h.make_node("Mul", ["xe", "half"], ["y"])]
    inits = [const("s2", np.float32(np.sqrt(2))), const("rs2", np.float32(1 / np.sqrt(2))), const("one", np.float32(1)),
             const("half", np.float32(0.5)), const("bias", RNG.standard_normal(24).astype(np.float32))]
    m = model(n, [fvi("v", ["b", 24])], [fvi("y", None)], inits)
    ops, _ = run_case(winml, tmp_path, m, {"v": RNG.standard_normal((3, 24)).astype(np.float32)})
    assert ops == {"BiasGelu": 1}, ops


def test_gelu_tanh(winml, tmp_path):
    n = [h.make_node("Add", ["v", "bias"], ["x"]), h.make_node("Mul", ["x", "x"], ["x2"]),
         h.make_node("Mul", ["x", "x2"], ["x3"]), h.make_node("Mul", ["x3", "c"], ["cx3"]),
         h.make_node("Add", ["x", "cx3"], ["in"]), h.make_node("Mul", ["in", "k"], ["kin"]),
         h.make_node("Tanh", ["kin"], ["t"]), h.make_node("Add", ["t", "one"], ["t1"]),
         h.make_node("Mul", ["half", "x"], ["hx"]), h.make_node("Mul", ["hx", "t1"], ["y"])]
    inits = [const("c", np.float32(0.044715)), const("k", np.float32(np.sqrt(2 / np.pi))), const("one", np.float32(1)),
             const("half", np.float32(0.5)), const("bias", RNG.standard_normal(24).astype(np.float32))]
    m = model(n, [fvi("v", ["b", 24])], [fvi("y", None)], inits)
    ops, _ = run_case(winml, tmp_path, m, {"v": RNG.standard_normal((3, 24)).astype(np.float32)})
    assert ops == {"FastGelu": 1}, ops


@pytest.mark.parametrize("alpha", (1.0, 1.702))
def test_quickgelu_silu(winml, tmp_path, alpha):
    n = [h.make_node("Mul", ["x", "a"], ["ax"]), h.make_node("Sigmoid", ["ax"], ["sg"]),
         h.make_node("Mul", ["sg", "x"], ["y"])]
    if alpha == 1.0:
        n = [h.make_node("Sigmoid", ["x"], ["sg"]), h.make_node("Mul", ["x", "sg"], ["y"])]
    m = model(n, [fvi("x", ["b", 24])], [fvi("y", None)], [const("a", np.float32(alpha))])
    ops, _ = run_case(winml, tmp_path, m, {"x": RNG.standard_normal((3, 24)).astype(np.float32)})
    assert ops == {"QuickGelu": 1}, ops


def test_matmul_add_gemm(winml, tmp_path):
    n = [h.make_node("MatMul", ["x", "W"], ["p"]), h.make_node("Add", ["p", "b"], ["y"])]
    m = model(n, [fvi("x", ["n", 16])], [fvi("y", None)],
              [const("W", RNG.standard_normal((16, 8)).astype(np.float32)),
               const("b", RNG.standard_normal(8).astype(np.float32))])
    ops, _ = run_case(winml, tmp_path, m, {"x": RNG.standard_normal((4, 16)).astype(np.float32)})
    assert ops == {"Gemm": 1}, ops


@pytest.mark.parametrize("batch_pos", (False, True))
def test_rotary_rotate_half(winml, tmp_path, batch_pos):
    """q [B, N, S, H] rotated with cos/sin from Cos/Sin(Concat(f, f)), f = positions x inv_freq (the builder's form)."""
    hd = 16
    inv = (1.0 / 10000 ** (np.arange(0, hd, 2) / hd)).astype(np.float32)
    n = [h.make_node("Cast", ["pos"], ["pf"], to=T.FLOAT), h.make_node("Unsqueeze", ["pf", "ax_last"], ["pu"]),
         h.make_node("Mul", ["pu", "inv"], ["fr"]), h.make_node("Concat", ["fr", "fr"], ["emb"], axis=-1),
         h.make_node("Cos", ["emb"], ["c"]), h.make_node("Sin", ["emb"], ["s"]),
         h.make_node("Unsqueeze", ["c", "ax1"], ["c4"]), h.make_node("Unsqueeze", ["s", "ax1"], ["s4"]),
         h.make_node("Mul", ["q", "c4"], ["qc"]),
         h.make_node("Slice", ["q", "zero", "half", "ax_last"], ["q1"]),
         h.make_node("Slice", ["q", "half", "big", "ax_last"], ["q2"]), h.make_node("Neg", ["q2"], ["nq2"]),
         h.make_node("Concat", ["nq2", "q1"], ["rot"], axis=-1), h.make_node("Mul", ["rot", "s4"], ["qs"]),
         h.make_node("Add", ["qc", "qs"], ["y"])]
    inits = [const("inv", inv), const("ax_last", np.array([-1], np.int64)), const("ax1", np.array([1], np.int64)),
             const("zero", np.array([0], np.int64)), const("half", np.array([hd // 2], np.int64)),
             const("big", np.array([2 ** 62], np.int64))]
    pb = "b" if batch_pos else 1
    m = model(n, [fvi("q", ["b", 3, "s", hd]), h.make_tensor_value_info("pos", T.INT64, [pb, "s"])],
              [fvi("y", None)], inits)
    b, s = 2, 5
    pos = np.tile(np.arange(3, 3 + s, dtype=np.int64), (b if batch_pos else 1, 1))
    if batch_pos:
        pos[1] += 7
    ops, _ = run_case(winml, tmp_path, m, {"q": RNG.standard_normal((b, 3, s, hd)).astype(np.float32), "pos": pos})
    assert ops.get("RotaryEmbedding") == 1 and "Neg" not in ops, ops


def test_attention_encoder(winml, tmp_path):
    hid, nh_, hd = 24, 3, 8
    n = []
    for p in "qkv":
        n += [h.make_node("MatMul", ["x", f"W{p}"], [f"{p}m"]), h.make_node("Add", [f"{p}m", f"b{p}"], [f"{p}3"]),
              h.make_node("Reshape", [f"{p}3", "shape4"], [f"{p}4"])]
    n += [h.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
          h.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
          h.make_node("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
          h.make_node("MatMul", ["qh", "kt"], ["sc"]), h.make_node("Div", ["sc", "sqrt_d"], ["scd"]),
          h.make_node("Add", ["scd", "mask"], ["scm"]), h.make_node("Softmax", ["scm"], ["pr"], axis=-1),
          h.make_node("MatMul", ["pr", "vh"], ["ctx"]), h.make_node("Transpose", ["ctx"], ["ct"], perm=[0, 2, 1, 3]),
          h.make_node("Reshape", ["ct", "shape3"], ["y"])]
    inits = [const("shape4", np.array([0, 0, nh_, hd], np.int64)), const("shape3", np.array([0, 0, hid], np.int64)),
             const("sqrt_d", np.float32(np.sqrt(hd)))]
    for p in "qkv":
        inits += [const(f"W{p}", RNG.standard_normal((hid, hid)).astype(np.float32) * 0.3),
                  const(f"b{p}", RNG.standard_normal(hid).astype(np.float32))]
    m = model(n, [fvi("x", ["b", "s", hid]), fvi("mask", ["b", 1, 1, "s"])], [fvi("y", None)], inits)
    mask = np.zeros((2, 1, 1, 6), np.float32)
    mask[1, ..., -2:] = -1e9
    ops, _ = run_case(winml, tmp_path, m, {"x": RNG.standard_normal((2, 6, hid)).astype(np.float32), "mask": mask})
    assert ops.get("Attention") == 1 and ops.get("MatMul", 0) == 0 and "Softmax" not in ops, ops  # packed QKV


def test_static_shape_arithmetic_and_duplicates(winml, tmp_path):
    """Shape/Gather/Unsqueeze/Concat on static dims fold away; duplicate subgraphs and dead nodes go."""
    n = [h.make_node("Shape", ["x"], ["sh"]), h.make_node("Gather", ["sh", "i0"], ["d0"], axis=0),
         h.make_node("Gather", ["sh", "i1"], ["d1"], axis=0), h.make_node("Mul", ["d0", "d1"], ["dd"]),
         h.make_node("Unsqueeze", ["dd", "ax0"], ["du"]), h.make_node("Concat", ["du", "m1"], ["tgt"], axis=0),
         h.make_node("Reshape", ["x", "tgt"], ["x2"]),
         h.make_node("Relu", ["x2"], ["r1"]), h.make_node("Relu", ["x2"], ["r2"]),  # a duplicate
         h.make_node("Add", ["r1", "r2"], ["y"]),
         h.make_node("Exp", ["x"], ["dead"]), h.make_node("Identity", ["y"], ["yi"]),
         h.make_node("Mul", ["yi", "c1"], ["z"]), h.make_node("Mul", ["z", "c1b"], ["w"])]
    inits = [const("i0", np.array(0, np.int64)), const("i1", np.array(1, np.int64)),
             const("ax0", np.array([0], np.int64)), const("m1", np.array([-1], np.int64)),
             const("c1", np.ones((1,), np.float32)), const("c1b", np.ones((1,), np.float32))]
    m = model(n, [fvi("x", [3, 4, 5])], [fvi("w", None)], inits)
    ops, rep = run_case(winml, tmp_path, m, {"x": RNG.standard_normal((3, 4, 5)).astype(np.float32)},
                        "--level", "basic")
    assert ops == {"Reshape": 1, "Relu": 1, "Add": 1}, ops
    assert rep["initializers_after"] == 1
