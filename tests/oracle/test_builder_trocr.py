"""Image-to-text encoder-decoders (issue 34: VisionEncoderDecoderModel, TrOCR's layout): tiny random
VisionEncoderDecoderModel checkpoints saved by transformers - a ViT encoder (hidden 32) with a TrOCR decoder of
d_model 24 (so enc_to_dec_proj is there; relu, scale_embedding, its own output_projection), and a DeiT encoder
(CLS + distillation token) with a d_model 32 TrOCR decoder (gelu, cross_attention_hidden_size set, tied head) - are
built with `winml build` into Optimum's seq2seq layout (encoder_model.onnx: pixel_values -> last_hidden_state;
decoder_model.onnx; decoder_with_past_model.onnx) and run in onnxruntime and in our engine: encoder states, the
first decoder step's logits and a later step's through the caches match transformers within 1e-4 (fp32, batch 1
and 2).

Generation: `winml generate --image` on the scikit-image photographs (test_images' fixture) and a text line drawn
with PIL, preprocessed by our C code as preprocessor_config.json (ViTImageProcessor) says, greedy and beam, equals
transformers' generate on ViTImageProcessorPil's pixel_values token for token; `winml run --image` prints the
`tokenizers` decode of those ids. Bad configs (no decoder sub-config, an unsupported encoder model_type, a
cross_attention_hidden_size that is not the encoder's width) exit 2 naming the field, leaving nothing behind.
"""
import json
import os

import numpy as np
import pytest
import torch

import builder_util as BU
import oracle_util as U
from test_images import photos  # noqa: F401  (the scikit-image photographs fixture)

TOL = 1e-4
torch.set_num_threads(1)
WORDS = ["total", "amount", "cash", "change", "receipt", "date", "item", "price", "the", "quick", "brown", "fox"]

VARIANTS = {  # encoder kind, encoder kwargs, decoder kwargs
    "vit": ("ViTConfig", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48),
            dict(d_model=24, decoder_layers=2, decoder_attention_heads=2, decoder_ffn_dim=40,
                 activation_function="relu", scale_embedding=True, tie_word_embeddings=False)),
    "deit": ("DeiTConfig", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=40),
             dict(d_model=32, decoder_layers=2, decoder_attention_heads=4, decoder_ffn_dim=48,
                  activation_function="gelu", cross_attention_hidden_size=32, layernorm_embedding=True)),
}


