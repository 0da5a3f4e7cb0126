"""T5 (issue 34) through the encoder-decoder tables: tiny random T5ForConditionalGeneration checkpoints saved by
transformers -- v1 (feed_forward_proj relu, tied lm_head with the output scaled by d_model^-1/2) and v1.1
(gated-gelu, a separate lm_head read unscaled, d_kv * num_heads != d_model) -- are built with `winml build` into
Optimum's seq2seq layout and run in onnxruntime and in our engine: the encoder states, the first decoder step's
logits and caches, and later steps through the caches must match transformers within 1e-4 (fp32), batch 3 with a
right-padded source row, sources and decoder prefixes long enough for the log-spaced and the clipped relative
position buckets of both stacks. `winml generate` (greedy and beam search, 5 sources in one batch and one alone)
returns transformers' generate token for token; --text through a T5-style tokenizer.json (Unigram + Metaspace +
"$A </s>", trained here with `tokenizers`: no real T5 tokenizer is available offline) gives `tokenizers`' ids and
transformers' decoded text. Configs with num_layers 0 or relative_attention_num_buckets 0 / negative are refused
with exit 2 naming the field, nothing left behind.
"""
import json
import os

import numpy as np
import pytest
import torch

import builder_util as BU
import oracle_util as U

TOL = 1e-4
torch.set_num_threads(1)
# v1: d_kv * heads = d_model, small buckets so that the sources (24) and decoder prefixes (20) pass both the exact
# and the log-spaced buckets and max_distance (clipped); v1.1: d_kv 10 x 3 heads = 30 != d_model 48, default buckets
CONFIGS = {
    "v1": dict(vocab_size=300, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
               relative_attention_num_buckets=8, relative_attention_max_distance=12, feed_forward_proj="relu"),
    "v11": dict(vocab_size=320, d_model=48, d_kv=10, d_ff=40, num_layers=2, num_decoder_layers=2, num_heads=3,
                relative_attention_num_buckets=16, relative_attention_max_distance=20,
                feed_forward_proj="gated-gelu"),
}
# the end token's embedding / lm_head row scaled so that some hypotheses end early, others run to the limit
EOS_SCALE = {"v1": 3.0, "v11": 3.0}
GEN_GAIN = {"v1": 20.0, "v11": 1.0}
TEXTS = ["translate English to German: The house is wonderful.", "summarize: A fox.",
         "translate English to German: the lazy dog sleeps all day long in the sun", "ok", "Über café   spaces"]


