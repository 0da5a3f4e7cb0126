"""Our engine vs onnxruntime on torch.onnx exports of tiny random transformers.

Encoders (bert, xlm-roberta, distilbert; classification and hidden states, padded batches) and
decoders with a KV cache (gpt2, llama, qwen2, qwen3, mistral; past + present, left padding),
exported by transformers + torch.onnx (TorchScript exporter, and the dynamo exporter for bert).
Every output must agree with onnxruntime within 1e-4 (fp32); runs repeat bit-identically, and a
planned run makes no heap allocation.
"""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the venv of make test has it; fail loudly below if not
transformers = pytest.importorskip("transformers")

from engine_util import assert_close, engine_run, ort_run  # noqa: E402
import oracle_util as U  # noqa: E402

torch.manual_seed(0)
VOCAB = 128


def _tiny_cfg(model_type, **kw):
    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4)
    if model_type == "gpt2":
        common = dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    if model_type == "distilbert":
        common = dict(vocab_size=VOCAB, dim=32, hidden_dim=64, n_layers=2, n_heads=4)
    common.update(kw)
    return transformers.AutoConfig.for_model(model_type, **common)


ENCODERS = {
    "bert": dict(max_position_embeddings=64),
    "xlm-roberta": dict(max_position_embeddings=66, pad_token_id=1),
    "distilbert": dict(max_position_embeddings=64),
}


@pytest.fixture(scope="module", params=sorted(ENCODERS))
def encoder(request):
    mt = request.param
    cfg = _tiny_cfg(mt, **ENCODERS[mt])
    cfg.num_labels = 3
    m = transformers.AutoModelForSequenceClassification.from_config(cfg).eval()
    d = U.scratch(request, mt)
    ids = torch.randint(2, VOCAB, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.long)
    path = d / "model.onnx"
    torch.onnx.export(m, (ids, mask), str(path), input_names=["input_ids", "attention_mask"],
                      output_names=["logits"], opset_version=17, dynamo=False,
                      dynamic_axes={"input_ids": {0: "b", 1: "s"}, "attention_mask": {0: "b", 1: "s"}})
    return mt, path, d


def _enc_feeds(b, s, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(2, VOCAB, (b, s)).astype(np.int64)
    mask = np.ones((b, s), dtype=np.int64)
    if b > 1:
        mask[1, s // 2:] = 0  # right padding on the second row
        ids[1, s // 2:] = 1
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("b,s", [(1, 5), (2, 9), (3, 16)])
def test_encoder_matches_onnxruntime(encoder, build_dir, b, s):
    mt, path, d = encoder
    feeds = _enc_feeds(b, s, seed=b * 100 + s)
    ours, stats = engine_run(build_dir, path, feeds, d, repeat=2)
    assert_close(ours, ort_run(path, feeds), label=f"{mt} b={b} s={s}")
    assert stats["eager"] == 0 and stats["run_allocs"] == 0, stats


def test_bert_dynamo_export(build_dir, tmp_path):
    cfg = _tiny_cfg("bert", max_position_embeddings=64)
    m = transformers.AutoModel.from_config(cfg).eval()
    ids = torch.randint(2, VOCAB, (1, 8))
    mask = torch.ones(1, 8, dtype=torch.long)
    path = tmp_path / "bert_dynamo.onnx"
    torch.onnx.export(m, (ids, mask), str(path), input_names=["input_ids", "attention_mask"],
                      output_names=["last_hidden_state", "pooler_output"], opset_version=18, dynamo=True)
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
    ours, _ = engine_run(build_dir, path, feeds, tmp_path)
    assert_close(ours, ort_run(path, feeds), label="bert dynamo")


DECODERS = {
    "gpt2": dict(),
    "llama": dict(num_key_value_heads=2, max_position_embeddings=64),
    "qwen2": dict(num_key_value_heads=2, max_position_embeddings=64),
    "qwen3": dict(num_key_value_heads=2, head_dim=16, max_position_embeddings=64),
    "mistral": dict(num_key_value_heads=2, max_position_embeddings=64),
}


@pytest.fixture(scope="module", params=sorted(DECODERS))
def decoder(request):
    mt = request.param
    cfg = _tiny_cfg(mt, **DECODERS[mt])
    m = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    L = cfg.num_hidden_layers
    nkv = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads

    class WithPast(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, *past):
            cache = transformers.DynamicCache()
            for i in range(L):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache,
                             use_cache=True)
            res = [out.logits]
            for layer in out.past_key_values.layers:
                res += [layer.keys, layer.values]
            return tuple(res)

    names = [f"past_key_values.{i}.{k}" for i in range(L) for k in ("key", "value")]
    onames = ["logits"] + [f"present.{i}.{k}" for i in range(L) for k in ("key", "value")]
    dyn = {"input_ids": {0: "b", 1: "s"}, "attention_mask": {0: "b", 1: "t"}}
    dyn.update({n: {0: "b", 2: "p"} for n in names})
    past = [torch.randn(2, nkv, 4, hd) for _ in range(2 * L)]
    d = U.scratch(request, mt)
    path = d / "model.onnx"
    torch.onnx.export(WithPast(m), (torch.randint(0, VOCAB, (2, 3)), torch.ones(2, 7, dtype=torch.long), *past),
                      str(path), input_names=["input_ids", "attention_mask"] + names, output_names=onames,
                      dynamic_axes=dyn, opset_version=17, dynamo=False)
    return mt, path, d, (L, nkv, hd)


@pytest.mark.parametrize("b,s,p", [(1, 6, 0), (2, 3, 4), (2, 1, 9)])
def test_decoder_matches_onnxruntime(decoder, build_dir, b, s, p):
    mt, path, d, (L, nkv, hd) = decoder
    rng = np.random.default_rng(b * 1000 + s * 10 + p)
    feeds = {"input_ids": rng.integers(0, VOCAB, (b, s)).astype(np.int64)}
    mask = np.ones((b, p + s), dtype=np.int64)
    if b > 1:
        mask[1, :2] = 0  # left padding on the second row
    feeds["attention_mask"] = mask
    for i in range(L):
        for k in ("key", "value"):
            feeds[f"past_key_values.{i}.{k}"] = rng.standard_normal((b, nkv, p, hd)).astype(np.float32)
    ours, stats = engine_run(build_dir, path, feeds, d, repeat=2)
    assert_close(ours, ort_run(path, feeds), label=f"{mt} b={b} s={s} past={p}")
    assert stats["run_allocs"] == 0, stats


def test_thread_counts_agree(encoder, build_dir):
    """1 and 2 threads give the same outputs within float rounding; each thread count repeats exactly."""
    mt, path, d = encoder
    feeds = _enc_feeds(2, 16, seed=7)
    one, _ = engine_run(build_dir, path, feeds, d, threads=1, repeat=3)
    two, _ = engine_run(build_dir, path, feeds, d, threads=2, repeat=3)
    assert_close(one, two, atol=1e-5, label=f"{mt} threads 1 vs 2")
