#!/usr/bin/env python3
"""The CLIP-ViT-H-14 seed (issue 33): laion/CLIP-ViT-H-14-laion2B-s32B-b79K's architecture
(../shared/facts/architectures.md: vision ViT-H/14, 32 layers, width 1280, 16 heads, MLP 5120, patch 14, image
224; text 24 layers, width 1024, 16 heads, MLP 4096, vocab 49408, context 77; projection 1024; about 986 M
parameters, 3.9 GB in float32) with random weights saved by transformers, then:

  winml build -p fp32 (and fp16 with --fp16): build time, peak RSS, model.onnx + model.onnx.data sizes;
  winml perf on the build: p50 latency (generated pixels and ids, --iterations);
  the build in onnxruntime and in our engine against transformers' CLIPModel on the same seeded image and
  texts: cosine and max abs diff of image_embeds, text_embeds and logits_per_image; fp16: SQNR (dB).

The reference could not export this model (over 2 GB). Not a test: it needs ~12 GB of memory and ~10 GB of disk.
usage: bench/bench_clip_h14_seed.py [--work DIR] [--winml PATH] [--iterations N] [--fp16]
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))


def config():
    import transformers as T
    text = dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16,
                vocab_size=49408, max_position_embeddings=77, hidden_act="gelu", eos_token_id=2)
    vision = dict(hidden_size=1280, intermediate_size=5120, num_hidden_layers=32, num_attention_heads=16,
                  image_size=224, patch_size=14, hidden_act="gelu")
    return T.CLIPConfig(text_config=text, vision_config=vision, projection_dim=1024)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/clip_h14_seed")
    ap.add_argument("--winml", default=os.path.join(ROOT, "build", "winml"))
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--fp16", action="store_true")
    a = ap.parse_args()
    import torch
    import transformers as T
    os.makedirs(a.work, exist_ok=True)
    ck = os.path.join(a.work, "ckpt")
    t0 = time.time()
    torch.manual_seed(0)
    model = T.CLIPModel(config()).eval()
    n_params = sum(p.numel() for p in model.parameters())
    if not os.path.exists(os.path.join(ck, "config.json")):
        model.save_pretrained(ck, safe_serialization=True)
    print(f"checkpoint: {n_params:,} parameters, made and saved in {time.time() - t0:.0f} s", flush=True)
    rng = np.random.default_rng(0)
    px = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    ids = rng.integers(3, 49000, size=(2, 77)).astype(np.int64)
    mask = np.ones_like(ids)
    ids[1, 40:] = 1
    mask[1, 40:] = 0
    ids[:, 39] = 2
    with torch.no_grad():
        o = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                  pixel_values=torch.from_numpy(px))
    ref = {k: getattr(o, k).numpy() for k in ("image_embeds", "text_embeds", "logits_per_image")}
    del model, o
    feeds = {"input_ids": ids, "attention_mask": mask, "pixel_values": px}
    from engine_util import engine_run, ort_run
    from opt_models import compare, sqnr_db
    rows = []
    for prec in ["fp32"] + (["fp16"] if a.fp16 else []):
        out = os.path.join(a.work, f"build_{prec}")
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.time()
        r = subprocess.run([a.winml, "build", "-m", ck, "-o", out, "-p", prec, "-q", "-f", "json"],
                           capture_output=True, text=True)
        took = time.time() - t0
        if r.returncode:
            sys.exit(f"build {prec} failed: {r.stderr}")
        man = json.load(open(os.path.join(out, "build_manifest.json")))
        sizes = {f: os.path.getsize(os.path.join(out, f)) for f in ("model.onnx", "model.onnx.data")
                 if os.path.exists(os.path.join(out, f))}
        p = subprocess.run([a.winml, "perf", "-m", out, "--warmup", "1", "--iterations", str(a.iterations), "-f",
                            "json"], capture_output=True, text=True)
        if p.returncode:
            sys.exit(f"perf {prec} failed: {p.stderr}")
        pj = json.loads(p.stdout)
        path = os.path.join(out, "model.onnx")
        got_ort = ort_run(path, feeds)
        got_eng, _ = engine_run(os.path.join(ROOT, "build"), path, feeds, a.work)
        row = {"precision": prec, "build_s": round(took, 1), "peak_rss_gb": round(man["peak_rss_bytes"] / 2**30, 2),
               "files_mb": {k: round(v / 2**20) for k, v in sizes.items()},
               "perf_p50_ms": pj["latency_ms"]["p50"]}
        for who, got in (("onnxruntime", got_ort), ("winml", got_eng)):
            for k, v in ref.items():
                worst, cos = compare([v], [got[k]])
                row[f"{who} {k}"] = {"cosine": round(cos, 7), "max_abs_diff": worst, "sqnr_db": round(sqnr_db(v, got[k]), 1)}
        rows.append(row)
        print(json.dumps(row, indent=1), flush=True)
    print(f"peak RSS of this script: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.1f} GB")


if __name__ == "__main__":
    main()
