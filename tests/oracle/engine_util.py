"""Runs ONNX models in our engine (tests/tools/wm_run) and in onnxruntime on the same inputs.

engine_run(build_dir, model, feeds, tmp) -> (outputs dict, stats dict or None)
ort_run(model, feeds) -> outputs dict
Inputs and outputs travel through safetensors files, so no Python binding is needed.
"""
import json
import os
import subprocess

import numpy as np
from safetensors.numpy import load_file, save_file


def engine_run(build_dir, model, feeds, tmp, threads=0, repeat=1, extra=()):
    tmp = str(tmp)
    fin, fout = os.path.join(tmp, "wm_in.safetensors"), os.path.join(tmp, "wm_out.safetensors")
    save_file({k: np.ascontiguousarray(v) for k, v in feeds.items()}, fin)
    argv = [os.path.join(build_dir, "wm_run"), str(model), fin, fout, "--stats", "--repeat", str(repeat)]
    if threads:
        argv += ["--threads", str(threads)]
    argv += list(extra)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise AssertionError(f"wm_run failed ({r.returncode}): {r.stderr.strip()}")
    stats = json.loads(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else None
    return load_file(fout), stats


def ort_run(model, feeds, optimized=True):
    import onnxruntime as ort
    so = ort.SessionOptions()
    if not optimized:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(None, feeds)))


def max_abs_diff(a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    assert a.shape == b.shape, f"shape {a.shape} vs {b.shape}"
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def assert_close(ours, ref, atol=1e-4, label=""):
    assert set(ours) == set(ref), f"{label}: outputs {sorted(ours)} vs {sorted(ref)}"
    worst = {}
    for k in ref:
        assert ours[k].dtype == ref[k].dtype, f"{label}: {k} dtype {ours[k].dtype} vs {ref[k].dtype}"
        d = max_abs_diff(ours[k], ref[k])
        worst[k] = d
        assert d <= atol, f"{label}: output {k} differs by {d} (> {atol})"
    return worst


def pixel_outputs(model, names):
    """model wrapped for torch.onnx.export: pixel_values in, the named outputs out as a tuple (the exporter needs
    tensors, not a ModelOutput)."""
    import torch

    class _Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, pixel_values):
            out = self.model(pixel_values=pixel_values)
            return tuple(getattr(out, n) for n in names)

    return _Wrap()
