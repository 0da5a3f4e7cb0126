"""SentencePiece model files (issue 34): checkpoints that ship spiece.model / tokenizer.model, or Marian's
source.spm + target.spm + vocab.json, and no tokenizer.json.

The `sentencepiece` package trains small models here (offline, on tok_corpus.training_lines): Unigram and BPE, with
and without byte_fallback, the nmt_nfkc charsmap, and one with identity normalization, user-defined symbols and
add_dummy_prefix / remove_extra_whitespaces off. The oracles, over the tokenizer corpus (tok_corpus.corpus,
N_LINES lines: ids and decode identical):
  - a model read on its own (tokenizer.model, no tokenizer_config.json): sentencepiece's own encode / decode;
  - spiece.model with tokenizer_class T5Tokenizer: transformers' T5Tokenizer.from_pretrained (ids with </s>,
    decode with and without the special tokens);
  - Marian: transformers' MarianTokenizer(source.spm, target.spm, vocab.json) (a vocab.json that lacks some source
    pieces: those become <unk>);
and `winml generate --text` on a tiny random MarianMTModel whose checkpoint has only the .spm files equals
transformers' generate + MarianTokenizer.batch_decode. Hostile .model files (truncated, a length past the end, a bad
wire type, an unk_id past the pieces) exit 2 naming the file.
"""
import json
import os
import shutil
import struct
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import builder_util as BU  # noqa: E402
import oracle_util as U  # noqa: E402
import tok_corpus  # noqa: E402

