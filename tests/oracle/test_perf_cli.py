"""`winml perf` on a torch.onnx export: the reference's perf JSON (schema_version 2) with sane values,
inputs generated from the specs (ids below the vocab), dims by name, and clear usage errors (exit 2)."""
import json
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import oracle_util as U  # noqa: E402


@pytest.fixture(scope="module")
def bert(request):
    cfg = transformers.BertConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, max_position_embeddings=64)
    m = transformers.BertForSequenceClassification(cfg).eval()
    path = U.scratch(request, "perf") / "bert.onnx"
    ids = torch.randint(0, 97, (1, 8))
    torch.onnx.export(m, (ids, torch.ones_like(ids)), str(path), input_names=["input_ids", "attention_mask"],
                      output_names=["logits"], opset_version=17, dynamo=False,
                      dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}})
    return path


def perf(winml, *args):
    return subprocess.run([winml, "perf", *map(str, args)], capture_output=True, text=True, timeout=300)


def test_perf_json_schema(winml, bert):
    r = perf(winml, "-m", bert, "-f", "json", "--iterations", "7", "--warmup", "2", "--seq-len", "12", "--batch-size", "3")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["schema_version"] == 2
    bi = d["benchmark_info"]
    assert bi["iterations"] == 7 and bi["warmup"] == 2 and bi["batch_size"] == 3 and bi["precision"] == "fp32"
    assert d["model_info"]["input_shapes"] == [[3, 12], [3, 12]]
    assert d["model_info"]["output_shapes"] == [[3, 2]]
    lat, raw = d["latency_ms"], d["raw_samples_ms"]
    assert len(raw) == 7
    s = sorted(raw)
    # the reference's percentiles of the raw samples: sorted[min(int(n p / 100), n - 1)]
    for p in (50, 90, 95, 99):
        assert lat[f"p{p}"] == pytest.approx(s[min(int(7 * p / 100), 6)])
    assert lat["min"] == pytest.approx(s[0]) and lat["max"] == pytest.approx(s[-1])
    assert lat["mean"] == pytest.approx(np.mean(raw)) and lat["std"] == pytest.approx(np.std(raw), rel=1e-6, abs=1e-9)
    assert d["throughput"]["samples_per_sec"] == pytest.approx(3 * d["throughput"]["batches_per_sec"])
    mem = d["memory"]
    assert mem["rss_after_compile_mb"] >= mem["rss_baseline_mb"] > 0
    assert mem["rss_total_delta_mb"] == pytest.approx(mem["rss_after_inference_mb"] - mem["rss_baseline_mb"])


def test_perf_duration_and_dims(winml, bert):
    r = perf(winml, "-m", bert, "-f", "json", "--duration", "0.3", "--warmup", "0", "--dim", "sequence=5")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["model_info"]["input_shapes"] == [[1, 5], [1, 5]]
    assert d["benchmark_info"]["iterations"] == len(d["raw_samples_ms"]) >= 1


def test_perf_input_data(winml, bert, tmp_path):
    from safetensors.numpy import save_file
    f = tmp_path / "in.safetensors"
    save_file({"input_ids": np.array([[5, 6, 7]], dtype=np.int64), "attention_mask": np.ones((1, 3), dtype=np.int64)}, str(f))
    r = perf(winml, "-m", bert, "-f", "json", "--iterations", "2", "--input-data", f)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["model_info"]["input_shapes"] == [[1, 3], [1, 3]]
    bad = tmp_path / "bad.safetensors"
    save_file({"input_ids": np.array([[5]], dtype=np.int64)}, str(bad))
    r = perf(winml, "-m", bert, "--input-data", bad)
    assert r.returncode == 2 and "attention_mask" in r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--ep", "qnn"], "available: cpu"),
    (["--iterations", "0"], "--iterations"),
    (["--dim", "oops"], "NAME=VALUE"),
    (["--bogus"], "unknown option"),
])
def test_perf_usage_errors(winml, bert, args, needle):
    r = perf(winml, "-m", bert, *args)
    assert r.returncode == 2 and needle in r.stderr, r.stderr


def test_perf_missing_model(winml, tmp_path):
    r = perf(winml, "-m", tmp_path / "none.onnx")
    assert r.returncode == 2 and "none.onnx" in r.stderr


def test_perf_llm_section(winml, tmp_path):
    """A causal LM with a KV cache gets the LLM figures; the numbers are consistent with each other."""
    from test_generate import MODELS, VOCAB, export_with_past
    cfg = transformers.AutoConfig.for_model("qwen2", vocab_size=VOCAB, **MODELS["qwen2"])
    m = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    path = tmp_path / "dec.onnx"
    export_with_past(m, cfg, path)
    r = perf(winml, "-m", path, "-f", "json", "--iterations", "2", "--warmup", "1", "--seq-len", "8",
             "--prompt-len", "12", "--gen-len", "9", "--llm-runs", "2", "--decode-at", "5,40")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    shapes = d["model_info"]["input_shapes"]
    assert shapes[0] == [1, 8] and shapes[1] == [1, 8]  # ids [1, seq], mask [1, past + seq] with past 0
    llm = d["llm"]
    assert llm["prompt_tokens"] == 12 and llm["generated_tokens"] == 9 and llm["runs"] == 2
    assert llm["prefill_tokens_per_sec"] == pytest.approx(12 * 1e3 / llm["prefill_ms"])
    assert llm["decode_tokens_per_sec"] == pytest.approx(1e3 / llm["tpot_ms"])
    assert llm["ttft_ms"] >= llm["prefill_ms"] > 0 and llm["load_ms"] > 0
    at = llm["decode_at_context"]
    assert [x["context"] for x in at] == [5, 40] and llm["decode_at_rounds"] >= 3
    assert at[0]["speed_vs_first"] == 1 and at[1]["speed_vs_first"] > 0 and at[1]["decode_tokens_per_sec"] > 0
    r = perf(winml, "-m", path, "-f", "json", "--iterations", "1", "--no-llm")
    assert "llm" not in json.loads(r.stdout)
