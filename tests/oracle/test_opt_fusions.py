"""winml optimize on torch.onnx exports of tiny bert, xlm-roberta, gpt2 (with past), llama and qwen2, by both
exporters: the fusions fire (counted per fusion and in the op histogram), and the fused graph gives the same
outputs as the unfused one in onnxruntime (max abs diff <= 1e-4, cosine >= 0.99999)."""
import json
import os

import numpy as np
import pytest

import opt_models as M
import oracle_util as U

TOL_ABS, TOL_COS = 1e-4, 0.99999

# per model: fused ops expected in the optimized graph (count), at the default level (all)
EXPECTED = {
    "bert": {"Attention": M.L, "SkipLayerNormalization": 2 * M.L, "BiasGelu": M.L},
    # XLM-R's position ids are per token ([batch, seq]): its embedding sum fuses too
    "xlmr": {"Attention": M.L, "SkipLayerNormalization": 2 * M.L + 1, "BiasGelu": M.L},
    "gpt2": {"GroupQueryAttention": M.L, "SkipLayerNormalization": 2 * M.L, "FastGelu": M.L},
    "llama": {"GroupQueryAttention": M.L, "SkipSimplifiedLayerNormalization": 2 * M.L,
              "SimplifiedLayerNormalization": 1, "QuickGelu": M.L, "RotaryEmbedding": 2 * M.L},
    "qwen2": {"GroupQueryAttention": M.L, "SkipSimplifiedLayerNormalization": 2 * M.L,
              "SimplifiedLayerNormalization": 1, "QuickGelu": M.L, "RotaryEmbedding": 2 * M.L},
}
# ops that must be gone after fusion
GONE = {"bert": ("Softmax", "Erf"), "xlmr": ("Softmax", "Erf"), "gpt2": ("Softmax",),
        "llama": ("Softmax", "Neg", "ReduceMean", "Sigmoid"), "qwen2": ("Softmax", "Neg", "ReduceMean", "Sigmoid")}


def optimize(winml, src, dst, *extra):
    r = U.run([winml, "optimize", "-m", src, "-o", dst, "-f", "json", *extra])
    assert r.returncode == 0, U.describe(r)
    return json.loads(r.stdout)["report"]


def regimes(kind):
    if kind in M.ENCODERS:
        return [(2, 7, 0)]
    # GroupQueryAttention: a prompt (no past, any batch), one-token decode, and a subsequent prompt (batch 1)
    return [(2, 5, 0), (2, 1, 6), (1, 3, 4)]


def feeds(kind, path, b, s, p, seed):
    return M.encoder_feeds(b, s, seed) if kind in M.ENCODERS else M.decoder_feeds(path, b, s, p, seed)


@pytest.mark.parametrize("exporter", M.EXPORTERS)
@pytest.mark.parametrize("kind", M.ENCODERS + M.DECODERS)
def test_fusions_fire_and_match(winml, tmp_path, kind, exporter):
    src = M.export(kind, exporter)
    dst = str(tmp_path / "opt.onnx")
    rep = optimize(winml, src, dst)
    after = rep["ops_after"]
    fired = {p["name"]: p["fired"] for p in rep["passes"]}
    U.note(f"{kind}/{exporter}: nodes {rep['nodes_before']} -> {rep['nodes_after']}; fired "
           + ", ".join(f"{k}={v}" for k, v in fired.items() if v))
    for op, n in EXPECTED[kind].items():
        assert after.get(op, 0) == n, f"{kind}/{exporter}: expected {n} x {op}, got {after.get(op, 0)}: {after}"
    for op in GONE[kind]:
        assert op not in after, f"{kind}/{exporter}: {op} left after fusion: {after}"
    assert rep["nodes_after"] < rep["nodes_before"]
    for i, (b, s, p) in enumerate(regimes(kind)):
        f = feeds(kind, src, b, s, p, seed=i)
        worst, cos = M.compare(M.run_model(src, f), M.run_model(dst, f))
        assert worst <= TOL_ABS and cos >= TOL_COS, f"{kind}/{exporter} b={b} s={s} p={p}: {worst} {cos}"


