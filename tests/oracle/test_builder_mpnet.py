"""MPNet (issue 35) through the builder's tables: tiny random checkpoints saved by transformers (MPNetModel and its
sequence / token classification, question answering and masked-LM heads) are exported with `winml export` and
run in onnxruntime and in our engine; outputs must match transformers within 1e-4 (fp32), batch 4 with a full,
a right-padded and a left-padded row, and a sequence longer than the relative position bias' max distance (128)
so every bucket is used. `winml inspect` names the relative position bias; a table with fewer rows than the
buckets MPNet computes is refused; MPNet's tokenizer.json (WordPiece + RobertaProcessing) tokenizes exactly as
`tokenizers`.
"""
import json
import os

import numpy as np
import pytest
import torch

import builder_util as BU
import oracle_util as U

TOL = 1e-4


@pytest.fixture(scope="module")
def workdir(request):
    return U.scratch(request, "builder_mpnet")


@pytest.fixture(scope="module")
def tiny(workdir):
    return BU.tiny_cache(workdir, lambda k, d: BU.make_tiny(k, d))


export = BU.export_dynamic


def inputs(model, B, S, seed):
    return BU.padded_feeds(model, B, S, seed)


def assert_close(ours, ref, valid, what):
    BU.assert_close_valid(ours, ref, valid, what, TOL)


SHAPES = [(4, 10), (2, 150)]  # the second passes the bias' max distance (128): every bucket in use


@pytest.mark.parametrize("B,S", SHAPES)
def test_sequence_classification(B, S, tiny, workdir, winml, run_model):
    ckpt, model = tiny("mpnet")
    path = export(winml, ckpt, str(workdir / "out_cls"))
    feeds, tin = inputs(model, B, S, 1)
    with torch.no_grad():
        ref = model(**tin).logits.numpy()
    got = run_model(path, feeds)["logits"]
    assert_close(got, ref, np.ones_like(ref, bool), f"mpnet logits B{B} S{S}")


@pytest.mark.parametrize("B,S", SHAPES)
def test_feature_extraction_and_sentence_embedding(B, S, tiny, workdir, winml, run_model):
    """last_hidden_state, and the sentence-transformers embedding (all-mpnet-base-v2: mean pooling, L2 norm)."""
    ckpt, model = tiny("mpnet-feature")
    path = export(winml, ckpt, str(workdir / "out_feat"), pooling="mean", normalize=True)
    feeds, tin = inputs(model, B, S, 2)
    with torch.no_grad():
        h = model(**tin).last_hidden_state
    m = tin["attention_mask"].unsqueeze(-1).float()
    emb = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1).clamp(min=1e-9), dim=-1).numpy()
    got = run_model(path, feeds)
    valid = np.broadcast_to(feeds["attention_mask"].astype(bool)[:, :, None], h.shape)
    assert_close(got["last_hidden_state"], h.numpy(), valid, f"mpnet last_hidden_state B{B} S{S}")
    assert_close(got["sentence_embedding"], emb, np.ones_like(emb, bool), f"mpnet sentence_embedding B{B} S{S}")


def test_token_classification(tiny, workdir, winml, run_model):
    ckpt, model = tiny("mpnet-token")
    path = export(winml, ckpt, str(workdir / "out_tok"))
    feeds, tin = inputs(model, 4, 12, 3)
    with torch.no_grad():
        ref = model(**tin).logits.numpy()
    got = run_model(path, feeds)["logits"]
    valid = np.broadcast_to(feeds["attention_mask"].astype(bool)[:, :, None], ref.shape)
    assert_close(got, ref, valid, "mpnet token logits")


def test_question_answering(tiny, workdir, winml, run_model):
    ckpt, model = tiny("mpnet-qa")
    path = export(winml, ckpt, str(workdir / "out_qa"))
    feeds, tin = inputs(model, 4, 12, 4)
    with torch.no_grad():
        ref = model(**tin)
    got = run_model(path, feeds)
    valid = feeds["attention_mask"].astype(bool)
    assert_close(got["start_logits"], ref.start_logits.numpy(), valid, "mpnet start_logits")
    assert_close(got["end_logits"], ref.end_logits.numpy(), valid, "mpnet end_logits")


def test_fill_mask_with_more_table_rows_than_buckets(tiny, workdir, winml, run_model):
    """relative_attention_num_buckets 40: transformers still computes 32 buckets (rows 32..39 unused)."""
    ckpt, model = tiny("mpnet-mlm")
    path = export(winml, ckpt, str(workdir / "out_mlm"), task="fill-mask")
    feeds, tin = inputs(model, 3, 9, 5)
    with torch.no_grad():
        ref = model(**tin).logits.numpy()
    got = run_model(path, feeds)["logits"]
    valid = np.broadcast_to(feeds["attention_mask"].astype(bool)[:, :, None], ref.shape)
    assert_close(got, ref, valid, "mpnet masked-LM logits")


