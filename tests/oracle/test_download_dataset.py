"""`winml download --dataset ORG/NAME [--config C] [--split S]` (issue 32) against the local fake hub
(hub_server.py, which lists a repository's files at /api/datasets/ORG/NAME/tree/REV and serves them under
/datasets/ORG/NAME/resolve/...): the split's table files land in the hub cache as huggingface_hub lays out a dataset
repository (datasets--ORG--NAME/refs/main, snapshots/COMMIT/PATH -> ../../blobs/ETAG: the same tree as
huggingface_hub's hf_hub_download(repo_type="dataset") of those files from the same server), other splits and configs
are not fetched, a listing in pages (Link: rel="next") is read to its end (a next page on another origin refused), and
the data set resolver (what `winml eval --dataset ORG/NAME --split S` reads offline) finds
them: wm_tabletool reads pyarrow's rows back. A hostile listing (a path with "..", an absolute path, not an array)
exits 2 naming the repository, writing no file outside the cache folder.
"""
import io
import json
import shutil
import os

import pyarrow as pa
import pyarrow.parquet as pq

import pytest

import oracle_util as U
from test_datasets import read, tabletool  # noqa: F401  (tabletool: a fixture)
from test_hub import download, env_for, hub, tree, winml_run  # noqa: F401  (hub: the fake hub fixture)
from test_run import bert_vocab  # noqa: F401  (a fixture)


def parquet(texts):
    b = io.BytesIO()
    pq.write_table(pa.table({"text": texts, "label": list(range(len(texts)))}), b)
    return b.getvalue()


FILES = {"README.md": b"# a dataset card\n",
         "data/test-00000-of-00002.parquet": parquet(["t0", "t1"]),
         "data/test-00001-of-00002.parquet": parquet(["t2"]),
         "data/train-00000-of-00001.parquet": parquet(["train"]),
         "sst2/validation-00000-of-00001.parquet": parquet(["v-sst2"]),
         "mnli/validation_matched-00000-of-00001.parquet": parquet(["vm"])}


def test_download_split_into_the_cache(winml, hub, tabletool, tmp_path, monkeypatch):  # noqa: F811
    sha = hub.add_commit("org/ds", FILES, repo_type="dataset")
    cache = tmp_path / "cache"
    got = download(winml, hub, cache, "--dataset", "org/ds", "--split", "test")
    root = cache / "datasets--org--ds"
    assert got["dataset"] == "org/ds" and got["commit"] == sha and got["folder"] == str(root / "snapshots" / sha)
    assert [f["name"] for f in got["files"]] == ["data/test-00000-of-00002.parquet", "data/test-00001-of-00002.parquet"]
    assert (root / "refs" / "main").read_text() == sha
    for f in got["files"]:
        p = root / "snapshots" / sha / f["name"]
        assert os.path.islink(p) and p.read_bytes() == FILES[f["name"]], f
        assert os.path.realpath(p).startswith(str(root / "blobs")), f
    assert not (root / "snapshots" / sha / "data" / "train-00000-of-00001.parquet").exists()
    # huggingface_hub's hf_hub_download(repo_type="dataset") of the same files from the same server: the same tree
    import huggingface_hub as hf
    theirs = tmp_path / "theirs"
    for f in got["files"]:
        hf.hf_hub_download("org/ds", f["name"], repo_type="dataset", cache_dir=str(theirs), endpoint=hub.url)
    a, b = tree(cache), tree(theirs)
    assert a == b, f"only ours: {sorted(set(a.items()) - set(b.items()))}\nonly theirs: {sorted(set(b.items()) - set(a.items()))}"
    # a config's folder
    got = download(winml, hub, cache, "--dataset", "org/ds", "--config", "sst2", "--split", "validation")
    assert [f["name"] for f in got["files"]] == ["sst2/validation-00000-of-00001.parquet"]
    # the resolver reads what was downloaded, offline
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rows = read(tabletool, "org/ds", "0", "", "test")["rows"]
    assert [bytes.fromhex(r[0]).decode() for r in rows] == ["t0", "t1", "t2"]
    rows = read(tabletool, "org/ds", "0", "sst2", "validation")["rows"]
    assert [bytes.fromhex(r[0]).decode() for r in rows] == ["v-sst2"]
    # a listing in pages of 2 entries (the hub's Link: rel="next"): every page read
    hub.tree_page_size = 2
    paged = tmp_path / "paged"
    got = download(winml, hub, paged, "--dataset", "org/ds", "--split", "test")
    assert [f["name"] for f in got["files"]] == ["data/test-00000-of-00002.parquet", "data/test-00001-of-00002.parquet"]
    assert len(hub.requests(contains="/api/datasets/org/ds/tree/")) >= 5
    hub.tree_next_base = hub.cdn_url  # a next page on another origin is refused
    r = download(winml, hub, tmp_path / "elsewhere", "--dataset", "org/ds", "--split", "test", ok=False)
    U.assert_clean_error(r, "winml download", "org/ds", "not on the hub")
    hub.tree_page_size, hub.tree_next_base = 0, None
    # nothing of the split: exit 2 saying what was looked for
    r = download(winml, hub, cache, "--dataset", "org/ds", "--split", "dev", ok=False)
    U.assert_clean_error(r, "winml download", "org/ds", "split dev")
    r = download(winml, hub, cache, "--dataset", "org/nothing", ok=False)
    U.assert_clean_error(r, "winml download", "org/nothing", "not found")
    r = download(winml, hub, cache, "--dataset", "org/ds", "-m", "org/m", ok=False)
    U.assert_clean_error(r, "winml download", "--dataset")


