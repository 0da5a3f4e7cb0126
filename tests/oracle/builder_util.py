"""Helpers for the model-builder oracle tests and benchmarks.

- TINY: tiny transformers models (hidden 32-64, 2 layers) for every family the builder supports, with
  every parameter re-drawn (biases and norm weights included) so a wrong bias, norm or head cannot hide
  behind transformers' zero/one init.
- SEEDS: the seed checkpoints' config.json, written from the published figures
  (shared/facts/architectures.md); random weights are built from them with --random-weights.
- Runners: run_ort(path, feeds) is the reference runner; tests take a `run_model` fixture so a second
  runner (our own engine) can be added as another parameter later.
"""
import json
import os

import numpy as np

# ---------------------------------------------------------------- seed configs (published figures)

QWEN25_COMMON = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "hidden_act": "silu", "initializer_range": 0.02, "max_position_embeddings": 32768,
    "model_type": "qwen2", "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768,
    "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": True, "use_sliding_window": False,
    "vocab_size": 151936,
}
QWEN3_COMMON = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "initializer_range": 0.02, "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936,
}

SEEDS = {
    "openai-community/gpt2": {
        "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
        "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
        "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
        "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": None,
        "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
        "summary_use_proj": True, "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
        "vocab_size": 50257,
    },
    "Qwen/Qwen2.5-0.5B-Instruct": dict(QWEN25_COMMON, hidden_size=896, intermediate_size=4864,
                                       num_attention_heads=14, num_hidden_layers=24, num_key_value_heads=2,
                                       max_window_layers=21, tie_word_embeddings=True),
    "Qwen/Qwen2.5-1.5B-Instruct": dict(QWEN25_COMMON, hidden_size=1536, intermediate_size=8960,
                                       num_attention_heads=12, num_hidden_layers=28, num_key_value_heads=2,
                                       max_window_layers=21, tie_word_embeddings=True),
    "Qwen/Qwen2.5-3B-Instruct": dict(QWEN25_COMMON, hidden_size=2048, intermediate_size=11008,
                                     num_attention_heads=16, num_hidden_layers=36, num_key_value_heads=2,
                                     max_window_layers=70, tie_word_embeddings=True),
    "Qwen/Qwen2.5-7B-Instruct": dict(QWEN25_COMMON, hidden_size=3584, intermediate_size=18944,
                                     num_attention_heads=28, num_hidden_layers=28, num_key_value_heads=4,
                                     max_window_layers=28, tie_word_embeddings=False, vocab_size=152064,
                                     sliding_window=131072),
    "Qwen/Qwen3-0.6B": dict(QWEN3_COMMON, hidden_size=1024, intermediate_size=3072, num_attention_heads=16,
                            num_hidden_layers=28, num_key_value_heads=8),
    "Qwen/Qwen3-1.7B": dict(QWEN3_COMMON, hidden_size=2048, intermediate_size=6144, num_attention_heads=16,
                            num_hidden_layers=28, num_key_value_heads=8),
    "trl-internal-testing/tiny-Qwen2ForCausalLM-2.5": dict(QWEN25_COMMON, hidden_size=16, intermediate_size=32,
                                                          num_attention_heads=4, num_hidden_layers=2,
                                                          num_key_value_heads=2, max_window_layers=2,
                                                          tie_word_embeddings=False, torch_dtype="float32"),
    "google/gemma-3-270m": {
        "_sliding_window_pattern": 6, "architectures": ["Gemma3ForCausalLM"], "attention_bias": False,
        "attention_dropout": 0.0, "attn_logit_softcapping": None, "bos_token_id": 2, "eos_token_id": 1,
        "final_logit_softcapping": None, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": 640, "initializer_range": 0.02, "intermediate_size": 2048,
        "layer_types": ["sliding_attention"] * 5 + ["full_attention"] + ["sliding_attention"] * 5
        + ["full_attention"] + ["sliding_attention"] * 5 + ["full_attention"],
        "max_position_embeddings": 32768, "model_type": "gemma3_text", "num_attention_heads": 4,
        "num_hidden_layers": 18, "num_key_value_heads": 1, "pad_token_id": 0, "query_pre_attn_scalar": 256,
        "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0, "rope_scaling": None, "rope_theta": 1000000.0,
        "sliding_window": 512, "torch_dtype": "bfloat16", "transformers_version": "4.55.0.dev0",
        "use_bidirectional_attention": False, "use_cache": True, "vocab_size": 262144,
    },
    "cross-encoder/mmarco-mMiniLMv2-L12-H384-v1": {
        "architectures": ["XLMRobertaForSequenceClassification"], "attention_probs_dropout_prob": 0.1,
        "bos_token_id": 0, "classifier_dropout": None, "eos_token_id": 2, "gradient_checkpointing": False,
        "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 384, "id2label": {"0": "LABEL_0"},
        "initializer_range": 0.02, "intermediate_size": 1536, "label2id": {"LABEL_0": 0}, "layer_norm_eps": 1e-05,
        "max_position_embeddings": 514, "model_type": "xlm-roberta", "num_attention_heads": 12,
        "num_hidden_layers": 12, "output_past": True, "pad_token_id": 1, "position_embedding_type": "absolute",
        "tokenizer_class": "XLMRobertaTokenizer", "torch_dtype": "float32", "transformers_version": "4.39.3",
        "type_vocab_size": 1, "use_cache": True, "vocab_size": 250002,
    },
}


