#!/usr/bin/env python3
"""LLM perf over the seed decoders: each built from its real config with random weights, then `winml perf`.

For every decoder seed (tests/oracle/builder_util.SEEDS: gpt2, Qwen2.5-0.5B/1.5B/3B-Instruct, Qwen3-0.6B/1.7B,
the tiny Qwen2; Qwen2.5-7B-Instruct with --with-7b): `winml build --random-weights -p PREC` (int4 by default:
RTN block --block-size, accuracy level 4), then `winml perf -f json` for the LLM section (load time, TTFT, prefill
tokens/s at --prompt-len, decode tokens/s and ms per token over --gen-len, peak RSS) and, for the models named
by --decode-at-models, decode speed after 64 and 1024 tokens of context (the issue's 80% rule).
A row per model; the build folder is removed after each model (a 7B fp32 stage is ~30 GB).

usage: bench/bench_llm_seeds.py [--winml build/winml] [--work DIR] [--precisions int4[,fp16,fp32]]
                                [--only SUBSTR ...] [--with-7b] [--prompt-len 128] [--gen-len 32] [-o results.json]
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

BIG = "Qwen/Qwen2.5-7B-Instruct"


def is_decoder(name):
    arch = "".join(BU.SEEDS[name].get("architectures", []))
    return "ForCausalLM" in arch or "LMHead" in arch


def recipe_for(winml, ckpt, prec, block, work, fp32_bytes):
    """Writes the default recipe for ckpt at prec (winml config), with quant.rtn_block_size = block for int4.
    The optim stage rewrites the float32 model next to the export; when the disk cannot hold two float32 copies
    (a 7B model is ~30 GB each) the recipe skips it, and the row says so."""
    path = os.path.join(work, f"recipe_{prec}.json")
    subprocess.run([winml, "config", "-m", ckpt, "-p", prec, "-o", path], check=True, capture_output=True)
    r = json.load(open(path))
    if prec == "int4":
        r["quant"]["rtn_block_size"] = block
    skipped = shutil.disk_usage(work).free < 2.3 * fp32_bytes
    if skipped:
        r["optim"] = None
    json.dump(r, open(path, "w"), indent=2)
    return path, skipped


def build(winml, ckpt, out, recipe):
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.monotonic()
    r = subprocess.run([winml, "build", "-m", ckpt, "-o", out, "-c", recipe, "--random-weights", "--seed", "1",
                        "-f", "json"], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"build failed ({r.returncode}): {r.stderr.strip()}")
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out) if f.startswith("model.onnx"))
    manifest = json.load(open(os.path.join(out, "build_manifest.json")))
    return time.monotonic() - t0, size, manifest.get("peak_rss_bytes", 0)


def perf(winml, out, args, decode_at):
    cmd = [winml, "perf", "-m", out, "--iterations", "1", "--warmup", "0", "--seq-len", "8",
           "--prompt-len", str(args.prompt_len), "--gen-len", str(args.gen_len), "--llm-runs", str(args.runs),
           "-f", "json"]
    if decode_at:
        cmd += ["--decode-at", "64,1024"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"perf failed ({r.returncode}): {r.stderr.strip()}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--winml", default=os.path.join(ROOT, "build", "winml"))
    ap.add_argument("--work", default="/tmp/wm_bench_llm_seeds")
    ap.add_argument("--precisions", default="int4")
    ap.add_argument("--block-size", type=int, default=32)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--with-7b", action="store_true")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--gen-len", type=int, default=32)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--decode-at-models", default="Qwen/Qwen2.5-0.5B-Instruct")
    ap.add_argument("-o", "--output")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    names = [n for n in BU.SEEDS if is_decoder(n) and (n != BIG or args.with_7b)]
    if args.only:
        names = [n for n in names if any(s in n for s in args.only)]
    rows, failures = [], 0
    hdr = (f"{'model':42} {'prec':5} {'build s':>7} {'bld RSS':>7} {'MB':>6} {'load ms':>7} {'TTFT ms':>8} {'prefill t/s':>11} "
           f"{'decode t/s':>10} {'TPOT ms':>7} {'RSS MB':>7}  decode@1024/@64")
    print(hdr, flush=True)
    for name in names:
        ckpt = BU.seed_dir(args.work, name)
        for prec in args.precisions.split(","):
            out = os.path.join(args.work, "out")
            row = {"model": name, "precision": prec}
            try:
                insp = json.loads(subprocess.run([args.winml, "inspect", "-m", ckpt, "-f", "json"], check=True,
                                                 capture_output=True, text=True).stdout)
                recipe, row["optim_skipped"] = recipe_for(args.winml, ckpt, prec, args.block_size, args.work,
                                                          4 * insp["parameters"])
                row["build_s"], row["bytes"], row["build_peak_rss"] = build(args.winml, ckpt, out, recipe)
                res = perf(args.winml, out, args, name in args.decode_at_models.split(","))
                llm = res["llm"]
                row.update({k: llm.get(k) for k in ("load_ms", "ttft_ms", "prefill_tokens_per_sec",
                                                    "decode_tokens_per_sec", "tpot_ms", "peak_rss_mb")})
                row["threads"] = res.get("config", {}).get("threads")
                ratio = ""
                if "decode_at_context" in llm:
                    at = {d["context"]: d["decode_tokens_per_sec"] for d in llm["decode_at_context"]}
                    rel = {d["context"]: d["speed_vs_first"] for d in llm["decode_at_context"]}
                    row["decode_at_context"], row["decode_at_ratio"] = at, rel[1024]
                    # the ratio is the median of per-round ratios (perf times both contexts back to back)
                    ratio = f"{at[1024]:.1f}/{at[64]:.1f}, ratio {rel[1024]:.2f}"
                print(f"{name:42} {prec:5} {row['build_s']:7.1f} {row['build_peak_rss'] / 2**20:7.0f} {row['bytes'] / 2**20:6.0f} {row['load_ms']:7.0f} "
                      f"{row['ttft_ms']:8.0f} {row['prefill_tokens_per_sec']:11.1f} "
                      f"{row['decode_tokens_per_sec']:10.2f} {row['tpot_ms']:7.1f} {row['peak_rss_mb']:7.0f}  {ratio}"
                      f"{'  (optim skipped: disk)' if row['optim_skipped'] else ''}",
                      flush=True)
                row["ok"] = True
            except (RuntimeError, KeyError, subprocess.CalledProcessError) as e:
                failures += 1
                row.update(ok=False, error=str(e)[:300])
                print(f"{name:42} {prec:5} FAILED: {row['error']}", flush=True)
            rows.append(row)
            shutil.rmtree(out, ignore_errors=True)
    ok = sum(r["ok"] for r in rows)
    print(f"\nseed decoders passing perf with LLM figures: {ok}/{len(rows)}")
    if args.output:
        json.dump(rows, open(args.output, "w"), indent=2)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
