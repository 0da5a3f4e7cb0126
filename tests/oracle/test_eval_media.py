"""`winml eval --mode task` on generative media builds and media held in tables (issues 32 + 34).

Whisper ASR: a tiny random WhisperForConditionalGeneration (test_builder_whisper.make, built with `winml build`) over
espeak-ng utterances. The texts our eval generates (its "predictions") equal transformers' generate (language en,
the folder's generation_config) decoded by the folder's tokenizer with skip_special_tokens, and its WER / CER equal
jiwer's on those texts against references near them. The same rows as a Parquet table written by pyarrow whose
audio column is the `datasets` Audio feature (a struct {bytes, path}, the path naming no file) give the same texts
and metrics, read from the table file, and as a hub data set from a local cache (--dataset ORG/NAME --split test). Recordings of 65 s and 41 s held in a
Parquet table (test_whisper_long's model with timestamp tokens) are transcribed window by window as transformers'
generate(return_timestamps=True) on each file alone, the timestamps left out of the text.
wav2vec2 CTC: the same Parquet audio.bytes table gives what the audio files give.

TrOCR image-to-text: a tiny random VisionEncoderDecoderModel (test_builder_trocr.make) over the scikit-image photos
and a drawn text line: predictions equal transformers' generate decoded by `tokenizers`, CER / WER equal jiwer's,
and a Parquet table (and an Arrow IPC stream) of image.bytes gives the same.

Hostile cells (bytes that are no audio / no image) exit 2 under ASan naming the table, the row and the column.
"""
import io
import json
import os
import shutil
import subprocess

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf

import oracle_util as U
import test_builder_trocr as TR
import test_builder_whisper as W
from test_builder_wav2vec2 import ctc  # noqa: F401  (the CTC build fixture)
from test_datasets import fake_hub, write_arrow
from test_images import photos  # noqa: F401  (the scikit-image photographs fixture)
from test_whisper_long import hf_ts, long_audio, long_features, speech, ts_build  # noqa: F401  (fixtures)

SAYINGS = ["the quick brown fox", "hello world", "this is a test of speech"]


def evaluate(winml, build, dataset, *args, ok=True):
    r = U.run([winml, "eval", "--mode", "task", "-m", build, "--dataset", dataset, "-f", "json", *args],
              timeout=300)
    if not ok:
        return r
    assert r.returncode == 0, U.describe(r)
    return json.loads(r.stdout)


def near(texts):
    """References close to the hypotheses (a word dropped, a letter changed, spacing varied), so that WER and CER
    fall strictly between 0 and 1 and exercise insertions, deletions and substitutions."""
    refs = []
    for i, t in enumerate(texts):
        w = t.split()
        if i % 3 == 0 and len(w) > 1:
            w = w[1:]
        elif i % 3 == 1 and w:
            w[0] = ("É" + w[0][1:]) if w[0] else "É"
        else:
            w = w + ["extra"]
        refs.append("  ".join(w) if i % 2 else " ".join(w))
    return refs


def check_metrics(doc, hyps, refs, bounded=True):
    import jiwer
    got = doc["metrics"]
    want_w, want_c = jiwer.wer(refs, hyps), jiwer.cer(refs, hyps)
    assert not bounded or (0 < want_w and 0 < want_c < 1), (want_w, want_c, hyps, refs)
    assert got["samples"] == len(refs)
    assert abs(got["wer"] - want_w) < 1e-12 and abs(got["cer"] - want_c) < 1e-12, (got, want_w, want_c)
    return got


