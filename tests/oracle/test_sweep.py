"""`winml sweep` over 20 of the reference's recipes (../shared/reference-recipes) with --random-weights, and
`winml catalog`:

- one run writes eval_results/<date>/{environment.json, models/<org>__<name>__<task>__<precision>[...]/
  eval_result.json} with the reference's keys (../shared/facts/reference-json.md section 6): the buildable
  recipes pass (build, analyze, perf, compare; static QDQ ones too, calibrated on seeded samples), the others
  carry the reference's failure class (a model_type the builder does not serve: EXPORT_FAIL) and the one-line
  error;
- a run killed midway (SIGKILL: no handler runs) and resumed ends with the same result set, the results written
  before the kill untouched, and no temporaries left;
- --shard 0/2 and 1/2 into two folders split the recipes disjointly and their union is the same result set;
- `winml catalog` lists exactly the model/task pairs that passed in the sweep summaries checked in under
  data/catalog, from a table generated at build time;
- bad flags and inputs exit 2 with one line and write nothing; a file the sweep did not write is never replaced.
"""
import glob
import json
import os
import re
import signal
import subprocess
import time

import pytest

import oracle_util as U
from recipe_survey import recipe_files

REF = os.path.join(os.path.dirname(U.ROOT), "shared", "reference-recipes")
N_BUILT, N_MODEL_TYPE, N_STATIC = 14, 4, 2

# eval_result.json (reference-json.md section 6); raw_* there is open-ended: ours are raw_stdout_bytes/raw_stderr_bytes
RESULT_KEYS = {"model", "task", "device", "model_type", "group", "priority", "eval_types_run", "run_timestamp", "perf",
               "accuracy", "onnx_size_bytes", "ep", "precision"}
PERF_KEYS = {"passed", "elapsed", "exit_code", "result", "stdout_output", "stderr_output", "timeout", "command", "error",
             "failure_classification"}
ACC_KEYS = {"skipped", "skip_reason", "winml_eval_status", "winml_metric", "metrics", "dataset", "winml_eval_exit_code",
            "winml_eval_stdout", "winml_eval_stderr", "winml_eval_command", "elapsed_winml"}
ENV_KEYS = {"timestamp", "platform", "python_version", "onnxruntime_version", "torch_version", "transformers_version",
            "optimum_version", "git_commit", "git_commit_message", "git_commit_date", "winml_sys"}
CLASSES = {"EXPORT_FAIL", "ANALYZER_BLOCK", "OPT_FAIL", "COMPILE_FAIL", "RUNTIME_FAIL", "ENVIRONMENT", "TIMEOUT", "UNKNOWN"}


