"""Whisper (issue 34) through the encoder-decoder tables: tiny random WhisperForConditionalGeneration checkpoints
saved by transformers (d_model 32, 2 + 2 layers, 80 mel bins, 1500 source positions) are built with `winml build`
into Optimum's speech seq2seq layout (encoder_model.onnx reading input_features, decoder_model.onnx,
decoder_with_past_model.onnx) and run in onnxruntime and in our engine: encoder states, the first decoder step's
logits over a 4-token prompt, and a later step's through the caches match transformers within 1e-4 (fp32).

Generation: `winml generate --audio` on 5 espeak-ng utterances (16 kHz WAV, 22050 Hz WAV, 8 kHz FLAC: resampled by
libsoxr on the way in; the conversions by python-soxr) in one batch and one alone, greedy and beam, with language + task given, with language
detection, and with forced_decoder_ids, returns transformers' generate token for token (transformers fed the
WhisperFeatureExtractor features of the same samples); suppress_tokens and begin_suppress_tokens are set so that
they change the outcome. `winml run --audio` gives transformers' batch_decode(skip_special_tokens=True) text. The
log-mel front end on that speech is within 1e-4 of WhisperFeatureExtractor.

No real Whisper tokenizer ships offline (see /work/shared/facts/offline-data.md), so the tokenizer is a small
byte-level BPE trained here with Whisper's special tokens added (<|endoftext|>, <|startoftranscript|>, language
tokens, <|transcribe|>, <|translate|>, <|notimestamps|>, ...), and generation_config.json carries lang_to_id,
task_to_id and no_timestamps_token_id as Whisper's do. Hostile configs (num_mel_bins 0, d_model not divisible by
the heads) exit 2 naming the field, leaving nothing behind.
"""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest
import soundfile as sf
import torch

import builder_util as BU
import oracle_util as U

TOL = 1e-4
torch.set_num_threads(1)
SPECIALS = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|de|>", "<|fr|>", "<|translate|>",
            "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>", "<|notimestamps|>"]
UTTERANCES = ["the quick brown fox jumps over the lazy dog", "hello world", "this is a test of speech",
              "seven", "where is the station, please"]