def tokenizer(path):
    """A byte-level BPE tokenizer.json with <s> <pad> </s> as ids 0 1 2 (RoBERTa's, as TrOCR's)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=160, special_tokens=["<s>", "<pad>", "</s>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    t.train_from_iterator([" ".join(WORDS)] * 20, tr)
    t.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in ("<s>", "<pad>", "</s>")])
    t.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "pad_token": "<pad>",
                   "eos_token": "</s>"}, f)
    return t


def make(kind, path, seed=0, images=None):
    """The checkpoint of variant kind at path; with images, the end token is the 5th token greedy search picks for
    the first image (so that hypotheses end at different steps, not all at max_length)."""
    import transformers as T
    os.makedirs(path, exist_ok=True)
    tok = tokenizer(path)
    ecls, ekw, dkw = VARIANTS[kind]
    enc = getattr(T, ecls)(image_size=32, patch_size=8, num_channels=3, **ekw)
    dec = T.TrOCRConfig(vocab_size=tok.get_vocab_size(), max_position_embeddings=64, bos_token_id=0, pad_token_id=1,
                        eos_token_id=2, decoder_start_token_id=0, **dkw)
    cfg = T.VisionEncoderDecoderConfig.from_encoder_decoder_configs(enc, dec)
    cfg.decoder_start_token_id, cfg.pad_token_id, cfg.eos_token_id = 0, 1, 2
    torch.manual_seed(seed)
    m = T.VisionEncoderDecoderModel(config=cfg).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "norm" in n.lower() and n.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.25 * torch.randn(p.shape, generator=g))
    gc = m.generation_config
    gc.decoder_start_token_id, gc.pad_token_id, gc.eos_token_id, gc.bos_token_id = 0, 1, 2, 0
    gc.max_length = 14
    if images:
        eos = hf_generate(m, images[:1], max_new_tokens=12)[0][5]
        m.config.eos_token_id = gc.eos_token_id = eos
    m.save_pretrained(path)
    T.ViTImageProcessorPil(size={"height": 32, "width": 32}, resample=2, image_mean=[0.5] * 3,
                           image_std=[0.5] * 3).save_pretrained(path)
    return m, tok


@pytest.fixture(scope="module")
def built(request, winml, images):
    d = U.scratch(request, "builder_trocr")
    out = {}
    for kind in VARIANTS:
        ck = str(d / f"ckpt_{kind}")
        m, tok = make(kind, ck, images=images)
        o = str(d / f"build_{kind}")
        r = U.run([winml, "build", "-m", ck, "-o", o, "-q"], timeout=300)
        assert r.returncode == 0, U.describe(r)
        out[kind] = (m, o, ck, tok)
    return out


@pytest.fixture(scope="module")
def images(request, photos):  # noqa: F811
    """The photographs (PNG and JPEG, various sizes) and a text line drawn with PIL (PNG)."""
    from PIL import Image, ImageDraw
    d = U.scratch(request, "trocr_images")
    line = Image.new("RGB", (200, 40), "white")
    ImageDraw.Draw(line).text((6, 12), "TOTAL 12.50 CASH", fill=(10, 10, 10))
    p = str(d / "line.png")
    line.save(p)
    return [photos["astronaut.png"], photos["rocket.jpg"], p, photos["coffee.png"]]


def hf_pixels(paths):
    import transformers as T
    from PIL import Image
    proc = T.ViTImageProcessorPil(size={"height": 32, "width": 32}, resample=2, image_mean=[0.5] * 3,
                                  image_std=[0.5] * 3)
    ims = [Image.open(p).convert("RGB") for p in paths]
    return proc(ims, return_tensors="pt").pixel_values


@pytest.mark.parametrize("kind", list(VARIANTS))
def test_layout_and_parity(built, run_model, kind):
    m, o, _, _ = built[kind]
    man = json.load(open(os.path.join(o, "build_manifest.json")))
    assert man["task"] == "image-to-text", man
    n_tok = 17 if kind == "vit" else 18  # CLS (+ distillation) + 16 patches
    rng = np.random.default_rng(3)
    L = 2
    for B in (1, 2):
        x = rng.standard_normal((B, 3, 32, 32)).astype(np.float32)
        dec = BU.random_ids(rng, (B, 4), m.config.decoder.vocab_size)
        dec[:, 0] = 0
        with torch.no_grad():
            ref_h = m.encoder(pixel_values=torch.tensor(x)).last_hidden_state.numpy()
            ref = m(pixel_values=torch.tensor(x), decoder_input_ids=torch.tensor(dec), use_cache=False).logits.numpy()
        h = run_model(os.path.join(o, "encoder_model.onnx"), {"pixel_values": x})["last_hidden_state"]
        assert h.shape == (B, n_tok, 32)
        BU.assert_close_valid(h, ref_h, np.ones(ref_h.shape, bool), f"{kind} encoder B={B}", TOL)
        first = run_model(os.path.join(o, "decoder_model.onnx"), {"input_ids": dec[:, :3], "encoder_hidden_states": h})
        BU.assert_close_valid(first["logits"], ref[:, :3], np.ones(ref[:, :3].shape, bool), f"{kind} decoder", TOL)
        feeds = {"input_ids": dec[:, 3:4]}
        for i in range(L):
            for side in ("decoder", "encoder"):
                for kv in ("key", "value"):
                    feeds[f"past_key_values.{i}.{side}.{kv}"] = first[f"present.{i}.{side}.{kv}"]
        nxt = run_model(os.path.join(o, "decoder_with_past_model.onnx"), feeds)
        BU.assert_close_valid(nxt["logits"], ref[:, 3:4], np.ones(ref[:, 3:4].shape, bool), f"{kind} past", TOL)
        assert nxt["present.0.decoder.key"].shape[2] == 4


def hf_generate(m, paths, **kw):
    with torch.no_grad():
        return m.generate(pixel_values=hf_pixels(paths), **kw).tolist()


def winml_generate(winml, o, paths, **kw):
    argv = [winml, "generate", "-m", o, "-f", "json"]
    for k, v in kw.items():
        argv += ["--" + k.replace("_", "-"), str(v)]
    for p in paths:
        argv += ["--image", p]
    r = U.run(argv, timeout=120)
    assert r.returncode == 0, U.describe(r)
    return [o_["prompt"] + o_["ids"] for o_ in json.loads(r.stdout)["outputs"]]


@pytest.mark.parametrize("kind", list(VARIANTS))
def test_generate_matches_transformers(built, images, winml, kind):
    """Greedy and beam search on real images (our decode + preprocess) equal transformers' token for token."""
    m, o, _, _ = built[kind]
    seen = set()
    for beams in (1, 3):
        want = hf_generate(m, images, num_beams=beams, max_new_tokens=12)
        got = winml_generate(winml, o, images, num_beams=beams, max_new_tokens=12)
        width = max(map(len, want))
        got = [g + [1] * (width - len(g)) for g in got]
        assert got == want, (kind, beams, got, want)
        alone = winml_generate(winml, o, images[2:3], num_beams=beams, max_new_tokens=12)[0]
        assert alone == [t for t in want[2] if t != 1] or alone == want[2][:len(alone)], (alone, want[2])
        seen.update(len([t for t in w if t != 1]) for w in want)
    U.note(f"trocr {kind}: generated lengths {sorted(seen)}")