def seed_dir(root, name):
    """Writes SEEDS[name] as root/<org>_<name>/config.json; returns the folder."""
    d = os.path.join(root, name.replace("/", "_"))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(SEEDS[name], f, indent=2)
    return d


# ---------------------------------------------------------------- tiny checkpoints

DEBERTA_V3 = dict(relative_attention=True, pos_att_type=["p2c", "c2p"], share_att_key=True, position_buckets=8,
                  norm_rel_ebd="layer_norm", position_biased_input=False, max_position_embeddings=64)


def _tiny_specs():
    import transformers as T
    dec = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=96, max_position_embeddings=128)
    enc = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=96,
               max_position_embeddings=80)
    return {
        "gpt2": (T.GPT2Config, T.GPT2LMHeadModel,
                 dict(n_embd=32, n_layer=2, n_head=4, vocab_size=96, n_positions=128)),
        "gpt2_layer_scaled": (T.GPT2Config, T.GPT2LMHeadModel,
                              dict(n_embd=32, n_layer=2, n_head=4, vocab_size=96, n_positions=128,
                                   scale_attn_by_inverse_layer_idx=True, activation_function="gelu",
                                   tie_word_embeddings=False)),
        "llama": (T.LlamaConfig, T.LlamaForCausalLM, dict(dec, rope_theta=500.0)),
        "llama_bias": (T.LlamaConfig, T.LlamaForCausalLM, dict(dec, attention_bias=True, mlp_bias=True,
                                                               tie_word_embeddings=True)),
        "mistral": (T.MistralConfig, T.MistralForCausalLM, dict(dec, sliding_window=4)),
        "qwen2": (T.Qwen2Config, T.Qwen2ForCausalLM, dict(dec, tie_word_embeddings=True)),
        "qwen3": (T.Qwen3Config, T.Qwen3ForCausalLM, dict(dec, head_dim=16)),
        "phi3": (T.Phi3Config, T.Phi3ForCausalLM, dict(dec, pad_token_id=0, partial_rotary_factor=0.5)),
        # Gemma: (1 + w) RMSNorm, scaled embeddings, head_dim != hidden/heads, the legacy "gelu" meaning GELU-tanh
        "gemma": (T.GemmaConfig, T.GemmaForCausalLM, dict(dec, head_dim=16, hidden_act="gelu")),
        # Gemma 2: + post-sublayer norms, query_pre_attn_scalar, attention and logit soft-capping, every other
        # layer sliding (window 4)
        "gemma2": (T.Gemma2Config, T.Gemma2ForCausalLM, dict(dec, head_dim=16, query_pre_attn_scalar=24,
                                                             sliding_window=4, attn_logit_softcapping=5.0,
                                                             final_logit_softcapping=10.0)),
        # Gemma 3 text: + q/k norms, a sliding and a full layer with their own RoPE bases; transformers ignores
        # attn_logit_softcapping there (so must we)
        "gemma3_text": (T.Gemma3TextConfig, T.Gemma3ForCausalLM, dict(
            dec, head_dim=16, query_pre_attn_scalar=24, sliding_window=4, attn_logit_softcapping=5.0,
            layer_types=["sliding_attention", "full_attention"],
            rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000.0},
                             "sliding_attention": {"rope_type": "default", "rope_theta": 50.0}})),
        # Granite: Llama's blocks with embedding, residual, attention-score and logit multipliers
        "granite": (T.GraniteConfig, T.GraniteForCausalLM, dict(dec, embedding_multiplier=3.0,
                                                                residual_multiplier=0.4, attention_multiplier=0.2,
                                                                logits_scaling=2.5)),
        # rope scaling variants (transformers 5 spelling: rope_parameters)
        "llama_rope_llama3": (T.LlamaConfig, T.LlamaForCausalLM, dict(dec, rope_parameters=dict(
            rope_type="llama3", rope_theta=10000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
            original_max_position_embeddings=16))),
        "llama_rope_linear": (T.LlamaConfig, T.LlamaForCausalLM, dict(dec, rope_parameters=dict(
            rope_type="linear", rope_theta=10000.0, factor=3.0))),
        "qwen2_rope_yarn": (T.Qwen2Config, T.Qwen2ForCausalLM, dict(dec, rope_parameters=dict(
            rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=32))),
        "phi3_longrope": (T.Phi3Config, T.Phi3ForCausalLM, dict(dec, pad_token_id=0, original_max_position_embeddings=8,
                                                                 rope_parameters=dict(
            rope_type="longrope", rope_theta=10000.0, short_factor=[1.0, 1.1, 1.3, 1.6],
            long_factor=[2.0, 3.0, 5.0, 8.0], original_max_position_embeddings=8))),
        "bert": (T.BertConfig, T.BertForSequenceClassification, dict(enc, num_labels=3)),
        "roberta": (T.RobertaConfig, T.RobertaForSequenceClassification, dict(enc, num_labels=2)),
        "xlm-roberta": (T.XLMRobertaConfig, T.XLMRobertaForSequenceClassification,
                        dict(enc, num_labels=1, type_vocab_size=1, layer_norm_eps=1e-5)),
        "distilbert": (T.DistilBertConfig, T.DistilBertForSequenceClassification,
                       dict(dim=32, hidden_dim=64, n_layers=2, n_heads=4, vocab_size=96, max_position_embeddings=80)),
        "electra": (T.ElectraConfig, T.ElectraForSequenceClassification, dict(enc, embedding_size=16, num_labels=2)),
        "bert-feature": (T.BertConfig, T.BertModel, dict(enc)),
        "bert-token": (T.BertConfig, T.BertForTokenClassification, dict(enc, num_labels=5)),
        "xlm-roberta-qa": (T.XLMRobertaConfig, T.XLMRobertaForQuestionAnswering, dict(enc, type_vocab_size=1)),
        "distilbert-qa": (T.DistilBertConfig, T.DistilBertForQuestionAnswering,
                          dict(dim=32, hidden_dim=64, n_layers=2, n_heads=4, vocab_size=96, max_position_embeddings=80)),
        # MPNet: relative position bias (32 buckets up to distance 128: positions 300 so a sequence can pass 128)
        "mpnet": (T.MPNetConfig, T.MPNetForSequenceClassification, dict(enc, max_position_embeddings=300, num_labels=3)),
        "mpnet-feature": (T.MPNetConfig, T.MPNetModel, dict(enc, max_position_embeddings=300)),
        "mpnet-token": (T.MPNetConfig, T.MPNetForTokenClassification, dict(enc, max_position_embeddings=300,
                                                                          num_labels=5)),
        "mpnet-qa": (T.MPNetConfig, T.MPNetForQuestionAnswering, dict(enc, max_position_embeddings=300)),
        "mpnet-mlm": (T.MPNetConfig, T.MPNetForMaskedLM, dict(enc, max_position_embeddings=300,
                                                             relative_attention_num_buckets=40)),
        # DeBERTa v3 (c2p + p2c sharing the content projections, 8 log buckets up to 64, normed relative
        # embeddings, no absolute positions) and v2 (own position projections, exact distances up to 12, absolute
        # positions, token types, the '|' spelling)
        "deberta-v3": (T.DebertaV2Config, T.DebertaV2ForSequenceClassification, dict(enc, **DEBERTA_V3, num_labels=3)),
        "deberta-v3-feature": (T.DebertaV2Config, T.DebertaV2Model, dict(enc, **DEBERTA_V3)),
        "deberta-v3-token": (T.DebertaV2Config, T.DebertaV2ForTokenClassification, dict(enc, **DEBERTA_V3,
                                                                                      num_labels=5)),
        "deberta-v3-qa": (T.DebertaV2Config, T.DebertaV2ForQuestionAnswering, dict(enc, **DEBERTA_V3)),
        "deberta-v2": (T.DebertaV2Config, T.DebertaV2ForSequenceClassification, dict(
            enc, relative_attention=True, pos_att_type="p2c|c2p", share_att_key=False, max_relative_positions=12,
            position_biased_input=True, max_position_embeddings=64, type_vocab_size=2, num_labels=1,
            pooler_hidden_act="tanh")),
    }