def test_inspect_lists_the_relative_position_bias_and_text_tasks_only(tiny, winml):
    ckpt, _ = tiny("mpnet")
    r = U.run([winml, "inspect", "-m", ckpt, "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    j = json.loads(r.stdout)
    assert j["naming_scheme"] == "mpnet"
    feats = j["features"]
    assert "relative position bias (32 buckets, max distance 128; one table shared by all layers, added to the " \
           "attention scores)" in feats, feats
    assert "learned positions (300), padding-aware position ids (from padding_idx)" in feats, feats
    assert j["tasks"] == ["text-classification", "feature-extraction", "token-classification",
                          "question-answering", "fill-mask"], j["tasks"]


@pytest.mark.parametrize("value,why", [(16, "16 rows, fewer than the 32 buckets model_type 'mpnet' computes"),
                                       (2.5, "expected an integer from 1 to 1000000"),
                                       ("32", "expected an integer from 1 to 1000000")])
def test_too_few_bias_rows_refused(value, why, winml_asan, tmp_path):
    """transformers would index past the table (16 rows) or fail; refused by name, nothing written."""
    import transformers as T
    cfg = T.MPNetConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                        vocab_size=96, max_position_embeddings=40).to_dict()
    cfg["relative_attention_num_buckets"] = value
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    r = U.run([winml_asan, "build", "-m", str(tmp_path / "m"), "--random-weights", "-o", str(out)])
    assert r.returncode == 2, U.describe(r)
    assert "field 'relative_attention_num_buckets'" in r.stderr and why in r.stderr, r.stderr
    assert not out.exists()


def test_random_weights_build_runs_in_both_runtimes(winml, tmp_path):
    """The all-mpnet-base-v2 shape (12 heads) scaled down, --random-weights: both runtimes agree."""
    import transformers as T
    cfg = T.MPNetConfig(hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=12,
                        vocab_size=120, max_position_embeddings=200).to_dict()
    cfg["architectures"] = ["MPNetModel"]
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    out = str(tmp_path / "out")
    r = U.run([winml, "config", "-m", str(tmp_path / "m")])
    assert r.returncode == 0, U.describe(r)
    rec = json.loads(r.stdout)
    for t in rec["export"]["input_tensors"]:
        t["shape"] = ["batch_size", "sequence_length"]
    rp = tmp_path / "recipe.json"
    rp.write_text(json.dumps(rec))
    r = U.run([winml, "export", "-m", str(tmp_path / "m"), "--random-weights", "-c", str(rp), "-o", out, "-q"])
    assert r.returncode == 0, U.describe(r)
    rng = np.random.default_rng(6)
    ids = BU.random_ids(rng, (2, 140), 120).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 100:] = 0
    feeds = {"input_ids": ids, "attention_mask": mask}
    a = BU.run_ort(os.path.join(out, "model.onnx"), feeds)["last_hidden_state"]
    b = BU.run_engine(os.path.join(out, "model.onnx"), feeds)["last_hidden_state"]
    valid = np.broadcast_to(mask.astype(bool)[:, :, None], a.shape)
    assert float(np.abs(a - b)[valid].max()) <= TOL


def test_tokenizer_json_matches_tokenizers(winml, tmp_path):
    """MPNet's tokenizer.json as transformers writes it (BertNormalizer, BertPreTokenizer, WordPiece,
    RobertaProcessing: <s> A </s></s> B </s>): `winml tokenize` gives the ids and type ids of `tokenizers`."""
    import tokenizers
    import transformers as T
    words = ["<s>", "<pad>", "</s>", "<unk>", "[UNK]", "<mask>"] + list("abcdefghijklmnopqrstuvwxyz,.!") + \
        ["hello", "world", "##s", "##ing", "na", "##ive", "the", "test", "##ed", "日", "本"]
    T.MPNetTokenizer(vocab={w: i for i, w in enumerate(words)}).save_pretrained(str(tmp_path))
    tk = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert json.load(open(tmp_path / "tokenizer.json"))["post_processor"]["type"] == "RobertaProcessing"
    for a, b in [("Hello, World! naïve tests 日本語", "the testing  Ñ"), ("hellos worlding zz", None)]:
        e = tk.encode(a, b) if b else tk.encode(a)
        r = U.run([winml, "tokenize", "-m", str(tmp_path), "--text", a, "-f", "json"] + (["--pair", b] if b else []))
        assert r.returncode == 0, U.describe(r)
        j = json.loads(r.stdout)
        assert j["ids"] == e.ids
        assert [t["type_id"] for t in j["tokens"]] == e.type_ids
        assert [t["token"] for t in j["tokens"]] == e.tokens