@pytest.mark.parametrize("kind", ("bert", "llama"))
def test_levels_and_switches(winml, tmp_path, kind):
    src = M.export(kind, "dyn")
    basic = optimize(winml, src, str(tmp_path / "b.onnx"), "--level", "basic")
    ext = optimize(winml, src, str(tmp_path / "e.onnx"), "--level", "extended")
    full = optimize(winml, src, str(tmp_path / "a.onnx"))
    ran = {p["name"] for p in basic["passes"]}
    assert "constant_folding" in ran and "attention" not in ran and "gqa" not in ran
    assert "GroupQueryAttention" not in ext["ops_after"]
    assert basic["nodes_after"] >= ext["nodes_after"] >= full["nodes_after"]
    no_attn = optimize(winml, src, str(tmp_path / "n.onnx"), "--disable-attention", "--disable-gqa")
    for op in ("Attention", "MultiHeadAttention", "GroupQueryAttention"):
        assert op not in no_attn["ops_after"]
    forced = optimize(winml, src, str(tmp_path / "f.onnx"), "--level", "basic", "--enable-rotary")
    if kind == "llama":
        assert forced["ops_after"].get("RotaryEmbedding") == 2 * M.L
    # every level keeps the outputs
    b, s, p = (2, 6, 0) if kind == "bert" else (2, 4, 0)
    f = feeds(kind, src, b, s, p, seed=3)
    ref = M.run_model(src, f)
    for name in ("b", "e", "a", "n"):
        worst, cos = M.compare(ref, M.run_model(str(tmp_path / f"{name}.onnx"), f))
        assert worst <= TOL_ABS and cos >= TOL_COS, (name, worst, cos)


def test_extended_level_decoder_with_padding(winml, tmp_path):
    """At level extended a decoder keeps its own mask (no GroupQueryAttention): a left-padded batch matches."""
    src = M.export("gpt2", "dyn")
    dst = str(tmp_path / "e.onnx")
    rep = optimize(winml, src, dst, "--level", "extended")
    assert rep["ops_after"].get("MultiHeadAttention") == M.L
    f = M.decoder_feeds(src, 2, 5, 3, seed=7)
    f["attention_mask"][1, :2] = 0
    worst, cos = M.compare(M.run_model(src, f), M.run_model(dst, f))
    assert worst <= TOL_ABS and cos >= TOL_COS


def test_decomposed_layernorm_export(winml, tmp_path):
    """opset 14 TorchScript export: LayerNorm appears decomposed (ReduceMean/Sub/Pow/Sqrt/Div) and is fused back."""
    import onnx
    src = M.export("bert", "ts", opset=14)
    ops = [n.op_type for n in onnx.load(src).graph.node]
    assert "LayerNormalization" not in ops and "ReduceMean" in ops
    dst = str(tmp_path / "o.onnx")
    rep = optimize(winml, src, dst)
    fired = {p["name"]: p["fired"] for p in rep["passes"]}
    assert fired["layernorm"] == 2 * M.L + 1
    assert "ReduceMean" not in rep["ops_after"]
    f = M.encoder_feeds(2, 6, seed=4)
    worst, cos = M.compare(M.run_model(src, f), M.run_model(dst, f))
    assert worst <= TOL_ABS and cos >= TOL_COS


