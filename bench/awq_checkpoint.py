#!/usr/bin/env python3
"""Activation-aware per-input-channel scaling (the idea of AWQ, Lin et al. 2023) as a float checkpoint transform: an
experiment that measures what the scaling would give our int4 RTN before it is written in C (issue 31). Figures only.

For every decoder layer of a Llama-style checkpoint (SmolLM2, Gemma 3: q/k/v/o, gate/up/down), the float model
(transformers) runs on a calibration text and each group of matrices that read one input x [T, K] gets scales
s = mean|x|^alpha (normalized to geometric mean 1 of its extremes), alpha in 0, 0.1 .. 1 searched per group for the
least sum over the group of ||x W - (x / s) RTN(diag(s) W)||^2, with the default int4 recipe's RTN (asymmetric
blocks of 32 along K, uint8 zero point, half-exact scales; 8 bits for v_proj / down_proj in Q4_K_M's "more bits"
layers as the default table has them). alpha 0 (s = 1) is a candidate, so no group gets worse on the calibration.
The inverse scale is folded into what makes x, so the written checkpoint is the same function in exact arithmetic:
  input norm -> q, k, v: the norm's weight / s (Gemma: its (1 + w) / s), q/k/v's input columns * s;
  v -> o: v_proj's output rows / s, o_proj's input columns * s (one scale per kv channel: under grouped-query
          attention the q heads sharing a kv head read the same v channel, so their scales are averaged);
  norm before the MLP -> gate, up: as the input norm;  up -> down: up_proj's output rows / s (act(gate) * up is
          linear in up), down_proj's input columns * s.
The tied lm_head (its input: the final norm) is left alone (its table is the token embedding).

    python bench/awq_checkpoint.py --model smollm2|gemma3 --calib FILE --out DIR [--checkpoint DIR]
then  python bench/int4_quality.py --model M --checkpoint DIR --only "int4 default" ...  (fp32 of DIR: the same
perplexity as the source's, up to float rounding). FILE: e.g. the self-generated text int4_quality.py's --self-calib
writes (data-free); it is cut into sequences of 512 tokens as quant.calibration_text is.
"""
import argparse
import os
import shutil
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def more_bits(i, n):
    """llama.cpp Q4_K_M's layers with more bits (the default int4 recipe's table, src/opt/quant_nbits.c)."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def rtn(wt, bits, bs=32):
    """wt [K, N] quantized and dequantized as the default recipe does: asymmetric blocks of bs along K, uint8 zero
    point, the scale rounded to a half when that is a normal half, round half away from zero."""
    K, N = wt.shape
    kmax = (1 << bits) - 1
    b = wt.reshape(K // bs, bs, N).astype(np.float32)
    lo, hi = np.minimum(b.min(1), 0), np.maximum(b.max(1), 0)
    s = (hi - lo) / np.float32(kmax)
    s16 = s.astype(np.float16).astype(np.float32)
    s = np.where((np.abs(s16) >= 6.103515625e-05) & (np.abs(s16) <= 65504), s16, s)
    d = np.where(s != 0, s, 1)
    z = np.clip(np.floor(-lo / d + 0.5), 0, kmax)
    v = b / d[:, None]
    q = np.clip(np.floor(np.abs(v) + 0.5) * np.sign(v) + z[:, None], 0, kmax)
    return ((q - z[:, None]) * s[:, None]).reshape(K, N).astype(np.float64)


def search(x, ws, bits, group=None):
    """(alpha, s [K], error ratio to s = 1) for inputs x [T, K] of the matrices ws ([K, N] each, bits each)."""
    a = np.abs(x).mean(0)
    a = np.maximum(group(a) if group else a, 1e-8)
    ys = [x @ w for w in ws]
    best, e0 = None, None
    for alpha in np.round(np.arange(0, 1.01, 0.1), 1):
        s = a ** alpha
        s = s / np.sqrt(s.max() * s.min())
        e = sum(float(np.sum((y - (x / s) @ rtn(w * s[:, None], b)) ** 2)) for y, w, b in zip(ys, ws, bits))
        e0 = e if e0 is None else e0
        if best is None or e < best[0]:
            best = (e, alpha, s)
    return best[1], best[2], best[0] / e0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["smollm2", "gemma3"], default="smollm2")
    ap.add_argument("--checkpoint", help="float checkpoint folder (default: the model's dequantized GGUF)")
    ap.add_argument("--calib", required=True, help="calibration text file")
    ap.add_argument("--out", required=True, help="folder for the scaled checkpoint")
    a = ap.parse_args()
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM
    ck = a.checkpoint
    if not ck:
        sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))
        import real_weights
        ck = real_weights.hf_from_gguf(real_weights.gemma3_gguf() if a.model == "gemma3" else real_weights.smollm2_gguf())
    m = AutoModelForCausalLM.from_pretrained(ck, dtype=torch.float32).eval()
    cfg = m.config
    gemma = cfg.model_type.startswith("gemma")  # RMSNorm scales by (1 + w)
    tok = Tokenizer.from_file(os.path.join(ck, "tokenizer.json"))
    with open(a.calib, encoding="utf-8") as fh:
        ids = tok.encode(fh.read(), add_special_tokens=False).ids
    acts = {}

    def hook(key):
        def f(mod, inp, out):
            acts.setdefault(key, []).append(inp[0].detach().reshape(-1, inp[0].shape[-1]).double().numpy())
        return f
    reads = ("self_attn.q_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.down_proj")
    hooks = [layer.get_submodule(n).register_forward_hook(hook((i, n)))
             for i, layer in enumerate(m.model.layers) for n in reads]
    n_seq = max(len(ids) // 512, 1)
    with torch.no_grad():
        for i in range(n_seq):
            m(torch.tensor([ids[i * 512:(i + 1) * 512]]))
    for h in hooks:
        h.remove()
    acts = {k: np.concatenate(v) for k, v in acts.items()}
    nl, hq, hkv = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // hq
    rep = hq // hkv

    def wt(lin):
        return lin.weight.detach().double().numpy().T.copy()  # [K, N]

    def fold_norm(norm, s):
        w = norm.weight.double()
        norm.weight.data = ((1 + w) / s - 1).float() if gemma else (w / s).float()

    def scale_in(lin, s):
        lin.weight.data = (lin.weight.double() * s[None]).float()

    def scale_out(lin, s):
        lin.weight.data = (lin.weight.double() / s[:, None]).float()

    print(f"{a.model}: {len(ids)} calibration tokens, {n_seq} sequence(s) of up to 512; per layer: alpha and the "
          f"group's error relative to alpha 0", flush=True)
    with torch.no_grad():
        for i, layer in enumerate(m.model.layers):
            at, mlp, b8 = layer.self_attn, layer.mlp, 8 if more_bits(i, nl) else 4
            msg = [f"layer {i}"]
            al, s, r = search(acts[(i, "self_attn.q_proj")], [wt(at.q_proj), wt(at.k_proj), wt(at.v_proj)], [4, 4, b8])
            s = torch.from_numpy(s)
            fold_norm(layer.input_layernorm, s)
            for lin in (at.q_proj, at.k_proj, at.v_proj):
                scale_in(lin, s)
            msg.append(f"qkv {al:.1f} {r:.3f}")
            grp = lambda v: np.repeat(v.reshape(hkv, rep, hd).mean(1)[:, None, :], rep, 1).reshape(-1)  # noqa: E731
            al, s, r = search(acts[(i, "self_attn.o_proj")], [wt(at.o_proj)], [4], grp)
            s = torch.from_numpy(s)
            scale_out(at.v_proj, s.reshape(hkv, rep, hd)[:, 0, :].reshape(-1))
            scale_in(at.o_proj, s)
            msg.append(f"o {al:.1f} {r:.3f}")
            al, s, r = search(acts[(i, "mlp.gate_proj")], [wt(mlp.gate_proj), wt(mlp.up_proj)], [4, 4])
            s = torch.from_numpy(s)
            fold_norm(layer.pre_feedforward_layernorm if gemma else layer.post_attention_layernorm, s)
            scale_in(mlp.gate_proj, s)
            scale_in(mlp.up_proj, s)
            msg.append(f"gate/up {al:.1f} {r:.3f}")
            al, s, r = search(acts[(i, "mlp.down_proj")], [wt(mlp.down_proj)], [b8])
            s = torch.from_numpy(s)
            scale_out(mlp.up_proj, s)
            scale_in(mlp.down_proj, s)
            msg.append(f"down {al:.1f} {r:.3f}")
            print("  " + ", ".join(msg), flush=True)
    os.makedirs(a.out, exist_ok=True)
    m.save_pretrained(a.out, safe_serialization=True)
    for f in os.listdir(ck):  # the source's config and tokenizer files as they are
        if f != "model.safetensors" and not f.endswith(".safetensors") and os.path.isfile(os.path.join(ck, f)):
            shutil.copy(os.path.join(ck, f), a.out)
    print(f"written {a.out}")


if __name__ == "__main__":
    main()
