"""More decoder families through the tables (issue 35): Phi, GPT-NeoX, StableLM, OLMo 2, SmolLM3, StarCoder2,
Cohere and Cohere 2, as tiny random checkpoints saved by transformers (hidden 64, 2-3 layers, vocab 256) whose configs exercise
the family's graph features: parallel attention + MLP (one shared norm or a norm each), partial rotary, fused qkv laid
out per head, output-only norms with q/k norms over all heads, layers without rotary positions, interleaved rotary,
logit scaling, biases everywhere (lm_head's too), sliding-window layers with rotary positions beside a full-attention
layer without (Cohere 2, window 5, so the 32 greedy steps run past it).

For each: `inspect` names the features; the exported graph in onnxruntime and in our engine matches transformers'
logits and KV cache (max abs 1e-4, left / right padding, batch 3) and 32 greedy steps through the KV cache equal
transformers' generate() token for token (batch 2, one row left-padded); `winml build` (optimized fp32) keeps
transformers' logits, the fp16 build stays within half-precision error and the int4 build runs the same in both
runtimes; a config value the graph does not model is refused by name.
"""
import copy
import json
import os

import numpy as np
import onnx
import pytest
import torch

import builder_util as BU
import oracle_util as U
from test_builder import assert_close, empty_past, greedy, masks, positions

TOL = 1e-4
DEC = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, vocab_size=256,
           max_position_embeddings=128)


def _specs():
    import transformers as T
    rope = dict(rope_type="default", rope_theta=500.0)
    return {
        # parallel attention + MLP on one LayerNorm, rotary on 8 of 16 dims, biases everywhere, lm_head bias
        "phi": (T.PhiConfig, T.PhiForCausalLM, dict(DEC, rope_parameters=dict(rope, partial_rotary_factor=0.5))),
        # parallel residual with a norm per sublayer, rotary on 4 of 16 dims, fused qkv per head
        "gpt_neox": (T.GPTNeoXConfig, T.GPTNeoXForCausalLM, dict(
            DEC, use_parallel_residual=True, rope_parameters=dict(rope, partial_rotary_factor=0.25))),
        # sequential residual, no attention biases, 3 layers
        "gpt_neox_seq": (T.GPTNeoXConfig, T.GPTNeoXForCausalLM, dict(
            DEC, num_hidden_layers=3, use_parallel_residual=False, attention_bias=False,
            rope_parameters=dict(rope, partial_rotary_factor=0.5))),
        # LayerNorm'ed Llama with q/k/v biases, grouped KV heads, rotary on 4 of 16 dims
        "stablelm": (T.StableLmConfig, T.StableLmForCausalLM, dict(
            DEC, num_key_value_heads=2, use_qkv_bias=True, rope_parameters=dict(rope, partial_rotary_factor=0.25))),
        # the same with use_parallel_residual: the MLP reads the input norm (no post_attention_layernorm)
        "stablelm_par": (T.StableLmConfig, T.StableLmForCausalLM, dict(
            DEC, num_key_value_heads=2, use_parallel_residual=True,
            rope_parameters=dict(rope, partial_rotary_factor=0.5))),
        # output norms only, q/k RMSNorm over all heads, grouped KV heads
        "olmo2": (T.Olmo2Config, T.Olmo2ForCausalLM, dict(DEC, num_key_value_heads=2, rope_parameters=rope,
                                                          pad_token_id=0, bos_token_id=None, eos_token_id=None)),
        # every 2nd layer without rotary positions (transformers writes no_rope_layers [1, 0, 1])
        "smollm3": (T.SmolLM3Config, T.SmolLM3ForCausalLM, dict(
            DEC, num_hidden_layers=3, num_key_value_heads=2, no_rope_layer_interval=2, rope_parameters=rope,
            pad_token_id=0, bos_token_id=None, eos_token_id=None)),
        # LayerNorms with biases, a plain GELU-tanh MLP, biases on every linear, tied embeddings
        "starcoder2": (T.Starcoder2Config, T.Starcoder2ForCausalLM, dict(
            DEC, num_key_value_heads=2, use_bias=True, rope_parameters=rope, bos_token_id=None, eos_token_id=None)),
        # parallel attention + MLP on one LayerNorm without bias, interleaved rotary, logits x logit_scale
        "cohere": (T.CohereConfig, T.CohereForCausalLM, dict(
            DEC, num_key_value_heads=2, logit_scale=0.25, rope_parameters=rope, pad_token_id=0, bos_token_id=None,
            eos_token_id=None)),
        # Cohere's layers; layers 0-2 sliding (window 5) with rotary positions, layer 3 full attention without
        "cohere2": (T.Cohere2Config, T.Cohere2ForCausalLM, dict(
            DEC, num_hidden_layers=4, num_key_value_heads=2, logit_scale=0.5, sliding_window=5, rope_parameters=rope,
            pad_token_id=0, bos_token_id=None, eos_token_id=None)),
    }