def _gpt2_no_past(path):
    """Tiny GPT-2 (random N(0, 0.1) weights, so c_attn has a bias) forward without cache, TorchScript exporter
    with sdpa attention: c_attn is Reshape/Gemm/Reshape + Split, the probabilities pass Where(IsNaN(p), 0, p)."""
    import torch

    class Fwd(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits

    model = M._randomize(M._decoder("gpt2"), 5)
    model.config._attn_implementation = "sdpa"
    ids = torch.randint(0, 100, (2, 8))
    with torch.no_grad():
        torch.onnx.export(Fwd(model), (ids, torch.ones_like(ids)), path, input_names=["input_ids", "attention_mask"],
                          output_names=["logits"], opset_version=17, dynamo=False,
                          dynamic_axes={"input_ids": {0: "b", 1: "s"}, "attention_mask": {0: "b", 1: "s"}})


def test_fused_qkv_projection_becomes_attention_and_padding_stays_finite(winml, tmp_path):
    """GPT-2's c_attn (one MatMul + bias, Split in three) becomes com.microsoft Attention (attention_split pass:
    no Split copy), and a left-padded batch gives finite logits that match the unfused graph at every real
    token, in onnxruntime and in our engine. Before the mask floor (finite_mask) the fused graph was all NaN:
    the padded rows' -inf scores gave NaN that the next layer spread to every row."""
    src, dst = str(tmp_path / "gpt2.onnx"), str(tmp_path / "opt.onnx")
    _gpt2_no_past(src)
    rep = optimize(winml, src, dst)
    after = rep["ops_after"]
    assert after.get("Attention") == M.L and "Split" not in after and "MultiHeadAttention" not in after, after
    assert after.get("Max") == 1, after  # one mask floor shared by the layers
    rng = np.random.default_rng(2)
    f = {"input_ids": rng.integers(0, 100, (2, 9)), "attention_mask": np.ones((2, 9), np.int64)}
    f["attention_mask"][0, :3] = 0
    ref = M.run_model(src, f)[0]
    assert np.isfinite(ref).all()
    for got in (M.run_model(dst, f)[0], M._run_engine(src, f)[0], M._run_engine(dst, f)[0]):
        assert np.isfinite(got).all()
        assert np.abs(got[0, 3:] - ref[0, 3:]).max() <= TOL_ABS and np.abs(got[1] - ref[1]).max() <= TOL_ABS


@pytest.fixture(scope="module")
def sliding_export(request, winml):
    """winml's own export of a tiny mistral: both layers attend through a sliding window of 4."""
    import builder_util as BU
    d = U.scratch(request, "sliding")
    BU.make_tiny("mistral", str(d / "hf"))
    r = U.run([winml, "export", "-m", str(d / "hf"), "-o", str(d / "exp"), "-q"])
    assert r.returncode == 0, U.describe(r)
    return str(d / "exp" / "model.onnx")


def _gqa_attrs(path):
    import onnx
    return [{a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            for n in onnx.load(path).graph.node if n.op_type == "GroupQueryAttention"]


@pytest.mark.parametrize("cmp", ["Greater", "GreaterOrEqual"])
def test_sliding_window_mask_and_gqa(winml, tmp_path, sliding_export, cmp):
    """GroupQueryAttention makes its own causal mask: a sliding window in the graph's mask (keys > query - W) must
    become its local_window_size W, and a window the fusion cannot read (here keys >= query - W) must keep the
    graph's own attention, never a plain causal one. Sequences and caches longer than the window."""
    import onnx
    src = sliding_export
    if cmp != "Greater":
        m = onnx.load(src)
        hits = [n for n in m.graph.node if n.op_type == "Greater"]
        assert len(hits) == 1
        hits[0].op_type = cmp
        src = str(tmp_path / "ge.onnx")
        onnx.save(m, src)
    dst = str(tmp_path / "opt.onnx")
    optimize(winml, src, dst)
    attrs = _gqa_attrs(dst)
    if cmp == "Greater":
        assert [a.get("local_window_size") for a in attrs] == [4] * M.L, attrs
    else:
        assert attrs == []
    for i, (b, s, p) in enumerate([(2, 9, 0), (2, 1, 9), (1, 3, 8)]):
        f = M.decoder_feeds(src, b, s, p, seed=i, vocab=96)
        worst, cos = M.compare(M.run_model(src, f), M.run_model(dst, f))
        assert worst <= TOL_ABS and cos >= TOL_COS, f"{cmp} b={b} s={s} p={p}: {worst} {cos}"
