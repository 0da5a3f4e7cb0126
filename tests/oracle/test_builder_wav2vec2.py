"""wav2vec2 / HuBERT through the builder's tables (issue 34): tiny random checkpoints saved by transformers
(Wav2Vec2ForCTC and Wav2Vec2ForSequenceClassification, feat_extract_norm "group" (post-norm) and "layer" (stable,
pre-norm), HubertForSequenceClassification) built with `winml build -p fp32` and run in onnxruntime and in our
engine against transformers (logits max abs 1e-4): batch 2 of different lengths with an attention_mask in the
"layer" variant (the padded frames of the CTC logits excluded, as transformers computes them from padding too);
the positional convolution's weight norm read from either spelling (parametrizations original0/1 and the older
weight_g / weight_v); `winml run --audio` giving transformers' processor.batch_decode(argmax) transcript on a WAV
written by soundfile; bad feature-encoder lists and unmodeled features refused by name (exit 2, ASan build)."""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest
import soundfile as sf
import torch
import transformers as T
from safetensors.torch import load_file, save_file

import builder_util as BU
import oracle_util as U

BASE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, conv_dim=(32, 32, 32),
            conv_kernel=(10, 3, 3), conv_stride=(5, 2, 2), num_conv_pos_embedding_groups=4, vocab_size=12,
            classifier_proj_size=16, num_labels=3)
# name: (config class, model class, extra config); "layer" variants take an attention_mask
CASES = {
    "ctc_group": ("Wav2Vec2Config", "Wav2Vec2ForCTC", dict(feat_extract_norm="group", num_conv_pos_embeddings=16)),
    "ctc_layer": ("Wav2Vec2Config", "Wav2Vec2ForCTC", dict(feat_extract_norm="layer", do_stable_layer_norm=True,
                                                          conv_bias=True, num_conv_pos_embeddings=15)),
    "cls_group": ("Wav2Vec2Config", "Wav2Vec2ForSequenceClassification",
                  dict(feat_extract_norm="group", num_conv_pos_embeddings=16)),
    "cls_layer": ("Wav2Vec2Config", "Wav2Vec2ForSequenceClassification",
                  dict(feat_extract_norm="layer", do_stable_layer_norm=True, conv_bias=True,
                       num_conv_pos_embeddings=15)),
    "hubert_cls": ("HubertConfig", "HubertForSequenceClassification",
                   dict(feat_extract_norm="group", num_conv_pos_embeddings=16)),
    "hubert_ctc_noprojnorm": ("HubertConfig", "HubertForCTC", dict(feat_extract_norm="group", feat_proj_layer_norm=False,
                                                                 num_conv_pos_embeddings=16)),
}


def make(path, name, seed=0):
    cfg_name, cls_name, extra = CASES[name]
    torch.manual_seed(seed)
    m = getattr(T, cls_name)(getattr(T, cfg_name)(**BASE, **extra)).eval()
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "original0" in n or "weight_g" in n:  # weight-norm magnitudes
                p.copy_(torch.rand(p.shape) + 0.5)
            else:
                p.copy_(0.25 * torch.randn(p.shape) + (1.0 if "norm" in n and n.endswith("weight") else 0.0))
    m.save_pretrained(path)
    return m


def build(winml, ck, out):
    r = U.run([winml, "build", "-m", str(ck), "-o", str(out), "-q", "-p", "fp32"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    return str(out / "model.onnx")


@pytest.mark.parametrize("name", sorted(CASES))
def test_wav2vec2_matches_transformers(name, winml, tmp_path):
    m = make(tmp_path / "ck", name)
    model = build(winml, tmp_path / "ck", tmp_path / "out")
    masked = CASES[name][2]["feat_extract_norm"] == "layer"
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4000)).astype(np.float32)
    feeds, tk = {"input_values": x}, {}
    n_valid = 4000
    if masked:  # row 1 is 2503 samples (conv lengths by floor division), zero-padded as the feature extractor pads
        n_valid = 2503
        x[1, n_valid:] = 0
        mask = np.ones((2, 4000), np.int64)
        mask[1, n_valid:] = 0
        feeds["attention_mask"] = mask
        tk["attention_mask"] = torch.tensor(mask)
    with torch.no_grad():
        want = m(input_values=torch.tensor(x), **tk).logits.numpy()
    valid = np.ones(want.shape, bool)
    if want.ndim == 3:  # CTC: frames past row 1's length are padding
        frames = int(m._get_feat_extract_output_lengths(torch.tensor(n_valid)))
        valid[1, frames:] = False
    for runner, run in BU.RUNNERS.items():
        got = run(model, feeds)["logits"]
        BU.assert_close_valid(got, want, valid, f"{name} {runner}")
        U.note(f"wav2vec2 {name} ({runner}): logits {list(got.shape)} max |ours - transformers| = "
               f"{float(np.abs(got - want)[valid].max()):.2e}")


