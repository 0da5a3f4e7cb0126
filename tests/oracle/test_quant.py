"""winml quantize against onnxruntime: int4 MatMulNBits bit-identical to onnxruntime's own quantizer and
dequantizing to the naive numpy reference; fp16, int8 dynamic, static QDQ and w8a16 on tiny exports compared
with float32 in onnxruntime (SQNR in numpy); calibrators against onnxruntime's calibration collectors."""
import copy
import json
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import opt_models as M
import oracle_util as U


@pytest.fixture(scope="module")
def opttool(build_dir):
    p = U.binary(build_dir, "wm_opttool")
    if not os.access(p, os.X_OK):
        pytest.fail(f"wm_opttool not found at {p}", pytrace=False)
    return p


def quantize(winml, src, dst, *args):
    r = U.run([winml, "quantize", "-m", src, "-o", dst, "-f", "json", *args])
    assert r.returncode == 0, U.describe(r)
    return json.loads(r.stdout)["report"]


def matmul_model(path, w, dtype=T.FLOAT):
    k, n = w.shape
    g = h.make_graph([h.make_node("MatMul", ["x", "W"], ["y"], name="mm")], "g",
                     [h.make_tensor_value_info("x", dtype, [None, k])], [h.make_tensor_value_info("y", dtype, [None, n])],
                     [nh.from_array(w, "W")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    onnx.save(m, path)
    return m


def tensors(model):
    return {i.name: nh.to_array(i) for i in model.graph.initializer}


def naive_dequant(q, scales, zp, k, bs, bits):
    """Unpacks MatMulNBits tensors the slow, obvious way: returns W [K, N]."""
    n, nblk, _ = q.shape
    out = np.zeros((n, nblk * bs), np.float32)
    for col in range(n):
        for b in range(nblk):
            vals = []
            for byte in q[col, b]:
                vals += [int(byte) & 15, int(byte) >> 4] if bits == 4 else [int(byte)]
            if zp is None:
                z = 1 << (bits - 1)
            else:
                zb = int(zp[col, b // 2] if bits == 4 else zp[col, b])
                z = (zb >> (4 * (b % 2))) & 15 if bits == 4 else zb
            out[col, b * bs:(b + 1) * bs] = (np.array(vals, np.float32) - z) * scales[col, b]
    return out[:, :k].T


@pytest.mark.parametrize("sym", (True, False))
@pytest.mark.parametrize("bs", (32, 64, 128))
def test_int4_matches_onnxruntime_quantizer(winml, tmp_path, bs, sym):
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer
    rng = np.random.default_rng(bs + sym)
    w = (rng.standard_normal((256, 40)) * rng.uniform(0.1, 3, 40)).astype(np.float32)
    src, dst = str(tmp_path / "mm.onnx"), str(tmp_path / "q.onnx")
    model = matmul_model(src, w)
    rep = quantize(winml, src, dst, "-p", "int4", "--block-size", str(bs), "--symmetric" if sym else "--asymmetric")
    assert rep["quantized"] == 1
    ours = onnx.load(dst)
    q = MatMulNBitsQuantizer(copy.deepcopy(model), algo_config=DefaultWeightOnlyQuantConfig(block_size=bs,
                                                                                          is_symmetric=sym))
    q.process()
    ref = q.model.model
    node, rnode = ours.graph.node[0], ref.graph.node[0]
    assert (node.op_type, node.domain) == ("MatMulNBits", "com.microsoft")
    attrs = {a.name: a.i for a in node.attribute}
    rattrs = {a.name: a.i for a in rnode.attribute}
    assert {k: attrs[k] for k in ("K", "N", "bits", "block_size")} == {k: rattrs[k] for k in ("K", "N", "bits",
                                                                                               "block_size")}
    ot, rt = tensors(ours), tensors(ref)
    for slot in range(1, len(rnode.input)):
        a, b = ot[node.input[slot]], rt[rnode.input[slot]]
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), f"input {slot} differs"
    assert len(node.input) == len(rnode.input)
    # onnxruntime's MatMulNBits result equals x @ the naive dequantization of our tensors
    wd = naive_dequant(ot[node.input[1]], ot[node.input[2]], ot[node.input[3]] if not sym else None, 256, bs, 4)
    x = rng.standard_normal((3, 256)).astype(np.float32)
    y = M.run_model(dst, {"x": x})[0]
    np.testing.assert_allclose(y, x @ wd, rtol=1e-4, atol=1e-4)


def test_int4_half_scales(winml, tmp_path):
    """--half-scales: every float32 scale is an exact half, codes are computed with it (onnxruntime's result equals
    x @ the naive dequantization), the error stays that of RTN, and our engine (which streams such scales as halves
    at accuracy level 4) agrees with onnxruntime on it."""
    rng = np.random.default_rng(11)
    w = (rng.standard_normal((256, 40)) * rng.uniform(0.1, 3, 40)).astype(np.float32)
    src, dst, ref = str(tmp_path / "mm.onnx"), str(tmp_path / "q.onnx"), str(tmp_path / "r.onnx")
    matmul_model(src, w)
    dst4 = str(tmp_path / "q4.onnx")
    quantize(winml, src, dst, "-p", "int4", "--block-size", "32", "--symmetric", "--half-scales")
    quantize(winml, src, dst4, "-p", "int4", "--block-size", "32", "--symmetric", "--half-scales", "--accuracy-level", "4")
    quantize(winml, src, ref, "-p", "int4", "--block-size", "32", "--symmetric")
    m, r = onnx.load(dst), onnx.load(ref)
    t, rt = tensors(m), tensors(r)
    sc, rsc = t[m.graph.node[0].input[2]], rt[r.graph.node[0].input[2]]
    assert sc.dtype == np.float32 and np.array_equal(sc.astype(np.float16).astype(np.float32), sc)
    assert not np.array_equal(rsc.astype(np.float16).astype(np.float32), rsc)  # the default: not rounded
    assert np.max(np.abs(sc / rsc - 1)) <= 2.0 ** -11
    wd = naive_dequant(t[m.graph.node[0].input[1]], sc, None, 256, 32, 4)
    step = np.repeat(np.abs(sc), 32, axis=1)[:, :256].T  # per-weight quantization step
    err = np.abs(wd - w)  # RTN: half a step, a whole one where symmetric codes clamp at +7
    assert np.all(err <= step * (1 + 2.0 ** -10)) and np.mean(err <= 0.5 * step * (1 + 2.0 ** -10)) > 0.97
    x = rng.standard_normal((3, 256)).astype(np.float32)
    y = M.run_model(dst, {"x": x})[0]
    np.testing.assert_allclose(y, x @ wd, rtol=1e-4, atol=1e-4)
    import builder_util as BU
    for rows in (1, 3, 40):  # decode and prefill sizes (int8 activations: onnxruntime's accuracy level 4 too)
        xr = rng.standard_normal((rows, 256)).astype(np.float32)
        np.testing.assert_allclose(BU.run_engine(dst4, {"x": xr})["y"], M.run_model(dst4, {"x": xr})[0], rtol=0.05,
                                   atol=0.05 * float(np.abs(xr @ wd).max()))


def weighted_err(w, wd, bs):
    """The scale search's objective per block (quant.h): sum over a column's block of (v^2 + mean(v^2)/8) (v - d)^2."""
    k, n = w.shape
    out = []
    for b in range(0, k, bs):
        v, d = w[b:b + bs].astype(np.float64), wd[b:b + bs].astype(np.float64)
        out.append((((v * v) + (v * v).mean(axis=0) / 8) * (v - d) ** 2).sum(axis=0))
    return np.array(out)


@pytest.mark.parametrize("sym", (True, False))
@pytest.mark.parametrize("acc", (0, 4))
def test_int4_scale_search(winml, build_dir, tmp_path, sym, acc):
    """--scale-search: the same MatMulNBits layout, each block's weighted error at most RTN's (lower in total);
    onnxruntime's result equals x @ the naive dequantization of the stored codes, and our engine agrees with
    onnxruntime on the model (decode and prefill row counts; accuracy level 4: int8 activations in both, with
    --half-scales: every searched scale an exact half, which our engine streams as 2 bytes)."""
    from engine_oracle import wm_run
    rng = np.random.default_rng(21 + sym + acc)
    w = (rng.standard_normal((200, 40)) * rng.uniform(0.01, 0.1, 40)).astype(np.float32)  # K = 200: a padded block
    w[::17, 3] *= 10  # outliers
    src, dst, ref = str(tmp_path / "mm.onnx"), str(tmp_path / "q.onnx"), str(tmp_path / "r.onnx")
    matmul_model(src, w)
    flags = ["-p", "int4", "--block-size", "32", "--symmetric" if sym else "--asymmetric", "--accuracy-level", str(acc),
             *(["--half-scales"] if acc == 4 else [])]  # level 4 with exact-half scales: the build's int4 recipe
    rep = quantize(winml, src, dst, *flags, "--scale-search")
    quantize(winml, src, ref, *flags)
    assert rep["quantized"] == 1
    m, r = onnx.load(dst), onnx.load(ref)
    t, rt = tensors(m), tensors(r)
    node, rnode = m.graph.node[0], r.graph.node[0]
    assert [a for a in node.attribute] == [a for a in rnode.attribute] and len(node.input) == len(rnode.input)
    for slot in range(1, len(node.input)):
        assert t[node.input[slot]].shape == rt[rnode.input[slot]].shape
    deq = lambda tt, nd: naive_dequant(tt[nd.input[1]], tt[nd.input[2]], None if sym else tt[nd.input[3]], 200, 32, 4)
    wd, wr = deq(t, node), deq(rt, rnode)
    assert not np.array_equal(t[node.input[2]], rt[rnode.input[2]])  # the search changed scales
    if acc == 4:
        sc = t[node.input[2]]
        assert np.array_equal(sc.astype(np.float16).astype(np.float32), sc)
    es, er = weighted_err(w, wd, 32), weighted_err(w, wr, 32)
    assert np.all(es <= er * (1 + 1e-5)) and es.sum() < 0.95 * er.sum()
    for rows in (1, 3, 40):
        x = rng.standard_normal((rows, 200)).astype(np.float32)
        want = M.run_model(dst, {"x": x})[0]
        if acc == 0:
            np.testing.assert_allclose(want, x @ wd, rtol=1e-4, atol=1e-4)
        got = wm_run(build_dir, dst, {"x": x}, tmp_path)["y"]
        np.testing.assert_allclose(got, want, rtol=0.02, atol=0.02 * float(np.abs(x @ wd).max()))


def test_int4_padded_k_and_fp16_and_8bit(winml, tmp_path):
    rng = np.random.default_rng(5)
    for k, dt, bits in ((200, np.float32, 4), (96, np.float16, 4), (128, np.float32, 8)):
        w = rng.standard_normal((k, 24)).astype(dt)
        src, dst = str(tmp_path / "mm.onnx"), str(tmp_path / "q.onnx")
        matmul_model(src, w, T.FLOAT16 if dt == np.float16 else T.FLOAT)
        quantize(winml, src, dst, "-p", "int4", "--block-size", "32", "--asymmetric", "--bits", str(bits))
        m = onnx.load(dst)
        node, t = m.graph.node[0], tensors(m)
        assert {a.name: a.i for a in node.attribute}["bits"] == bits
        wd = naive_dequant(t[node.input[1]], t[node.input[2]].astype(np.float32), t[node.input[3]], k, 32, bits)
        x = rng.standard_normal((2, k)).astype(dt)
        y = M.run_model(dst, {"x": x})[0].astype(np.float32)
        ref = x.astype(np.float32) @ wd
        tol = 2e-2 if dt == np.float16 else 1e-4
        np.testing.assert_allclose(y, ref, rtol=tol, atol=tol * np.abs(ref).max())
        err = np.abs(wd - w.astype(np.float32)).max()
        assert err <= np.abs(w).max() / (15 if bits == 4 else 255) * 1.01, err


def exact_int8(model, x):
    """The output of a dynamic int8 model (DynamicQuantizeLinear + MatMulInteger + scales [+ bias]) computed
    exactly in numpy from its integers."""
    t = tensors(model)
    mi = next(n for n in model.graph.node if n.op_type == "MatMulInteger")
    lo, hi = min(0.0, float(x.min())), max(0.0, float(x.max()))
    s = np.float32((hi - lo) / 255)
    zp = np.clip(np.round(-lo / s), 0, 255)
    xq = np.clip(np.round(x / s) + zp, 0, 255).astype(np.int64)
    wq = t[mi.input[1]].astype(np.int64)
    wz = t[mi.input[3]].astype(np.int64) if len(mi.input) > 3 else 0
    scale = next(v for k, v in t.items() if k.endswith("_scale"))
    y = ((xq - int(zp)) @ (wq - wz)).astype(np.float64) * float(s) * scale
    bias = [v for n in model.graph.node if n.op_type == "Add" for v in (t.get(i) for i in n.input) if v is not None]
    return (y + (bias[0] if bias else 0)).astype(np.float32)


def gemm_model(path, w, trans_b, bias=None):
    n = w.shape[0] if trans_b else w.shape[1]
    inits = [nh.from_array(w, "W")] + ([nh.from_array(bias, "C")] if bias is not None else [])
    node = h.make_node("Gemm", ["x", "W"] + (["C"] if bias is not None else []), ["y"], name="head", transB=trans_b)
    g = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, [None, w.shape[1 if trans_b else 0]])],
                     [h.make_tensor_value_info("y", T.FLOAT, [None, n])], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)


