"""Encoder-decoder checkpoints (issue 34: bart, marian) through the builder's tables: tiny random checkpoints saved
by transformers (BartForConditionalGeneration, MarianMTModel; scale_embedding on, a random final_logits_bias with
the end token raised so that hypotheses end at different steps, weights at init_std 0.5 for varied tokens) are
built with `winml build` into Optimum's seq2seq layout (encoder_model.onnx, decoder_model.onnx,
decoder_with_past_model.onnx) and run in onnxruntime and in our engine: the encoder states, the first decoder
step's logits and caches, and a later step's logits through the caches must match transformers within 1e-4 (fp32),
batch 3 with a right-padded source row. `winml generate` (greedy and beam search, 5 sources in one batch and one
alone, with and without no_repeat_ngram_size) returns transformers' generate token for token; --text with a
tokenizer.json decodes to transformers' batch_decode. Configs with encoder_layers / decoder_layers 0 or negative,
or a d_model the heads do not divide, are refused with exit 2 naming the field, nothing left behind.
"""
import json
import os

import numpy as np
import pytest
import torch

import builder_util as BU
import oracle_util as U

TOL = 1e-4
torch.set_num_threads(1)  # tiny models: one thread is the fastest for transformers' generate here
SMALL = dict(vocab_size=320, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
             decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=48, max_position_embeddings=64)


# added to the end token's final_logits_bias of the generation checkpoints: some hypotheses end early, others run to
# the limit (chosen by trying: every search setting below then ends rows at different steps)
EOS_BOOST = {"bart": 14.0, "marian": 8.0}


def tiny_tokenizer(path):
    """A byte-level BPE tokenizer.json of 320 ids with BART's specials and post-processor (<s> ... </s>)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=320, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    t.train_from_iterator(["the quick brown fox jumps over the lazy dog"] * 20 + TEXTS, tr)
    t.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), add_prefix_space=False)
    t.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
                   "pad_token": "<pad>", "unk_token": "<unk>"}, f)


TEXTS = ["Hello world, this is a test.", "A fox.", "The lazy dog sleeps all day long in the sun.", "ok", "Über café"]


def make(kind, path, std):
    import transformers as T
    torch.manual_seed(0)
    if kind == "bart":
        m = T.BartForConditionalGeneration(T.BartConfig(**SMALL, scale_embedding=True, init_std=std))
    else:
        m = T.MarianMTModel(T.MarianConfig(**SMALL, scale_embedding=True, pad_token_id=319, init_std=std,
                                           decoder_start_token_id=319, eos_token_id=0, forced_eos_token_id=0))
    with torch.no_grad():  # zeros in a fresh model: made random so that the bias is checked
        m.final_logits_bias.normal_(0, 1.0)
        if std > 0.1:
            m.final_logits_bias[0, m.config.eos_token_id] += EOS_BOOST[kind]
    m.eval()
    m.save_pretrained(path)
    if kind == "bart":
        tiny_tokenizer(path)
    return m


@pytest.fixture(scope="module")
def built(request, winml):
    d = U.scratch(request, "builder_s2s")
    out = {}
    # generation: weights at std 0.5 (varied tokens); parity: the default 0.02 (logits of order 1, so that 1e-4 is
    # an absolute bound that means something)
    for kind in ("bart", "marian"):
        for use, std in (("gen", 0.5), ("par", 0.02)):
            ck = str(d / f"ckpt_{kind}_{use}")
            m = make(kind, ck, std)
            o = str(d / f"build_{kind}_{use}")
            r = U.run([winml, "build", "-m", ck, "-o", o, "-q"], timeout=300)
            assert r.returncode == 0, U.describe(r)
            out[kind if use == "gen" else kind + "_par"] = (m, o)
    return out


@pytest.mark.parametrize("kind", ["bart", "marian"])
def test_layout_and_parity(kind, built, run_model):
    m, o = built[kind + "_par"]
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


def sources(m, seed=3, n=5):
    rng = np.random.default_rng(seed)
    return [[int(x) for x in BU.random_ids(rng, (k,), m.config.vocab_size - 1)] for k in rng.integers(2, 11, n)]


hf_generate, winml_generate = BU.s2s_hf_generate, BU.s2s_winml_generate


@pytest.mark.parametrize("beams,ngram,extra", [(1, 0, {}), (1, 2, {}), (4, 0, {}), (3, 2, {}),
                                               (4, 0, dict(early_stopping=True, length_penalty=2.0)),
                                               (3, 0, dict(early_stopping="never", length_penalty=0.5))])
@pytest.mark.parametrize("kind", ["bart", "marian"])
def test_generate_equals_transformers(kind, beams, ngram, extra, built, winml):
    m, o = built[kind]
    rows = sources(m)
    kw = dict(max_new_tokens=14, num_beams=beams, no_repeat_ngram_size=ngram, **extra)
    want = hf_generate(m, rows, **kw)
    flags = {k: str(v).lower() if isinstance(v, bool) else v for k, v in kw.items()}
    got = [x["ids"] for x in winml_generate(winml, o, rows, **flags)]
    assert got == want, (got, want)
    lens = {len([t for t in row[1:] if t != m.config.pad_token_id]) for row in want}
    assert len(lens) > 1, f"every hypothesis has the same length {lens}: the early end is not exercised"
    if beams > 1 and ngram == 0 and not extra:  # one source alone (batch 1) too
        alone = [x["ids"] for x in winml_generate(winml, o, rows[1:2], **kw)]
        assert alone == hf_generate(m, rows[1:2], **kw)


def test_generate_text_equals_transformers(built, winml):
    import transformers as T
    m, o = built["bart"]
    tok = T.PreTrainedTokenizerFast.from_pretrained(o)
    enc = tok(TEXTS, padding=True, return_tensors="pt")
    for beams in (1, 4):
        with torch.no_grad():
            want = m.generate(**enc, max_new_tokens=10, num_beams=beams)
        got = winml_generate(winml, o, texts=TEXTS, max_new_tokens=10, num_beams=beams)
        assert [x["ids"] for x in got] == want.tolist()
        assert [x["text"] for x in got] == tok.batch_decode(want, skip_special_tokens=True)
    r = U.run([winml, "generate", "-m", o, "--text", TEXTS[0], "--max-new-tokens", "10"])
    assert r.returncode == 0 and r.stdout == got[0]["text"] + "\n", U.describe(r)


@pytest.mark.parametrize("ep,device", [("CPUExecutionProvider", "auto"), ("auto", "CPU")])
def test_generate_ep_and_device(built, winml, ep, device):
    """The reference's --ep / -d on an encoder-decoder build: the CPU EP by any name, or auto, changes nothing."""
    m, o = built["bart"]
    rows = sources(m, n=2)
    assert winml_generate(winml, o, rows, max_new_tokens=8, ep=ep, device=device) == \
        winml_generate(winml, o, rows, max_new_tokens=8)


