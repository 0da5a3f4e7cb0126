"""Whisper's temperature fallback and thresholds (issue 34) against transformers' WhisperForConditionalGeneration
.generate, on the tiny random Whisper with timestamp tokens of test_whisper_long.py and its espeak-ng audio.

transformers decides per window (short-form audio too, since 4.47's unified loop): a window whose tokens' zlib
compression ratio passes compression_ratio_threshold, or whose average log-probability is under logprob_threshold,
is decoded again at the next temperature; one also under logprob_threshold whose no-speech probability passes
no_speech_threshold is skipped. Our `-f json` lists every try ("tries": window, seek, temperature, figures, decision);
transformers' are recorded by wrapping its _need_fallback. The thresholds are put between the per-window figures
transformers reports, so that each branch fires on some windows and not on others; the fallback temperature is 1e-6
(top-k sampling whose draw is the arg max: torch's generator and ours give the same tokens), so the final sequences
and segments are compared too. Sampling at 1.0 is checked for what can be: the same --seed gives the same tokens,
another seed other tokens, and the decisions stay consistent with the reported figures.

Short-form audio without --timestamps goes through the same loop: when the random model emits timestamp tokens,
transformers seeks to the last pair and decodes again (PR #34135: "no differences between inferring short-form and
long-form audio"), returning both windows' tokens; `winml run --audio` does the same.
"""
import json
import shutil

import numpy as np
import pytest
import torch
from transformers.generation.logits_process import WhisperNoSpeechDetection
from transformers.models.whisper.generation_whisper import _get_attr_from_logit_processors

import oracle_util as U
from test_builder_whisper import speech, strip_pad, winml_audio  # noqa: F401 (speech: a fixture)
from test_whisper_long import long_audio, long_features, short_features, ts_build, tokenizer_of  # noqa: F401

torch.set_num_threads(1)
MAX_NEW = 12
FALLBACK_T = 1e-6


def hf_tries(m, feats, mask=None, **kw):
    """transformers' generate (return_timestamps, return_segments) with every _need_fallback call recorded."""
    rec = []
    orig = m._need_fallback

    def spy(seq, outs, index, procs, gc, vocab, temperature):
        fb, skip = orig(seq, outs, index, procs, gc, vocab, temperature)
        lp = None
        if gc.logprob_threshold is not None:
            lp = float(m._retrieve_avg_logprobs(outs[index]["scores"], seq, temperature))
        ns = _get_attr_from_logit_processors(procs, WhisperNoSpeechDetection, "no_speech_prob")
        rec.append({"temperature": float(temperature or 0.0), "avg_logprob": lp,
                    "compression_ratio": float(m._retrieve_compression_ratio(seq, vocab)),
                    "no_speech_prob": None if ns is None else float(ns[index]), "fallback": fb, "skip": skip})
        return fb, skip

    m._need_fallback = spy
    torch.manual_seed(0)
    try:
        with torch.no_grad():
            out = m.generate(torch.tensor(feats), attention_mask=None if mask is None else torch.tensor(mask),
                             return_timestamps=True, return_segments=True, **kw)
    finally:
        del m._need_fallback
    seqs = [[int(t) for t in row] for row in out["sequences"].tolist()]
    segs = [[(float(s["start"]), float(s["end"]), [int(t) for t in s["tokens"]]) for s in row]
            for row in out["segments"]]
    return seqs, segs, rec


def ours(winml, build, files, cmd="generate", flags=("--timestamps",), **kw):
    return winml_audio(winml, build, files, cmd=cmd, flags=flags, timeout=300, **kw)