@pytest.mark.parametrize("trans_b", (1, 0))
def test_int4_gemm_lm_head(winml, tmp_path, trans_b):
    """A bias-free Gemm (the builder's lm_head over the tied [vocab, hidden] table uses transB) becomes
    MatMulNBits with exactly the tensors the equivalent MatMul gets; a Gemm with a bias (phi's lm_head) too, its C
    then added by an Add."""
    rng = np.random.default_rng(7 + trans_b)
    w = rng.standard_normal((96, 50)).astype(np.float32)  # [K, N]
    mm, gm, qa, qb = (str(tmp_path / f) for f in ("mm.onnx", "gemm.onnx", "qa.onnx", "qb.onnx"))
    matmul_model(mm, w)
    gemm_model(gm, w.T.copy() if trans_b else w, trans_b)
    quantize(winml, mm, qa, "-p", "int4", "--block-size", "32")
    assert quantize(winml, gm, qb, "-p", "int4", "--block-size", "32")["quantized"] == 1
    a, b = onnx.load(qa), onnx.load(qb)
    na, nb = a.graph.node[0], b.graph.node[0]
    assert nb.op_type == "MatMulNBits" and [x.i for x in na.attribute] == [x.i for x in nb.attribute]
    ta, tb = tensors(a), tensors(b)
    for sa, sb in zip(na.input[1:], nb.input[1:]):
        assert np.array_equal(ta[sa], tb[sb])
    x = rng.standard_normal((3, 96)).astype(np.float32)
    np.testing.assert_allclose(M.run_model(qb, {"x": x})[0], M.run_model(qa, {"x": x})[0], rtol=0, atol=0)
    c = rng.standard_normal(50).astype(np.float32)
    gemm_model(gm, w.T.copy(), 1, bias=c)
    rep = quantize(winml, gm, qb, "-p", "int4", "--block-size", "32")
    assert rep["quantized"] == 1
    assert [n.op_type for n in onnx.load(qb).graph.node] == ["MatMulNBits", "Add"]
    np.testing.assert_allclose(M.run_model(qb, {"x": x})[0], M.run_model(qa, {"x": x})[0] + c, rtol=0, atol=0)


