"""The JSON of perf (classic and LLM), eval compare, analyze, build's analyze_result.json and build_manifest.json
hold every key of the reference system's schemas, with the reference's types (issue 32, "JSON and folders").

The key lists come from ../shared/facts/reference-json.md itself where its notation is regular (a bullet
"`name`: `key`, `key` ..." with {a,b} alternatives); the rest are listed here, each list under a comment naming
its section, and every key so listed is checked to occur in that section's text (so that the list cannot drift
from the file). Each run uses tiny random models built by winml itself.
"""
import json
import math
import os
import re

import pytest

import builder_util as BU
import oracle_util as U

pytest.importorskip("transformers")

FACTS = os.path.join(os.path.dirname(U.ROOT), "shared", "facts", "reference-json.md")
if not os.path.exists(FACTS):  # CI keeps the shared folder beside the checkout too
    FACTS = os.path.join(U.ROOT, "..", "shared", "facts", "reference-json.md")

NUM = (int, float)  # JSON has one number type: 0.0 reads back as int 0
OPT_NUM = (int, float, type(None))


# ---------------------------------------------------------------- the facts file

def sections():
    with open(FACTS, encoding="utf-8") as f:
        text = f.read()
    parts = re.split(r"^## (\d+)\. ", text, flags=re.M)
    return {int(parts[i]): parts[i + 1] for i in range(1, len(parts), 2)}


def expand(token):
    """`{a,b}_x` -> [a_x, b_x] (every brace group, cartesian); `a,b` -> [a, b]."""
    m = re.search(r"\{([^{}]*)\}", token)
    if m:
        out = []
        for alt in m.group(1).split(","):
            out += expand(token[:m.start()] + alt.strip() + token[m.end():])
        return out
    return [t.strip() for t in token.split(",") if t.strip()]


def bullets(section_text):
    """The section's bullets ("- ..." with their indented continuation lines), joined."""
    out, cur = [], None
    for line in section_text.splitlines():
        if line.startswith("- "):
            cur = [line[2:]]
            out.append(cur)
        elif cur is not None and line.startswith("  "):
            cur.append(line.strip())
        else:
            cur = None
    return [" ".join(b) for b in out]


IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")


def bullet_keys(section_text, name):
    """The keys a bullet lists under the heading "`name`:" (at its start or inside it): its backticked
    identifiers (braces expanded), up to the next "`other`:" heading of the same bullet."""
    head = re.compile(r"`" + re.escape(name) + r"(?:\[\])?`\s*(?:\([^)]*\))?:")
    for b in bullets(section_text):
        m = head.search(b)
        if not m:
            continue
        rest = b[m.end():]
        nxt = re.search(r"`\w+`\s*(?:\([^)]*\))?:", rest)
        body = rest[:nxt.start()] if nxt else rest
        keys = []
        for tok in re.findall(r"`([^`]+)`", body):
            for k in expand(tok):
                k = k.removesuffix("[]")
                if IDENT.match(k) and k not in keys:
                    keys.append(k)
        return keys
    raise AssertionError(f"{FACTS}: no bullet for `{name}`")


def listed(section_text, keys):
    """Every key of a hand-written list occurs in its section of the facts file (as a word, or in a backticked
    token once its {a,b} alternatives are expanded)."""
    flat = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", section_text))
    for tok in re.findall(r"`([^`]+)`", section_text):
        if re.search(r"\{[^{}]*\}", tok) and not re.search(r"[\s:]", tok):
            flat.update(expand(tok))
    missing = [k for k in keys if k not in flat]
    assert not missing, f"{FACTS}: these keys of the test are not in the section: {missing}"
    return keys


S = sections()


# ---------------------------------------------------------------- types

