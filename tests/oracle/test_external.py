"""External data: a > 2 GiB model written by our writer, checked with onnx and onnxruntime;
RSS when reading a 1.5 GB inline model through the mapping; the 2^31-1 protobuf limit;
--external always on small models (threshold 1 KiB, inline small tensors)."""
import copy
import json
import os
import struct
import sys
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import oracle_util as U

BIG = 2_200_000_000  # > 2 GiB: must go external under the auto policy
INLINE = 1_500_000_000  # < 2^31-1: can stay one message
PB_LIMIT = 2**31 - 1
ALIGN = 4096


def ext_info(t):
    return {e.key: e.value for e in t.external_data}


@pytest.fixture(scope="module")
def big_model(request, testtool):
    """big.onnx + big.onnx.data (2.2 GB) written by mkbig; removed at the end of the module."""
    d = U.scratch(request, "big")
    p = d / "big.onnx"
    t0 = time.monotonic()
    r = U.run([testtool, "mkbig", p, BIG], timeout=600)
    assert r.returncode == 0, U.describe(r)
    U.note(f"external: mkbig {BIG} bytes (auto) took {time.monotonic() - t0:.1f} s")
    return p


CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "big_child.py")
CHUNK = 8 << 20  # small reads keep this process's RSS (and so its children's ru_maxrss) low


def child(*args):
    """Runs big_child.py in its own process (see there why) and returns its JSON."""
    r = U.run([sys.executable, CHILD, *args], timeout=600)
    assert r.returncode == 0, U.describe(r)
    return json.loads(r.stdout)


def ort_run(model, tmp, **feeds):
    """onnxruntime outputs {name: array} of model, computed in a child process."""
    fin, fout = os.path.join(tmp, "ort_in.npz"), os.path.join(tmp, "ort_out.npz")
    np.savez(fin, **feeds)
    names = child("run", str(model), fin, fout)
    with np.load(fout, allow_pickle=False) as z:
        out = {n: z[n] for n in names}
    os.unlink(fin)
    os.unlink(fout)
    return out


def float_bits_at(path, offset):
    with open(path, "rb") as f:
        f.seek(offset)
        return struct.unpack("<I", f.read(4))[0]


def same_bytes(pa, oa, pb, ob, n):
    """Compares n bytes of two files at the given offsets in CHUNK pieces."""
    with open(pa, "rb") as fa, open(pb, "rb") as fb:
        fa.seek(oa)
        fb.seek(ob)
        while n:
            k = min(n, CHUNK)
            if fa.read(k) != fb.read(k):
                return False
            n -= k
    return True


def nonzero_fraction(path, offset, n):
    with open(path, "rb") as f:
        f.seek(offset)
        a = np.frombuffer(f.read(n), dtype="<f4")
    return np.count_nonzero(a) / a.size, float(np.abs(a).max())