KINDS = ["phi", "gpt_neox", "gpt_neox_seq", "stablelm", "stablelm_par", "olmo2", "smollm3", "starcoder2", "cohere",
         "cohere2"]

# no bos / eos ids: generate() with min_new_tokens would suppress the eos token, which greedy decoding here does not
# (configs whose default ids lie outside the vocabulary of 256 say so only in a warning)

# what inspect must list for each (substrings of its features)
FEATURES = {
    "phi": ["rotary positions (theta 500, default, 8 of 16 dims)", "LayerNorm eps 1e-05, pre-norm",
            "parallel attention and MLP on one shared norm", "q/k/v bias", "output projection bias",
            "plain MLP (gelu_tanh) with bias", "separate lm_head with bias"],
    "gpt_neox": ["rotary positions (theta 500, default, 4 of 16 dims)", "parallel residual: attention and MLP on "
                 "their own norms", "fused qkv per head ([heads, q k v, head_dim])", "q/k/v bias",
                 "plain MLP (gelu) with bias", "separate lm_head"],
    "gpt_neox_seq": ["rotary positions (theta 500, default, 8 of 16 dims)", "fused qkv per head"],
    "stablelm": ["rotary positions (theta 500, default, 4 of 16 dims)", "LayerNorm eps 1e-05, pre-norm",
                 "grouped KV heads (4 query heads, 2 kv heads)", "q/k/v bias", "gated MLP (silu)"],
    "stablelm_par": ["parallel attention and MLP on one shared norm"],
    "olmo2": ["RMSNorm eps 1e-05, no pre-norms, attention and MLP outputs normalized before the residual add",
              "q/k RMSNorm over all heads"],
    "smollm3": ["no rotary positions on layers 1", "tied embeddings"],
    "starcoder2": ["LayerNorm eps 1e-05, pre-norm", "q/k/v bias", "output projection bias",
                   "plain MLP (gelu_tanh) with bias", "tied embeddings"],
    "cohere": ["rotary positions (theta 500, default, 16 of 16 dims, interleaved pairs)",
               "parallel attention and MLP on one shared norm", "logits multiplied by logit_scale (0.25)"],
    "cohere2": ["rotary positions (theta 500, default, 16 of 16 dims, interleaved pairs)",
                "no rotary positions on layers 3", "parallel attention and MLP on one shared norm",
                "logits multiplied by logit_scale (0.5)"],
}
ABSENT = {
    "gpt_neox_seq": ["parallel", "q/k/v bias"],
    "stablelm": ["parallel", "output projection bias"],
    "olmo2": ["parallel", "per head"],
    "phi": ["lm_head)"],
    "smollm3": ["layers 0", "layers 1, 2"],
    "starcoder2": ["gated"],
    "cohere2": ["layers 0", "layers 1", "layers 2"],
}


@pytest.fixture(scope="module")
def workdir(request):
    return U.scratch(request, "builder_dec2")


