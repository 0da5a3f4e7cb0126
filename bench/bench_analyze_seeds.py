#!/usr/bin/env python3
"""`winml analyze` on the seed models built from their published configs with random weights.

For each seed (GPT-2, Qwen2.5-0.5B-Instruct, Qwen3-0.6B, the mMiniLMv2 cross-encoder; configs from
tests/oracle/builder_util.SEEDS): `winml build --random-weights` (export + the build's optimize stage), then
`winml analyze -f json` on the artifact, plus the cross-encoder quantized to fp16 and (with --int4) the decoders
quantized to int4 (MatMulNBits). Prints, per model, the per-EP/device table (counts, subgraphs, CPU nodes,
crossing tensors), the ops that are not supported per target, and the component summary of chosen targets;
also the analyze wall/CPU time. Checks on the way that the counts add up to the node count and the op
histogram equals the onnx package's count.

usage: bench/bench_analyze_seeds.py [--work DIR] [--winml build/winml] [--only SUBSTR ...] [--int4] [--keep]
Not part of the test suite (the builds write GBs of weights).
"""
import argparse
import collections
import json
import os
import resource
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
import builder_util as BU  # noqa: E402

SEEDS = ["openai-community/gpt2", "Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen3-0.6B",
         "cross-encoder/mmarco-mMiniLMv2-L12-H384-v1"]
SHOW = [("cpu", "cpu"), ("qnn", "npu"), ("openvino", "npu"), ("vitisai", "npu"), ("dml", "gpu")]


def run(argv, ok=(0,)):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode not in ok:
        raise RuntimeError(f"{argv[:3]} failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    return r


def analyze(winml, path):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = run([winml, "analyze", "-m", path, "-f", "json"], ok=(0, 1))
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(r.stdout), wall, cpu


def check(d, path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    ref = collections.Counter((n.domain if n.domain not in ("", "ai.onnx") else "", n.op_type) for n in m.graph.node)
    for t in d["targets"]:
        assert sum(t["counts"].values()) == len(m.graph.node), t["ep"]
        got = collections.Counter()
        for o in t["ops"]:
            got[(o["domain"], o["op"])] += o["count"]
        assert got == ref, t["ep"]


def report(label, d, wall, cpu):
    print(f"\n=== {label}: {d['nodes']} nodes, opset {d['opset']}; analyze {wall:.3f} s wall, {cpu:.3f} s CPU "
          f"({len(d['targets'])} EP/device targets)")
    print(f"  {'ep/device':<15} {'verdict':<12} {'sup':>5} {'part':>5} {'unsup':>5} {'unkn':>5} {'subgr':>6} "
          f"{'cpu':>5} {'cross':>6}")
    for t in d["targets"]:
        c, p = t["counts"], t["partitions"]
        print(f"  {t['ep'] + '/' + t['device']:<15} {t['verdict']:<12} {c['supported']:>5} {c['partial']:>5} "
              f"{c['unsupported']:>5} {c['unknown']:>5} {p['ep_subgraphs']:>6} {p['cpu_fallback_nodes']:>5} "
              f"{p['crossing_tensors']:>6}")
    top = ", ".join(f"{o['op']} {o['count']}" for o in d["targets"][0]["ops"][:8])
    print(f"  dominant ops: {top}")
    for t in d["targets"]:
        if (t["ep"], t["device"]) not in SHOW:
            continue
        bad = [f"{o['op']}x{o['count']} {o['level']}" for o in t["ops"] if o["level"] != "supported"]
        print(f"  -- {t['ep']}/{t['device']}: not supported: {'; '.join(bad) if bad else 'none'}")
        for m in t["model_checks"]:
            if m["blocking"]:
                print(f"     model check {m['check']}: {m['message']}")
        for comp in t["components"]:
            print(f"     {comp['summary']}  [{comp['nodes']} nodes]")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/wm_bench_analyze")
    ap.add_argument("--winml", default=os.path.join(ROOT, "build", "winml"))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--int4", action="store_true", help="also analyze the decoders quantized to int4")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    for name in SEEDS:
        if a.only and not any(s.lower() in name.lower() for s in a.only):
            continue
        ckpt = BU.seed_dir(a.work, name)
        out = os.path.join(a.work, name.replace("/", "_") + "_build")
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.monotonic()
        run([a.winml, "build", "-m", ckpt, "-o", out, "--random-weights", "--seed", "1", "-q", "-f", "json"])
        print(f"\n[{name}] built in {time.monotonic() - t0:.1f} s", flush=True)
        model = os.path.join(out, "model.onnx")
        models = [(f"{name} fp32 (winml build)", model)]
        is_enc = BU.SEEDS[name]["architectures"][0].endswith("SequenceClassification")
        extra = []
        if is_enc:
            extra.append(("fp16", ["-p", "fp16"]))
        if a.int4 and not is_enc:
            extra.append(("int4", ["-p", "int4"]))
        for tag, args in extra:
            q = os.path.join(a.work, name.replace("/", "_") + f"_{tag}.onnx")
            run([a.winml, "quantize", "-m", model, "-o", q, *args, "-q", "-f", "json"])
            models.append((f"{name} {tag} (winml quantize)", q))
        for label, path in models:
            d, wall, cpu = analyze(a.winml, path)
            check(d, path)
            report(label, d, wall, cpu)
            sys.stdout.flush()
        if not a.keep:
            shutil.rmtree(out, ignore_errors=True)
            for tag, _ in extra:
                for suf in ("", ".data"):
                    p = os.path.join(a.work, name.replace("/", "_") + f"_{tag}.onnx{suf}")
                    if os.path.exists(p):
                        os.remove(p)


if __name__ == "__main__":
    main()