def test_big_external(big_model, testtool, winml):
    p = big_model
    d = p.parent
    data = d / "big.onnx.data"
    assert data.exists(), "auto policy on a > 2 GiB model must write big.onnx.data"
    assert os.path.getsize(p) < 1 << 20, f"big.onnx should be small, is {os.path.getsize(p)} bytes"
    assert os.path.getsize(data) >= BIG
    assert sorted(os.listdir(d)) == ["big.onnx", "big.onnx.data"], os.listdir(d)

    t0 = time.monotonic()
    onnx.checker.check_model(str(p))  # path form: handles external data and > 2 GiB
    t_check = time.monotonic() - t0

    m = onnx.load(str(p), load_external_data=False)
    ws = [t for t in m.graph.initializer if t.name.startswith("W")]
    assert len(ws) == len(m.graph.initializer) == -(-BIG // (256 << 20))
    total = 0
    for t in ws:
        assert t.data_location == TensorProto.EXTERNAL, t.name
        assert not t.raw_data and not t.float_data
        e = ext_info(t)
        assert set(e) <= {"location", "offset", "length", "checksum"}, e
        assert e["location"] == "big.onnx.data"
        assert int(e["offset"]) % ALIGN == 0, (t.name, e)
        assert int(e["length"]) == int(np.prod(t.dims)) * 4
        total += int(e["length"])
    assert total == BIG // 4 * 4
    ends = sorted((int(ext_info(t)["offset"]), int(ext_info(t)["length"])) for t in ws)
    for (o1, l1), (o2, _) in zip(ends, ends[1:]):
        assert o1 + l1 <= o2, "external tensors overlap"
    assert ends[-1][0] + ends[-1][1] <= os.path.getsize(data)
    offs = {t.name: int(ext_info(t)["offset"]) for t in ws}
    numel = {t.name: int(np.prod(t.dims)) for t in ws}

    # onnxruntime's Gather outputs against the bytes read here from the data file
    idxs = [0, 1, 12345, numel["W" + str(len(ws) - 1)] - 1]
    t0 = time.monotonic()
    got = child("gather", str(p), *map(str, idxs))
    t_ort = time.monotonic() - t0
    checked = 0
    for i in idxs:
        for name, (shape, b) in got[str(i)].items():
            w = "W" + name[1:]
            assert shape == [1]
            if i < numel[w]:
                assert b == float_bits_at(data, offs[w] + 4 * i), (name, i)
                checked += 1
    assert checked >= len(idxs) * len(ws) - 3
    # the data is the pseudo-random sequence, not zeros
    frac, amax = nonzero_fraction(data, offs["W0"], 1 << 16)
    assert frac > 0.99 and amax <= 0.5

    info = U.inspect_json(winml, p)
    assert info["external_data"] == [{"location": "big.onnx.data", "size_bytes": os.path.getsize(data),
                                      "initializers": len(ws), "initializer_bytes": total}], info["external_data"]
    assert info["parameter_bytes"] == total and info["parameter_count"] == total // 4
    assert info["parameters_by_dtype"] == {"float32": {"tensors": len(ws), "count": total // 4, "bytes": total}}

    # load through the mapping and write again: same bytes at the (new) offsets
    cp = d / "copy.onnx"
    t0 = time.monotonic()
    r = U.run([testtool, "roundtrip", p, cp], timeout=600)
    t_rt = time.monotonic() - t0
    assert r.returncode == 0, U.describe(r)
    cdata = d / "copy.onnx.data"
    assert cdata.exists() and os.path.getsize(cp) < 1 << 20
    m2 = onnx.load(str(cp), load_external_data=False)
    t0 = time.monotonic()
    for t in m2.graph.initializer:
        e = ext_info(t)
        assert t.data_location == TensorProto.EXTERNAL and e["location"] == "copy.onnx.data"
        assert int(e["offset"]) % ALIGN == 0
        assert int(e["length"]) == numel[t.name] * 4
        assert same_bytes(data, offs[t.name], cdata, int(e["offset"]), int(e["length"])), t.name
    t_cmp = time.monotonic() - t0
    # each records its own data file (size and fingerprint, checked on load: onnx_out.h)
    for mm, dp, loc in ((m, data, "big.onnx.data"), (m2, cdata, "copy.onnx.data")):
        rec = {p.key: p.value for p in mm.metadata_props}["winml.external_data"]
        assert rec.startswith(f"bytes={os.path.getsize(dp)};sample_sha256=") and rec.endswith(f";location={loc}")
    # apart from the location strings and those records the two models are the same message
    m = copy.deepcopy(m)
    for mm in (m, m2):
        kept = [p for p in mm.metadata_props if p.key != "winml.external_data"]
        del mm.metadata_props[:]
        mm.metadata_props.extend(kept)
    for t in m2.graph.initializer:
        for kv in t.external_data:
            if kv.key == "location":
                kv.value = "big.onnx.data"
    assert m2 == m
    onnx.checker.check_model(str(cp))
    for f in ("copy.onnx", "copy.onnx.data"):  # 2.2 GB: gone before the next copy (CI's disk is small)
        os.unlink(d / f)
    # near the protobuf limit the auto policy goes external whatever the threshold
    cp2 = d / "copy2.onnx"
    r = U.run([testtool, "roundtrip", p, cp2, "--threshold", str(1 << 40)], timeout=600)
    assert r.returncode == 0, U.describe(r)
    assert (d / "copy2.onnx.data").exists(), "a model over 2^31-1 bytes must go external even above the threshold"
    assert os.path.getsize(cp2) < 1 << 20
    for f in ("copy2.onnx", "copy2.onnx.data"):
        os.unlink(d / f)
    U.note(f"external: {BIG} B model: checker(path) {t_check:.1f} s, ORT load+4 runs (child) {t_ort:.1f} s, "
           f"wm_testtool roundtrip {t_rt:.1f} s, byte compare of the copy {t_cmp:.1f} s")


def test_over_limit_never_fails_cleanly(big_model, testtool):
    """--external never on a model > 2^31-1 bytes: exit 2, message about the limit, nothing written."""
    d = big_model.parent / "never"
    d.mkdir()
    out = d / "out.onnx"
    r = U.run([testtool, "roundtrip", big_model, out, "--external", "never"], timeout=600)
    U.assert_clean_error(r, "wm_testtool", "2^31-1", any_of=["protobuf", "limit"])
    assert os.listdir(d) == [], f"files left behind: {os.listdir(d)}"
    # the same from a model built in memory
    out2 = d / "mk.onnx"
    r = U.run([testtool, "mkbig", out2, BIG, "--external", "never"], timeout=600)
    U.assert_clean_error(r, "wm_testtool", "2^31-1", any_of=["protobuf", "limit"])
    assert os.listdir(d) == [], f"files left behind: {os.listdir(d)}"
    d.rmdir()


def _max_rss_time_v(argv):
    """Max RSS in bytes from /usr/bin/time -v, or None when it is not installed."""
    if not os.access("/usr/bin/time", os.X_OK):
        return None, None
    r = U.run(["/usr/bin/time", "-v", *argv], timeout=600)
    for line in r.stderr.splitlines():
        if "Maximum resident set size" in line:
            return int(line.split(":")[1]) * 1024, r
    return None, r


def test_inline_rss(testtool, winml, tmp_path):
    p = tmp_path / "inline.onnx"
    t0 = time.monotonic()
    r = U.run([testtool, "mkbig", p, INLINE, "--external", "never"], timeout=600)
    assert r.returncode == 0, U.describe(r)
    t_mk = time.monotonic() - t0
    try:
        assert sorted(os.listdir(tmp_path)) == ["inline.onnx"], "--external never must write one file"
        size = os.path.getsize(p)
        assert INLINE <= size < PB_LIMIT
        r = U.run_fresh([testtool, "touch", p], timeout=600)
        assert r.returncode == 0, U.describe(r)
        t = json.loads(r.stdout)
        assert t["file_bytes"] == size
        assert t["data_bytes"] == INLINE // 4 * 4, t
        assert t["peak_rss_bytes"] <= 1.1 * size, (
            f"touch peak RSS {t['peak_rss_bytes']} > 1.1 x file size {size}: weights were copied")
        rss_inspect, ri = _max_rss_time_v([winml, "inspect", "-m", p, "-f", "json"])
        if ri is not None:
            assert ri.returncode == 0, U.describe(ri)
        msg = (f"external: inline {size} B model (mkbig {t_mk:.1f} s): touch data_bytes={t['data_bytes']} "
               f"peak_rss={t['peak_rss_bytes']} ({t['peak_rss_bytes'] / size:.3f} x file); ")
        if rss_inspect is None:
            msg += "/usr/bin/time missing: no inspect RSS figure"
        else:
            msg += f"winml inspect max RSS {rss_inspect} B ({rss_inspect / 2**20:.1f} MiB)"
        U.note(msg)
        if rss_inspect is not None:
            assert rss_inspect < 64 << 20, f"inspect must not read the weights: max RSS {rss_inspect}"
        info = json.loads(ri.stdout) if ri is not None else U.inspect_json(winml, p)
        assert info["parameter_bytes"] == INLINE // 4 * 4 and info["external_data"] == []
        # ORT agrees with the values onnx reads (both in a child process: GBs)
        w0 = child("w0", str(p), "777", "0")
        y = child("gather", str(p), "777", "0")
        assert y["777"]["Y0"][1] == w0["777"] and y["0"]["Y0"][1] == w0["0"]
    finally:
        os.unlink(p)


# --------------------------------------------------------------------------- small models, --external always


def small_model():
    rng = np.random.default_rng(7)
    W1 = rng.standard_normal((256, 256)).astype(np.float32)  # 256 KiB -> external
    B1 = rng.standard_normal(256).astype(np.float32)  # exactly 1024 B -> external
    S = np.array([0.5], dtype=np.float32)  # 4 B -> inline
    K = rng.standard_normal(255).astype(np.float32)  # 1020 B -> inline
    U8 = rng.integers(0, 255, 1023).astype(np.uint8)  # 1023 B -> inline
    H = rng.standard_normal(1000).astype(np.float16)  # 2000 B raw -> external
    C = rng.standard_normal(256).astype(np.float32)
    Q = rng.integers(-100, 100, 2000).astype(np.int8)
    I32 = rng.integers(-1000, 1000, 300).astype(np.int32)
    inits = [
        numpy_helper.from_array(W1, "W1"), numpy_helper.from_array(B1, "B1"), numpy_helper.from_array(S, "S"),
        numpy_helper.from_array(K, "K"), numpy_helper.from_array(U8, "U8"), numpy_helper.from_array(H, "H"),
        # typed fields: int32 in int32_data has the raw layout (may move); int8 in int32_data does not (stays)
        helper.make_tensor("I32", TensorProto.INT32, [300], I32.tolist()),
        helper.make_tensor("Q", TensorProto.INT8, [2000], Q.tolist()),
        helper.make_tensor("STR", TensorProto.STRING, [3], [b"x" * 600, b"y" * 600, b"z"]),
    ]
    nodes = [
        helper.make_node("MatMul", ["X", "W1"], ["m"]),
        helper.make_node("Add", ["m", "B1"], ["h"]),
        helper.make_node("Mul", ["h", "S"], ["h2"]),
        # attribute tensor given as float_data, 1024 B
        helper.make_node("Constant", [], ["Cc"], value=helper.make_tensor("Cv", TensorProto.FLOAT, [256], C.tolist())),
        helper.make_node("Add", ["h2", "Cc"], ["Y"]),
        helper.make_node("Identity", ["K"], ["YK"]),
        helper.make_node("Identity", ["U8"], ["YU8"]),
        helper.make_node("Identity", ["H"], ["YH"]),
        helper.make_node("Identity", ["I32"], ["YI32"]),
        helper.make_node("Identity", ["Q"], ["YQ"]),
        helper.make_node("Identity", ["STR"], ["YSTR"]),
    ]
    outs = [helper.make_tensor_value_info(n, dt, shape) for n, dt, shape in [
        ("Y", TensorProto.FLOAT, [4, 256]), ("YK", TensorProto.FLOAT, [255]), ("YU8", TensorProto.UINT8, [1023]),
        ("YH", TensorProto.FLOAT16, [1000]), ("YI32", TensorProto.INT32, [300]), ("YQ", TensorProto.INT8, [2000]),
        ("YSTR", TensorProto.STRING, [3])]]
    g = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 256])], outs,
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="oracle")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def all_tensors(model):
    """(where, TensorProto) for initializers and attribute tensors, subgraphs included."""
    out = []

    def graph(g, pre):
        for t in g.initializer:
            out.append((pre + "init:" + t.name, t))
        for s in g.sparse_initializer:
            out.append((pre + "sparse_values:" + s.values.name, s.values))
            out.append((pre + "sparse_indices:" + s.values.name, s.indices))
        for i, n in enumerate(g.node):
            for a in n.attribute:
                if a.HasField("t"):
                    out.append((f"{pre}node{i}.{a.name}", a.t))
                for k, t in enumerate(a.tensors):
                    out.append((f"{pre}node{i}.{a.name}[{k}]", t))
                if a.HasField("g"):
                    graph(a.g, f"{pre}node{i}.{a.name}/")
                for k, sg in enumerate(a.graphs):
                    graph(sg, f"{pre}node{i}.{a.name}[{k}]/")

    graph(model.graph, "")
    return out


