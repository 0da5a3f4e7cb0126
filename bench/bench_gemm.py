#!/usr/bin/env python3
"""SGEMM benchmark: winml kernels vs onnxruntime (MLAS) vs numpy (OpenBLAS), same shapes, same process run.

  .venv/bin/python bench/bench_gemm.py [--build build] [--threads 1,2] [--rounds 3] [--min-ms 300]
                                       [--shapes all|MxKxN[xB],...] [-o results.json]

For each shape M x K x N and thread count:
  ours   tests/tools/wm_gemmbench sgemm M K N --packed (B prepacked once, like a MatMul weight)
  ort    a one-node ONNX MatMul (B an initializer, so MLAS prepacks it too), intra_op_num_threads = t
  numpy  A @ B with OpenBLAS limited to t threads (threadpoolctl)
Batched shapes (attention, per head, B heads) use non-prepacked B everywhere: ORT MatMul with two
inputs [B,M,K] x [B,K,N], numpy batched matmul, ours sgemm_batch.

The machine is shared (other jobs run on the same 2 cores), so every figure is a median over runs and
over --rounds rounds in which ours/ort/numpy alternate; "cpu" figures (1 thread only) divide by the
thread's CPU time instead of wall time, which removes preemption by other processes; "best" figures
use the fastest run of all rounds (the least disturbed one). Ratios in the same run are the figures to
trust. Also reports the FMA peak (wm_gemmbench peak).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SHAPES = [  # (M, K, N, batch, label)
    (128, 384, 384, 1, "bert-small qkv"),
    (128, 384, 1536, 1, "bert-small ffn1"),
    (128, 1536, 384, 1, "bert-small ffn2"),
    (512, 384, 1536, 1, "seq512 ffn1"),
    (128, 768, 768, 1, "bert-base qkv"),
    (128, 768, 3072, 1, "bert-base ffn1"),
    (197, 768, 768, 1, "vit-b/16"),
    (3136, 576, 64, 1, "resnet conv im2col"),
    (784, 1152, 128, 1, "resnet conv im2col"),
    (1, 896, 4864, 1, "decode gemv up"),
    (1, 4864, 896, 1, "decode gemv down"),
    (128, 64, 128, 12, "attn QK^T/head x12"),
    (128, 128, 64, 12, "attn PV/head x12"),
    (512, 32, 512, 12, "attn seq512 x12"),
]


def ort_session(M, K, N, batch, threads):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    if batch == 1:
        B = (rng.random((K, N), dtype=np.float32) - 0.5)
        g = helper.make_graph([helper.make_node("MatMul", ["A", "B"], ["C"])], "g",
                              [helper.make_tensor_value_info("A", TensorProto.FLOAT, [M, K])],
                              [helper.make_tensor_value_info("C", TensorProto.FLOAT, [M, N])],
                              [numpy_helper.from_array(B, "B")])
    else:
        g = helper.make_graph([helper.make_node("MatMul", ["A", "B"], ["C"])], "g",
                              [helper.make_tensor_value_info("A", TensorProto.FLOAT, [batch, M, K]),
                               helper.make_tensor_value_info("B", TensorProto.FLOAT, [batch, K, N])],
                              [helper.make_tensor_value_info("C", TensorProto.FLOAT, [batch, M, N])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feeds = {"A": (rng.random((M, K) if batch == 1 else (batch, M, K), dtype=np.float32) - 0.5)}
    if batch > 1:
        feeds["B"] = rng.random((batch, K, N), dtype=np.float32) - 0.5
    return s, feeds


def time_fn(fn, min_ms):
    """median wall ms, median thread-CPU ms, fastest wall ms"""
    fn()
    wall, cpu = [], []
    start = time.perf_counter()
    while len(wall) < 5 or (time.perf_counter() - start) * 1e3 < min_ms:
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        fn()
        wall.append((time.perf_counter_ns() - t0) / 1e6)
        cpu.append((time.thread_time_ns() - c0) / 1e6)
        if len(wall) >= 2000:
            break
    return statistics.median(wall), statistics.median(cpu), min(wall)


def ours(build, M, K, N, batch, threads, min_ms):
    argv = [os.path.join(build, "wm_gemmbench"), "sgemm", str(M), str(K), str(N), "--threads", str(threads),
            "--min-ms", str(min_ms)]
    argv += ["--batch", str(batch)] if batch > 1 else ["--packed"]
    r = json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)
    return r["median_ms"], r["cpu_ms"], r["min_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-ms", type=float, default=300)
    ap.add_argument("--shapes", default="all")
    ap.add_argument("-o", "--output")
    args = ap.parse_args()
    from threadpoolctl import threadpool_limits

    shapes = SHAPES
    if args.shapes not in ("all",):
        shapes = []
        for s in args.shapes.split(","):
            parts = s.split("x")
            M, K, N = map(int, parts[:3])
            shapes.append((M, K, N, int(parts[3]) if len(parts) > 3 else 1, "custom"))
    threads = [int(t) for t in args.threads.split(",")]
    bench = os.path.join(args.build, "wm_gemmbench")
    peak = {t: json.loads(subprocess.run([bench, "peak", "--threads", str(t)], check=True, capture_output=True,
                                         text=True).stdout)["gflops"] for t in threads}
    peak_cpu = json.loads(subprocess.run([bench, "peak"], check=True, capture_output=True,
                                         text=True).stdout)["gflops_cpu"]
    print(f"FMA peak (wall): " + ", ".join(f"{t} thread(s) {peak[t]:.1f} GFLOP/s" for t in threads) +
          f"; 1 thread by CPU time {peak_cpu:.1f} GFLOP/s")
    rows = []
    hdr = f"{'shape MxKxN (batch)':28s} {'thr':>3s} {'ours':>7s} {'ort':>7s} {'numpy':>7s} {'ours/ort':>8s}" \
          f" {'best:ours':>9s} {'ort':>7s} {'numpy':>7s} {'ratio':>6s} {'ours cpu':>8s} {'ort cpu':>8s} {'cpu ratio':>9s}"
    print(hdr)
    for (M, K, N, batch, label) in shapes:
        flops = 2.0 * M * N * K * batch
        for t in threads:
            sess, feeds = ort_session(M, K, N, batch, t)
            rng = np.random.default_rng(2)
            a = rng.random((batch, M, K) if batch > 1 else (M, K), dtype=np.float32)
            b = rng.random((batch, K, N) if batch > 1 else (K, N), dtype=np.float32)
            c = np.empty((batch, M, N) if batch > 1 else (M, N), dtype=np.float32)
            res = {"ours": [], "ort": [], "numpy": [], "ours_cpu": [], "ort_cpu": [], "ours_min": [], "ort_min": [],
                   "numpy_min": []}
            for _ in range(args.rounds):
                w, cp, mn = ours(args.build, M, K, N, batch, t, args.min_ms)
                res["ours"].append(w)
                res["ours_cpu"].append(cp)
                res["ours_min"].append(mn)
                w, cp, mn = time_fn(lambda: sess.run(None, feeds), args.min_ms)
                res["ort"].append(w)
                res["ort_cpu"].append(cp)
                res["ort_min"].append(mn)
                with threadpool_limits(limits=t):
                    w, _, mn = time_fn(lambda: np.matmul(a, b, out=c), args.min_ms)
                res["numpy"].append(w)
                res["numpy_min"].append(mn)
            med = {k: statistics.median(v) if not k.endswith("_min") else min(v) for k, v in res.items()}
            g = {k: flops / v / 1e6 for k, v in med.items()}
            row = {"M": M, "K": K, "N": N, "batch": batch, "label": label, "threads": t,
                   "gflops": {k: round(v, 2) for k, v in g.items()},
                   "ratio_ours_ort": round(g["ours"] / g["ort"], 3),
                   "ratio_ours_ort_min": round(g["ours_min"] / g["ort_min"], 3),
                   "ratio_ours_ort_cpu": round(g["ours_cpu"] / g["ort_cpu"], 3) if t == 1 else None}
            rows.append(row)
            cpu = f" {g['ours_cpu']:8.1f} {g['ort_cpu']:8.1f} {g['ours_cpu'] / g['ort_cpu']:9.2f}" if t == 1 else ""
            best = f" {g['ours_min']:9.1f} {g['ort_min']:7.1f} {g['numpy_min']:7.1f} {g['ours_min'] / g['ort_min']:6.2f}"
            print(f"{f'{M}x{K}x{N}' + (f' ({batch})' if batch > 1 else ''):28s} {t:3d} {g['ours']:7.1f} "
                  f"{g['ort']:7.1f} {g['numpy']:7.1f} {g['ours'] / g['ort']:8.2f}{best}{cpu}", flush=True)
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"peak_gflops": peak, "peak_gflops_cpu_1t": peak_cpu, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
