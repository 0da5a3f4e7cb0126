"""Whisper timestamps and long-form audio (issue 34): a tiny random WhisperForConditionalGeneration (as
test_builder_whisper.py makes them, its tokenizer with Whisper's 1501 timestamp tokens <|0.00|> .. <|30.00|> after
<|notimestamps|>, max_initial_timestamp_index 50) built with `winml build`, on espeak-ng speech.

Short form (5 utterances under 30 s, one batch): `winml generate --audio ... --timestamps` returns transformers'
generate(return_timestamps=True, return_segments=True) token for token (the prompt without <|notimestamps|>, the
timestamp logits rules), and its chunks are transformers' segments: the same tokens, start / end seconds and the
text the tokenizer decodes from them. Long form: two files of ~65 s and ~41 s made by concatenating the utterances
(3 windows of 30 s for the first) and a 2 s one: our log-mel of the whole batch padded to the longest
(truncation=False, padding="longest") is WhisperFeatureExtractor's, and our sequential windows (seek moved to the
last timestamp pair) give transformers' sequences and segments for the long file alone and for the batch of three
(its attention mask's frames per row), with the language given and detected; `winml run` without --max-new-tokens
(max_length raised by the prompt at every window, as transformers does) gives the pipeline's text without the flag
and its chunks with it. Bad input: --timestamps on a non-Whisper build or without --audio, an empty audio file, a
zero-length WAV, a generation_config.json without no_timestamps_token_id (with --timestamps, or a file over 30 s):
exit 2 naming it.
"""
import json
import os
import shutil

import numpy as np
import pytest
import soundfile as sf
import torch

import oracle_util as U
from test_builder_whisper import make, samples16, speech, strip_pad, winml_audio  # noqa: F401 (speech: a fixture)

torch.set_num_threads(1)
MAX_NEW = 12


