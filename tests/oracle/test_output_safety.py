"""Outputs never lose a user's files (issue 30): what build, export, optimize, quantize and the JSON writers may
replace, the output lock, signals, what a killed run leaves and the next run sweeps, the model/data pair switched in
one step, a mixed pair refused on load, and builds that cannot fit on the disk.

Each case runs the plain and the ASan+UBSan binary where it is deterministic; the cases that race a running build
(signals, locks held by a live build, a folder appearing meanwhile) use the plain one, which is fast enough to
race reliably."""
import fcntl
import glob
import hashlib
import json
import os
import signal
import subprocess
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import builder_util as BU
import oracle_util as U


def tree(d):
    """{relative path: sha256} of every file under d (links as their target text)."""
    out = {}
    for root, dirs, files in os.walk(d):
        for f in files + [x for x in dirs if os.path.islink(os.path.join(root, x))]:
            p = os.path.join(root, f)
            rel = os.path.relpath(p, d)
            out[rel] = "link:" + os.readlink(p) if os.path.islink(p) else hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


def small_config(d, **over):
    """A Qwen2 config.json (random weights are built from it): tiny unless over says otherwise."""
    os.makedirs(d, exist_ok=True)
    cfg = dict(BU.SEEDS["trl-internal-testing/tiny-Qwen2ForCausalLM-2.5"])
    cfg.update(over)
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    return d


@pytest.fixture(params=["plain", "asan"])
def bins(request, winml, winml_asan):
    return winml if request.param == "plain" else winml_asan


@pytest.fixture(scope="module")
def ckpt(request):
    """A checkpoint with real safetensors weights (the input a wrong -o must never touch)."""
    d = str(U.scratch(request, "ck") / "qwen2")
    BU.make_tiny("qwen2", d)
    return d


@pytest.fixture(scope="module")
def big_cfg(request):
    """A config whose random-weight build takes a few seconds (437 MB of weights): long enough to race."""
    return small_config(str(U.scratch(request, "big") / "cfg"), hidden_size=512, intermediate_size=2048,
                        num_hidden_layers=8, vocab_size=151936)


def build(winml, src, out, *extra, timeout=600):
    return U.run([winml, "build", "-m", src, "-o", out, "-q", *extra], timeout=timeout)


# ---------------------------------------------------------------- build folders: what --rebuild may replace

def test_rebuild_replaces_only_a_build_of_ours(bins, ckpt, tmp_path):
    out = tmp_path / "out"
    assert build(bins, ckpt, out).returncode == 0
    # a user's file in the folder: refused by name, everything kept
    (out / "notes.txt").write_text("mine")
    before = tree(out)
    U.assert_clean_error(build(bins, ckpt, out, "--rebuild"), "winml build", "notes.txt", "no winml build wrote")
    assert tree(out) == before and not U.leftovers(tmp_path)
    os.remove(out / "notes.txt")
    # a folder or a link in it: the same
    (out / "sub").mkdir()
    U.assert_clean_error(build(bins, ckpt, out, "--rebuild"), "winml build", "'sub'")
    os.rmdir(out / "sub")
    os.symlink("/etc/hostname", out / "link")
    U.assert_clean_error(build(bins, ckpt, out, "--rebuild"), "winml build", "'link'")
    os.remove(out / "link")
    # an artifact changed since winml wrote it (the user edited it): refused
    with open(out / "genai_config.json", "a") as f:
        f.write(" ")
    U.assert_clean_error(build(bins, ckpt, out, "--rebuild"), "winml build", "genai_config.json", "changed since")
    with open(out / "genai_config.json", "rb+") as f:
        f.truncate(os.path.getsize(out / "genai_config.json") - 1)
    # a folder with a model.onnx but no manifest of ours (another tool's output)
    other = tmp_path / "other"
    other.mkdir()
    (other / "model.onnx").write_bytes(b"not ours")
    U.assert_clean_error(build(bins, ckpt, other, "--rebuild"), "winml build", "not a winml build folder")
    assert (other / "model.onnx").read_bytes() == b"not ours"
    # a manifest that is not winml's
    (other / "build_manifest.json").write_text(json.dumps({"tool": "olive", "artifacts": []}))
    U.assert_clean_error(build(bins, ckpt, other, "--rebuild"), "winml build", "not winml's")
    # and a build of ours as written is replaced
    r = build(bins, ckpt, out, "--rebuild")
    assert r.returncode == 0 and not U.crashed(r), U.describe(r)
    assert not U.leftovers(tmp_path)


