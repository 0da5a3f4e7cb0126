"""ModernBERT (issue 35) through the builder's tables: a pre-norm encoder with rotary positions (a global base for
the full-attention layers, a local one for the others), a bidirectional sliding window on every layer but each
global_attn_every_n_layers-th, fused Wqkv and GeGLU Wi, no attention norm on layer 0, a final norm, and its
prediction head (dense + classifier_activation + LayerNorm) before every task's linear. Tiny random checkpoints
saved by transformers are exported with `winml export` and run in onnxruntime and in our engine: outputs match
transformers within 1e-4 (fp32), sequences long enough that the window masks keys, padded rows included. The
configs as transformers < 5 wrote them (global_rope_theta, local_rope_theta, global_attn_every_n_layers, no
layer_types) build the same model; values the graph cannot honour are refused by name.
"""
import json
import shutil

import numpy as np
import pytest
import torch

import builder_util as BU
import oracle_util as U

TOL = 1e-4
BASE = dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
            local_attention=6, global_attn_every_n_layers=3, max_position_embeddings=128, pad_token_id=0,
            bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)
# biases everywhere, mean pooling and another head activation: the other side of every flag
BIASED = dict(norm_bias=True, attention_bias=True, mlp_bias=True, classifier_bias=True, classifier_activation="silu",
              classifier_pooling="mean")


def specs():
    import transformers as T
    return {
        "cls": (T.ModernBertForSequenceClassification, dict(num_labels=3)),
        "mean": (T.ModernBertForSequenceClassification, dict(BIASED, num_labels=1)),
        "feature": (T.ModernBertModel, {}),
        "token": (T.ModernBertForTokenClassification, dict(BIASED, num_labels=5)),
        "qa": (T.ModernBertForQuestionAnswering, {}),
        "mlm": (T.ModernBertForMaskedLM, {}),
    }


def make(kind, path):
    import transformers as T
    cls, kw = specs()[kind]
    torch.manual_seed(0)
    model = cls(T.ModernBertConfig(**BASE, **kw)).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            norm_w = "norm" in name and name.endswith("weight")
            p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g) if norm_w else 0.25 * torch.randn(p.shape, generator=g))
    model.tie_weights()
    model.save_pretrained(path, safe_serialization=True)
    return model


@pytest.fixture(scope="module")
def workdir(request):
    return U.scratch(request, "builder_modernbert")


@pytest.fixture(scope="module")
def tiny(workdir):
    return BU.tiny_cache(workdir, lambda k, d: make(k, d))


def token_valid(feeds, ref):
    m = feeds["attention_mask"].astype(bool)
    return np.broadcast_to(m[:, :, None], ref.shape) if ref.ndim == 3 else m


def test_sequence_classification_cls(tiny, workdir, winml, run_model):
    """CLS pooling; a full and a right-padded row (a left-padded row's CLS is a padding query whose window holds
    only padding: its output is arbitrary in any implementation)."""
    ckpt, model = tiny("cls")
    path = BU.export_dynamic(winml, ckpt, str(workdir / "out_cls"))
    feeds, tin = BU.padded_feeds(model, 2, 14, 1)
    with torch.no_grad():
        ref = model(**tin).logits.numpy()
    BU.assert_close_valid(run_model(path, feeds)["logits"], ref, np.ones_like(ref, bool), "modernbert cls logits", TOL)


def test_sequence_classification_mean_pooled_with_biases(tiny, workdir, winml, run_model):
    """classifier_pooling mean, every bias on, silu head, a single-logit reranker: batch 3 with left padding."""
    ckpt, model = tiny("mean")
    path = BU.export_dynamic(winml, ckpt, str(workdir / "out_mean"))
    feeds, tin = BU.padded_feeds(model, 3, 17, 2)
    with torch.no_grad():
        ref = model(**tin).logits.numpy()
    assert ref.shape == (3, 1)
    BU.assert_close_valid(run_model(path, feeds)["logits"], ref, np.ones_like(ref, bool), "modernbert mean logits",
                          TOL)


def test_feature_extraction(tiny, workdir, winml, run_model):
    ckpt, model = tiny("feature")
    path = BU.export_dynamic(winml, ckpt, str(workdir / "out_feat"))
    feeds, tin = BU.padded_feeds(model, 3, 20, 3)
    with torch.no_grad():
        ref = model(**tin).last_hidden_state.numpy()
    got = run_model(path, feeds)["last_hidden_state"]
    BU.assert_close_valid(got, ref, token_valid(feeds, ref), "modernbert last_hidden_state", TOL)


def test_token_classification(tiny, workdir, winml, run_model):
    ckpt, model = tiny("token")
    path = BU.export_dynamic(winml, ckpt, str(workdir / "out_tok"))
    feeds, tin = BU.padded_feeds(model, 3, 12, 4)
    with torch.no_grad():
        ref = model(**tin).logits.numpy()
    BU.assert_close_valid(run_model(path, feeds)["logits"], ref, token_valid(feeds, ref), "modernbert token logits",
                          TOL)


def test_question_answering(tiny, workdir, winml, run_model):
    ckpt, model = tiny("qa")
    path = BU.export_dynamic(winml, ckpt, str(workdir / "out_qa"))
    feeds, tin = BU.padded_feeds(model, 3, 12, 5)
    with torch.no_grad():
        ref = model(**tin)
    got = run_model(path, feeds)
    m = feeds["attention_mask"].astype(bool)
    BU.assert_close_valid(got["start_logits"], ref.start_logits.numpy(), m, "modernbert start_logits", TOL)
    BU.assert_close_valid(got["end_logits"], ref.end_logits.numpy(), m, "modernbert end_logits", TOL)