TINY_DECODERS = ["gpt2", "llama", "llama_bias", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3_text",
                 "granite"]
TINY_ROPE = ["llama_rope_llama3", "llama_rope_linear", "qwen2_rope_yarn", "phi3_longrope"]
TINY_ENCODERS = ["bert", "roberta", "xlm-roberta", "distilbert", "electra"]


def make_tiny(kind, path, seed=0, dtype=None, spec=None):
    """Saves a tiny random `kind` model (safetensors) to path and returns the torch model (eval, fp32); spec: a
    (config class, model class, config kwargs) of the caller's own instead of _tiny_specs()[kind]."""
    import torch
    cfg_cls, model_cls, kw = spec or _tiny_specs()[kind]
    torch.manual_seed(seed)
    cfg = cfg_cls(**kw)
    model = model_cls(cfg).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name.lower() and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.25 * torch.randn(p.shape, generator=g))
    if getattr(model.config, "tie_word_embeddings", False) and hasattr(model, "tie_weights"):
        model.tie_weights()
    if dtype is not None:
        model.to(dtype).save_pretrained(path, safe_serialization=True)
        model.float()
    else:
        model.save_pretrained(path, safe_serialization=True)
    return model


# ---------------------------------------------------------------- runners

_SESSIONS = {}


def run_ort(path, feeds, outputs=None):
    """onnxruntime CPU session over the model at path (cached per file version); returns {name: array}."""
    import onnxruntime as ort
    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size)
    s = _SESSIONS.get(key)
    if s is None:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        s = _SESSIONS[key] = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = outputs or [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(names, feeds)))


