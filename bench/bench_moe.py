#!/usr/bin/env python3
"""A real mixture-of-experts configuration against a dense model of the same active size (issue 35), random weights.

ibm-granite/granite-3.0-3b-a800m-instruct's config (granitemoe: 32 layers, hidden 1536, 40 experts of width 512, top
8; 3.30 B parameters) and a dense granite of the same active size (the same config with one MLP of width 8 x 512 =
4096; 0.88 B parameters), each `winml build --random-weights -p int4` (the experts as QMoE, 4-bit) then `winml perf`:
build time and peak RSS, file size, prefill and decode tokens/s, peak RSS of the run. The expert bytes a decode step
reads per layer are computed from the QMoE tensors: the k chosen experts' codes and scales against all E of them (our
QMoE kernel runs an expert's GEMM only when a row picked it).

--cpu-rounds N (N > 0): the speeds are also timed in CPU time, one thread, as bench_llm_cpu.py does it (the thread's
CPU of the session runs: a prefill of --prompt-len ids and 32 decode steps), the two models alternated over N rounds,
best of rounds: on a machine shared with other jobs the wall-time columns mostly measure the other jobs. The builds
are kept in the work folder until both are timed.

usage: bench/bench_moe.py [--winml build/winml] [--work DIR] [--prompt-len 128] [--gen-len 32] [--layers N]
                          [--cpu-rounds N]
Not part of the test suite.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_llm_cpu as C  # noqa: E402
import bench_llm_seeds as S  # noqa: E402

GRANITE_MOE_3B = {
    "architectures": ["GraniteMoeForCausalLM"], "model_type": "granitemoe", "hidden_size": 1536,
    "intermediate_size": 512, "num_hidden_layers": 32, "num_attention_heads": 24, "num_key_value_heads": 8,
    "num_local_experts": 40, "num_experts_per_tok": 8, "vocab_size": 49155, "max_position_embeddings": 4096,
    "embedding_multiplier": 12.0, "residual_multiplier": 0.22, "attention_multiplier": 0.015625,
    "logits_scaling": 6.0, "rms_norm_eps": 1e-06, "rope_theta": 10000, "tie_word_embeddings": True,
    "hidden_act": "silu", "attention_bias": False, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0,
    "torch_dtype": "bfloat16"}


def dense_of(moe):
    c = dict(moe, model_type="granite", architectures=["GraniteForCausalLM"],
             intermediate_size=moe["intermediate_size"] * moe["num_experts_per_tok"])
    for k in ("num_local_experts", "num_experts_per_tok"):
        c.pop(k)
    return c


def qmoe_bytes(out):
    """(bytes of one layer's QMoE experts, bytes of k of them) from the built graph's QMoE codes and scales"""
    import numpy as np
    import onnx
    m = onnx.load(os.path.join(out, "model.onnx"), load_external_data=False)
    inits = {t.name: t for t in m.graph.initializer}
    elem = {onnx.TensorProto.FLOAT: 4, onnx.TensorProto.UINT8: 1, onnx.TensorProto.FLOAT16: 2}
    for n in m.graph.node:
        if n.op_type == "QMoE":
            k = next(a.i for a in n.attribute if a.name == "k")
            ts = [inits[n.input[i]] for i in (2, 3, 5, 6)]  # fc1 codes, scales; fc2 codes, scales
            total = sum(int(np.prod(t.dims)) * elem[t.data_type] for t in ts)
            return total, total * k // ts[0].dims[0]
    return 0, 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--winml", default=os.path.join(S.ROOT, "build", "winml"))
    ap.add_argument("--work", default="/tmp/wm_bench_moe")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--gen-len", type=int, default=32)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--block-size", type=int, default=32)
    ap.add_argument("--layers", type=int, default=0, help="fewer layers (0: the config's)")
    ap.add_argument("--cpu-rounds", type=int, default=0, help="also time both in CPU time, one thread, N rounds")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    moe = dict(GRANITE_MOE_3B)
    if args.layers:
        moe["num_hidden_layers"] = args.layers
    print(f"{'model':34} {'build s':>7} {'b.RSS MB':>8} {'file MB':>7} {'prefill t/s':>11} {'decode t/s':>10} "
          f"{'run RSS MB':>10}  experts read / layer / token")
    outs = []
    for i, (name, cfg) in enumerate((("granite-3.0-3b-a800m (granitemoe)", moe),
                                     ("dense granite, same active size", dense_of(moe)))):
        ckpt = os.path.join(args.work, "ckpt")
        shutil.rmtree(ckpt, ignore_errors=True)
        os.makedirs(ckpt)
        json.dump(cfg, open(os.path.join(ckpt, "config.json"), "w"))
        out = os.path.join(args.work, f"out{i}")
        insp = json.loads(subprocess.run([args.winml, "inspect", "-m", ckpt, "-f", "json"], check=True,
                                         capture_output=True, text=True).stdout)
        recipe, _ = S.recipe_for(args.winml, ckpt, "int4", args.block_size, args.work, 4 * insp["parameters"])
        build_s, size, rss = S.build(args.winml, ckpt, out, recipe)
        llm = S.perf(args.winml, out, args, False)["llm"]
        allb, kb = qmoe_bytes(out)
        read = f"{kb / 2**20:.1f} of {allb / 2**20:.1f} MB" if allb else "(dense MLP)"
        print(f"{name:34} {build_s:7.1f} {rss / 2**20:8.0f} {size / 2**20:7.0f} {llm['prefill_tokens_per_sec']:11.1f} "
              f"{llm['decode_tokens_per_sec']:10.2f} {llm['peak_rss_mb']:10.0f}  {read}  "
              f"({insp['parameters'] / 1e9:.2f} B parameters)", flush=True)
        if args.cpu_rounds:
            outs.append((name, out))
        else:
            shutil.rmtree(out, ignore_errors=True)
    if args.cpu_rounds:
        cpu(args, outs)
    return 0


def cpu(args, outs):
    """prefill / decode tokens/s of each build in CPU time (bench_llm_cpu.py's method), alternated, best of rounds"""
    a = argparse.Namespace(prompt_len=args.prompt_len, steps=32)
    best = {}
    print(f"\nCPU time, 1 thread, prompt {args.prompt_len} ids, {a.steps} decode steps; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for r in range(args.cpu_rounds):
        for name, out in (outs if r % 2 == 0 else outs[::-1]):
            pre, dec = C.tps(C.winml_speed(args.winml, out, a), a)
            b = best.setdefault(name, [0.0, 0.0])
            b[0], b[1] = max(b[0], pre), max(b[1], dec)
            print(f"  round {r + 1} {name:34} prefill {pre:7.1f} tok/s  decode {dec:6.2f} tok/s  "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
    (m, (mp, md)), (d, (dp, dd)) = list(best.items())
    print(f"best of {args.cpu_rounds}: {m} {mp:.1f} / {md:.2f}, {d} {dp:.1f} / {dd:.2f} tok/s prefill / decode: "
          f"MoE / dense {mp / dp:.2f}x / {md / dd:.2f}x", flush=True)
    for _, out in outs:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
