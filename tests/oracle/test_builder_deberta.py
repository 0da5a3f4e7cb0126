"""DeBERTa v2 / v3 (issue 35) through the builder's tables: tiny random checkpoints saved by transformers are
exported with `winml export` and run in onnxruntime and in our engine; outputs must match transformers within 1e-4
(fp32), batch 4 with a full, a right-padded and a left-padded row (DeBERTa's 2-D mask: a padded query attends
uniformly, padded embeddings are zeroed) and a sequence past the log buckets' range.

- v3 shape (cross-encoder/nli-deberta-v3-base, mxbai-rerank): c2p + p2c through the content projections
  (share_att_key), log buckets, LayerNorm'ed relative embeddings, no absolute positions;
- v2 shape: own pos_key_proj / pos_query_proj, exact distances, absolute positions, token types, pos_att_type as
  "p2c|c2p", a single-logit head with pooler_hidden_act tanh.
`winml inspect` names the features; configs the graph does not model are refused by name (ASan build).
"""
import json

import numpy as np
import pytest
import torch

import builder_util as BU
import oracle_util as U

TOL = 1e-4


@pytest.fixture(scope="module")
def workdir(request):
    return U.scratch(request, "builder_deberta")


@pytest.fixture(scope="module")
def tiny(workdir):
    return BU.tiny_cache(workdir, lambda k, d: BU.make_tiny(k, d))


@pytest.mark.parametrize("kind", ["deberta-v3", "deberta-v2"])
@pytest.mark.parametrize("B,S", [(4, 10), (2, 40)])  # 40: distances past the 8 log buckets / 12 exact ones
def test_sequence_classification(kind, B, S, tiny, workdir, winml, run_model):
    ckpt, model = tiny(kind)
    path = BU.export_dynamic(winml, ckpt, str(workdir / f"out_{kind}"))
    types = model.config.type_vocab_size > 1
    feeds, tin = BU.padded_feeds(model, B, S, 1, types=types)
    with torch.no_grad():
        ref = model(**tin).logits.numpy()
    got = run_model(path, feeds)["logits"]
    BU.assert_close_valid(got, ref, np.ones_like(ref, bool), f"{kind} logits B{B} S{S}", TOL)


def test_feature_extraction_and_sentence_embedding(tiny, workdir, winml, run_model):
    ckpt, model = tiny("deberta-v3-feature")
    path = BU.export_dynamic(winml, ckpt, str(workdir / "out_feat"), pooling="mean", normalize=True)
    feeds, tin = BU.padded_feeds(model, 4, 12, 2)
    with torch.no_grad():
        h = model(**tin).last_hidden_state
    m = tin["attention_mask"].unsqueeze(-1).float()
    emb = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1).clamp(min=1e-9), dim=-1).numpy()
    got = run_model(path, feeds)
    valid = np.broadcast_to(feeds["attention_mask"].astype(bool)[:, :, None], h.shape)
    BU.assert_close_valid(got["last_hidden_state"], h.numpy(), valid, "deberta last_hidden_state", TOL)
    BU.assert_close_valid(got["sentence_embedding"], emb, np.ones_like(emb, bool), "deberta sentence_embedding", TOL)


def test_token_classification(tiny, workdir, winml, run_model):
    ckpt, model = tiny("deberta-v3-token")
    path = BU.export_dynamic(winml, ckpt, str(workdir / "out_tok"))
    feeds, tin = BU.padded_feeds(model, 4, 12, 3)
    with torch.no_grad():
        ref = model(**tin).logits.numpy()
    got = run_model(path, feeds)["logits"]
    valid = np.broadcast_to(feeds["attention_mask"].astype(bool)[:, :, None], ref.shape)
    BU.assert_close_valid(got, ref, valid, "deberta token logits", TOL)


def test_question_answering(tiny, workdir, winml, run_model):
    ckpt, model = tiny("deberta-v3-qa")
    path = BU.export_dynamic(winml, ckpt, str(workdir / "out_qa"))
    feeds, tin = BU.padded_feeds(model, 4, 12, 4)
    with torch.no_grad():
        ref = model(**tin)
    got = run_model(path, feeds)
    valid = feeds["attention_mask"].astype(bool)
    BU.assert_close_valid(got["start_logits"], ref.start_logits.numpy(), valid, "deberta start_logits", TOL)
    BU.assert_close_valid(got["end_logits"], ref.end_logits.numpy(), valid, "deberta end_logits", TOL)