def run_engine(path, feeds, outputs=None):
    """Our CPU engine (tests/tools/wm_run) on the same feeds; returns {name: array}."""
    import tempfile

    from engine_util import engine_run
    build = os.environ.get("WM_BUILD", "build")
    if not os.path.isabs(build):
        build = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), build)
    with tempfile.TemporaryDirectory() as tmp:
        out, _ = engine_run(build, path, feeds, tmp)
    return {k: out[k] for k in (outputs or out)}


RUNNERS = {"onnxruntime": run_ort, "engine": run_engine}


def tiny_cache(workdir, make):
    """kind -> (checkpoint folder, torch model), each made once by make(kind, folder) under workdir (a module
    fixture's `tiny`)."""
    cache = {}

    def get(kind):
        if kind not in cache:
            d = str(workdir / f"ckpt_{kind}")
            cache[kind] = (d, make(kind, d))
        return cache[kind]
    return get


def export_dynamic(winml, ckpt, out, task=None, **fields):
    """`winml config` (symbolic batch / sequence dims, the export fields given) then `winml export` into out;
    returns the model path."""
    import oracle_util as U
    r = U.run([winml, "config", "-m", ckpt] + (["-t", task] if task else []))
    assert r.returncode == 0, U.describe(r)
    rec = json.loads(r.stdout)
    for t in rec["export"]["input_tensors"]:
        t["shape"] = ["batch_size", "sequence_length"]
    rec["export"].update(fields)
    if fields.get("pooling"):
        rec["export"]["output_tensors"].append({"name": "sentence_embedding"})
    rp = out + ".recipe.json"
    with open(rp, "w") as f:
        json.dump(rec, f)
    again = ["--rebuild"] if os.path.exists(out) else []
    r = U.run([winml, "export", "-m", ckpt, "-o", out, "-c", rp, "-q", *again], timeout=300)
    assert r.returncode == 0, U.describe(r)
    return os.path.join(out, "model.onnx")