@pytest.fixture(scope="module")
def tiny(workdir):
    return BU.tiny_cache(workdir, lambda k, d: BU.make_tiny(k, d, spec=_specs()[k]))


@pytest.fixture(scope="module")
def exported(tiny, workdir, winml):
    return BU.export_cache(tiny, workdir, winml)


@pytest.mark.parametrize("kind", KINDS)
def test_inspect_lists_the_features(kind, tiny, winml):
    ckpt, _ = tiny(kind)
    r = U.run([winml, "inspect", "-m", ckpt, "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    j = json.loads(r.stdout)
    feats = " | ".join(j["features"])
    for want in FEATURES[kind]:
        assert want in feats, (want, feats)
    for bad in ABSENT.get(kind, []):
        assert bad not in feats, (bad, feats)
    assert j["tasks"] == ["text-generation"], j["tasks"]


@pytest.mark.parametrize("kind", KINDS)
def test_prefill_logits_and_present(kind, exported, run_model):
    model, path = exported(kind)
    rng = np.random.default_rng(1)
    B, S = 3, 9
    ids = BU.random_ids(rng, (B, S), model.config.vocab_size)
    mask = masks(B, S, rng)
    pos = positions(mask)
    with torch.no_grad():
        ref = model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), position_ids=torch.tensor(pos),
                    use_cache=True)
    out = run_model(path, {"input_ids": ids, "attention_mask": mask, "position_ids": pos, **empty_past(model, B)})
    valid = mask.astype(bool)
    assert_close(out["logits"], ref.logits.numpy(), valid, f"{kind} logits")
    kv_valid = valid[:, None, :, None]
    for i in range(model.config.num_hidden_layers):
        layer = ref.past_key_values.layers[i]
        k, v = layer.keys.numpy(), layer.values.numpy()
        # a sliding layer's cache in transformers keeps only the last window - 1 positions; ours keeps them all
        T = k.shape[2]
        vk = np.broadcast_to(kv_valid[:, :, S - T:], k.shape)
        assert_close(out[f"present.{i}.key"][:, :, S - T:], k, vk, f"{kind} present.{i}.key")
        assert_close(out[f"present.{i}.value"][:, :, S - T:], v, vk, f"{kind} present.{i}.value")


_GENERATED = {}


def _generate(kind, model, ids, mask):
    """transformers' 32 greedy tokens (once per kind, for both runners)."""
    if kind not in _GENERATED:
        gen = copy.deepcopy(model.generation_config)
        gen.eos_token_id = None
        gen.pad_token_id = 0
        gen.do_sample = False
        with torch.no_grad():
            out = model.generate(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                                 generation_config=gen, max_new_tokens=32, min_new_tokens=32)
        _GENERATED[kind] = out.numpy()[:, ids.shape[1]:]
    return _GENERATED[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_32_greedy_steps_match_generate(kind, exported, run_model):
    model, path = exported(kind)
    rng = np.random.default_rng(3)
    B, S = 2, 6
    ids = BU.random_ids(rng, (B, S), model.config.vocab_size)
    mask = np.ones((B, S), np.int64)
    mask[1, :2] = 0
    ids[1, :2] = 0
    ref = _generate(kind, model, ids, mask)
    ours = greedy(run_model, path, model, ids, mask, 32)
    assert ref.shape == (B, 32) and len(set(ref.ravel().tolist())) > 3  # not one token repeated
    np.testing.assert_array_equal(ours, ref)


def _build(winml, ckpt, out, *extra):
    again = ["--rebuild"] if os.path.exists(out) else []
    r = U.run([winml, "build", "-m", ckpt, "-o", out, "-q", "-f", "json", *extra, *again], timeout=300)
    assert r.returncode == 0, U.describe(r)
    stages = {st["name"]: st for st in json.loads(r.stdout)["stages"]}
    return os.path.join(out, "model.onnx"), stages


@pytest.mark.parametrize("kind", KINDS)
def test_optimized_build_matches_transformers(kind, tiny, workdir, winml, run_model):
    """`winml build` (export + optimize) keeps transformers' logits: full and right-padded rows always, the
    left-padded one too where the graph keeps its own mask (no GroupQueryAttention)."""
    ckpt, model = tiny(kind)
    path, stages = _build(winml, ckpt, str(workdir / f"opt_{kind}"))
    assert stages["optim"]["status"] == "completed" and stages["optim"]["nodes"] < stages["export"]["nodes"]
    mask = masks(3, 9, np.random.default_rng(7))
    if "GroupQueryAttention" in stages["optim"]["ops"]:
        mask = mask[:2]
    B, S = mask.shape
    ids = BU.random_ids(np.random.default_rng(7), (B, S), model.config.vocab_size)
    pos = positions(mask)
    with torch.no_grad():
        ref = model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                    position_ids=torch.tensor(pos)).logits.numpy()
    got = run_model(path, {"input_ids": ids, "attention_mask": mask, "position_ids": pos, **empty_past(model, B)})
    assert_close(got["logits"], ref, mask.astype(bool), f"{kind} optimized logits")


