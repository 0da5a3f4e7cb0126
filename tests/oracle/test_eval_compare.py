"""`winml eval --mode compare`: metrics checked against numpy on the same arrays, gates (exit 1),
reference outputs from transformers (tools/reference_outputs.py), fp16 vs fp32, and --per-layer
naming the first diverging node of a graph with one corrupted weight."""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from safetensors.numpy import load_file, save_file  # noqa: E402

from engine_util import engine_run  # noqa: E402
import oracle_util as U  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def bert(request):
    d = U.scratch(request, "eval")
    cfg = transformers.BertConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, max_position_embeddings=64, num_labels=3)
    m = transformers.BertForSequenceClassification(cfg).eval()
    m.save_pretrained(d / "hf")
    ids = torch.randint(3, 97, (1, 8))
    path = d / "bert.onnx"
    torch.onnx.export(m, (ids, torch.ones_like(ids)), str(path), input_names=["input_ids", "attention_mask"],
                      output_names=["logits"], opset_version=17, dynamo=False,
                      dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}})
    return d, path


def evaluate(winml, *args):
    r = subprocess.run([winml, "eval", *map(str, args)], capture_output=True, text=True, timeout=600)
    return r, (json.loads(r.stdout) if r.stdout.strip().startswith("{") else None)


def np_metrics(c, r):
    c = c.astype(np.float64)
    r = r.astype(np.float64)
    d = c - r
    mse = np.mean(d * d)
    return {"sqnr_db": 10 * np.log10(np.sum(r * r) / np.sum(d * d)),
            "psnr_db": 10 * np.log10(np.max(r * r) / mse),
            "cosine_similarity": np.sum(c * r) / (np.linalg.norm(c) * np.linalg.norm(r)),
            "mse": mse, "max_abs_diff": np.max(np.abs(d))}


def test_metrics_match_numpy(winml, build_dir, bert, tmp_path):
    d, path = bert
    rng = np.random.default_rng(3)
    tensors, per_sample = {}, []
    for i in range(4):
        ids = rng.integers(3, 97, (2, 10)).astype(np.int64)
        mask = np.ones_like(ids)
        ours, _ = engine_run(build_dir, path, {"input_ids": ids, "attention_mask": mask}, tmp_path)
        ref = ours["logits"] + rng.normal(0, 0.01 * (i + 1), ours["logits"].shape).astype(np.float32)
        tensors.update({f"inputs.{i}.input_ids": ids, f"inputs.{i}.attention_mask": mask, f"outputs.{i}.logits": ref})
        per_sample.append(np_metrics(ours["logits"], ref))
    f = tmp_path / "ref.safetensors"
    save_file(tensors, str(f))
    r, res = evaluate(winml, "--mode", "compare", "-m", path, "--reference-outputs", f, "-f", "json")
    assert r.returncode == 0, r.stderr
    assert res["samples"] == 4
    for name, vals in res["outputs"]["logits"].items():
        xs = np.array([s[name] for s in per_sample])
        assert vals["mean"] == pytest.approx(xs.mean(), rel=1e-6), name
        assert vals["std"] == pytest.approx(xs.std(), rel=1e-5, abs=1e-12), name
        assert vals["min"] == pytest.approx(xs.min(), rel=1e-6) and vals["max"] == pytest.approx(xs.max(), rel=1e-6), name


def test_gate_exit_codes(winml, bert, tmp_path):
    d, path = bert
    r, res = evaluate(winml, "-m", path, "--reference", path, "--samples", "3", "--threshold", "max_abs_diff=0",
                      "--threshold", "cosine_similarity=0.999999", "-f", "json")
    assert r.returncode == 0 and res["passed"] is True, r.stderr
    assert res["outputs"]["logits"]["sqnr_db"]["identical_samples"] == 3
    m16 = tmp_path / "bert16.onnx"
    sys.path.insert(0, ROOT)
    from onnxruntime.transformers.float16 import convert_float_to_float16
    onnx.save(convert_float_to_float16(onnx.load(str(path)), keep_io_types=True), str(m16))
    r, res = evaluate(winml, "-m", m16, "--reference", path, "--samples", "5", "--threshold", "sqnr_db=40", "-f", "json")
    assert r.returncode == 0 and res["passed"], (r.stderr, res)
    assert res["outputs"]["logits"]["sqnr_db"]["min"] > 40
    r, res = evaluate(winml, "-m", m16, "--reference", path, "--samples", "5", "--threshold", "max_abs_diff=1e-9", "-f", "json")
    assert r.returncode == 1 and res["passed"] is False
    assert [t["passed"] for t in res["thresholds"]] == [False]