def padded_feeds(model, B, S, seed, types=False):
    """Encoder feeds: row 0 full, row 1 right-padded (B > 1), row 2 left-padded (B > 2), padding with pad_token_id;
    token_type_ids too when types. Returns (numpy int32 feeds, torch long inputs)."""
    import torch
    rng = np.random.default_rng(seed)
    pad = model.config.pad_token_id
    ids = random_ids(rng, (B, S), model.config.vocab_size).astype(np.int32)
    mask = np.ones((B, S), np.int32)
    if B > 1:
        mask[1, S - 3:] = 0
    if B > 2:
        mask[2, :4] = 0
    ids[mask == 0] = pad
    feeds = {"input_ids": ids, "attention_mask": mask}
    if types:
        feeds["token_type_ids"] = (rng.random((B, S)) < 0.5).astype(np.int32)
    return feeds, {k: torch.tensor(v, dtype=torch.long) for k, v in feeds.items()}


def assert_close_valid(ours, ref, valid, what, tol=1e-4):
    """max abs diff over the valid entries <= tol, and the reference there not ~0."""
    assert ours.shape == ref.shape, (what, ours.shape, ref.shape)
    d = np.abs(ours - ref)[valid]
    assert d.size and float(d.max()) <= tol, f"{what}: max abs diff {float(d.max()):.3g} > {tol}"
    assert float(np.abs(ref[valid]).max()) > 1e-2, f"{what}: reference is ~0, the comparison would be empty"


def random_ids(rng, shape, vocab, low=3):
    return rng.integers(low, vocab, size=shape, dtype=np.int64)


def edit_config(d, **changes):
    """Sets the given keys of folder d's config.json (a value None removes the key)."""
    p = os.path.join(d, "config.json")
    c = json.load(open(p))
    for k, v in changes.items():
        if v is None:
            c.pop(k, None)
        else:
            c[k] = v
    json.dump(c, open(p, "w"))


def export_cache(tiny, workdir, winml):
    """get(kind) -> (transformers model, path of its model.onnx): each tiny checkpoint of tiny(kind) exported once
    (`winml export`, float32) into workdir/out_KIND; the module-scoped `exported` fixture of the builder tests."""
    import oracle_util as U
    cache = {}

    def get(kind):
        if kind not in cache:
            ckpt, model = tiny(kind)
            out = str(workdir / f"out_{kind}")
            again = ["--rebuild"] if os.path.exists(out) else []
            r = U.run([winml, "export", "-m", ckpt, "-o", out, "-q", *again], timeout=300)
            assert r.returncode == 0, U.describe(r)
            cache[kind] = (model, os.path.join(out, "model.onnx"))
        return cache[kind]
    return get


def s2s_hf_generate(m, rows, **kw):
    """transformers' generate of an encoder-decoder on id rows (right-padded with pad_token_id, masked): lists"""
    import torch
    pad = m.config.pad_token_id
    S = max(map(len, rows))
    ids = torch.tensor([r + [pad] * (S - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (S - len(r)) for r in rows])
    with torch.no_grad():
        return m.generate(input_ids=ids, attention_mask=mask, **kw).tolist()


def s2s_winml_generate(winml, build, rows=None, texts=None, **kw):
    """`winml generate -f json` on an encoder-decoder build: --ids rows and/or --text sources, kw as flags; the
    "outputs" list"""
    import oracle_util as U
    argv = [winml, "generate", "-m", build, "-f", "json"]
    for k, v in kw.items():
        argv += ["--" + k.replace("_", "-"), str(v)]
    for r in rows or []:
        argv += ["--ids", ",".join(map(str, r))]
    for t in texts or []:
        argv += ["--text", t]
    r = U.run(argv, timeout=120)
    assert r.returncode == 0, U.describe(r)
    return json.loads(r.stdout)["outputs"]