def test_inspect_lists_the_features(tiny, winml):
    want = {
        "deberta-v3": ["no absolute positions (position_biased_input false)",
                       "disentangled attention (c2p + p2c; span 8, log buckets up to 64, relative embeddings "
                       "LayerNorm'ed, shared with the content keys and queries)",
                       "attention scores scaled by (head_dim x 3)^-1/2",
                       "2-D attention mask (padded queries too), padded embeddings zeroed",
                       "text-classification head: 2 linears with gelu"],
        "deberta-v2": ["learned positions (64)",
                       "disentangled attention (c2p + p2c; span 12, exact distances up to 12, relative embeddings, "
                       "own position projections)",
                       "token type embeddings (2)", "text-classification head: 2 linears with tanh"],
    }
    for kind, feats in want.items():
        ckpt, _ = tiny(kind)
        r = U.run([winml, "inspect", "-m", ckpt, "-f", "json"])
        assert r.returncode == 0, U.describe(r)
        j = json.loads(r.stdout)
        for f in feats:
            assert f in j["features"], (kind, f, j["features"])
        assert j["tasks"] == ["text-classification", "feature-extraction", "token-classification",
                              "question-answering"], j["tasks"]  # no fill-mask: the mask decoder is not built


def test_saved_position_table_ignored_without_position_biased_input(tiny, workdir, winml, run_model):
    """Some checkpoints keep embeddings.position_embeddings although position_biased_input is false; transformers
    ignores it on load, so must we (and not add it)."""
    from safetensors.torch import load_file, save_file
    import shutil
    ckpt, model = tiny("deberta-v3")
    d = str(workdir / "ckpt_v3_with_pos")
    shutil.copytree(ckpt, d, dirs_exist_ok=True)
    t = load_file(d + "/model.safetensors")
    t["deberta.embeddings.position_embeddings.weight"] = torch.full((64, 32), 9.0)
    save_file(t, d + "/model.safetensors", metadata={"format": "pt"})
    path = BU.export_dynamic(winml, d, str(workdir / "out_v3_with_pos"))
    feeds, tin = BU.padded_feeds(model, 4, 10, 5)
    with torch.no_grad():
        ref = model(**tin).logits.numpy()
    BU.assert_close_valid(run_model(path, feeds)["logits"], ref, np.ones_like(ref, bool), "v3 + saved positions", TOL)


BAD = {
    "conv_kernel_size": (dict(conv_kernel_size=3), "field 'conv_kernel_size'"),
    "pos_att_type_p2p": (dict(pos_att_type=["p2c", "p2p"]), "field 'pos_att_type': only c2p and p2c are modeled"),
    "norm_rel_ebd": (dict(norm_rel_ebd="batch_norm"), "field 'norm_rel_ebd'"),
    "position_buckets_1": (dict(position_buckets=1), "field 'position_buckets'"),
    "share_att_key_str": (dict(share_att_key="yes"), "field 'share_att_key': expected true or false"),
    "head_size": (dict(attention_head_size=4), "field 'attention_head_size'"),
    "embedding_size": (dict(embedding_size=16), "field 'embedding_size'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_unmodeled_config_refused(case, winml_asan, tmp_path):
    import transformers as T
    extra, why = BAD[case]
    cfg = T.DebertaV2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                            vocab_size=96, **BU.DEBERTA_V3).to_dict()
    cfg.update(extra)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    r = U.run([winml_asan, "build", "-m", str(tmp_path / "m"), "--random-weights", "-o", str(out)])
    assert r.returncode == 2, U.describe(r)
    assert why in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not out.exists()


def test_fp16_build_loads_in_onnxruntime_and_agrees(tiny, workdir, winml, tmp_path):
    """`winml build -p fp16`: onnxruntime's default (full) optimization crashed creating a session (its NCHWc pass on
    the c2p MatMul against 3-D position keys); the position keys are 4-D now. Checked in a child process (a crash
    must not take the test run with it), outputs within 1e-2 of transformers."""
    import subprocess
    import sys
    ckpt, model = tiny("deberta-v3")
    out = str(workdir / "out_fp16")
    r = U.run([winml, "build", "-m", ckpt, "-p", "fp16", "-o", out, "-q", "--rebuild"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    feeds, tin = BU.padded_feeds(model, 1, 64, 6)  # the default recipe: batch 1, static 64
    np.savez(tmp_path / "feeds.npz", **feeds)
    code = ("import sys, numpy as np, onnxruntime as o; f = dict(np.load(sys.argv[2])); "
            "s = o.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider']); "
            "np.save(sys.argv[3], s.run(['logits'], f)[0])")
    r = subprocess.run([sys.executable, "-c", code, out + "/model.onnx", str(tmp_path / "feeds.npz"),
                        str(tmp_path / "ort.npy")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"onnxruntime exit {r.returncode}: {r.stderr[-2000:]}"
    with torch.no_grad():
        ref = model(**tin).logits.numpy()
    got = {"onnxruntime": np.load(tmp_path / "ort.npy"), "engine": BU.run_engine(out + "/model.onnx", feeds)["logits"]}
    for name, v in got.items():
        BU.assert_close_valid(v.astype(np.float32), ref, np.ones_like(ref, bool), f"fp16 {name}", 1e-2)
