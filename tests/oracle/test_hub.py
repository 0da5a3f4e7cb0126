"""Oracle tests of `-m ORG/NAME` resolution and downloads (src/hf/hub*.c) against a local hub.

The hub is tests/oracle/hub_server.py (resolve URLs, the hub's headers, a CDN on another origin,
Range, and switches for interrupted / corrupted transfers). The oracle for the cache layout is
huggingface_hub itself: its hf_hub_download fills a second cache from the same server and the two
trees must be identical; its scan_cache_dir / try_to_load_from_cache must find our files; and our
resolver must find the files it downloaded. Tensor bytes are compared with the safetensors package
through wm_sttool. Hostile cases run the ASan+UBSan build when there is one.
"""
import hashlib
import json
import os
import subprocess

import numpy as np
import pytest
import safetensors.numpy as stnp

import oracle_util as U
from hub_server import HubServer, sha256

import huggingface_hub as hf  # noqa: E402  (the layout oracle; pinned in requirements.txt)

TOKEN = "hf_test_token_0123456789"
for _v in ("NO_PROXY", "no_proxy"):  # huggingface_hub (in this process) must reach the local hub directly
    os.environ[_v] = ",".join(x for x in (os.environ.get(_v), "127.0.0.1", "localhost") if x)


# --------------------------------------------------------------------------- helpers

@pytest.fixture
def hub():
    with HubServer(token=TOKEN) as h:
        yield h


@pytest.fixture(scope="session")
def sttool(build_dir):
    p = U.binary(build_dir, "wm_sttool")
    if not os.access(p, os.X_OK):
        pytest.fail(f"wm_sttool not found at {p}", pytrace=False)
    return p