@pytest.mark.parametrize("flags", ((), ("--per-channel",), ("--asymmetric",), ("--asymmetric", "--per-channel"),
                                   ("--asymmetric", "--weight-type", "uint8", "--per-channel")))
def test_int8_gemm_transposed_weight(winml, tmp_path, flags):
    """A Gemm transB weight (the tied lm_head of a decoder) is quantized for MatMulInteger, which takes B as
    [K, N]: its codes, scales and zero points equal those of the same weight under a MatMul, and onnxruntime gives
    the same outputs for both files, bit for bit; a bias still follows."""
    rng = np.random.default_rng(11 + len(flags))
    w = rng.standard_normal((96, 50)).astype(np.float32) * np.linspace(0.2, 3, 50, dtype=np.float32)  # [K, N]
    mm, gm, qa, qb = (str(tmp_path / f) for f in ("mm.onnx", "gemm.onnx", "qa.onnx", "qb.onnx"))
    matmul_model(mm, w)
    for bias in (None, rng.standard_normal(50).astype(np.float32)):
        gemm_model(gm, w.T.copy(), 1, bias=bias)
        quantize(winml, mm, qa, "-p", "int8-dynamic", *flags)
        assert quantize(winml, gm, qb, "-p", "int8-dynamic", *flags)["quantized"] == 1
        a, b = onnx.load(qa), onnx.load(qb)
        ma = next(n for n in a.graph.node if n.op_type == "MatMulInteger")
        mb = next(n for n in b.graph.node if n.op_type == "MatMulInteger")
        assert "Gemm" not in [n.op_type for n in b.graph.node]
        ta, tb = tensors(a), tensors(b)
        assert tb[mb.input[1]].shape == (96, 50)
        assert np.array_equal(ta[ma.input[1]], tb[mb.input[1]])
        assert (len(ma.input) == 4) == (len(mb.input) == 4) == ("--asymmetric" in flags)
        if len(mb.input) == 4:
            assert np.array_equal(ta[ma.input[3]], tb[mb.input[3]])
        sa = [v for k, v in ta.items() if k.endswith("_scale")]
        sb = [v for k, v in tb.items() if k.endswith("_scale")]
        assert len(sa) == len(sb) == 1 and np.array_equal(sa[0], sb[0])
        assert sb[0].size == (50 if "--per-channel" in flags else 1)
        x = rng.standard_normal((3, 96)).astype(np.float32)
        ya, yb = M.run_model(qa, {"x": x})[0], M.run_model(qb, {"x": x})[0]
        np.testing.assert_array_equal(yb, ya + (bias if bias is not None else 0))
        ref = x @ w + (bias if bias is not None else 0)
        # the quantization's own error, from its integers (onnxruntime's u8s8 MatMulInteger saturates int16 pair
        # sums on CPUs where MLAS takes its AVX2 path - seen on Zen 4 at 23 dB - which says nothing of ours)
        assert M.sqnr_db(ref, exact_int8(b, x)) > 30


