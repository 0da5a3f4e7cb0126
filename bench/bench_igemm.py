#!/usr/bin/env python3
"""int8 GEMM benchmark (issue 34): winml's MatMulInteger kernel vs onnxruntime, same shapes, same run, 1 thread.

  .venv/bin/python bench/bench_igemm.py [--builds OLD,build] [--rounds 3] [--min-ms 200] [--shapes MxKxN,...]
                                        [--bdist 7bit|normal|uniform] [--no-ort]

For each shape M x K x N (uint8 A with zero point 128, int8 B prepacked like a weight):
  ours     tests/tools/wm_gemmbench igemm M K N --packed (per --builds entry: old vs new side by side)
  ort_mmi  a one-node MatMulInteger (B an initializer, MLAS prepacks it), uint8 A input
  ort_dqmm a one-node com.microsoft DynamicQuantizeMatMul (float A: includes A's quantization)
  ort_dql  a one-node DynamicQuantizeLinear on the float A alone (the quantization's cost)
Figures are thread CPU ms (ours: the share's thread CPU time; ort: process CPU time over the runs), the
median over --rounds rounds in which the engines alternate: the machine is shared, CPU time removes
preemption but not cache / SMT interference. Ratios in one run are the figures to trust.
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = ["64x384x1536", "64x1536x384", "1500x384x384", "1500x384x1536", "1500x1536x384", "1500x512x512",
          "1500x512x2048", "1500x2048x512", "64x512x2048", "64x2048x512", "64x768x768", "64x768x3072",
          "64x3072x768", "1x768x768", "1x768x3072", "1x3072x768", "1x512x2048"]


def ours(build, m, k, n, min_ms, bdist):
    cmd = [os.path.join(ROOT, build, "wm_gemmbench"), "igemm", str(m), str(k), str(n), "--packed", "--min-ms", str(min_ms)]
    r = subprocess.run(cmd + ["--bdist", bdist], capture_output=True, text=True)
    if r.returncode == 2:  # a build from before --bdist (its kernel's speed does not depend on the values)
        r = subprocess.run(cmd, capture_output=True, text=True)
    return json.loads(r.stdout)["cpu_ms"]


def ort_session(kind, k, n, rng):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import onnxruntime as ort
    b = rng.integers(-128, 128, size=(k, n), dtype=np.int8)
    inits, nodes = [], []
    if kind == "mmi":
        inits = [numpy_helper.from_array(b, "B"), numpy_helper.from_array(np.array(128, np.uint8), "za"),
                 numpy_helper.from_array(np.array(0, np.int8), "zb")]
        nodes = [helper.make_node("MatMulInteger", ["A", "B", "za", "zb"], ["Y"])]
        ins = [helper.make_tensor_value_info("A", TensorProto.UINT8, ["M", k])]
        outs = [helper.make_tensor_value_info("Y", TensorProto.INT32, ["M", n])]
    elif kind == "dqmm":
        inits = [numpy_helper.from_array(b, "B"), numpy_helper.from_array(np.full(n, 0.01, np.float32), "bs"),
                 numpy_helper.from_array(np.zeros(n, np.int8), "zb")]
        nodes = [helper.make_node("DynamicQuantizeMatMul", ["A", "B", "bs", "zb"], ["Y"], domain="com.microsoft")]
        ins = [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["M", k])]
        outs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["M", n])]
    else:
        nodes = [helper.make_node("DynamicQuantizeLinear", ["A"], ["Y", "s", "z"])]
        ins = [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["M", k])]
        outs = [helper.make_tensor_value_info("Y", TensorProto.UINT8, ["M", k]),
                helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
                helper.make_tensor_value_info("z", TensorProto.UINT8, [])]
    g = helper.make_graph(nodes, "g", ins, outs, inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def ort_ms(sess, feed, min_ms):
    sess.run(None, feed)
    n, t0 = 0, time.process_time()
    while True:
        sess.run(None, feed)
        n += 1
        el = (time.process_time() - t0) * 1e3
        if el >= min_ms and n >= 3:
            return el / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--builds", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-ms", type=float, default=200)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--bdist", default="7bit", help="B's bytes for ours (wm_gemmbench --bdist): 7bit (what winml's int8 "
                    "builds give: reduce_range), normal (full-range int8), uniform (the most saturating pairs)")
    args = ap.parse_args()
    builds = args.builds.split(",")
    rng = np.random.default_rng(0)
    print("%-14s " % "MxKxN" + " ".join("%12s" % b[-12:] for b in builds) +
          ("" if args.no_ort else " %9s %9s %9s %8s" % ("ort_mmi", "ort_dqmm", "ort_dql", "mmi/ours")))
    for s in args.shapes.split(","):
        m, k, n = (int(x) for x in s.split("x"))
        sess = {} if args.no_ort else {kd: ort_session(kd, k, n, rng) for kd in ("mmi", "dqmm", "dql")}
        a8 = rng.integers(0, 256, size=(m, k), dtype=np.uint8)
        af = rng.standard_normal((m, k)).astype(np.float32)
        res = {key: [] for key in builds + list(sess)}
        for _ in range(args.rounds):
            for b in builds:
                res[b].append(ours(b, m, k, n, args.min_ms, args.bdist))
            for kd, se in sess.items():
                res[kd].append(ort_ms(se, {"A": a8 if kd == "mmi" else af}, args.min_ms))
        med = {key: statistics.median(v) for key, v in res.items()}
        line = "%-14s " % s + " ".join("%12.3f" % med[b] for b in builds)
        if sess:
            line += " %9.3f %9.3f %9.3f %8.2f" % (med["mmi"], med["dqmm"], med["dql"], med["mmi"] / med[builds[-1]])
        print(line, flush=True)


if __name__ == "__main__":
    main()