@pytest.fixture(scope="module")
def st_ckpt(request):
    """A feature-extraction checkpoint with sentence-transformers' files: the build carries 1_Pooling/config.json,
    a file in a subfolder of the build folder."""
    d = U.scratch(request, "st") / "bert"
    BU.make_tiny("bert-feature", str(d))
    (d / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
    (d / "sentence_bert_config.json").write_text('{"max_seq_length": 64, "do_lower_case": false}')
    (d / "1_Pooling").mkdir()
    (d / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 32,
                                                             "pooling_mode_mean_tokens": True}))
    return str(d)


def test_rebuild_checks_the_listed_subfolder(bins, st_ckpt, tmp_path):
    out = tmp_path / "out"
    assert build(bins, st_ckpt, out).returncode == 0
    man = json.load(open(out / "build_manifest.json"))
    assert {"1_Pooling/config.json", "modules.json", "sentence_bert_config.json"} <= {a["file"] for a in
                                                                                      man["artifacts"]}
    before = tree(out)
    # a user's file or folder inside the listed subfolder: refused by its path, everything kept
    (out / "1_Pooling" / "notes.txt").write_text("mine")
    U.assert_clean_error(build(bins, st_ckpt, out, "--rebuild"), "winml build", "'1_Pooling/notes.txt'",
                         "no winml build wrote")
    os.remove(out / "1_Pooling" / "notes.txt")
    (out / "1_Pooling" / "deeper").mkdir()
    U.assert_clean_error(build(bins, st_ckpt, out, "--rebuild"), "winml build", "'1_Pooling/deeper'")
    os.rmdir(out / "1_Pooling" / "deeper")
    # the listed file edited since
    with open(out / "1_Pooling" / "config.json", "a") as f:
        f.write(" ")
    U.assert_clean_error(build(bins, st_ckpt, out, "--rebuild"), "winml build", "'1_Pooling/config.json'",
                         "changed since")
    with open(out / "1_Pooling" / "config.json", "rb+") as f:
        f.truncate(os.path.getsize(out / "1_Pooling" / "config.json") - 1)
    # the subfolder swapped for a link to a folder holding the same file
    os.rename(out / "1_Pooling", tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", out / "1_Pooling")
    U.assert_clean_error(build(bins, st_ckpt, out, "--rebuild"), "winml build", "'1_Pooling'")
    os.remove(out / "1_Pooling")
    os.rename(tmp_path / "elsewhere", out / "1_Pooling")
    assert tree(out) == before and not U.leftovers(tmp_path)
    # as written: replaced, the subfolder too
    r = build(bins, st_ckpt, out, "--rebuild")
    assert r.returncode == 0 and not U.crashed(r), U.describe(r)
    assert set(tree(out)) == set(before) and not U.leftovers(tmp_path)


def test_sentence_transformers_files_checked_before_any_work(bins, st_ckpt, tmp_path):
    """A Pooling path leaving the checkpoint is refused before anything is written; a module winml does not run is
    noted and the files carried as they are (winml run refuses the embedding)."""
    import shutil
    d = tmp_path / "ck"
    shutil.copytree(st_ckpt, d)
    mods = json.load(open(d / "modules.json"))
    mods[1]["path"] = "../1_Pooling"
    (d / "modules.json").write_text(json.dumps(mods))
    r = build(bins, d, tmp_path / "o")
    U.assert_clean_error(r, "winml build", "modules.json", "'../1_Pooling'", "not a plain folder name")
    assert not (tmp_path / "o").exists() and not U.leftovers(tmp_path)
    # more tokens than the model has positions: refused before anything is written
    mods[1]["path"] = "1_Pooling"
    (d / "modules.json").write_text(json.dumps(mods))
    cfg = json.load(open(d / "config.json"))
    (d / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": cfg["max_position_embeddings"] + 1}))
    r = build(bins, d, tmp_path / "o")
    U.assert_clean_error(r, "winml build", "sentence_bert_config.json", "'max_seq_length'",
                         f"{cfg['max_position_embeddings']} positions")
    assert not (tmp_path / "o").exists() and not U.leftovers(tmp_path)
    (d / "sentence_bert_config.json").write_text('{"max_seq_length": 64}')
    mods.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (d / "modules.json").write_text(json.dumps(mods))
    r = U.run([bins, "build", "-m", d, "-o", tmp_path / "o"])
    assert r.returncode == 0 and "Dense" in r.stderr and "will refuse" in r.stderr, U.describe(r)
    assert (tmp_path / "o" / "modules.json").exists() and not (tmp_path / "o" / "1_Pooling").exists()


def test_output_is_or_holds_the_input(bins, ckpt, tmp_path):
    before = tree(ckpt)
    parent = os.path.dirname(ckpt)
    for o in (ckpt, ckpt + "/", parent):
        r = build(bins, ckpt, o, "--rebuild")
        U.assert_clean_error(r, "winml build", "input checkpoint")
    assert tree(ckpt) == before
    # -o inside the checkpoint folder is fine (a build beside its weights)
    r = build(bins, ckpt, os.path.join(ckpt, "onnx"))
    assert r.returncode == 0, U.describe(r)
    import shutil
    shutil.rmtree(os.path.join(ckpt, "onnx"))
    assert tree(ckpt) == before


def test_output_path_checked_before_any_work(bins, ckpt, tmp_path):
    # an empty -o is refused at once, in the current folder no staging is made
    t0 = time.monotonic()
    r = U.run([bins, "build", "-m", ckpt, "-o", "", "-q"], cwd=tmp_path)
    U.assert_clean_error(r, "winml build", "-o", "empty")
    assert time.monotonic() - t0 < 20 and os.listdir(tmp_path) == []
    # -o naming a file, or a link to a build folder: never replaced
    f = tmp_path / "file"
    f.write_text("keep")
    U.assert_clean_error(build(bins, ckpt, f, "--rebuild"), "winml build", "not a folder")
    assert f.read_text() == "keep"
    real = tmp_path / "real"
    assert build(bins, ckpt, real).returncode == 0
    os.symlink(real, tmp_path / "ln")
    U.assert_clean_error(build(bins, ckpt, tmp_path / "ln", "--rebuild"), "winml build", "symbolic link")
    assert os.path.islink(tmp_path / "ln")
    # missing parents are made; a parent that is a file is named
    r = build(bins, ckpt, tmp_path / "a" / "b" / "c")
    assert r.returncode == 0 and (tmp_path / "a" / "b" / "c" / "model.onnx").exists(), U.describe(r)
    U.assert_clean_error(build(bins, ckpt, f / "x" / "y"), "winml build", "is not a folder")
    assert not U.leftovers(tmp_path)


def test_export_folder_rebuild(bins, ckpt, tmp_path):
    out = tmp_path / "exp"
    assert U.run([bins, "export", "-m", ckpt, "-o", out, "-q"]).returncode == 0
    r = U.run([bins, "export", "-m", ckpt, "-o", out, "-q", "--rebuild"])
    assert r.returncode == 0, U.describe(r)
    (out / "mine.py").write_text("x")
    U.assert_clean_error(U.run([bins, "export", "-m", ckpt, "-o", out, "-q", "--rebuild"]), "winml export", "mine.py")
    assert (out / "mine.py").exists()


def test_random_weights_that_cannot_fit(bins, tmp_path):
    """A config of terabytes is refused before anything is written, with the need and the free space."""
    d = small_config(str(tmp_path / "huge"), hidden_size=65536, intermediate_size=262144, num_hidden_layers=400,
                     vocab_size=1000000, num_attention_heads=512, num_key_value_heads=512)
    t0 = time.monotonic()
    r = build(bins, d, tmp_path / "o", "--random-weights")
    U.assert_clean_error(r, "winml build", "needs about", "free")
    assert time.monotonic() - t0 < 60
    assert not os.path.exists(tmp_path / "o") and not U.leftovers(tmp_path)


# ---------------------------------------------------------------- one writer at a time

def hold_lock(path):
    """Holds the output lock of path as another winml process would (flock + its pid); returns the file."""
    f = open(str(path) + ".winml-lock", "w")
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    f.write("4242\n")
    f.flush()
    return f


def test_lock_refuses_a_second_writer(bins, ckpt, tmp_path):
    out = tmp_path / "out"
    f = hold_lock(out)
    U.assert_clean_error(build(bins, ckpt, out), "winml build", "another winml process (pid 4242)")
    assert not out.exists()
    m = tmp_path / "m.onnx"
    onnx.save(tiny_matmul(), str(m))
    g = hold_lock(tmp_path / "o.onnx")
    U.assert_clean_error(U.run([bins, "optimize", "-m", m, "-o", tmp_path / "o.onnx"]), "winml optimize", "pid 4242")
    g.close()
    f.close()
    # a lock nobody holds any more (its holder died) is taken over and removed
    r = build(bins, ckpt, out)
    assert r.returncode == 0, U.describe(r)
    assert not U.leftovers(tmp_path) or U.leftovers(tmp_path) == [str(tmp_path / "o.onnx.winml-lock")]


def test_two_builds_at_once(winml, big_cfg, tmp_path):
    out = tmp_path / "out"
    a = subprocess.Popen([winml, "build", "-m", big_cfg, "-o", str(out), "--random-weights", "-q"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_for(lambda: glob.glob(str(tmp_path / "out.winml-tmp.*")))
    r = build(winml, big_cfg, out, "--random-weights")
    U.assert_clean_error(r, "winml build", "another winml process", f"pid {a.pid}")
    assert a.wait(300) == 0, a.stderr.read()
    man = json.load(open(out / "build_manifest.json"))
    assert man["random_weights"] is True and not U.leftovers(tmp_path)


def test_folder_that_appears_while_building(winml, big_cfg, tmp_path):
    """Another program makes -o during the build: the build does not replace it."""
    out = tmp_path / "out"
    a = subprocess.Popen([winml, "build", "-m", big_cfg, "-o", str(out), "--random-weights", "-q"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: glob.glob(str(tmp_path / "out.winml-tmp.*")))
    out.mkdir()
    (out / "theirs.txt").write_text("theirs")
    err = a.communicate(timeout=300)[1]
    assert a.returncode == 2 and "appeared" in err, err
    assert os.listdir(out) == ["theirs.txt"] and not U.leftovers(tmp_path)


# ---------------------------------------------------------------- signals and what a killed run leaves

def wait_for(cond, timeout=120):
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, "timed out"
        time.sleep(0.02)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_signal_removes_staging(winml, big_cfg, tmp_path, sig):
    out = tmp_path / "out"
    assert build(winml, small_config(str(tmp_path / "small")), out, "--random-weights").returncode == 0
    before = tree(out)
    # the signal at its default disposition in the child: a shell's background job (a CI runner's `cmd &`)
    # starts with SIGINT ignored, which a program rightly keeps, and the build would then finish
    p = subprocess.Popen([winml, "build", "-m", big_cfg, "-o", str(out), "--rebuild", "--random-weights", "-q"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL))
    wait_for(lambda: glob.glob(str(tmp_path / "out.winml-tmp.*" / "model.onnx.data*")) or
             glob.glob(str(tmp_path / "out.winml-tmp.*/*")))
    time.sleep(0.3)
    p.send_signal(sig)
    assert p.wait(60) == -sig  # it still dies of the signal
    assert not U.leftovers(tmp_path), U.leftovers(tmp_path)
    assert tree(out) == before  # the previous build is untouched


def test_signal_during_quantize(winml, tmp_path):
    m = tmp_path / "big.onnx"
    big_matmul(m, 60 << 20)
    p = subprocess.Popen([winml, "quantize", "-m", str(m), "-o", str(tmp_path / "q.onnx"), "-p", "int4",
                          "--stream", "on", "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: glob.glob(str(tmp_path / "q.onnx.data.winml-tmp.*")))
    p.send_signal(signal.SIGTERM)
    assert p.wait(60) == -signal.SIGTERM
    assert sorted(os.listdir(tmp_path)) == ["big.onnx", "big.onnx.data"]


def test_killed_build_is_swept_by_the_next_run(winml, big_cfg, tmp_path):
    out = tmp_path / "out"
    p = subprocess.Popen([winml, "build", "-m", big_cfg, "-o", str(out), "--random-weights", "-q"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: glob.glob(str(tmp_path / "out.winml-tmp.*/*")))
    p.kill()
    p.wait()
    left = U.leftovers(tmp_path)
    assert str(tmp_path / f"out.winml-tmp.{p.pid}") in left and str(tmp_path / "out.winml-lock") in left
    # a live process's staging (its pid still running) is not touched
    sleeper = subprocess.Popen(["sleep", "60"])
    live = tmp_path / f"other.winml-tmp.{sleeper.pid}"
    live.mkdir()
    try:
        r = build(winml, small_config(str(tmp_path / "small")), tmp_path / "next", "--random-weights")
        assert r.returncode == 0, U.describe(r)
        assert U.leftovers(tmp_path) == [str(live)]
    finally:
        sleeper.kill()
        sleeper.wait()
    # now dead: the next run beside it removes it
    assert build(winml, str(tmp_path / "small"), tmp_path / "next2", "--random-weights").returncode == 0
    assert not U.leftovers(tmp_path)


def test_folder_moved_aside_is_restored(bins, ckpt, tmp_path):
    """A replace killed between its two renames (file systems without RENAME_EXCHANGE) left the old build under
    "<out>.winml-old.<pid>" and no <out>: the next run there puts it back."""
    out = tmp_path / "out"
    assert build(bins, ckpt, out).returncode == 0
    before = tree(out)
    # a pid no process can have (Linux pids stay below 2^22): an exited child's pid could be reused by the time
    # the next run looks (pid_max is often 32768 and the suite starts thousands of processes)
    os.rename(out, tmp_path / f"out.winml-old.{2**31 - 2}")
    assert build(bins, ckpt, tmp_path / "sibling").returncode == 0
    assert tree(out) == before and not U.leftovers(tmp_path)


# ---------------------------------------------------------------- single-file models: one-step switch, records

def tiny_matmul(n=64):
    w = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
                          [numpy_helper.from_array(w, "W")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="oracle")


def big_matmul(path, nbytes, seed=0):
    """A chain of MatMuls holding about nbytes of float32 weights, saved with external data."""
    n = 1024
    k = max(1, nbytes // (n * n * 4))
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for i in range(k):
        inits.append(numpy_helper.from_array((rng.standard_normal((n, n)) / 32).astype(np.float32), f"W{i}"))
        nodes.append(helper.make_node("MatMul", [x, f"W{i}"], [f"h{i}"]))
        x = f"h{i}"
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, n])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="oracle")
    onnx.save(m, str(path), save_as_external_data=True, location=os.path.basename(str(path)) + ".data")


def ort_out(path, n=64):
    import onnxruntime as ort
    x = np.random.default_rng(1).standard_normal((1, n)).astype(np.float32)
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def data_files(d, base):
    return sorted(f for f in os.listdir(d) if f.startswith(base + ".") and f.endswith(".data"))


def test_model_and_data_switch_in_one_step(bins, tmp_path):
    m = tmp_path / "m.onnx"
    onnx.save(tiny_matmul(256), str(m))
    o = tmp_path / "o.onnx"
    opt = [bins, "optimize", "-m", m, "-o", o, "--external-threshold", "1K", "-q"]
    assert U.run(opt).returncode == 0
    assert data_files(tmp_path, "o.onnx") == ["o.onnx.data"]
    ref = ort_out(o, 256)
    # replacing it: the new data file has a new name, the model's rename is the one switch, the old data goes
    r = U.run(opt)
    assert r.returncode == 0 and not U.crashed(r), U.describe(r)
    assert data_files(tmp_path, "o.onnx") == ["o.onnx.1.data"]
    assert np.array_equal(ort_out(o, 256), ref)
    assert U.run(opt).returncode == 0 and data_files(tmp_path, "o.onnx") == ["o.onnx.data"]
    # in place, over itself: the same, and the input's own data file goes only once nothing reads it
    r = U.run([bins, "optimize", "-m", o, "-o", o, "--external-threshold", "1K", "-q"])
    assert r.returncode == 0, U.describe(r)
    assert data_files(tmp_path, "o.onnx") == ["o.onnx.1.data"] and np.array_equal(ort_out(o, 256), ref)
    # a model that still reads a data file of that name keeps it: another model sharing o.onnx.1.data
    other = onnx.load(str(o), load_external_data=False)
    onnx.save(other, str(tmp_path / "shared.onnx"))
    r = U.run([bins, "optimize", "-m", tmp_path / "shared.onnx", "-o", o, "--external-threshold", "1K", "-q"])
    assert r.returncode == 0, U.describe(r)
    assert "o.onnx.1.data" in data_files(tmp_path, "o.onnx")
    assert np.array_equal(ort_out(tmp_path / "shared.onnx", 256), ref) and np.array_equal(ort_out(o, 256), ref)
    assert not U.leftovers(tmp_path)


def test_mixed_pair_is_refused(bins, winml, tmp_path):
    """Two outputs of the same shape and sizes; a's data file replaced by b's: loading a is refused by name."""
    for name, seed in (("a", 0), ("b", 1)):
        big_matmul(tmp_path / f"{name}_in.onnx", 4 << 20, seed=seed)
        r = U.run([winml, "optimize", "-m", tmp_path / f"{name}_in.onnx", "-o", tmp_path / f"{name}.onnx",
                   "--external-threshold", "1K", "-q"])
        assert r.returncode == 0, U.describe(r)
    assert os.path.getsize(tmp_path / "a.onnx.data") == os.path.getsize(tmp_path / "b.onnx.data")
    os.replace(tmp_path / "b.onnx.data", tmp_path / "a.onnx.data")
    for cmd in (["inspect", "-m", tmp_path / "a.onnx"], ["perf", "-m", tmp_path / "a.onnx", "--iterations", "1"]):
        U.assert_clean_error(U.run([bins, *cmd]), "winml " + cmd[0], "a.onnx.data", "does not belong")
    # a data file cut short
    os.truncate(tmp_path / "a.onnx.data", 1 << 20)
    U.assert_clean_error(U.run([bins, "inspect", "-m", tmp_path / "a.onnx"]), "winml inspect", "a.onnx.data")


def test_what_an_output_may_replace(bins, tmp_path):
    m = tmp_path / "m.onnx"
    onnx.save(tiny_matmul(), str(m))
    theirs = tmp_path / "theirs.onnx"
    onnx.save(tiny_matmul(32), str(theirs))
    before = open(theirs, "rb").read()
    for cmd in (["optimize"], ["quantize", "-p", "fp16"]):
        r = U.run([bins, *cmd, "-m", m, "-o", theirs])
        U.assert_clean_error(r, "winml " + cmd[0], "not written by winml", "--overwrite")
        assert open(theirs, "rb").read() == before
    r = U.run([bins, "optimize", "-m", m, "-o", theirs, "--overwrite", "-q"])
    assert r.returncode == 0, U.describe(r)
    assert onnx.load(str(theirs)).producer_name == "winml"
    # now winml's: replaced without --overwrite
    assert U.run([bins, "quantize", "-m", m, "-o", theirs, "-p", "fp16", "-q"]).returncode == 0
    # the input's own data file, a folder, a missing folder
    big_matmul(tmp_path / "ext.onnx", 4 << 20)
    data_before = tree(tmp_path)["ext.onnx.data"]
    r = U.run([bins, "optimize", "-m", tmp_path / "ext.onnx", "-o", tmp_path / "ext.onnx.data", "--overwrite"])
    U.assert_clean_error(r, "winml optimize", "external data file of the input")
    assert tree(tmp_path)["ext.onnx.data"] == data_before
    (tmp_path / "dir.onnx").mkdir()
    U.assert_clean_error(U.run([bins, "optimize", "-m", m, "-o", tmp_path / "dir.onnx", "--overwrite"]),
                         "winml optimize", "not a regular file")
    U.assert_clean_error(U.run([bins, "optimize", "-m", m, "-o", tmp_path / "no" / "o.onnx"]), "winml optimize",
                         "does not exist")
    assert not U.leftovers(tmp_path)


def test_json_result_never_replaces_a_model(bins, tmp_path):
    m = tmp_path / "m.onnx"
    onnx.save(tiny_matmul(), str(m))
    before = open(m, "rb").read()
    U.assert_clean_error(U.run([bins, "inspect", "-m", m, "-o", m]), "winml inspect", "not a JSON file")
    assert open(m, "rb").read() == before
    r = U.run([bins, "inspect", "-m", m, "-o", tmp_path / "r.json", "-q"])
    assert r.returncode == 0 and json.load(open(tmp_path / "r.json"))["ir_version"] > 0
    assert U.run([bins, "inspect", "-m", m, "-o", tmp_path / "r.json", "-q"]).returncode == 0  # JSON: replaced
    assert not U.leftovers(tmp_path)


# ---------------------------------------------------------------- a folder the user cannot write

def test_read_only_output_folder(bins, ckpt):
    """An output in a folder the user may not write (root is dropped to nobody, for whom mode 555 holds): every
    writer exits 2 naming the path and the reason before any work, and leaves the folder as it was."""
    import shutil
    import tempfile
    pre = []
    if os.geteuid() == 0:
        assert shutil.which("setpriv"), "setpriv (util-linux) is needed to drop root for this test"
        pre = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    top = tempfile.mkdtemp(prefix="wm-ro-")  # pytest's tmp_path is 0700 root: not reachable once root is dropped
    try:
        os.chmod(top, 0o755)
        ck = os.path.join(top, "ck")
        shutil.copytree(ckpt, ck)
        assert U.run([bins, "export", "-m", ck, "-o", os.path.join(top, "exp"), "-q"]).returncode == 0
        model = os.path.join(top, "exp", "model.onnx")
        ro = os.path.join(top, "ro")
        os.makedirs(os.path.join(ro, "old"))
        open(os.path.join(ro, "old", "user.txt"), "w").write("keep")
        for root, dirs, files in os.walk(top):  # readable by nobody; ro and the user's folder in it not writable
            for x in dirs:
                os.chmod(os.path.join(root, x), 0o755)
            for x in files:
                os.chmod(os.path.join(root, x), 0o644)
        os.chmod(os.path.join(ro, "old"), 0o555)
        os.chmod(ro, 0o555)
        before = tree(ro)
        cases = [(["build", "-m", ck, "-o", os.path.join(ro, "b")], "winml build"),
                 (["build", "-m", ck, "-o", os.path.join(ro, "old"), "--rebuild"], "winml build"),
                 (["export", "-m", ck, "-o", os.path.join(ro, "e")], "winml export"),
                 (["quantize", "-m", model, "-o", os.path.join(ro, "q.onnx"), "-p", "int4"], "winml quantize"),
                 (["optimize", "-m", model, "-o", os.path.join(ro, "o.onnx")], "winml optimize"),
                 (["config", "-m", ck, "-o", os.path.join(ro, "r.json")], "winml config"),
                 (["inspect", "-m", model, "-f", "json", "-o", os.path.join(ro, "i.json")], "winml inspect")]
        for argv, prog in cases:
            r = U.run(pre + [bins, *argv], timeout=300)
            line = U.assert_clean_error(r, prog, ro, any_of=["permission denied", "not a winml build"])
            assert tree(ro) == before, (argv, line)
    finally:
        for root, dirs, files in os.walk(top):
            for x in dirs:
                os.chmod(os.path.join(root, x), 0o755)
        shutil.rmtree(top, ignore_errors=True)
