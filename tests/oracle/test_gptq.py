"""GPTQ (src/opt/quant_gptq.c, through tests/tools/wm_opttool gptq) against a numpy reference of the same algorithm.

The reference is the textbook route: H^-1 by numpy's inverse, its upper Cholesky factor by numpy's cholesky (ours:
the reversed matrix's Cholesky and a triangular inverse, never forming H^-1), then the row loop with each block's
RTN scale and zero point from the updated rows (onnxruntime's RTN arithmetic: round half away from zero). The
weights are float32 on both sides, so a code may differ where a value sits on a rounding boundary: at least 99.5%
of the codes must be equal and the output error || X (W - Wq) ||^2 within 1% of the reference's, which is itself
well below RTN's.
"""
import json
import os

import numpy as np
import pytest

import oracle_util as U  # noqa: E402


def tool(build_dir):
    p = os.path.join(build_dir, "wm_opttool")
    if not os.access(p, os.X_OK):
        pytest.fail(f"wm_opttool not found at {p} (build the tests/tools targets)", pytrace=False)
    return p


def rnd(x):
    return np.floor(np.abs(x) + 0.5) * np.sign(x)


def rtn_params(lo, hi, bits, sym):
    kmax, kmid = (1 << bits) - 1, 1 << (bits - 1)
    if sym:
        m = np.where(np.abs(hi) > np.abs(lo), hi, lo).astype(np.float32)
        return (-m / np.float32(kmid)).astype(np.float32), np.full(lo.shape, kmid)
    lo, hi = np.minimum(lo, 0).astype(np.float32), np.maximum(hi, 0).astype(np.float32)
    s = ((hi - lo) / np.float32(kmax)).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        zf = np.where(s != 0, np.float32(0) - lo / s, lo)
    z = np.where(~(zf >= 0), 0, np.where(zf > kmax, kmax, rnd(zf))).astype(np.int64)
    return s, z


def gptq_ref(w, H, damp, bs, bits, sym):
    """Codes [K, N], scales [nblk, N], zero points [nblk, N], dequantized W [K, N]."""
    K, N = w.shape
    H = H.copy()
    d = np.diag(H).copy()
    d[d == 0] = 1
    H[np.diag_indices(K)] = d
    H[np.diag_indices(K)] += damp * np.mean(np.diag(H))
    Uu = np.linalg.cholesky(np.linalg.inv(H)).T  # upper, H^-1 = U^T U
    W = w.astype(np.float32).copy()
    kmax = (1 << bits) - 1
    nblk = (K + bs - 1) // bs
    codes = np.zeros((K, N), np.int64)
    sc, zs = np.zeros((nblk, N), np.float32), np.zeros((nblk, N), np.int64)
    wd = np.zeros((K, N), np.float32)
    for kb in range(nblk):
        k0, k1 = kb * bs, min(K, kb * bs + bs)
        s, z = rtn_params(W[k0:k1].min(0), W[k0:k1].max(0), bits, sym)
        sc[kb], zs[kb] = s, z
        r = np.where(s != 0, np.float32(1) / np.where(s != 0, s, 1), np.float32(0)).astype(np.float32)
        for k in range(k0, k1):
            c = np.clip(rnd((W[k] * r).astype(np.float32) + z.astype(np.float32)), 0, kmax).astype(np.int64)
            codes[k] = c
            wd[k] = s * (c - z).astype(np.float32)
            e = ((W[k] - wd[k]) / np.float32(Uu[k, k])).astype(np.float32)
            W[k + 1:] -= np.outer(Uu[k, k + 1:].astype(np.float32), e)
    return codes, sc, zs, wd


