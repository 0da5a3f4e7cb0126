"""Issue 7, must-show 3: the cross-encoder (mMiniLMv2 architecture: XLMRobertaForSequenceClassification,
12 layers, hidden 384, vocab 250002, one label) built with `winml build` from the checked-in fp32 and fp16
recipes passes `winml eval --mode compare` against the checkpoint's own transformers outputs:
fp32 cosine >= 0.99999 and max abs diff <= 1e-4, fp16 SQNR >= 50 dB; and `--per-layer` names the node whose
weight the test corrupted.

The checkpoint: the real published config, random weights (torch seed 0; transformers' init at the config's
initializer_range 0.02, then biases N(0, 0.02) and LayerNorm scales N(1, 0.1) as in trained models, so the
bias paths of the fused ops are exercised), saved with save_pretrained (safetensors). The one-row relevance
head is set like a trained one: with a random readout the logits hover around zero (+-0.25) and the SQNR of a
one-element output is a relative error, so the sample nearest zero decides the gate, in onnxruntime as much
as in our engine (other seeds: onnxruntime's worst fp16 sample 26.5 and 10.1 dB). A trained reranker reads
along its features, so out_proj is the unit direction of the mean pooled feature of 4 calibration inputs
(not the evaluated ones) times 0.5: logits of a few units that vary with the input.

Reference outputs: tools/reference_outputs.py (transformers, 20 samples of 512 random token ids; the recipes
fix the inputs at int32 [1, 512]). Each gate is recomputed in numpy on onnxruntime's run of the same artifact
(the artifact judged without our engine); our fp32 figures are checked against onnxruntime's, and our fp16
logits against a float64 numpy evaluation of the fp16 graph that rounds every declared float16 value.

Full size on purpose (the issue names this model): one module-scoped fixture makes the checkpoint, both builds
and the reference outputs once (about 1 GB under pytest's tmp folder); the file takes about 70 s on 2 cores.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import builder_util as BU
import oracle_util as U
from engine_oracle import MS, check, make_model
from engine_util import engine_run

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from safetensors.numpy import load_file  # noqa: E402

NAME = "cross-encoder/mmarco-mMiniLMv2-L12-H384-v1"
RECIPES = os.path.join(U.ROOT, "examples", "recipes", NAME.replace("/", "_"), "cpu", "cpu")
SAMPLES = 20


@pytest.fixture(scope="module")
def ce(request, winml):
    d = U.scratch(request, "crossenc")
    torch.manual_seed(0)
    cfg = transformers.XLMRobertaConfig(**BU.SEEDS[NAME])
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.vocab_size, cfg.num_labels) == (12, 384, 250002, 1)
    model = transformers.XLMRobertaForSequenceClassification(cfg).eval()
    with torch.no_grad():
        # trained models have non-zero biases and LayerNorm scales away from 1 (transformers' init gives 0 and 1,
        # which the optimizer folds away: the bias paths of the fused ops would go unexercised)
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0.0, 0.02)
            elif "LayerNorm.weight" in name:
                p.normal_(1.0, 0.1)
        # the trained-like relevance head (module docstring)
        ids = torch.from_numpy(np.random.default_rng(123).integers(3, cfg.vocab_size, (4, 128)))
        h = model.roberta(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[:, 0]
        f = torch.tanh(model.classifier.dense(h)).mean(0)
        model.classifier.out_proj.weight.copy_((0.5 * f / f.norm())[None])
    model.save_pretrained(d / "ckpt")  # model.safetensors
    del model
    out = {"dir": d}
    for prec in ("fp32", "fp16"):
        r = U.run([winml, "build", "-m", str(d / "ckpt"), "-o", str(d / prec), "-c",
                   os.path.join(RECIPES, f"text-classification_{prec}_config.json"), "-f", "json"])
        assert r.returncode == 0 and not U.crashed(r), U.describe(r)
        out[prec] = d / prec / "model.onnx"
    ref = d / "ref.safetensors"
    r = subprocess.run([sys.executable, os.path.join(U.ROOT, "tools", "reference_outputs.py"), "--model", str(d / "ckpt"),
                        "--out", str(ref), "--samples", str(SAMPLES), "--seq-len", "512", "--input-dtype", "int32"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    out["ref"] = ref
    t = load_file(str(ref))
    out["inputs"] = [{k: t[f"inputs.{i}.{k}"] for k in ("input_ids", "attention_mask")} for i in range(SAMPLES)]
    out["logits"] = np.array([t[f"outputs.{i}.logits"] for i in range(SAMPLES)], np.float64).reshape(SAMPLES)
    return out


def evaluate(winml, *args):
    r = subprocess.run([winml, "eval", *map(str, args)], capture_output=True, text=True, timeout=900)
    return r, (json.loads(r.stdout) if r.stdout.strip().startswith("{") else None)


def ort_logits(ce, prec):
    return np.array([BU.run_ort(str(ce[prec]), f)["logits"] for f in ce["inputs"]], np.float64).reshape(SAMPLES)


def per_sample(c, r):
    """numpy versions of eval's per-sample metrics for a [1, 1] logits tensor, one row per sample."""
    d = c - r
    with np.errstate(divide="ignore"):
        sqnr = 10 * np.log10(r * r / (d * d))
    return {"sqnr_db": sqnr, "cosine_similarity": np.sign(c * r), "max_abs_diff": np.abs(d)}


