"""Oracle tests of the numeric kernels (src/kernels) against onnxruntime and numpy, through
tests/tools/wm_kerneltool (raw files in, raw file out).

- MatMulNBits: the B / scales / zero-point packing and dequantization (A = identity gives the
  dequantized weights column by column), random A at accuracy_level 0 (fp32 math) and 4 (int8
  activations, where onnxruntime quantizes A per block exactly like wm_ref_nbits_q8), bits 2/4/8,
  block sizes 16..256, K not a multiple of the block, packed and default zero points; the AVX2
  table, the generic table and the naive reference all checked.
- MatMulInteger: every u8/s8 combination, scalar and per-column zero points, prepacked B; int32
  results must be identical to onnxruntime and to numpy's exact integer product. Note: onnxruntime's
  u8 x s8 path on AVX2 (vpmaddubsw) saturates int16 pairs, so its result is compared only with
  A < 128 (where it cannot saturate); the full range is checked against numpy.
- SGEMM against numpy for a few transposed / prepacked shapes.
"""
import os
import subprocess

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import oracle_util as U
from engine_oracle import q8_rows


@pytest.fixture(scope="module")
def kerneltool(build_dir):
    p = U.binary(build_dir, "wm_kerneltool")
    if not os.access(p, os.X_OK):
        pytest.fail(f"wm_kerneltool not found at {p} (build with `make all`)", pytrace=False)
    return p


TABLES = [[], ["--generic"], ["--ref"]]


def _cpu_has(flag):
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and flag in line.split() for line in f)
    except OSError:
        return False


# the AVX2 table explicitly (the default is the best table: AVX-512 where the CPU has it), and the packed layout
# sessions make of constant block-32 int4 weights (default zero point, int8 activations), on both tables
AVX2 = [["--avx2"]] if _cpu_has("avx2") else []
PACKED = [["--packed"]] + ([["--avx2", "--packed"]] if _cpu_has("avx2") else [])