def test_fill_mask(tiny, workdir, winml, run_model):
    ckpt, model = tiny("mlm")
    path = BU.export_dynamic(winml, ckpt, str(workdir / "out_mlm"), task="fill-mask")
    feeds, tin = BU.padded_feeds(model, 3, 11, 6)
    with torch.no_grad():
        ref = model(**tin).logits.numpy()
    BU.assert_close_valid(run_model(path, feeds)["logits"], ref, token_valid(feeds, ref), "modernbert mlm logits",
                          TOL)


def test_config_before_transformers_5(tiny, workdir, winml, run_model):
    """global_rope_theta / local_rope_theta / global_attn_every_n_layers, no layer_types or rope_parameters (as
    the Hub's ModernBERT configs are): another base per layer kind and every other layer global."""
    import transformers as T
    src, _ = tiny("feature")
    d = workdir / "ckpt_old_config"
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(src, d)
    cfg = json.loads((d / "config.json").read_text())
    for k in ("layer_types", "rope_parameters"):
        cfg.pop(k)
    cfg.update(global_rope_theta=20000.0, local_rope_theta=500.0, global_attn_every_n_layers=2, local_attention=4)
    (d / "config.json").write_text(json.dumps(cfg))
    model = T.ModernBertModel.from_pretrained(str(d)).eval()
    assert model.config.layer_types == ["full_attention", "sliding_attention"] * 2
    path = BU.export_dynamic(winml, str(d), str(workdir / "out_old"))
    feeds, tin = BU.padded_feeds(model, 2, 15, 7)
    with torch.no_grad():
        ref = model(**tin).last_hidden_state.numpy()
    got = run_model(path, feeds)["last_hidden_state"]
    BU.assert_close_valid(got, ref, token_valid(feeds, ref), "modernbert (old config) last_hidden_state", TOL)
    r = U.run([winml, "inspect", "-m", str(d), "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    feats = json.loads(r.stdout)["features"]
    assert "rotary positions (theta 20000, default, 8 of 8 dims) on full-attention layers" in feats, feats
    assert "sliding-window layers: rotary positions (theta 500, default, 8 of 8 dims)" in feats, feats
    assert "bidirectional sliding window (|i - j| <= 2) on 2 of 4 layers" in feats, feats


def test_inspect_names_the_structure(tiny, winml):
    ckpt, _ = tiny("mean")
    r = U.run([winml, "inspect", "-m", ckpt, "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    j = json.loads(r.stdout)
    assert j["naming_scheme"] == "modernbert" and j["inference_class"] == "ModernBertForSequenceClassification"
    feats = j["features"]
    assert "LayerNorm eps 1e-05, pre-norm" in feats, feats
    assert "bidirectional sliding window (|i - j| <= 3) on 2 of 4 layers" in feats, feats
    assert "text-classification head: dense + silu + LayerNorm, then the task's linear (on the mean of the " \
           "unpadded tokens)" in feats, feats
    assert j["tasks"] == ["text-classification", "feature-extraction", "token-classification",
                          "question-answering", "fill-mask"], j["tasks"]


@pytest.mark.parametrize("key,value,why", [
    ("classifier_pooling", "max", "'max' (cls or mean)"),
    ("local_attention", 1, "expected an integer from 2 to 1073741824"),
    ("global_attn_every_n_layers", 0, "expected an integer from 1 to 4096"),
    ("global_rope_theta", 0.5, "must be > 1"),
    ("classifier_activation", "softplus", "activation 'softplus' is not supported"),
])
def test_bad_values_refused_by_name(key, value, why, winml_asan, tmp_path):
    import transformers as T
    cfg = T.ModernBertConfig(**BASE).to_dict()
    cfg["architectures"] = ["ModernBertForSequenceClassification"]
    if key in ("local_attention", "global_attn_every_n_layers", "global_rope_theta"):
        cfg.pop("layer_types")  # these keys decide only where layer_types / rope_parameters are absent
        cfg.pop("rope_parameters")
    cfg[key] = value
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    r = U.run([winml_asan, "build", "-m", str(tmp_path / "m"), "--random-weights", "-o", str(out)])
    assert r.returncode == 2, U.describe(r)
    assert f"'{key}'" in r.stderr and why in r.stderr, r.stderr
    assert not out.exists()


def test_fp16_build_runs_in_both_runtimes(tiny, workdir, winml, run_model):
    """`winml build -p fp16`: the optimizer fuses rotary attention into float16 com.microsoft MultiHeadAttention
    (our engine refused float16 there before); both runtimes stay within 2% of transformers' fp32 logit range."""
    import onnx
    ckpt, model = tiny("token")
    out = workdir / "out_fp16"
    if not (out / "model.onnx").exists():
        r = U.run([winml, "build", "-m", ckpt, "-p", "fp16", "-o", str(out), "-q"])
        assert r.returncode == 0, U.describe(r)
    m = onnx.load(str(out / "model.onnx"))
    assert any(n.op_type == "MultiHeadAttention" for n in m.graph.node)
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    feeds, tin = BU.padded_feeds(model, shape[0], shape[1], 8)
    types = {i.name: i.type.tensor_type.elem_type for i in m.graph.input}
    feeds = {k: v.astype(np.int64) if types[k] == onnx.TensorProto.INT64 else v for k, v in feeds.items()}
    with torch.no_grad():
        ref = model(**tin).logits.numpy()
    got = run_model(str(out / "model.onnx"), feeds)["logits"].astype(np.float32)
    valid = token_valid(feeds, ref)
    err = float(np.abs(got - ref)[valid].max()) / float(np.abs(ref[valid]).max())
    U.note(f"modernbert fp16 build: max error {err:.4f} of the largest logit")
    assert err <= 0.02, err