def load(p):
    with open(p) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def recipes(winml, request):
    """20 recipes: the first 14 in path order that build without static quantization, the first 2 static (qdq)
    ones, which build too (calibrated by our engine), and the first 4 refused by model_type; as a list file."""
    want = {"built": N_BUILT, "model_type": N_MODEL_TYPE, "static": N_STATIC}
    got = {k: [] for k in want}
    for f in recipe_files(REF):
        if all(len(got[k]) >= want[k] for k in want):
            break
        r = subprocess.run([winml, "config", "-c", f, "-f", "json"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        rep = json.loads(r.stdout)
        static = (load(f).get("quant") or {}).get("mode") in ("static", "qdq")
        kind = ("static" if static else "built") if rep["buildable"] \
            else "model_type" if "loader.model_type" in rep["not_buildable_reason"] else None
        if kind and len(got[kind]) < want[kind]:
            got[kind].append(f)
    assert {k: len(v) for k, v in got.items()} == want
    d = U.scratch(request, "sweep_list")
    lst = d / "recipes.txt"
    lst.write_text("# 20 reference recipes\n\n" + "\n".join(sum(got.values(), [])) + "\n")
    return lst, got


def sweep(winml, *args, timeout=300):
    return subprocess.run([winml, "sweep", *map(str, args)], capture_output=True, text=True, timeout=timeout)


def result_set(folder):
    """{key: (status, failure class)} of every eval_result.json under folder."""
    out = {}
    for p in glob.glob(os.path.join(str(folder), "eval_results", "*", "models", "*", "eval_result.json")):
        d = load(p)
        w = d["winml_sweep"]
        assert w["complete"] is True and os.path.basename(os.path.dirname(p)) == w["key"], p
        out[w["key"]] = (w["status"], d["perf"]["failure_classification"])
    return out


def all_leftovers(folder):
    return sorted(p for p in glob.glob(os.path.join(str(folder), "**", "*"), recursive=True)
                  + glob.glob(os.path.join(str(folder), "**", ".*"), recursive=True) if ".winml-" in p)


@pytest.fixture(scope="module")
def single(winml, recipes, request):
    lst, _ = recipes
    out = U.scratch(request, "sweep_single")
    t0 = time.time()
    r = sweep(winml, "-c", lst, "-o", out, "--random-weights", "-f", "json")
    wall = time.time() - t0
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr  # no progress when not a TTY
    U.note(f"sweep of 20 reference recipes (random weights): {wall:.1f} s wall")
    return out, json.loads(r.stdout)


def test_single_run_writes_the_reference_layout(single, recipes):
    out, summ = single
    _, got = recipes
    days = glob.glob(str(out / "eval_results" / "*"))
    assert len(days) == 1 and os.path.basename(days[0]) == summ["date"]
    env = load(os.path.join(days[0], "environment.json"))
    assert ENV_KEYS <= set(env), ENV_KEYS - set(env)
    assert env["winml_sys"]["cpu"]["logical_cores"] >= 1
    res = result_set(out)
    assert len(res) == 20 and summ["selected"] == 20 and summ["ran"] == 20 and summ["not_run"] == 0
    assert summ["passed"] == N_BUILT + N_STATIC and summ["failed"] == N_MODEL_TYPE, summ
    assert summ["failure_classes"]["EXPORT_FAIL"] == N_MODEL_TYPE and not summ["failure_classes"].get("OPT_FAIL")
    kind_of = {f: k for k, fs in got.items() for f in fs}
    for row in summ["results"]:
        p = os.path.join(days[0], "models", row["key"], "eval_result.json")
        d = load(p)
        assert RESULT_KEYS <= set(d), RESULT_KEYS - set(d)
        assert PERF_KEYS <= set(d["perf"]) and ACC_KEYS <= set(d["accuracy"]), (set(d["perf"]), set(d["accuracy"]))
        rec = d["winml_sweep"]["recipe"]
        org, name = os.path.relpath(rec, REF).split(os.sep)[0].split("_", 1)
        assert d["model"] == f"{org}/{name}" and row["key"].startswith(f"{org}__{name}__{d['task']}__{d['precision']}")
        assert os.path.basename(rec).startswith(f"{d['task']}_{d['precision']}_")
        kind = kind_of[rec]
        if kind in ("built", "static"):
            assert row["status"] == "passed" and d["perf"]["passed"] is True, (row, d["perf"]["stderr_output"])
            lat = d["perf"]["result"]["latency_ms"]
            assert lat["mean"] > 0 and d["perf"]["result"]["benchmark_info"]["iterations"] == 20
            assert d["accuracy"]["winml_eval_status"] == "PASS" and d["accuracy"]["winml_metric"]["value"] >= 0.99
            assert d["onnx_size_bytes"] > 0 and d["perf"]["failure_classification"] is None
        else:
            assert row["status"] == "failed" and d["perf"]["passed"] is False
            assert d["perf"]["failure_classification"] == "EXPORT_FAIL"
            assert d["perf"]["failure_classification"] in CLASSES
            assert d["perf"]["error"].startswith(f"winml build: error: {rec}: field '")
            assert "loader.model_type" in d["perf"]["error"]
            assert d["accuracy"]["skipped"] is True and d["perf"]["exit_code"] == 2
    assert all_leftovers(out) == [], all_leftovers(out)
    assert not glob.glob(os.path.join(days[0], ".work*"))


def test_killed_sweep_resumes_to_the_same_result_set(winml, recipes, single, tmp_path):
    lst, _ = recipes
    out = tmp_path / "b"
    p = subprocess.Popen([winml, "sweep", "-c", str(lst), "-o", str(out), "--random-weights", "-q"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pat = os.path.join(str(out), "eval_results", "*", "models", "*", "eval_result.json")
    deadline = time.time() + 120
    while len(glob.glob(pat)) < 6 and p.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)  # no handler runs: temporaries and the work folder stay behind
    p.wait(timeout=30)
    before = {f: (os.stat(f).st_mtime_ns, open(f).read()) for f in glob.glob(pat)}
    assert 6 <= len(before) < 20, f"{len(before)} results when killed: the sweep was not interrupted"
    for f in before:  # every result there is whole (written to a temporary and renamed)
        assert load(f)["winml_sweep"]["complete"] is True
    r = sweep(winml, "-c", lst, "-o", out, "--random-weights", "--resume", "-f", "json")
    assert r.returncode == 0, r.stderr
    summ = json.loads(r.stdout)
    assert summ["resumed"] == len(before) and summ["ran"] == 20 - len(before), summ
    for f, (mtime, text) in before.items():  # skipped, not redone
        assert os.stat(f).st_mtime_ns == mtime and open(f).read() == text, f
    assert result_set(out) == result_set(single[0])
    assert all_leftovers(out) == [], all_leftovers(out)  # the killed run's temporaries are gone
    U.note(f"sweep killed after {len(before)} of 20 results, resumed: {summ['ran']} run, {summ['resumed']} skipped")


def test_two_shards_merge_to_the_single_run(winml, recipes, single, tmp_path):
    lst, _ = recipes
    parts = []
    for i in range(2):
        r = sweep(winml, "-c", lst, "-o", tmp_path / f"s{i}", "--random-weights", "--shard", f"{i}/2", "-f", "json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["selected"] == 10 and json.loads(r.stdout)["shard"] == f"{i}/2"
        parts.append(result_set(tmp_path / f"s{i}"))
    assert len(parts[0]) == len(parts[1]) == 10 and not set(parts[0]) & set(parts[1])
    assert {**parts[0], **parts[1]} == result_set(single[0])
    # deterministic: the same slice again selects the same keys
    r = sweep(winml, "-c", lst, "-o", tmp_path / "again", "--random-weights", "--shard", "1/2", "-f", "json",
              "--limit", "1")
    assert [x["key"] for x in json.loads(r.stdout)["results"]] == sorted(parts[1])


def test_catalog_lists_what_passed_in_the_checked_in_results(winml, build_dir):
    data = sorted(glob.glob(os.path.join(U.ROOT, "data", "catalog", "*.json")))
    assert data, "no sweep results checked in under data/catalog"
    passed, parts = set(), {}
    for f in data:
        for row in load(f)["results"]:
            if row["status"] == "passed":
                passed.add((row["model"], row["task"]))
                parts.setdefault((row["model"], row["task"]), set()).update([row["part"]] if row["part"] else [])
    r = subprocess.run([winml, "catalog", "-f", "json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    cat = json.loads(r.stdout)
    assert {(e["model_id"], e["task"]) for e in cat} == passed and len(cat) == len(passed)
    for e in cat:  # the reference's keys, ours beside
        assert {"model_id", "task", "model_type", "supported_eps", "size_mb"} <= set(e)
        assert e["supported_eps"] == {"cpu": ["CPU"]} and e["last_result"]["status"] == "passed"
        assert set(e["parts"]) == parts[e["model_id"], e["task"]], e
    # the reference's encoder-decoders exported as part recipes (opus-mt, TrOCR): both parts verified
    s2s = [e for e in cat if e["model_type"] in ("marian", "vision-encoder-decoder")]
    assert s2s and all(e["parts"] == ["decoder", "encoder"] for e in s2s), s2s
    r = subprocess.run([winml, "catalog", "-f", "json", "-t", "fill-mask", "--ep", "CPUExecutionProvider"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and {e["task"] for e in json.loads(r.stdout)} == {"fill-mask"}
    assert len(json.loads(r.stdout)) == len({p for p in passed if p[1] == "fill-mask"}) > 0
    r = subprocess.run([winml, "catalog", "-f", "json", "--ep", "qnn"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and json.loads(r.stdout) == []  # nothing ran on QNN here
    # generated at build time, not checked in
    assert os.path.exists(os.path.join(build_dir, "generated", "catalog_table.c"))
    tracked = subprocess.run(["git", "-C", U.ROOT, "ls-files"], capture_output=True, text=True).stdout
    assert "catalog_table" not in tracked
    U.note(f"catalog: {len(cat)} verified model/task pairs from {len(data)} checked-in sweep summary file(s)")


@pytest.mark.parametrize("args,needles", [
    (["--shard", "3/2"], ["--shard", "3/2"]),
    (["--shard", "1/0"], ["--shard"]),
    (["--shard", "-1/2"], ["--shard"]),
    (["--shard", "1"], ["--shard"]),
    (["--limit", "0"], ["--limit"]),
    (["--max-memory", "1k"], ["--max-memory"]),
    (["--date", "../x"], ["--date"]),
    (["--bogus"], ["--bogus"]),
], ids=["shard-3of2", "shard-of-0", "shard-negative", "shard-no-slash", "limit-0", "max-memory-tiny", "date-path",
        "unknown-flag"])
def test_bad_flags_exit_2(args, needles, winml_asan, tmp_path):
    lst = tmp_path / "l.txt"
    lst.write_text(os.path.join(REF, "BAAI_bge-small-en-v1.5", "feature-extraction_fp16_config.json") + "\n")
    r = subprocess.run([winml_asan, "sweep", "-c", str(lst), "-o", str(tmp_path / "o"), *args], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, **U.SAN_ENV))
    U.assert_clean_error(r, "winml sweep", *needles)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("case", ["no-c", "no-o", "missing", "unreadable", "bad-json", "bad-name", "same-key"])
def test_bad_inputs_exit_2_and_write_nothing(case, winml_asan, tmp_path):
    good = os.path.join(REF, "BAAI_bge-small-en-v1.5", "feature-extraction_fp16_config.json")
    org = tmp_path / "acme_tiny"
    org.mkdir()
    lst = tmp_path / "l.txt"
    args = ["-c", str(lst), "-o", str(tmp_path / "o")]
    if case == "no-c":
        args, needles = ["-o", str(tmp_path / "o")], ["-c"]
    elif case == "no-o":
        lst.write_text(good + "\n")
        args, needles = ["-c", str(lst)], ["-o"]
    elif case == "missing":
        lst.write_text(good + "\n" + str(org / "nope_fp32_config.json") + "\n")
        needles = ["nope_fp32_config.json"]
    elif case == "unreadable":
        (org / "fill-mask_fp32_config.json").mkdir()  # a folder where the recipe should be (chmod 0 stops no root)
        lst.write_text(good + "\n" + str(org / "fill-mask_fp32_config.json") + "\n")
        needles = ["fill-mask_fp32_config.json"]
    elif case == "bad-json":
        (org / "fill-mask_fp32_config.json").write_text('{"loader": {"task": ')
        lst.write_text(good + "\n" + str(org / "fill-mask_fp32_config.json") + "\n")
        needles = ["fill-mask_fp32_config.json"]
    elif case == "bad-name":
        (org / "recipe.json").write_text(open(good).read())
        args = ["-c", str(org), "-o", str(tmp_path / "o")]
        needles = ["recipe.json", "<task>_<precision>_config"]
    else:
        (org / "fill-mask_fp32_config.json").write_text(open(good).read())
        dup = tmp_path / "copy" / "acme_tiny"
        dup.mkdir(parents=True)
        (dup / "fill-mask_fp32_config.json").write_text(open(good).read())
        lst.write_text(f"{org}/fill-mask_fp32_config.json\n{dup}/fill-mask_fp32_config.json\n")
        needles = ["acme__tiny__fill-mask__fp32"]
    r = subprocess.run([winml_asan, "sweep", *args, "--random-weights"], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, **U.SAN_ENV))
    U.assert_clean_error(r, "winml sweep", *needles)
    assert not (tmp_path / "o").exists()


def test_a_file_the_sweep_did_not_write_is_never_replaced(winml, tmp_path):
    f = os.path.join(REF, "BAAI_bge-small-en-v1.5", "feature-extraction_fp16_config.json")
    lst = tmp_path / "l.txt"
    lst.write_text(f + "\n")
    mine = tmp_path / "o" / "eval_results" / "2026-01-02" / "models" / "BAAI__bge-small-en-v1.5__feature-extraction__fp16"
    mine.mkdir(parents=True)
    (mine / "eval_result.json").write_text('{"model": "hand-written"}')
    r = sweep(winml, "-c", lst, "-o", tmp_path / "o", "--random-weights", "--date", "2026-01-02")
    line = U.assert_clean_error(r, "winml sweep", "eval_result.json", "not written by winml sweep")
    assert (mine / "eval_result.json").read_text() == '{"model": "hand-written"}'
    assert not (mine.parent.parent / "environment.json").exists(), line
    # ours is replaced on a new run (not --resume) and kept with --resume
    (mine / "eval_result.json").unlink()
    assert sweep(winml, "-c", lst, "-o", tmp_path / "o", "--random-weights", "--date", "2026-01-02").returncode == 0
    first = (mine / "eval_result.json").read_text()
    assert sweep(winml, "-c", lst, "-o", tmp_path / "o", "--random-weights", "--resume").returncode == 0
    assert (mine / "eval_result.json").read_text() == first  # --resume found the 2026-01-02 sweep and skipped it
    os.utime(mine / "eval_result.json", ns=(0, 0))
    assert sweep(winml, "-c", lst, "-o", tmp_path / "o", "--random-weights", "--date", "2026-01-02").returncode == 0
    assert os.stat(mine / "eval_result.json").st_mtime_ns > 0  # rewritten
    assert load(mine / "eval_result.json")["winml_sweep"]["complete"] is True


def test_stage_limits_kill_and_classify(winml, tmp_path):
    """--timeout: the stage is killed at the wall-clock limit (TIMEOUT); --max-memory: RLIMIT_AS of each stage
    (a recipe whose activations need more than 64 MiB fails perf with RUNTIME_FAIL, and passes without the limit)."""
    f = os.path.join(REF, "BAAI_bge-small-en-v1.5", "feature-extraction_fp16_config.json")
    lst = tmp_path / "l.txt"
    lst.write_text(f + "\n")
    r = sweep(winml, "-c", lst, "-o", tmp_path / "t", "--random-weights", "--timeout", "0.001", "-f", "json")
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)["results"][0]
    assert row["status"] == "failed" and row["failure_classification"] == "TIMEOUT" and row["failed_stage"] == "build"
    d = load(glob.glob(str(tmp_path / "t" / "eval_results" / "*" / "models" / "*" / "eval_result.json"))[0])
    assert d["perf"]["timeout"] is True and d["winml_sweep"]["stages"]["build"]["signal"] == signal.SIGKILL
    big = tmp_path / "r" / "acme_big"
    big.mkdir(parents=True)
    doc = load(f)
    doc["export"]["batch_size"] = 8
    for t in doc["export"]["input_tensors"]:
        t["shape"] = [8, 1024]
    (big / "feature-extraction_fp32_config.json").write_text(json.dumps(doc))
    rows = {}
    for mem in ("64M", "0"):
        r = sweep(winml, "-c", tmp_path / "r", "-o", tmp_path / f"m{mem}", "--random-weights", "--max-memory", mem,
                  "--iterations", "1", "--samples", "1", "-f", "json")
        assert r.returncode == 0, r.stderr
        rows[mem] = json.loads(r.stdout)["results"][0]
    assert rows["64M"]["status"] == "failed" and rows["64M"]["failure_classification"] == "RUNTIME_FAIL", rows["64M"]
    # refused by the allocator or by the engine's budget check first (which, depends on how much of the 64 MiB the
    # binary's own mappings take)
    assert rows["64M"]["failed_stage"] == "perf" and ("cannot allocate" in rows["64M"]["error"] or
                                                      "memory available to this process" in rows["64M"]["error"]), rows["64M"]
    assert rows["0"]["status"] == "passed", rows["0"]


def test_image_recipes_get_a_tiny_checkpoint_of_their_shape(winml, tmp_path):
    """The tiny config follows the recipe: its image size (rad-dino's 518, patches of 14), a CNN's stages
    (ResNet's hidden_sizes), and a tower's two-tower checkpoint (CLIP's text and image encoders come from a CLIP
    checkpoint, as the real ones do: their model_class is ...WithProjection). Each failed to build before."""
    names = ["microsoft_rad-dino/image-feature-extraction_fp16_config.json",
             "microsoft_resnet-18/image-classification_fp16_config.json",
             "openai_clip-vit-base-patch16/zero-shot-image-classification_fp16_config_text-encoder.json",
             "openai_clip-vit-base-patch16/zero-shot-image-classification_fp16_config_image-encoder.json"]
    lst = tmp_path / "images.txt"
    lst.write_text("\n".join(os.path.join(REF, n) for n in names) + "\n")
    r = sweep(winml, "-c", lst, "-o", tmp_path / "res", "--random-weights", "-q")
    assert r.returncode == 0, r.stderr
    got = result_set(tmp_path / "res")
    assert len(got) == 4 and all(v[0] == "passed" for v in got.values()), got


def test_progress_on_a_terminal(winml, tmp_path):
    """Progress goes to stderr when it is a terminal (a pty here): each recipe's "[i/n] key ..." line replaced by its
    outcome with its class; on a pipe there is none (test_single_run_writes_the_reference_layout)."""
    import pty
    recs = [os.path.join(REF, "mattmdjaga_segformer_b2_clothes", f"image-segmentation_{p}_config.json")
            for p in ("fp16", "w8a16")]  # refused by model_type at build: fast (vitpose builds since stop 51)
    lst = tmp_path / "l.txt"
    lst.write_text("\n".join(recs) + "\n")
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([winml, "sweep", "-c", str(lst), "-o", str(tmp_path / "o"), "--random-weights"],
                             stdout=subprocess.DEVNULL, stderr=slave, stdin=subprocess.DEVNULL)
        os.close(slave)
        chunks = []
        while True:
            try:
                b = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not b:
                break
            chunks.append(b)
        assert p.wait(timeout=300) == 0
    finally:
        os.close(master)
    text = b"".join(chunks).decode()
    keys = [f"mattmdjaga__segformer_b2_clothes__image-segmentation__{q}" for q in ("fp16", "w8a16")]
    for i, k in enumerate(keys, 1):
        assert f"[{i}/2] {k} ..." in text, text
        assert re.search(rf"\r\x1b\[K\[{i}/2\] {re.escape(k)}: failed EXPORT_FAIL \([0-9.]+ s\)\r?\n", text), text