def test_weight_g_weight_v_spelling(winml, tmp_path):
    """The older weight-norm names (nn.utils.weight_norm: weight_g / weight_v) fold to the same weight."""
    m = make(tmp_path / "ck", "ctc_group")
    f = tmp_path / "ck" / "model.safetensors"
    t = load_file(str(f))
    t = {k.replace("parametrizations.weight.original0", "weight_g").replace("parametrizations.weight.original1",
                                                                           "weight_v"): v for k, v in t.items()}
    assert any(k.endswith("weight_g") for k in t)
    save_file(t, str(f), metadata={"format": "pt"})
    model = build(winml, tmp_path / "ck", tmp_path / "out")
    x = np.random.default_rng(2).standard_normal((1, 3000)).astype(np.float32)
    with torch.no_grad():
        want = m(input_values=torch.tensor(x)).logits.numpy()
    got = BU.run_ort(model, {"input_values": x})["logits"]
    assert float(np.abs(got - want).max()) < 1e-4


def speech_wav(path):
    """espeak-ng's speech when it is installed (22050 Hz, resampled to 16 kHz on the way in), else a seeded
    speech-like signal at 24 kHz; returns what was used."""
    if shutil.which("espeak-ng"):
        r = subprocess.run(["espeak-ng", "-w", str(path), "the quick brown fox jumps over the lazy dog"],
                           capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return "espeak-ng"
    rate = 24000
    t = np.arange(int(rate * 1.5)) / rate
    f0 = 140 + 40 * np.sin(2 * np.pi * 0.7 * t)
    x = sum(0.2 / k * np.sin(2 * np.pi * k * np.cumsum(f0) / rate) for k in range(1, 8))
    x *= 0.5 + 0.5 * np.sin(2 * np.pi * 2.3 * t) ** 2
    x += 0.01 * np.random.default_rng(3).standard_normal(t.shape)
    sf.write(path, x.astype(np.float32), rate, subtype="PCM_16")
    return "speech-like signal"


def load16(wav, proc):
    """The input_values transformers' processor gives for a file (resampled by libsoxr HQ, as the C front end)."""
    import soxr
    y, sr = sf.read(wav, dtype="float32")
    y = soxr.resample(y, sr, 16000) if sr != 16000 else y
    return proc(y, sampling_rate=16000, return_tensors="pt").input_values, sr


@pytest.fixture(scope="module")
def ctc(winml, tmp_path_factory):
    """A CTC build with its processor (vocab.json, tokenizer_config.json, processor_config.json) and a speech file;
    returns (model, processor, build folder, wav, what the speech is)."""
    d = tmp_path_factory.mktemp("ctc")
    ck = d / "ck"
    m = make(ck, "ctc_group")
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "|": 4}
    vocab.update({ch: 5 + i for i, ch in enumerate("ETAOINS")})
    (d / "vocab.json").write_text(json.dumps(vocab))
    proc = T.Wav2Vec2Processor(feature_extractor=T.Wav2Vec2FeatureExtractor(sampling_rate=16000, do_normalize=True),
                               tokenizer=T.Wav2Vec2CTCTokenizer(str(d / "vocab.json")))
    wav = d / "speech.wav"
    source = speech_wav(wav)
    iv, _ = load16(wav, proc)
    with torch.no_grad():  # random states vary little between frames: a head on their deviations from the mean,
        h = m.wav2vec2(iv).last_hidden_state[0]  # so that the argmax moves between letters, "|" and the blank
        w = torch.randn(m.lm_head.weight.shape, generator=torch.Generator().manual_seed(5)) / h.std(0)
        m.lm_head.weight.copy_(w)
        m.lm_head.bias.copy_(-w @ h.mean(0))
    m.save_pretrained(ck)
    proc.save_pretrained(ck)
    build(winml, ck, d / "out")
    return m, proc, d / "out", wav, source


def test_run_audio_ctc_transcript_equals_batch_decode(winml, ctc):
    m, proc, out, wav, source = ctc
    iv, sr = load16(wav, proc)
    with torch.no_grad():
        want = proc.batch_decode(m(iv).logits.argmax(-1))[0]
    r = U.run([winml, "run", "-m", str(out), "--audio", str(wav), "-f", "json"], timeout=120)
    assert r.returncode == 0, U.describe(r)
    doc = json.loads(r.stdout)
    assert doc["task"] == "automatic-speech-recognition"
    got = doc["results"][0]["text"]
    assert " " in want and len(set(want) - {" "}) > 2, want  # the decoding's cases are exercised
    assert got == want, (got, want)
    U.note(f"run --audio ({source}, {sr} Hz): CTC transcript of {len(got)} chars equals batch_decode")