def tokenizer(path, extra=()):
    """A byte-level BPE tokenizer.json with Whisper's special tokens (then extra ones, e.g. timestamps); returns the
    id of each special."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    t.train_from_iterator(UTTERANCES * 10, tr)
    t.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS + list(extra)])
    t.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>",
                   "bos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}, f)
    return t.get_vocab_size(), {s: t.token_to_id(s) for s in SPECIALS}, t.token_to_id("Ġ")


TIMESTAMPS = [f"<|{i * 0.02:.2f}|>" for i in range(1501)]  # Whisper's 1501 timestamp tokens, after <|notimestamps|>


def make(path, std, forced=False, speech_feats=None, timestamps=False):
    import transformers as T
    os.makedirs(path, exist_ok=True)
    V, sp, space = tokenizer(path, TIMESTAMPS if timestamps else ())
    eot = sp["<|endoftext|>"]
    torch.manual_seed(0)
    cfg = T.WhisperConfig(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                          decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=48, num_mel_bins=80,
                          max_source_positions=1500, max_target_positions=64, init_std=std,
                          decoder_start_token_id=sp["<|startoftranscript|>"], eos_token_id=eot, pad_token_id=eot,
                          bos_token_id=eot)
    m = T.WhisperForConditionalGeneration(cfg).eval()
    with torch.no_grad():  # the end token likelier, so that hypotheses end at different steps
        m.model.decoder.embed_tokens.weight[eot] *= 3.0
    m.save_pretrained(path)
    T.WhisperFeatureExtractor(feature_size=80).save_pretrained(path)
    g = json.load(open(os.path.join(path, "generation_config.json")))
    g.update({"lang_to_id": {k: sp[k] for k in ("<|en|>", "<|de|>", "<|fr|>")},
              "task_to_id": {"transcribe": sp["<|transcribe|>"], "translate": sp["<|translate|>"]},
              "no_timestamps_token_id": sp["<|notimestamps|>"], "is_multilingual": True, "max_length": 24,
              "suppress_tokens": [], "begin_suppress_tokens": [space, eot]})
    if timestamps:
        g["max_initial_timestamp_index"] = 50
    if forced:
        g["forced_decoder_ids"] = [[1, sp["<|de|>"]], [2, sp["<|translate|>"]]]
    if speech_feats is not None:  # suppress what the model picks most on the speech, and its first pick of row 0
        for k, v in g.items():
            if k != "transformers_version":
                setattr(m.generation_config, k, v)
        first = hf_generate(m, speech_feats, max_new_tokens=12, language="en")
        ids, counts = np.unique([t for row in first for t in row if t < sp["<|endoftext|>"]], return_counts=True)
        g["suppress_tokens"] = sorted(int(t) for t in ids[np.argsort(-counts)[:2]])
        g["begin_suppress_tokens"] = [space, eot, first[0][0]]
    json.dump(g, open(os.path.join(path, "generation_config.json"), "w"), indent=1)
    for k, v in g.items():  # transformers' from_pretrained drops lang_to_id / task_to_id: set them on the model's
        if k != "transformers_version":
            setattr(m.generation_config, k, v)
    return m, sp


@pytest.fixture(scope="module")
def built(request, winml, feats):
    d = U.scratch(request, "builder_whisper")
    out = {}
    for use, std, forced in (("gen", 0.5, False), ("par", 0.02, False), ("forced", 0.5, True)):
        ck = str(d / f"ckpt_{use}")
        m, sp = make(ck, std, forced, feats if use != "par" else None)
        o = str(d / f"build_{use}")
        r = U.run([winml, "build", "-m", ck, "-o", o, "-q"], timeout=300)
        assert r.returncode == 0, U.describe(r)
        out[use] = (m, o, sp)
    return out


@pytest.fixture(scope="module")
def speech(request):
    """5 espeak-ng utterances: 16 kHz WAV (PCM 16), espeak's own 22050 Hz WAV and 8 kHz FLAC (converted with
    python-soxr + soundfile: sox is not installed everywhere)."""
    import soxr
    if not shutil.which("espeak-ng"):
        pytest.fail("espeak-ng is needed (Debian package espeak-ng)", pytrace=False)
    d = U.scratch(request, "whisper_speech")
    files = []
    for i, text in enumerate(UTTERANCES):
        raw = d / f"u{i}_raw.wav"
        r = subprocess.run(["espeak-ng", "-s", str(140 + 15 * i), "-w", str(raw), text], capture_output=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        if i % 3 == 1:
            files.append(str(raw))
            continue
        y, sr = sf.read(raw, dtype="float32")
        rate, f, sub = (16000, d / f"u{i}.wav", "PCM_16") if i % 3 == 0 else (8000, d / f"u{i}.flac", "PCM_16")
        sf.write(f, soxr.resample(y, sr, rate, quality="HQ"), rate, subtype=sub)
        files.append(str(f))
    return files


@pytest.fixture(scope="module")
def feats(speech):
    return features(speech)


def samples16(path):
    """The file's mono samples at 16 kHz, resampled as the C front end does (libsoxr HQ)."""
    import soxr
    y, sr = sf.read(path, dtype="float32")
    if y.ndim > 1:
        y = y.mean(axis=1)
    return soxr.resample(y, sr, 16000, quality="HQ").astype(np.float32) if sr != 16000 else y


def features(files):
    """WhisperFeatureExtractor's log-mel features (its float64 numpy path) of the files, [B, 80, 3000]."""
    import transformers as T
    fe = T.WhisperFeatureExtractor(feature_size=80)
    rows = []
    for f in files:
        x = samples16(f)
        padded = np.zeros(fe.n_samples, np.float32)
        padded[: min(len(x), fe.n_samples)] = x[: fe.n_samples]
        rows.append(fe._np_extract_fbank_features(padded[None], "cpu")[0])
    return np.stack(rows).astype(np.float32)


