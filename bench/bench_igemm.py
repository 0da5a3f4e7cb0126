#!/usr/bin/env python3
"""int8 GEMM benchmark (issue 34): winml's MatMulInteger kernel vs onnxruntime, same shapes, same run, 1 thread.

  .venv/bin/python bench/bench_igemm.py [--builds OLD,build] [--rounds 3] [--min-ms 200] [--shapes MxKxN,...]
                                        [--bdist 7bit|normal|uniform] [--no-ort]

For each shape M x K x N (uint8 A with zero point 128, int8 B prepacked like a weight):
  ours     tests/tools/wm_gemmbench igemm M K N --packed (per --builds entry: old vs new side by side)
  ort_mmi  a one-node MatMulInteger (B an initializer, MLAS prepacks it), uint8 A input
  ort_dqmm a one-node com.microsoft DynamicQuantizeMatMul (float A: includes A's quantization)
  ort_dql  a one-node DynamicQuantizeLinear on the float A alone (the quantization's cost)
  --engine DIR: our engine (winml perf, CPU ms per run) on the same DynamicQuantizeMatMul / DynamicQuantizeLinear
               models, per build
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


def weights(k, n, rng, bdist):
    """int8 B [k, n] as wm_gemmbench --bdist makes it: 7bit [-64, 64], normal (per-column max 127), uniform"""
    if bdist == "7bit":
        return rng.integers(-64, 65, size=(k, n), dtype=np.int8)
    if bdist == "normal":
        w = rng.standard_normal((k, n))
        return np.round(w * 127 / np.abs(w).max(axis=0)).astype(np.int8)
    return rng.integers(-128, 128, size=(k, n), dtype=np.int8)


def one_node(kind, k, n, rng, bdist="7bit"):
    """the serialized one-node model of kind mmi / dqmm / dql (B: weights(bdist))"""
    from onnx import TensorProto, helper, numpy_helper
    b = weights(k, n, rng, bdist)
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
    return model.SerializeToString()


def ort_session(model):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def ort_ms(sess, feed, min_ms):
    sess.run(None, feed)
    n, t0 = 0, time.process_time()
    while True:
        sess.run(None, feed)
        n += 1
        el = (time.process_time() - t0) * 1e3
        if el >= min_ms and n >= 3:
            return el / n


def engine_ms(build, path, m, min_ms):
    """our engine on a one-node model (winml perf, 1 thread): CPU ms per run, from the process CPU time of a
    run of many iterations less that of one (load and start-up cancel; wall time on this shared machine does not)"""
    import resource

    def cpu(iters):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([os.path.join(ROOT, build, "winml"), "perf", "-m", path, "--threads", "1", "--dim", f"M={m}",
                        "--warmup", "1", "--iterations", str(iters), "-f", "json"], check=True, capture_output=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * 1e3

    n = 21
    return (cpu(n) - cpu(1)) / (n - 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--builds", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-ms", type=float, default=200)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--engine", default="", help="a folder: also time our engine (winml perf, 1 thread, fastest run) "
                    "on the one-node DynamicQuantizeMatMul and DynamicQuantizeLinear models written there")
    ap.add_argument("--bdist", default="7bit", help="B's bytes for ours (wm_gemmbench --bdist): 7bit (what winml's int8 "
                    "builds give: reduce_range), normal (full-range int8), uniform (the most saturating pairs)")
    args = ap.parse_args()
    builds = args.builds.split(",")
    rng = np.random.default_rng(0)
    print("%-14s " % "MxKxN" + " ".join("%12s" % b[-12:] for b in builds) +
          ("" if args.no_ort else " %9s %9s %9s %8s" % ("ort_mmi", "ort_dqmm", "ort_dql", "mmi/ours")))
    for s in args.shapes.split(","):
        m, k, n = (int(x) for x in s.split("x"))
        models = {kd: one_node(kd, k, n, rng, args.bdist) for kd in ("mmi", "dqmm", "dql")}
        sess = {} if args.no_ort else {kd: ort_session(models[kd]) for kd in models}
        paths = {}
        if args.engine:
            for kd in ("dqmm", "dql"):
                paths[kd] = os.path.join(args.engine, f"{kd}_{k}x{n}.onnx")
                with open(paths[kd], "wb") as f:
                    f.write(models[kd])
        a8 = rng.integers(0, 256, size=(m, k), dtype=np.uint8)
        af = rng.standard_normal((m, k)).astype(np.float32)
        res = {key: [] for key in builds + list(sess) + [f"{b}:{kd}" for b in builds for kd in paths]}
        for _ in range(args.rounds):
            for b in builds:
                res[b].append(ours(b, m, k, n, args.min_ms, args.bdist))
                for kd, p in paths.items():
                    res[f"{b}:{kd}"].append(engine_ms(b, p, m, args.min_ms))
            for kd, se in sess.items():
                res[kd].append(ort_ms(se, {"A": a8 if kd == "mmi" else af}, args.min_ms))
        med = {key: statistics.median(v) for key, v in res.items()}
        line = "%-14s " % s + " ".join("%12.3f" % med[b] for b in builds)
        if sess:
            line += " %9.3f %9.3f %9.3f %8.2f" % (med["mmi"], med["dqmm"], med["dql"], med["mmi"] / med[builds[-1]])
        for b in builds:
            for kd in paths:
                line += "  %s %s %.3f" % (b[-12:], kd, med[f"{b}:{kd}"])
        print(line, flush=True)


if __name__ == "__main__":
    main()