def decoder_metrics(src, dst):
    """SQNR of logits and top-1 agreement over the three decoding regimes."""
    sq, agree, total = [], 0, 0
    for i, (b, s, p) in enumerate(((2, 5, 0), (2, 1, 6), (1, 3, 4))):
        f = M.decoder_feeds(src, b, s, p, seed=10 + i)
        ref, got = M.run_model(src, f)[0], M.run_model(dst, f)[0]
        sq.append(M.sqnr_db(ref, got))
        agree += int((ref.argmax(-1) == got.argmax(-1)).sum())
        total += ref.shape[0] * ref.shape[1]
    return min(sq), agree / total


@pytest.mark.parametrize("prec,args,min_sqnr", (("int4", ("--block-size", "32"), 12.0),
                                                 ("int4", ("--block-size", "32", "--symmetric"), 10.0),
                                                 ("int8-dynamic", (), 25.0)))
def test_decoder_quantized(winml, tmp_path, prec, args, min_sqnr):
    src = M.export("qwen2", "dyn")
    opt, dst = str(tmp_path / "o.onnx"), str(tmp_path / "q.onnx")
    r = U.run([winml, "optimize", "-m", src, "-o", opt, "-q"])
    assert r.returncode == 0, U.describe(r)
    rep = quantize(winml, opt, dst, "-p", prec, *args)
    ops = [n.op_type for n in onnx.load(dst).graph.node]
    expect = "MatMulNBits" if prec == "int4" else "MatMulInteger"
    assert ops.count(expect) == rep["quantized"] == 7 * M.L + 1  # q k v o gate up down per layer, lm_head
    sq, top1 = decoder_metrics(src, dst)
    U.note(f"qwen2 tiny {prec} {' '.join(args)}: logits SQNR {sq:.1f} dB, top-1 agreement {top1:.3f}")
    assert sq >= min_sqnr and top1 >= 0.6


def test_int4_lm_head_8bit(winml, tmp_path):
    src = M.export("qwen2", "dyn")
    m = onnx.load(src)
    head = next(n for n in m.graph.node if n.op_type == "MatMul" and "logits" in n.output)
    dst = str(tmp_path / "q.onnx")
    quantize(winml, src, dst, "-p", "int4", "--int8-nodes", head.name)
    bits = {n.output[0]: {a.name: a.i for a in n.attribute}["bits"] for n in onnx.load(dst).graph.node
            if n.op_type == "MatMulNBits"}
    assert bits["logits"] == 8 and sorted(set(bits.values())) == [4, 8]
    sq, _ = decoder_metrics(src, dst)
    assert sq > 10