# a key's type when its name does not say it
TYPES = {
    "schema_version": int, "runtime": str, "model_id": str, "running_model_path": str, "device": str, "ep": str,
    "ep_source": str, "ep_options": dict, "precision": str, "iterations": int, "warmup": int, "batch_size": int,
    "effective_batch_size": int, "timestamp": str, "task": (str, type(None)), "bundle_dir": str,
    "effective_device": str, "compile": bool, "compile_timeout": OPT_NUM, "monitor": bool, "max_new_tokens": int,
    "apply_template": bool, "prompt": str, "prompt_tokens": int, "generated_tokens": int, "context_length": int,
    "input_names": list, "input_shapes": list, "input_types": list, "output_names": list, "output_shapes": list,
    "kind": str, "index": int, "decode_token_durations_ms": list, "weight_upload_duration_ms": OPT_NUM,
    "weight_upload_estimate_source": str, "warmup_excluded": bool, "warmup_request_count": int,
    "timed_request_count": int, "duration_sec": NUM,
    # eval
    "model_path": str, "reference_path": str, "reference_device": str, "reference_ep": str, "dataset": dict,
    "split": (str, type(None)), "samples": int, "shuffle": bool, "seed": int, "mode": str, "skip_build": bool,
    "use_cache": bool, "rebuild": bool, "metrics": dict,
    # analyze
    "analysis_timestamp": str, "metadata": dict, "opset_version": int, "producer_name": str, "producer_version": str,
    "total_operators": int, "operator_counts": dict, "unique_operator_types": int, "detected_pattern_count": dict,
    "results": list, "ihv_type": str, "ep_type": str, "device_type": str, "runtime_support": bool,
    "has_errors": bool, "has_warnings": bool, "classification": dict, "information": list,
    "supported": list, "partial": list, "unsupported": list, "unknown": list,
    # manifest
    "source": str, "final_artifact": str, "stages": list, "cache_key": str, "config_hash": str, "name": str,
    "status": str, "filename": str, "nodes_quantized": int, "nodes_skipped": int, "analyze_iterations": int,
    "analyze_unsupported_node_count": int, "analyze_details": dict, "lint": dict, "autoconf": dict,
    "autoconf_not_converged": bool, "errors": int, "warnings": int, "passed": bool, "error_patterns": list,
    "warning_patterns": list,
}


def want_type(key):
    if key in TYPES:
        return TYPES[key]
    if re.search(r"(_ms|_mb|_sec|_seconds|_per_second|_per_sec|_pct)$", key) or key in (
            "mean", "min", "max", "std", "p50", "p90", "p95", "p99", "warmup_mean"):
        return NUM
    raise AssertionError(f"test: no type for key '{key}'")


def check(obj, keys, where):
    assert isinstance(obj, dict), f"{where}: not an object"
    missing = [k for k in keys if k not in obj]
    assert not missing, f"{where}: missing the reference's keys {missing}"
    bad = [(k, type(obj[k]).__name__) for k in keys if not isinstance(obj[k], want_type(k))]
    assert not bad, f"{where}: wrong types {bad}"


# ---------------------------------------------------------------- the models

@pytest.fixture(scope="module")
def built(request, winml):
    """A tiny encoder built with --analyze, and a tiny decoder: the build folders."""
    d = U.scratch(request, "refjson")
    out = {}
    for kind, extra in (("bert", ["--analyze"]), ("qwen2", [])):
        src = os.path.join(d, kind)
        if not os.path.exists(os.path.join(src, "config.json")):
            BU.make_tiny(kind, src)
        dst = os.path.join(d, kind + "-built")
        r = U.run([winml, "build", "-m", src, "-o", dst, "--rebuild", "-q", "-f", "json", *extra]
                  if os.path.exists(dst) else [winml, "build", "-m", src, "-o", dst, "-q", "-f", "json", *extra])
        assert r.returncode == 0, U.describe(r)
        out[kind] = dst
    return out


def run_json(argv, ok=(0,)):
    r = U.run(argv)
    assert r.returncode in ok, U.describe(r)
    return json.loads(r.stdout)  # Python's json reads the reference's Infinity / NaN too


# ---------------------------------------------------------------- 1. perf, classic

