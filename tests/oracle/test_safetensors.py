"""Oracle tests of the safetensors reader/writer against the Python `safetensors` package.

Files written by safetensors.numpy.save_file are read by our reader (through
build/wm_sttool) with identical names, dtypes, shapes and bytes; files our
writer produces are read back by the Python package with identical arrays;
both implementations accept and reject the same hand-made headers (except
where we are knowingly stricter); and opening a ~1 GB file touches no weight
byte (peak RSS stays small).
"""
import json
import os
import struct
import sys

import numpy as np
import pytest
import safetensors
import safetensors.numpy as stnp

import oracle_util as U


@pytest.fixture(scope="session")
def sttool():
    """wm_sttool of the normal build ($WM_BUILD); missing is a failure, not a skip."""
    p = U.binary(U.build_dir("WM_BUILD", "build"), "wm_sttool")
    if not os.access(p, os.X_OK):
        pytest.fail(f"wm_sttool not found at {p} (set WM_BUILD to the build folder; build it with `make all`)",
                    pytrace=False)
    return p


@pytest.fixture(scope="session")
def sttools(sttool):
    """The normal wm_sttool plus the ASan+UBSan one ($WM_BUILD_ASAN) when it is there."""
    d = U.build_dir("WM_BUILD_ASAN", "build-asan")
    if U.have(d, "wm_sttool"):
        return [sttool, U.binary(d, "wm_sttool")]
    if os.environ.get("WM_REQUIRE_ASAN") == "1":
        pytest.fail(f"WM_REQUIRE_ASAN=1 but no wm_sttool in {d}", pytrace=False)
    sys.stderr.write(f"note: no ASan wm_sttool in {d}; safetensors tests use the normal build only\n")
    return [sttool]


def run(binary, *args, check=True):
    r = U.run([binary, *args], timeout=300)
    assert not U.crashed(r), U.describe(r)
    if check:
        assert r.returncode == 0, U.describe(r)
    return r


def dump(binary, path, *extra):
    return json.loads(run(binary, "dump", path, *extra).stdout)


def fnv1a(b: bytes) -> str:
    h = 0xCBF29CE484222325
    for c in b:
        h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


NP_TO_ST = {
    np.float64: "F64", np.float32: "F32", np.float16: "F16", np.int64: "I64", np.uint64: "U64",
    np.int32: "I32", np.uint32: "U32", np.int16: "I16", np.uint16: "U16", np.int8: "I8",
    np.uint8: "U8", np.bool_: "BOOL", np.complex64: "C64",
}


def sample_arrays():
    rng = np.random.default_rng(1234)
    arrs = {}
    shapes = [(2, 3), (7,), (), (0,), (3, 0, 2), (1, 1, 1, 5)]
    for i, (t, _) in enumerate(NP_TO_ST.items()):
        shape = shapes[i % len(shapes)]
        if t is np.bool_:
            a = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif t is np.complex64:
            a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
        elif np.issubdtype(t, np.floating):
            a = rng.standard_normal(shape).astype(t)
        else:
            info = np.iinfo(t)
            a = rng.integers(info.min, info.max, size=shape, dtype=t, endpoint=True)
        arrs[f"layer.{i}.{np.dtype(t).name}"] = a
    arrs["h\u00e9llo/\u2603 \"q\""] = np.arange(5, dtype=np.float32)
    arrs["big.weight"] = rng.standard_normal((64, 33)).astype(np.float32)
    return arrs


META = {"format": "np", "note": "h\u00e9llo \"x\"\nline", "": "empty key"}


def check_dump_matches(d, arrs, meta):
    got = {t["name"]: t for t in d["tensors"]}
    assert set(got) == set(arrs)
    for name, a in arrs.items():
        t = got[name]
        assert t["dtype"] == NP_TO_ST[a.dtype.type], name
        assert t["shape"] == list(a.shape), name
        assert t["nbytes"] == a.nbytes, name
        assert t["fnv1a64"] == fnv1a(np.ascontiguousarray(a).tobytes()), name
    assert d["metadata"] == (meta or {})


def test_python_written_read_by_us(tmp_path, sttools):
    arrs = sample_arrays()
    p = tmp_path / "py.safetensors"
    stnp.save_file(arrs, str(p), metadata=META)
    for b in sttools:
        check_dump_matches(dump(b, p), arrs, META)
    # and without metadata
    stnp.save_file(arrs, str(p))
    check_dump_matches(dump(sttools[0], p), arrs, None)


def test_ours_read_by_python(tmp_path, sttools):
    arrs = sample_arrays()
    src, out = tmp_path / "py.safetensors", tmp_path / "ours.safetensors"
    stnp.save_file(arrs, str(src), metadata=META)
    for b in sttools:
        run(b, "copy", src, out)
        back = stnp.load_file(str(out))
        assert set(back) == set(arrs)
        for k, a in arrs.items():
            assert back[k].dtype == a.dtype and back[k].shape == a.shape, k
            assert back[k].tobytes() == a.tobytes(), k
        with safetensors.safe_open(str(out), framework="np") as f:
            assert f.metadata() == META
    # our layout keeps every tensor aligned for typed access
    raw = out.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0
    hdr = json.loads(raw[8:8 + n])
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        align = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "C64": 4,
                 "F16": 2, "I16": 2, "U16": 2}.get(v["dtype"], 1)
        assert (8 + n + v["data_offsets"][0]) % align == 0, k