@pytest.mark.parametrize("keep_io", (False, True))
def test_fp16_encoder(winml, tmp_path, keep_io):
    src = M.export("xlmr", "dyn")
    opt, dst = str(tmp_path / "o.onnx"), str(tmp_path / "h.onnx")
    assert U.run([winml, "optimize", "-m", src, "-o", opt, "-q"]).returncode == 0
    # float32 IO is the default (the reference's fp16_keep_io_types); --fp16-io makes the IO float16
    rep = quantize(winml, opt, dst, "-p", "fp16", *([] if keep_io else ["--fp16-io"]))
    m = onnx.load(dst)
    out_type = m.graph.output[0].type.tensor_type.elem_type
    assert out_type == (T.FLOAT if keep_io else T.FLOAT16)
    floats = [i.name for i in m.graph.initializer if i.data_type == T.FLOAT]
    halves = [i.name for i in m.graph.initializer if i.data_type == T.FLOAT16]
    assert len(halves) > len(floats), (floats, halves)
    casts = sum(n.op_type == "Cast" for n in m.graph.node) - sum(n.op_type == "Cast" for n in onnx.load(opt).graph.node)
    assert casts == rep["casts"] and casts <= 4, casts  # minimum casts: at the IO boundary only
    sq = []
    for i in range(5):
        f = M.encoder_feeds(2, 9, seed=20 + i)
        sq.append(M.sqnr_db(M.run_model(src, f)[0], M.run_model(dst, f)[0]))
    U.note(f"xlmr tiny fp16 keep_io={keep_io}: logits SQNR min {min(sq):.1f} dB")
    assert min(sq) >= 50


def intermediate_ranges(path, names, feeds_list):
    """min/max of values `names` over runs of `feeds_list`, found by making them graph outputs (onnxruntime)."""
    m = onnx.load(path)
    for n in names:
        m.graph.output.append(h.make_tensor_value_info(n, T.FLOAT, None))
    tmp = path + ".probe.onnx"
    onnx.save(m, tmp)
    lo, hi, seen = {}, {}, {n: [] for n in names}
    for f in feeds_list:
        outs = M.run_model(tmp, f)[-len(names):]
        for n, v in zip(names, outs):
            seen[n].append(np.asarray(v, np.float32))
            lo[n] = min(lo.get(n, np.inf), float(v.min()))
            hi[n] = max(hi.get(n, -np.inf), float(v.max()))
    os.unlink(tmp)
    return {n: [lo[n], hi[n]] for n in names}, seen


@pytest.mark.parametrize("prec", ("int8-static", "w8a16"))
def test_static_qdq_with_ranges(winml, tmp_path, prec):
    src = M.export("bert", "ts")
    opt, dst, dst2 = str(tmp_path / "o.onnx"), str(tmp_path / "q.onnx"), str(tmp_path / "q2.onnx")
    assert U.run([winml, "optimize", "-m", src, "-o", opt, "-q"]).returncode == 0
    m = onnx.load(opt)
    inits = {i.name for i in m.graph.initializer}
    acts = sorted({n.input[0] for n in m.graph.node if n.op_type in ("MatMul", "Gemm") and n.input[1] in inits})
    calib = [M.encoder_feeds(2, 9, seed=30 + i) for i in range(4)]
    ranges, seen = intermediate_ranges(opt, acts, calib)
    rp = tmp_path / "ranges.json"
    rp.write_text(json.dumps(ranges))
    rep = quantize(winml, opt, dst, "-p", prec, "--ranges", str(rp))
    ops = [n.op_type for n in onnx.load(dst).graph.node]
    assert rep["quantized"] == len(acts) * 0 + sum(1 for n in m.graph.node if n.op_type in ("MatMul", "Gemm")
                                                   and n.input[1] in inits)
    assert ops.count("QuantizeLinear") == len(acts) and ops.count("DequantizeLinear") == len(acts) + rep["quantized"]
    # the same ranges from collected tensors (--calib-data, minmax) give the same model outputs
    d = tmp_path / "calib"
    d.mkdir()
    manifest = {}
    for n, arrs in seen.items():
        manifest[n] = []
        for i, a in enumerate(arrs):
            fn = f"{abs(hash(n)) % 10**8}_{i}.f32"
            a.astype(np.float32).tofile(d / fn)
            manifest[n].append(fn)
    (d / "manifest.json").write_text(json.dumps(manifest))
    quantize(winml, opt, dst2, "-p", prec, "--calib-data", str(d), "--method", "minmax")
    sq = []
    for i in range(4):
        f = M.encoder_feeds(2, 9, seed=40 + i)
        ref, got = M.run_model(src, f)[0], M.run_model(dst, f)[0]
        np.testing.assert_array_equal(got, M.run_model(dst2, f)[0])
        sq.append(M.sqnr_db(ref, got))
    U.note(f"bert tiny {prec} (QDQ, minmax ranges): output SQNR min {min(sq):.1f} dB")
    assert min(sq) >= (20 if prec == "int8-static" else 35)