def arrays_equal(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind in "fc":
        return np.array_equal(a.view(np.uint8) if a.size else a, b.view(np.uint8) if b.size else b)
    return np.array_equal(a, b)


RAW_LAYOUT_FIELD = {TensorProto.FLOAT: ("float_data", 4), TensorProto.COMPLEX64: ("float_data", 4),
                    TensorProto.INT32: ("int32_data", 4), TensorProto.INT64: ("int64_data", 8),
                    TensorProto.DOUBLE: ("double_data", 8), TensorProto.COMPLEX128: ("double_data", 8),
                    TensorProto.UINT64: ("uint64_data", 8)}


def tensor_span_bytes(t):
    """Bytes of the tensor when its data is one raw-layout span (raw_data, or a typed field whose
    element layout is the dtype's); -1 otherwise (strings, int8 in int32_data ...)."""
    if t.data_type == TensorProto.STRING:
        return -1
    if t.HasField("raw_data"):
        return len(t.raw_data)
    f = RAW_LAYOUT_FIELD.get(t.data_type)
    if f and len(getattr(t, f[0])):
        return len(getattr(t, f[0])) * f[1]
    return -1


def check_external_always(testtool, src, out):
    """Round trip src -> out with --external always; returns list of problems."""
    bad = []
    r = U.run([testtool, "roundtrip", src, out, "--external", "always"], timeout=120)
    if r.returncode != 0:
        return [f"{src}: roundtrip --external always exit {r.returncode}: {r.stderr.strip()}"], 0
    base = os.path.basename(out)
    data = out + ".data"
    orig = onnx.load(src)
    raw = onnx.load(out, load_external_data=False)
    ta, tb = all_tensors(orig), all_tensors(raw)
    if [w for w, _ in ta] != [w for w, _ in tb]:
        return [f"{src}: tensor list differs"], 0
    n_ext = 0
    for (w, a), (_, b) in zip(ta, tb):
        nbytes = tensor_span_bytes(a)
        if b.data_location == TensorProto.EXTERNAL:
            n_ext += 1
            e = ext_info(b)
            if e.get("location") != base + ".data" or int(e.get("offset", "0")) % ALIGN:
                bad.append(f"{src}: {w}: bad external_data {e}")
            if int(e.get("length", "-1")) < 1024:
                bad.append(f"{src}: {w}: a tensor under 1 KiB went external ({e})")
            if b.raw_data or b.float_data or b.int32_data or b.int64_data or b.double_data or b.uint64_data:
                bad.append(f"{src}: {w}: external tensor still has inline data")
        else:
            if b != a:
                bad.append(f"{src}: {w}: inline tensor changed")
            if nbytes >= 1024:
                bad.append(f"{src}: {w}: a tensor of {nbytes} B stayed inline under --external always")
    if n_ext and not os.path.exists(data):
        bad.append(f"{src}: no data file")
    if not n_ext and os.path.exists(data):
        bad.append(f"{src}: a data file was written though no tensor moved")
    full = onnx.load(out)  # load_external_data=True
    for (w, a), (_, r), (_, b) in zip(ta, tb, all_tensors(full)):
        if r.data_location != TensorProto.EXTERNAL:
            if b != a:
                bad.append(f"{src}: {w}: inline tensor changed")
            continue
        if a.data_type == TensorProto.STRING:
            if list(a.string_data) != list(b.string_data):
                bad.append(f"{src}: {w}: strings differ")
            continue
        try:
            if not arrays_equal(numpy_helper.to_array(a), numpy_helper.to_array(b)):
                bad.append(f"{src}: {w}: values differ after loading the external data")
        except Exception as ex:
            bad.append(f"{src}: {w}: to_array failed: {ex}")
    return bad, n_ext


def test_external_always_small(testtool, tmp_path):
    src = tmp_path / "small.onnx"
    onnx.save(small_model(), str(src))
    out = tmp_path / "o.onnx"
    bad, n_ext = check_external_always(testtool, str(src), str(out))
    assert not bad, "\n".join(bad)
    raw = onnx.load(str(out), load_external_data=False)
    loc = {t.name: t.data_location for t in raw.graph.initializer}
    E, D = TensorProto.EXTERNAL, TensorProto.DEFAULT
    assert loc == {"W1": E, "B1": E, "S": D, "K": D, "U8": D, "H": E, "I32": E, "Q": D, "STR": D}, loc
    const = raw.graph.node[3].attribute[0].t
    assert const.data_location == E and ext_info(const)["length"] == "1024"
    assert n_ext == 5
    onnx.checker.check_model(str(out))
    # ORT gives the same outputs for both
    x = np.random.default_rng(3).standard_normal((4, 256)).astype(np.float32)
    ya = ort_run(src, tmp_path, X=x)
    yb = ort_run(out, tmp_path, X=x)
    assert list(ya) == list(yb) and len(ya) == 7
    for k in ya:
        assert ya[k].dtype == yb[k].dtype and np.array_equal(ya[k], yb[k]), k
    # data file layout: offsets 4 KiB aligned, no overlaps, the file ends with the last tensor
    exts = sorted((int(ext_info(t)["offset"]), int(ext_info(t)["length"]))
                  for _, t in all_tensors(raw) if t.data_location == E)
    for (o1, l1), (o2, _) in zip(exts, exts[1:]):
        assert o1 + l1 <= o2
    assert os.path.getsize(str(out) + ".data") == exts[-1][0] + exts[-1][1]
    # and back inline: --external never restores a model equal to the original's values
    back = tmp_path / "back.onnx"
    r = U.run([testtool, "roundtrip", out, back, "--external", "never"])
    assert r.returncode == 0, U.describe(r)
    assert not (tmp_path / "back.onnx.data").exists()
    bm = onnx.load(str(back), load_external_data=False)
    assert all(t.data_location != E for _, t in all_tensors(bm))
    for (w, a), (_, b) in zip(all_tensors(onnx.load(str(src))), all_tensors(bm)):
        if a.data_type != TensorProto.STRING:
            assert arrays_equal(numpy_helper.to_array(a), numpy_helper.to_array(b)), w
    yc = ort_run(back, tmp_path, X=x)
    for k in ya:
        assert np.array_equal(ya[k], yc[k]), k


def test_touch_checksum_small(testtool, tmp_path):
    """touch reads the right bytes: its checksum equals one computed here from the data file."""
    src = tmp_path / "small.onnx"
    onnx.save(small_model(), str(src))
    out = tmp_path / "o.onnx"
    r = U.run([testtool, "roundtrip", src, out, "--external", "always"])
    assert r.returncode == 0, U.describe(r)
    for p in (src, out):
        r = U.run([testtool, "touch", p])
        assert r.returncode == 0, U.describe(r)
        t = json.loads(r.stdout)
        m = onnx.load(str(p))
        h, nb = 0, 0
        M = (1 << 64) - 1
        # wm_testtool's visit order: initializers, then attribute tensors, in node order
        for _, tp in all_tensors(m):
            if tp.data_type == TensorProto.STRING:
                continue
            if tp.HasField("raw_data"):
                b = tp.raw_data
            elif tp.data_type in (TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64, TensorProto.DOUBLE,
                                  TensorProto.UINT64):
                b = numpy_helper.to_array(tp).tobytes()
            else:
                continue  # int8 in int32_data etc.: no raw span
            for i in range(0, len(b), 61):
                h = (h * 31 + b[i]) & M
            nb += len(b)
        assert t["data_bytes"] == nb, (p, t, nb)
        assert t["checksum"] == h, (p, t, h)


def test_external_always_suite(testtool, tmp_path):
    """Suite models with tensors: --external always moves those of >= 1 KiB (few in the suites),
    keeps the others inline (no data file when none moves), values stay equal."""
    picked, big = [], 0
    for p in U.debian_models() + U.wheel_models():
        ts = all_tensors(onnx.load(p))
        if ts:
            picked.append(p)
            big += any(tensor_span_bytes(t) >= 1024 for _, t in ts)
    assert len(picked) > 100 and big >= 5, (len(picked), big)
    bad, moved, models_moved = [], 0, 0
    for i, p in enumerate(picked):
        o = str(tmp_path / f"m{i}.onnx")
        b, n = check_external_always(testtool, p, o)
        for f in (o, o + ".data"):
            if os.path.exists(f):
                os.unlink(f)
        bad += b
        moved += n
        models_moved += n > 0
    assert models_moved == big, (models_moved, big)
    U.note(f"external: --external always on {len(picked)} suite models with tensors: {moved} tensors of "
           f"{models_moved} models moved out, {len(bad)} problems")
    assert not bad, "\n".join(bad[:50])
