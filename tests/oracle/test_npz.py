"""numpy .npz / .npy inputs (issue 32: the reference's users keep inputs and outputs as numpy archives).

`winml perf --input-data X.npz` and `winml eval --mode compare --reference-outputs X.npz` read what np.savez and
np.savez_compressed write (stored and deflated members): the outputs our engine computes on those inputs equal
onnxruntime's on the same arrays, and numpy's default int64 ids feed int32 inputs. Hostile archives (truncated,
corrupt CRC, Fortran order, big-endian, pickled objects, a member inflating past its declared size, wrong dtypes)
are refused with exit 2 naming the file and the member, under ASan + UBSan."""
import io
import json
import os
import struct
import zipfile
import zlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP, helper as h, numpy_helper as nh

import oracle_util as U


@pytest.fixture(scope="module")
def model(request):
    """A small two-input model: y = MatMul(x, W) + Gather(E, ids) summed over the sequence; ids int32."""
    d = U.scratch(request, "npz")
    rng = np.random.default_rng(0)
    W = rng.standard_normal((8, 5)).astype(np.float32)
    E = rng.standard_normal((50, 5)).astype(np.float32)
    nodes = [h.make_node("MatMul", ["x", "W"], ["xw"]), h.make_node("Gather", ["E", "ids"], ["e"]),
             h.make_node("ReduceSum", ["e", "ax"], ["es"], keepdims=1), h.make_node("Add", ["xw", "es"], ["y"])]
    g = h.make_graph(nodes, "npz", [h.make_tensor_value_info("x", TP.FLOAT, ["B", 1, 8]),
                                    h.make_tensor_value_info("ids", TP.INT32, ["B", "S"])],
                     [h.make_tensor_value_info("y", TP.FLOAT, None)],
                     [nh.from_array(W, "W"), nh.from_array(E, "E"), nh.from_array(np.array([1], np.int64), "ax")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    p = str(d / "m.onnx")
    onnx.save(m, p)
    return d, p


def feeds(seed, batch=2, seq=6):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((batch, 1, 8)), "ids": rng.integers(0, 50, (batch, seq))}  # float64, int64


def ort_out(path, f):
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return s.run(None, {"x": f["x"].astype(np.float32), "ids": f["ids"].astype(np.int32)})[0]


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_eval_reference_outputs_npz(model, winml, tmp_path, save):
    d, p = model
    arrays = {}
    for i in range(3):
        f = feeds(10 + i)
        arrays[f"inputs.{i}.x"] = f["x"].astype(np.float32)
        arrays[f"inputs.{i}.ids"] = f["ids"]  # numpy's int64: the model takes int32
        arrays[f"outputs.{i}.y"] = ort_out(p, f)
    ref = tmp_path / "ref.npz"
    save(ref, **arrays)
    r = U.run([winml, "eval", "--mode", "compare", "-m", p, "--reference-outputs", ref, "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    j = json.loads(r.stdout)
    assert j["samples"] == 3, j
    mad = j["metrics"]["max_abs_diff_max"]["y"]
    assert mad < 1e-5, j["metrics"]
    # a wrong reference is seen as such: the metrics are computed from the archive's values
    arrays["outputs.1.y"] = arrays["outputs.1.y"] + 1.0
    save(ref, **arrays)
    j = json.loads(U.run([winml, "eval", "--mode", "compare", "-m", p, "--reference-outputs", ref, "-f", "json"]).stdout)
    assert j["metrics"]["max_abs_diff_max"]["y"] == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_perf_input_data_npz(model, winml, tmp_path, save):
    d, p = model
    f = feeds(3, batch=3, seq=4)
    path = tmp_path / "in.npz"
    save(path, x=f["x"], ids=f["ids"])  # float64 into the float32 input, int64 into int32
    r = U.run([winml, "perf", "-m", p, "--input-data", path, "--iterations", "2", "--warmup", "1", "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    info = json.loads(r.stdout)["model_info"]
    assert info["input_shapes"] == [[3, 1, 8], [3, 4]], info


def test_single_npy(winml, tmp_path):
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "r", [h.make_tensor_value_info("x", TP.FLOAT, ["N"])],
                     [h.make_tensor_value_info("y", TP.FLOAT, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    p = str(tmp_path / "relu.onnx")
    onnx.save(m, p)
    np.save(tmp_path / "x.npy", np.arange(-3, 4, dtype=np.float32))
    r = U.run([winml, "perf", "-m", p, "--input-data", tmp_path / "x.npy", "--iterations", "1", "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    assert json.loads(r.stdout)["model_info"]["input_shapes"] == [[7]]


# ------------------------------------------------------------ hostile archives

def npy_bytes(a, header=None):
    b = io.BytesIO()
    np.save(b, a)
    v = b.getvalue()
    if header is None:
        return v
    hl = struct.unpack("<H", v[8:10])[0]
    text = header.ljust(hl - 1).encode() + b"\n"
    return v[:8] + struct.pack("<H", len(text)) + text + v[10 + hl:]


def zip_of(members, method=zipfile.ZIP_STORED):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", compression=method) as z:
        for name, data in members:
            z.writestr(name, data)
    return b.getvalue()


def good_members():
    f = feeds(1)
    return [("x.npy", npy_bytes(f["x"])), ("ids.npy", npy_bytes(f["ids"]))]


def hostile_cases():
    ids = np.zeros((2, 6), np.int64)
    x = np.zeros((2, 1, 8))
    good = zip_of(good_members())
    crc = bytearray(good)
    crc[good.index(b"PK\x01\x02") + 16] ^= 0xFF  # the central directory's CRC of the first member
    deflated = zip_of(good_members(), zipfile.ZIP_DEFLATED)
    bomb = bytearray(deflated)  # the first member declares fewer bytes than it inflates to
    cd = deflated.index(b"PK\x01\x02")
    struct.pack_into("<I", bomb, cd + 24, struct.unpack_from("<I", bomb, cd + 24)[0] - 100)
    liar = bytearray(deflated)  # the first member claims 2 GiB inflated from a few hundred bytes (fuzz_npz found it:
    struct.pack_into("<I", liar, cd + 24, 2**31 + 1)  # the buffer was allocated before the stream said otherwise)
    return {
        "ratio": (bytes(liar), "more than deflate's 1032:1 maximum"),
        "truncated": (good[: len(good) // 2], "ZIP"),
        "crc": (bytes(crc), "CRC-32"),
        "inflates_past": (bytes(bomb), "longer than its declared size"),
        "fortran": (zip_of([("x.npy", npy_bytes(np.asfortranarray(x.reshape(2, 8)).reshape(2, 1, 8),
                                                 "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 1, 8), }")),
                            ("ids.npy", npy_bytes(ids))]), "fortran_order"),
        "big_endian": (zip_of([("x.npy", npy_bytes(x.astype(">f8"))), ("ids.npy", npy_bytes(ids))]), "big-endian"),
        "object": (zip_of([("x.npy", npy_bytes(np.array([{"a": 1}], dtype=object), "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }")),
                           ("ids.npy", npy_bytes(ids))]), "descr"),
        "data_size": (zip_of([("x.npy", npy_bytes(x)[:-8]), ("ids.npy", npy_bytes(ids))]), "data bytes"),
        "duplicate": (zip_of([("x.npy", npy_bytes(x)), ("x.npy", npy_bytes(x))]), "two members"),
        "float_ids": (zip_of([("x.npy", npy_bytes(x)), ("ids.npy", npy_bytes(ids.astype(np.float32)))]), "ids"),
        "ids_range": (zip_of([("x.npy", npy_bytes(x)), ("ids.npy", npy_bytes(ids + 2**40))]), "does not fit"),
        "missing": (zip_of([("x.npy", npy_bytes(x))]), "no array named 'ids'"),
        "not_zip": (b"hello world, not an archive at all" * 3, "ZIP"),
    }


@pytest.mark.filterwarnings("ignore:Duplicate name")
@pytest.mark.parametrize("case", sorted(hostile_cases()))
def test_hostile_npz(model, winml_asan, tmp_path, case):
    d, p = model
    data, needle = hostile_cases()[case]
    path = tmp_path / f"{case}.npz"
    path.write_bytes(data)
    r = U.run([winml_asan, "perf", "-m", p, "--input-data", path, "--iterations", "1"])
    U.assert_clean_error(r, "winml perf", needle)
    assert str(path) in r.stderr