def test_streamed_equals_eager(winml, tmp_path):
    src = M.export("llama", "ts")
    a, b = str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx")
    quantize(winml, src, a, "-p", "int4", "--stream", "off")
    rep = quantize(winml, src, b, "-p", "int4", "--stream", "on")
    assert os.path.exists(b + ".data") and not os.path.exists(a + ".data")
    ta = {i.name: nh.to_array(i) for i in onnx.load(a).graph.initializer}
    tb = {i.name: nh.to_array(i) for i in onnx.load(b).graph.initializer}
    assert ta.keys() == tb.keys() and all(np.array_equal(ta[k], tb[k]) for k in ta)
    assert rep["quantized"] > 0
    for path in (a, b):
        onnx.checker.check_model(onnx.load(path))


# ---------------------------------------------------------------- calibration math


def calib_batches(seed):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(4000) * s + o).astype(np.float32) for s, o in ((1.0, 0.3), (2.5, -0.2), (0.7, 1.0))]


def run_calib(opttool, tmp_path, method, batches, *opts):
    args = [opttool, "calib", method, *opts]
    for i, b in enumerate(batches):
        f = tmp_path / f"b{i}.f32"
        b.tofile(f)
        args += ["v", str(f)]
    r = U.run(args)
    assert r.returncode == 0, U.describe(r)
    return json.loads(r.stdout)["v"]


def ort_hist(method, batches, symmetric, bins, qbins=128, pct=99.999):
    from onnxruntime.quantization.calibrate import HistogramCollector
    c = HistogramCollector(method=method, symmetric=symmetric, num_bins=bins, num_quantized_bins=qbins,
                           percentile=pct, scenario="same")
    for b in batches:
        c.collect({"v": [b]})
    lo, hi = c.compute_collection_result()["v"][:2]
    return float(lo), float(hi)


@pytest.mark.parametrize("seed", (1, 2))
def test_calibration_matches_onnxruntime(opttool, tmp_path, seed):
    batches = calib_batches(seed)
    lo, hi = run_calib(opttool, tmp_path, "minmax", batches)
    assert (lo, hi) == (float(min(b.min() for b in batches)), float(max(b.max() for b in batches)))
    for nb in (128, 1024):
        for nq in (128,):
            got = run_calib(opttool, tmp_path, "entropy", batches, "--bins", str(nb), "--qbins", str(nq))
            assert got == list(ort_hist("entropy", batches, False, nb, nq)), (nb, nq)
    got = run_calib(opttool, tmp_path, "percentile", batches, "--symmetric", "0", "--percentile", "99.9")
    assert got == list(ort_hist("percentile", batches, False, 2048, pct=99.9))
    got = run_calib(opttool, tmp_path, "percentile", batches[:1], "--percentile", "99.99")
    assert got == list(ort_hist("percentile", batches[:1], True, 2048, pct=99.99))
    got = run_calib(opttool, tmp_path, "percentile", batches)
    want = ort_hist("percentile", batches, True, 2048)
    np.testing.assert_allclose(got, want, rtol=1e-6)


# ---------------------------------------------------------------- errors


def test_quantize_errors(winml, tmp_path):
    src = str(tmp_path / "mm.onnx")
    matmul_model(src, np.ones((32, 8), np.float32))
    out = str(tmp_path / "q.onnx")
    cases = [
        (["-p", "int5"], "int5"),
        (["-p", "int8-dynamic", "--weight-type", "uint16"], "weight type uint16"),
        (["-p", "int8", "--ranges", "r.json", "--calib-data", "d"], "one source of activation ranges"),
        (["-p", "int4", "--block-size", "48"], "block-size"),
        (["-p", "int4", "--bogus"], "--bogus"),
    ]
    for args, needle in cases:
        r = U.run([winml, "quantize", "-m", src, "-o", out, *args])
        U.assert_clean_error(r, "winml quantize", needle)
        assert not os.path.exists(out)
    bad = tmp_path / "r.json"
    for text in ('{"x": [1, 0]}', '{"x": [0, "a"]}', "[1, 2]", '{"x": [0, 1e999]}', "{"):
        bad.write_text(text)
        r = U.run([winml, "quantize", "-m", src, "-o", out, "-p", "int8-static", "--ranges", str(bad)])
        U.assert_clean_error(r, "winml quantize", "r.json")
        assert not os.path.exists(out)
    r = U.run([winml, "quantize", "-m", str(tmp_path / "missing.onnx"), "-o", out, "-p", "fp16"])
    U.assert_clean_error(r, "winml quantize", "missing.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"\x0a\xff\xff\xff\xff\x0f")
    r = U.run([winml, "quantize", "-m", str(tmp_path / "junk.onnx"), "-o", out, "-p", "int4"])
    U.assert_clean_error(r, "winml quantize", "junk.onnx")
    assert not os.path.exists(out)


def gather_model(path, w, tied=False):
    """y = Gather(W, ids) [V, H]; tied: also logits = Gemm(y, W, transB=1), the decoder's shared table."""
    nodes = [h.make_node("Gather", ["W", "ids"], ["y"], name="emb")]
    outs = [h.make_tensor_value_info("y", T.FLOAT, [None, w.shape[1]])]
    if tied:
        nodes.append(h.make_node("Gemm", ["y", "W"], ["logits"], name="head", transB=1))
        outs.append(h.make_tensor_value_info("logits", T.FLOAT, [None, w.shape[0]]))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("ids", T.INT64, [None])], outs, [nh.from_array(w, "W")])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)


