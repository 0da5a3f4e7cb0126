#!/usr/bin/env python3
"""Prefill and decode of winml builds against llama.cpp GGUFs in CPU time, one thread (issue 35's peer rows).

On a machine shared with other jobs, wall time mostly measures the other jobs; CPU time of the one thread that does
the work does not. Each engine runs in a fresh process, one thread, and the engines alternate round by round (every
other round in reverse order); the best of the rounds is reported, with the load average before and after.
  winml      `WM_PROFILE=1 winml perf --threads 1 --llm-warmup 0 --llm-runs 1 --prompt-len P --gen-len G`: the
             profile's CPU ms per session run (the thread's own CPU clock, src/runtime/run.c) times the runs, for
             G = 2 and G = 2 + STEPS; their difference over STEPS is one decode step, the G = 2 total less a step
             is the prefill of P tokens (the runner's own work between runs, sampling a token, is left out)
  llama.cpp  llama-cpp-python (bench/setup_llamacpp.sh) with n_threads 1: the process CPU time around
             Llama.eval of the P prompt ids, then around STEPS single-token evals (greedy, argmax of the scores)
The prompt is random ids below --vocab (seed 0), the same for every engine. Our decode step is a difference of two
processes' figures, so the prefill's noise is divided by STEPS: with 8 steps at load ~20 its per-round ratios spread
0.7-1.9x around llama.cpp's in-process average, hence the default of 32.

usage: bench/bench_llm_cpu.py --pair LABEL=BUILD_DIR,FILE.gguf [--pair ...] [--winml NAME=PATH ...]
                              [--prompt-len 64] [--steps 32] [--rounds 2] [--vocab 50257] [-o results.json]
--winml may be given several times (e.g. old=/tmp/winml_main new=build/winml): each binary runs every pair's build,
so an old and a new engine are timed side by side on the same files. Not part of the test suite.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

LLAMA_CHILD = r"""
import json, sys, time
import numpy as np
import llama_cpp
path, plen, steps, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ids = np.random.default_rng(0).integers(100, vocab, plen).tolist()
llm = llama_cpp.Llama(model_path=path, n_ctx=plen + steps + 8, n_threads=1, n_threads_batch=1, n_batch=512,
                      verbose=False)
c0 = time.process_time()
llm.eval(ids)
tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
c1 = time.process_time()
for _ in range(steps):
    llm.eval([tok])
    tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
c2 = time.process_time()
print(json.dumps({"prefill_ms": (c1 - c0) * 1e3, "decode_ms": (c2 - c1) * 1e3 / steps}))
"""


def loadavg():
    return os.getloadavg()[0]


def winml_cpu_ms(winml, build, plen, gen):
    """CPU ms of the LLM session's runs (its profile line: ms per run x runs; the first line is perf's single
    forward pass, which --no-llm would time alone)"""
    env = dict(os.environ, WM_PROFILE="1")
    r = subprocess.run([winml, "perf", "-m", build, "--iterations", "1", "--warmup", "0", "--seq-len", "8",
                        "--threads", "1", "--prompt-len", str(plen), "--gen-len", str(gen), "--llm-runs", "1",
                        "--llm-warmup", "0", "-f", "json"], capture_output=True, text=True, env=env)
    if r.returncode:
        raise RuntimeError(f"{winml} perf {build} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    prof = re.findall(r"profile: ([0-9.]+) ms per run over ([0-9]+) runs", r.stderr)
    if len(prof) < 2:
        raise RuntimeError(f"no LLM profile line in {winml} perf's stderr: {r.stderr.strip()[-500:]}")
    ms, runs = float(prof[-1][0]), int(prof[-1][1])
    if runs != gen:  # one prefill run + gen - 1 decode runs
        raise RuntimeError(f"expected {gen} runs of the LLM session, the profile says {runs}")
    return ms * runs


def winml_speed(winml, build, a):
    for _ in range(3):  # a difference of two processes: a prefill disturbed more than the steps take is retried
        t2 = winml_cpu_ms(winml, build, a.prompt_len, 2)
        tn = winml_cpu_ms(winml, build, a.prompt_len, 2 + a.steps)
        step = (tn - t2) / a.steps
        if step > 0:
            return {"prefill_ms": t2 - step, "decode_ms": step}
    raise RuntimeError(f"{build}: the decode steps came out <= 0 three times (the load moves the prefill more than "
                       f"{a.steps} steps take): use more --steps")


def llama_speed(gguf, a):
    r = subprocess.run([sys.executable, "-c", LLAMA_CHILD, gguf, str(a.prompt_len), str(a.steps), str(a.vocab)],
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"llama.cpp on {gguf} failed: {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def tps(res, a):
    return a.prompt_len * 1e3 / res["prefill_ms"], 1e3 / res["decode_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", action="append", required=True, help="LABEL=BUILD_DIR,FILE.gguf")
    ap.add_argument("--winml", action="append", help="NAME=PATH (default new=build/winml)")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    bins = [w.split("=", 1) for w in (a.winml or ["new=" + os.path.join(ROOT, "build", "winml")])]
    pairs = []
    for p in a.pair:
        label, rest = p.split("=", 1)
        build, gguf = rest.split(",", 1)
        pairs.append((label, build, gguf))
    results = {label: {} for label, _, _ in pairs}
    load = [loadavg()]
    print(f"load average {load[0]:.1f} at the start; prompt {a.prompt_len} ids, {a.steps} decode steps, 1 thread, "
          "CPU time", flush=True)
    for r in range(a.rounds):
        for label, build, gguf in pairs:
            engines = [(name, lambda w=w, b=build: winml_speed(w, b, a)) for name, w in bins]
            engines.append(("llama.cpp", lambda g=gguf: llama_speed(g, a)))
            if r % 2:
                engines.reverse()
            for name, fn in engines:
                res = fn()
                pre, dec = tps(res, a)
                results[label].setdefault(name, []).append({"prefill_tps": pre, "decode_tps": dec})
                print(f"  round {r + 1} {label:28} {name:10} prefill {pre:8.1f} tok/s  decode {dec:7.2f} tok/s  "
                      f"(load {loadavg():.1f})", flush=True)
    load.append(loadavg())
    print(f"load average {load[1]:.1f} at the end\n")
    print(f"{'best of ' + str(a.rounds) + ' rounds, tok/s':38} {'engine':10} {'prefill':>8} {'decode':>8} "
          f"{'vs llama.cpp':>14}  {'median of the rounds ratios':>27}")
    for label, _, _ in pairs:
        res = results[label]
        best = {n: (max(x["prefill_tps"] for x in v), max(x["decode_tps"] for x in v)) for n, v in res.items()}
        lp, ld = best["llama.cpp"]
        for name, (p, d) in best.items():
            ratio = med = ""
            if name != "llama.cpp":  # paired by round: the two engines ran within a minute of each other
                ratio = f"{p / lp:.2f}x / {d / ld:.2f}x"
                pr = [o["prefill_tps"] / l["prefill_tps"] for o, l in zip(res[name], res["llama.cpp"])]
                dr = [o["decode_tps"] / l["decode_tps"] for o, l in zip(res[name], res["llama.cpp"])]
                med = f"{float(np.median(pr)):.2f}x / {float(np.median(dr)):.2f}x"
            print(f"{label:38} {name:10} {p:8.1f} {d:8.2f} {ratio:>14}  {med:>27}")
    if a.output:
        json.dump({"args": vars(a), "load": load, "results": results}, open(a.output, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
