"""Sampling (issue 34): our warpers (src/llm/sampling.c: temperature, top-k, top-p, min-p in transformers' order, used
by `winml generate` on decoders and by the seq2seq / Whisper search) against transformers' TemperatureLogitsWarper,
TopKLogitsWarper, TopPLogitsWarper and MinPLogitsWarper chained as its generate chains them, on fixed logits:
the exact set of tokens kept (finite warped scores) and the probabilities of softmax(warped) within 1e-6 (the
softmax of transformers' warped scores in float64: torch's float32 softmax itself is up to 4e-6 off on the peaked
row, where one token holds almost all the mass). Ties at
the k-th score are all kept (torch's filter keeps every score >= the k-th). Draws with a fixed seed repeat, another
seed gives others, every draw is a kept token, and their frequencies follow the probabilities.
"""
import json

import numpy as np
import pytest
import torch
from transformers.generation.logits_process import (LogitsProcessorList, MinPLogitsWarper, TemperatureLogitsWarper,
                                                    TopKLogitsWarper, TopPLogitsWarper)

import oracle_util as U

V = 3000
SETTINGS = [  # temperature, top_k, top_p, min_p
    (0.7, 0, 1.0, 0.0), (1.0, 50, 1.0, 0.0), (1.3, 0, 0.9, 0.0), (0.8, 40, 0.95, 0.0), (1.0, 200, 0.5, 0.0),
    (1.0, 10, 0.999, 0.05), (2.0, 0, 1.0, 0.1), (0.5, 1, 1.0, 0.0), (1.0, 0, 0.3, 0.0)]


def logits_rows():
    rng = np.random.default_rng(34)
    rows = [rng.standard_normal(V) * s for s in (1.0, 3.0, 8.0)]
    peaked = rng.standard_normal(V)
    peaked[17] += 12.0  # one token holds almost all the mass
    rows.append(peaked)
    return np.stack(rows).astype(np.float32)


def ties_row():
    """Scores with many equal values: the k-th highest is shared by several tokens."""
    rng = np.random.default_rng(7)
    return np.round(rng.standard_normal((1, V)) * 2).astype(np.float32)


def hf_warp(x, t, k, p, mp):
    procs = LogitsProcessorList()
    if t != 1.0:
        procs.append(TemperatureLogitsWarper(t))
    if k:
        procs.append(TopKLogitsWarper(k))
    if p < 1.0:
        procs.append(TopPLogitsWarper(p))
    if mp:
        procs.append(MinPLogitsWarper(mp))
    s = procs(torch.zeros(x.shape[0], 1, dtype=torch.long), torch.tensor(x))
    return torch.isfinite(s).numpy(), torch.softmax(s.double(), -1).numpy()  # the warped scores' softmax, exactly


def ours(testtool, tmp_path, x, t, k, p, mp, seed=0, draws=0):
    f, o = tmp_path / "x.f32", tmp_path / "p.f32"
    f.write_bytes(np.array(x.shape, np.int64).tobytes() + x.tobytes())
    r = U.run([testtool, "sample", f, o, repr(t), str(k), repr(p), repr(mp), str(seed), str(draws)])
    assert r.returncode == 0, U.describe(r)
    return np.frombuffer(o.read_bytes(), np.float32).reshape(x.shape), json.loads(r.stdout)["draws"]


@pytest.mark.parametrize("t,k,p,mp", SETTINGS)
def test_warped_distribution_matches_transformers(testtool, tmp_path, t, k, p, mp):
    x = logits_rows()
    kept, want = hf_warp(x, t, k, p, mp)
    got, _ = ours(testtool, tmp_path, x, t, k, p, mp)
    for r in range(x.shape[0]):
        assert set(np.flatnonzero(got[r] > 0)) == set(np.flatnonzero(kept[r])), (r, int(kept[r].sum()),
                                                                              int((got[r] > 0).sum()))
        assert float(np.abs(got[r] - want[r]).max()) <= 1e-6, (r, float(np.abs(got[r] - want[r]).max()))
    assert 0 < kept.sum() and (kept.sum() < kept.size or (k, p, mp) == (0, 1.0, 0.0))  # filtered, unless T alone


@pytest.mark.parametrize("k", [1, 5, 37, 300])
def test_top_k_keeps_ties(testtool, tmp_path, k):
    x = ties_row()
    desc = np.sort(x[0])[::-1]
    while desc[k - 1] != desc[k]:  # the next k whose k-th score is shared
        k += 1
    kept, want = hf_warp(x, 1.0, k, 1.0, 0.0)
    got, _ = ours(testtool, tmp_path, x, 1.0, k, 1.0, 0.0)
    assert kept.sum() > k, "the k-th score is shared: torch keeps them all"
    assert set(np.flatnonzero(got[0] > 0)) == set(np.flatnonzero(kept[0]))
    assert float(np.abs(got[0] - want[0]).max()) <= 1e-6


def test_seeded_draws(testtool, tmp_path):
    x = logits_rows()[:2]
    kept, want = hf_warp(x, 1.0, 8, 0.95, 0.0)
    _, a = ours(testtool, tmp_path, x, 1.0, 8, 0.95, 0.0, seed=5, draws=4000)
    _, b = ours(testtool, tmp_path, x, 1.0, 8, 0.95, 0.0, seed=5, draws=4000)
    _, c = ours(testtool, tmp_path, x, 1.0, 8, 0.95, 0.0, seed=6, draws=4000)
    assert a == b and a != c
    for r in range(2):
        assert all(kept[r, i] for i in a[r]), r
        freq = np.bincount(a[r], minlength=V) / len(a[r])
        assert float(np.abs(freq - want[r]).max()) < 0.03, (r, float(np.abs(freq - want[r]).max()))
    U.note(f"sampling warpers: {len(SETTINGS)} settings x 4 rows + ties equal transformers' kept sets, "
           f"probabilities within 1e-6; seeded draws repeat")