@pytest.mark.parametrize("sym", (True, False))
def test_int4_gather_matches_onnxruntime_quantizer(winml, build_dir, tmp_path, sym):
    """--op-types Gather: the table becomes GatherBlockQuantized (uint8 codes in MatMulNBits' layout, blocks along
    the row) whose rows onnxruntime dequantizes to exactly what onnxruntime's own quantizer's Gather model gives;
    our engine agrees bit for bit. A table whose row is not a whole number of blocks stays a Gather."""
    import logging

    import onnxruntime as ort
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer
    from engine_oracle import wm_run
    rng = np.random.default_rng(11 + sym)
    w = (rng.standard_normal((70, 96)) * rng.uniform(0.1, 3, (70, 1))).astype(np.float32)
    src, dst, ref = (str(tmp_path / f) for f in ("g.onnx", "q.onnx", "r.onnx"))
    gather_model(src, w)
    rep = quantize(winml, src, dst, "-p", "int4", "--block-size", "32", "--op-types", "Gather",
                   "--symmetric" if sym else "--asymmetric")
    m = onnx.load(dst)
    assert rep["quantized"] == 1 and [n.op_type for n in m.graph.node] == ["GatherBlockQuantized"]
    assert {a.name: a.i for a in m.graph.node[0].attribute} == {"bits": 4, "block_size": 32, "gather_axis": 0,
                                                                "quantize_axis": 1}
    t = tensors(m)
    assert "W" not in t and t[m.graph.node[0].input[0]].shape == (70, 48)
    logging.disable(logging.WARNING)
    q = MatMulNBitsQuantizer(onnx.load(src), algo_config=DefaultWeightOnlyQuantConfig(
        block_size=32, is_symmetric=sym, op_types_to_quantize=("Gather",), quant_axes=(("Gather", 1),)))
    q.process()
    logging.disable(logging.NOTSET)
    onnx.save(q.model.model, ref)
    ids = np.array([0, 69, 5, 5, -1], np.int64)
    want = ort.InferenceSession(ref, providers=["CPUExecutionProvider"]).run(None, {"ids": ids})[0]
    got = ort.InferenceSession(dst, providers=["CPUExecutionProvider"]).run(None, {"ids": ids})[0]
    assert np.array_equal(got, want)
    assert np.abs(got - w[ids]).max() < np.abs(w).max() / 4  # it is the table, quantized
    assert np.array_equal(wm_run(build_dir, dst, {"ids": ids}, tmp_path)["y"], want)
    # 80 = 2.5 blocks of 32 (GatherBlockQuantized has no padding): the largest block that divides it, 16, said so
    gather_model(src, w[:, :80])
    rep = quantize(winml, src, dst, "-p", "int4", "--block-size", "32", "--op-types", "Gather",
                   "--symmetric" if sym else "--asymmetric")
    m = onnx.load(dst)
    assert rep["quantized"] == 1 and [n.op_type for n in m.graph.node] == ["GatherBlockQuantized"]
    assert {a.name: a.i for a in m.graph.node[0].attribute}["block_size"] == 16
    assert rep["tables"] == [{"tensor": "W", "op": "GatherBlockQuantized", "width": 80, "block": 16}]
    want = ort.InferenceSession(dst, providers=["CPUExecutionProvider"]).run(None, {"ids": ids})[0]
    assert np.abs(want - w[:, :80][ids]).max() < np.abs(w).max() / 8
    assert np.array_equal(wm_run(build_dir, dst, {"ids": ids}, tmp_path)["y"], want)
    gather_model(src, w[:, :40])  # 40: no power-of-two block >= 16 divides it: the table stays, said so
    rep = quantize(winml, src, dst, "-p", "int4", "--block-size", "32", "--op-types", "Gather")
    assert rep["quantized"] == 0 and onnx.load(dst).graph.node[0].op_type == "Gather"
    assert rep["tables"] == [{"tensor": "W", "op": "Gather", "width": 40, "block": None}]


def test_int4_tied_table_shared(winml, build_dir, tmp_path):
    """A table both gathered and used as Gemm(transB) (a tied embedding / lm_head) is quantized once: the
    GatherBlockQuantized reads the MatMulNBits codes through a Reshape and shares its scales; no float copy stays.
    Values: onnxruntime and our engine agree, and the gathered rows are the naive dequantization of the codes."""
    import onnxruntime as ort
    from engine_oracle import wm_run
    rng = np.random.default_rng(5)
    w = rng.standard_normal((40, 64)).astype(np.float32)
    src, dst = str(tmp_path / "t.onnx"), str(tmp_path / "tq.onnx")
    gather_model(src, w, tied=True)
    rep = quantize(winml, src, dst, "-p", "int4", "--block-size", "32", "--op-types", "Gemm,Gather", "--symmetric")
    m = onnx.load(dst)
    assert rep["quantized"] == 2
    ops = {n.op_type: n for n in m.graph.node}
    assert set(ops) == {"Reshape", "GatherBlockQuantized", "MatMulNBits"}
    mnb, gbq, rs = ops["MatMulNBits"], ops["GatherBlockQuantized"], ops["Reshape"]
    assert rs.input[0] == mnb.input[1] and gbq.input[0] == rs.output[0] and gbq.input[2] == mnb.input[2]
    t = tensors(m)
    assert sorted(a.dtype.name for a in t.values()) == ["float32", "int64", "uint8"]  # codes, scales, the shape
    ids = np.array([3, 39, 0], np.int64)
    want = ort.InferenceSession(dst, providers=["CPUExecutionProvider"]).run(None, {"ids": ids})
    wd = naive_dequant(t[mnb.input[1]], t[mnb.input[2]], None, 64, 32, 4)  # [K=64, N=40]
    assert np.array_equal(want[0], wd.T[ids])
    got = wm_run(build_dir, dst, {"ids": ids}, tmp_path)
    assert np.array_equal(got["y"], want[0])
    np.testing.assert_allclose(got["logits"], want[1], rtol=0, atol=1e-4)
    # --int8-nodes naming the table: the Gather (table input 0) and the Gemm both at 8 bits, still one copy
    rep = quantize(winml, src, dst, "-p", "int4", "--block-size", "32", "--op-types", "Gemm,Gather", "--symmetric",
                   "--int8-nodes", "W")
    m = onnx.load(dst)
    ops = {n.op_type: n for n in m.graph.node}
    assert rep["quantized"] == 2 and set(ops) == {"Reshape", "GatherBlockQuantized", "MatMulNBits"}
    assert {a.name: a.i for a in ops["GatherBlockQuantized"].attribute}["bits"] == 8
    assert {a.name: a.i for a in ops["MatMulNBits"].attribute}["bits"] == 8
    want = ort.InferenceSession(dst, providers=["CPUExecutionProvider"]).run(None, {"ids": ids})
    assert np.abs(want[0] - w[ids]).max() < np.abs(w).max() / 100  # 8 bits
    got = wm_run(build_dir, dst, {"ids": ids}, tmp_path)
    assert np.array_equal(got["y"], want[0])