def unpack(prefix, K, N, bs, bits, sym):
    nblk = (K + bs - 1) // bs
    q = np.fromfile(prefix + ".q", np.uint8).reshape(N, nblk, bs * bits // 8)
    sc = np.fromfile(prefix + ".scales", np.float32).reshape(N, nblk)
    if bits == 4:
        c = np.stack([q & 15, q >> 4], -1).reshape(N, nblk * bs)
    else:
        c = q.reshape(N, nblk * bs)
    codes = c[:, :K].T.astype(np.int64)
    if sym:
        z = np.full((N, nblk), 1 << (bits - 1))
    else:
        zb = np.fromfile(prefix + ".zp", np.uint8).reshape(N, -1)
        z = np.stack([zb & 15, zb >> 4], -1).reshape(N, -1)[:, :nblk] if bits == 4 else zb[:, :nblk]
    wd = (codes - np.repeat(z.T, bs, 0)[:K]) * np.repeat(sc.T, bs, 0)[:K]
    return codes, sc.T, wd.astype(np.float32)


@pytest.mark.parametrize("bits,sym,bs", ((4, False, 32), (4, True, 16), (8, False, 32)))
def test_gptq_matches_numpy_reference(build_dir, tmp_path, bits, sym, bs):
    rng = np.random.default_rng(bits * 10 + sym)
    T, K, N = 512, 288, 40  # K past two lazy batches of 128 rows (the sgemm update)
    f = rng.standard_normal((T, 6))
    X = (f @ rng.standard_normal((6, K)) + 0.3 * rng.standard_normal((T, K))).astype(np.float32)
    X[:, 5] = 0  # a dead input
    X[:, 17] *= 8  # an outlier channel
    w = (rng.standard_normal((K, N)) * 0.05).astype(np.float32)
    H = X.astype(np.float64).T @ X.astype(np.float64)
    w.tofile(tmp_path / "w.f32")
    H.tofile(tmp_path / "h.f64")
    out = str(tmp_path / "out")
    r = U.run([tool(build_dir), "gptq", K, N, bs, bits, int(sym), 0.01, tmp_path / "w.f32", tmp_path / "h.f64", out])
    assert r.returncode == 0, U.describe(r)
    codes, sc, wd = unpack(out, K, N, bs, bits, sym)
    rc, rs, _, rwd = gptq_ref(w, H, 0.01, bs, bits, sym)
    same = (codes == rc).mean()

    def err(d):
        return float(np.sum((X.astype(np.float64) @ (w.astype(np.float64) - d)) ** 2))

    e_mine, e_ref = err(wd), err(rwd)
    s_rtn, z_rtn = rtn_params(w.reshape(-1, bs, N).min(1), w.reshape(-1, bs, N).max(1), bits, sym)
    rtn = np.clip(rnd(w / np.repeat(np.where(s_rtn != 0, s_rtn, 1), bs, 0) + np.repeat(z_rtn, bs, 0)), 0,
                  (1 << bits) - 1)
    e_rtn = err((rtn - np.repeat(z_rtn, bs, 0)) * np.repeat(s_rtn, bs, 0))
    U.note(f"GPTQ bits {bits} sym {sym} block {bs}: codes equal to the numpy reference {same:.4f}; output error "
           f"winml {e_mine:.5g}, reference {e_ref:.5g}, RTN {e_rtn:.5g}")
    assert same >= 0.995
    assert abs(e_mine / e_ref - 1) < 0.01
    assert e_mine < 0.5 * e_rtn
    np.testing.assert_allclose(sc, rs, rtol=1e-5)


def test_gptq_tool_refuses_nan(build_dir, tmp_path):
    w = np.ones((16, 2), np.float32)
    w[3, 1] = np.nan
    w.tofile(tmp_path / "w.f32")
    np.eye(16).tofile(tmp_path / "h.f64")
    r = U.run([tool(build_dir), "gptq", 16, 2, 16, 4, 0, 0.01, tmp_path / "w.f32", tmp_path / "h.f64",
               tmp_path / "o"])
    assert r.returncode == 2 and "weight [3, 1] is NaN" in r.stderr, U.describe(r)
    assert not os.path.exists(tmp_path / "o.q")


# ---------------------------------------------------------------- through `winml build` (recipe quant.rtn_gptq)

WORDS = "the of and a to in is you that it he was for on are as with his they at be this have from or one".split()


def _ckpt(tmp_path, big_id=None):
    """A tiny qwen2 checkpoint (vocab 96, hidden 32) with a word-level tokenizer.json of WORDS (ids 0..26; with
    big_id, the word "zebra" has that id)."""
    import builder_util as BU
    from tokenizers import Tokenizer, models, pre_tokenizers
    ck = tmp_path / "ck"
    BU.make_tiny("qwen2", str(ck), seed=1)
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(WORDS)}}
    if big_id is not None:
        vocab["zebra"] = big_id
    t = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.save(str(ck / "tokenizer.json"))
    return ck


