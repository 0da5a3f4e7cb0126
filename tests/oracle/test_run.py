"""`winml run` on encoder builds, against transformers: a BERT classifier with the real
bert-base-uncased vocab (labels and softmax scores), a single-logit reranker (scores per
(query, passage) pair and their ranking), and feature extraction (mean-pooled, L2-normalized
embeddings as sentence-transformers computes them)."""
import json
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import tok_oracle  # noqa: E402

QUERY = "how do whales breathe?"
PASSAGES = ["Whales breathe air through blowholes on top of their heads.", "The stock market fell today.",
            "Dolphins and whales are mammals; they surface to breathe.", "Ünïcödé text, émojis 🐋 and CJK 鲸鱼."]


@pytest.fixture(scope="module")
def bert_vocab():
    d, _, _ = tok_oracle.build_fixtures(["bert"])["bert"]
    return os.path.join(d, "vocab.txt")


def make(tmp, winml, vocab, cls, task, scale=1.0, **kw):
    torch.manual_seed(3)
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                  num_attention_heads=4, max_position_embeddings=128, **kw)
    m = cls(cfg).eval()
    with torch.no_grad():  # scale > 1: more spread-out outputs than the default init (no tied scores)
        for p in m.parameters():
            p.mul_(scale)
    hf = tmp / "hf"
    m.save_pretrained(hf)
    tok = transformers.BertTokenizerFast(vocab_file=vocab, do_lower_case=True)
    tok.save_pretrained(hf)
    r = subprocess.run([winml, "build", "-m", hf, "-o", tmp / "b", "-t", task, "-q"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    return m, tok, tmp / "b"


def run(winml, build, *args):
    r = subprocess.run([winml, "run", "-m", build, *args, "-f", "json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_classifier_labels(winml, bert_vocab, tmp_path):
    m, tok, b = make(tmp_path, winml, bert_vocab, transformers.BertForSequenceClassification, "text-classification",
                     num_labels=3, id2label={0: "neg", 1: "neu", 2: "pos"}, label2id={"neg": 0, "neu": 1, "pos": 2})
    for text in PASSAGES:
        enc = tok(text, return_tensors="pt", truncation=True, max_length=128)
        with torch.no_grad():
            want = torch.softmax(m(**enc).logits[0], -1).numpy()
        got = run(winml, b, "--text", text)["results"][0]
        assert [s["label"] for s in got["scores"]] == ["neg", "neu", "pos"]
        assert np.allclose([s["score"] for s in got["scores"]], want, atol=1e-5)
        assert got["label"] == ["neg", "neu", "pos"][int(np.argmax(want))]


def test_reranker_scores_and_ranking(winml, bert_vocab, tmp_path):
    m, tok, b = make(tmp_path, winml, bert_vocab, transformers.BertForSequenceClassification, "text-classification",
                     num_labels=1)
    enc = tok([QUERY] * len(PASSAGES), PASSAGES, return_tensors="pt", padding=True, truncation=True, max_length=128)
    with torch.no_grad():
        want = m(**enc).logits[:, 0].numpy()
    args = ["--text", QUERY]
    for p in PASSAGES:
        args += ["--pair", p]
    got = run(winml, b, *args)
    assert np.allclose([r["score"] for r in got["results"]], want, atol=1e-4)
    assert got["ranking"] == [int(i) for i in np.argsort(-want, kind="stable")]


def test_feature_extraction_embeddings(winml, bert_vocab, tmp_path):
    m, tok, b = make(tmp_path, winml, bert_vocab, transformers.BertModel, "feature-extraction")
    for text in PASSAGES[:2]:
        enc = tok(text, return_tensors="pt")
        with torch.no_grad():
            h = m(**enc).last_hidden_state[0]
        mask = enc["attention_mask"][0, :, None].float()
        emb = (h * mask).sum(0) / mask.sum()
        emb = (emb / emb.norm()).numpy()
        got = run(winml, b, "--text", text)["results"][0]
        assert got["dims"] == 64 and np.allclose(got["embedding"], emb, atol=1e-5)
        raw = run(winml, b, "--text", text, "--no-normalize")["results"][0]["embedding"]
        assert abs(np.linalg.norm(raw) - 1.0) > 1e-3


def test_run_refuses_a_decoder(winml, tmp_path):
    r = subprocess.run([winml, "run", "-m", tmp_path / "nothing", "--text", "x"], capture_output=True, text=True)
    assert r.returncode == 2



@pytest.fixture(scope="module")
def tiny_classifier(tmp_path_factory, winml):
    """a build folder of a tiny random BERT classifier (WordPiece vocab.txt of made-up words)"""
    import builder_util as BU
    import oracle_util as U
    tmp = tmp_path_factory.mktemp("tiny_classifier")
    ck = tmp / "ck"
    BU.make_tiny("bert", str(ck))
    V = json.load(open(ck / "config.json"))["vocab_size"]
    (ck / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
                                            [f"w{i}" for i in range(V - 5)]) + "\n")
    r = U.run([winml, "build", "-m", ck, "-o", tmp / "b", "-t", "text-classification", "-q"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    return tmp / "b"


@pytest.mark.parametrize("fname,text,needles", [
    ("config.json", "[1, 2]", ["config.json", "not a JSON object"]),
    ("config.json", "", ["config.json"]),
    ("config.json", "[" * 100000 + "]" * 100000, ["config.json", "nested deeper"]),
    ("config.json", '{"model_type": "bert", "id2label": {"0": 5}}', ["config.json", "id2label"]),
    ("winml_build_config.json", '{"loader": {"task": "text-classification"}', ["winml_build_config.json"]),
    # the tokenizer's configs (special tokens, do_lower_case) were read as absent when malformed
    ("tokenizer_config.json", '{"do_lower_case": false', ["tokenizer_config.json", "not valid json"]),
    ("special_tokens_map.json", "[" * 200 + "]" * 200, ["special_tokens_map.json", "nested deeper than 64"]),
], ids=["cfg_array", "cfg_empty", "cfg_deep", "cfg_label_type", "recipe_truncated", "tokcfg_truncated",
        "special_map_deep"])
def test_malformed_build_file_refused(fname, text, needles, tiny_classifier, winml, winml_asan, tmp_path):
    """a build folder's config.json (labels, positions) or winml_build_config.json (task) that is there but malformed
    is refused naming it by run, task eval and perf, under ASan; run read it as absent before (exit 0, labels LABEL_n)"""
    import shutil
    import oracle_util as U
    b = tmp_path / "b"
    shutil.copytree(tiny_classifier, b)
    ds = tmp_path / "ds.jsonl"
    ds.write_text('{"text": "w1 w2", "label": 0}\n{"text": "w3", "label": 1}\n')
    cmds = [["run", "-m", b, "--text", "w1 w2"],
            ["eval", "--mode", "task", "-m", b, "--dataset", ds, "--task", "text-classification", "--samples", "2"],
            ["perf", "-m", b, "--warmup", "0", "--iterations", "1"]]
    assert U.run([winml, *cmds[0]]).returncode == 0  # the folder as built runs
    (b / fname).write_text(text)
    for c in cmds if fname == "winml_build_config.json" else cmds[:2]:
        U.assert_clean_error(U.run([winml_asan, *c], timeout=120), "winml " + c[0], *needles)
    if fname.startswith(("tokenizer", "special")):  # the same through tokenizer.json's loader
        t = tmp_path / "t"
        t.mkdir()
        (t / "tokenizer.json").write_text(json.dumps(_wordpiece_json(b / "vocab.txt")))
        (t / fname).write_text(text)
        U.assert_clean_error(U.run([winml_asan, "tokenize", "-m", t, "--text", "w1"]), "winml tokenize", *needles)
        os.unlink(t / fname)
        assert U.run([winml, "tokenize", "-m", t, "--text", "w1"]).returncode == 0
    os.unlink(b / fname)  # absent is fine: no labels, no recorded task, default special tokens
    assert U.run([winml, *cmds[0]]).returncode == 0


def _wordpiece_json(vocab_txt):
    vocab = {w: i for i, w in enumerate(open(vocab_txt).read().split("\n")) if w}
    return {"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": None, "decoder": None,
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": 100, "vocab": vocab}}
