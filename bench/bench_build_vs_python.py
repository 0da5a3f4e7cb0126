#!/usr/bin/env python3
"""Build speed and memory vs the Python path, side by side on one checkpoint.

A Qwen2.5-0.5B-Instruct checkpoint with random weights is made once with transformers (from its real
config, saved with save_pretrained as bfloat16 safetensors like the published one). Then, in this order,
each as a fresh process under /usr/bin/time (wall seconds, peak RSS):
  1. winml build -m CKPT -o DIR            (fp32 export straight from the weights, KV-cache graph)
  2. python: transformers from_pretrained(fp32) + torch.onnx.export, TorchScript exporter (dynamo=False)
  3. python: the same with torch's default dynamo exporter (dynamo=True)
The Python exports are the lighter job (logits only, no KV cache inputs/outputs); both sides write
external data. All three artifacts are then run in onnxruntime on the same prompt and their logits
compared (they come from the same weights, so they must agree). Goal: >= 10x faster, >= 5x less memory.

usage: bench/bench_build_vs_python.py [--work DIR] [--winml build/winml] [--skip-dynamo]
Not part of the test suite.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
import builder_util as BU  # noqa: E402

import numpy as np  # noqa: E402

SEED = "Qwen/Qwen2.5-0.5B-Instruct"

EXPORT = textwrap.dedent("""
    import sys, torch, transformers as T
    ck, out, dynamo = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    m = T.AutoModelForCausalLM.from_pretrained(ck, dtype=torch.float32).eval()
    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m
        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
    ids = torch.ones((1, 8), dtype=torch.long)
    mask = torch.ones((1, 8), dtype=torch.long)
    with torch.no_grad():
        if dynamo:
            d = {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}
            torch.onnx.export(Logits(m), (ids, mask), out, input_names=["input_ids", "attention_mask"],
                              output_names=["logits"], dynamic_shapes={"input_ids": d, "attention_mask": d},
                              opset_version=18, dynamo=True, external_data=True)
        else:
            ax = {0: "batch", 1: "seq"}
            torch.onnx.export(Logits(m), (ids, mask), out, input_names=["input_ids", "attention_mask"],
                              output_names=["logits"], dynamic_axes={"input_ids": ax, "attention_mask": ax,
                              "logits": ax}, opset_version=17, dynamo=False, external_data=True)
""")

MAKE = textwrap.dedent("""
    import sys, torch, transformers as T
    ck = sys.argv[1]
    cfg = T.AutoConfig.from_pretrained(ck)
    torch.manual_seed(0)
    m = T.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    m.save_pretrained(ck, safe_serialization=True)
""")


def timed(argv, log):
    tf = log + ".time"
    r = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", tf, *argv], capture_output=True, text=True)
    with open(log, "w") as f:
        f.write(r.stdout + "\n" + r.stderr)
    if r.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed ({r.returncode}), see {log}:\n{r.stderr[-2000:]}")
    secs, user, sys_, kb = open(tf).read().split()[-4:]
    return float(secs), float(user) + float(sys_), int(kb) * 1024


def logits(path, ids, with_kv):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    if with_kv:
        feeds["position_ids"] = np.arange(ids.shape[1], dtype=np.int64)[None]
        for i in s.get_inputs():
            if i.name.startswith("past_key_values"):
                feeds[i.name] = np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32)
    return s.run(["logits"], feeds)[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/winml_bench_vs_python")
    ap.add_argument("--winml", default=os.path.join(ROOT, "build", "winml"))
    ap.add_argument("--skip-dynamo", action="store_true")
    args = ap.parse_args()
    py = sys.executable
    os.makedirs(args.work, exist_ok=True)
    ck = BU.seed_dir(args.work, SEED)
    if not os.path.exists(os.path.join(ck, "model.safetensors")):
        print("making the random bf16 checkpoint with transformers ...", flush=True)
        subprocess.run([py, "-c", MAKE, ck], check=True)
    rows = {}
    out = os.path.join(args.work, "winml")
    shutil.rmtree(out, ignore_errors=True)
    print("winml build ...", flush=True)
    rows["winml build"] = timed([args.winml, "build", "-m", ck, "-o", out, "-q"], out + ".log")
    runs = [("torch.onnx.export (TorchScript)", "0")] + ([] if args.skip_dynamo else [("torch.onnx.export (dynamo)", "1")])
    paths = {"winml build": os.path.join(out, "model.onnx")}
    for name, dyn in runs:
        d = os.path.join(args.work, "python_dynamo" if dyn == "1" else "python_ts")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        print(f"{name} ...", flush=True)
        rows[name] = timed([py, "-c", EXPORT, ck, os.path.join(d, "model.onnx"), dyn], d + ".log")
        paths[name] = os.path.join(d, "model.onnx")
    ids = np.array([[9707, 11, 1246, 525, 498, 30, 358, 1079]], np.int64)
    ref = logits(paths["winml build"], ids, True)
    ours_s, ours_cpu, ours_rss = rows["winml build"]
    print(f"\nload average during the runs: {os.getloadavg()} on {os.cpu_count()} cores")
    print("| path | wall s | CPU s (user+sys) | peak RSS MB | wall ratio | CPU ratio | memory ratio |"
          " max abs diff of logits vs winml |")
    print("|---|---|---|---|---|---|---|---|")
    result = {}
    for name, (s, cpu, rss) in rows.items():
        diff = 0.0 if name == "winml build" else float(np.abs(logits(paths[name], ids, False) - ref).max())
        print(f"| {name} | {s:.1f} | {cpu:.1f} | {rss / 2**20:.0f} | {s / ours_s:.1f}x | {cpu / ours_cpu:.1f}x | "
              f"{rss / ours_rss:.1f}x | {diff:.2e} |")
        result[name] = dict(seconds=s, cpu_seconds=cpu, peak_rss_bytes=rss, logits_max_abs_diff=diff)
    with open(os.path.join(args.work, "bench_vs_python.json"), "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