def test_eval_asr_wer_cer_match_jiwer(winml, ctc, tmp_path):
    """eval --mode task: WER and CER over (audio, transcript) rows equal jiwer's on transformers' transcripts."""
    import jiwer
    m, proc, out, wav, _ = ctc
    rows, hyps = [], []
    for i, text in enumerate(["one two three", "a quick test of the speech model", "hello"]):
        p = tmp_path / f"s{i}.wav"
        if shutil.which("espeak-ng"):
            subprocess.run(["espeak-ng", "-w", str(p), text], check=True, capture_output=True, timeout=60)
        else:
            shutil.copy(wav, p)
        iv, _ = load16(p, proc)
        with torch.no_grad():
            hyp = proc.batch_decode(m(iv).logits.argmax(-1))[0]
        hyps.append(hyp)
        words = hyp.split(" ")
        # references near the hypotheses: a word dropped, one changed (a non-ASCII letter), spacing varied
        ref = " ".join(words[1:] if len(words) > 2 else words) + (" É" if i == 1 else "")
        rows.append((p.name, "  " + ref.replace(" ", "  ", 1) if i == 2 else ref))
    with open(tmp_path / "set.csv", "w") as f:
        f.write("audio,transcript\n" + "".join(f'{a},"{t}"\n' for a, t in rows))
    r = U.run([winml, "eval", "--mode", "task", "-m", str(out), "--dataset", str(tmp_path / "set.csv"), "-f", "json"],
              timeout=300)
    assert r.returncode == 0, U.describe(r)
    got = json.loads(r.stdout)["metrics"]
    refs = [t for _, t in rows]
    want_w, want_c = jiwer.wer(refs, hyps), jiwer.cer(refs, hyps)
    assert 0 < want_w < 1 and 0 < want_c < 1, (want_w, want_c)
    assert got["samples"] == 3
    assert abs(got["wer"] - want_w) < 1e-12 and abs(got["cer"] - want_c) < 1e-12, (got, want_w, want_c)
    from importlib.metadata import version
    U.note(f"eval ASR: WER {got['wer']:.4f} CER {got['cer']:.4f} equal jiwer {version('jiwer')}'s")


