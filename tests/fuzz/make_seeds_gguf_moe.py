"""Seeds for fuzz_gguf with mixture-of-experts metadata and expert stacks (llama.cpp's layout): a Mixtral (llama
with expert_count, Q8_0 experts split per expert), a Qwen2-MoE (Q4_0 experts, a shared expert and its 1-D gate) and
a GraniteMoE with a shared expert (gate / up stacks read as one pair). Run: python make_seeds_gguf_moe.py OUTDIR"""
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

H, I, E, V = 32, 32, 2, 8


def write(path, arch, quant, extra_kv, tensors):
    rng = np.random.default_rng(len(arch))
    w = gguf.GGUFWriter(path, arch)
    for k, v in dict(block_count=1, context_length=16, embedding_length=H, feed_forward_length=I,
                     **{"attention.head_count": 2, "attention.head_count_kv": 1, "vocab_size": V,
                        "expert_count": E, "expert_used_count": 2}, **extra_kv).items():
        w.add_uint32(f"{arch}.{k}", v)
    for name, shape in tensors:
        x = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        if quant and "exps" in name:
            w.add_tensor(name, gguf.quants.quantize(x, quant), raw_dtype=quant)
        else:
            w.add_tensor(name, x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def layer(extra=()):
    return [("token_embd.weight", (V, H)), ("output_norm.weight", (H,)), ("blk.0.attn_norm.weight", (H,)),
            ("blk.0.attn_q.weight", (H, H)), ("blk.0.attn_k.weight", (16, H)), ("blk.0.attn_v.weight", (16, H)),
            ("blk.0.attn_output.weight", (H, H)), ("blk.0.ffn_norm.weight", (H,)),
            ("blk.0.ffn_gate_inp.weight", (E, H)), ("blk.0.ffn_gate_exps.weight", (E, I, H)),
            ("blk.0.ffn_up_exps.weight", (E, I, H)), ("blk.0.ffn_down_exps.weight", (E, H, I))] + list(extra)


out = sys.argv[1]
write(f"{out}/moe_mixtral_q8.gguf", "llama", T.Q8_0, {}, layer())
write(f"{out}/moe_qwen2moe_q4.gguf", "qwen2moe", T.Q4_0,
      {"expert_feed_forward_length": I, "expert_shared_feed_forward_length": I},
      layer([("blk.0.ffn_gate_shexp.weight", (I, H)), ("blk.0.ffn_up_shexp.weight", (I, H)),
             ("blk.0.ffn_down_shexp.weight", (H, I)), ("blk.0.ffn_gate_inp_shexp.weight", (H,))]))
write(f"{out}/moe_granitemoe_shared_q4.gguf", "granitemoe", T.Q4_0, {"expert_shared_feed_forward_length": I},
      layer([("blk.0.ffn_gate_shexp.weight", (I, H)), ("blk.0.ffn_up_shexp.weight", (I, H)),
             ("blk.0.ffn_down_shexp.weight", (H, I))]))