# partial rotary kinds: rotated dims per head (of 16) -> the optimized graph's RotaryEmbedding rotary_embedding_dim
PARTIAL = {"phi": 8, "gpt_neox": 4, "gpt_neox_seq": 8, "stablelm": 4, "stablelm_par": 8}


@pytest.mark.parametrize("kind", sorted(PARTIAL))
def test_partial_rotary_fuses_into_attention(kind, tiny, workdir, winml):
    """Partial rotary (rotate the first rot dims, copy the rest: Slice / rotate-half / Concat in the export) becomes
    one RotaryEmbedding per q and k with rotary_embedding_dim, so attention still fuses into GroupQueryAttention
    (an in-place KV cache) instead of staying as MatMul / Softmax over a Concat'ed cache; the logits of that graph
    against transformers are test_optimized_build_matches_transformers' (both runtimes)."""
    ckpt, model = tiny(kind)
    path, stages = _build(winml, ckpt, str(workdir / f"opt_{kind}"))
    g = onnx.load(path, load_external_data=False).graph
    L = model.config.num_hidden_layers
    ops = [n.op_type for n in g.node]
    assert ops.count("GroupQueryAttention") == L, stages["optim"]["ops"]
    ropes = [n for n in g.node if n.op_type == "RotaryEmbedding"]
    assert len(ropes) == 2 * L, ops
    for n in ropes:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        assert attrs.get("rotary_embedding_dim") == PARTIAL[kind], attrs
        assert attrs.get("num_heads") in (model.config.num_attention_heads,
                                          getattr(model.config, "num_key_value_heads", None)), attrs
    assert "Softmax" not in ops and "Split" not in ops or kind.startswith("gpt_neox"), sorted(set(ops))


@pytest.mark.parametrize("kind", KINDS)
def test_int4_build_runs_alike_in_both_runtimes(kind, tiny, workdir, winml):
    """The int4 build (blocks of 16 over hidden 64) gives the same logits in onnxruntime and our engine, near
    transformers' (int4 error)."""
    ckpt, model = tiny(kind)
    recipe = str(workdir / f"recipe_int4_{kind}.json")
    assert U.run([winml, "config", "-m", ckpt, "-p", "int4", "-o", recipe]).returncode == 0
    r = json.load(open(recipe))
    r["quant"]["rtn_block_size"] = 16
    # float activations in both runtimes: at accuracy_level 4 (the default) each quantizes the activations to int8
    # its own way; on these random blocks of 16 that put gpt_neox_seq and smollm3 3-6% apart (within 0.1% without),
    # on real weights at block 32 0.3% (test_int4_real pins that); this test is about the families' graphs
    r["quant"]["rtn_accuracy_level"] = 0
    json.dump(r, open(recipe, "w"))
    path, _ = _build(winml, ckpt, str(workdir / f"int4_{kind}"), "-c", recipe)
    ops = [n.op_type for n in onnx.load(path, load_external_data=False).graph.node]
    # every layer linear 4-bit (the lm_head and embedding tables stay 8-bit by the recipe's default)
    L = model.config.num_hidden_layers
    assert ops.count("MatMulNBits") >= L * 4, ops
    mask = np.ones((2, 7), np.int64)
    ids = BU.random_ids(np.random.default_rng(3), mask.shape, model.config.vocab_size)
    feeds = {"input_ids": ids, "attention_mask": mask, "position_ids": positions(mask), **empty_past(model, 2)}
    ort_out = BU.run_ort(path, feeds)["logits"]
    ours = BU.run_engine(path, feeds)["logits"]
    d = float(np.abs(ours - ort_out).max())
    assert d <= 1e-3 * float(np.abs(ort_out).max()), f"{kind} int4: engine vs onnxruntime max abs diff {d:.3g}"
    with torch.no_grad():
        ref = model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()
    sqnr = 10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / np.sum((ort_out - ref).astype(np.float64) ** 2))
    U.note(f"{kind} int4 build: logits SQNR {sqnr:.1f} dB vs transformers")
    assert sqnr >= 5


