#!/usr/bin/env python3
"""The files bench/bench_llm_cpu.py times, for one published config at full depth, and the bytes a decode step reads.

  bench/llm_cpu_prep.py --config examples/configs/phi-2 --work DIR [--winml build/winml] [--stem phi-2]
writes into DIR (once; a file already there is kept):
  ckpt/                  random weights of the config (seed 0), bfloat16 safetensors, and a fitting tokenizer
                         (bench_llm_peers.make_checkpoint: a 2.7B model is about 2 bytes a parameter of RAM and disk)
  STEM-f16.gguf, STEM-q4_0.gguf, STEM-q8_0.gguf, STEM-q4_k_m.gguf
                         llama.cpp's converter to F16, then llama_model_quantize: pure Q4_0 / Q8_0 (every matrix,
                         bench_llm_peers.llama_models) and Q4_K_M (its default mixture, not pure)
  winml_int4, winml_int4-pure, winml_int8
                         `winml build` of the same folder: the default int4 recipe (8-bit table, head and v / down
                         projections), every matrix 4-bit, and -p int8-rtn (bench_llm_peers.winml_build)
and prints the weight MiB a decode step reads for each (ours: bench_llm_peers.weight_bytes_per_token; a GGUF's:
every tensor, one row of token_embd when the model has its own output tensor), and the --pair arguments of
bench_llm_cpu.py. llama.cpp: eval "$(bench/setup_llamacpp.sh)" first. Not part of the test suite.
"""
import argparse
import collections
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_llm_peers as peers  # noqa: E402


def gguf_mib(path):
    import gguf
    ts = gguf.GGUFReader(path).tensors
    names = {t.name for t in ts}
    total, by = 0, collections.Counter()
    for t in ts:
        b = int(t.n_bytes)
        if t.name == "token_embd.weight" and "output.weight" in names:
            b //= int(t.shape[-1])  # gathered: one row a token
        total += b
        by[t.tensor_type.name] += b
    return total / 2**20, ", ".join(f"{k} {v / 2**20:.0f}" for k, v in by.most_common())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="a folder of examples/configs or a config.json")
    ap.add_argument("--work", required=True)
    ap.add_argument("--winml", default=os.path.join(os.path.dirname(HERE), "build", "winml"))
    ap.add_argument("--stem", help="the GGUF files' name stem (default: the config's folder name)")
    a = ap.parse_args()
    import llama_cpp
    config = peers.config_path(a.config)
    stem = a.stem or peers.config_name(config)
    os.makedirs(a.work, exist_ok=True)
    ck = peers.make_checkpoint(a.work, config)
    ggufs = peers.llama_models(ck, a.work, stem)
    km = os.path.join(a.work, f"{stem}-q4_k_m.gguf")
    if not os.path.exists(km):
        p = llama_cpp.llama_model_quantize_default_params()
        p.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
        p.nthread = 2
        if llama_cpp.llama_model_quantize(ggufs["fp16"].encode(), km.encode(), p) != 0:
            raise RuntimeError("llama_model_quantize (Q4_K_M) failed")
    ours = {prec: peers.winml_build(a.winml, ck, os.path.join(a.work, "winml_" + prec), prec)
            for prec in ("int4", "int4-pure", "int8")}
    for prec, out in ours.items():
        print(f"{out}: {peers.weight_bytes_per_token(os.path.join(out, 'model.onnx')) / 2**20:.0f} MiB a token")
    for path in (ggufs["int4"], km, ggufs["int8"]):
        mib, by = gguf_mib(path)
        print(f"{path}: {mib:.0f} MiB a token ({by})")
    for label, prec, g in (("int4/Q4_0", "int4", ggufs["int4"]), ("int4/Q4_K_M", "int4", km),
                           ("int4-pure/Q4_0", "int4-pure", ggufs["int4"]), ("int8-rtn/Q8_0", "int8", ggufs["int8"])):
        print(f"--pair {stem}-{label}={ours[prec]},{g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