def test_perf_classic_keys(winml, built):
    sec = S[1]
    d = run_json([winml, "perf", "-m", built["bert"], "-f", "json", "--iterations", "10", "--warmup", "1",
                  "--seq-len", "8"])
    # section 1, "Keys:" (hw_monitor only with --monitor, which the reference's default does not set)
    top = listed(sec, ["schema_version", "benchmark_info", "model_info", "latency_ms", "throughput",
                       "raw_samples_ms", "memory"])
    assert all(k in d for k in top), [k for k in top if k not in d]
    assert d["schema_version"] == 2 and isinstance(d["raw_samples_ms"], list)
    check(d["benchmark_info"], bullet_keys(sec, "benchmark_info"), "benchmark_info")
    check(d["model_info"], bullet_keys(sec, "model_info"), "model_info")
    check(d["latency_ms"], bullet_keys(sec, "latency_ms"), "latency_ms")
    check(d["throughput"], bullet_keys(sec, "throughput"), "throughput")
    mem = [k for k in bullet_keys(sec, "memory") if k.startswith(("rss_", "vram_"))]
    assert len(mem) == 21, mem  # "Classic always writes all 21"
    check(d["memory"], mem, "memory")
    bi = d["benchmark_info"]
    # the reference's meanings
    assert bi["task"] == "text-classification"  # from the build folder
    assert bi["running_model_path"] == os.path.join(built["bert"], "model.onnx")
    assert bi["ep"] == "CPUExecutionProvider" and d["model_info"]["precision"] == "fp32"
    assert bi["effective_batch_size"] == 1
    lat = d["latency_ms"]
    raw = sorted(d["raw_samples_ms"])  # section 1, Stats: sorted[min(int(n*p/100), n-1)], no interpolation
    assert [lat[f"p{p}"] for p in (50, 90, 95, 99)] == [raw[min(int(10 * p / 100), 9)] for p in (50, 90, 95, 99)]
    assert d["throughput"]["batches_per_sec"] == pytest.approx(1000 / lat["mean"])
    m = d["memory"]
    assert m["rss_checkpoint_peak_mb"] == pytest.approx(
        max(m["rss_baseline_mb"], m["rss_after_compile_mb"], m["rss_after_inference_mb"]))
    # ours beside them
    assert "engine" in d and "threads" in bi and "peak_rss_mb" in m


# ---------------------------------------------------------------- 2. perf, LLM (GenAI layout)

def genai_aggregate(sec):
    m = re.search(r"`\{([^}]*)\}` for each of ([^(]*)\(", " ".join(bullets(sec)))
    assert m, f"{FACTS}: section 2 aggregate list not found"
    stats = [s.strip() for s in m.group(1).split(",")]
    figs = [f.strip() for f in m.group(2).replace("\n", " ").split(",") if f.strip()]
    return stats, figs


def test_perf_llm_genai_keys(winml, built):
    sec = S[2]
    d = run_json([winml, "perf", "-m", built["qwen2"], "-f", "json", "--iterations", "2", "--warmup", "1",
                  "--seq-len", "4", "--prompt-len", "8", "--gen-len", "5", "--llm-runs", "2", "--llm-warmup", "1"])
    top = listed(sec, ["schema_version", "benchmark_info", "load", "requests", "aggregate", "memory"])
    assert all(k in d for k in top), [k for k in top if k not in d]
    check(d["benchmark_info"], bullet_keys(sec, "benchmark_info"), "benchmark_info")
    check(d["load"], bullet_keys(sec, "load"), "load")
    req_keys = bullet_keys(sec, "requests")
    assert "steady_state_decode_tokens_per_second" in req_keys and "decode_token_durations_ms" in req_keys
    assert [r["kind"] for r in d["requests"]] == ["warmup", "timed", "timed"]
    for i, r in enumerate(d["requests"]):
        check(r, req_keys, f"requests[{i}]")
        # the reference's definitions
        dec = r["decode_token_durations_ms"]
        assert len(dec) == r["generated_tokens"] - 1 == 4
        assert r["model_ttft_duration_ms"] == pytest.approx(r["prefill_duration_ms"] + r["first_token_duration_ms"])
        assert r["steady_state_decode_tokens_per_second"] == pytest.approx(len(dec) * 1000 / sum(dec))
        assert r["steady_state_tpot_ms"] == pytest.approx(sum(dec) / len(dec))
        assert r["prefill_tokens_per_second"] == pytest.approx(8 * 1000 / r["prefill_duration_ms"])
    agg = d["aggregate"]
    head = listed(sec, ["warmup_excluded", "warmup_request_count", "timed_request_count",
                        "cold_start_ttft_duration_ms", "cold_start_total_duration_ms"])  # section 2, aggregate
    check(agg, head, "aggregate")
    assert agg["warmup_request_count"] == 1 and agg["timed_request_count"] == 2
    stats, figs = genai_aggregate(sec)
    assert len(figs) == 10 and "p90" in stats, (stats, figs)
    for f in figs:
        check(agg.get(f), stats, f"aggregate.{f}")
    timed = [r["steady_state_decode_tokens_per_second"] for r in d["requests"][1:]]
    assert agg["steady_state_decode_tokens_per_second"]["mean"] == pytest.approx(sum(timed) / 2)
    assert agg["cold_start_ttft_duration_ms"] == pytest.approx(
        d["load"]["session_load_duration_ms"] + d["requests"][0]["request_ttft_duration_ms"])
    assert "llm" in d  # ours beside them
    rss = [k for k in bullet_keys(S[1], "memory") if k.startswith("rss_")]
    check(d["memory"], rss, "memory")  # section 2: "the 7 rss_* keys" (named in section 1)


