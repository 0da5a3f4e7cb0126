#!/usr/bin/env python3
"""Memory bandwidth and decode GEMV benchmark: winml kernels vs onnxruntime, same process run.

  .venv/bin/python bench/bench_membw.py [--build build] [--threads 1,2] [--rounds 3] [--min-ms 300]
                                        [--shapes 896x4864,4864x896,896x151936] [--types f32,f16,q8,q8a,q4,q4a]
                                        [-o results.json]

1. Read bandwidth: wm_gemmbench membw (streaming AVX2 sum over a 1 GiB buffer), 1 and 2 threads.
2. GEMV y[1,N] = x[1,K] @ W[K,N] for the decode shapes of Qwen2.5-0.5B, per weight type:
     f32 (prepacked fp32), f16 (IEEE half [N,K]), q8 / q4 (MatMulNBits 8 / 4 bit, block 32, fp32
     activations), q8a / q4a (accuracy_level 4: int8 activations).
   "cold": the benchmark cycles over enough weight copies to exceed 512 MiB, so every run streams
   its weights from DRAM: GB/s = weight bytes / time, compared with the measured read bandwidth.
   "hot": one copy (cache-resident when it fits the 32 MiB L3), the same as onnxruntime's loop.
   onnxruntime: a one-node model (MatMul with an fp32 initializer, or com.microsoft MatMulNBits
   with block 32 and the same accuracy level), intra_op_num_threads = t; it has no fp16 CPU path.
The machine is shared: each figure is the median over runs and rounds (ours and ort alternate);
"cpu" figures divide by the slowest share's thread CPU time (no preemption by other processes).
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
BYTES = {"f32": 4.0, "f16": 2.0, "q8": 1.0 + 4 / 32, "q8a": 1.0 + 4 / 32, "q4": 0.5 + 4 / 32, "q4a": 0.5 + 4 / 32}


def bench(build, *args):
    r = subprocess.run([os.path.join(build, "wm_gemmbench"), *map(str, args)], check=True, capture_output=True,
                       text=True)
    return json.loads(r.stdout)


def ort_gemv(K, N, typ, threads):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    if typ == "f32":
        W = rng.random((K, N), dtype=np.float32) - 0.5
        node = helper.make_node("MatMul", ["x", "W"], ["y"])
        inits = [numpy_helper.from_array(W, "W")]
        ops = [("", 17)]
    elif typ in ("q8", "q8a", "q4", "q4a"):
        bits, bs = int(typ[1]), 32
        kb = (K + bs - 1) // bs
        B = rng.integers(0, 256, (N, kb, bs * bits // 8), dtype=np.uint8)
        S = (rng.random((N, kb), dtype=np.float32) * 0.02).astype(np.float32)
        node = helper.make_node("MatMulNBits", ["x", "B", "S"], ["y"], domain="com.microsoft", K=K, N=N, bits=bits,
                                block_size=bs, accuracy_level=4 if typ.endswith("a") else 0)
        inits = [numpy_helper.from_array(B, "B"), numpy_helper.from_array(S, "S")]
        ops = [("", 17), ("com.microsoft", 1)]
    else:
        return None
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, N])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in ops])
    m.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    x = rng.random((1, K), dtype=np.float32)
    return lambda: s.run(None, {"x": x})


def time_fn(fn, min_ms):
    fn()
    wall, cpu = [], []
    start = time.perf_counter()
    while len(wall) < 5 or (time.perf_counter() - start) * 1e3 < min_ms:
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        fn()
        wall.append((time.perf_counter_ns() - t0) / 1e6)
        cpu.append((time.thread_time_ns() - c0) / 1e6)
        if len(wall) >= 5000:
            break
    return statistics.median(wall), statistics.median(cpu)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-ms", type=float, default=300)
    ap.add_argument("--shapes", default="896x4864,4864x896,896x151936")
    ap.add_argument("--types", default="f32,f16,q8,q8a,q4,q4a")
    ap.add_argument("--cold-mb", type=float, default=512)
    ap.add_argument("-o", "--output")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    out = {"membw": {}, "gemv": []}
    for t in threads:
        rs = [bench(args.build, "membw", "--threads", t, "--mb", 1024, "--min-ms", 1000, "--reps", 3)
              for _ in range(args.rounds)]
        out["membw"][t] = {"gbps": statistics.median(r["gbps"] for r in rs),
                           "gbps_cpu": statistics.median(r["gbps_cpu"] for r in rs)}
        print(f"read bandwidth, {t} thread(s): {out['membw'][t]['gbps']:.1f} GB/s wall, "
              f"{out['membw'][t]['gbps_cpu']:.1f} GB/s by CPU time", flush=True)
    print(f"{'K x N':12s} {'type':5s} {'thr':>3s} {'cold':>7s} {'cold cpu':>8s} {'%bw cpu':>7s} {'hot':>7s} "
          f"{'ort hot':>7s} {'hot/ort':>7s}   (GB/s of weights)")
    for shape in args.shapes.split(","):
        K, N = map(int, shape.split("x"))
        for typ in args.types.split(","):
            wb = BYTES[typ] * K * N
            gtype = "f16t" if typ == "f16" else typ
            for t in threads:
                fn = ort_gemv(K, N, typ, t)
                res = {"cold": [], "cold_cpu": [], "hot": [], "ort": []}
                for _ in range(args.rounds):
                    r = bench(args.build, "gemv", gtype, K, N, "--threads", t, "--cold-mb", args.cold_mb,
                              "--min-ms", args.min_ms)
                    res["cold"].append(r["gbps"])
                    res["cold_cpu"].append(r["gbps_cpu"])
                    r = bench(args.build, "gemv", gtype, K, N, "--threads", t, "--min-ms", args.min_ms)
                    res["hot"].append(r["gbps"])
                    if fn:
                        w, _ = time_fn(fn, args.min_ms)
                        res["ort"].append(wb / w / 1e6)
                med = {k: statistics.median(v) if v else None for k, v in res.items()}
                bw = out["membw"][t]["gbps_cpu"]
                row = {"K": K, "N": N, "type": typ, "threads": t, "weight_bytes": wb, **med,
                       "pct_bw_cpu": 100 * med["cold_cpu"] / bw}
                out["gemv"].append(row)
                ort_s = f"{med['ort']:7.1f} {med['hot'] / med['ort']:7.2f}" if med["ort"] else f"{'-':>7s} {'-':>7s}"
                print(f"{shape:12s} {typ:5s} {t:3d} {med['cold']:7.1f} {med['cold_cpu']:8.1f} "
                      f"{row['pct_bw_cpu']:6.0f}% {med['hot']:7.1f} {ort_s}", flush=True)
    if args.output:
        with open(args.output, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
