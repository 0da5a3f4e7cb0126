#!/usr/bin/env python3
"""One decode step of int4 builds in onnxruntime and in winml (issue 31): 1 new token after --past cached
positions (default 128), --threads threads (default 2), the median of --iterations timed steps after --warmup.

onnxruntime: an InferenceSession (CPUExecutionProvider, intra_op_num_threads = --threads, sequential) on each
build's model.onnx, fed input_ids [1, 1], attention_mask [1, past + 1], position_ids [[past]] when the model takes
them, and past_key_values.* of seeded random floats [1, kv_heads, past, head_dim]. winml: `winml perf -m BUILD
--seq-len 1 --past-len PAST --threads N --no-llm -f json` (the same shapes; its p50 latency). Prints one table:
ms per step in each engine, and each build's ratio to the first build (the baseline) in the same engine.

    python bench/bench_int4_decode.py BUILD [BUILD ...] [--winml build/winml] [--past 128] [--threads 2]
Figures only: nothing is asserted.
"""
import argparse
import json
import os
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ort_step_ms(build, past, threads, warmup, iters, seed=0):
    import numpy as np
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    s = ort.InferenceSession(os.path.join(build, "model.onnx"), so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in s.get_inputs():
        if i.name == "input_ids":
            feeds[i.name] = np.asarray([[42]], np.int64)
        elif i.name == "attention_mask":
            feeds[i.name] = np.ones((1, past + 1), np.int64)
        elif i.name == "position_ids":
            feeds[i.name] = np.asarray([[past]], np.int64)
        elif i.name.startswith("past_key_values"):
            feeds[i.name] = rng.standard_normal((1, i.shape[1], past, i.shape[3])).astype(np.float32)
        else:
            raise SystemExit(f"{build}: input '{i.name}' is not a decoder's (input_ids, attention_mask, "
                             f"position_ids, past_key_values.*)")
    for _ in range(warmup):
        s.run(["logits"], feeds)
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        s.run(["logits"], feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return sorted(times)[len(times) // 2]


def winml_step_ms(winml, build, past, threads, warmup, iters):
    r = subprocess.run([winml, "perf", "-m", build, "--seq-len", "1", "--past-len", str(past), "--threads",
                        str(threads), "--no-llm", "--warmup", str(warmup), "--iterations", str(iters), "-f", "json"],
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"winml perf {build} -> {r.returncode}\n{r.stderr[-2000:]}")
    return float(json.loads(r.stdout)["latency_ms"]["p50"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("builds", nargs="+", help="build folders (model.onnx); the first is the ratios' baseline")
    ap.add_argument("--winml", default=os.path.join(ROOT, "build", "winml"))
    ap.add_argument("--past", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--no-winml", action="store_true", help="onnxruntime only")
    a = ap.parse_args()
    rows = []
    for b in a.builds:
        o = ort_step_ms(b, a.past, a.threads, a.warmup, a.iterations)
        w = None if a.no_winml else winml_step_ms(a.winml, b, a.past, a.threads, a.warmup, a.iterations)
        rows.append((b, o, w))
        print(f"  {b}: onnxruntime {o:.2f} ms" + (f", winml {w:.2f} ms" if w is not None else ""), flush=True)
    o0, w0 = rows[0][1], rows[0][2]
    print(f"\ndecode step, past {a.past}, {a.threads} threads, median of {a.iterations}\n"
          f"| build | onnxruntime ms | vs first | winml ms | vs first | onnxruntime / winml |\n|---|---|---|---|---|---|")
    for b, o, w in rows:
        wcol = f"{w:.2f} | {w / w0:.2f}x | {o / w:.2f}" if w is not None else " | | "
        print(f"| {os.path.basename(os.path.normpath(b))} | {o:.2f} | {o / o0:.2f}x | {wcol} |")


if __name__ == "__main__":
    main()
