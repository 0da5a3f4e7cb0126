"""Norm ops row by row against onnxruntime: (Skip)LayerNormalization and SkipSimplifiedLayerNormalization, one
node each (or after an Add, so that the norm's input is an intermediate the engine may overwrite in place).

The rows of float32 tensors are read and written where they lie (the skip add reads the input row, the
normalized row goes straight into the output); float16 rows go through the float32 buffers. Rows of an odd
length (387: whole vectors and a tail) and a skip broadcast over the batch exercise the row offsets; the
Skip forms' four outputs (output, mean, inv_std_var, input_skip_bias_sum) are all compared.
"""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from engine_oracle import MS, check, make_model

B, S, H = 2, 5, 387


def rnd(*shape, scale=1.0, seed=0):
    return (np.random.default_rng(seed + len(shape) * 7 + shape[-1]).standard_normal(shape) * scale).astype(
        np.float32)


@pytest.mark.parametrize("half", [False, True])
@pytest.mark.parametrize("skip_shape", [(B, S, H), (S, H)])
def test_skip_layernorm(tmp_path, build_dir, half, skip_shape):
    et, nt = (TP.FLOAT16, np.float16) if half else (TP.FLOAT, np.float32)
    inits = [numpy_helper.from_array(a.astype(nt), n) for a, n in
             ((rnd(H, seed=1) + 1.0, "gamma"), (rnd(H, seed=2), "beta"), (rnd(H, seed=3, scale=0.5), "bias"))]
    node = helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"],
                            ["y", "mean", "inv_std", "sum"], domain=MS, epsilon=1e-5)
    outs = [("y", et, [B, S, H]), ("mean", TP.FLOAT, None), ("inv_std", TP.FLOAT, None), ("sum", et, [B, S, H])]
    m = make_model([node], [("x", et, [B, S, H]), ("skip", et, list(skip_shape))], outs, inits)
    feeds = {"x": (rnd(B, S, H, scale=2.0) + 0.5).astype(nt), "skip": rnd(*skip_shape, seed=5).astype(nt)}
    check(build_dir, tmp_path, m, feeds, atol=1e-2 if half else 1e-4,
          what=f"skipln_{'f16' if half else 'f32'}_{len(skip_shape)}d")


def test_skip_simplified_layernorm(tmp_path, build_dir):
    inits = [numpy_helper.from_array(rnd(H, seed=1) + 1.0, "gamma")]
    node = helper.make_node("SkipSimplifiedLayerNormalization", ["x", "skip", "gamma"], ["y"], domain=MS,
                            epsilon=1e-6)
    m = make_model([node], [("x", TP.FLOAT, [B, S, H]), ("skip", TP.FLOAT, [B, S, H])], [("y", TP.FLOAT, [B, S, H])],
                   inits)
    check(build_dir, tmp_path, m, {"x": rnd(B, S, H, scale=3.0), "skip": rnd(B, S, H, seed=5)}, what="skipsln")


@pytest.mark.parametrize("half", [False, True])
def test_layernorm_after_add(tmp_path, build_dir, half):
    """LayerNormalization of an Add's result (a buffer the engine may reuse for the output), with its Mean and
    InvStdDev outputs; axis -1 and axis 1 (rows of S * H)."""
    et, nt = (TP.FLOAT16, np.float16) if half else (TP.FLOAT, np.float32)
    for axis in (-1, 1):
        shp = [H] if axis == -1 else [S, H]
        inits = [numpy_helper.from_array((rnd(*shp, seed=1) + 1.0).astype(nt), "gamma"),
                 numpy_helper.from_array(rnd(*shp, seed=2).astype(nt), "beta")]
        nodes = [helper.make_node("Add", ["x", "x2"], ["t"]),
                 helper.make_node("LayerNormalization", ["t", "gamma", "beta"], ["y", "mean", "inv_std"], axis=axis,
                                  epsilon=1e-5)]
        outs = [("y", et, [B, S, H]), ("mean", TP.FLOAT, None), ("inv_std", TP.FLOAT, None)]
        m = make_model(nodes, [("x", et, [B, S, H]), ("x2", et, [B, S, H])], outs, inits, ms=False)
        feeds = {"x": rnd(B, S, H, scale=2.0).astype(nt), "x2": (rnd(B, S, H, seed=4) + 1.0).astype(nt)}
        check(build_dir, tmp_path, m, feeds, atol=1e-2 if half else 1e-4,
              what=f"ln_{'f16' if half else 'f32'}_axis{axis}")