@pytest.mark.parametrize("kind,change", [
    ("gpt_neox_seq", dict(rotary_pct=0.25, rotary_emb_base=300)),  # Pythia's spellings
    ("phi", dict(partial_rotary_factor=0.25, rope_theta=300.0)),  # phi-2's (top level)
    ("stablelm", dict(partial_rotary_factor=0.5, rope_theta=300.0)),  # stablelm-2's
])
def test_legacy_rotary_keys(kind, change, tiny, workdir, winml, run_model):
    """The published configs (transformers 4) spell the rotary fraction and base at the top level, Pythia's as
    rotary_pct / rotary_emb_base (no rope_parameters): transformers reloads the rewritten folder and is the oracle,
    so its reading of them is ours."""
    import shutil
    import transformers as T
    src, _ = tiny(kind)
    ckpt = str(workdir / f"legacy_{kind}")
    shutil.rmtree(ckpt, ignore_errors=True)
    shutil.copytree(src, ckpt)
    BU.edit_config(ckpt, rope_parameters=None, **change)
    model = T.AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    rp = model.config.rope_parameters
    assert (rp["partial_rotary_factor"], rp["rope_theta"]) == tuple(change.values()), rp
    out = str(workdir / f"out_legacy_{kind}")
    again = ["--rebuild"] if os.path.exists(out) else []
    r = U.run([winml, "export", "-m", ckpt, "-o", out, "-q", *again], timeout=300)
    assert r.returncode == 0, U.describe(r)
    mask = masks(3, 9, np.random.default_rng(5))
    ids = BU.random_ids(np.random.default_rng(5), mask.shape, model.config.vocab_size)
    pos = positions(mask)
    with torch.no_grad():
        ref = model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                    position_ids=torch.tensor(pos)).logits.numpy()
    got = run_model(os.path.join(out, "model.onnx"), {"input_ids": ids, "attention_mask": mask, "position_ids": pos,
                                                      **empty_past(model, 3)})
    assert_close(got["logits"], ref, mask.astype(bool), f"{kind} {sorted(change)}")


@pytest.mark.parametrize("kind", KINDS)
def test_fp16_build_within_half_precision(kind, tiny, workdir, winml):
    """-p fp16: both runtimes stay within float16 error of transformers (2% of the largest logit; measured 0.1 -
    0.5%)."""
    ckpt, model = tiny(kind)
    path, _ = _build(winml, ckpt, str(workdir / f"fp16_{kind}"), "-p", "fp16")
    mask = np.ones((2, 7), np.int64)
    ids = BU.random_ids(np.random.default_rng(3), mask.shape, model.config.vocab_size)
    feeds = {"input_ids": ids, "attention_mask": mask, "position_ids": positions(mask), **empty_past(model, 2)}
    with torch.no_grad():
        ref = model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()
    for name, run in sorted(BU.RUNNERS.items()):
        d = float(np.abs(run(path, feeds)["logits"] - ref).max())
        assert d <= 2e-2 * float(np.abs(ref).max()), f"{kind} fp16 in {name}: max abs diff {d:.3g}"