def _session(graph, opsets):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _nbits_case(bits, bs, K, N, seed, zp):
    rng = np.random.default_rng(seed)
    kb = (K + bs - 1) // bs
    B = rng.integers(0, 256, (N, kb, bs * bits // 8), dtype=np.uint8)
    S = (rng.random((N, kb), dtype=np.float32) * 0.02 + 0.01).astype(np.float32)
    Z = rng.integers(0, 256, (N, (kb * bits + 7) // 8), dtype=np.uint8) if zp else None
    return B, S, Z


def _ort_nbits(A, B, S, Z, bits, bs, K, N, acc):
    inits = [numpy_helper.from_array(B, "B"), numpy_helper.from_array(S, "S")]
    ins = ["A", "B", "S"]
    if Z is not None:
        inits.append(numpy_helper.from_array(Z, "Z"))
        ins.append("Z")
    node = helper.make_node("MatMulNBits", ins, ["C"], domain="com.microsoft", K=K, N=N, bits=bits, block_size=bs,
                            accuracy_level=acc)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("A", TensorProto.FLOAT, list(A.shape))],
                          [helper.make_tensor_value_info("C", TensorProto.FLOAT, [A.shape[0], N])], inits)
    return _session(g, [("", 17), ("com.microsoft", 1)]).run(None, {"A": A})[0]


def _ours_nbits(tool, tmp, A, B, S, Z, bits, bs, K, N, acc, extra):
    M = A.shape[0]
    paths = {k: str(tmp / f"{k}.bin") for k in "ABSZC"}
    A.tofile(paths["A"])
    B.tofile(paths["B"])
    S.tofile(paths["S"])
    if Z is not None:
        Z.tofile(paths["Z"])
    zarg = "-" if Z is None else ("f:" if Z.dtype == np.float32 else "") + paths["Z"]  # float: [N][k_blocks]
    r = U.run([tool, "nbits", M, N, K, bits, bs, acc, paths["A"], paths["B"], paths["S"],
               zarg, paths["C"], "--threads", "2"] + extra, timeout=120)
    assert r.returncode == 0, r.stderr
    return np.fromfile(paths["C"], dtype=np.float32).reshape(M, N)


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("bs", [16, 32, 64, 128, 256])
@pytest.mark.parametrize("zp", [True, False])
def test_nbits_dequantization_matches_ort(kerneltool, tmp_path, bits, bs, zp):
    K, N = bs * 2 + 16 if bs < 256 else 272, 19  # K not a multiple of the block
    B, S, Z = _nbits_case(bits, bs, K, N, bits * 131 + bs, zp)
    eye = np.eye(K, dtype=np.float32)  # C[k, n] = W[k, n]: the dequantized weights themselves
    want = _ort_nbits(eye, B, S, Z, bits, bs, K, N, 0)
    for extra in TABLES:
        got = _ours_nbits(kerneltool, tmp_path, eye, B, S, Z, bits, bs, K, N, 0, extra)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7, err_msg=f"tables {extra}")


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("bs", [16, 32, 128])
@pytest.mark.parametrize("acc", [0, 4])
@pytest.mark.parametrize("M", [1, 3, 20])
def test_nbits_random_matches_ort(kerneltool, tmp_path, bits, bs, acc, M):
    K, N = 320, 40
    B, S, Z = _nbits_case(bits, bs, K, N, bits + bs + M, M != 3)
    A = (np.random.default_rng(M).random((M, K), dtype=np.float32) - 0.5) * 2
    want = _ort_nbits(A, B, S, Z, bits, bs, K, N, acc)
    scale = np.abs(want).max()
    packable = bits == 4 and bs == 32 and acc == 4 and Z is None
    for extra in TABLES + AVX2 + (PACKED if packable else []):
        got = _ours_nbits(kerneltool, tmp_path, A, B, S, Z, bits, bs, K, N, acc, extra)
        err = np.abs(got - want).max() / scale
        if acc == 4 and M >= 8 and extra != ["--ref"] and not packable:
            # documented: for large M the kernels may use fp32 math; onnxruntime quantizes A to int8 (the block-32
            # int4 weights of the packed layout take int8 activations at every M, on AVX2 and AVX-512)
            assert err < 2e-2, f"{extra}: {err}"
        else:
            assert err < 2e-6, f"{extra}: relative error {err}"


@pytest.mark.parametrize("bits,bs", [(4, 32), (4, 16), (4, 64), (4, 128)])
@pytest.mark.parametrize("M", [1, 3, 20, 40])
def test_nbits_float_zero_points_match_ort(kerneltool, tmp_path, bits, bs, M):
    # float zero points (a carried GGUF's Q4_1 / Q4_K blocks, w = d q + m), K not a multiple of the block, N odd.
    # accuracy_level 0: float32 math, onnxruntime's. accuracy_level 4 below 32 rows: int8 activations with the
    # zero point folded as -zp * sum(q) (llama.cpp's Q4_1 x Q8_1 arithmetic), which onnxruntime does not do for
    # float zero points (it keeps float32 activations): the reference is onnxruntime at level 0 on the activations
    # quantized and dequantized by numpy, i.e. the same products in float32; from 32 rows on level 4 is float32 math
    # (the naive reference, --ref, is int8 at every M). onnxruntime has no 8-bit kernel with float zero points.
    K, N = 300, 37
    kb = (K + bs - 1) // bs
    B, S, _ = _nbits_case(bits, bs, K, N, bits * 7 + bs + M, False)
    Z = (np.random.default_rng(M + bs).random((N, kb), dtype=np.float32) * (1 << bits)).astype(np.float32)
    A = (np.random.default_rng(M).random((M, K), dtype=np.float32) - 0.5) * 2
    want0 = _ort_nbits(A, B, S, Z, bits, bs, K, N, 0)
    want_q8 = _ort_nbits(q8_rows(A, bs), B, S, Z, bits, bs, K, N, 0)
    assert np.abs(want_q8 - want0).max() > 1e-4 * np.abs(want0).max()  # the two references differ
    for acc in (0, 4):
        for extra in TABLES + AVX2:
            want = want_q8 if acc == 4 and (M < 32 or extra == ["--ref"]) else want0
            scale = np.abs(want).max()
            got = _ours_nbits(kerneltool, tmp_path, A, B, S, Z, bits, bs, K, N, acc, extra)
            err = np.abs(got - want).max() / scale
            assert err < 4e-6, f"acc {acc} {extra}: relative error {err}"


@pytest.mark.parametrize("bits,bs,zp", [(4, bs, zp) for bs in (32, 64, 128) for zp in ("none", "uint8", "float")] +
                         [(8, bs, zp) for bs in (16, 32, 64) for zp in ("none", "uint8")])  # no 8-bit float zp in ORT
@pytest.mark.parametrize("M", [1, 3])
def test_nbits_15bit_activations_match_ort(kerneltool, tmp_path, bits, bs, zp, M):
    # accuracy_level 2 (float16 compute allowed) below 8 rows: activations quantized per block to 15 bits
    # (amax / 16383), exact integer block dots. The reference: onnxruntime at level 0 on the activations quantized and
    # dequantized by numpy (q8_rows(A, bs, 16383)), the same products in float32; against onnxruntime on A itself the
    # error is ~1e-5 of the largest output, far below int8's. K not a multiple of the block, N odd.
    K, N = 300, 37
    kb = (K + bs - 1) // bs
    B, S, Z = _nbits_case(bits, bs, K, N, bits * 5 + bs + M, zp == "uint8")
    if zp == "float":
        Z = (np.random.default_rng(M + bs).random((N, kb), dtype=np.float32) * (1 << bits)).astype(np.float32)
    A = (np.random.default_rng(M).random((M, K), dtype=np.float32) - 0.5) * 2
    want0 = _ort_nbits(A, B, S, Z, bits, bs, K, N, 0)
    want = _ort_nbits(q8_rows(A, bs, 16383), B, S, Z, bits, bs, K, N, 0)
    want_q8 = _ort_nbits(q8_rows(A, bs), B, S, Z, bits, bs, K, N, 0)
    scale = np.abs(want0).max()
    assert np.abs(want - want0).max() > 1e-7 * scale  # the 15-bit rounding shows
    for extra in TABLES + AVX2:
        got = _ours_nbits(kerneltool, tmp_path, A, B, S, Z, bits, bs, K, N, 2, extra)
        err, err0 = np.abs(got - want).max() / scale, np.abs(got - want0).max() / scale
        assert err < 4e-6, f"{extra}: relative error {err} vs the 15-bit activations"
        assert err0 < 1e-4 and err0 * 30 < np.abs(want_q8 - want0).max() / scale, f"{extra}: {err0} vs float32"


@pytest.mark.parametrize("M", [1, 2, 5, 40])
@pytest.mark.parametrize("K,N", [(320, 37), (896, 21)])
def test_nbits_packed_int8_matches_ort(kerneltool, tmp_path, M, K, N):
    # block-32 int4 weights, default zero point, accuracy_level 4: the packed layout on the default and AVX2 tables,
    # decode and prefill sizes (40 rows: past the int8 limit of other weights), quads with padding columns (N % 4),
    # a partial last super-group (K = 896: 28 blocks); onnxruntime quantizes A per block exactly as we do
    B, S, _ = _nbits_case(4, 32, K, N, M + K, False)
    A = (np.random.default_rng(M + N).random((M, K), dtype=np.float32) - 0.5) * 2
    want = _ort_nbits(A, B, S, None, 4, 32, K, N, 4)
    scale = np.abs(want).max()
    for extra in [[]] + AVX2 + PACKED:
        got = _ours_nbits(kerneltool, tmp_path, A, B, S, None, 4, 32, K, N, 4, extra)
        err = np.abs(got - want).max() / scale
        assert err < 2e-6, f"{extra}: relative error {err}"


_I8 = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}


