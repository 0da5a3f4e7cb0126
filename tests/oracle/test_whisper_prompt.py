"""Whisper's previous-text prompt (issue 34) against transformers' WhisperForConditionalGeneration.generate, on the
tiny random Whisper with timestamp tokens of test_whisper_long.py (max_target_positions 64: at most 31 previous
tokens) and its ~65 s / ~41 s / 2 s espeak-ng audio.

condition_on_prev_tokens: every window after the first starts with <|startofprev|> (generation_config's
prev_sot_token_id) and the last max_target_positions // 2 - 1 tokens of the row's segments so far (a segment that
ends on two timestamps without its last), while the row's kept try was decoded under temperature 0.5. prompt_ids
(`--prompt TEXT`: <|startofprev|> + " TEXT" tokenized, as WhisperTokenizer.get_prompt_ids): before the first
window's text (prompt_condition_type first-segment) or before every window (no conditioning, or all-segments).
Tokens and segments equal transformers' generate(return_timestamps=True, return_segments=True); the tries' figures
(avg_logprob, no-speech probability at the <|startoftranscript|> position after the previous text) equal the ones
its _need_fallback sees.
"""
import json
import shutil

import pytest
import torch

import oracle_util as U
from test_builder_whisper import speech  # noqa: F401 (a fixture)
from test_whisper_fallback import check_out, check_tries, hf_tries
from test_whisper_long import long_audio, long_features, ours, tokenizer_of, ts_build  # noqa: F401

torch.set_num_threads(1)
MAX_NEW = 12
PROMPT = "hello world, the quick brown fox"
COND = ("--timestamps", "--condition-on-prev-tokens")


@pytest.fixture(scope="module")
def cond(ts_build, tmp_path_factory):  # noqa: F811
    """The build with generation_config's prev_sot_token_id (<|startofprev|>), and transformers' model set alike
    (restored afterwards: the model is shared with other modules)."""
    m, o, sp = ts_build
    d = tmp_path_factory.mktemp("whisper_prompt") / "build"
    shutil.copytree(o, d)
    g = json.load(open(d / "generation_config.json"))
    g["prev_sot_token_id"] = sp["<|startofprev|>"]
    json.dump(g, open(d / "generation_config.json", "w"))
    m.generation_config.prev_sot_token_id = sp["<|startofprev|>"]
    yield m, str(d), sp
    del m.generation_config.prev_sot_token_id
    shutil.rmtree(d.parent, ignore_errors=True)


def prompt_ids(build, sp, text):
    tok = tokenizer_of(build)
    return [sp["<|startofprev|>"]] + tok(" " + text.strip(), add_special_tokens=False)["input_ids"]


def hf_inputs(m, feats, mask=None, **kw):
    """transformers' generate with the decoder input of each window recorded (its length per window)."""
    lens = []
    orig = m._prepare_decoder_input_ids

    def spy(*a, **k):
        ids, kwargs = orig(*a, **k)
        lens.append(list(ids.shape))
        return ids, kwargs
    m._prepare_decoder_input_ids = spy
    try:
        seqs, segs, rec = hf_tries(m, feats, mask, **kw)
    finally:
        del m._prepare_decoder_input_ids
    return seqs, segs, rec, lens