def test_run_prints_text(built, images, winml):
    """`winml run --image` on an image encoder-decoder: the `tokenizers` decode of transformers' greedy ids."""
    m, o, _, tok = built["vit"]
    want = hf_generate(m, images[:2])
    r = U.run([winml, "run", "-m", o, "--image", images[0], "--image", images[1], "-f", "json"], timeout=120)
    assert r.returncode == 0, U.describe(r)
    res = json.loads(r.stdout)
    assert res["task"] == "image-to-text", res
    texts = [x["text"] for x in res["results"]]
    assert texts == [tok.decode(w[1:], skip_special_tokens=True) for w in want], (texts, want)
    r = U.run([winml, "run", "-m", o, "--image", images[2]], timeout=120)
    assert r.returncode == 0, U.describe(r)
    assert r.stdout.strip() == tok.decode(hf_generate(m, images[2:3])[0][1:], skip_special_tokens=True).strip()
    r = U.run([winml, "run", "-m", o, "--image", images[0], "--max-image-pixels", "1000"], timeout=120)
    U.assert_clean_error(r, "winml run", "--max-image-pixels", "512x512")
    r = U.run([winml, "run", "-m", o, "--image", images[0], "--top-k", "3"], timeout=120)
    U.assert_clean_error(r, "winml run", "--top-k", "texts, not labels")


def test_inspect(built, winml):
    """inspect: the features name the projection; the parameters are transformers' less the unused pooler."""
    for kind in VARIANTS:
        m, _, ck, _ = built[kind]
        j = U.inspect_json(winml, ck)
        text = json.dumps(j)
        assert ("enc_to_dec_proj 32 -> 24" in text) == (kind == "vit") and "image-to-text" in text, text
        used = sum(p.numel() for n, p in m.named_parameters() if ".pooler." not in n)
        assert j["parameters"] == used, (j["parameters"], used)


BAD = {
    "no_decoder": (lambda c: c.pop("decoder"), ["'decoder'"]),
    "encoder_type": (lambda c: c["encoder"].update(model_type="bert"), ["'model_type'", "'bert'"]),
    "encoder_clip": (lambda c: c["encoder"].update(model_type="clip_vision_model"), ["'model_type'", "(vit, deit"]),
    "decoder_type": (lambda c: c["decoder"].update(model_type="bart"), ["'model_type'", "'bart'"]),
    "cross_size": (lambda c: c["decoder"].update(cross_attention_hidden_size=16), ["'cross_attention_hidden_size'"]),
    "learned_pos": (lambda c: c["decoder"].update(use_learned_position_embeddings=False),
                    ["'use_learned_position_embeddings'"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_configs(built, winml, tmp_path, case):
    import shutil
    _, _, ck, _ = built["deit"]
    d = tmp_path / "ck"
    shutil.copytree(ck, d)
    c = json.load(open(d / "config.json"))
    edit, needles = BAD[case]
    edit(c)
    json.dump(c, open(d / "config.json", "w"))
    out = tmp_path / "out"
    r = U.run([winml, "build", "-m", str(d), "-o", str(out), "-q"], timeout=120)
    U.assert_clean_error(r, "winml build", *needles)
    assert not out.exists() or not os.listdir(out), os.listdir(out)