def env_for(hub, cache, **extra):
    env = U.env_for()
    for k in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN_PATH",
              "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy", "HF_HUB_CACHE"):
        env.pop(k, None)
    env.update(HF_HUB_CACHE=str(cache), HF_HOME=str(cache) + "-home", HF_ENDPOINT=hub.url,
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    env.update({k: str(v) for k, v in extra.items()})
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
    return env


def winml_run(winml, args, env, timeout=120):
    try:
        r = subprocess.run([winml, *args], capture_output=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        r = subprocess.CompletedProcess(e.cmd, U.TIMEOUT_RC, e.stdout or b"", (e.stderr or b"") + b"[timeout]")
    r.stdout = r.stdout.decode("utf-8", "replace")
    r.stderr = r.stderr.decode("utf-8", "replace")
    return r


def download(winml, hub, cache, *args, ok=True, **env):
    r = winml_run(winml, ["download", *args, "-f", "json"], env_for(hub, cache, **env))
    if ok:
        assert r.returncode == 0 and not U.crashed(r), U.describe(r)
        return json.loads(r.stdout)
    return r


def weights(seed=0, n=3, size=1000):
    rng = np.random.default_rng(seed)
    return {f"layer.{i}.w": rng.standard_normal(size).astype(np.float32) for i in range(n)}


def tiny_repo(seed=0):
    return {
        "config.json": json.dumps({"model_type": "llama", "seed": seed}).encode(),
        "generation_config.json": b'{"do_sample": false}',
        "tokenizer.json": json.dumps({"model": {"vocab": {"a": 0, "b": seed}}}).encode(),
        "tokenizer_config.json": b'{"bos_token": "a"}',
        "model.safetensors": stnp.save(weights(seed)),
    }


def tree(root):
    """Every entry under root: relative path -> ('dir',) / ('link', target) / ('file', sha256)."""
    out = {}
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            p = os.path.join(dp, n)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("dir",)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", hashlib.sha256(f.read()).hexdigest())
    return out


def fnv1a(b: bytes) -> str:
    h = 0xCBF29CE484222325
    for c in b:
        h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def check_tensors(sttool, folder, root, arrays):
    r = U.run([sttool, "dump", folder, "--root", root])
    assert r.returncode == 0, U.describe(r)
    got = {t["name"]: t for t in json.loads(r.stdout)["tensors"]}
    assert set(got) == set(arrays)
    for name, a in arrays.items():
        assert got[name]["shape"] == list(a.shape)
        assert got[name]["fnv1a64"] == fnv1a(a.tobytes()), name


# --------------------------------------------------------------------------- the layout, against huggingface_hub

def test_fresh_download_matches_huggingface_hub(winml, sttool, hub, tmp_path):
    files = tiny_repo()
    commit = hub.add_commit("org/tiny", files)
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    j = download(winml, hub, ours, "-m", "org/tiny")
    assert j["source"] == "hub" and j["commit"] == commit and j["revision"] == "main"
    assert j["folder"] == str(ours / "models--org--tiny" / "snapshots" / commit)
    assert j["bytes_downloaded"] == sum(len(v) for v in files.values())
    states = {f["name"]: f["state"] for f in j["files"]}
    assert {n for n, s in states.items() if s == "downloaded"} == set(files)
    assert {n for n, s in states.items() if s == "absent"} == {"special_tokens_map.json", "vocab.json", "merges.txt",
                                                               "vocab.txt"}
    # blobs are named by the etag: sha256 for LFS files, git blob sha1 for the others
    blob = {f["name"]: f.get("blob") for f in j["files"]}
    assert blob["model.safetensors"] == sha256(files["model.safetensors"])
    assert blob["config.json"] == hashlib.sha1(b"blob %d\0" % len(files["config.json"]) + files["config.json"]).hexdigest()

    # huggingface_hub fills its own cache from the same server, file by file
    for name in states:
        try:
            hf.hf_hub_download("org/tiny", name, cache_dir=str(theirs), endpoint=hub.url)
        except hf.errors.EntryNotFoundError:
            assert states[name] == "absent"
    a, b = tree(ours), tree(theirs)
    a_locks = {k for k in a if k.startswith(".locks")}
    assert a == b, f"only ours: {sorted(set(a.items()) - set(b.items()))}\nonly theirs: {sorted(set(b.items()) - set(a.items()))}"
    assert a_locks, "lock files like huggingface_hub's"
    assert a["models--org--tiny/refs/main"] == ("file", hashlib.sha256(commit.encode()).hexdigest())
    assert a[f"models--org--tiny/snapshots/{commit}/model.safetensors"] == (
        "link", "../../blobs/" + sha256(files["model.safetensors"]))

    # huggingface_hub reads our cache
    info = hf.scan_cache_dir(str(ours))
    assert not info.warnings and not info.incomplete_files
    (repo,) = info.repos
    (rev,) = repo.revisions
    assert repo.repo_id == "org/tiny" and rev.commit_hash == commit and rev.refs == frozenset({"main"})
    assert rev.nb_files == len(files) and rev.size_on_disk == sum(len(v) for v in files.values())
    for name, s in states.items():
        got = hf.try_to_load_from_cache("org/tiny", name, cache_dir=str(ours))
        if s == "absent":
            assert got is hf.file_download._CACHED_NO_EXIST, name
        else:
            assert got == os.path.join(j["folder"], name)
            with open(got, "rb") as f:
                assert f.read() == files[name]

    # our resolver reads huggingface_hub's cache, offline, without a request
    n_before = len(hub.log)
    j2 = download(winml, hub, theirs, "-m", "org/tiny", HF_HUB_OFFLINE=1)
    assert j2["source"] == "cache" and j2["commit"] == commit and len(hub.log) == n_before
    assert j2["folder"] == str(theirs / "models--org--tiny" / "snapshots" / commit)
    check_tensors(sttool, j2["folder"], j2["root"], weights(0))

    # a second download asks the hub (HEAD) but fetches nothing again
    n_get = len(hub.requests(method="GET"))
    j3 = download(winml, hub, ours, "-m", "org/tiny")
    assert j3["bytes_downloaded"] == 0 and len(hub.requests(method="GET")) == n_get
    assert {f["state"] for f in j3["files"]} == {"present", "absent"}


def test_offline_miss_says_what_to_run(winml, hub, tmp_path):
    hub.add_commit("org/tiny", tiny_repo())
    cache = tmp_path / "c"
    r = download(winml, hub, cache, "-m", "org/tiny@main", ok=False, HF_HUB_OFFLINE=1)
    U.assert_clean_error(r, "winml download", "HF_HUB_OFFLINE=1", "not in the Hugging Face cache",
                         "run `winml download -m org/tiny@main`")
    assert hub.log == [] and not cache.exists()
    # a snapshot that lacks its weights names the missing file
    download(winml, hub, cache, "-m", "org/tiny", "--include", "config.json")
    r = download(winml, hub, cache, "-m", "org/tiny", ok=False, TRANSFORMERS_OFFLINE=1)
    U.assert_clean_error(r, "winml download", "lacks 'model.safetensors'", "HF_HUB_OFFLINE=1")


def test_token_sent_to_the_hub_only_and_never_printed(winml, hub, tmp_path):
    files = tiny_repo()
    hub.add_commit("org/private", files, private=True)
    cache = tmp_path / "c"
    r = download(winml, hub, cache, "-m", "org/private", ok=False)
    U.assert_clean_error(r, "winml download", "repository not found or access refused", "set HF_TOKEN")
    r = download(winml, hub, cache, "-m", "org/private", ok=False, HF_TOKEN="hf_wrong")
    U.assert_clean_error(r, "winml download", "(HF_TOKEN) was refused")
    assert "hf_wrong" not in r.stderr
    hub.log.clear()
    j = download(winml, hub, cache, "-m", "org/private", "-v", HF_TOKEN=TOKEN)
    assert j["commit"] and j["bytes_downloaded"] == sum(len(v) for v in files.values())
    hub_reqs, cdn_reqs = hub.requests(server="hub"), hub.requests(server="cdn")
    assert hub_reqs and cdn_reqs
    assert all(e["auth"] == f"Bearer {TOKEN}" for e in hub_reqs)
    assert all(e["auth"] is None for e in cdn_reqs), "the token must not leave the hub's origin"
    r = winml_run(winml, ["download", "-m", "org/private", "-v"], env_for(hub, cache, HF_TOKEN=TOKEN))
    assert r.returncode == 0 and TOKEN not in r.stdout + r.stderr
    # the token file ($HF_HOME/token), and a token that would inject a header
    home = tmp_path / "c-home"
    home.mkdir(exist_ok=True)
    (home / "token").write_text(TOKEN + "\n")
    hub.log.clear()
    download(winml, hub, tmp_path / "c2", "-m", "org/private", HF_HOME=home)
    assert all(e["auth"] == f"Bearer {TOKEN}" for e in hub.requests(server="hub"))
    hub.log.clear()
    r = download(winml, hub, tmp_path / "c3", "-m", "org/private", ok=False, HF_TOKEN=TOKEN + "\r\nX-Evil: 1")
    U.assert_clean_error(r, "winml download", "a character a token cannot have")
    assert hub.log == [] and TOKEN not in r.stderr


def test_revision_pinning(winml, hub, tmp_path):
    v1 = tiny_repo(1)
    c1 = hub.add_commit("org/m", v1, ref="v1")
    v2 = dict(v1, **{"config.json": b'{"model_type": "llama", "v": 2}'})
    c2 = hub.add_commit("org/m", v2, ref="main")
    cache = tmp_path / "c"
    j = download(winml, hub, cache, "-m", "org/m@v1")
    assert j["commit"] == c1 and j["revision"] == "v1"
    paths = [e["path"] for e in hub.requests(server="hub", method="HEAD")]
    assert "/resolve/v1/" in paths[0] and all(f"/resolve/{c1}/" in p for p in paths[1:]), paths
    assert (cache / "models--org--m/refs/v1").read_text() == c1
    assert open(os.path.join(j["folder"], "config.json"), "rb").read() == v1["config.json"]
    # a commit as revision: no ref written
    j = download(winml, hub, cache, "-m", f"org/m@{c2}")
    assert j["commit"] == c2 and sorted(os.listdir(cache / "models--org--m/refs")) == ["v1"]
    assert open(os.path.join(j["folder"], "config.json"), "rb").read() == v2["config.json"]
    # shared blobs are fetched once
    digest = sha256(v1["model.safetensors"])
    assert len([e for e in hub.requests(server="cdn", method="GET") if digest in e["path"]]) == 1
    # main, then main moves
    assert download(winml, hub, cache, "-m", "org/m")["commit"] == c2
    assert (cache / "models--org--m/refs/main").read_text() == c2
    c3 = hub.add_commit("org/m", dict(v2, **{"config.json": b'{"v": 3}'}))
    assert download(winml, hub, cache, "-m", "org/m")["commit"] == c3
    assert (cache / "models--org--m/refs/main").read_text() == c3
    # every revision resolves offline afterwards
    for spec, c in (("org/m@v1", c1), (f"org/m@{c2}", c2), ("org/m", c3)):
        assert download(winml, hub, cache, "-m", spec, HF_HUB_OFFLINE=1)["commit"] == c
    r = download(winml, hub, cache, "-m", "org/m@nope", ok=False)
    U.assert_clean_error(r, "winml download", "revision 'nope' not found")


def test_sharded_index(winml, sttool, hub, tmp_path):
    parts = [weights(10, 2, 5000), weights(11, 3, 3000)]
    parts[1] = {k.replace("layer", "block"): v for k, v in parts[1].items()}
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    files = {"config.json": b"{}", "tokenizer.json": b"{}"}
    wmap = {}
    for n, p in zip(names, parts):
        files[n] = stnp.save(p)
        wmap.update({k: n for k in p})
    files["model.safetensors.index.json"] = json.dumps({"metadata": {"total_size": 1}, "weight_map": wmap}).encode()
    commit = hub.add_commit("org/sharded", files)
    cache = tmp_path / "c"
    j = download(winml, hub, cache, "-m", "org/sharded")
    got = {f["name"]: f for f in j["files"]}
    assert got["model.safetensors"]["state"] == "absent"
    for n in names + ["model.safetensors.index.json"]:
        assert got[n]["state"] == "downloaded" and got[n]["size"] == len(files[n])
    assert j["weights"].startswith("sharded")
    check_tensors(sttool, j["folder"], j["root"], {**parts[0], **parts[1]})
    for n in names:
        assert hf.try_to_load_from_cache("org/sharded", n, cache_dir=str(cache)) == os.path.join(j["folder"], n)
    # the same checkpoint fetched by huggingface_hub resolves offline with our reader
    theirs = tmp_path / "theirs"
    for n in files:
        hf.hf_hub_download("org/sharded", n, cache_dir=str(theirs), endpoint=hub.url)
    j2 = download(winml, hub, theirs, "-m", "org/sharded", HF_HUB_OFFLINE=1)
    assert j2["source"] == "cache" and j2["commit"] == commit
    check_tensors(sttool, j2["folder"], j2["root"], {**parts[0], **parts[1]})
    # the folder alone fails to open without the model folder as root (links leave the snapshot)
    r = U.run([sttool, "dump", j["folder"]])
    assert r.returncode == 2 and "outside" in r.stderr
    # a shard missing from the hub is named
    files2 = dict(files)
    del files2[names[1]]
    hub.add_commit("org/broken", files2)
    r = download(winml, hub, cache, "-m", "org/broken", ok=False)
    U.assert_clean_error(r, "winml download", f"has no file '{names[1]}'")
    assert commit


# --------------------------------------------------------------------------- transfers

def big_repo(mib=8):
    rng = np.random.default_rng(5)
    w = {"big": rng.integers(0, 255, size=mib << 20, dtype=np.uint8)}
    return {"config.json": b"{}", "model.safetensors": stnp.save(w)}, w


def test_resume_after_interruption(winml, sttool, hub, tmp_path):
    files, w = big_repo(8)
    digest = sha256(files["model.safetensors"])
    hub.add_commit("org/big", files)
    cache = tmp_path / "c"
    blobs = cache / "models--org--big/blobs"
    hub.interrupt[digest] = (1 << 20, None)  # every answer stops after 1 MiB
    r = download(winml, hub, cache, "-m", "org/big", ok=False)
    U.assert_clean_error(r, "winml download", "transfer interrupted after", "run the same command again to resume")
    ranges = [e["range"] for e in hub.requests(server="cdn", method="GET")]
    assert ranges == [None, "bytes=1048576-", "bytes=2097152-", "bytes=3145728-"], ranges  # 3 retries, resumed
    inc = blobs / (digest + ".incomplete")
    assert inc.stat().st_size == 4 << 20 and not (blobs / digest).exists()
    snap = cache / "models--org--big/snapshots"
    assert not any(p.name == "model.safetensors" for p in snap.rglob("*")), "no half file in snapshots/"
    # huggingface_hub sees it as an incomplete download
    assert len(hf.scan_cache_dir(str(cache)).incomplete_files) == 1
    # run again: resumed where it stopped
    del hub.interrupt[digest]
    hub.log.clear()
    j = download(winml, hub, cache, "-m", "org/big")
    assert [e["range"] for e in hub.requests(server="cdn", method="GET")] == ["bytes=4194304-"]
    assert not inc.exists() and (blobs / digest).stat().st_size == len(files["model.safetensors"])
    check_tensors(sttool, j["folder"], j["root"], w)
    # an interruption inside one run is retried transparently
    hub.interrupt[digest] = (3 << 20, 1)
    hub.log.clear()
    j = download(winml, hub, tmp_path / "c2", "-m", "org/big")
    assert [e["range"] for e in hub.requests(server="cdn", method="GET")] == [None, "bytes=3145728-"]
    check_tensors(sttool, j["folder"], j["root"], w)


def test_resume_when_the_server_ignores_range(winml, hub, tmp_path):
    files, _ = big_repo(2)
    digest = sha256(files["model.safetensors"])
    hub.add_commit("org/big", files)
    cache = tmp_path / "c"
    hub.interrupt[digest] = (1 << 20, 1)
    hub.ignore_range = True
    download(winml, hub, cache, "-m", "org/big")
    blob = cache / "models--org--big/blobs" / digest
    assert blob.read_bytes() == files["model.safetensors"]


def test_corrupted_transfer_rejected(winml, hub, tmp_path):
    files, _ = big_repo(1)
    digest = sha256(files["model.safetensors"])
    hub.add_commit("org/big", files)
    cache = tmp_path / "c"
    hub.corrupt.add(digest)
    r = download(winml, hub, cache, "-m", "org/big", ok=False)
    U.assert_clean_error(r, "winml download", "corrupted transfer", f"the hub announced {digest}")
    blobs = cache / "models--org--big/blobs"
    assert not (blobs / digest).exists() and not (blobs / (digest + ".incomplete")).exists()
    assert not list((cache / "models--org--big/snapshots").rglob("model.safetensors"))
    hub.corrupt.clear()
    download(winml, hub, cache, "-m", "org/big")
    assert (blobs / digest).read_bytes() == files["model.safetensors"]
    # a small (git) file is checked against its git blob sha1
    hub.corrupt.add(sha256(files["config.json"]))
    r = download(winml, hub, tmp_path / "c2", "-m", "org/big", ok=False)
    U.assert_clean_error(r, "winml download", "corrupted transfer", "git blob sha1")


# --------------------------------------------------------------------------- refusals

def test_missing_files_and_pickle_refused(winml, hub, tmp_path):
    cache = tmp_path / "c"
    hub.add_commit("org/noconfig", {"model.safetensors": stnp.save(weights())})
    r = download(winml, hub, cache, "-m", "org/noconfig", ok=False)
    U.assert_clean_error(r, "winml download", "has no file 'config.json'")
    hub.add_commit("org/pickle", {"config.json": b"{}", "pytorch_model.bin": b"\x80\x02}q\x00." * 100})
    r = download(winml, hub, cache, "-m", "org/pickle", ok=False)
    U.assert_clean_error(r, "winml download", "only pickle weights (pytorch_model.bin)", "safetensors")
    assert not [e for e in hub.log if e["method"] == "GET" and "pytorch_model" in e["path"]], "never downloaded"
    assert not [e for e in hub.requests(server="cdn")]
    hub.add_commit("org/noweights", {"config.json": b"{}"})
    r = download(winml, hub, cache, "-m", "org/noweights", ok=False)
    U.assert_clean_error(r, "winml download", "neither model.safetensors nor model.safetensors.index.json")
    r = download(winml, hub, cache, "-m", "org/absent", ok=False)
    U.assert_clean_error(r, "winml download", "repository not found")
    assert not (cache / "models--org--absent").exists(), "a refused request leaves nothing"
    r = download(winml, hub, tmp_path / "c9", "-m", "org/absent", ok=False, HF_ENDPOINT="http://127.0.0.1:9")
    U.assert_clean_error(r, "winml download", "cannot reach the hub at http://127.0.0.1:9", "HF_HUB_OFFLINE=1")
    assert not (tmp_path / "c9").exists()
    r = download(winml, hub, cache, "-m", "org/pickle", "--include", "pytorch_model.bin", ok=False)
    U.assert_clean_error(r, "winml download", "pickle weights are never downloaded")


def test_include_selection(winml, hub, tmp_path):
    files = dict(tiny_repo(), **{"tokenizer.model": b"\x0a\x01x"})
    hub.add_commit("org/tiny", files)
    cache = tmp_path / "c"
    j = download(winml, hub, cache, "-m", "org/tiny", "--include", "*.json")
    assert {f["name"] for f in j["files"] if f["state"] != "absent"} == {
        "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"}
    assert not hub.requests(server="cdn"), "no weights fetched"
    j = download(winml, hub, cache, "-m", "org/tiny", "--include", "tokenizer.model")
    assert [(f["name"], f["state"]) for f in j["files"]] == [("tokenizer.model", "downloaded")]
    r = download(winml, hub, cache, "-m", "org/tiny", "--include", "missing.txt", ok=False)
    U.assert_clean_error(r, "winml download", "has no file 'missing.txt'")
    r = download(winml, hub, cache, "-m", "org/tiny", "--include", "../x", ok=False)
    U.assert_clean_error(r, "winml download", "'..'")


# --------------------------------------------------------------------------- hostile input (ASan+UBSan build)

def test_adversarial_cache_and_hub(winml_asan, hub, tmp_path):
    files = tiny_repo()
    commit = hub.add_commit("org/tiny", files)
    cache = tmp_path / "c"
    download(winml_asan, hub, cache, "-m", "org/tiny")
    model = cache / "models--org--tiny"
    # item 15: refs/main = "../../x", offline and online
    (model / "refs/main").write_text("../../x")
    for env in ({"HF_HUB_OFFLINE": 1}, {}):
        r = download(winml_asan, hub, cache, "-m", "org/tiny", ok=False, **env)
        U.assert_clean_error(r, "winml download", "refs/main: holds '../../x'", "40 lowercase hex")
    (model / "refs/main").write_text(commit)
    # a snapshot link that leaves the model folder
    secret = tmp_path / "secret.json"
    secret.write_text("{}")
    link = model / "snapshots" / commit / "config.json"
    link.unlink()
    os.symlink("../../../../secret.json", link)
    r = download(winml_asan, hub, cache, "-m", "org/tiny", ok=False, HF_HUB_OFFLINE=1)
    U.assert_clean_error(r, "winml download", "outside the model folder", "config.json")
    link.unlink()
    os.symlink("/etc/passwd", link)
    r = download(winml_asan, hub, cache, "-m", "org/tiny", ok=False, HF_HUB_OFFLINE=1)
    U.assert_clean_error(r, "winml download", "outside the model folder")
    # the listing reports it and does not follow it
    r = winml_run(winml_asan, ["cache", "list", "-f", "json"], env_for(hub, cache))
    assert r.returncode == 0 and not U.crashed(r), U.describe(r)
    assert any("outside its model folder" in w for w in json.loads(r.stdout)["warnings"])
    # an index from the hub naming a shard with ../
    evil = {"config.json": b"{}", "model.safetensors.index.json": json.dumps(
        {"weight_map": {"w": "../../../../evil.safetensors"}}).encode()}
    hub.add_commit("org/evil", evil)
    hub.log.clear()
    r = download(winml_asan, hub, cache, "-m", "org/evil", ok=False)
    U.assert_clean_error(r, "winml download", "shard file name '../../../../evil.safetensors'", "'..'")
    assert not [e for e in hub.log if "evil.safetensors" in e["path"]], "no request for the hostile name"
    # hostile headers: a commit that is a path, an etag that is a path, a size that lies
    hub.add_commit("org/h", tiny_repo())
    for hdr, val, needle in (("X-Repo-Commit", "../../../etc", "no valid X-Repo-Commit"),
                             ("ETag", '"../../evil"', "no usable ETag"),
                             ("X-Linked-Size", "99999999999999999999", "no valid X-Linked-Size")):
        hub.override = {"config.json" if hdr != "X-Linked-Size" else "model.safetensors": {hdr: val}}
        r = download(winml_asan, hub, tmp_path / "h", "-m", "org/h", ok=False)
        U.assert_clean_error(r, "winml download", needle)
    hub.override = {"model.safetensors": {"X-Linked-Size": "10"}}
    r = download(winml_asan, hub, tmp_path / "h", "-m", "org/h", ok=False)
    U.assert_clean_error(r, "winml download", "the hub's metadata 10", "refused before writing")
    assert not list((tmp_path / "h").rglob("*.incomplete"))
    hub.override = {}
    for dp, dns, fns in os.walk(tmp_path):
        assert "evil.safetensors" not in fns


def test_download_size_disagrees_or_does_not_fit(winml_asan, hub, tmp_path):
    """The size the hub's metadata announces (X-Linked-Size of the LFS pointer) is checked against the download's
    own Content-Length before a byte is written, and against the free disk space before anything is created:
    a clear message naming the file and both sizes, exit 2, no partial blob left."""
    files = tiny_repo()
    hub.add_commit("org/s", files)
    digest, size = sha256(files["model.safetensors"]), len(files["model.safetensors"])
    cache = tmp_path / "c"

    def no_partial():
        assert not list(cache.rglob("*.incomplete")) and not list(cache.rglob(f"blobs/{digest}"))

    # the CDN announces fewer (it used to keep a partial file and ask for a resume that could never finish)
    for lie in (-7, 5):
        hub.length_lie = {digest: lie}
        r = download(winml_asan, hub, cache, "-m", "org/s", ok=False)
        U.assert_clean_error(r, "winml download", "model.safetensors", f"announces {size + lie} bytes",
                             f"the hub's metadata {size}", "refused before writing")
        no_partial()
    hub.length_lie = {}
    # the metadata announces more than the disk has free: refused before the CDN is asked
    hub.override = {"model.safetensors": {"X-Linked-Size": str(10 ** 15)}}
    hub.log.clear()
    r = download(winml_asan, hub, cache, "-m", "org/s", ok=False)
    U.assert_clean_error(r, "winml download", "model.safetensors: needs 1000000000000000 bytes in", "are free",
                         "nothing was written")
    assert not hub.requests(server="cdn"), "no download may start"
    no_partial()
    hub.override = {}
    # and the honest hub still works in the same cache
    download(winml_asan, hub, cache, "-m", "org/s")


def test_adversarial_local_folders(winml_asan, tmp_path):
    env = U.env_for()
    env["HF_HUB_CACHE"] = str(tmp_path / "c")
    d = tmp_path / "pickle"
    d.mkdir()
    (d / "config.json").write_text("{}")
    (d / "pytorch_model.bin").write_bytes(b"\x80\x02")
    r = winml_run(winml_asan, ["download", "-m", str(d)], env)
    U.assert_clean_error(r, "winml download", "only pickle weights (pytorch_model.bin)", "use safetensors")
    for spec, needle in (("org/../x", "no such file or folder"), ("org/x@../../etc", "'..'"),
                         ("org/a--b", "'--'"), ("./missing", "no such file or folder")):
        r = winml_run(winml_asan, ["download", "-m", spec], dict(env, HF_HUB_OFFLINE="1"))
        U.assert_clean_error(r, "winml download", needle)


# --------------------------------------------------------------------------- winml cache

def test_cache_list_matches_scan_cache_dir(winml, hub, tmp_path):
    a = tiny_repo(1)
    ca = hub.add_commit("org/a", a, tags=("v1",))
    b = dict(a, **{"config.json": b'{"b": 1}'})
    cb = hub.add_commit("org/b", b)
    cache = tmp_path / "c"
    download(winml, hub, cache, "-m", "org/a")
    download(winml, hub, cache, "-m", "org/a@v1")
    download(winml, hub, cache, "-m", "org/b")
    r = winml_run(winml, ["cache", "list", "-f", "json"], env_for(hub, cache))
    assert r.returncode == 0, U.describe(r)
    got = json.loads(r.stdout)
    info = hf.scan_cache_dir(str(cache))
    want = sorted((repo.repo_id, ",".join(sorted(rev.refs)), rev.commit_hash, rev.nb_files, rev.size_on_disk,
                   str(rev.snapshot_path)) for repo in info.repos for rev in repo.revisions)
    ours = sorted((m["repo"], m["revision"], m["commit"], m["files"], m["size"], m["path"]) for m in got["models"])
    assert ours == want and {ca, cb} == {m["commit"] for m in got["models"]}
    assert got["size_on_disk"] == info.size_on_disk and got["warnings"] == []
    r = winml_run(winml, ["cache", "path"], env_for(hub, cache))
    assert r.returncode == 0 and r.stdout.strip() == str(cache)
    r = winml_run(winml, ["cache", "list"], env_for(hub, cache))
    assert r.returncode == 0 and "org/a" in r.stdout and "org/b" in r.stdout


def test_progress_on_a_tty_only(winml, hub, tmp_path):
    files, _ = big_repo(2)
    hub.add_commit("org/big", files)
    env = env_for(hub, tmp_path / "c")
    r = winml_run(winml, ["download", "-m", "org/big"], env)  # stderr is a pipe: quiet
    assert r.returncode == 0 and r.stderr == "", U.describe(r)
    import pty
    master, slave = pty.openpty()
    p = subprocess.Popen([winml, "download", "-m", "org/big"], stdout=subprocess.DEVNULL, stderr=slave,
                         env=env_for(hub, tmp_path / "c2"))
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    assert p.wait(timeout=60) == 0
    os.close(master)
    assert b"model.safetensors" in out and b"MiB 100%" in out, out