def tiny_tokenizer(path, vocab):
    """A T5-shaped tokenizer.json: Unigram, WhitespaceSplit + Metaspace, NFKC, "$A </s>", <pad> 0 </s> 1 <unk> 2,
    and extra_ids as added special tokens (all ids below vocab)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    t = Tokenizer(models.Unigram())
    t.normalizer = normalizers.NFKC()
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                               pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")])
    t.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tr = trainers.UnigramTrainer(vocab_size=vocab - 8, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>")
    t.train_from_iterator(["the quick brown fox jumps over the lazy dog", "translate English to German: house"] * 20
                          + TEXTS, tr)
    t.add_special_tokens([f"<extra_id_{i}>" for i in range(4)])
    t.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                     special_tokens=[("</s>", 1)])
    assert t.get_vocab_size() <= vocab
    t.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "</s>", "pad_token": "<pad>",
                   "unk_token": "<unk>"}, f)


def make(kind, path, gen):
    """Saves a tiny T5 at path; v11 as a v1.1 checkpoint is published: tie_word_embeddings false and its own
    lm_head.weight (transformers 5 saves T5 tied, so the separate head is written here). Returns the torch model
    computing what that checkpoint means."""
    import transformers as T
    from safetensors.torch import load_file, save_file
    torch.manual_seed(0 if kind == "v1" else 1)
    m = T.T5ForConditionalGeneration(T.T5Config(**CONFIGS[kind], decoder_start_token_id=0))
    with torch.no_grad():
        for n, p in m.named_parameters():  # norm weights re-drawn: a wrong norm cannot hide behind ones
            if n.endswith("layer_norm.weight"):
                p.uniform_(0.5, 1.5)
        if kind == "v11":
            m.lm_head = torch.nn.Linear(m.config.d_model, m.config.vocab_size, bias=False)
            m.lm_head.weight.normal_(0, 1.0 if gen else 0.05)
            m.config.scale_decoder_outputs = False
        if gen:  # the sublayers made to outweigh the tied embedding in the residual stream (varied tokens)
            for n, p in m.named_parameters():
                if n.endswith((".o.weight", ".wo.weight")):
                    p.mul_(GEN_GAIN[kind])
            head = m.lm_head.weight if kind == "v11" else m.shared.weight
            head *= head.shape[1] ** 0.5 / head.norm(dim=1, keepdim=True)  # rows of one norm: no token dominates
            head[1] *= EOS_SCALE[kind]
    m.eval()
    m.save_pretrained(path)
    if kind == "v11":
        st = os.path.join(path, "model.safetensors")
        w = load_file(st)
        w["lm_head.weight"] = m.lm_head.weight.detach().clone().contiguous()
        save_file(w, st, metadata={"format": "pt"})
        BU.edit_config(path, tie_word_embeddings=False, scale_decoder_outputs=None)
    tiny_tokenizer(path, m.config.vocab_size)
    return m


@pytest.fixture(scope="module")
def built(request, winml):
    d = U.scratch(request, "builder_t5")
    out = {}
    for kind in CONFIGS:
        for use in ("gen", "par"):
            ck = str(d / f"ckpt_{kind}_{use}")
            m = make(kind, ck, use == "gen")
            o = str(d / f"build_{kind}_{use}")
            r = U.run([winml, "build", "-m", ck, "-o", o, "-q"], timeout=300)
            assert r.returncode == 0, U.describe(r)
            out[kind if use == "gen" else kind + "_par"] = (m, o)
    return out


def test_untied_head_is_separate(built):
    """The v1.1 checkpoint's lm_head differs from the shared embedding (so a tied export would fail parity)."""
    m, o = built["v11_par"]
    assert not torch.equal(m.lm_head.weight, m.shared.weight)
    feats = json.load(open(os.path.join(o, "build_manifest.json")))
    assert feats["task"] == "text2text-generation", feats


@pytest.mark.parametrize("kind", list(CONFIGS))
def test_layout_and_parity(kind, built, run_model):
    m, o = built[kind + "_par"]
    for f in ("encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx"):
        assert os.path.exists(os.path.join(o, f)), f
    rng = np.random.default_rng(1)
    B, S, D = 3, 24, 20
    ids = BU.random_ids(rng, (B, S), m.config.vocab_size)
    mask = np.ones((B, S), np.int64)
    mask[1, 15:] = 0
    ids[mask == 0] = m.config.pad_token_id
    dec = BU.random_ids(rng, (B, D), m.config.vocab_size)
    with torch.no_grad():
        tm = {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask)}
        ref_h = m.get_encoder()(**tm).last_hidden_state.numpy()
        ref = m(**tm, decoder_input_ids=torch.tensor(dec), use_cache=False).logits.numpy()
    h = run_model(os.path.join(o, "encoder_model.onnx"), {"input_ids": ids, "attention_mask": mask})
    valid = np.broadcast_to(mask.astype(bool)[..., None], ref_h.shape)
    BU.assert_close_valid(h["last_hidden_state"], ref_h, valid, f"{kind} encoder", TOL)
    P = D - 2
    first = run_model(os.path.join(o, "decoder_model.onnx"),
                      {"input_ids": dec[:, :P], "encoder_attention_mask": mask,
                       "encoder_hidden_states": h["last_hidden_state"]})
    BU.assert_close_valid(first["logits"], ref[:, :P], np.ones(ref[:, :P].shape, bool), f"{kind} decoder step 1",
                          TOL)
    nh, dkv = m.config.num_heads, m.config.d_kv
    assert first["present.0.encoder.key"].shape == (B, nh, S, dkv)
    assert first["present.1.decoder.value"].shape == (B, nh, P, dkv)
    cache = {"past_key_values." + k[len("present."):]: v for k, v in first.items() if k.startswith("present.")}
    for t in range(P, D):  # two steps through the caches: the bias rows of positions P and P + 1
        feeds = dict(cache, input_ids=dec[:, t:t + 1], encoder_attention_mask=mask)
        nxt = run_model(os.path.join(o, "decoder_with_past_model.onnx"), feeds)
        BU.assert_close_valid(nxt["logits"], ref[:, t:t + 1], np.ones(ref[:, t:t + 1].shape, bool),
                              f"{kind} with past at {t}", TOL)
        assert nxt["present.1.decoder.key"].shape[2] == t + 1
        assert not any(k.startswith("present.") and ".encoder." in k for k in nxt)
        for k, v in nxt.items():
            if k.startswith("present."):
                cache["past_key_values." + k[len("present."):]] = v