def pooled_cosine(c, r):
    return float(np.dot(c, r) / (np.linalg.norm(c) * np.linalg.norm(r)))


def test_reference_logits_are_not_degenerate(ce):
    """The gates mean something only when the logits differ between inputs and stay away from zero."""
    x = ce["logits"]
    assert np.isfinite(x).all() and x.std() > 0.02 and np.abs(x).min() > 0.01, x


def test_fp32_passes_compare_gates(winml, ce):
    r, res = evaluate(winml, "--mode", "compare", "-m", ce["fp32"], "--reference-outputs", ce["ref"],
                      "--samples", SAMPLES, "--threshold", "cosine_similarity=0.99999", "--threshold", "max_abs_diff=1e-4",
                      "-f", "json")
    assert r.returncode == 0 and res["passed"] is True, (r.stderr, res)
    assert res["samples"] == SAMPLES
    assert [(t["metric"], t["passed"]) for t in res["thresholds"]] == [("cosine_similarity", True), ("max_abs_diff", True)]
    lg = res["outputs"]["logits"]
    # the same artifact in onnxruntime against the transformers logits, in numpy
    o = ort_logits(ce, "fp32")
    m = per_sample(o, ce["logits"])
    assert m["max_abs_diff"].max() <= 1e-4 and m["cosine_similarity"].min() >= 0.99999, m
    assert pooled_cosine(o, ce["logits"]) >= 0.99999
    # our engine's worst sample agrees with onnxruntime's to float32 rounding of the logits
    assert lg["max_abs_diff"]["max"] <= 1e-4 and abs(lg["max_abs_diff"]["max"] - m["max_abs_diff"].max()) < 2e-6, lg
    assert lg["cosine_similarity"]["min"] >= 0.99999


def test_fp16_passes_sqnr_gate(winml, ce):
    r, res = evaluate(winml, "--mode", "compare", "-m", ce["fp16"], "--reference-outputs", ce["ref"],
                      "--samples", SAMPLES, "--threshold", "sqnr_db=50", "-f", "json")
    assert res is not None, r.stderr
    lg = res["outputs"]["logits"]
    o = ort_logits(ce, "fp16")
    m = per_sample(o, ce["logits"])
    figures = f"ours sqnr {lg['sqnr_db']}, onnxruntime per-sample {np.round(m['sqnr_db'], 1).tolist()}"
    assert r.returncode == 0 and res["passed"] is True, figures
    assert [(t["metric"], t["passed"]) for t in res["thresholds"]] == [("sqnr_db", True)]
    assert m["sqnr_db"].min() >= 50, figures  # the artifact itself, run by onnxruntime
    # fp16 really is fp16: the error is far above float32 rounding
    assert lg["sqnr_db"]["mean"] < 100 and lg["sqnr_db"]["min"] >= 50, figures


def test_fp16_engine_is_the_fp16_graph(winml, ce, build_dir, tmp_path):
    """Our fp16 logits equal, to one float16 step, a float64 numpy evaluation of the fp16 graph that rounds
    every value to its declared type op by op. (onnxruntime's CPU provider runs ops that lack float16
    kernels as float32 islands and skips the float16 roundings inside them, the logits' included: its
    logits are off the float16 grid.) Then eval's metrics on these samples equal numpy's."""
    model = onnx.load(str(ce["fp16"]))
    ours = []
    for i in range(2):
        want = fp16_graph_numpy(model, ce["inputs"][i])
        got, _ = engine_run(build_dir, ce["fp16"], ce["inputs"][i], tmp_path)
        assert got["logits"].dtype == np.float32
        assert np.float16(got["logits"].item()) == got["logits"].item()  # on the float16 grid (logits_fp16 -> Cast)
        ulp = float(np.spacing(np.float16(want.item())))
        assert abs(float(got["logits"].item()) - float(want.item())) <= ulp, (i, got["logits"], want, ulp)
        ours.append(float(got["logits"].item()))
    # eval's figures over these two samples: numpy's on our logits against transformers'
    r, res = evaluate(winml, "--mode", "compare", "-m", ce["fp16"], "--reference-outputs", ce["ref"],
                      "--samples", 2, "-f", "json")
    assert r.returncode == 0, r.stderr
    m = per_sample(np.array(ours), ce["logits"][:2])
    lg = res["outputs"]["logits"]
    for k in ("sqnr_db", "max_abs_diff"):
        for stat in ("min", "max", "mean"):
            assert lg[k][stat] == pytest.approx(getattr(m[k], stat)(), rel=1e-9), (k, stat)