# ---------------------------------------------------------------- 3. eval compare

def compare_metric_names(sec):
    m = re.search(r"m ∈ `([^`]*)` and stat ∈ `([^`]*)`", sec)
    assert m, f"{FACTS}: section 3 metric list not found"
    return [x.strip() for x in m.group(1).split(",")], [x.strip() for x in m.group(2).split(",")]


def test_eval_compare_keys(winml, built):
    sec = S[3]
    model = os.path.join(built["bert"], "model.onnx")
    d = run_json([winml, "eval", "--mode", "compare", "-m", model, "--reference", model, "--samples", "3",
                  "--seq-len", "8", "-f", "json"])
    # section 3, "Keys:" without the bracketed (optional) ones, plus those this run has (--reference)
    keys = listed(sec, ["runtime", "device", "dataset", "mode", "skip_build", "use_cache", "rebuild", "metrics",
                        "model_path", "reference_path", "reference_device", "reference_ep", "precision", "ep"])
    check(d, keys, "eval")
    check(d["dataset"], listed(sec, ["split", "samples", "shuffle", "seed"]), "dataset")
    assert d["mode"] == "compare" and d["dataset"]["samples"] == 3
    metrics, stats = compare_metric_names(sec)
    assert len(metrics) == 5 and stats == ["mean", "std", "min", "max"]
    for m in metrics:
        for s in stats:
            per = d["metrics"].get(f"{m}_{s}")
            assert isinstance(per, dict) and isinstance(per.get("logits"), NUM), (m, s, per)
    # identical outputs: +inf as there (written Infinity), std 0
    assert d["metrics"]["sqnr_db_mean"]["logits"] == math.inf and d["metrics"]["psnr_db_min"]["logits"] == math.inf
    assert d["metrics"]["sqnr_db_std"]["logits"] == 0 and d["metrics"]["mse_max"]["logits"] == 0
    assert "outputs" in d and "passed" in d  # ours beside them


# ---------------------------------------------------------------- 4. analyze

# section 4: metadata{...}, results[] entries and classification{...} (nested braces: listed here)
META = ["model_path", "opset_version", "producer_name", "producer_version", "total_operators", "operator_counts",
        "unique_operator_types", "detected_pattern_count"]
RESULT = ["ihv_type", "ep_type", "device_type", "runtime_support", "has_errors", "has_warnings", "classification",
          "information"]
CLASSES = ["supported", "partial", "unsupported", "unknown"]
INFO = ["Information_id", "actions", "explanation", "pattern_id", "enabled", "status", "pattern_node_list"]
TYPES.update({"Information_id": str, "actions": list, "explanation": str, "pattern_id": str, "enabled": bool,
              "pattern_node_list": list})