# ---------------------------------------------------------------- refusals



@pytest.mark.parametrize("kind,change,needles", [
    # Phi's and StableLM's per-head q/k LayerNorms are not modeled
    ("phi", {"qk_layernorm": True}, ["qk_layernorm", "not supported"]),
    ("stablelm", {"qk_layernorm": True}, ["qk_layernorm", "not supported"]),
    # use_parallel_residual is modeled for GPT-NeoX / StableLM only: on Phi / OLMo 2 it is no key of theirs
    ("olmo2", {"use_parallel_residual": True}, ["use_parallel_residual", "not supported"]),
    ("gpt_neox", {"use_parallel_residual": "yes"}, ["use_parallel_residual", "expected true or false"]),
    ("stablelm", {"use_qkv_bias": 1}, ["use_qkv_bias", "expected true or false"]),
    # a partial rotary factor leaving an odd number of rotated dims
    ("gpt_neox", {"rope_parameters": {"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.45}},
     ["rotary dims", "even"]),
    ("gpt_neox", {"rope_parameters": None, "rotary_pct": 1.5}, ["rotary_pct", "not in (0, 1]"]),
    ("gpt_neox", {"num_key_value_heads": 2}, ["num_key_value_heads", "not modeled"]),
    # the other families' keys stay refused where transformers does not read them
    ("olmo2", {"no_rope_layers": [1, 0]}, ["no_rope_layers", "not supported"]),
    ("phi", {"logit_scale": 0.5}, ["logit_scale", "not supported"]),
    ("starcoder2", {"use_parallel_residual": True}, ["use_parallel_residual", "not supported"]),
    ("cohere", {"use_qk_norm": True}, ["use_qk_norm", "not supported"]),
    ("cohere", {"logit_scale": "x"}, ["logit_scale", "expected a nonzero number"]),
    ("cohere2", {"layer_types": ["sliding_attention", "full_attention"]}, ["layer_types", "2 entries for 4 layers"]),
    ("smollm3", {"no_rope_layers": [1, 0]}, ["no_rope_layers", "3 entries"]),
    ("smollm3", {"no_rope_layers": [1, 2, 1]}, ["no_rope_layers", "entry 1 is not 0 or 1"]),
    # a RoPE type the graph does not compute
    ("olmo2", {"rope_parameters": {"rope_type": "dynamic", "rope_theta": 500.0, "factor": 2.0}},
     ["rope_type", "dynamic", "not supported"]),
])
def test_unmodeled_config_refused_by_name(kind, change, needles, tmp_path, winml_asan):
    import shutil
    d = str(tmp_path / kind)
    BU.make_tiny(kind, d, spec=_specs()[kind])
    BU.edit_config(d, **change)
    for cmd in (["inspect", "-m", d], ["config", "-m", d], ["build", "-m", d, "-o", str(tmp_path / "o")]):
        r = U.run([winml_asan, *cmd], timeout=300)
        U.assert_clean_error(r, "winml " + cmd[0], *needles)
    assert not os.path.exists(tmp_path / "o")
    shutil.rmtree(d)


def test_missing_post_attention_norm_refused(tmp_path, winml_asan):
    """StableLM without use_parallel_residual needs its post_attention_layernorm: a checkpoint lacking it (one saved
    with the flag, config flipped) is refused naming the tensor instead of built without the norm."""
    d = str(tmp_path / "slm")
    BU.make_tiny("stablelm_par", d, spec=_specs()["stablelm_par"])
    BU.edit_config(d, use_parallel_residual=False)
    r = U.run([winml_asan, "build", "-m", d, "-o", str(tmp_path / "o")], timeout=300)
    U.assert_clean_error(r, "winml build", "model.layers.0.post_attention_layernorm.weight", "missing tensor")