GEN_BITS = {"F64": 64, "F32": 32, "F16": 16, "BF16": 16, "I64": 64, "I32": 32, "I16": 16, "I8": 8, "U8": 8,
            "U16": 16, "U32": 32, "U64": 64, "BOOL": 8, "F8_E4M3": 8, "F8_E5M2": 8, "C64": 64, "F4": 4,
            "F8_E8M0": 8}


def test_generated_files_read_by_python(tmp_path, sttool):
    """wm_sttool gen writes every dtype family; Python's (Rust) validator accepts the file and the bytes match."""
    for variant in ("all", "scalar", "empty"):
        p = tmp_path / f"{variant}.safetensors"
        run(sttool, "gen", p, variant)
        with safetensors.safe_open(str(p), framework="np") as f:  # full header validation
            keys = set(f.keys())
            meta = f.metadata()
        raw = p.read_bytes()
        (n,) = struct.unpack("<Q", raw[:8])
        hdr = json.loads(raw[8:8 + n])
        hdr.pop("__metadata__", None)
        assert keys == set(hdr)
        if variant != "empty":
            assert meta == {"format": "np", "producer": "wm_sttool"}
        d = {t["name"]: t for t in dump(sttool, p)["tensors"]}
        for name, info in hdr.items():
            b, e = info["data_offsets"]
            data = raw[8 + n + b:8 + n + e]
            numel = int(np.prod(info["shape"], dtype=np.int64)) if info["shape"] else 1
            assert len(data) == numel * GEN_BITS[info["dtype"]] // 8, name
            assert d[name]["fnv1a64"] == fnv1a(data)
            assert d[name]["shape"] == info["shape"] and d[name]["dtype"] == info["dtype"]
        if variant == "all":
            with safetensors.safe_open(str(p), framework="np") as f:
                a = f.get_tensor("f32")
            assert a.shape == (3, 4) and a.dtype == np.float32


def test_sharded_checkpoint_from_python(tmp_path, sttools):
    arrs = sample_arrays()
    names = sorted(arrs)
    half = len(names) // 2
    shards = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
    weight_map = {}
    for fn, ks in shards.items():
        stnp.save_file({k: arrs[k] for k in ks}, str(tmp_path / fn), metadata={"format": "np"})
        weight_map.update({k: fn for k in ks})
    total = sum(a.nbytes for a in arrs.values())
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    for target, b in ((tmp_path, sttools[0]), (tmp_path / "model.safetensors.index.json", sttools[-1])):
        d = dump(b, target)
        check_dump_matches(d, arrs, {"format": "np"})
        assert [os.path.basename(s) for s in d["shards"]] == sorted(shards)
        for t in d["tensors"]:
            assert os.path.basename(d["shards"][t["shard"]]) == weight_map[t["name"]]
    # the index lists a tensor the shard lacks: both sides refuse (transformers would fail on load)
    bad = dict(weight_map, ghost="model-00001-of-00002.safetensors")
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": bad}))
    r = run(sttools[-1], "dump", tmp_path, check=False)
    assert r.returncode == 2 and "ghost" in r.stderr and "missing" in r.stderr


def header_file(path, header: bytes, data: bytes, n=None):
    path.write_bytes(struct.pack("<Q", len(header) if n is None else n) + header + data)


def python_accepts(p):
    try:
        with safetensors.safe_open(str(p), framework="np") as f:
            for k in f.keys():
                f.get_slice(k)
        return True
    except Exception:
        return False


