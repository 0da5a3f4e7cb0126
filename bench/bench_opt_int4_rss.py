#!/usr/bin/env python3
"""Peak resident memory of `winml quantize -p int4` on a 7B-sized model.

Writes a synthetic ONNX model with the MatMul weights of a Qwen2.5-7B config (28 layers: q 3584x3584,
k/v 3584x512, o 3584x3584, gate/up 3584x18944, down 18944x3584; lm_head 3584x152064; the embedding table
152064x3584 as a Gather) in float16 (about 15 GB) as external data, then quantizes it to int4 (block 32)
with winml in a fresh process and reports its peak RSS (VmHWM), time and output size. The graph is a valid
ONNX model (each weight feeds its own MatMul from a graph input), which is all the quantizer looks at.

usage: bench/bench_opt_int4_rss.py [--build build] [--dir DIR] [--layers 28] [--keep] [--json F]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))

HID, INTER, KV, VOCAB = 3584, 18944, 512, 152064


def write_model(path, layers):
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    data = os.path.basename(path) + ".data"
    inits, nodes, outs = [], [], []
    rng = np.random.default_rng(0)
    pool = (rng.standard_normal(1 << 24, dtype=np.float32) * 0.02).astype(np.float16)  # 32 MiB of N(0, 0.02)
    off = 0
    with open(path + ".data", "wb") as f:
        def add(name, shape):
            nonlocal off
            n = int(np.prod(shape))
            chunk = 1 << 24
            for i in range(0, n, chunk):  # float16 from a random pool at a random rotation, in chunks
                k = min(chunk, n - i)
                f.write(np.roll(pool, int(rng.integers(0, pool.size)))[:k].tobytes())
            t = onnx.TensorProto()
            t.name, t.data_type = name, T.FLOAT16
            t.dims.extend(shape)
            t.data_location = onnx.TensorProto.EXTERNAL
            for key, v in (("location", data), ("offset", str(off)), ("length", str(n * 2))):
                e = t.external_data.add()
                e.key, e.value = key, v
            off += n * 2
            pad = (-off) % 4096
            f.write(b"\0" * pad)
            off += pad
            inits.append(t)
        shapes = {"q": (HID, HID), "k": (HID, KV), "v": (HID, KV), "o": (HID, HID), "gate": (HID, INTER),
                  "up": (HID, INTER), "down": (INTER, HID)}
        for l in range(layers):
            for p, shp in shapes.items():
                w = f"model.layers.{l}.{p}.weight"
                add(w, list(shp))
                nodes.append(h.make_node("MatMul", [f"x{shp[0]}", w], [f"y.{l}.{p}"], name=f"layers.{l}.{p}"))
                outs.append(h.make_tensor_value_info(f"y.{l}.{p}", T.FLOAT16, [1, shp[1]]))
        add("lm_head.weight", [HID, VOCAB])
        nodes.append(h.make_node("MatMul", [f"x{HID}", "lm_head.weight"], ["logits"], name="lm_head"))
        outs.append(h.make_tensor_value_info("logits", T.FLOAT16, [1, VOCAB]))
        add("embed_tokens.weight", [VOCAB, HID])
        nodes.append(h.make_node("Gather", ["embed_tokens.weight", "ids"], ["emb"], name="embed"))
        outs.append(h.make_tensor_value_info("emb", T.FLOAT16, [1, HID]))
    ins = [h.make_tensor_value_info(f"x{HID}", T.FLOAT16, [1, HID]), h.make_tensor_value_info(f"x{INTER}", T.FLOAT16, [1, INTER]),
           h.make_tensor_value_info("ids", T.INT64, [1])]
    g = h.make_graph(nodes, "qwen2.5-7b-matmuls", ins, outs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    onnx.save(m, path)  # tensors already reference the data file
    return off


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--dir", default=None)
    ap.add_argument("--layers", type=int, default=28)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    import oracle_util as U
    d = a.dir or tempfile.mkdtemp(prefix="wm_bench_rss_")
    src, dst = os.path.join(d, "w7b.onnx"), os.path.join(d, "w7b_int4.onnx")
    if not os.path.exists(src):
        t0 = time.time()
        total = write_model(src, a.layers)
        print(f"wrote {total / 2**30:.1f} GiB of float16 weights in {time.time() - t0:.0f}s", file=sys.stderr)
    src_bytes = os.path.getsize(src) + os.path.getsize(src + ".data")
    winml = os.path.join(a.build, "winml")
    t0 = time.time()
    r = U.run_fresh([winml, "quantize", "-m", src, "-o", dst, "-p", "int4", "--block-size", "32", "-f", "json"],
                    timeout=7200)
    secs = time.time() - t0
    if r.returncode:
        sys.exit(U.describe(r))
    rep = json.loads(r.stdout)
    out_bytes = os.path.getsize(dst) + os.path.getsize(dst + ".data")
    res = {"layers": a.layers, "input_gib": round(src_bytes / 2**30, 2), "output_gib": round(out_bytes / 2**30, 2),
           "quantized_matmuls": rep["report"]["quantized"], "streamed": rep["streamed"],
           "peak_rss_gib": round(rep["report"]["peak_rss_bytes"] / 2**30, 3), "seconds": round(secs, 1)}
    text = json.dumps(res, indent=1)
    print(text)
    if a.json:
        open(a.json, "w").write(text)
    if not a.keep and not a.dir:
        shutil.rmtree(d)


if __name__ == "__main__":
    main()