# 2,000 corpus lines by default (about 10 s a test); WM_SPM_LINES=20000 runs the whole corpus (all equal when this
# was written, 14 minutes on a loaded 2-core machine)
N_LINES = int(os.environ.get("WM_SPM_LINES", "2000"))
SPECIALS = dict(unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
T5_IDS = dict(pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
MODELS = {  # name: sentencepiece trainer options (uni_bf is also Marian's source.spm)
    "uni": dict(model_type="unigram", vocab_size=1200, **T5_IDS),
    "uni_bf": dict(model_type="unigram", vocab_size=1200, byte_fallback=True, **SPECIALS),
    "bpe": dict(model_type="bpe", vocab_size=1200, **SPECIALS),
    "bpe_bf": dict(model_type="bpe", vocab_size=1200, byte_fallback=True, **SPECIALS),
    "uni_id": dict(model_type="unigram", vocab_size=1000, normalization_rule_name="identity",
                   user_defined_symbols=["<sep>", "@@"], add_dummy_prefix=False, remove_extra_whitespaces=False,
                   **SPECIALS),
    "marian_tgt": dict(model_type="unigram", vocab_size=800, **SPECIALS),
}
TRAIN_LINES = 3000


def toktool(build_dir):
    return os.path.join(build_dir, "wm_toktool")


def tool(build_dir, *args):
    r = U.run([toktool(build_dir)] + list(args), timeout=600)
    assert r.returncode == 0, U.describe(r)
    return [json.loads(x) for x in r.stdout.split("\n") if x]


@pytest.fixture(scope="module")
def models(request):
    import sentencepiece as spm
    d = U.scratch(request, "spm")
    train = tok_corpus.training_lines(TRAIN_LINES, seed=99)
    src = d / "train.txt"
    src.write_text("\n".join(s.replace("\n", " ") for s in train) + "\n", encoding="utf-8")
    alt = d / "train_tgt.txt"  # the Marian target side learns from other lines
    alt.write_text("\n".join(s.replace("\n", " ") for s in tok_corpus.training_lines(TRAIN_LINES // 2, seed=7)) + "\n",
                   encoding="utf-8")
    out = {}
    for name, kw in MODELS.items():
        spm.SentencePieceTrainer.train(input=str(alt if name == "marian_tgt" else src), model_prefix=str(d / name),
                                       character_coverage=0.9995, num_threads=1, minloglevel=2, **kw)
        out[name] = str(d / (name + ".model"))
    out["dir"] = d
    return out


@pytest.fixture(scope="module")
def corpus(models):
    lines = tok_corpus.corpus(N_LINES)
    path = models["dir"] / "corpus.jsonl"
    path.write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in lines), encoding="utf-8")
    return lines, str(path)


def folder(models, name, file, config=None):
    d = models["dir"] / f"ck_{name}_{file}"
    if not d.exists():
        d.mkdir()
        shutil.copyfile(models[name], d / file)
        if config is not None:
            (d / "tokenizer_config.json").write_text(json.dumps(config))
    return str(d)


def ours(build_dir, d, corpus_path, tmp, special=True):
    enc = tool(build_dir, "encode", d, corpus_path, *([] if special else ["--no-special"]))
    ids = [e["ids"] for e in enc]
    idp = tmp / "ids.jsonl"
    idp.write_text("".join(json.dumps(x) + "\n" for x in ids))
    return ids, str(idp)


def first_diff(got, want, lines):
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f"line {i} {lines[i]!r}: ours {g} != reference {w}"
    return f"lengths {len(got)} != {len(want)}"


@pytest.mark.parametrize("name", ["uni", "uni_bf", "bpe", "bpe_bf", "uni_id"])
def test_model_on_its_own_equals_sentencepiece(name, models, corpus, build_dir, tmp_path):
    """tokenizer.model without tokenizer_config.json: SentencePiece's own encoding and decoding."""
    import sentencepiece as spm
    lines, cpath = corpus
    sp = spm.SentencePieceProcessor(model_file=models[name])
    d = folder(models, name, "tokenizer.model")
    got, idp = ours(build_dir, d, cpath, tmp_path)
    want = [sp.encode(s) for s in lines]
    assert got == want, first_diff(got, want, lines)
    dec = tool(build_dir, "decode", d, idp, "--keep-special")
    wdec = [sp.decode(x) for x in want]
    assert dec == wdec, first_diff(dec, wdec, lines)
    info = U.run([toktool(build_dir), "info", d])
    assert "SentencePiece tokenizer.model" in info.stdout, U.describe(info)


def test_t5_spiece_equals_transformers(models, corpus, build_dir, tmp_path):
    import transformers as T
    lines, cpath = corpus
    d = folder(models, "uni", "spiece.model", {"tokenizer_class": "T5Tokenizer", "extra_ids": 100})
    ref = T.T5Tokenizer.from_pretrained(d)
    got, idp = ours(build_dir, d, cpath, tmp_path)
    want = [ref(s).input_ids for s in lines]
    assert got == want, first_diff(got, want, lines)
    for keep in (False, True):
        dec = tool(build_dir, "decode", d, idp, *(["--keep-special"] if keep else []))
        wdec = [ref.decode(x, skip_special_tokens=not keep) for x in want]
        assert dec == wdec, first_diff(dec, wdec, lines)
    sentinel = ref("a <extra_id_0> b <extra_id_99>").input_ids
    assert tool(build_dir, "encode", d, _one(tmp_path, "a <extra_id_0> b <extra_id_99>"))[0]["ids"] == sentinel


def _one(tmp, text):
    return _lines(tmp, [text])


def _lines(tmp, texts):
    p = tmp / "lines.jsonl"
    p.write_text("".join(json.dumps(t) + "\n" for t in texts))
    return str(p)


def marian_files(models, dest, drop=40):
    """source.spm (uni_bf: byte fallback), target.spm, vocab.json (</s> 0, <unk> 1, the source pieces but every 37th
    of the first drop*37 and the <0xNN> pieces of odd bytes, then the target's new pieces, <pad> last) and
    tokenizer_config.json into dest; returns the vocab."""
    import sentencepiece as spm
    os.makedirs(dest, exist_ok=True)
    shutil.copyfile(models["uni_bf"], os.path.join(dest, "source.spm"))
    shutil.copyfile(models["marian_tgt"], os.path.join(dest, "target.spm"))
    vocab = {"</s>": 0, "<unk>": 1}
    s = spm.SentencePieceProcessor(model_file=models["uni_bf"])
    t = spm.SentencePieceProcessor(model_file=models["marian_tgt"])
    for i in range(3, s.get_piece_size()):
        p = s.id_to_piece(i)
        if (i % 37 == 0 and i < drop * 37) or (s.is_byte(i) and int(p[3:5], 16) % 2):
            continue  # a source piece the vocabulary lacks: <unk>
        vocab.setdefault(s.id_to_piece(i), len(vocab))
    for i in range(3, t.get_piece_size()):
        vocab.setdefault(t.id_to_piece(i), len(vocab))
    for code in LANG_CODES:  # a multilingual model's target-language codes
        vocab[code] = len(vocab)
    vocab["<pad>"] = len(vocab)
    with open(os.path.join(dest, "vocab.json"), "w") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(dest, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "MarianTokenizer", "source_lang": "en", "target_lang": "de",
                   "unk_token": "<unk>", "eos_token": "</s>", "pad_token": "<pad>", "model_max_length": 512}, f)
    return vocab


LANG_CODES = [">>fra<<", ">>deu<<"]
CODED = [">>fra<< Hello world", ">>deu<<Guten Tag", ">>xyz<< unknown code", "no code >>fra<<", ">>fra<<", " >>deu<< x"]


def marian_ref(d):
    import transformers as T
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Recommended: pip install sacremoses": the punctuation normalizer is
        return T.MarianTokenizer(os.path.join(d, "source.spm"), os.path.join(d, "target.spm"),  # not applied by
                                 os.path.join(d, "vocab.json"))                                  # encode either


def test_marian_equals_transformers(models, corpus, build_dir, tmp_path):
    lines, cpath = corpus
    d = str(models["dir"] / "marian")
    marian_files(models, d)
    ref = marian_ref(d)
    got, idp = ours(build_dir, d, cpath, tmp_path)
    want = [ref(s).input_ids for s in lines]
    assert got == want, first_diff(got, want, lines)
    assert any(ref.unk_token_id in x[:-1] for x in want)  # the vocabulary's gaps are met
    coded = [e["ids"] for e in tool(build_dir, "encode", d, _lines(tmp_path, CODED[:2]))]
    assert coded == [ref(s).input_ids for s in CODED[:2]]
    assert coded[0][0] == ref.convert_tokens_to_ids(">>fra<<")
    dec = tool(build_dir, "decode", d, idp)
    wdec = [ref.decode(x, skip_special_tokens=True) for x in want]
    assert dec == wdec, first_diff(dec, wdec, lines)
    info = U.run([toktool(build_dir), "info", d])
    assert "Marian" in info.stdout and "vocab.json" in info.stdout, U.describe(info)


TEXTS = ["Hello world, this is a test.", "A fox.", "The lazy dog sleeps all day long in the sun.", "ok",
         "Über café 東京"]


def test_marian_generate_text_without_tokenizer_json(models, winml, tmp_path):
    """A tiny random MarianMTModel whose checkpoint has only source.spm / target.spm / vocab.json: `winml build`
    carries them, `winml generate --text` tokenizes, generates and decodes as transformers does."""
    import torch
    import transformers as T
    ck = str(tmp_path / "ck")
    vocab = marian_files(models, ck)
    pad = vocab["<pad>"]
    torch.manual_seed(0)
    m = T.MarianMTModel(T.MarianConfig(vocab_size=len(vocab), d_model=32, encoder_layers=2, decoder_layers=2,
                                       encoder_attention_heads=4, decoder_attention_heads=2, encoder_ffn_dim=64,
                                       decoder_ffn_dim=48, max_position_embeddings=64, scale_embedding=True,
                                       pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0,
                                       forced_eos_token_id=0, init_std=0.5))
    with torch.no_grad():
        m.final_logits_bias.normal_(0, 1.0)
        m.final_logits_bias[0, 0] += 8.0
    m.eval()
    m.save_pretrained(ck)
    assert not os.path.exists(os.path.join(ck, "tokenizer.json"))
    o = str(tmp_path / "build")
    r = U.run([winml, "build", "-m", ck, "-o", o, "-q"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    for f in ("source.spm", "target.spm", "vocab.json"):
        assert os.path.exists(os.path.join(o, f)), f
    tok = marian_ref(ck)
    enc = tok(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        want = m.generate(**enc, max_new_tokens=10, num_beams=1)
    got = BU.s2s_winml_generate(winml, o, texts=TEXTS, max_new_tokens=10)
    assert [x["ids"] for x in got] == want.tolist()
    assert [x["text"] for x in got] == tok.batch_decode(want, skip_special_tokens=True)


def _varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def _piece(s, score, typ):
    b = s.encode()
    return b"\x0a" + _varint(len(b)) + b + b"\x15" + struct.pack("<f", score) + b"\x18" + _varint(typ)


def _model(pieces, trainer=b""):
    out = b""
    for p in pieces:
        out += b"\x0a" + _varint(len(p)) + p
    if trainer:
        out += b"\x12" + _varint(len(trainer)) + trainer
    return out


GOOD = [_piece("<unk>", 0.0, 2), _piece("<s>", 0.0, 3), _piece("</s>", 0.0, 3), _piece("\u2581a", -1.0, 1),
        _piece("b", -2.0, 1)]
HOSTILE = {
    "truncated": None,  # the first half of a trained model
    "huge_length": _model(GOOD) + b"\x0a\xff\xff\xff\xff\x0f" + b"x" * 8,
    "bad_wire_type": _model(GOOD) + b"\x0b",  # field 1, wire type 3 (start group)
    "piece_wire_type": _model(GOOD[:1]) + b"\x0a\x03\x0d\x00\x00",  # a piece whose field 1 is 32-bit
    "unk_past_end": _model(GOOD, b"\xc0\x02\x63"),  # trainer_spec.unk_id 99
    "no_unknown_piece": _model([_piece("a", 0.0, 1)]),
    "bad_utf8": _model([b"\x0a\x02\xff\xfe"] + GOOD),
    "long_varint": _model(GOOD) + b"\x20" + b"\xff" * 11,  # field 4 (skipped) with an 11-byte varint
    "empty": b"",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_model_refused(case, models, winml_asan, tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    data = HOSTILE[case]
    if data is None:
        raw = open(models["uni"], "rb").read()
        data = raw[: len(raw) // 2]
    (d / "spiece.model").write_bytes(data)
    r = U.run([winml_asan, "tokenize", "-m", str(d), "--text", "hello"])
    U.assert_clean_error(r, "winml tokenize", "spiece.model")