def _gptq_recipe(winml, ck, path, **quant):
    r = U.run([winml, "config", "-m", ck, "-p", "int4"])
    assert r.returncode == 0, U.describe(r)
    rec = json.loads(r.stdout)
    rec["quant"].update({"rtn_block_size": 16, "rtn_gptq": True, "rtn_float_zero_points": False, "samples": 2,
                         **quant})
    path.write_text(json.dumps(rec))
    return path


def _text(path, words):
    rng = np.random.default_rng(0)
    path.write_text(" ".join(rng.choice(words, 2000)))
    return path


def test_gptq_build(winml, tmp_path):
    """A build with quant.rtn_gptq: from a calibration text (two sequences of 512 tokens), from seeded random
    tokens, and with rtn_importance, act-order, the tied head and damping 0.1; the manifest says GPTQ, and onnxruntime and our engine agree on the artifact (float activations)."""
    import builder_util as BU
    ck = _ckpt(tmp_path)
    text = str(_text(tmp_path / "c.txt", WORDS))
    both = {"calibration_text": text, "rtn_importance": True, "rtn_gptq_act_order": True, "rtn_gptq_tied_head": True,
            "rtn_gptq_damp": 0.1}  # the importance's scales with GPTQ's codes, act-order, the tied head too
    for name, extra in (("text", {"calibration_text": text}), ("random", {}), ("both", both)):
        rec = _gptq_recipe(winml, ck, tmp_path / f"{name}.json", rtn_accuracy_level=0, **extra)
        out = tmp_path / name
        r = U.run([winml, "build", "-m", ck, "-o", out, "-c", rec, "-q", "-f", "json"], timeout=600)
        assert r.returncode == 0, U.describe(r)
        q = next(s for s in json.loads(r.stdout)["stages"] if s["name"] == "quant")
        assert "(GPTQ)" in q["reason"] and (name != "both" or "importance" in q["reason"]), q
        ids = np.random.default_rng(2).integers(1, 27, (1, 7)).astype(np.int64)
        f = {"input_ids": ids, "attention_mask": np.ones_like(ids), "position_ids": np.arange(7)[None]}
        for i in range(2):
            for kv in ("key", "value"):
                f[f"past_key_values.{i}.{kv}"] = np.zeros((1, 2, 0, 8), np.float32)
        path = str(out / "model.onnx")
        a, b = BU.run_ort(path, f)["logits"], BU.run_engine(path, f)["logits"]
        assert np.abs(a - b).max() <= 1e-4 * max(1.0, float(np.abs(a).max()))


def test_gptq_build_bad_calibration(winml_asan, tmp_path):
    """A calibration text that is missing, too short, or tokenized by a tokenizer with ids beyond the model's
    table: exit 2, one line naming the field or the problem, no output folder."""
    ck = _ckpt(tmp_path, big_id=5000)
    (tmp_path / "short.txt").write_text("the of and")
    cases = [(tmp_path / "missing.txt", ("quant.calibration_text", "missing.txt")),
             (tmp_path / "short.txt", ("quant.calibration_text", "3 tokens, at least 16")),
             (_text(tmp_path / "zebra.txt", WORDS + ["zebra"]), ("token id 5000", "outside the model's embedding"))]
    for i, (text, needles) in enumerate(cases):
        rec = _gptq_recipe(winml_asan, ck, tmp_path / f"r{i}.json", calibration_text=str(text))
        out = tmp_path / f"o{i}"
        r = U.run([winml_asan, "build", "-m", ck, "-o", out, "-c", rec, "-q"], timeout=600)
        U.assert_clean_error(r, "winml build", *needles)
        assert not os.path.exists(out)
