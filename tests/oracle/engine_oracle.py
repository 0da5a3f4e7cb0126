"""Run one ONNX model in onnxruntime and in the engine (wm_run) on the same inputs and compare.

Shared by the engine oracle tests of the attention / contrib / quantization ops.
"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper
from safetensors.numpy import load_file, save_file

import oracle_util as U

MS = "com.microsoft"


def make_model(nodes, inputs, outputs, initializers=(), opset=21, ms=True, path=None):
    """A model of `nodes`; inputs/outputs are (name, elem_type, shape) with None dims symbolic."""
    def vi(name, et, shape):
        return helper.make_tensor_value_info(name, et, None if shape is None else [
            d if isinstance(d, int) else f"d_{name}_{i}" for i, d in enumerate(shape)])
    g = helper.make_graph(list(nodes), "g", [vi(*i) for i in inputs], [vi(*o) for o in outputs],
                          initializer=list(initializers))
    ops = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(MS, 1)] if ms else [])
    m = helper.make_model(g, opset_imports=ops, ir_version=10)
    if path:
        onnx.save(m, path)
    return m


def ort_run(model_path, feeds, threads=1):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(str(model_path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(None, feeds)))


def wm_run(build_dir, model_path, feeds, tmp, threads=2, repeat=2, tag="run"):
    """Runs the engine; --repeat checks bit-identical reruns. Returns {output name: array}."""
    inp = os.path.join(str(tmp), f"{tag}_in.safetensors")
    out = os.path.join(str(tmp), f"{tag}_out.safetensors")
    save_file({k: np.array(v, order="C", copy=True) for k, v in feeds.items()}, inp)
    r = U.run([U.binary(build_dir, "wm_run"), model_path, inp, out, "--threads", threads, "--repeat", repeat])
    assert r.returncode == 0, U.describe(r)
    return load_file(out)


def compare(ref, got, atol=1e-4, rows=None, what=""):
    """Max abs diff of every output <= atol; rows: {name: index expression} to compare a part only."""
    worst = {}
    for k, want in ref.items():
        assert k in got, f"{what}: engine output {k} missing"
        g = got[k]
        assert g.shape == want.shape, f"{what}: {k} shape {g.shape} != {want.shape}"
        assert g.dtype == want.dtype, f"{what}: {k} dtype {g.dtype} != {want.dtype}"
        w = want
        if rows and k in rows:
            g, w = g[rows[k]], w[rows[k]]
        if w.dtype.kind in "iub":
            assert np.array_equal(g, w), f"{what}: {k} differs ({int(np.sum(g != w))} elements)"
            worst[k] = 0.0
            continue
        d = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))) if w.size else 0.0
        assert np.isfinite(g).all() == np.isfinite(w).all(), f"{what}: {k} non-finite values differ"
        assert d <= atol, f"{what}: {k} max abs diff {d:.3g} > {atol}"
        worst[k] = d
    return worst


def q8_rows(A, bs, qmax=127):
    """A as accuracy_level 4 sees it: each row's blocks of bs (the last one partial) quantized to int8 with
    amax / 127 (float32, round half to even, clamped to +-127) and multiplied back, in numpy. qmax=16383: the
    15-bit activations of accuracy_level 2 / 3 below 8 rows."""
    out = np.empty_like(A)
    for k0 in range(0, A.shape[1], bs):
        x = A[:, k0:k0 + bs]
        amax = np.abs(x).max(axis=1, keepdims=True).astype(np.float32)
        inv = np.where(amax > 0, np.float32(qmax) / np.where(amax > 0, amax, 1), 0).astype(np.float32)
        q = np.clip(np.rint(x * inv), -qmax, qmax).astype(np.float32)
        out[:, k0:k0 + bs] = q * (amax / np.float32(qmax))
    return out


def check(build_dir, tmp, model, feeds, atol=1e-4, rows=None, threads=2, what="", outputs=None, ref=None):
    """Saves model, runs both, compares; returns the max abs diff per output.
    ref=(model, feeds): onnxruntime runs this equivalent model instead (a layout its CPU kernels lack)."""
    path = os.path.join(str(tmp), f"{what or 'model'}.onnx".replace("/", "_"))
    onnx.save(model, path)
    if ref is not None:
        rpath = path[:-5] + "_ref.onnx"
        onnx.save(ref[0], rpath)
        ref = ort_run(rpath, ref[1])
    else:
        ref = ort_run(path, feeds)
    if outputs is not None:
        ref = {k: v for k, v in ref.items() if k in outputs}
    got = wm_run(build_dir, path, feeds, tmp, threads=threads, tag=os.path.basename(path)[:-5])
    return compare(ref, got, atol, rows, what)