def sources(m, seed=3, n=5):
    rng = np.random.default_rng(seed)
    return [[int(x) for x in BU.random_ids(rng, (k,), m.config.vocab_size)] + [1] for k in rng.integers(2, 14, n)]


hf_generate, winml_generate = BU.s2s_hf_generate, BU.s2s_winml_generate


@pytest.mark.parametrize("beams,extra", [(1, {}), (3, {}), (4, {}), (4, dict(no_repeat_ngram_size=2)),
                                         (3, dict(early_stopping=True, length_penalty=2.0))])
@pytest.mark.parametrize("kind", list(CONFIGS))
def test_generate_equals_transformers(kind, beams, extra, built, winml):
    m, o = built[kind]
    rows = sources(m)
    kw = dict(max_new_tokens=14, num_beams=beams, **extra)
    want = hf_generate(m, rows, **kw)
    flags = {k: str(v).lower() if isinstance(v, bool) else v for k, v in kw.items()}
    got = [x["ids"] for x in winml_generate(winml, o, rows, **flags)]
    assert got == want, (got, want)
    lens = {row.index(1) if 1 in row else len(row) for row in want}  # where the end token (1) comes
    assert len(lens) > 1, f"every hypothesis has the same length {lens}: the early end is not exercised"
    if not extra:  # one source alone (batch 1) too
        alone = [x["ids"] for x in winml_generate(winml, o, rows[1:2], **kw)]
        assert alone == hf_generate(m, rows[1:2], **kw)


@pytest.mark.parametrize("kind", list(CONFIGS))
def test_generate_text_equals_transformers(kind, built, winml):
    import transformers as T
    from tokenizers import Tokenizer
    m, o = built[kind]
    tok = T.PreTrainedTokenizerFast.from_pretrained(o)
    raw = Tokenizer.from_file(os.path.join(o, "tokenizer.json"))
    for t in TEXTS:  # our tokenizer: the ids and pieces of `tokenizers`
        r = U.run([winml, "tokenize", "-m", o, "--text", t, "-f", "json"])
        assert r.returncode == 0, U.describe(r)
        e = raw.encode(t)
        j = json.loads(r.stdout)
        assert j["ids"] == e.ids and [x["token"] for x in j["tokens"]] == e.tokens, (t, j["ids"], e.ids)
        assert e.ids[-1] == 1 and len(e.ids) > 2  # "$A </s>"
    enc = tok(TEXTS, padding=True, return_tensors="pt")
    greedy_text = None
    for beams in (1, 4):
        with torch.no_grad():
            want = m.generate(**enc, max_new_tokens=10, num_beams=beams)
        got = winml_generate(winml, o, texts=TEXTS, max_new_tokens=10, num_beams=beams)
        assert [x["ids"] for x in got] == want.tolist()
        assert [x["text"] for x in got] == tok.batch_decode(want, skip_special_tokens=True)
        if beams == 1:
            greedy_text = got[0]["text"]
    # the plain output of one source, greedy (the folder's default): the batch's greedy text of that source (the
    # beam-search text may differ, and did for some random checkpoints)
    r = U.run([winml, "generate", "-m", o, "--text", TEXTS[0], "--max-new-tokens", "10", "--num-beams", "1"])
    assert r.returncode == 0 and r.stdout == greedy_text + "\n", U.describe(r)


