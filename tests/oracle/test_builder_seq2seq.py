"""Encoder-decoder checkpoints (issue 34: bart, marian) through the builder's tables: tiny random checkpoints saved
by transformers (BartForConditionalGeneration, MarianMTModel; the final_logits_bias and, for Marian, the embedding
scale made non-trivial) are built with `winml build` into Optimum's seq2seq layout (encoder_model.onnx,
decoder_model.onnx, decoder_with_past_model.onnx) and run in onnxruntime and in our engine: the encoder states,
the first decoder step's logits and caches, and a later step's logits through the caches must match transformers
within 1e-4 (fp32), batch 3 with a right-padded source row. Configs with encoder_layers / decoder_layers 0 or
negative, or a d_model the heads do not divide, are refused with exit 2 naming the field, nothing left behind.
"""
import json
import os

import numpy as np
import pytest
import torch

import builder_util as BU
import oracle_util as U

TOL = 1e-4
SMALL = dict(vocab_size=320, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
             decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=48, max_position_embeddings=64)


def make(kind, path):
    import transformers as T
    torch.manual_seed(0)
    if kind == "bart":
        m = T.BartForConditionalGeneration(T.BartConfig(**SMALL, scale_embedding=True))
    else:
        m = T.MarianMTModel(T.MarianConfig(**SMALL, scale_embedding=True, pad_token_id=319,
                                           decoder_start_token_id=319, eos_token_id=0, forced_eos_token_id=0))
    with torch.no_grad():  # zeros in a fresh model: made random so that the bias is checked
        m.final_logits_bias.normal_(0, 1.0)
    m.eval()
    m.save_pretrained(path)
    return m


@pytest.fixture(scope="module")
def built(request, winml):
    d = U.scratch(request, "builder_s2s")
    out = {}
    for kind in ("bart", "marian"):
        ck = str(d / f"ckpt_{kind}")
        m = make(kind, ck)
        o = str(d / f"build_{kind}")
        r = U.run([winml, "build", "-m", ck, "-o", o, "-q"], timeout=300)
        assert r.returncode == 0, U.describe(r)
        out[kind] = (m, o)
    return out


@pytest.fixture(params=sorted(BU.RUNNERS))
def run_model(request):
    return BU.RUNNERS[request.param]


@pytest.mark.parametrize("kind", ["bart", "marian"])
def test_layout_and_parity(kind, built, run_model):
    m, o = built[kind]
    names = sorted(os.listdir(o))
    for f in ("encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx"):
        assert f in names, names
    man = json.load(open(os.path.join(o, "build_manifest.json")))
    assert man["task"] == "text2text-generation" and man["final_artifact"] == "encoder_model.onnx", man
    rng = np.random.default_rng(1)
    B, S, D = 3, 9, 5
    ids = BU.random_ids(rng, (B, S), m.config.vocab_size - 1)
    mask = np.ones((B, S), np.int64)
    mask[1, 6:] = 0
    ids[mask == 0] = m.config.pad_token_id
    dec = BU.random_ids(rng, (B, D), m.config.vocab_size - 1)
    with torch.no_grad():
        tm = {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask)}
        ref_h = m.get_encoder()(**tm).last_hidden_state.numpy()
        ref = m(**tm, decoder_input_ids=torch.tensor(dec), use_cache=False).logits.numpy()
    h = run_model(os.path.join(o, "encoder_model.onnx"), {"input_ids": ids, "attention_mask": mask})
    valid = np.broadcast_to(mask.astype(bool)[..., None], ref_h.shape)
    BU.assert_close_valid(h["last_hidden_state"], ref_h, valid, f"{kind} encoder", TOL)
    first = run_model(os.path.join(o, "decoder_model.onnx"),
                      {"input_ids": dec[:, :3], "encoder_attention_mask": mask,
                       "encoder_hidden_states": h["last_hidden_state"]})
    allv = np.ones(ref[:, :3].shape, bool)
    BU.assert_close_valid(first["logits"], ref[:, :3], allv, f"{kind} decoder step 1", TOL)
    assert first["present.0.encoder.key"].shape == (B, m.config.decoder_attention_heads, S,
                                                    m.config.d_model // m.config.decoder_attention_heads)
    feeds = {"input_ids": dec[:, 3:4], "encoder_attention_mask": mask}
    for k, v in first.items():
        if k.startswith("present."):
            feeds["past_key_values." + k[len("present."):]] = v
    nxt = run_model(os.path.join(o, "decoder_with_past_model.onnx"), feeds)
    BU.assert_close_valid(nxt["logits"], ref[:, 3:4], np.ones(ref[:, 3:4].shape, bool), f"{kind} with past", TOL)
    assert nxt["present.1.decoder.key"].shape[2] == 4
    assert not any(k.startswith("present.") and ".encoder." in k for k in nxt)


HOSTILE = [
    ("encoder_layers", 0, "encoder_layers"),
    ("decoder_layers", -1, "decoder_layers"),
    ("encoder_layers", 2.5, "encoder_layers"),
    ("decoder_attention_heads", 5, "decoder_attention_heads"),  # d_model 32 is not divisible by 5
    ("d_model", 30, "encoder_attention_heads"),                  # 30 is not divisible by the 4 encoder heads
]


@pytest.mark.parametrize("key,value,named", HOSTILE)
@pytest.mark.parametrize("kind", ["bart", "marian"])
def test_hostile_config_refused(kind, key, value, named, winml_asan, tmp_path):
    cfg = dict(SMALL, model_type=kind, is_encoder_decoder=True)
    cfg[key] = value
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    r = U.run([winml_asan, "build", "-m", str(tmp_path / "m"), "--random-weights", "-o", str(out)])
    U.assert_clean_error(r, "winml build", "config.json", f"'{named}'")
    assert not out.exists() and not U.leftovers(tmp_path)