def test_condition_on_prev_tokens_long_form(cond, long_audio, winml):  # noqa: F811
    """The 65 s file alone: every window after the first conditioned on the previous text (31 tokens at most),
    greedy with --max-new-tokens and with generation_config's max_length (raised by the longer input at every
    window); tokens, segments and each try's figures (no-speech probability at the start token after the previous
    text) equal transformers'."""
    m, o, sp = cond
    feats, _ = long_features(long_audio[:1])
    pad = sp["<|endoftext|>"]
    kw = dict(compression_ratio_threshold=1e6, logprob_threshold=-1e6, no_speech_threshold=1.0)
    for max_new in (MAX_NEW, None):
        extra = {"max_new_tokens": max_new} if max_new else {}
        seqs, segs, want, lens = hf_inputs(m, feats, language="en", condition_on_prev_tokens=True,
                                           temperature=(0.0,), **extra, **kw)
        assert len(lens) >= 3 and lens[1][1] > 4, lens  # conditioned: <|startofprev|> + previous text + 3 tokens
        if max_new:  # once is enough
            plain, _ = hf_tries(m, feats, language="en", temperature=(0.0,), **extra, **kw)[:2]
            assert plain != seqs, "conditioning changed nothing: the test would not see it"
        res = ours(winml, o, long_audio[:1], flags=COND, language="en", temperature="0", **extra,
                   **{k: repr(v) for k, v in kw.items()})
        check_tries(res["tries"], want, f"condition, max_new {max_new}")
        check_out(res, seqs, segs, pad, f"condition, max_new {max_new}")
        assert [t["input_tokens"] for t in res["tries"]] == [n for _, n in lens], (res["tries"], lens)
    U.note(f"whisper condition_on_prev_tokens: 65 s, {len(lens)} windows, decoder inputs {[n for _, n in lens]} "
           f"tokens, tokens / segments / figures equal transformers'")


@pytest.mark.parametrize("how", ["every window", "first-segment", "all-segments"])
def test_prompt_ids(cond, long_audio, winml, how):  # noqa: F811
    """--prompt TEXT: without conditioning before every window; with it before the first window's text
    (first-segment) or in place of <|startofprev|> before every window's previous text (all-segments)."""
    m, o, sp = cond
    feats, _ = long_features(long_audio[:1])
    pids = prompt_ids(o, sp, PROMPT)
    hkw = {"condition_on_prev_tokens": how != "every window"}
    okw = {}
    if how == "all-segments":
        hkw["prompt_condition_type"] = okw["prompt_condition_type"] = "all-segments"
    seqs, segs, want, lens = hf_inputs(m, feats, max_new_tokens=MAX_NEW, language="en", temperature=(0.0,),
                                       prompt_ids=torch.tensor(pids), **hkw)
    res = ours(winml, o, long_audio[:1], flags=COND if how != "every window" else ("--timestamps",),
               max_new_tokens=MAX_NEW, language="en", temperature="0", prompt=PROMPT, **okw)
    check_tries(res["tries"], want, how)
    check_out(res, seqs, segs, sp["<|endoftext|>"], how)
    assert [t["input_tokens"] for t in res["tries"]] == [n for _, n in lens], (res["tries"], lens)
    assert lens[0][1] == len(pids) + 3, (lens, pids)
    U.note(f"whisper --prompt ({how}): {len(pids)} prompt tokens, decoder inputs {[n for _, n in lens]}, equal "
           f"transformers'")


def test_condition_batched(cond, long_audio, winml):  # noqa: F811
    """65 s + 41 s + 2 s in one batch with conditioning, language detected: transformers left-pads the rows'
    inputs (positions from the mask); ours decodes each row's own input unpadded: the same tokens and segments."""
    m, o, sp = cond
    feats, mask = long_features(long_audio)
    seqs, segs, want, lens = hf_inputs(m, feats, mask, max_new_tokens=MAX_NEW, temperature=(0.0,),
                                       condition_on_prev_tokens=True)
    res = ours(winml, o, long_audio, flags=COND, max_new_tokens=MAX_NEW, temperature="0")
    check_out(res, seqs, segs, sp["<|endoftext|>"], "condition, batch 3")
    U.note(f"whisper condition_on_prev_tokens batched (65 s + 41 s + 2 s): {res['windows']} windows, equal "
           f"transformers'")


def test_condition_reset_over_half(cond, long_audio, winml):  # noqa: F811
    """A window whose kept try was sampled at temperature >= 0.5 is not conditioned on at the next window (one row:
    no row conditions, so transformers adds nothing, not even <|startofprev|>); under 0.5 it is. Every greedy try
    falls back (logprob_threshold above any average)."""
    m, o, sp = cond
    P = 3
    for t, conditioned in ((0.6, False), (0.4, True)):
        res = ours(winml, o, long_audio[:1], flags=COND, max_new_tokens=MAX_NEW, language="en",
                   temperature=f"0,{t}", logprob_threshold=1.0, seed=3)
        by_window = {}
        for tr in res["tries"]:
            by_window.setdefault(tr["window"], []).append(tr)
        assert len(by_window) >= 2, res["tries"]
        for w in sorted(by_window)[1:]:
            n = by_window[w][0]["input_tokens"]
            assert (n > P + 1) if conditioned else (n == P), (t, w, by_window[w])