def test_log_mel_on_speech(build_dir, speech, feats, tmp_path):
    """Our log-mel of espeak-ng speech at 16 kHz, 22050 Hz and 8 kHz vs WhisperFeatureExtractor (numpy path and
    __call__) on the same samples."""
    import transformers as T
    fe = T.WhisperFeatureExtractor(feature_size=80)
    tool = os.path.join(build_dir, "wm_audiotool")
    for i, f in enumerate(speech[:3]):
        out = tmp_path / "mel.f32"
        r = U.run([tool, "logmel", f, out, 80])
        assert r.returncode == 0, U.describe(r)
        b = open(out, "rb").read()
        got = np.frombuffer(b[8:], np.float32).reshape(80, 3000)
        want = feats[i]
        d_np = float(np.abs(got - want).max())
        d_call = float(np.abs(got - fe(samples16(f), sampling_rate=16000, return_tensors="np").input_features[0]).max())
        U.note(f"whisper log-mel of {os.path.basename(f)} ({sf.info(f).samplerate} Hz): max diff {d_np:.2e} (numpy), "
               f"{d_call:.2e} (__call__)")
        assert d_np <= 1e-4 and d_call <= 1e-4, (f, d_np, d_call)


def test_layout_and_parity(built, run_model):
    m, o, sp = built["par"]
    names = sorted(os.listdir(o))
    for f in ("encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx"):
        assert f in names, names
    man = json.load(open(os.path.join(o, "build_manifest.json")))
    assert man["task"] == "automatic-speech-recognition", man
    rng = np.random.default_rng(1)
    B = 2
    x = rng.standard_normal((B, 80, 3000)).astype(np.float32)
    prompt = [sp["<|startoftranscript|>"], sp["<|en|>"], sp["<|transcribe|>"], sp["<|notimestamps|>"]]
    dec = np.concatenate([np.tile(np.array(prompt, np.int64), (B, 1)), BU.random_ids(rng, (B, 2), 300)], axis=1)
    with torch.no_grad():
        ref_h = m.model.encoder(torch.tensor(x)).last_hidden_state.numpy()
        ref = m(input_features=torch.tensor(x), decoder_input_ids=torch.tensor(dec), use_cache=False).logits.numpy()
    h = run_model(os.path.join(o, "encoder_model.onnx"), {"input_features": x})["last_hidden_state"]
    assert h.shape == (B, 1500, 32)
    BU.assert_close_valid(h, ref_h, np.ones(ref_h.shape, bool), "whisper encoder", TOL)
    first = run_model(os.path.join(o, "decoder_model.onnx"), {"input_ids": dec[:, :4], "encoder_hidden_states": h})
    BU.assert_close_valid(first["logits"], ref[:, :4], np.ones(ref[:, :4].shape, bool), "whisper decoder", TOL)
    feeds = {"input_ids": dec[:, 4:5]}
    for k, v in first.items():
        if k.startswith("present."):
            feeds["past_key_values." + k[len("present."):]] = v
    nxt = run_model(os.path.join(o, "decoder_with_past_model.onnx"), feeds)
    BU.assert_close_valid(nxt["logits"], ref[:, 4:5], np.ones(ref[:, 4:5].shape, bool), "whisper with past", TOL)
    assert nxt["present.1.decoder.key"].shape[2] == 5


def hf_generate(m, feats, **kw):
    with torch.no_grad():
        out = m.generate(torch.tensor(feats), **kw)
    seq = out.sequences if hasattr(out, "sequences") else out
    return [[int(t) for t in row] for row in seq.tolist()]


