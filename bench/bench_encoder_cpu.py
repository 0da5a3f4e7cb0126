#!/usr/bin/env python3
"""CPU ms of one encoder run of bench_seq2seq.py's builds, two winml binaries side by side (before / after a change).

  .venv/bin/python bench/bench_encoder_cpu.py --old OLD/winml --new build/winml [--precision int8] [--rounds 3]
                                              [--work /tmp/bench_seq2seq] [--models whisper-tiny,...] [--ort]

For each model's <work>/<model>/winml_<precision>/encoder_model.onnx (bench_seq2seq.py builds them): `winml perf`
on 1 thread (whisper: 3000 feature frames, text: 64 tokens), the process CPU time of a run of n iterations less that
of one, over n - 1, the minimum over --rounds rounds in which the binaries alternate. CPU time, not wall time: on
the shared development machine wall times drift 2x under other jobs; CPU time removes preemption (not cache or
memory-bandwidth interference).
--ort: onnxruntime on the same encoder_model.onnx in the same rounds (one session in this process, 1 thread, the
process CPU time of n - 1 runs after a warm-up run, random inputs of the same shape), a third column and ours / its.
"""
import argparse
import os
import resource
import subprocess
import time

SHAPES = {"whisper-tiny": (["--dim", "feature_sequence_length=3000"], 3),
          "whisper-base": (["--dim", "feature_sequence_length=3000"], 3),
          "opus-mt-en-de": (["--seq-len", "64"], 21), "bart-base": (["--seq-len", "64"], 21)}


def cpu_ms(winml, model, iters, extra):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([winml, "perf", "-m", model, "--threads", "1", "--warmup", "1", "--iterations", str(iters),
                    "-f", "json"] + extra, check=True, capture_output=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * 1e3


def ort_runner(model, name):
    """a function of n giving onnxruntime's CPU ms per run over n - 1 runs of one session (1 thread)"""
    import numpy as np
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    if name.startswith("whisper"):
        feeds = {s.get_inputs()[0].name: rng.standard_normal((1, 80, 3000)).astype(np.float32)}
    else:
        ids = rng.integers(4, 1000, (1, 64))
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    s.run(None, feeds)

    def run(n):
        c0 = time.process_time()
        for _ in range(n - 1):
            s.run(None, feeds)
        return (time.process_time() - c0) * 1e3 / (n - 1)
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--precision", default="int8")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default="/tmp/bench_seq2seq")
    ap.add_argument("--models", default=",".join(SHAPES))
    ap.add_argument("--ort", action="store_true", help="also onnxruntime on the same model, in the same rounds")
    a = ap.parse_args()
    print("| model | precision | encoder CPU ms: old | new | old / new |" + (" onnxruntime | new / onnxruntime |" if a.ort else ""))
    print("|---|---|---|---|---|" + ("---|---|" if a.ort else ""))
    for name in a.models.split(","):
        extra, n = SHAPES[name]
        m = os.path.join(a.work, name, f"winml_{a.precision}", "encoder_model.onnx")
        res = {"old": [], "new": []}
        ort_run = ort_runner(m, name) if a.ort else None
        if ort_run:
            res["ort"] = []
        for _ in range(a.rounds):
            for k in res:
                if k == "ort":
                    res[k].append(ort_run(n))
                    continue
                b = getattr(a, k)
                res[k].append((cpu_ms(b, m, n, extra) - cpu_ms(b, m, 1, extra)) / (n - 1))
        o, w = min(res["old"]), min(res["new"])
        line = f"| {name} | {a.precision} | {o:.1f} | {w:.1f} | {o / w:.2f}x |"
        if ort_run:
            r = min(res["ort"])
            line += f" {r:.1f} | {r / w:.2f}x |"
        print(line, flush=True)


if __name__ == "__main__":
    main()