def audio_table(files, refs, path_names=True):
    """pyarrow's table of the datasets Audio feature: audio {bytes, path}, and the transcript."""
    audio = [{"bytes": open(f, "rb").read(), "path": os.path.basename(f) if path_names else None} for f in files]
    return pa.table({"audio": pa.array(audio, pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
                     "text": refs})


@pytest.fixture(scope="module")
def whisper(request, winml):
    """A tiny random Whisper build and 3 espeak-ng utterances (espeak's 22050 Hz WAV, one as 8 kHz FLAC)."""
    import soxr
    if not shutil.which("espeak-ng"):
        pytest.fail("espeak-ng is needed (Debian package espeak-ng)", pytrace=False)
    d = U.scratch(request, "eval_media_whisper")
    files = []
    for i, text in enumerate(SAYINGS):
        raw = d / f"s{i}.wav"
        r = subprocess.run(["espeak-ng", "-s", str(150 + 10 * i), "-w", str(raw), text], capture_output=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        if i == 2:
            y, sr = sf.read(raw, dtype="float32")
            raw = d / f"s{i}.flac"
            sf.write(raw, soxr.resample(y, sr, 8000, quality="HQ"), 8000, subtype="PCM_16")
        files.append(str(raw))
    m, sp = W.make(str(d / "ck"), 0.5)
    o = str(d / "build")
    r = U.run([winml, "build", "-m", str(d / "ck"), "-o", o, "-q"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    return m, o, files, d


def test_whisper_asr_wer_cer(whisper, winml, tmp_path, monkeypatch):
    import transformers as T
    m, o, files, d = whisper
    tok = T.PreTrainedTokenizerFast.from_pretrained(o)
    want = tok.batch_decode(W.hf_generate(m, W.features(files), language="en"), skip_special_tokens=True)
    assert sum(len(t.split()) for t in want) >= 3, want  # the texts are words, not all empty
    refs = near(want)
    (d / "set.csv").write_text("audio,transcript\n" + "".join(
        f'{os.path.basename(f)},"{t}"\n' for f, t in zip(files, refs)))
    doc = evaluate(winml, o, str(d / "set.csv"), "--language", "en")
    assert doc["task"] == "automatic-speech-recognition"
    assert doc["predictions"] == want, (doc["predictions"], want)
    got = check_metrics(doc, want, refs)
    # the datasets Audio feature in Parquet: bytes decoded in memory (the paths name no file beside the table)
    pq.write_table(audio_table(files, refs), tmp_path / "audio.parquet")
    doc2 = evaluate(winml, o, str(tmp_path / "audio.parquet"), "--language", "en")
    assert doc2["predictions"] == want and doc2["metrics"] == got, (doc2, got)
    # a hub data set in the local cache, resolved by name
    b = io.BytesIO()
    pq.write_table(audio_table(files, refs, path_names=False), b)
    home = tmp_path / "hf"
    fake_hub(home, "org/speech", {"data/test-00000-of-00001.parquet": b.getvalue()})
    monkeypatch.setenv("HF_HOME", str(home))
    doc3 = evaluate(winml, o, "org/speech", "--split", "test", "--language", "en", "--samples", "2")
    assert doc3["predictions"] == want[:2] and doc3["metrics"]["samples"] == 2, doc3
    assert doc3["dataset_files"][0].endswith("data/test-00000-of-00001.parquet")
    check_metrics(doc3, want[:2], refs[:2])
    U.note(f"eval whisper ASR: WER {got['wer']:.4f} CER {got['cer']:.4f} on transformers' texts, files = parquet "
           "bytes = hub cache")


def test_whisper_language_detected(whisper, winml):
    """Without --language the prompt's language is the folder's (detected), as transformers' generate does."""
    import transformers as T
    m, o, files, d = whisper
    tok = T.PreTrainedTokenizerFast.from_pretrained(o)
    want = tok.batch_decode(W.hf_generate(m, W.features(files[:2])), skip_special_tokens=True)
    (d / "two.jsonl").write_text("".join(json.dumps({"path": os.path.basename(f), "text": t}) + "\n"
                                         for f, t in zip(files[:2], SAYINGS)))
    doc = evaluate(winml, o, str(d / "two.jsonl"))
    assert doc["predictions"] == want, (doc["predictions"], want)


def test_whisper_long_audio_from_table(ts_build, long_audio, winml, tmp_path):  # noqa: F811
    """Recordings of 65 s and 41 s held in a Parquet table (their bytes): each transcribed window by window with
    timestamps implied (their tokens left out of the text), as transformers' generate with return_timestamps on
    that file alone decodes it."""
    import transformers as T
    m, o, sp = ts_build
    tok = T.PreTrainedTokenizerFast.from_pretrained(o)
    want = [tok.decode(hf_ts(m, long_features([f])[0], language="en")[0][0], skip_special_tokens=True)
            for f in long_audio[:2]]
    refs = near(want)
    pq.write_table(audio_table(long_audio[:2], refs), tmp_path / "long.parquet")
    doc = evaluate(winml, o, str(tmp_path / "long.parquet"), "--language", "en")
    assert doc["predictions"] == want, (doc["predictions"], want)
    check_metrics(doc, want, refs, bounded=False)


def test_wav2vec2_parquet_bytes_equal_files(ctc, winml, tmp_path):  # noqa: F811
    _, _, out, wav, _ = ctc
    files = [str(wav)]
    for i, text in enumerate(SAYINGS[1:]):
        p = tmp_path / f"w{i}.wav"
        if shutil.which("espeak-ng"):
            subprocess.run(["espeak-ng", "-w", str(p), text], check=True, capture_output=True, timeout=60)
        else:
            shutil.copy(wav, p)
        files.append(str(p))
    refs = ["the fox", "hello world", "a test"]
    (tmp_path / "set.csv").write_text("audio,text\n" + "".join(f"{f},{t}\n" for f, t in zip(files, refs)))
    a = evaluate(winml, str(out), str(tmp_path / "set.csv"))
    sub = tmp_path / "sub"
    sub.mkdir()
    pq.write_table(audio_table(files, refs), sub / "set.parquet")
    b = evaluate(winml, str(out), str(sub / "set.parquet"))
    assert a["predictions"] == b["predictions"] and a["metrics"] == b["metrics"], (a, b)
    check_metrics(b, b["predictions"], refs, bounded=False)  # CTC letters of a random head: far from the refs


@pytest.fixture(scope="module")
def trocr(request, winml, photos):  # noqa: F811
    from PIL import Image, ImageDraw
    d = U.scratch(request, "eval_media_trocr")
    line = Image.new("RGB", (200, 40), "white")
    ImageDraw.Draw(line).text((6, 12), "TOTAL 12.50 CASH", fill=(10, 10, 10))
    line.save(d / "line.png")
    images = [photos["astronaut.png"], photos["rocket.jpg"], str(d / "line.png"), photos["coffee.png"]]
    m, tok = TR.make("vit", str(d / "ck"), images=images)
    o = str(d / "build")
    r = U.run([winml, "build", "-m", str(d / "ck"), "-o", o, "-q"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    return m, tok, o, images, d


def test_trocr_image_to_text_cer(trocr, winml, tmp_path):
    m, tok, o, images, d = trocr
    want = [tok.decode(w[1:], skip_special_tokens=True) for w in TR.hf_generate(m, images)]
    assert sum(len(t.split()) for t in want) >= 3, want
    refs = near(want)
    for i, p in enumerate(images):
        shutil.copy(p, tmp_path / f"i{i}{os.path.splitext(p)[1]}")
    names = [f"i{i}{os.path.splitext(p)[1]}" for i, p in enumerate(images)]
    (tmp_path / "set.jsonl").write_text("".join(json.dumps({"image": n, "text": t}) + "\n"
                                                for n, t in zip(names, refs)))
    doc = evaluate(winml, o, str(tmp_path / "set.jsonl"))
    assert doc["task"] == "image-to-text"
    assert doc["predictions"] == want, (doc["predictions"], want)
    got = check_metrics(doc, want, refs)
    # the datasets Image feature: image {bytes, path} in Parquet, decoded in memory
    img = [{"bytes": open(p, "rb").read(), "path": None} for p in images]
    sub = tmp_path / "sub"
    sub.mkdir()
    pq.write_table(pa.table({"image": img, "text": refs}), sub / "ocr.parquet")
    doc2 = evaluate(winml, o, str(sub / "ocr.parquet"))
    assert doc2["predictions"] == want and doc2["metrics"] == got, (doc2, got)
    # and as an Arrow IPC stream (the `datasets` library's cache format)
    write_arrow(sub / "ocr.arrow", pa.table({"image": img, "text": refs}))
    doc3 = evaluate(winml, o, str(sub / "ocr.arrow"))
    assert doc3["predictions"] == want and doc3["metrics"] == got, (doc3, got)
    U.note(f"eval trocr image-to-text: CER {got['cer']:.4f} WER {got['wer']:.4f} equal jiwer's; parquet = files")


def test_hostile_cells(whisper, trocr, ctc, winml_asan, tmp_path):  # noqa: F811
    """Under ASan: a cell of bytes that are no audio (no image) exits 2 naming the table, row and column, on a
    Whisper, a wav2vec2 CTC and a TrOCR build."""
    _, o, files, _ = whisper
    t = audio_table(files[:2], ["a", "b"]).to_pylist()
    t[1]["audio"]["bytes"] = b"RIFF\x10\x00\x00\x00WAVEjunkjunkjunk"
    p = tmp_path / "bad_audio.parquet"
    pq.write_table(pa.Table.from_pylist(t), p)
    r = evaluate(winml_asan, o, str(p), "--language", "en", ok=False)
    U.assert_clean_error(r, "winml eval", str(p), "row 2", "audio.bytes")
    r = evaluate(winml_asan, str(ctc[2]), str(p), ok=False)
    U.assert_clean_error(r, "winml eval", str(p), "row 2", "audio.bytes")
    _, _, to, images, _ = trocr
    p = tmp_path / "bad_image.parquet"
    img = [{"bytes": open(images[0], "rb").read(), "path": None}, {"bytes": b"\x89PNG\r\n\x1a\nnot really", "path": None}]
    pq.write_table(pa.table({"image": img, "text": ["a", "b"]}), p)
    r = evaluate(winml_asan, to, str(p), ok=False)
    U.assert_clean_error(r, "winml eval", str(p), "row 2", "image.bytes")
    # a missing transcript cell, and --language on an image build
    pq.write_table(pa.table({"image": img[:1], "text": [None]}), p)
    U.assert_clean_error(evaluate(winml_asan, to, str(p), ok=False), "winml eval", str(p), "text cell is missing")
    U.assert_clean_error(evaluate(winml_asan, to, str(p), "--language", "en", ok=False), "winml eval", "--language")
