"""Quantizing an encoder's packed QKV projection, on request. The optimizer packs Q, K and V into com.microsoft
Attention's one float weight, which no MatMul quantizer touches; with "Attention" among the op types to quantize
(op_types_to_quantize, as onnxruntime's quantizer names it; quantize --op-types), build and quantize give such a
node back as three MatMuls + MultiHeadAttention (src/opt/quant_attn.c), so int8 / int4 quantize every projection;
the default op types leave it packed and float. Checked on a tiny
random BERT (batch 3, right- and left-padded rows): no float Attention weight left, and the hidden states in
onnxruntime against transformers' float model, and our engine against onnxruntime on the same quantized file."""
import json
from collections import Counter

import numpy as np
import onnx
import pytest

import builder_util as BU
import oracle_util as U

LAYERS = 2


@pytest.fixture(scope="module")
def bert(request, winml):
    root = U.scratch(request, "qattn")
    ck = str(root / "ckpt")
    model = BU.make_tiny("bert", ck)
    r = U.run([winml, "config", "-m", ck, "-t", "feature-extraction"])
    assert r.returncode == 0, U.describe(r)
    rec = json.loads(r.stdout)
    for t in rec["export"]["input_tensors"]:
        t["shape"] = ["batch_size", "sequence_length"]
    rp = root / "recipe.json"
    rp.write_text(json.dumps(rec))
    fp = root / "fp32"
    r = U.run([winml, "build", "-m", ck, "-c", str(rp), "-o", str(fp), "-q"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    return ck, model, rp, root, fp / "model.onnx"


def ops(path):
    return Counter(n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node)


def cos_rows(a, b, valid):
    a, b = a[valid], b[valid]
    return float(np.min((a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))))


def check(model, path, min_cos):
    import torch
    feeds, tin = BU.padded_feeds(model, 3, 16, seed=1, types=True)
    with torch.no_grad():
        ref = model.bert(**tin).last_hidden_state.numpy()
    valid = feeds["attention_mask"].astype(bool)
    ort = BU.run_ort(str(path), feeds)["last_hidden_state"]
    eng = BU.run_engine(str(path), feeds)["last_hidden_state"]
    assert cos_rows(ort, ref, valid) >= min_cos, cos_rows(ort, ref, valid)
    # the same quantized graph in both: int8 / int4 codes exact, differences are roundings at a code boundary
    # (activation codes, accuracy_level 4's int8 activations): measured >= 0.99986
    assert cos_rows(eng, ort, valid) >= 0.9995, cos_rows(eng, ort, valid)


def test_fp32_packs_attention(bert):
    """The premise: the float build has the packed Attention op (else there is nothing to unpack)."""
    c = ops(bert[4])
    assert c["Attention"] == LAYERS and not c["MultiHeadAttention"], c


# (precision, the op carrying quantized weights, its count per layer, min cosine vs transformers' float)
PRECS = [("int8-dynamic", "MatMulInteger", 6, 0.99), ("int4", "MatMulNBits", 6, 0.95),
         ("int8", "DequantizeLinear", None, 0.98), ("w8a16", "DequantizeLinear", None, 0.99)]


@pytest.mark.parametrize("prec,qop,per_layer,min_cos", PRECS, ids=[p[0] for p in PRECS])
def test_build_quantizes_the_qkv_projection(winml, bert, prec, qop, per_layer, min_cos):
    ck, model, rp, root, _ = bert
    out = root / prec
    r = U.run([winml, "config", "-m", ck, "-t", "feature-extraction", "-p", prec])
    assert r.returncode == 0, U.describe(r)
    rec = json.loads(rp.read_text())
    rec["quant"] = json.loads(r.stdout)["quant"]
    rec["quant"]["op_types_to_quantize"] = ["MatMul", "Attention"]
    rq = root / f"recipe_{prec}.json"
    rq.write_text(json.dumps(rec))
    r = U.run([winml, "build", "-m", ck, "-c", str(rq), "-o", str(out), "-f", "json"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    quant = [s for s in json.loads(r.stdout)["stages"] if s["name"] == "quant"][0]
    assert f"{LAYERS} Attention nodes' packed QKV projection" in quant["reason"], quant["reason"]
    c = ops(out / "model.onnx")
    assert not c["Attention"] and c["MultiHeadAttention"] == LAYERS, c
    assert not c["MatMul"] or qop == "DequantizeLinear", c  # every projection quantized (QDQ keeps MatMul between Q/DQ)
    if per_layer:
        assert c[qop] == per_layer * LAYERS, c
    if prec == "int8-dynamic":  # one DynamicQuantizeLinear per activation: Q, K and V share theirs
        assert c["DynamicQuantizeLinear"] == 4 * LAYERS, c
    check(model, out / "model.onnx", min_cos)


def test_quantize_command_and_exclusion(winml, bert, tmp_path):
    """winml quantize takes the same path; an Attention node named in nodes_to_exclude stays packed and float."""
    _, model, _, _, fp = bert
    out = tmp_path / "q.onnx"
    r = U.run([winml, "quantize", "-m", str(fp), "-o", str(tmp_path / "d.onnx"), "-p", "int8-dynamic", "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    assert json.loads(r.stdout)["report"]["attention_unpacked"] == 0 and ops(tmp_path / "d.onnx")["Attention"] == LAYERS
    r = U.run([winml, "quantize", "-m", str(fp), "-o", str(out), "-p", "int8-dynamic", "--op-types", "MatMul,Attention",
               "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    assert json.loads(r.stdout)["report"]["attention_unpacked"] == LAYERS
    c = ops(out)
    assert not c["Attention"] and c["MatMulInteger"] == 6 * LAYERS, c
    check(model, out, 0.99)
    first = [n.name for n in onnx.load(str(fp), load_external_data=False).graph.node if n.op_type == "Attention"][0]
    out2 = tmp_path / "q2.onnx"
    r = U.run([winml, "quantize", "-m", str(fp), "-o", str(out2), "-p", "int8-dynamic", "--op-types", "MatMul,Attention",
               "--exclude", first, "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    c = ops(out2)
    assert c["Attention"] == 1 and c["MultiHeadAttention"] == LAYERS - 1, c
    check(model, out2, 0.99)
