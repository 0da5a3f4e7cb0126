#!/usr/bin/env python3
"""Builds the seed checkpoints from their real configs with random weights and checks each artifact.

For every seed (tests/oracle/builder_util.SEEDS: gpt2, Qwen2.5-0.5B/1.5B/3B(/7B)-Instruct, Qwen3-0.6B/1.7B,
a tiny Qwen2, the mMiniLMv2 cross-encoder): `winml build --random-weights` into a work folder, timed, with
the peak RSS of the build process (from /usr/bin/time and from the manifest's VmHWM); then
onnx.checker.check_model(path) (the path form, so external data is checked) and one forward in
onnxruntime (a 4-token prefill for decoders, a [1, 512] batch for the encoder). Outputs are removed after
each model (a 7B fp32 export is ~30 GB).

usage: bench/bench_build.py [--work DIR] [--winml build/winml] [--only SUBSTR ...] [--with-7b] [--bf16-source] [--keep]
       (--with-7b adds Qwen2.5-7B-Instruct: checks free disk first, loads it in onnxruntime without
        prepacking and runs a 1-token forward; see also bench_build_vs_python.py)
       (--bf16-source: instead of --random-weights, each seed is first written as a bfloat16 safetensors
        checkpoint (5 GB shards + index, seeded uniform values, tensor names and shapes from transformers' model
        on the meta device) and the build streams it, as from a downloaded checkpoint)
Not part of the test suite.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
import builder_util as BU  # noqa: E402

import numpy as np  # noqa: E402

BIG = "Qwen/Qwen2.5-7B-Instruct"


def write_bf16_checkpoint(ckpt, seed=1, shard_bytes=5 << 30):
    """Writes ckpt/model-0000i-of-0000n.safetensors (+ index) in bfloat16 with uniform values in [-0.02, 0.02)
    (norm weights 1), one tensor in memory at a time; names and shapes from the transformers model of
    ckpt/config.json built on the meta device (no weights allocated). Skipped when the index exists."""
    index = os.path.join(ckpt, "model.safetensors.index.json")
    if os.path.exists(index):
        return
    import torch
    import transformers as T
    from safetensors.torch import save_file
    cfg = T.AutoConfig.from_pretrained(ckpt)
    with torch.device("meta"):
        m = T.AutoModelForCausalLM.from_config(cfg)
    sd = m.state_dict()
    if getattr(cfg, "tie_word_embeddings", False):
        sd.pop("lm_head.weight", None)
    rng = np.random.default_rng(seed)
    shards, cur, cur_bytes = [], {}, 0
    for name, t in sd.items():
        n = t.numel()
        if cur and cur_bytes + 2 * n > shard_bytes:
            shards.append(cur)
            cur, cur_bytes = {}, 0
        cur[name] = tuple(t.shape)
        cur_bytes += 2 * n
    shards.append(cur)
    weight_map = {}
    for i, shard in enumerate(shards):
        fn = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        tensors = {}
        for name, shape in shard.items():
            n = int(np.prod(shape))
            if name.endswith("norm.weight"):
                v = np.ones(n, np.float32)
            else:
                v = rng.random(n, dtype=np.float32)
                v *= 0.04
                v -= 0.02
            bits = (v.view(np.uint32) >> 16).astype(np.uint16)  # bfloat16: the high half (truncation)
            del v
            tensors[name] = torch.from_numpy(bits).view(torch.bfloat16).reshape(shape)
            weight_map[name] = fn
        save_file(tensors, os.path.join(ckpt, fn), metadata={"format": "pt"})
        del tensors
    total = sum(2 * int(np.prod(s)) for sh in shards for s in sh.values())
    with open(index, "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)


def timed_build(winml, ckpt, out, extra=(), random_weights=True):
    """Runs winml build under /usr/bin/time; returns (seconds, peak_rss_bytes, manifest)."""
    shutil.rmtree(out, ignore_errors=True)
    tf = out + ".time"
    t0 = time.monotonic()
    src = ["--random-weights", "--seed", "1"] if random_weights else []
    r = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", tf, winml, "build", "-m", ckpt, "-o", out,
                        *src, "-f", "json", *extra], capture_output=True, text=True)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise RuntimeError(f"winml build failed ({r.returncode}): {r.stderr.strip()}")
    secs, kb = open(tf).read().split()[-2:]
    os.remove(tf)
    return wall, int(kb) * 1024, json.loads(r.stdout)


def ort_forward(path, kind, cfg, no_prepack=False):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if no_prepack:
        so.add_session_config_entry("session.disable_prepacking", "1")
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    t0 = time.monotonic()
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    load = time.monotonic() - t0
    feeds = {}
    for i in s.get_inputs():
        if i.name == "input_ids":
            shape = [1 if isinstance(d, str) else d for d in i.shape]
            if isinstance(i.shape[1], str):
                shape[1] = 4 if not no_prepack else 1
            dt = np.int32 if "int32" in i.type else np.int64
            feeds[i.name] = np.arange(3, 3 + shape[0] * shape[1], dtype=dt).reshape(shape)
    n = feeds["input_ids"].shape[1]
    for i in s.get_inputs():
        dt = np.int32 if "int32" in i.type else np.int64
        if i.name == "attention_mask":
            feeds[i.name] = np.ones((1, n), dt)
        elif i.name == "position_ids":
            feeds[i.name] = np.arange(n, dtype=dt)[None]
        elif i.name.startswith("past_key_values"):
            feeds[i.name] = np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32)
    t0 = time.monotonic()
    out = s.run(["logits"], feeds)[0]
    run = time.monotonic() - t0
    assert np.isfinite(out).all(), "non-finite logits"
    return load, run, out.shape


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/winml_bench_build")
    ap.add_argument("--winml", default=os.path.join(ROOT, "build", "winml"))
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--with-7b", action="store_true")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--bf16-source", action="store_true")
    args = ap.parse_args()
    import onnx
    os.makedirs(args.work, exist_ok=True)
    names = [n for n in BU.SEEDS if n != BIG or args.with_7b]
    if args.only:
        names = [n for n in names if any(s in n for s in args.only)]
    rows = []
    for name in names:
        ckpt = BU.seed_dir(args.work, name)
        out = os.path.join(args.work, "out_" + os.path.basename(ckpt))
        big = name == BIG
        if big:
            free = shutil.disk_usage(args.work).free
            print(f"{name}: {free / 2**30:.1f} GiB free on {args.work}", flush=True)
            if free < (34 + (16 if args.bf16_source else 0)) * 2**30:
                print(f"{name}: SKIPPED, not enough disk for a ~30 GB export (and its ~15 GB source)", flush=True)
                continue
        src_gb = 0.0
        if args.bf16_source:
            print(f"{name}: writing a bfloat16 checkpoint ...", flush=True)
            t0 = time.monotonic()
            write_bf16_checkpoint(ckpt)
            src_gb = sum(os.path.getsize(os.path.join(ckpt, f)) for f in os.listdir(ckpt) if f.endswith(".safetensors")) / 1e9
            print(f"{name}: {src_gb:.2f} GB of bfloat16 safetensors in {time.monotonic() - t0:.0f} s", flush=True)
        print(f"{name}: building ...", flush=True)
        wall, rss, man = timed_build(args.winml, ckpt, out, random_weights=not args.bf16_source)
        ex = man["stages"][0]
        arts = {a["file"]: a["bytes"] for a in man["artifacts"]}
        path = os.path.join(out, "model.onnx")
        t0 = time.monotonic()
        onnx.checker.check_model(path, full_check=not big)
        check = time.monotonic() - t0
        load, run, shape = ort_forward(path, ex, BU.SEEDS[name], no_prepack=arts.get("model.onnx.data", 0) > 4 << 30)
        row = dict(model=name, params=ex["parameters"], nodes=ex["nodes"], external=ex["external_data"],
                   model_onnx_bytes=arts["model.onnx"], data_bytes=arts.get("model.onnx.data", 0),
                   build_s=round(wall, 2), build_peak_rss_mb=round(rss / 2**20, 1),
                   manifest_peak_rss_mb=round(man["peak_rss_bytes"] / 2**20, 1), checker_s=round(check, 2),
                   ort_load_s=round(load, 2), ort_forward_s=round(run, 3), logits_shape=list(shape),
                   source_bf16_gb=round(src_gb, 2))
        print(json.dumps(row), flush=True)
        rows.append(row)
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    print("\n| model | params | nodes | external | build s | peak RSS MB | data GB | checker | ORT load s | forward s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['params'] / 1e6:.1f} M | {r['nodes']} | {r['external']} | {r['build_s']} | "
              f"{r['build_peak_rss_mb']} | {r['data_bytes'] / 1e9:.2f} | ok | {r['ort_load_s']} | {r['ort_forward_s']} |")
    with open(os.path.join(args.work, "bench_build.json"), "w") as f:
        json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