def check_tries(got, want, what):
    assert len(got) == len(want), (what, len(got), len(want), got, want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g["temperature"] == pytest.approx(w["temperature"]), (what, i, g, w)
        assert (g["fallback"], g["skip"]) == (w["fallback"], w["skip"]), (what, i, g, w)
        assert g["compression_ratio"] == pytest.approx(w["compression_ratio"], rel=1e-12), (what, i, g, w)
        if w["avg_logprob"] is not None:
            assert g["avg_logprob"] == pytest.approx(w["avg_logprob"], abs=2e-4), (what, i, g, w)
        if w["no_speech_prob"] is not None:
            assert g["no_speech_prob"] == pytest.approx(w["no_speech_prob"], rel=1e-4, abs=1e-12), (what, i, g, w)


def check_out(res, seqs, segs, pad, what):
    for i, o in enumerate(res["outputs"]):
        assert strip_pad(o["ids"], pad) == strip_pad(seqs[i], pad), (what, i, o["ids"], seqs[i])
        assert [c["ids"] for c in o["chunks"]] == [s[2] for s in segs[i]], (what, i)
        assert [t for c in o["chunks"] for t in c["timestamp"]] == \
            pytest.approx([t for a, b, _ in segs[i] for t in (a, b)], abs=1e-9), (what, i)


def between(values, margin):
    """A threshold between two neighbouring distinct values near the middle, at least margin from both."""
    v = sorted(set(values))
    gaps = [(abs(i + 0.5 - len(v) / 2), (v[i] + v[i + 1]) / 2) for i in range(len(v) - 1) if v[i + 1] - v[i] > 2 * margin]
    assert gaps, f"no two values {margin * 2} apart: {v}"
    return min(gaps)[1]


@pytest.fixture(scope="module")
def greedy_figures(ts_build, long_audio):  # noqa: F811
    """transformers' per-window figures of the greedy pass on the 65 s file (language en), every threshold set
    so that none fires."""
    m, o, sp = ts_build
    feats, _ = long_features(long_audio[:1])
    seqs, segs, rec = hf_tries(m, feats, max_new_tokens=MAX_NEW, language="en", temperature=(0.0, FALLBACK_T),
                               compression_ratio_threshold=1e6, logprob_threshold=-1e6, no_speech_threshold=1.0)
    assert len(rec) >= 3 and not any(r["fallback"] or r["skip"] for r in rec), rec
    return feats, seqs, segs, rec


def test_thresholds_off_greedy_unchanged(ts_build, long_audio, greedy_figures, winml):  # noqa: F811
    """Thresholds that never fire: transformers' tokens equal its plain greedy ones, ours equal them, and our
    figures are its figures."""
    m, o, sp = ts_build
    feats, seqs, segs, rec = greedy_figures
    from test_whisper_long import hf_ts
    plain_seqs, plain_segs = hf_ts(m, feats, max_new_tokens=MAX_NEW, language="en")
    assert plain_seqs == seqs
    res = ours(winml, o, long_audio[:1], max_new_tokens=MAX_NEW, language="en", temperature=f"0,{FALLBACK_T}",
               compression_ratio_threshold=1e6, logprob_threshold=-1e6, no_speech_threshold=1.0)
    check_tries(res["tries"], rec, "thresholds off")
    check_out(res, seqs, segs, sp["<|endoftext|>"], "thresholds off")
    plain = ours(winml, o, long_audio[:1], max_new_tokens=MAX_NEW, language="en")
    assert plain["outputs"][0]["ids"] == res["outputs"][0]["ids"]
    assert all(t["temperature"] == 0 and not t["fallback"] for t in plain["tries"])


@pytest.mark.parametrize("which", ["compression_ratio", "avg_logprob"])
def test_fallback_decisions(ts_build, long_audio, greedy_figures, winml, which):  # noqa: F811
    """A threshold between the windows' greedy figures: the windows past it are decoded again at the fallback
    temperature (top-k 50 sampling), the same windows in transformers and here, with the same figures at both
    temperatures, tokens and segments."""
    m, o, sp = ts_build
    feats, _, _, rec = greedy_figures
    thr = between([r[which] for r in rec], 1e-9 if which == "compression_ratio" else 1e-3)
    kw = {"compression_ratio_threshold": thr} if which == "compression_ratio" else {"logprob_threshold": thr}
    seqs, segs, want = hf_tries(m, feats, max_new_tokens=MAX_NEW, language="en", temperature=(0.0, FALLBACK_T), **kw)
    fell = [r for r in want if r["fallback"] and r["temperature"] == 0]
    assert fell and len(fell) < sum(r["temperature"] == 0 for r in want), want  # some windows, not all
    assert any(r["temperature"] > 0 for r in want)
    res = ours(winml, o, long_audio[:1], max_new_tokens=MAX_NEW, language="en", temperature=f"0,{FALLBACK_T}",
               **{k: repr(v) for k, v in kw.items()})
    check_tries(res["tries"], want, which)
    check_out(res, seqs, segs, sp["<|endoftext|>"], which)
    U.note(f"whisper fallback on {which} > / < {thr:.4g}: {len(fell)} of {sum(r['temperature'] == 0 for r in want)} "
           f"windows decoded again at T={FALLBACK_T}, decisions and figures equal transformers'")


def test_no_speech_skip_batched(ts_build, long_audio, winml):  # noqa: F811
    """logprob_threshold above every window's and no_speech_threshold between the windows' no-speech
    probabilities (one temperature: no fallback try): the windows past it are skipped (seek a whole window, no
    segment), in a batch of three files (attention mask) as in transformers."""
    m, o, sp = ts_build
    feats, mask = long_features(long_audio)
    kw = dict(max_new_tokens=MAX_NEW, language="en", temperature=(0.0,), logprob_threshold=1.0)
    _, _, probe = hf_tries(m, feats, mask, no_speech_threshold=1.0, **kw)
    thr = between([r["no_speech_prob"] for r in probe], 1e-8)  # probabilities ~1e-5 (a random model)
    seqs, segs, want = hf_tries(m, feats, mask, no_speech_threshold=thr, **kw)
    skipped = sum(r["skip"] for r in want)
    assert 0 < skipped < len(want), want
    res = ours(winml, o, long_audio, max_new_tokens=MAX_NEW, language="en", temperature="0", logprob_threshold=1.0,
               no_speech_threshold=repr(thr))
    check_tries(res["tries"], want, "no speech")
    check_out(res, seqs, segs, sp["<|endoftext|>"], "no speech")
    U.note(f"whisper no-speech skip (p > {thr:.6g}, logprob < 1): {skipped} of {len(want)} windows skipped over "
           f"65 s + 41 s + 2 s batched, equal transformers'")


def test_sampling_seeded(ts_build, speech, winml):  # noqa: F811
    """Temperature 1.0 after a greedy try that always falls back (logprob_threshold above any average): the
    sampled tokens are the same for the same --seed, differ for another and from greedy; each try's decision
    follows its reported figures."""
    m, o, sp = ts_build
    files = speech[:1]
    run = lambda seed: ours(winml, o, files, max_new_tokens=MAX_NEW, language="en", temperature="0,1",  # noqa: E731
                            logprob_threshold=1.0, seed=seed)
    a, b, c = run(7), run(7), run(8)
    greedy = ours(winml, o, files, max_new_tokens=MAX_NEW, language="en")
    ids = lambda r: [x["ids"] for x in r["outputs"]]  # noqa: E731
    assert ids(a) == ids(b) and a["tries"] == b["tries"]
    assert ids(a) != ids(c) and ids(a) != ids(greedy)
    for t in a["tries"]:
        assert t["fallback"] == (t["avg_logprob"] < 1.0) and not t["skip"], t
    assert {t["temperature"] for t in a["tries"]} == {0.0, 1.0}


def test_sampled_logprob_teacher_forced(ts_build, speech, winml):  # noqa: F811
    """The average log-probability we report for tokens we sampled at temperature 1 (one window, no timestamps)
    equals transformers' on the same tokens fed back (its logits, begin_suppress_tokens at the first position,
    top-k 50 of the scores, log_softmax: what its _retrieve_avg_logprobs sees under sampling)."""
    m, o, sp = ts_build
    feats = short_features(speech[:1])
    eot, gc = sp["<|endoftext|>"], m.generation_config
    for seed in [10, *range(1, 40)]:  # 10: one window on this model and file (found by this loop)
        res = ours(winml, o, speech[:1], flags=(), max_new_tokens=6, language="en", temperature="1",
                   logprob_threshold=-1e6, seed=seed)
        if res["windows"] == 1:
            break
    assert res["windows"] == 1 and len(res["tries"]) == 1, res
    got = res["outputs"][0]
    toks = strip_pad(got["ids"], eot)
    toks = toks + [eot] if len(toks) < 6 else toks  # an end id generated before max_new_tokens counts too
    dec = torch.tensor([got["prompt"] + toks])
    with torch.no_grad():
        logits = m(input_features=torch.tensor(feats), decoder_input_ids=dec).logits[0].float()
    P = len(got["prompt"])
    sc = logits[P - 1: P - 1 + len(toks)].clone()
    sc[0, list(gc.begin_suppress_tokens)] = -float("inf")
    if gc.suppress_tokens:
        sc[:, list(gc.suppress_tokens)] = -float("inf")
    kth = torch.topk(sc, 50, dim=-1).values[:, -1:]
    sc = sc.masked_fill(sc < kth, -float("inf"))
    want = float(torch.log_softmax(sc, -1).gather(-1, torch.tensor(toks)[:, None]).mean())
    assert res["tries"][0]["avg_logprob"] == pytest.approx(want, abs=2e-4), (res["tries"], want, toks)


def test_short_form_two_windows_without_timestamps(ts_build, speech, winml):  # noqa: F811
    """No --timestamps, one short file, generation_config's max_length (24): the random model emits timestamp
    tokens, so transformers decodes a second window from the last pair's timestamp (max_length raised again) and
    returns both windows' tokens; `winml run` returns the same ids and text."""
    m, o, sp = ts_build
    feats = short_features(speech[:1])
    from transformers.generation.utils import GenerationMixin
    calls = []
    gen = GenerationMixin.generate  # what Whisper's loop calls once per window (super().generate)

    def count(self, *a, **k):
        calls.append(1)
        return gen(self, *a, **k)
    with torch.no_grad():
        try:
            GenerationMixin.generate = count
            want = m.generate(torch.tensor(feats), language="en")
        finally:
            GenerationMixin.generate = gen
    want = [int(t) for t in want[0].tolist()]
    assert len(calls) >= 2 and len(want) > 24, (len(calls), len(want))
    res = ours(winml, o, speech[:1], cmd="run", flags=(), language="en")
    got = res["results"][0]
    assert strip_pad(got["ids"], sp["<|endoftext|>"]) == strip_pad(want, sp["<|endoftext|>"])
    assert res["windows"] == len(calls)
    assert got["text"] == tokenizer_of(o).decode(want, skip_special_tokens=True)
    U.note(f"whisper short form without timestamps: {len(calls)} windows, {len(want)} tokens, equal transformers'")


def test_fallback_bad_input(ts_build, speech, winml_asan, tmp_path):  # noqa: F811
    m, o, sp = ts_build
    base = [winml_asan, "run", "-m", o, "--audio", speech[0]]
    for flags, needle in ((["--temperature", "abc"], "--temperature"), (["--temperature", "0,"], "--temperature"),
                          (["--temperature", "0,200"], "--temperature"), (["--seed", "-1"], "--seed"),
                          (["--logprob-threshold", "x"], "--logprob-threshold"),
                          (["--no-speech-threshold", "0.5"], "logprob_threshold")):
        r = U.run(base + flags, timeout=120)
        assert r.returncode == 2 and needle in r.stderr, (flags, U.describe(r))
    r = U.run([winml_asan, "run", "-m", o, "--text", "hi", "--temperature", "0,1"], timeout=120)
    assert r.returncode == 2 and "--temperature" in r.stderr, U.describe(r)
    d = tmp_path / "b"
    shutil.copytree(o, d)
    for key, value in (("condition_on_prev_tokens", "yes"), ("logprob_threshold", "x"), ("top_p", 1.5),
                       ("prev_sot_token_id", -3)):
        g = json.load(open(o + "/generation_config.json"))
        g[key] = value
        json.dump(g, open(d / "generation_config.json", "w"))
        r = U.run([winml_asan, "run", "-m", d, "--audio", speech[0], "--temperature", "0,0.5"], timeout=120)
        assert r.returncode == 2 and f"'{key}'" in r.stderr and "generation_config.json" in r.stderr, \
            (key, U.describe(r))