@pytest.mark.parametrize("at,bt", [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8),
                                   (np.int8, np.uint8)])
@pytest.mark.parametrize("percol", [False, True])
@pytest.mark.parametrize("packed", [False, True])
def test_matmulinteger_matches_ort(kerneltool, tmp_path, at, bt, percol, packed):
    M, K, N = 23, 77, 37
    rng = np.random.default_rng(7)
    ai, bi = np.iinfo(at), np.iinfo(bt)
    A = rng.integers(ai.min, ai.max + 1, (M, K)).astype(at)
    B = rng.integers(bi.min, bi.max + 1, (K, N)).astype(bt)
    za = np.array(rng.integers(ai.min, ai.max + 1), dtype=at)
    zb = rng.integers(bi.min, bi.max + 1, (N,) if percol else ()).astype(bt)
    exact = (A.astype(np.int64) - int(za)) @ (B.astype(np.int64) - zb.astype(np.int64))
    A_ort = A if not (at == np.uint8 and bt == np.int8) else (A & 0x7F).astype(np.uint8)  # see module doc
    g = helper.make_graph([helper.make_node("MatMulInteger", ["A", "B", "za", "zb"], ["C"])], "g",
                          [helper.make_tensor_value_info("A", _I8[at], [M, K])],
                          [helper.make_tensor_value_info("C", TensorProto.INT32, [M, N])],
                          [numpy_helper.from_array(B, "B"), numpy_helper.from_array(za, "za"),
                           numpy_helper.from_array(zb, "zb")])
    want_ort = _session(g, [("", 13)]).run(None, {"A": A_ort})[0]
    pb = str(tmp_path / "B.bin")
    B.tofile(pb)
    zbarg = None if percol else str(int(zb))
    if percol:
        zbarg = "@" + str(tmp_path / "zb.bin")
        zb.astype(np.int32).tofile(zbarg[1:])
    for A_in, want in [(A, exact), (A_ort, want_ort)]:
        pa, pc = str(tmp_path / "A.bin"), str(tmp_path / "C.bin")
        A_in.tofile(pa)
        for extra in TABLES:
            r = U.run([kerneltool, "igemm", M, N, K, int(at == np.int8), int(bt == np.int8), pa, pb, int(za), zbarg, pc,
                       "--threads", "3"] + extra + (["--packed"] if packed else []), timeout=60)
            assert r.returncode == 0, r.stderr
            got = np.fromfile(pc, dtype=np.int32).reshape(M, N)
            np.testing.assert_array_equal(got, want, err_msg=f"tables {extra}")