def test_text_without_tokenizer_json_refused(built, winml_asan):
    _, o = built["marian"]  # no tokenizer.json in that checkpoint
    r = U.run([winml_asan, "generate", "-m", o, "--text", "hello"])
    U.assert_clean_error(r, "winml generate", "tokenizer.json", "missing")


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


BAD_FLAGS = [
    (["--num-beams", "64", "--max-new-tokens", "65535"] + ["--ids", "5,6,7"] * 200, ["caches would take", "GiB"]),
    (["--ids", "5,6,7", "--early-stopping", "sometimes"], ["--early-stopping"]),
    (["--ids", "5,,7"], ["--ids"]),
    (["--ids", "5,6,99999"], ["outside the vocabulary"]),
    (["--ids", "5", "--num-beams", "0"], ["--num-beams"]),
]


@pytest.mark.parametrize("flags,needles", BAD_FLAGS)
def test_bad_generate_flags_refused(flags, needles, built, winml_asan):
    _, o = built["bart"]
    r = U.run([winml_asan, "generate", "-m", o] + flags)
    U.assert_clean_error(r, "winml generate", *needles)


def test_generate_sampling_seeded(built, winml, winml_asan):
    """--temperature / --top-k / --top-p on a text encoder-decoder: the same --seed gives the same tokens, another
    seed others; at temperature 1e-6 every draw is the arg max (greedy's tokens); beams or a top-k without a
    temperature are refused (exit 2)."""
    m, o = built["bart"]
    rows = sources(m, n=2)
    samp = dict(max_new_tokens=14, temperature=1.0, top_k=20, top_p=0.9)
    a = [x["ids"] for x in winml_generate(winml, o, rows, seed=3, **samp)]
    b = [x["ids"] for x in winml_generate(winml, o, rows, seed=3, **samp)]
    c = [x["ids"] for x in winml_generate(winml, o, rows, seed=4, **samp)]
    greedy = [x["ids"] for x in winml_generate(winml, o, rows, max_new_tokens=14)]
    assert a == b and a != c and a != greedy
    cold = [x["ids"] for x in winml_generate(winml, o, rows, max_new_tokens=14, temperature=1e-6, top_k=50, seed=1)]
    assert cold == greedy
    for flags, needle in ((["--temperature", "1", "--num-beams", "2"], "--temperature"),
                          (["--top-k", "5"], "--temperature"), (["--top-p", "1.5"], "--top-p"),
                          (["--temperature", "0,1"], "--temperature")):
        r = U.run([winml_asan, "generate", "-m", o, "--ids", "5,6,7"] + flags)
        U.assert_clean_error(r, "winml generate", needle)
