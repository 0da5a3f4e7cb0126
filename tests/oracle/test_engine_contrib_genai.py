"""Engine vs onnxruntime on onnxruntime-genai model-builder graphs (part (c) of the contrib-op
oracle tests, see test_engine_contrib.py).

Tiny random Qwen2 / Llama checkpoints (transformers save_pretrained, GQA: 4 query heads, 2 kv heads)
go through `python -m onnxruntime_genai.models.builder -e cpu`:
  * fp32: GroupQueryAttention (packed QKV, rotary inside: do_rotary), SkipSimplifiedLayerNormalization,
    SimplifiedLayerNormalization;
  * int4 (accuracy_level=1, float32 activations): the same with MatMulNBits (block 32);
  * fp32 with the rotary embedding as its own op and separate Q/K/V (the builder's choice for EPs
    that cannot fuse them, forced here): RotaryEmbedding + GroupQueryAttention.
Each model runs a prefill with an empty past, then a decode step whose past is a max-length buffer
(past_present_share_buffer layout: the prefill's present in the first rows, garbage after them);
every output, present included, must match onnxruntime within 1e-4.
"""
import json
import os
import sys

import numpy as np
import onnx
import pytest

import oracle_util as U
from engine_oracle import compare, ort_run, wm_run

import onnxruntime_genai  # noqa: E402,F401
import torch  # noqa: E402  (a missing oracle dependency fails the tests, it does not skip them)
import transformers  # noqa: E402

MAX_LEN = 24  # the decode step's past buffer

# runs the builder; with --separate-rope first, the rotary embedding is not fused into GroupQueryAttention
# and Q/K/V are separate projections (what the builder emits for EPs that cannot fuse them)
DRIVER = """
import runpy, sys
if sys.argv[1] == "--separate-rope":
    del sys.argv[1]
    import os, onnxruntime_genai.models as gm
    sys.path.insert(0, os.path.dirname(gm.__file__))  # the builder imports its modules as top-level `builders`
    from builders import base
    base.Model.is_fused_rope_supported = lambda self: False
    base.Model.is_packed_matmul_supported = lambda self: False  # separate Q/K/V so each gets its RotaryEmbedding
runpy.run_module("onnxruntime_genai.models.builder", run_name="__main__", alter_sys=True)
"""


def make_checkpoint(folder, arch):
    common = dict(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=False)
    torch.manual_seed(0)
    if arch == "qwen2":
        m = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common))
    else:
        m = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    m.eval().save_pretrained(folder)
    # a small word-level tokenizer: the builder loads one with AutoTokenizer (no hub access here)
    from tokenizers import Tokenizer, models, pre_tokenizers
    vocab = {f"w{i}": i for i in range(254)}
    vocab.update({"<unk>": 254, "</s>": 255})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="</s>").save_pretrained(folder)


def build(work, arch, precision, separate_rope=False, extra=()):
    ckpt = os.path.join(work, f"{arch}_ckpt")
    if not os.path.exists(ckpt):
        make_checkpoint(ckpt, arch)
    out = os.path.join(work, f"{arch}_{precision}{'_rope' if separate_rope else ''}")
    argv = [sys.executable, "-c", DRIVER] + (["--separate-rope"] if separate_rope else []) + [
        "-m", ckpt, "-o", out, "-p", precision, "-e", "cpu", "-c", os.path.join(work, "cache")]
    if extra:
        argv += ["--extra_options", *extra]
    r = U.run(argv, timeout=600)
    assert r.returncode == 0, U.describe(r)
    return os.path.join(out, "model.onnx")


def ops_of(path):
    m = onnx.load(path, load_external_data=False)
    return {(n.domain or "", n.op_type) for n in m.graph.node}


def kv_names(path):
    m = onnx.load(path, load_external_data=False)
    ins = [i.name for i in m.graph.input]
    return ins, [i for i in ins if i.startswith("past_key_values.")]


def prefill_decode(build_dir, work, path, tag, atol=1e-4):
    ins, pasts = kv_names(path)
    m = onnx.load(path, load_external_data=False)
    shapes = {i.name: i.type.tensor_type.shape.dim for i in m.graph.input}
    nkv, hd = shapes[pasts[0]][1].dim_value, None
    rng = np.random.default_rng(5)
    B, S = 2, 6
    feeds = {"input_ids": rng.integers(0, 256, (B, S)).astype(np.int64), "attention_mask": np.ones((B, S), np.int64)}
    if "position_ids" in ins:
        feeds["position_ids"] = np.tile(np.arange(S), (B, 1)).astype(np.int64)
    hd = 64 // 4
    for p in pasts:
        feeds[p] = np.zeros((B, nkv, 0, hd), np.float32)
    ref = ort_run(path, feeds)
    got = wm_run(build_dir, path, feeds, work, tag=f"{tag}_prefill")
    w1 = compare(ref, got, atol, what=f"{tag} prefill")
    # decode: the past is a max-length buffer holding the prefill's keys/values in its first S rows
    step = {"input_ids": rng.integers(0, 256, (B, 1)).astype(np.int64), "attention_mask": np.ones((B, S + 1), np.int64)}
    if "position_ids" in ins:
        step["position_ids"] = np.full((B, 1), S, np.int64)
    for p in pasts:
        present = ref[p.replace("past_key_values", "present")]
        buf = rng.standard_normal((B, nkv, MAX_LEN, hd)).astype(np.float32)  # garbage past the valid rows
        buf[:, :, :S] = present[:, :, :S]
        step[p] = buf
    ref2 = ort_run(path, step)
    for k, v in ref2.items():
        if k.startswith("present"):
            assert v.shape[2] == MAX_LEN, f"{k}: onnxruntime's present is {v.shape}, expected the buffer length"
    got2 = wm_run(build_dir, path, step, work, tag=f"{tag}_decode")
    w2 = compare(ref2, got2, atol, what=f"{tag} decode")
    print(f"{tag}: prefill max abs diff {max(w1.values()):.3g}, decode {max(w2.values()):.3g}")
    return w1, w2


@pytest.fixture(scope="module")
def work(request):
    return str(U.scratch(request, "genai"))


def test_genai_qwen2_fp32(build_dir, work):
    path = build(work, "qwen2", "fp32")
    ops = ops_of(path)
    for op in ("GroupQueryAttention", "SkipSimplifiedLayerNormalization"):
        assert ("com.microsoft", op) in ops, ops
    prefill_decode(build_dir, work, path, "qwen2_fp32")


def test_genai_qwen2_int4(build_dir, work):
    path = build(work, "qwen2", "int4", extra=("accuracy_level=1",))
    assert ("com.microsoft", "MatMulNBits") in ops_of(path)
    prefill_decode(build_dir, work, path, "qwen2_int4")


def test_genai_llama_separate_rotary(build_dir, work):
    path = build(work, "llama", "fp32", separate_rope=True)
    ops = ops_of(path)
    assert ("com.microsoft", "RotaryEmbedding") in ops and ("com.microsoft", "GroupQueryAttention") in ops, ops
    prefill_decode(build_dir, work, path, "llama_rope")


def test_genai_config_names_the_graph(work):
    # the builder's runtime config describes the same graph the tests ran (decoder file, kv heads, head size)
    cfg = json.load(open(os.path.join(work, "qwen2_fp32", "genai_config.json")))
    dec = cfg["model"]["decoder"]
    assert dec["filename"] == "model.onnx" and dec["num_key_value_heads"] == 2 and dec["head_size"] == 16