def test_run_audio_classification_labels(winml, tmp_path):
    ck = tmp_path / "ck"
    m = make(ck, "cls_group")
    cfg = json.loads((ck / "config.json").read_text())
    cfg["id2label"] = {"0": "yes", "1": "no", "2": "maybe"}
    cfg["label2id"] = {"yes": 0, "no": 1, "maybe": 2}
    (ck / "config.json").write_text(json.dumps(cfg))
    T.Wav2Vec2FeatureExtractor(sampling_rate=16000, do_normalize=True).save_pretrained(ck)
    build(winml, ck, tmp_path / "out")
    x = (0.3 * np.sin(np.arange(16000) / 7.0)).astype(np.float32)
    sf.write(tmp_path / "a.wav", x, 16000, subtype="FLOAT")
    r = U.run([winml, "run", "-m", str(tmp_path / "out"), "--audio", str(tmp_path / "a.wav"), "--top-k", "2",
               "-f", "json"], timeout=120)
    assert r.returncode == 0, U.describe(r)
    res = json.loads(r.stdout)["results"][0]["labels"]
    xn = (x - x.mean()) / np.sqrt(x.var() + 1e-7)
    with torch.no_grad():
        p = torch.softmax(m(input_values=torch.tensor(xn[None])).logits[0], -1).numpy()
    names = ["yes", "no", "maybe"]
    order = np.argsort(-p)[:2]
    assert [e["label"] for e in res] == [names[i] for i in order]
    assert np.allclose([e["score"] for e in res], p[order], atol=1e-4)
    # eval --mode task: accuracy over (audio, label) rows against transformers' predictions (labels by name or id)
    preds, rows = [], []
    for i in range(6):
        y = (0.3 * np.sin(np.arange(16000) / (3.0 + i)) + 0.1 * np.random.default_rng(i).standard_normal(16000))
        sf.write(tmp_path / f"c{i}.wav", y.astype(np.float32), 16000, subtype="FLOAT")
        yn = (y - y.mean()) / np.sqrt(y.var() + 1e-7)
        with torch.no_grad():
            preds.append(int(m(input_values=torch.tensor(yn[None], dtype=torch.float32)).logits[0].argmax()))
        rows.append((f"c{i}.wav", names[i % 3] if i % 2 else str(i % 3)))
    (tmp_path / "set.jsonl").write_text("".join(json.dumps({"path": a, "label": l}) + "\n" for a, l in rows))
    r = U.run([winml, "eval", "--mode", "task", "-m", str(tmp_path / "out"), "--dataset", str(tmp_path / "set.jsonl"),
               "-f", "json"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    gold = [names.index(l) if l in names else int(l) for _, l in rows]
    want = float(np.mean(np.array(preds) == np.array(gold)))
    assert abs(json.loads(r.stdout)["metrics"]["accuracy"] - want) < 1e-12


HOSTILE = [
    ({"conv_kernel": [10, 3]}, "conv_kernel"),          # lengths differ
    ({"conv_stride": [5, 0, 2]}, "conv_stride"),        # zero stride
    ({"conv_kernel": [10, -3, 3]}, "conv_kernel"),      # negative kernel
    ({"conv_dim": []}, "conv_dim"),
    ({"conv_dim": "32"}, "conv_dim"),
    ({"feat_extract_norm": "batch"}, "feat_extract_norm"),
    ({"num_conv_pos_embedding_groups": 5}, "num_conv_pos_embedding_groups"),  # does not divide hidden_size
    ({"use_weighted_layer_sum": True}, "use_weighted_layer_sum"),
    ({"add_adapter": True}, "add_adapter"),
    ({"model_type": "wavlm"}, "gated relative position bias"),
]


@pytest.mark.parametrize("change,field", HOSTILE, ids=[h[1] + str(i) for i, h in enumerate(HOSTILE)])
def test_bad_config_refused_by_name(change, field, asan_dir, tmp_path):
    winml = U.binary(asan_dir, "winml")
    cfg = T.Wav2Vec2Config(**BASE).to_dict()
    cfg["architectures"] = ["Wav2Vec2ForCTC"]
    cfg.update(change)
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    r = U.run([winml, "build", "-m", str(ck), "--random-weights", "-o", str(out), "-q"], timeout=120)
    U.assert_clean_error(r, "winml build", field)
    assert not out.exists()


def test_run_audio_hostile(winml, asan_dir, tmp_path):
    """Under ASan: a file that is no audio, and a CTC folder without vocab.json, exit 2 naming the file."""
    asan = U.binary(asan_dir, "winml")
    ck = tmp_path / "ck"
    make(ck, "ctc_group")
    build(winml, ck, tmp_path / "out")
    x = np.zeros(8000, np.float32)
    sf.write(tmp_path / "a.wav", x, 16000)
    r = U.run([asan, "run", "-m", str(tmp_path / "out"), "--audio", str(tmp_path / "a.wav")], timeout=120)
    U.assert_clean_error(r, "winml run", "vocab.json")
    (tmp_path / "out" / "vocab.json").write_text(json.dumps({"<pad>": 0, "|": 1, "a": 2, "b": {"nested": 3}}))
    r = U.run([asan, "run", "-m", str(tmp_path / "out"), "--audio", str(tmp_path / "a.wav")], timeout=120)
    U.assert_clean_error(r, "winml run", "vocab.json", "per language")
    (tmp_path / "out" / "vocab.json").write_text(json.dumps({f"t{i}": i for i in range(12)}))
    bad = tmp_path / "noise.wav"
    bad.write_bytes(b"RIFF\x10\x00\x00\x00WAVEjunkjunkjunk")
    r = U.run([asan, "run", "-m", str(tmp_path / "out"), "--audio", str(bad)], timeout=120)
    U.assert_clean_error(r, "winml run", str(bad))
    sf.write(tmp_path / "short.wav", np.full(30, 0.1, np.float32), 16000)  # under the 40-sample receptive field
    r = U.run([asan, "run", "-m", str(tmp_path / "out"), "--audio", str(tmp_path / "short.wav")], timeout=120)
    U.assert_clean_error(r, "winml run", str(tmp_path / "short.wav"), "at least 40")
    r = U.run([asan, "run", "-m", str(tmp_path / "out"), "--audio", str(tmp_path / "a.wav"), "-f", "json"])
    assert r.returncode == 0 and not U.crashed(r), U.describe(r)
    r = U.run([asan, "run", "-m", str(tmp_path / "out"), "--audio", str(tmp_path / "a.wav"), "--text", "x"])
    U.assert_clean_error(r, "winml run", "--audio")