def winml_audio(winml, build, files, cmd="generate", flags=(), timeout=120, **kw):
    argv = [winml, cmd, "-m", build, "-f", "json", *flags]
    for k, v in kw.items():
        argv += ["--" + k.replace("_", "-"), str(v)]
    for f in files:
        argv += ["--audio", f]
    r = U.run(argv, timeout=timeout)
    assert r.returncode == 0, U.describe(r)
    return json.loads(r.stdout)


def strip_pad(row, pad):
    while row and row[-1] == pad:
        row = row[:-1]
    return row


CASES = [("greedy en transcribe", dict(language="en", task="transcribe"), {}),
         ("beam 3 de translate", dict(language="de", task="translate", num_beams=3), {"num_beams": 3}),
         ("greedy, language detected", {}, {}),
         ("beam 2, language detected", dict(num_beams=2), {"num_beams": 2})]


@pytest.mark.parametrize("name,hf_kw,our_kw", CASES, ids=[c[0] for c in CASES])
def test_generate_matches_transformers(built, speech, feats, winml, name, hf_kw, our_kw):
    m, o, sp = built["gen"]
    pad = sp["<|endoftext|>"]
    ours_kw = dict(our_kw)
    for k in ("language", "task"):
        if k in hf_kw:
            ours_kw[k] = hf_kw[k]
    for rows in (list(range(5)), [3]) if "language" in hf_kw else (list(range(5)),):  # a batch, and one alone
        want = hf_generate(m, feats[rows], max_new_tokens=10, **hf_kw)
        got = winml_audio(winml, o, [speech[i] for i in rows], max_new_tokens=10, **ours_kw)["outputs"]
        for i, w in enumerate(want):
            assert strip_pad(got[i]["ids"], pad) == strip_pad(w, pad), (name, rows, i, got[i], w)
    # the prompt: the language token given, or detected among lang_to_id
    lang = got[0]["prompt"][1]
    assert lang in (sp["<|en|>"], sp["<|de|>"], sp["<|fr|>"]), got[0]["prompt"]
    if "language" in hf_kw:
        assert lang == sp[f"<|{hf_kw['language']}|>"]


def test_suppress_tokens_change_the_outcome(built, speech, feats, winml):
    """The processors are exercised: without suppress_tokens transformers' own output differs, and ours follows."""
    m, o, sp = built["gen"]
    g = m.generation_config
    with_ = hf_generate(m, feats, max_new_tokens=12, language="en")
    without = hf_generate(m, feats, max_new_tokens=12, language="en", suppress_tokens=[], begin_suppress_tokens=[])
    assert with_ != without and len(g.suppress_tokens) == 2
    assert not any(t in g.suppress_tokens for row in with_ for t in row)
    assert any(t in g.suppress_tokens for row in without for t in row)
    assert without[0][0] in g.begin_suppress_tokens and with_[0][0] not in g.begin_suppress_tokens
    got = winml_audio(winml, o, speech, max_new_tokens=12, language="en")["outputs"]
    pad = sp["<|endoftext|>"]
    assert [strip_pad(r["ids"], pad) for r in got] == [strip_pad(w, pad) for w in with_]


def test_forced_decoder_ids(built, speech, feats, winml):
    m, o, sp = built["forced"]
    want = hf_generate(m, feats, max_new_tokens=10)
    got = winml_audio(winml, o, speech, max_new_tokens=10)["outputs"]
    pad = sp["<|endoftext|>"]
    assert got[0]["prompt"] == [sp["<|startoftranscript|>"], sp["<|de|>"], sp["<|translate|>"],
                                sp["<|notimestamps|>"]]
    assert [strip_pad(g["ids"], pad) for g in got] == [strip_pad(w, pad) for w in want]


def test_run_audio_transcript(built, speech, feats, winml):
    """`winml run --audio` on a whisper build: the transcript transformers' tokenizer decodes from its generate."""
    import transformers as T
    m, o, sp = built["gen"]
    tok = T.PreTrainedTokenizerFast.from_pretrained(o)
    want = hf_generate(m, feats[:2], language="en")
    res = winml_audio(winml, o, speech[:2], cmd="run", language="en")
    assert res["task"] == "automatic-speech-recognition"
    texts = tok.batch_decode(want, skip_special_tokens=True)
    assert [r["text"] for r in res["results"]] == texts
    assert any(t.strip() for t in texts), texts