T = b'"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}'
CASES = [
    # (name, header, data, N override, python's verdict, ours)
    ("valid", b"{" + T + b"}", bytes(8), None, True, True),
    ("space padding", b"{" + T + b"}      ", bytes(8), None, True, True),
    ("newline padding", b"{" + T + b"}\n\n", bytes(8), None, True, True),
    ("null metadata", b'{"__metadata__":null,' + T + b"}", bytes(8), None, True, True),
    ("zero-size pair", b'{"z":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},' + T + b"}", bytes(8), None, True, True),
    ("N = 2^64-1", b"{" + T + b"}", bytes(8), 2**64 - 1, False, False),
    ("N past EOF", b"{" + T + b"}", bytes(8), 4096, False, False),
    ("NUL padding", b"{" + T + b"}\0\0\0", bytes(8), None, False, False),
    ("leading space", b" {" + T + b"}", bytes(8), None, None, False),  # python 0.8 may accept: format says '{'
    ("invalid UTF-8", b'{"a\xff":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', bytes(8), None, False, False),
    ("unknown dtype", b'{"a":{"dtype":"F7","shape":[2],"data_offsets":[0,8]}}', bytes(8), None, False, False),
    ("overlap", b"{" + T + b',"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', bytes(12), None, False, False),
    ("gap", b"{" + T + b',"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}}', bytes(16), None, False, False),
    ("trailing bytes", b"{" + T + b"}", bytes(12), None, False, False),
    ("size mismatch", b'{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', bytes(8), None, False, False),
    ("shape overflow", b'{"a":{"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,8]}}', bytes(8),
     None, False, False),
    ("negative dim", b'{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}', bytes(8), None, False, False),
    ("fractional dim", b'{"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}', bytes(8), None, False, False),
    ("metadata not strings", b'{"__metadata__":{"k":1},' + T + b"}", bytes(8), None, False, False),
    ("metadata array", b'{"__metadata__":["k"],' + T + b"}", bytes(8), None, False, False),
    ("deep nesting", b'{"__metadata__":' + b"[" * 5000 + b"]" * 5000 + b"," + T + b"}", bytes(8), None, False, False),
    # we are knowingly stricter: duplicates are silently merged by serde, unknown keys ignored
    ("duplicate names", b"{" + T + b"," + T + b"}", bytes(8), None, None, False),
    ("unknown key", b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}', bytes(8), None, None, False),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_accept_reject_agree(tmp_path, case, sttools):
    name, header, data, n, py, ours = case
    p = tmp_path / "c.safetensors"
    header_file(p, header, data, n)
    if py is not None:
        assert python_accepts(p) == py, f"python's verdict changed for {name}"
    for b in sttools:
        r = run(b, "list", p, check=False)
        assert r.returncode == (0 if ours else 2), U.describe(r)
        if not ours:
            assert r.stderr.startswith("wm_sttool: error: ") and str(p) in r.stderr, r.stderr


def test_open_1gb_touches_no_weights(tmp_path, sttool):
    p = tmp_path / "big.safetensors"
    run(sttool, "mkbig", p, 1 << 30)
    assert p.stat().st_size > (1 << 30)
    d = json.loads(run(sttool, "list", p).stdout)
    assert d["tensors"][0]["nbytes"] == 1 << 30
    assert d["peak_rss_bytes"] < 64 << 20, d["peak_rss_bytes"]
    # the same tool reading every byte does grow: the measurement means something
    d = dump(sttool, p)
    assert d["peak_rss_bytes"] > 512 << 20
    with safetensors.safe_open(str(p), framework="np") as f:
        assert f.get_slice("big").get_shape() == [1 << 28]
    p.unlink()  # 1 GiB: don't leave it in pytest's kept tmp folders


# ---------------------------------------------------------------- counts and dims a header claims (resource limits)

def _hf_folder(d, header, data=b""):
    os.makedirs(d, exist_ok=True)
    json.dump({"model_type": "bert", "architectures": ["BertModel"], "hidden_size": 8, "num_hidden_layers": 1,
               "num_attention_heads": 2, "intermediate_size": 16, "vocab_size": 10, "max_position_embeddings": 16,
               "type_vocab_size": 2}, open(os.path.join(d, "config.json"), "w"))
    if isinstance(header, int):  # a claimed header length over two bytes of JSON
        body = struct.pack("<Q", header) + b"{}"
    else:
        h = json.dumps(header).encode()
        body = struct.pack("<Q", len(h)) + h
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(body + data)
    return d


HUGE_ST = {
    "n_2p64_minus_1": (2**64 - 1, b"", ["header length 18446744073709551615", "100000000"]),
    "n_99mb_past_eof": (99_000_000, b"", ["header length 99000000", "past the end"]),
    "shape_2p40_squared": ({"w": {"dtype": "F32", "shape": [2**40, 2**40], "data_offsets": [0, 4]}}, bytes(4),
                           ["'w'", "overflows"]),
    "shape_2p32_cubed": ({"w": {"dtype": "F32", "shape": [2**32] * 3, "data_offsets": [0, 0]}}, b"",
                         ["'w'", "overflows"]),
    "offsets_2p63": ({"w": {"dtype": "F32", "shape": [1], "data_offsets": [2**63, 2**63 + 4]}}, bytes(4),
                     ["'w'", "past the end"]),
    "dims_100000": ({"w": {"dtype": "F32", "shape": [1] * 100000, "data_offsets": [0, 4]}}, bytes(4),
                    ["'w'", "more than 64"]),
}


@pytest.mark.parametrize("name", list(HUGE_ST))
def test_claimed_sizes_refused_before_allocating(name, winml, winml_asan, tmp_path):
    """A checkpoint's safetensors header claiming a huge header length, element count, offset or rank: exit 2
    naming the file and tensor, in well under a second of CPU and a small peak RSS (plain build; ASan for a clean
    error), for inspect and build."""
    header, data, needles = HUGE_ST[name]
    d = _hf_folder(str(tmp_path / "ck"), header, data)
    for cmd in ("inspect", "build"):
        out = tmp_path / "out"
        argv = [cmd, "-m", d] + (["-o", out] if cmd == "build" else [])
        U.assert_clean_error(U.run([winml_asan, *argv], timeout=60), f"winml {cmd}", "model.safetensors", *needles)
        r, cpu, rss = U.run_measured([winml, *argv])
        assert r.returncode == 2, U.describe(r)
        assert cpu < 1.0 and rss < 64 << 20, (cmd, cpu, rss)
        assert not out.exists()
