#!/usr/bin/env python3
"""int4 quality on real weights (issue 31): perplexity of winml builds of one float checkpoint, on one text.

Builds the checkpoint (default: transformers' dequantized float folder of the SmolLM2-135M-Instruct GGUF, from
tests/oracle/real_weights.py) as fp32, int8 and int4 variants (block 32 / 128, symmetric / asymmetric, RTN or the
error-minimizing scale search: recipe quant.rtn_scale_search), runs `winml eval --mode task --task
text-generation` (window 512, stride 256) on the same text for each, and prints one table: perplexity, its ratio
to fp32, and the model's bits per weight (model files' bytes * 8 / parameters). llama.cpp (llama-cpp-python) on
the GGUF's own quantized weights is measured on the same text when the package is installed, else reported
missing. Figures only: nothing is asserted.

    python bench/int4_quality.py [--winml build/winml] [--checkpoint DIR] [--gguf FILE] [--text-bytes N]
                                 [--only NAME,...] [--work DIR]
Text: the Debian fortunes files (/usr/share/games/fortunes/{fortunes,literature,humorists}), the first
--text-bytes bytes (default 12000; the same text for every row).
"""
import argparse
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORTUNES = ["fortunes", "literature", "humorists"]

# name, precision, quant overrides of the int4 recipe (None: the build's default recipe for that precision)
VARIANTS = [
    ("fp32", "fp32", None),
    ("int4 default", "int4", None),
    ("int4 b128 sym RTN", "int4", {"rtn_block_size": 128, "symmetric": True, "rtn_scale_search": False}),
    ("int4 b128 sym search", "int4", {"rtn_block_size": 128, "symmetric": True, "rtn_scale_search": True}),
    ("int4 b32 sym RTN", "int4", {"rtn_block_size": 32, "symmetric": True, "rtn_scale_search": False}),
    ("int4 b32 sym search", "int4", {"rtn_block_size": 32, "symmetric": True, "rtn_scale_search": True}),
    ("int4 b128 asym RTN", "int4", {"rtn_block_size": 128, "symmetric": False, "rtn_scale_search": False}),
    ("int4 b128 asym search", "int4", {"rtn_block_size": 128, "symmetric": False, "rtn_scale_search": True}),
    ("int4 b32 asym RTN", "int4", {"rtn_block_size": 32, "symmetric": False, "rtn_scale_search": False}),
    ("int4 b32 asym search", "int4", {"rtn_block_size": 32, "symmetric": False, "rtn_scale_search": True}),
    ("int8", "int8", None),
]


def text_file(path, nbytes):
    data = b""
    for f in FORTUNES:
        with open(os.path.join("/usr/share/games/fortunes", f), "rb") as fh:
            data += fh.read()
    data = data[:nbytes].decode("utf-8", "ignore")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(data)
    return data


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)} -> {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r.stdout


def build(winml, ckpt, prec, quant, work, name):
    out = os.path.join(work, name.replace(" ", "_"))
    shutil.rmtree(out, ignore_errors=True)
    cmd = [winml, "build", "-m", ckpt, "-p", prec, "-o", out, "-q"]
    if quant is not None:  # the int4 build's own recipe with these quant fields changed
        base = os.path.join(work, "int4_default", "winml_build_config.json")
        with open(base) as fh:
            recipe = json.load(fh)
        recipe["quant"].update(quant)
        rpath = out + ".recipe.json"
        with open(rpath, "w") as fh:
            json.dump(recipe, fh)
        cmd += ["-c", rpath]
    t = time.time()
    run(cmd)
    return out, time.time() - t


def bits_per_weight(out):
    with open(os.path.join(out, "build_manifest.json")) as fh:
        man = json.load(fh)
    params = next(s for s in man["stages"] if s["name"] == "export")["parameters"]
    size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(out, "model.onnx*")))
    return size * 8.0 / params


def perplexity(winml, out, text):
    s = run([winml, "eval", "--mode", "task", "-m", out, "--task", "text-generation", "--dataset", text, "-f",
             "json"])
    return float(json.loads(s)["metrics"]["perplexity"])


def llama_cpp_ppl(gguf, text, window=512, stride=256):
    """Perplexity of llama.cpp on the GGUF (the same sliding windows as winml eval); None when not installed."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return None
    import numpy as np
    llm = llama_cpp.Llama(model_path=gguf, n_ctx=window, logits_all=True, verbose=False)
    ids = llm.tokenize(text.encode("utf-8"), add_bos=False)
    nll, n, prev = 0.0, 0, 0
    for start in range(0, len(ids), stride):
        end = min(start + window, len(ids))
        chunk = ids[start:end]
        llm.reset()
        llm.eval(chunk)
        logits = np.array(llm.scores[:len(chunk)], dtype=np.float64)
        first = max(prev - start, 0) + 1 if start else 1
        for i in range(first, len(chunk)):
            row = logits[i - 1]
            m = row.max()
            nll += m + math.log(np.exp(row - m).sum()) - row[chunk[i]]
            n += 1
        prev = end
        if end == len(ids):
            break
    return math.exp(nll / n)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--winml", default=os.path.join(ROOT, "build", "winml"))
    ap.add_argument("--checkpoint", help="float checkpoint folder (default: SmolLM2's dequantized GGUF)")
    ap.add_argument("--gguf", help="GGUF for llama.cpp (default: the SmolLM2 GGUF)")
    ap.add_argument("--text-bytes", type=int, default=12000)
    ap.add_argument("--only", help="comma-separated variant names to run (fp32 and int4 default always run)")
    ap.add_argument("--work", help="folder for the builds (default: a temporary one, removed)")
    a = ap.parse_args()
    gguf, ckpt = a.gguf, a.checkpoint
    if not ckpt or not gguf:
        sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
        import real_weights
        gguf = gguf or real_weights.smollm2_gguf()
        ckpt = ckpt or real_weights.hf_from_gguf(gguf)
    work = a.work or tempfile.mkdtemp(prefix="wm_int4q_")
    os.makedirs(work, exist_ok=True)
    text = os.path.join(work, "text.txt")
    text_file(text, a.text_bytes)
    only = set(a.only.split(",")) | {"fp32", "int4 default"} if a.only else None
    rows = []
    print(f"checkpoint {ckpt}\ntext {text} ({a.text_bytes} bytes of fortunes: {', '.join(FORTUNES)}), "
          f"window 512 stride 256", flush=True)
    for name, prec, quant in VARIANTS:
        if only and name not in only:
            continue
        out, secs = build(a.winml, ckpt, prec, quant, work, name if name != "int4 default" else "int4_default")
        ppl = perplexity(a.winml, out, text)
        rows.append((name, ppl, bits_per_weight(out), secs))
        print(f"  {name:24s} ppl {ppl:9.4f}  build {secs:6.1f} s", flush=True)
    lc = llama_cpp_ppl(gguf, open(text, encoding="utf-8").read())
    fp = rows[0][1]
    print(f"\n| variant | perplexity | vs fp32 | bits/weight (files) |\n|---|---|---|---|")
    for name, ppl, bpw, _ in rows:
        print(f"| {name} | {ppl:.4f} | {ppl / fp:.4f}x | {bpw:.2f} |")
    if lc is None:
        print(f"| llama.cpp ({os.path.basename(gguf)}) | missing: llama-cpp-python is not installed | | |")
    else:
        print(f"| llama.cpp ({os.path.basename(gguf)}) | {lc:.4f} | {lc / fp:.4f}x | |")
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