def check_analyze(d, where):
    sec = S[4]
    check(d, listed(sec, ["analysis_timestamp", "metadata", "results"]), where)
    check(d["metadata"], listed(sec, META), f"{where}.metadata")
    assert d["results"], f"{where}: no results"
    for i, r in enumerate(d["results"]):
        check(r, listed(sec, RESULT), f"{where}.results[{i}]")
        check(r["classification"], listed(sec, CLASSES), f"{where}.results[{i}].classification")
        ids = [p for c in CLASSES for p in r["classification"][c]]
        assert ids and all(re.match(r"^OP/[\w.]+/\w+$", p) for p in ids), ids
        assert r["runtime_support"] == (not r["classification"]["partial"] and not r["classification"]["unsupported"]
                                        and not r["classification"]["unknown"])
        assert r["has_errors"] == bool(r["classification"]["unsupported"])
        for k, info in enumerate(r["information"]):
            check(info, listed(sec, INFO), f"{where}.results[{i}].information[{k}]")
    return d


def test_analyze_keys(winml, built):
    model = os.path.join(built["bert"], "model.onnx")
    d = check_analyze(run_json([winml, "analyze", "-m", model, "-f", "json", "--ep", "all"], ok=(0, 1)), "analyze")
    assert {r["ep_type"] for r in d["results"]} >= {"QNNExecutionProvider", "CPUExecutionProvider"}
    assert sum(d["metadata"]["operator_counts"].values()) == d["metadata"]["total_operators"]
    assert "targets" in d and "verdict" in d  # ours beside them


def test_build_analyze_result(built):
    with open(os.path.join(built["bert"], "analyze_result.json")) as f:
        d = check_analyze(json.load(f), "analyze_result.json")
    assert [r["ep_type"] for r in d["results"]] == ["CPUExecutionProvider"]


# ---------------------------------------------------------------- 5. build_manifest

# section 5, "Manifest": the top-level keys (input_onnx is null for a checkpoint build and so dropped, as there)
MANIFEST = ["schema_version", "source", "final_artifact", "stages", "model_id", "task", "cache_key", "config_hash",
            "elapsed_seconds", "timestamp"]
ANALYZE = ["analyze_iterations", "analyze_unsupported_node_count", "analyze_details"]
STAGE = ["name", "status", "filename", "elapsed_seconds"]
LINT = ["errors", "warnings", "passed", "error_patterns", "warning_patterns"]


@pytest.mark.parametrize("kind", ["bert", "qwen2"])
def test_build_manifest_keys(built, kind):
    sec = S[5]
    with open(os.path.join(built[kind], "build_manifest.json")) as f:
        d = json.load(f)
    check(d, listed(sec, MANIFEST), "build_manifest")
    assert d["schema_version"] == 1 and d["source"] == "hf" and d["final_artifact"] == "model.onnx"
    assert d["cache_key"].rsplit("_", 1)[1] == d["config_hash"] and re.match(r"^[0-9a-f]{16}$", d["config_hash"])
    for s in d["stages"]:
        check(s, listed(sec, STAGE), f"stages[{s.get('name')}]")
        assert s["status"] in ("completed", "skipped")
    if kind == "bert":  # built with --analyze
        check(d, listed(sec, ANALYZE), "build_manifest")
        check(d["analyze_details"], listed(sec, ["lint", "autoconf", "autoconf_not_converged"]), "analyze_details")
        check(d["analyze_details"]["lint"], listed(sec, LINT), "analyze_details.lint")
        assert any(a["file"] == "analyze_result.json" for a in d["artifacts"])
    else:
        assert "analyze_details" not in d
    assert "artifacts" in d and "stages" in d and "winml_status" in d["stages"][0]  # ours beside them


def test_build_analyze_no_rules(winml, tmp_path, built, monkeypatch):
    """--analyze without a rule file for the target EP: refused before any work, naming the EP and the file."""
    (tmp_path / "data" / "ep_rules").mkdir(parents=True)
    monkeypatch.setenv("WM_DATA_DIR", str(tmp_path / "data"))
    src = os.path.join(os.path.dirname(built["bert"]), "bert")
    r = U.run([winml, "build", "-m", src, "-o", str(tmp_path / "x"), "--analyze", "-q"])
    U.assert_clean_error(r, "winml build", "--analyze", "cpu", "cpu.json")
    assert not os.path.exists(tmp_path / "x")