@pytest.mark.parametrize("ta,tb,packed", [(0, 0, 0), (0, 1, 1), (1, 0, 0), (1, 1, 1), (0, 0, 1)])
def test_sgemm_matches_numpy(kerneltool, tmp_path, ta, tb, packed):
    M, N, K = 67, 45, 301
    rng = np.random.default_rng(ta * 4 + tb * 2 + packed)
    A = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32)
    B = rng.standard_normal((N, K) if tb else (K, N)).astype(np.float32)
    C0 = rng.standard_normal((M, N)).astype(np.float32)
    want = 0.5 * (A.T if ta else A).astype(np.float64) @ (B.T if tb else B).astype(np.float64) + 2.0 * C0
    paths = {k: str(tmp_path / f"{k}.bin") for k in "ABCO"}
    A.tofile(paths["A"])
    B.tofile(paths["B"])
    C0.tofile(paths["C"])
    for extra in TABLES:
        r = U.run([kerneltool, "sgemm", M, N, K, ta, tb, "0.5", "2", paths["A"], paths["B"], paths["C"], paths["O"],
                   "--threads", "2"] + extra + (["--packed"] if packed else []), timeout=60)
        assert r.returncode == 0, r.stderr
        got = np.fromfile(paths["O"], dtype=np.float32).reshape(M, N)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max(), err_msg=f"{extra}")


def test_kerneltool_rejects_wrong_sizes(kerneltool, tmp_path):
    p = tmp_path / "A.bin"
    np.zeros(10, dtype=np.float32).tofile(p)
    r = U.run([kerneltool, "nbits", 1, 2, 32, 4, 32, 0, p, p, p, "-", tmp_path / "C.bin"], timeout=30)
    assert r.returncode == 2 and "wrong size" in r.stderr
