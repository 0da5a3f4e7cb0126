"""Task metrics of src/eval/metrics.c against scikit-learn and scipy on random data (ties included)."""
import subprocess

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import accuracy_score, f1_score, ndcg_score


def metric(build_dir, name, a, b, *extra):
    data = " ".join(map(repr, list(map(float, a)) + list(map(float, b))))
    r = subprocess.run([f"{build_dir}/wm_metrics", name, str(len(a)), *map(str, extra)], input=data,
                       capture_output=True, text=True, check=True)
    return float(r.stdout)


@pytest.mark.parametrize("seed", range(5))
def test_classification(build_dir, seed):
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 2, 200)
    pred = np.where(rng.random(200) < 0.7, gold, 1 - gold)
    assert metric(build_dir, "accuracy", pred, gold) == pytest.approx(accuracy_score(gold, pred))
    assert metric(build_dir, "f1", pred, gold, 2) == pytest.approx(f1_score(gold, pred))
    g3, p3 = rng.integers(0, 4, 150), rng.integers(0, 4, 150)
    assert metric(build_dir, "f1", p3, g3, 4) == pytest.approx(f1_score(g3, p3, average="macro", labels=range(4)))


def mrr_ref(scores, rel, k):
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]
    for rank, i in enumerate(order, 1):
        if rel[i] > 0:
            return 1.0 / rank
    return 0.0


@pytest.mark.parametrize("seed", range(8))
def test_ranking(build_dir, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 40))
    scores = rng.normal(size=n)
    rel = rng.integers(0, 3, n).astype(float)
    for k in (1, 5, 10):
        want = ndcg_score([rel], [scores], k=k, ignore_ties=True)
        assert metric(build_dir, "ndcg", scores, rel, k) == pytest.approx(want), k
        assert metric(build_dir, "mrr", scores, rel, k) == pytest.approx(mrr_ref(scores, rel, k)), k


@pytest.mark.parametrize("seed", range(5))
def test_spearman(build_dir, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=100)
    y = x + rng.normal(size=100)
    x[::7] = 0.5  # ties
    y[::11] = 1.0
    assert metric(build_dir, "spearman", x, y) == pytest.approx(spearmanr(x, y).statistic, rel=1e-9)
