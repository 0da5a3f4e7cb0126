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
import os

import pyarrow as pa
import pyarrow.parquet as pq

import oracle_util as U
from test_datasets import read, tabletool  # noqa: F401  (tabletool: a fixture)
from test_hub import download, hub, tree  # noqa: F401  (hub: the fake hub fixture)


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
