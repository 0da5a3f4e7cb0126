"""BartForSequenceClassification (issue 34; facebook/bart-large-mnli's reference recipes): a tiny random checkpoint
saved by transformers (3 labels, 2 + 2 layers, weights at init_std 0.2 so that the logits are of order 1) built by
`winml config` (symbolic batch / sequence) + `winml export`, one graph: the encoder, the decoder over the input_ids
shifted right behind decoder_start_token_id (no cache), the decoder's state at each row's last eos_token_id through
classification_head.dense + tanh + out_proj. In onnxruntime and in our engine the logits match transformers within
1e-4: batch 1, batch 3 with rows of different lengths (right- and left-padded, each ending in eos as the tokenizer
makes them), and text pairs (three eos a row: the last one is read). What transformers refuses, the graph defines
(README): rows with different eos counts each read their own last eos (= each row alone in transformers); a row
without eos reads its last position. `winml build` at fp16 / int8 stays within 5e-3 / 3e-2 of transformers'
float32 logits (9.6e-4 / 7.2e-3 measured); `winml inspect` names the task and class; `winml run --text [--pair]`
prints transformers' softmax scores with id2label. A config without num_labels / id2label, eos_token_id or
decoder_start_token_id exits 2 naming config.json and the field, nothing left behind.
"""
import json
import os

import numpy as np
import pytest
import torch

import builder_util as BU
import oracle_util as U
from test_builder_seq2seq import tiny_tokenizer

TOL = 1e-4
SMALL = dict(vocab_size=320, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
             decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=48, max_position_embeddings=64)
LABELS = {0: "contradiction", 1: "neutral", 2: "entailment"}
EOS, PAD, BOS = 2, 1, 0


def make(path):
    import transformers as T
    torch.manual_seed(0)
    m = T.BartForSequenceClassification(T.BartConfig(**SMALL, scale_embedding=True, init_std=0.2, id2label=LABELS,
                                                     label2id={v: k for k, v in LABELS.items()}))
    m.eval()
    m.save_pretrained(path)
    tiny_tokenizer(path)
    return m


@pytest.fixture(scope="module")
def tiny(request, winml):
    d = U.scratch(request, "bart_cls")
    ck = str(d / "ckpt")
    m = make(ck)
    dyn = BU.export_dynamic(winml, ck, str(d / "dyn"), task="text-classification")
    return m, ck, dyn, d