def test_prompt_bad_input(cond, speech, winml_asan):  # noqa: F811
    m, o, sp = cond
    base = [winml_asan, "run", "-m", o, "--audio", speech[0]]
    for flags, needle in ((["--prompt", "  "], "--prompt"), (["--prompt", "a <|en|> b"], "<|en|>"),
                          (["--prompt-condition-type", "x"], "--prompt-condition-type"),
                          (["--prompt", "hi", "--prompt-condition-type", "all-segments"], "condition_on_prev_tokens")):
        r = U.run(base + flags, timeout=120)
        assert r.returncode == 2 and needle in r.stderr, (flags, U.describe(r))
    r = U.run([winml_asan, "run", "-m", o, "--text", "hi", "--prompt", "x"], timeout=120)
    assert r.returncode == 2, U.describe(r)
    # the audit: a second --prompt was taken silently, --seed " -5" wrapped and 2^64 was clamped
    for flags, needles in ((["--prompt", "a", "--prompt", "b"], ["--prompt given twice"]),
                           (["--seed", " -5"], ["--seed", "' -5'"]),
                           (["--seed", "18446744073709551616"], ["--seed", "18446744073709551616"])):
        U.assert_clean_error(U.run(base + flags, timeout=120), "winml run", *needles)


def test_prompt_longer_than_max_length(cond, speech, winml_asan):  # noqa: F811
    """A prompt that leaves no room under max_length (generation_config's max_length plus the start tokens, at most
    max_target_positions, 64 here): exit 2 naming --prompt and both bounds. The window loop went on forever (its
    generation failed, its seek never moved). Conditioned on the previous text the prompt is cut to half the
    positions, as transformers cuts it, and runs."""
    m, o, sp = cond
    long = " ".join(["word"] * 40)
    r = U.run([winml_asan, "run", "-m", o, "--audio", speech[0], "--prompt", long], timeout=120)
    U.assert_clean_error(r, "winml run", "--prompt", "no room for new tokens", "max_length",
                         "max_target_positions 64")
    r = U.run([winml_asan, "run", "-m", o, "--audio", speech[0], "--prompt", long, *COND, "-f", "json"], timeout=120)
    assert r.returncode == 0, U.describe(r)
    assert json.loads(r.stdout)["results"][0]["audio"] == speech[0]


def test_logprob_threshold_with_beams(cond, long_audio, winml):  # noqa: F811
    """logprob_threshold with num_beams 2: transformers averages the best hypothesis' token log-probabilities
    gathered along its beam_indices (each step's processed scores of the beam it came from, log_softmax again);
    ours are the same figures, so a threshold between the windows' averages sends the same windows to the fallback
    (temperature 1e-6: one beam, the arg max), with the same tokens and segments."""
    m, o, sp = cond
    feats, _ = long_features(long_audio[:1])
    kw = dict(max_new_tokens=8, language="en", num_beams=2)
    _, _, probe = hf_tries(m, feats, temperature=(0.0,), logprob_threshold=-1e6, **kw)
    lps = sorted(r["avg_logprob"] for r in probe)
    assert len(lps) >= 3, probe
    thr = next((a + b) / 2 for a, b in zip(lps, lps[1:]) if b - a > 2e-3)
    seqs, segs, want = hf_tries(m, feats, temperature=(0.0, 1e-6), logprob_threshold=thr, **kw)
    assert any(r["fallback"] for r in want) and not all(r["fallback"] for r in want if r["temperature"] == 0), want
    res = ours(winml, o, long_audio[:1], temperature="0,1e-06", logprob_threshold=repr(thr), **kw)
    check_tries(res["tries"], want, "beams")
    check_out(res, seqs, segs, sp["<|endoftext|>"], "beams")
    U.note(f"whisper logprob_threshold with 2 beams: {sum(r['fallback'] for r in want)} of {len(want)} tries fell "
           f"back, figures and tokens equal transformers'")