HOSTILE = [
    ("num_layers", 0, "num_layers"),
    ("num_decoder_layers", -1, "num_decoder_layers"),
    ("relative_attention_num_buckets", 0, "relative_attention_num_buckets"),
    ("relative_attention_num_buckets", -8, "relative_attention_num_buckets"),
    ("relative_attention_num_buckets", 2.5, "relative_attention_num_buckets"),
    ("relative_attention_max_distance", 4, "relative_attention_max_distance"),  # not past the 4 exact of 8 buckets
    ("d_kv", 0, "d_kv"),
    ("feed_forward_proj", "gated-swiglu9", "feed_forward_proj"),
]


@pytest.mark.parametrize("key,value,named", HOSTILE)
def test_hostile_config_refused(key, value, named, winml_asan, tmp_path):
    cfg = dict(CONFIGS["v1"], model_type="t5", is_encoder_decoder=True, architectures=["T5ForConditionalGeneration"])
    cfg[key] = value
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    r = U.run([winml_asan, "build", "-m", str(tmp_path / "m"), "--random-weights", "-o", str(out)])
    U.assert_clean_error(r, "winml build", "config.json", f"'{named}'")
    assert not out.exists() and not U.leftovers(tmp_path)


def test_random_weights_build_runs(winml_asan, tmp_path):
    """--random-weights from the config alone (no tensors) builds the three graphs, which run under ASan."""
    cfg = dict(CONFIGS["v11"], model_type="t5", is_encoder_decoder=True, tie_word_embeddings=False,
               architectures=["T5ForConditionalGeneration"], decoder_start_token_id=0, eos_token_id=1,
               pad_token_id=0)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    r = U.run([winml_asan, "build", "-m", str(tmp_path / "m"), "--random-weights", "-o", str(out), "-q"],
              timeout=300)
    assert r.returncode == 0, U.describe(r)
    r = U.run([winml_asan, "generate", "-m", str(out), "--ids", "5,6,7,1", "--ids", "9,1", "--num-beams", "3",
               "--max-new-tokens", "5", "-f", "json"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    outs = json.loads(r.stdout)["outputs"]
    assert len(outs) == 2 and all(x["ids"][0] == 0 for x in outs), outs


def test_unknown_type_lists_encoder_decoders(winml_asan, tmp_path):
    """The families a refusal lists include the encoder-decoder table's (they were left out)."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({"model_type": "nope"}))
    r = U.run([winml_asan, "build", "-m", str(tmp_path / "m"), "--random-weights", "-o", str(tmp_path / "o")])
    U.assert_clean_error(r, "winml build", "'model_type'", "bart, marian, t5")


def test_part_recipe_refused_naming_its_field(built, winml_asan, tmp_path):
    """A reference part recipe of an encoder-decoder (a separate encoder or static-cache decoder export) builds
    (test_builder_s2s_parts.py); one that lacks an input the part needs is refused naming the field, not as if the
    model_type were unknown to the builder."""
    _, o = built["v1_par"]
    rec = {"export": {"opset_version": 17, "input_tensors": [{"name": "input_ids", "dtype": "int32", "shape": [1, 8]}],
                      "output_tensors": [{"name": "encoder_hidden_states"}]},
           "loader": {"task": "feature-extraction", "model_class": "T5EncoderWrapper", "model_type": "t5"}}
    rp = tmp_path / "rec.json"
    rp.write_text(json.dumps(rec))
    r = U.run([winml_asan, "build", "-m", o.replace("build_", "ckpt_"), "-c", str(rp), "-o", str(tmp_path / "o")])
    U.assert_clean_error(r, "winml build", str(rp), "'export.input_tensors'", "no 'attention_mask'")
    assert not (tmp_path / "o").exists()