def rows(rng, lens, S, left=(), eos_each=1):
    """[B, S] ids: row i holds lens[i] tokens <s> ... </s> (eos_each eos tokens, the last one at the end), padded
    with pad right (left for rows in left); the mask."""
    B = len(lens)
    ids = np.full((B, S), PAD, np.int64)
    mask = np.zeros((B, S), np.int64)
    for i, n in enumerate(lens):
        r = BU.random_ids(rng, (n,), SMALL["vocab_size"] - 1)
        r[0] = BOS
        for k in range(eos_each):  # </s> at the end, the others in the middle (pairs: </s></s>)
            r[n - 1 - k * (n // (eos_each + 1))] = EOS
        sl = slice(S - n, S) if i in left else slice(0, n)
        ids[i, sl], mask[i, sl] = r, 1
    return ids, mask


def hf_logits(m, ids, mask):
    with torch.no_grad():
        return m(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()


def ours(run_model, path, ids, mask):
    return run_model(path, {"input_ids": ids.astype(np.int32), "attention_mask": mask.astype(np.int32)})["logits"]


def test_logits_match_transformers(tiny, run_model):
    m, _, dyn, _ = tiny
    rng = np.random.default_rng(1)
    worst = 0.0
    for lens, S, left, eos_each in (([11], 11, (), 1), ([12, 7, 4], 12, (2,), 1), ([14, 9, 13], 16, (), 3)):
        ids, mask = rows(rng, lens, S, left, eos_each)
        assert ((ids == EOS).sum(1) == eos_each).all()
        ref = hf_logits(m, ids, mask)
        assert np.abs(ref).max() > 0.3, ref  # logits of order 1: the bound means something
        got = ours(run_model, dyn, ids, mask)
        assert got.shape == (len(lens), 3)
        BU.assert_close_valid(got, ref, np.ones(ref.shape, bool), f"batch {len(lens)} x {S}", TOL)
        worst = max(worst, float(np.abs(got - ref).max()))
    U.note(f"bart sequence classifier vs transformers: max |diff| {worst:.2e}")


def test_rows_transformers_refuses(tiny, run_model):
    """Different eos counts per row: each row reads its own last eos (what transformers gives for each row alone);
    no eos: the row reads its last position (the decoder's state there through the head)."""
    m, _, dyn, _ = tiny
    rng = np.random.default_rng(2)
    a, ma = rows(rng, [10], 10, eos_each=1)
    b, mb = rows(rng, [10], 10, eos_each=3)
    ids, mask = np.concatenate([a, b]), np.concatenate([ma, mb])
    ref = np.concatenate([hf_logits(m, a, ma), hf_logits(m, b, mb)])
    BU.assert_close_valid(ours(run_model, dyn, ids, mask), ref, np.ones(ref.shape, bool), "eos counts differ", TOL)
    c = BU.random_ids(rng, (1, 8), SMALL["vocab_size"] - 1)
    c[c == EOS] = 5
    mc = np.ones(c.shape, np.int64)
    with torch.no_grad():
        h = m.model(input_ids=torch.tensor(c), attention_mask=torch.tensor(mc)).last_hidden_state[:, -1]
        ref = m.classification_head(h).numpy()
    BU.assert_close_valid(ours(run_model, dyn, c, mc), ref, np.ones(ref.shape, bool), "no eos", TOL)


@pytest.mark.parametrize("prec,tol", [("fp16", 5e-3), ("int8", 3e-2)])
def test_precisions(tiny, winml, prec, tol):
    m, ck, _, d = tiny
    o = str(d / f"build_{prec}")
    r = U.run([winml, "build", "-m", ck, "-o", o, "-p", prec, "-q"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    S = json.load(open(os.path.join(o, "winml_build_config.json")))["export"]["input_tensors"][0]["shape"][1]
    ids, mask = rows(np.random.default_rng(3), [S, 9], S)
    ref = hf_logits(m, ids, mask)
    got = BU.run_engine(os.path.join(o, "model.onnx"), {"input_ids": ids[:1].astype(np.int32),
                                                        "attention_mask": mask[:1].astype(np.int32)})["logits"]
    err = float(np.abs(got - ref[:1]).max())
    U.note(f"bart sequence classifier {prec}: max |diff| {err:.2e} against transformers' float32")
    assert err < tol, err


def test_inspect_and_run(tiny, winml):
    m, ck, _, d = tiny
    r = U.run([winml, "inspect", "-m", ck, "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    rep = json.loads(r.stdout)
    assert rep["task"] == "text-classification" and rep["tasks"] == ["text-classification"], rep
    assert rep["inference_class"] == "BartForSequenceClassification", rep
    assert any("last eos_token_id 2" in f for f in rep["features"]), rep["features"]
    o = str(d / "build_fp32")
    r = U.run([winml, "build", "-m", ck, "-o", o, "-p", "fp32", "-q"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    import transformers as T
    tok = T.AutoTokenizer.from_pretrained(ck)
    for text, pair in (("Hello world, this is a test.", None), ("A fox jumps.", "An animal moves.")):
        r = U.run([winml, "run", "-m", o, "--text", text, *(["--pair", pair] if pair else []), "-f", "json"])
        assert r.returncode == 0, U.describe(r)
        res = json.loads(r.stdout)["results"][0]
        enc = tok(text, pair, return_tensors="pt") if pair else tok(text, return_tensors="pt")
        with torch.no_grad():
            p = torch.softmax(m(**enc).logits, -1)[0].numpy()
        assert [s["label"] for s in res["scores"]] == [LABELS[i] for i in range(3)], res
        np.testing.assert_allclose([s["score"] for s in res["scores"]], p, atol=TOL)
        assert res["label"] == LABELS[int(p.argmax())], res


@pytest.mark.parametrize("drop,field", [(("num_labels", "id2label", "label2id"), "num_labels"),
                                        (("eos_token_id",), "eos_token_id"),
                                        (("decoder_start_token_id",), "decoder_start_token_id")])
def test_config_without_what_the_head_needs(tiny, wm, drop, field, tmp_path):
    """Each build: the normal one and the sanitizer one."""
    _, ck, _, _ = tiny
    bad = tmp_path / "ck"
    bad.mkdir()
    for f in os.listdir(ck):
        os.symlink(os.path.join(ck, f), bad / f) if f != "config.json" else None
    cfg = json.load(open(os.path.join(ck, "config.json")))
    for k in drop:
        cfg.pop(k, None)
    with open(bad / "config.json", "w") as fh:
        json.dump(cfg, fh)
    out = tmp_path / "out"
    r = U.run([wm, "build", "-m", str(bad), "-o", str(out), "-p", "fp32"], timeout=120)
    assert r.returncode == 2, U.describe(r)
    assert "config.json: field '%s': missing" % field in r.stderr, r.stderr
    assert not out.exists()
