"""Tokenizer throughput: ours (C, wm_toktool bench: one thread, a line at a time, all outputs incl.
tokens and offsets) against the Python `tokenizers` library (Rust, RAYON_NUM_THREADS=1) on the same
corpus in the same run. Prints MB/s for both and the ratio ours / tokenizers.

The peer is timed two ways, both single-threaded: Tokenizer.encode per line (what a caller does)
and Tokenizer.encode_batch over all lines (no per-call Python overhead); the ratio is taken against
the faster of the two. Each measurement is the best of --runs after a warm-up pass.

usage: python bench/bench_tokenizer.py [--lines 20000] [--runs 3] [--only gpt2,qwen3,...]
(fixtures as in tests/oracle/tok_oracle.py; build first with `make all`)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "oracle"))
import tok_corpus  # noqa: E402
import tok_oracle  # noqa: E402

DEFAULT = ["gpt2", "qwen3", "bert", "unigram", "wordpiece", "spbpe"]


def ours(model, path, runs):
    best = None
    subprocess.run([tok_oracle.toktool(), "bench", model, path], check=True, capture_output=True)  # warm-up
    for _ in range(runs):
        r = subprocess.run([tok_oracle.toktool(), "bench", model, path], check=True, capture_output=True, text=True)
        j = json.loads(r.stdout)
        if best is None or j["seconds"] < best["seconds"]:
            best = j
    return best


def peer(tok, lines, runs):
    for s in lines[:2000]:
        tok.encode(s)
    loop = batch = None
    ntok = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        n = 0
        for s in lines:
            n += len(tok.encode(s).ids)
        dt = time.perf_counter() - t0
        loop = dt if loop is None else min(loop, dt)
        ntok = n
        t0 = time.perf_counter()
        tok.encode_batch(lines)
        dt = time.perf_counter() - t0
        batch = dt if batch is None else min(batch, dt)
    return loop, batch, ntok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n] or DEFAULT
    lines = [s.replace("\n", " ") for s in tok_corpus.corpus(args.lines)]
    nbytes = sum(len(s.encode("utf-8")) for s in lines)
    fx = tok_oracle.build_fixtures(names)
    import tokenizers
    print(f"corpus: {len(lines)} lines, {nbytes / 1e6:.2f} MB; tokenizers {tokenizers.__version__}, "
          f"RAYON_NUM_THREADS=1; best of {args.runs}")
    print(f"{'tokenizer':10s} {'ours MB/s':>10s} {'encode MB/s':>12s} {'batch MB/s':>11s} {'ratio':>7s}  tokens")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "corpus.txt")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write("\n".join(lines) + "\n")
        for name in names:
            model, tok, _ = fx[name]
            o = ours(model, path, args.runs)
            loop, batch, ntok = peer(tok, lines, args.runs)
            mo, ml, mb = nbytes / o["seconds"] / 1e6, nbytes / loop / 1e6, nbytes / batch / 1e6
            ratio = mo / max(ml, mb)
            rows.append((name, mo, ml, mb, ratio))
            same = "same" if o["tokens"] == ntok else f"DIFFERENT ({o['tokens']} vs {ntok})"
            print(f"{name:10s} {mo:10.2f} {ml:12.2f} {mb:11.2f} {ratio:7.2f}  {o['tokens']} ({same})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