@pytest.mark.parametrize("key,value,field", [("num_mel_bins", 0, "num_mel_bins"),
                                             ("d_model", 30, "encoder_attention_heads"),
                                             ("max_source_positions", -1, "max_source_positions")])
def test_hostile_config(winml_asan, tmp_path, key, value, field):
    import transformers as T
    ck = tmp_path / "ck"
    cfg = T.WhisperConfig(vocab_size=64, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                          decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32, num_mel_bins=80,
                          max_source_positions=1500, max_target_positions=32)
    cfg.save_pretrained(ck)
    BU.edit_config(str(ck), **{key: value})
    out = tmp_path / "out"
    r = U.run([winml_asan, "build", "-m", ck, "-o", out, "--random-weights", "-q"], timeout=120)
    assert r.returncode == 2, U.describe(r)
    assert f"'{field}'" in r.stderr and "config.json" in r.stderr, r.stderr
    assert not out.exists()


def test_audio_on_text_build_and_bad_flags(built, winml, speech, tmp_path):
    m, o, sp = built["gen"]
    r = U.run([winml, "run", "-m", o, "--audio", speech[0], "--task", "summarize"])
    assert r.returncode == 2 and "--task" in r.stderr, U.describe(r)
    r = U.run([winml, "generate", "-m", o, "--audio", speech[0], "--language", "xx"])
    assert r.returncode == 2 and "lang_to_id" in r.stderr and "generation_config.json" in r.stderr, U.describe(r)
    r = U.run([winml, "generate", "-m", o, "--audio", speech[0], "--max-new-tokens", "100"])
    assert r.returncode == 2 and "max_target_positions" in r.stderr, U.describe(r)


@pytest.mark.parametrize("key,value,field", [("lang_to_id", {"<|en|>": "x"}, "lang_to_id"),
                                             ("suppress_tokens", list(range(2000)), "suppress_tokens"),
                                             ("begin_suppress_tokens", [-1], "begin_suppress_tokens"),
                                             ("forced_decoder_ids", [[2, 5]], "forced_decoder_ids"),
                                             ("no_timestamps_token_id", "x", "no_timestamps_token_id")])
def test_hostile_generation_config(built, speech, winml_asan, tmp_path, key, value, field):
    m, o, sp = built["gen"]
    d = tmp_path / "b"
    shutil.copytree(o, d)
    p = d / "generation_config.json"
    g = json.load(open(p))
    g[key] = value
    if key == "forced_decoder_ids":
        g.pop("lang_to_id")
    json.dump(g, open(p, "w"))
    r = U.run([winml_asan, "run", "-m", d, "--audio", speech[1]], timeout=120)
    assert r.returncode == 2, U.describe(r)
    assert f"'{field}'" in r.stderr and "generation_config.json" in r.stderr, r.stderr


def test_hostile_preprocessor_config(built, speech, winml_asan, tmp_path):
    m, o, sp = built["gen"]
    d = tmp_path / "b"
    shutil.copytree(o, d)
    p = d / "preprocessor_config.json"
    for k, v, field in (("hop_length", 1, "hop_length"), ("feature_size", 128, "feature_size"),
                        ("sampling_rate", 0, "sampling_rate")):
        c = json.load(open(os.path.join(o, "preprocessor_config.json")))
        c[k] = v
        json.dump(c, open(p, "w"))
        r = U.run([winml_asan, "run", "-m", d, "--audio", speech[1]], timeout=120)
        assert r.returncode == 2, U.describe(r)
        assert f"'{field}'" in r.stderr and "preprocessor_config.json" in r.stderr, r.stderr
