"""`winml generate -m ENCODER_PART --decoder DECODER_PART` (issue 34): greedy search over the reference's opus-mt
part recipes built into two folders (test_builder_s2s_parts.py's tiny random MarianMTModel and rewritten recipes)
gives, row by row, transformers' generate and `winml generate` on the merged build of the same checkpoint, token
for token (sources shorter than the encoder part's static length are padded and masked). Bad input: beams, audio,
a source over the static length, a decoder folder that is not a decoder part: exit 2 naming it.
"""
import json
import os

import numpy as np
import pytest
import torch

import oracle_util as U
from test_builder_s2s_parts import OPUS, SE, T_SLOTS, build, make_marian, part_recipe

torch.set_num_threads(1)
NEW = 8


@pytest.fixture(scope="module")
def marian(request, winml):
    d = U.scratch(request, "s2s_parts_generate")
    ck = str(d / "marian")
    m = make_marian(ck, 0.5)
    with torch.no_grad():  # this random model ends at once: make the end id unlikely so that tokens come
        m.final_logits_bias[0, m.config.eos_token_id] -= 8.0
    m.save_pretrained(ck)
    c = m.config
    kw = dict(se=SE, slots=T_SLOTS, layers=c.decoder_layers, heads=c.decoder_attention_heads,
              hd=c.d_model // c.decoder_attention_heads, width=c.d_model)
    enc = part_recipe(os.path.join(OPUS, "translation_fp32_encoder_config.json"), d / "enc.json", **kw)
    dec = part_recipe(os.path.join(OPUS, "translation_fp32_decoder_config.json"), d / "dec.json", **kw)
    e, dd = build(winml, ck, enc, str(d / "b_enc"), ["-q"]), build(winml, ck, dec, str(d / "b_dec"), ["-q"])
    merged = str(d / "b_merged")
    r = U.run([winml, "build", "-m", ck, "-o", merged, "-q"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    return m, e, dd, merged


def gen(winml, model, rows, extra=()):
    argv = [winml, "generate", "-m", model, "-f", "json", "--max-new-tokens", str(NEW), *extra]
    for r in rows:
        argv += ["--ids", ",".join(map(str, r))]
    r = U.run(argv, timeout=300)
    assert r.returncode == 0, U.describe(r)
    return [o["ids"] for o in json.loads(r.stdout)["outputs"]]


def test_parts_generate_equals_merged_and_transformers(marian, winml):
    m, enc, dec, merged = marian
    rng = np.random.default_rng(11)
    V, pad = m.config.vocab_size, m.config.pad_token_id
    rows = [[int(t) for t in rng.integers(2, V - 1, size=n)] + [m.config.eos_token_id] for n in (3, 6, SE - 1)]
    got = gen(winml, enc, rows, ["--decoder", dec])
    want_merged = gen(winml, merged, rows)
    for i, r in enumerate(rows):
        with torch.no_grad():
            want = m.generate(input_ids=torch.tensor([r]), max_new_tokens=NEW, num_beams=1, do_sample=False)[0]
        want = [int(t) for t in want.tolist()]
        strip = lambda x: x[: max(k for k, t in enumerate(x) if t != pad or k == 0) + 1]  # noqa: E731
        assert strip(got[i]) == strip(want), (i, got[i], want)
        assert strip(got[i]) == strip(want_merged[i]), (i, got[i], want_merged[i])
    assert sum(len(strip(g)) > 3 for g in got) >= 2, got  # tokens were generated, not only the start token
    U.note(f"generate over the opus-mt part builds: {len(rows)} rows equal transformers' and the merged build's")


def test_parts_generate_bad_input(marian, winml_asan):
    m, enc, dec, merged = marian
    base = [winml_asan, "generate", "-m", enc, "--decoder"]
    for extra, needle in (([dec, "--ids", "5,6", "--num-beams", "2"], "--decoder"),
                          ([dec, "--ids", ",".join(["5"] * (SE + 1))], "static length"),
                          ([enc, "--ids", "5,6"], "decoder part")):
        r = U.run(base + extra, timeout=120)
        assert r.returncode == 2 and needle in r.stderr, (extra, U.describe(r))