def test_int4_8bit_table(winml, tmp_path):
    """The mixed-precision table (recipe quant.rtn_8bit_weights / rtn_8bit_layer_weights, quantize --int8-weights /
    --int8-layer-weights): a chain of 16 layers of v_proj and down_proj MatMuls and a head; the head's weight is
    8-bit everywhere, v_proj and down_proj in llama.cpp Q4_K_M's "more bits" layers (i < 16/8, i >= 7*16/8,
    (i - 2) % 3 == 2: 0 1 4 7 10 13 14 15), every other MatMul 4-bit."""
    rng = np.random.default_rng(3)
    nodes, inits, x = [], [], "x"
    for i in range(16):
        for part in ("attn.v_proj", "mlp.down_proj"):
            w = f"model.layers.{i}.{part}.weight"
            inits.append(nh.from_array(rng.standard_normal((32, 32)).astype(np.float32), w))
            nodes.append(h.make_node("MatMul", [x, w], [w + "_y"], name=w + "_mm"))
            x = w + "_y"
    inits.append(nh.from_array(rng.standard_normal((32, 32)).astype(np.float32), "lm_head.weight"))
    nodes.append(h.make_node("MatMul", [x, "lm_head.weight"], ["y"], name="head"))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [None, 32])],
                     [h.make_tensor_value_info("y", T.FLOAT, [None, 32])], inits)
    src, dst = str(tmp_path / "m.onnx"), str(tmp_path / "q.onnx")
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), src)
    quantize(winml, src, dst, "-p", "int4", "--block-size", "16", "--int8-weights", "lm_head.",
             "--int8-layer-weights", "attn.v_proj.,mlp.down_proj.")
    bits = {n.input[1].split("_Q")[0]: {a.name: a.i for a in n.attribute}["bits"]
            for n in onnx.load(dst).graph.node if n.op_type == "MatMulNBits"}
    more = {0, 1, 4, 7, 10, 13, 14, 15}
    want = {f"model.layers.{i}.{p}.weight": 8 if i in more else 4 for i in range(16)
            for p in ("attn.v_proj", "mlp.down_proj")}
    want["lm_head.weight"] = 8
    assert bits == want


def test_int8_weights_7bit_by_default(winml, tmp_path):
    """Int8 weights that meet 8-bit activations in integer kernels (-p int8; int8-static with uint8/int8
    activations) get 7 bits by default: onnxruntime's u8s8 kernels without VNNI add pairs of products in int16,
    which full-range weights overflow. --no-reduce-range keeps 8 bits; uint8 weights (u8u8) keep 8 bits."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((64, 16)).astype(np.float32)
    src = str(tmp_path / "m.onnx")
    matmul_model(src, w)

    def wq(*args):
        dst = str(tmp_path / "q.onnx")
        quantize(winml, src, dst, *args)
        m = onnx.load(dst)
        t = tensors(m)
        return next(t[n.input[1]] if n.op_type == "MatMulInteger" else t[n.input[0]] for n in m.graph.node
                    if n.op_type == "MatMulInteger" or (n.op_type == "DequantizeLinear" and n.input[0] in t)
                    ).astype(np.int64)

    (tmp_path / "r.json").write_text(json.dumps({"x": [-3.0, 3.0]}))
    assert np.abs(wq("-p", "int8-static", "--ranges", str(tmp_path / "r.json"))).max() == 64
    assert np.abs(wq("-p", "w8a16", "--ranges", str(tmp_path / "r.json"))).max() == 127

    assert np.abs(wq("-p", "int8-dynamic")).max() == 64
    assert np.abs(wq("-p", "int8-dynamic", "--per-channel")).max() == 64
    assert np.abs(wq("-p", "int8-dynamic", "--no-reduce-range")).max() == 127
    assert wq("-p", "int8-dynamic", "--asymmetric", "--weight-type", "uint8").max() == 255