@pytest.fixture(scope="module")
def ts_build(request, winml):
    d = U.scratch(request, "whisper_long")
    ck = str(d / "ckpt")
    m, sp = make(ck, 0.5, timestamps=True)
    o = str(d / "build")
    r = U.run([winml, "build", "-m", ck, "-o", o, "-q"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    return m, o, sp


@pytest.fixture(scope="module")
def long_audio(request, speech):  # noqa: F811
    """~65 s and ~41 s of the utterances one after another (0.6 s of silence between), 16 kHz PCM 16 WAV; and
    a ~2 s one."""
    d = U.scratch(request, "whisper_long_audio")
    utt = [samples16(f) for f in speech]
    gap = np.zeros(9600, np.float32)
    out = []
    for name, seconds in (("long65", 65.0), ("long41", 41.0)):
        parts, n, i = [], 0, 0
        while n < seconds * 16000:
            parts += [utt[i % len(utt)], gap]
            n += len(utt[i % len(utt)]) + len(gap)
            i += 1
        y = np.concatenate(parts)[: int(seconds * 16000)]
        p = d / f"{name}.wav"
        sf.write(p, y, 16000, subtype="PCM_16")
        out.append(str(p))
    return out + [speech[0]]


def short_features(files):
    """WhisperFeatureExtractor's numpy features, each file padded to 30 s."""
    import transformers as T
    fe = T.WhisperFeatureExtractor(feature_size=80)
    rows = []
    for f in files:
        x = samples16(f)
        padded = np.zeros(fe.n_samples, np.float32)
        padded[: len(x)] = x[: fe.n_samples]
        rows.append(fe._np_extract_fbank_features(padded[None], "cpu")[0])
    return np.stack(rows).astype(np.float32)


def long_features(files):
    """The batch padded to the longest file (truncation=False, padding="longest"): WhisperFeatureExtractor's numpy
    features and its attention mask over frames (from its __call__, whose features must agree)."""
    import transformers as T
    fe = T.WhisperFeatureExtractor(feature_size=80)
    xs = [samples16(f) for f in files]
    n = max(len(x) for x in xs)
    rows = []
    for x in xs:
        p = np.zeros(n, np.float32)
        p[: len(x)] = x
        rows.append(fe._np_extract_fbank_features(p[None], "cpu")[0])
    feats = np.stack(rows).astype(np.float32)
    call = fe(xs, sampling_rate=16000, truncation=False, padding="longest", return_attention_mask=True,
              return_tensors="np")
    assert call.input_features.shape == feats.shape, (call.input_features.shape, feats.shape)
    assert float(np.abs(call.input_features - feats).max()) <= 1e-4
    return feats, call.attention_mask


def hf_ts(m, feats, mask=None, **kw):
    """transformers' generate with return_timestamps: sequences and [(start, end, tokens)] per row."""
    with torch.no_grad():
        out = m.generate(torch.tensor(feats), attention_mask=None if mask is None else torch.tensor(mask),
                         return_timestamps=True, return_segments=True, **kw)
    seqs = [[int(t) for t in row] for row in out["sequences"].tolist()]
    segs = [[(float(s["start"]), float(s["end"]), [int(t) for t in s["tokens"]]) for s in row]
            for row in out["segments"]]
    return seqs, segs


def ours(winml, build, files, cmd="generate", flags=("--timestamps",), **kw):
    return winml_audio(winml, build, files, cmd=cmd, flags=flags, timeout=300, **kw)


def check(got, seqs, segs, tok, pad, what):
    assert len(got) == len(seqs), what
    for i, o in enumerate(got):
        assert strip_pad(o["ids"], pad) == strip_pad(seqs[i], pad), (what, i, o["ids"], seqs[i])
        assert [c["ids"] for c in o["chunks"]] == [s[2] for s in segs[i]], (what, i)
        for c, s in zip(o["chunks"], segs[i]):
            assert c["timestamp"] == pytest.approx([s[0], s[1]], abs=1e-9), (what, i, c, s[:2])
            assert c["text"] == tok.decode(s[2], skip_special_tokens=True), (what, i, c)


def tokenizer_of(build):
    import transformers as T
    return T.PreTrainedTokenizerFast.from_pretrained(build)


def test_short_form_timestamps(ts_build, speech, winml):  # noqa: F811
    m, o, sp = ts_build
    files = speech[:3]
    feats = short_features(files)
    tok, pad = tokenizer_of(o), sp["<|endoftext|>"]
    seqs, segs = hf_ts(m, feats, max_new_tokens=MAX_NEW, language="en")
    assert all(row[0] > sp["<|notimestamps|>"] for row in seqs), "the first generated token is a timestamp"
    res = ours(winml, o, files, max_new_tokens=MAX_NEW, language="en")
    got = res["outputs"]
    assert all(g["prompt"] == [sp["<|startoftranscript|>"], sp["<|en|>"], sp["<|transcribe|>"]] for g in got)
    check(got, seqs, segs, tok, pad, "short form")
    assert max(len(s) for s in segs) >= 2, "some row has several segments"
    # beam search under the same rules
    seqs, segs = hf_ts(m, feats[:2], max_new_tokens=8, language="en", num_beams=2)
    check(ours(winml, o, files[:2], max_new_tokens=8, language="en", num_beams=2)["outputs"], seqs, segs, tok, pad,
          "short form, 2 beams")
    U.note(f"whisper short-form timestamps: {sum(len(s) for s in segs)} segments over 3 files, "
           f"{res['windows']} windows, greedy and 2 beams equal transformers'")


def test_long_form_features(long_audio, build_dir, tmp_path):
    """Our log-mel of each file zero-padded to the longest (65 s: 6500 frames, no 30 s cut) is
    WhisperFeatureExtractor's with truncation=False / padding="longest"; the attention mask gives each row's frames."""
    feats, mask = long_features(long_audio)
    assert feats.shape[2] == 6500 and list(mask.sum(-1)) == [6500, 4100, -(-len(samples16(long_audio[2])) // 160)]
    tool = os.path.join(build_dir, "wm_audiotool")
    for i, f in enumerate(long_audio):
        out = tmp_path / "mel.f32"
        r = U.run([tool, "logmel", f, out, 80, 6500 * 160])
        assert r.returncode == 0, U.describe(r)
        got = np.frombuffer(open(out, "rb").read()[8:], np.float32).reshape(80, 6500)
        d = float(np.abs(got - feats[i]).max())
        assert d <= 1e-4, (f, d)
    U.note(f"whisper long-form log-mel (65 s + 41 s + 2 s padded to 65 s): within 1e-4 of WhisperFeatureExtractor")


def test_long_form_matches_transformers(ts_build, long_audio, winml):
    m, o, sp = ts_build
    pad, tok = sp["<|endoftext|>"], tokenizer_of(o)
    # the long file alone (batch 1: every frame), language given
    feats, _ = long_features(long_audio[:1])
    seqs, segs = hf_ts(m, feats, max_new_tokens=MAX_NEW, language="en")
    res = ours(winml, o, long_audio[:1], max_new_tokens=MAX_NEW, language="en")
    check(res["outputs"], seqs, segs, tok, pad, "long, batch 1")
    assert res["windows"] >= 3 and segs[0][-1][1] > 30.0, (res["windows"], segs[0][-1])
    # three files of different lengths in one batch (attention mask), the language detected once
    feats, mask = long_features(long_audio)
    seqs, segs = hf_ts(m, feats, mask, max_new_tokens=MAX_NEW)
    res = ours(winml, o, long_audio, max_new_tokens=MAX_NEW)
    check(res["outputs"], seqs, segs, tok, pad, "long, batch 3, language detected")
    U.note(f"whisper long form: 65 s alone and 65 s + 41 s + 2 s batched, {res['windows']} windows, segments "
           f"{[len(s) for s in segs]}, tokens equal transformers'")


def test_run_long_text_and_chunks(ts_build, long_audio, winml):
    """`winml run` on the 65 s file with generation_config's max_length (raised again at every window): the text
    without --timestamps (the tokenizer's decode of transformers' sequence, timestamps skipped), chunks with it, and
    the table's lines."""
    m, o, sp = ts_build
    tok = tokenizer_of(o)
    feats, _ = long_features(long_audio[:1])
    seqs, segs = hf_ts(m, feats, language="en")
    res = ours(winml, o, long_audio[:1], cmd="run", flags=(), language="en")
    assert res["task"] == "automatic-speech-recognition" and "chunks" not in res["results"][0]
    assert res["results"][0]["text"] == tok.decode(seqs[0], skip_special_tokens=True)
    res = ours(winml, o, long_audio[:1], cmd="run", language="en")
    chunks = res["results"][0]["chunks"]
    assert [t for c in chunks for t in c["timestamp"]] == pytest.approx([t for a, b, _ in segs[0] for t in (a, b)],
                                                                        abs=1e-9)
    assert [c["text"] for c in chunks] == [tok.decode(t, skip_special_tokens=True) for _, _, t in segs[0]]
    r = U.run([winml, "run", "-m", o, "--audio", long_audio[0], "--language", "en", "--timestamps"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    lines = r.stdout.rstrip("\n").split("\n")
    assert lines == [f"[{a:.2f} -> {b:.2f}] {tok.decode(t, skip_special_tokens=True)}" for a, b, t in segs[0]], lines


def test_timestamps_bad_input(ts_build, long_audio, winml_asan, tmp_path):
    m, o, sp = ts_build
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    zero = tmp_path / "zero.wav"
    sf.write(zero, np.zeros(0, np.float32), 16000, subtype="PCM_16")
    for f in (empty, zero):
        r = U.run([winml_asan, "run", "-m", o, "--audio", f, "--timestamps"], timeout=120)
        assert r.returncode == 2 and str(f) in r.stderr, U.describe(r)
    r = U.run([winml_asan, "run", "-m", o, "--text", "hello", "--timestamps"], timeout=120)
    assert r.returncode == 2 and "--timestamps" in r.stderr, U.describe(r)
    d = tmp_path / "b"
    shutil.copytree(o, d)
    g = json.load(open(d / "generation_config.json"))
    g.pop("no_timestamps_token_id")
    json.dump(g, open(d / "generation_config.json", "w"))
    for flags in (["--audio", long_audio[2], "--timestamps"], ["--audio", long_audio[1]]):  # asked, or implied
        r = U.run([winml_asan, "run", "-m", d, *flags], timeout=120)
        assert r.returncode == 2 and "'no_timestamps_token_id'" in r.stderr and "generation_config.json" in r.stderr, \
            U.describe(r)


def test_timestamps_on_a_non_whisper_build(winml_asan, tmp_path, long_audio):
    """--timestamps on a build that is not a speech encoder-decoder (a T5-style text one here: no encoder reading
    input_features; and a folder with no build) exits 2 naming it."""
    d = tmp_path / "notwhisper"
    d.mkdir()
    (d / "model.onnx").write_bytes(b"")
    r = U.run([winml_asan, "run", "-m", d, "--audio", long_audio[2], "--timestamps"], timeout=120)
    assert r.returncode == 2 and "--timestamps" in r.stderr and str(d) in r.stderr, U.describe(r)
