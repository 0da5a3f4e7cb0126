"""Engine vs onnxruntime on com.microsoft GatherBlockQuantized (an int4 build's token embedding).

Single-node graphs over random codes, scales and zero points: uint8 tables of 2-, 4- and 8-bit codes
(gather axis 0, quantize axis last), int4 / uint4 tables on other axes, float32 and float16 scales,
int32 / int64 and negative indices. Values must equal onnxruntime's (the same products in float32);
an index out of range is an input error here (onnxruntime writes zeros).
"""
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from engine_oracle import MS, check, make_model
from test_engine_contrib import engine_error, pack_bits

RNG = np.random.default_rng(77)


def int4_tensor(name, dtype, codes):
    """A packed int4/uint4 initializer in raw_data (two codes a byte, low nibble first)."""
    flat = (np.asarray(codes).reshape(-1) & 0xF).astype(np.uint8)
    if flat.size % 2:
        flat = np.append(flat, np.uint8(0))
    return helper.make_tensor(name, dtype, np.shape(codes), (flat[0::2] | (flat[1::2] << 4)).tobytes(), raw=True)


def gbq_model(data, scales, zp, idx_shape, idx_type, out_type, **attrs):
    inits = [data, scales] + ([zp] if zp is not None else [])
    ins = ["data", "idx", "scales"] + (["zp"] if zp is not None else [])
    node = helper.make_node("GatherBlockQuantized", ins, ["y"], domain=MS, **attrs)
    return make_model([node], [("idx", idx_type, list(idx_shape))], [("y", out_type, None)], inits)


def uint8_case(tmp, build_dir, V=11, H=64, bits=4, block=32, zp=False, fp16=False, idx=None, itype=np.int64,
               name="gbq"):
    nsb = (H + block - 1) // block
    codes = RNG.integers(0, 1 << bits, (V, H))
    data = numpy_helper.from_array(pack_bits(codes, bits) if bits < 8 else codes.astype(np.uint8), "data")
    nt, ft = (np.float16, TP.FLOAT16) if fp16 else (np.float32, TP.FLOAT)
    scales = numpy_helper.from_array((RNG.random((V, nsb)) * 0.2 - 0.1).astype(nt), "scales")
    z = None
    if zp:
        per = 8 // bits
        zc = RNG.integers(0, 1 << bits, (V, (nsb + per - 1) // per * per))
        z = numpy_helper.from_array(pack_bits(zc, bits) if bits < 8 else zc.astype(np.uint8), "zp")
    idx = np.array([[0, V - 1, 3], [-1, 5, -V]]) if idx is None else idx
    m = gbq_model(data, scales, z, idx.shape, TP.INT64 if itype == np.int64 else TP.INT32, ft, bits=bits,
                  block_size=block, gather_axis=0, quantize_axis=1)
    return check(build_dir, tmp, m, {"idx": idx.astype(itype)}, atol=0.0, what=name)


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("zp", [False, True])
def test_gbq_uint8(tmp_path, build_dir, bits, zp):
    uint8_case(tmp_path, build_dir, bits=bits, zp=zp)


def test_gbq_uint8_partial_block_odd_zero_point_columns(tmp_path, build_dir):
    # H = 80 with block 32: 3 scale blocks (the last one 16 wide), zero points 2 bytes a row
    uint8_case(tmp_path, build_dir, H=80, zp=True)
    uint8_case(tmp_path, build_dir, H=80, zp=False, name="gbq_nozp")


def test_gbq_uint8_fp16_scales_int32_indices(tmp_path, build_dir):
    uint8_case(tmp_path, build_dir, fp16=True, itype=np.int32, block=16)


def test_gbq_uint8_large_gather_threads(tmp_path, build_dir):
    # enough rows to split over the pool: every row lands where onnxruntime puts it
    uint8_case(tmp_path, build_dir, V=300, H=256, block=64, idx=RNG.integers(-300, 300, (3, 100)))


@pytest.mark.parametrize("dtype", [TP.INT4, TP.UINT4])
@pytest.mark.parametrize("zp", [False, True])
def test_gbq_int4_other_axes(tmp_path, build_dir, dtype, zp):
    # data [A=4, G=6, Q=48] gathered on axis 1, blocks of 16 along axis 2; and gather 2 / quantize 0
    lo, hi = (-8, 8) if dtype == TP.INT4 else (0, 16)
    for shape, g, q in (((4, 6, 48), 1, 2), ((32, 3, 5), 2, 0)):
        codes = RNG.integers(lo, hi, shape)
        sshape = list(shape)
        sshape[q] = (shape[q] + 15) // 16
        data = int4_tensor("data", dtype, codes)
        scales = numpy_helper.from_array((RNG.random(sshape) * 0.2 + 0.01).astype(np.float32), "scales")
        z = int4_tensor("zp", dtype, RNG.integers(lo, hi, sshape)) if zp else None
        idx = np.array([[0, -1], [2, 1]])
        m = gbq_model(data, scales, z, idx.shape, TP.INT64, TP.FLOAT, block_size=16, gather_axis=g, quantize_axis=q)
        check(build_dir, tmp_path, m, {"idx": idx}, atol=0.0, what=f"gbq_int4_{g}{q}_{int(zp)}")


def test_gbq_bad_input(tmp_path, build_dir):
    V, H = 8, 64
    data = numpy_helper.from_array(np.zeros((V, H // 2), np.uint8), "data")
    scales = numpy_helper.from_array(np.ones((V, 2), np.float32), "scales")
    m = gbq_model(data, scales, None, [2], TP.INT64, TP.FLOAT, bits=4, block_size=32)
    err = engine_error(build_dir, tmp_path, m, {"idx": np.array([1, V])}, "gbq_range")
    assert "GatherBlockQuantized" in err and "out of range" in err, err
    bad = numpy_helper.from_array(np.ones((V, 3), np.float32), "scales")
    err = engine_error(build_dir, tmp_path, gbq_model(data, bad, None, [2], TP.INT64, TP.FLOAT, bits=4, block_size=32),
                       {"idx": np.array([1, 2])}, "gbq_scales")
    assert "scales" in err and "expected 2" in err, err
    err = engine_error(build_dir, tmp_path, gbq_model(data, scales, None, [2], TP.INT64, TP.FLOAT, bits=3,
                                                      block_size=32), {"idx": np.array([1, 2])}, "gbq_bits")
    assert "bits 3" in err, err