def test_hostile_listing(winml_asan, hub, tmp_path):  # noqa: F811
    """Under ASan: listings naming paths outside the snapshot, or not an array, exit 2 naming the repository; no
    file is written outside the cache."""
    hub.add_commit("org/bad", {"data/test-0.parquet": parquet(["x"])}, repo_type="dataset")
    cases = [json.dumps([{"type": "file", "path": "../../../escape/test-0.parquet"}]),
             json.dumps([{"type": "file", "path": "/abs/test-0.parquet"}]),
             json.dumps([{"type": "file", "path": "data/test-\u0001.parquet"}]),
             json.dumps({"type": "file", "path": "data/test-0.parquet"}),
             json.dumps([{"type": "file"}]),
             "[" * 100000]
    for i, body in enumerate(cases):
        hub.tree_override["datasets/org/bad"] = body.encode()
        cache = tmp_path / f"c{i}"
        r = download(winml_asan, hub, cache, "--dataset", "org/bad", "--split", "test", ok=False)
        U.assert_clean_error(r, "winml download", "org/bad")
        assert not (tmp_path / "escape").exists() and not os.path.exists("/abs")


def test_recipe_dataset_downloaded_then_found_offline(winml, hub, bert_vocab, tmp_path):  # noqa: F811
    """One reference recipe's data set end to end: distilbert-sst-2's recipes name eval.dataset nyu-mll/glue, config
    sst2. `winml download --dataset nyu-mll/glue --config sst2 --split validation` from the fake hub (the glue
    repository's layout: sst2/validation-*.parquet with sentence, label, idx), then offline (HF_HUB_OFFLINE=1, no
    request reaches the hub): `winml build -c` of the w8a16 recipe calibrates on the downloaded rows (the manifest names
    the cached file), and `winml eval --mode onnx --dataset nyu-mll/glue --dataset-config sst2 --split validation`
    of the recipe's float build scores every row: accuracy and F1 equal scikit-learn's on transformers' predictions."""
    import numpy as np
    import torch
    import transformers as T
    from sklearn.metrics import accuracy_score, f1_score
    ref = os.path.join(os.path.dirname(U.ROOT), "shared", "reference-recipes",
                       "distilbert_distilbert-base-uncased-finetuned-sst-2-english")
    recipes = {p: os.path.join(ref, f"text-classification_{p}_config.json") for p in ("fp16", "w8a16")}
    for p in recipes.values():
        ds = json.load(open(p))["eval"]["dataset"]
        assert (ds["path"], ds["name"]) == ("nyu-mll/glue", "sst2"), ds
    sents = ["it is a charming and often affecting journey.", "unflinchingly bleak and desperate",
             "allows us to hope that nolan is poised to embark a major career", "the acting, costumes, music are fine",
             "it's slow -- very, very slow.", "a sometimes tedious film.", "or doing last year's taxes with your ex-wife.",
             "you don't have to know about music to appreciate the film's easygoing blend of comedy and romance.",
             "in exactly 89 minutes, most of which passed as slowly as if i'd been sitting naked on an igloo",
             "the mesmerizing performances of the leads keep the film grounded"]
    rng = np.random.default_rng(5)
    gold = [int(v) for v in rng.integers(0, 2, len(sents))]

    def table(texts, labels):
        b = io.BytesIO()
        pq.write_table(pa.table({"sentence": texts, "label": labels, "idx": list(range(len(texts)))}), b)
        return b.getvalue()
    hub.add_commit("nyu-mll/glue", {"README.md": b"# GLUE\n",
                                    "sst2/validation-00000-of-00001.parquet": table(sents, gold),
                                    "sst2/train-00000-of-00001.parquet": table(["train row"], [0]),
                                    "mrpc/validation-00000-of-00001.parquet": table(["mrpc row"], [1])},
                   repo_type="dataset")
    cache = tmp_path / "cache"
    got = download(winml, hub, cache, "--dataset", "nyu-mll/glue", "--config", "sst2", "--split", "validation")
    assert [f["name"] for f in got["files"]] == ["sst2/validation-00000-of-00001.parquet"], got
    cached = os.path.join(got["folder"], "sst2", "validation-00000-of-00001.parquet")
    # a tiny distilbert of the recipe's sizes (512 positions, the bert vocabulary) with its tokenizer
    tok = T.DistilBertTokenizerFast(vocab_file=bert_vocab, do_lower_case=True)
    for seed in range(50):  # the first seed whose random model predicts both labels, with no near tie
        torch.manual_seed(seed)
        m = T.DistilBertForSequenceClassification(T.DistilBertConfig(
            vocab_size=30522, dim=32, hidden_dim=64, n_layers=1, n_heads=4, max_position_embeddings=512,
            initializer_range=0.2)).eval()  # wide weights: the tokens, not the [CLS] embedding alone, decide
        with torch.no_grad():
            logits = [m(**tok(s, return_tensors="pt", truncation=True, max_length=512)).logits[0] for s in sents]
        pred = [int(x.argmax()) for x in logits]
        if len(set(pred)) == 2 and min(float(abs(x[0] - x[1])) for x in logits) > 1e-3:
            break
    assert len(set(pred)) == 2, pred  # both labels predicted: the score can tell right from wrong
    ck = tmp_path / "ck"
    m.save_pretrained(ck)
    tok.save_pretrained(ck)
    n_req = len(hub.requests())
    offline = env_for(hub, cache, HF_HUB_OFFLINE="1")
    r = winml_run(winml, ["build", "-c", recipes["w8a16"], "-m", str(ck), "-o", str(tmp_path / "q"), "-q"], offline,
                  timeout=600)
    assert r.returncode == 0, U.describe(r)
    man = json.load(open(tmp_path / "q" / "build_manifest.json"))
    cal = next(s for s in man["stages"] if s["name"] == "quant")["calibration"]
    assert cal["data"] == "dataset" and cal["samples"] == len(sents), cal
    assert cached in json.dumps(cal), cal
    r = winml_run(winml, ["build", "-c", recipes["fp16"], "-m", str(ck), "-o", str(tmp_path / "b"), "-q"], offline,
                  timeout=600)
    assert r.returncode == 0, U.describe(r)
    r = winml_run(winml, ["eval", "--mode", "onnx", "-m", str(tmp_path / "b"), "--dataset", "nyu-mll/glue",
                          "--dataset-config", "sst2", "--split", "validation", "-f", "json"], offline, timeout=600)
    assert r.returncode == 0, U.describe(r)
    res = json.loads(r.stdout)["metrics"]
    assert len(hub.requests()) == n_req, hub.requests()[n_req:]  # offline: the hub was not asked again
    assert res["samples"] == len(sents), res
    assert res["accuracy"] == pytest.approx(accuracy_score(gold, pred)), (res, gold, pred)
    assert res["f1"] == pytest.approx(f1_score(gold, pred)), (res, gold, pred)
    # without --dataset, the build's recipe names it (eval.dataset path, name, split), as the reference's eval does
    r = winml_run(winml, ["eval", "--mode", "onnx", "-m", str(tmp_path / "b"), "-f", "json"], offline, timeout=600)
    assert r.returncode == 0, U.describe(r)
    got = json.loads(r.stdout)
    assert got["dataset_from"] == "recipe" and got["dataset"] == "nyu-mll/glue", got
    assert got["metrics"] == res, (got["metrics"], res)
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(tmp_path / "b" / "model.onnx", bare / "model.onnx")
    r = winml_run(winml, ["eval", "--mode", "onnx", "-m", str(bare)], offline, timeout=60)
    assert r.returncode == 2 and "no --dataset" in r.stderr and "winml_build_config.json" in r.stderr, U.describe(r)
    U.note(f"download --dataset nyu-mll/glue sst2 validation -> offline build calibration ({cal['samples']} rows) and "
           f"eval --mode onnx: accuracy {res['accuracy']:.2f} = scikit-learn's on transformers' predictions")