def fp16_graph_numpy(model, feeds):
    """Evaluates the optimized fp16 graph in float64, rounding each output to its element type (float16 values
    to float16): the exact semantics of the graph, independently of any engine. Covers the ops this graph uses."""
    from scipy.special import erf
    v = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}  # external data loaded by onnx.load
    v.update(feeds)

    def ln(x, g, b, eps):
        mu = x.mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * g + b

    def gelu(x):
        return 0.5 * x * (1 + erf(x / np.sqrt(2)))

    for n in model.graph.node:
        a = {at.name: helper.get_attribute_value(at) for at in n.attribute}
        x = [v[k] if k else None for k in n.input]
        f = [t.astype(np.float64) if t is not None and t.dtype.kind == "f" else t for t in x]
        op, out_dt = n.op_type, (x[0].dtype if x else None)
        if op == "Gather":
            y = np.take(x[0], x[1].astype(np.int64), axis=a.get("axis", 0))
        elif op == "Equal":
            y = x[0] == x[1]
        elif op == "Not":
            y = ~x[0]
        elif op == "Cast":
            out_dt = helper.tensor_dtype_to_np_dtype(a["to"])
            y = x[0]
        elif op == "CumSum":
            y = np.cumsum(x[0], axis=int(x[1]))
        elif op in ("Mul", "Add"):
            y = f[0] * f[1] if op == "Mul" else f[0] + f[1]
        elif op == "Unsqueeze":
            y = x[0]
            for ax in sorted(x[1].tolist()):
                y = np.expand_dims(y, ax)
        elif op == "Where":
            y, out_dt = np.where(x[0], f[1], f[2]), x[1].dtype
        elif op == "Expand":
            y = f[0] * np.ones(x[1].tolist())
        elif op == "LayerNormalization":
            y = ln(f[0], f[1], f[2], a["epsilon"])
        elif op == "SkipLayerNormalization":
            bias = f[4] if len(f) > 4 and f[4] is not None else 0
            y = ln(f[0] + f[1] + bias, f[2], f[3] if len(f) > 3 and f[3] is not None else 0, a["epsilon"])
        elif op == "MatMul":
            y = f[0] @ f[1]
        elif op in ("Gelu", "BiasGelu"):
            y = gelu(f[0] + (f[1] if op == "BiasGelu" else 0))
        elif op == "Tanh":
            y = np.tanh(f[0])
        elif op == "Gemm":
            y = f[0] @ (f[1].T if a.get("transB", 0) else f[1]) + (f[2] if len(f) > 2 else 0)
        elif op == "Attention":
            X, W, N = f[0], f[1], a["num_heads"]
            qkv = X @ W + (f[2] if len(f) > 2 and f[2] is not None else 0)
            D = W.shape[1] // 3
            q, k, vv = (qkv[..., j * D:(j + 1) * D].reshape(X.shape[0], X.shape[1], N, D // N).transpose(0, 2, 1, 3)
                        for j in range(3))
            sc = q @ k.transpose(0, 1, 3, 2) * a.get("scale", 1 / np.sqrt(D // N))
            if len(f) > 5 and f[5] is not None:
                sc = sc + np.maximum(f[5], -1e30)
            p = np.exp(sc - sc.max(-1, keepdims=True))
            y = ((p / p.sum(-1, keepdims=True)) @ vv).transpose(0, 2, 1, 3).reshape(X.shape[0], X.shape[1], D)
        else:
            raise AssertionError(f"fp16_graph_numpy: op {op} not covered")
        v[n.output[0]] = np.asarray(y).astype(out_dt)
    return v[model.graph.output[0].name]


def test_per_layer_names_corrupted_weight(winml, ce, tmp_path):
    """A copy of the fp32 artifact with one attention output projection weight changed: --per-layer against
    the untouched artifact names that MatMul as the first divergence, with every earlier value identical."""
    src = ce["fp32"]
    m = onnx.load(str(src), load_external_data=False)
    inits = {t.name: t for t in m.graph.initializer}
    target = next((n for n in m.graph.node if n.op_type == "MatMul" and "layers.5/" in n.name and "o_proj" in n.name), None)
    assert target is not None, [n.name for n in m.graph.node if n.op_type == "MatMul"]
    w = next(i for i in target.input if i in inits)
    t = inits[w]
    ext = {e.key: e.value for e in t.external_data}
    with open(src.parent / ext["location"], "rb") as fh:  # read the one tensor from the shared data file
        fh.seek(int(ext.get("offset", 0)))
        raw = fh.read(int(ext["length"]))
    arr = np.frombuffer(raw, helper.tensor_dtype_to_np_dtype(t.data_type)).reshape(tuple(t.dims)).copy()
    arr[:, 11] += 1.0  # one output feature (a row would shift all features alike: LayerNorm removes that)
    t.CopyFrom(numpy_helper.from_array(arr, w))  # inline now; the other weights stay in the shared data file
    bad = tmp_path / "bad"
    bad.mkdir()
    os.link(src.parent / "model.onnx.data", bad / "model.onnx.data")
    onnx.save(m, str(bad / "model.onnx"))
    r, res = evaluate(winml, "--mode", "compare", "-m", bad / "model.onnx", "--reference", src, "--samples", 1,
                      "--per-layer", "-f", "json")
    assert r.returncode == 0, r.stderr
    pl = res["per_layer"]
    assert pl["values_compared"] > 60, pl["values_compared"]
    fd = pl["first_divergence"]
    assert fd["node"] == target.name and fd["op"] == "MatMul", fd
    names = [v["node"] for v in pl["values"]]
    before = pl["values"][:names.index(target.name)]
    assert len(before) > 30 and all(v["sqnr_db"] is None for v in before), before[-3:]
    # the corrupted graph really differs at its output, and the untouched one does not
    assert res["outputs"]["logits"]["max_abs_diff"]["max"] > 1e-3
    shutil.rmtree(bad)


# ------------------------------------------------------------------ float16 com.microsoft Attention
# The fp16 recipe keeps the fused Attention in float16; the engine widens to float32 inside the op (as
# onnxruntime's CPU provider does with the casts it inserts). Single-node graphs against onnxruntime.

@pytest.mark.parametrize("variant", ["plain", "mask2d", "past_unidirectional", "attention_bias"])
def test_attention_float16_matches_onnxruntime(tmp_path, build_dir, variant):
    rng = np.random.default_rng(7)
    B, S, IN, N, P = 2, 6, 32, 4, 3 if variant == "past_unidirectional" else 0
    H, T = IN // N, S + P
    f16 = lambda *s, sc=1.0: (rng.standard_normal(s) * sc).astype(np.float16)  # noqa: E731
    inits = [numpy_helper.from_array(f16(IN, 3 * IN, sc=0.3), "W"), numpy_helper.from_array(f16(3 * IN, sc=0.1), "bias")]
    feeds = {"x": f16(B, S, IN)}
    ins, node_outs = ["x", "W", "bias", "", ""], ["y"]
    io, outs = [("x", TP.FLOAT16, [B, S, IN])], [("y", TP.FLOAT16, [B, S, IN])]
    attrs = {"num_heads": N}
    if variant == "mask2d":
        feeds["mask"] = np.array([[1] * S, [0, 1, 1, 1, 0, 0]], np.int32)
        ins[3] = "mask"
        io.append(("mask", TP.INT32, [B, S]))
    if variant == "past_unidirectional":
        attrs["unidirectional"] = 1
        feeds["past"] = f16(2, B, N, P, H)
        ins[4] = "past"
        io.append(("past", TP.FLOAT16, [2, B, N, P, H]))
        node_outs.append("present")
        outs.append(("present", TP.FLOAT16, [2, B, N, T, H]))
    if variant == "attention_bias":
        feeds["ab"] = f16(1, N, S, T)
        ins.append("ab")
        io.append(("ab", TP.FLOAT16, [1, N, S, T]))
    while ins[-1] == "":
        ins.pop()
    m = make_model([helper.make_node("Attention", ins, node_outs, domain=MS, **attrs)], io, outs, inits)
    # outputs (float16 dtype checked by compare) of magnitude < 4 are 2^-9 apart: 4e-3 allows two roundings
    check(build_dir, tmp_path, m, feeds, atol=4e-3, what=f"attention_fp16_{variant}")
