#!/usr/bin/env python3
"""Resident memory while resolving and opening a large sharded checkpoint (not part of CI).

Writes a checkpoint of --gib GiB in --shards shards with the safetensors package, lays it out
as a Hugging Face cache entry (blobs named by sha256, relative snapshot links, refs/main) -
or, with --download, serves it from tests/oracle/hub_server.py and lets `winml download`
fetch it (timing the transfer and its sha256 checks) - then runs build/wm_hubtool, which
resolves `org/big` offline and opens every shard with the zero-copy reader, and reports the
resident set size after each step; with the pages touched for comparison.

    .venv/bin/python bench/rss_sharded.py [--gib 3] [--shards 3] [--dir /tmp/wm_bench_hub] [--download [--peer]]
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import safetensors.numpy as stnp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))


def write_shards(src, gib, shards):
    per = (gib << 30) // shards
    n_t = 8
    elems = per // n_t // 4
    names, wmap = [], {}
    for s in range(shards):
        name = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        arrays = {f"layers.{s}.w{k}": (np.arange(elems, dtype=np.float32) % 997) * (s + k + 1) for k in range(n_t)}
        stnp.save_file(arrays, os.path.join(src, name))
        del arrays
        names.append(name)
        wmap.update({f"layers.{s}.w{k}": name for k in range(n_t)})
    index = {"metadata": {"total_size": shards * n_t * elems * 4}, "weight_map": wmap}
    with open(os.path.join(src, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f)
    with open(os.path.join(src, "config.json"), "w") as f:
        json.dump({"model_type": "bench"}, f)
    return names


def sha256_file(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    return h.hexdigest()


def lay_out_cache(src, cache):
    model = os.path.join(cache, "models--org--big")
    commit = hashlib.sha1(b"bench").hexdigest()
    snap = os.path.join(model, "snapshots", commit)
    os.makedirs(os.path.join(model, "blobs"))
    os.makedirs(snap)
    os.makedirs(os.path.join(model, "refs"))
    for name in sorted(os.listdir(src)):
        digest = sha256_file(os.path.join(src, name))
        os.rename(os.path.join(src, name), os.path.join(model, "blobs", digest))
        os.symlink(f"../../blobs/{digest}", os.path.join(snap, name))
    with open(os.path.join(model, "refs", "main"), "w") as f:
        f.write(commit)


def run_tool(tool, env, *extra):
    r = subprocess.run(["/bin/sh", "-c", '"$@" & wait $!', "sh", tool, "open", "org/big", *extra],
                       capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit(f"wm_hubtool failed: {r.stderr}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=int, default=3)
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/wm_bench_hub")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--download", action="store_true")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--peer", action="store_true", help="with --download: time huggingface_hub on the same files")
    a = ap.parse_args()
    tool, winml = os.path.join(a.build, "wm_hubtool"), os.path.join(a.build, "winml")
    shutil.rmtree(a.dir, ignore_errors=True)
    src, cache = os.path.join(a.dir, "src"), os.path.join(a.dir, "cache")
    os.makedirs(src)
    t0 = time.time()
    write_shards(src, a.gib, a.shards)
    print(f"wrote {a.gib} GiB in {a.shards} shards with safetensors in {time.time() - t0:.1f} s")
    env = dict(os.environ, HF_HUB_CACHE=cache, HF_HOME=os.path.join(a.dir, "home"), NO_PROXY="127.0.0.1")
    try:
        if a.download:
            from hub_server import FileBlob, HubServer
            with HubServer() as hub:
                files = {n: FileBlob(os.path.join(src, n)) if n.endswith(".safetensors") else
                         open(os.path.join(src, n), "rb").read() for n in os.listdir(src)}
                hub.add_commit("org/big", files)
                t0 = time.time()
                r = subprocess.run([winml, "download", "-m", "org/big", "-f", "json"], capture_output=True,
                                   text=True, env=dict(env, HF_ENDPOINT=hub.url))
                dt = time.time() - t0
                if r.returncode:
                    sys.exit(f"winml download failed: {r.stderr}")
                got = json.loads(r.stdout)["bytes_downloaded"]
                print(f"winml download: {got / 2**30:.2f} GiB from the local hub in {dt:.1f} s "
                      f"({got / 2**20 / dt:.0f} MiB/s, transfer + sha256 check + rename)")
                if a.peer:  # huggingface_hub, same server, same files, same run
                    import huggingface_hub as hf
                    peer = os.path.join(a.dir, "peer")
                    t0 = time.time()
                    for n in files:
                        hf.hf_hub_download("org/big", n, cache_dir=peer, endpoint=hub.url)
                    pt = time.time() - t0
                    print(f"huggingface_hub hf_hub_download: same files in {pt:.1f} s ({got / 2**20 / pt:.0f} MiB/s); "
                          f"winml / huggingface_hub time ratio {dt / pt:.2f}")
                    shutil.rmtree(peer, ignore_errors=True)
        else:
            lay_out_cache(src, cache)
        env["HF_HUB_OFFLINE"] = "1"
        cold = run_tool(tool, env)
        touched = run_tool(tool, env, "--touch")
        mib = 1 << 20
        print(f"checkpoint: {cold['bytes'] / 2**30:.2f} GiB, {cold['shards']} shards, {cold['tensors']} tensors "
              f"(resolved from the {cold['source']})")
        print(f"RSS at start          {cold['rss_start'] / mib:8.1f} MiB")
        print(f"RSS after resolve     {cold['rss_resolved'] / mib:8.1f} MiB")
        print(f"RSS after open        {cold['rss_opened'] / mib:8.1f} MiB   (every shard mapped, headers parsed)")
        print(f"peak RSS (no touch)   {cold['peak_rss'] / mib:8.1f} MiB")
        print(f"RSS after touching    {touched['rss_touched'] / mib:8.1f} MiB   (one byte of every 4 KiB page read)")
        print(json.dumps({"open": cold, "touched": touched}))
    finally:
        if not a.keep:
            shutil.rmtree(a.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