def test_reference_outputs_from_transformers(winml, bert, tmp_path):
    d, path = bert
    f = tmp_path / "hf_ref.safetensors"
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "reference_outputs.py"), "--model", d / "hf",
                    "--out", f, "--samples", "6", "--seq-len", "12"], check=True, capture_output=True)
    r, res = evaluate(winml, "-m", path, "--reference-outputs", f, "--threshold", "cosine_similarity=0.99999",
                      "--threshold", "max_abs_diff=1e-4", "-f", "json")
    assert r.returncode == 0 and res["passed"], (r.stderr, res)
    assert res["samples"] == 6


def test_per_layer_names_corrupted_node(winml, bert, tmp_path):
    d, path = bert
    m = onnx.load(str(path))
    # corrupt the weight of the second layer's attention output projection
    target = None
    for n in m.graph.node:
        if n.op_type == "MatMul" and "layer.1" in n.name and "attention/output" in n.name:
            target = n
            break
    assert target is not None, [n.name for n in m.graph.node if n.op_type == "MatMul"]
    inits = {t.name: t for t in m.graph.initializer}
    w = next(i for i in target.input if i in inits)
    arr = numpy_helper.to_array(inits[w]).copy()
    arr[0, :] += 3.0
    inits[w].CopyFrom(numpy_helper.from_array(arr, w))
    bad = tmp_path / "bad.onnx"
    onnx.save(m, str(bad))
    r, res = evaluate(winml, "-m", bad, "--reference", path, "--samples", "1", "--per-layer", "-f", "json")
    assert r.returncode == 0, r.stderr
    pl = res["per_layer"]
    assert pl["values_compared"] > 20
    assert pl["first_divergence"]["node"] == target.name, pl["first_divergence"]
    # every value before it agrees
    names = [v["node"] for v in pl["values"]]
    before = pl["values"][:names.index(target.name)]
    assert before and all(v["sqnr_db"] is None or v["sqnr_db"] > 100 for v in before)


def test_model_id_reference(winml, bert, tmp_path):
    """--model-id: the reference is the checkpoint's plain float32 export, built in a temporary folder that is
    removed afterwards; our optimized build passes a tight gate against it, a corrupted copy fails it."""
    d, _ = bert
    out = tmp_path / "build"
    r = subprocess.run([winml, "build", "-m", d / "hf", "-o", out, "-q"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    argv = [winml, "eval", "-m", out / "model.onnx", "--model-id", d / "hf", "--samples", "3", "--seq-len", "12",
            "--threshold", "max_abs_diff=1e-4", "-f", "json"]
    r = subprocess.run(list(map(str, argv)), capture_output=True, text=True, timeout=600, env=env)
    res = json.loads(r.stdout)
    assert r.returncode == 0 and res["passed"], (r.stderr, res)
    assert res["reference"] == str(d / "hf") and res["samples"] == 3
    assert not list(tmp.iterdir())  # the temporary export is gone
    m = onnx.load(str(out / "model.onnx"))
    big = max(m.graph.initializer, key=lambda t: int(np.prod(t.dims)) if t.data_type == 1 else 0)
    arr = numpy_helper.to_array(big).copy()
    arr *= 1.5
    big.CopyFrom(numpy_helper.from_array(arr, big.name))
    bad = tmp_path / "bad.onnx"
    onnx.save(m, str(bad))
    argv[3] = bad
    r = subprocess.run(list(map(str, argv)), capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 1 and not json.loads(r.stdout)["passed"], r.stderr
    assert not list(tmp.iterdir())


@pytest.mark.parametrize("args,needle", [
    (["--mode", "task"], "--dataset FILE"),
    (["--threshold", "speed=3"], "METRIC=VALUE"),
    ([], "exactly one of"),
    (["--model-id", "/nonexistent/ckpt"], "/nonexistent/ckpt"),
])
def test_usage_errors(winml, bert, args, needle):
    d, path = bert
    r, _ = evaluate(winml, "-m", path, *args)
    assert r.returncode == 2 and needle in r.stderr, r.stderr
