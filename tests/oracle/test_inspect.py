"""`winml inspect -f json` against what the onnx Python package computes independently,
and the CLI conventions (help, version, -o FILE, usage errors, `winml sys`)."""
import json
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import oracle_util as U
from oracle_util import debian_models, wheel_models

# --------------------------------------------------------------------------- the oracle

# ONNX TensorProto.DataType -> (name winml uses, bits per element); strings count 0 bytes.
_SPECIAL_NAMES = {"FLOAT": "float32", "DOUBLE": "float64"}
_BITS = {
    "UNDEFINED": 0, "FLOAT": 32, "UINT8": 8, "INT8": 8, "UINT16": 16, "INT16": 16, "INT32": 32, "INT64": 64,
    "STRING": 0, "BOOL": 8, "FLOAT16": 16, "DOUBLE": 64, "UINT32": 32, "UINT64": 64, "COMPLEX64": 64,
    "COMPLEX128": 128, "BFLOAT16": 16, "FLOAT8E4M3FN": 8, "FLOAT8E4M3FNUZ": 8, "FLOAT8E5M2": 8,
    "FLOAT8E5M2FNUZ": 8, "UINT4": 4, "INT4": 4, "FLOAT4E2M1": 4, "FLOAT8E8M0": 8, "UINT2": 2, "INT2": 2,
}


def dtype_name(dt):
    try:
        n = TensorProto.DataType.Name(dt)
    except ValueError:
        return "unknown"
    return _SPECIAL_NAMES.get(n, n.lower())


def dtype_bits(dt):
    try:
        return _BITS.get(TensorProto.DataType.Name(dt), 0)
    except ValueError:
        return 0


def type_str(t):
    """winml's text form of a non-tensor TypeProto: seq(...), optional(...), map(k,v), float32[1,N,?]."""
    if t is None:
        return "?"
    kind = t.WhichOneof("value")
    if kind in ("sequence_type", "optional_type"):
        e = getattr(t, kind)
        inner = type_str(e.elem_type) if e.HasField("elem_type") else "?"
        return f"{'seq' if kind == 'sequence_type' else 'optional'}({inner})"
    if kind == "map_type":
        inner = type_str(t.map_type.value_type) if t.map_type.HasField("value_type") else "?"
        return f"map({dtype_name(t.map_type.key_type)},{inner})"
    if kind in ("tensor_type", "sparse_tensor_type"):
        tt = getattr(t, kind)
        s = ("sparse " if kind == "sparse_tensor_type" else "") + dtype_name(tt.elem_type)
        if tt.HasField("shape"):
            dims = []
            for d in tt.shape.dim:
                dims.append(d.dim_param if d.HasField("dim_param") else
                            str(d.dim_value) if d.HasField("dim_value") else "?")
            s += "[" + ",".join(dims) + "]"
        return s
    return "opaque" if kind == "opaque_type" else "?"


def io_expected(values, init_names):
    out = []
    for v in values:
        if v.name in init_names:
            continue
        t = v.type if v.HasField("type") else None
        kind = t.WhichOneof("value") if t is not None else None
        if kind in ("tensor_type", "sparse_tensor_type"):
            tt = getattr(t, kind)
            if tt.HasField("shape"):
                shape = [d.dim_param if d.HasField("dim_param") else d.dim_value if d.HasField("dim_value") else None
                         for d in tt.shape.dim]
            else:
                shape = None
            out.append({"name": v.name, "dtype": dtype_name(tt.elem_type), "shape": shape})
        else:
            out.append({"name": v.name, "dtype": type_str(t), "shape": None})
    return out


def subgraph_nodes(graph):
    n = 0
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("g"):
                n += len(a.g.node) + subgraph_nodes(a.g)
            for g in a.graphs:
                n += len(g.node) + subgraph_nodes(g)
    return n


def numel(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def expected(model):
    g = model.graph
    init_names = {t.name for t in g.initializer}
    ops = {}
    for node in g.node:
        key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"
        ops[key] = ops.get(key, 0) + 1
    by = {}
    count = nbytes = 0
    for t in list(g.initializer) + [s.values for s in g.sparse_initializer if s.HasField("values")]:
        n = numel(t.dims)
        b = (n * dtype_bits(t.data_type) + 7) // 8
        e = by.setdefault(dtype_name(t.data_type), {"tensors": 0, "count": 0, "bytes": 0})
        e["tensors"] += 1
        e["count"] += n
        e["bytes"] += b
        count += n
        nbytes += b
    return {
        "format": "onnx",
        "ir_version": model.ir_version,
        "producer_name": model.producer_name,
        "producer_version": model.producer_version,
        "opset_imports": {(o.domain or "ai.onnx"): o.version for o in model.opset_import},
        "inputs": io_expected(g.input, init_names),
        "outputs": io_expected(g.output, set()),
        "node_count": len(g.node),
        "subgraph_node_count": subgraph_nodes(g),
        "op_counts": ops,
        "initializer_count": len(g.initializer),
        "sparse_initializer_count": len(g.sparse_initializer),
        "parameter_count": count,
        "parameter_bytes": nbytes,
        "parameters_by_dtype": by,
        "external_data": [],
        "function_count": len(model.functions),
        "metadata": {p.key: p.value for p in model.metadata_props},
    }


def compare(path, got, exp):
    """List of 'field: got X, expected Y' strings."""
    bad = []
    for k, v in exp.items():
        if k not in got:
            bad.append(f"{path}: key {k!r} missing")
        elif got[k] != v:
            bad.append(f"{path}: {k}: got {json.dumps(got[k])[:300]}, expected {json.dumps(v)[:300]}")
    return bad


# --------------------------------------------------------------------------- hand-built models


def _vi(name, dt, shape):
    return helper.make_tensor_value_info(name, dt, shape)


def rich_model():
    """Symbolic/unknown dims, many initializer dtypes, an initializer that is also a graph input,
    a com.microsoft node, a node with domain 'ai.onnx', an If with subgraphs, a sparse initializer,
    a function, metadata."""
    rng = np.random.default_rng(1)
    inits = [
        numpy_helper.from_array(rng.standard_normal((3, 4)).astype(np.float32), "W_f32"),
        numpy_helper.from_array(rng.standard_normal((2, 8)).astype(np.float16), "W_f16"),
        numpy_helper.from_array(rng.integers(-128, 127, (5,)).astype(np.int8), "W_i8"),
        numpy_helper.from_array(np.array(7, dtype=np.int64), "S_i64"),  # scalar: numel 1
        numpy_helper.from_array(rng.integers(0, 9, (4, 3)).astype(np.int64), "W_i64"),
        numpy_helper.from_array(rng.standard_normal((2, 2)).astype(np.float64), "W_f64"),
        numpy_helper.from_array(np.array([True, False, True]), "W_bool"),
        helper.make_tensor("W_bf16", TensorProto.BFLOAT16, [3], [1.0, 2.0, 3.0]),
        helper.make_tensor("W_i4", TensorProto.INT4, [5], [1, -2, 3, -4, 5]),  # 5 nibbles -> 3 bytes
        helper.make_tensor("W_f32_typed", TensorProto.FLOAT, [2, 3], [1, 2, 3, 4, 5, 6]),  # float_data, no raw
        helper.make_tensor("W_str", TensorProto.STRING, [2], [b"ab", b"cde"]),
        numpy_helper.from_array(np.zeros((0, 4), dtype=np.float32), "W_empty"),
    ]
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.5, -2.0, 3.25], dtype=np.float32), "SP"),
        numpy_helper.from_array(np.array([1, 5, 9], dtype=np.int64), "SP_idx"),
        [3, 4])
    then_g = helper.make_graph(
        [helper.make_node("Identity", ["X"], ["t0"]), helper.make_node("Relu", ["t0"], ["t1"])],
        "then_g", [], [_vi("t1", TensorProto.FLOAT, None)])
    inner_if = helper.make_node("If", ["c"], ["e1"],
                                then_branch=helper.make_graph([helper.make_node("Neg", ["X"], ["n0"])], "ti", [],
                                                              [_vi("n0", TensorProto.FLOAT, None)]),
                                else_branch=helper.make_graph([helper.make_node("Abs", ["X"], ["a0"])], "ei", [],
                                                              [_vi("a0", TensorProto.FLOAT, None)]))
    else_g = helper.make_graph([inner_if], "else_g", [], [_vi("e1", TensorProto.FLOAT, None)])
    nodes = [
        helper.make_node("MatMul", ["X", "W_f32"], ["m0"]),
        helper.make_node("FusedMatMul", ["m0", "B"], ["fm"], domain="com.microsoft", alpha=1.0, transA=0),
        helper.make_node("Relu", ["fm"], ["r0"], domain="ai.onnx"),
        helper.make_node("Relu", ["r0"], ["r1"]),
        helper.make_node("If", ["c"], ["y_if"], then_branch=then_g, else_branch=else_g),
        helper.make_node("MyFunc", ["r1"], ["f0"], domain="local.fn"),
        helper.make_node("Cast", ["W_i8"], ["cast0"], to=TensorProto.FLOAT),
    ]
    fn = helper.make_function("local.fn", "MyFunc", ["x"], ["y"], [helper.make_node("Neg", ["x"], ["y"])],
                              [helper.make_opsetid("", 17)])
    g = helper.make_graph(
        nodes, "rich",
        [_vi("X", TensorProto.FLOAT, ["batch", "seq", 3]),
         _vi("B", TensorProto.FLOAT, [4, None]),  # unknown dim -> null
         _vi("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("noshape", TensorProto.FLOAT16, None),
         helper.make_tensor_sequence_value_info("seqin", TensorProto.FLOAT, [2, "k"]),
         helper.make_value_info("opt_in", helper.make_optional_type_proto(
             helper.make_tensor_type_proto(TensorProto.INT32, [1]))),
         _vi("W_f32", TensorProto.FLOAT, [3, 4])],  # an initializer listed as input: not an input
        [_vi("y_if", TensorProto.FLOAT, ["batch", "seq", 4]), _vi("f0", TensorProto.FLOAT, None),
         _vi("cast0", TensorProto.FLOAT, [5])],
        initializer=inits, sparse_initializer=[sparse])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1),
                                            helper.make_opsetid("local.fn", 1)],
                          producer_name="oracle-test", producer_version="9.8.7", functions=[fn])
    m.ir_version = 8
    helper.set_model_props(m, {"author": "me", "license": "MIT", "unicode": "ünïcødé ✓", "empty": ""})
    return m


def small_models():
    """A few more edge shapes: no opset for ai.onnx, no producer, initializer-only graph."""
    out = {}
    m = helper.make_model(helper.make_graph([helper.make_node("Add", ["a", "k"], ["y"])], "g",
                                            [_vi("a", TensorProto.INT32, ["n"])], [_vi("y", TensorProto.INT32, ["n"])],
                                            [numpy_helper.from_array(np.arange(6, dtype=np.uint16), "k")]),
                          opset_imports=[helper.make_opsetid("ai.onnx.ml", 3), helper.make_opsetid("", 21)])
    out["ml_opset"] = m
    m2 = helper.make_model(helper.make_graph([], "empty", [], []))
    out["empty_graph"] = m2
    return out


# --------------------------------------------------------------------------- tests


def test_inspect_suite_models(winml):
    """All suite models: every field equals the onnx package's view."""
    paths = debian_models() + wheel_models()
    assert len(paths) > 1000
    bad = []
    for p in paths:
        r = U.run([winml, "inspect", "-m", p, "-f", "json"])
        if r.returncode != 0:
            bad.append(f"{p}: exit {r.returncode}: {r.stderr.strip()}")
            continue
        bad += compare(p, json.loads(r.stdout), expected(onnx.load(p)))
    U.note(f"inspect: {len(paths)} suite models compared, {len(bad)} mismatches")
    assert not bad, "\n".join(bad[:60])


@pytest.mark.parametrize("name", ["rich", "ml_opset", "empty_graph"])
def test_inspect_built_models(winml, tmp_path, name):
    m = rich_model() if name == "rich" else small_models()[name]
    p = tmp_path / f"{name}.onnx"
    onnx.save(m, str(p))
    got = U.inspect_json(winml, p)
    exp = expected(onnx.load(str(p)))
    assert not compare(str(p), got, exp), "\n".join(compare(str(p), got, exp))
    if name == "rich":
        # spot checks written out by hand so the oracle itself is checked too
        assert got["opset_imports"] == {"ai.onnx": 17, "com.microsoft": 1, "local.fn": 1}
        assert got["op_counts"] == {"MatMul": 1, "com.microsoft:FusedMatMul": 1, "Relu": 2, "If": 1,
                                    "local.fn:MyFunc": 1, "Cast": 1}
        assert got["node_count"] == 7 and got["subgraph_node_count"] == 2 + 1 + 2
        names = [i["name"] for i in got["inputs"]]
        assert names == ["X", "B", "c", "noshape", "seqin", "opt_in"]
        assert got["inputs"][0]["shape"] == ["batch", "seq", 3]
        assert got["inputs"][1]["shape"] == [4, None]
        assert got["inputs"][2]["shape"] == []
        assert got["inputs"][3] == {"name": "noshape", "dtype": "float16", "shape": None}
        assert got["inputs"][4] == {"name": "seqin", "dtype": "seq(float32[2,k])", "shape": None}
        assert got["inputs"][5] == {"name": "opt_in", "dtype": "optional(int32[1])", "shape": None}
        by = got["parameters_by_dtype"]
        assert by["float16"] == {"tensors": 1, "count": 16, "bytes": 32}
        assert by["int8"] == {"tensors": 1, "count": 5, "bytes": 5}
        assert by["int4"] == {"tensors": 1, "count": 5, "bytes": 3}
        assert by["int64"] == {"tensors": 2, "count": 13, "bytes": 104}
        # float32: W_f32 12 + W_f32_typed 6 + W_empty 0 + sparse values 3
        assert by["float32"] == {"tensors": 4, "count": 21, "bytes": 84}
        assert got["initializer_count"] == 12 and got["sparse_initializer_count"] == 1
        assert got["function_count"] == 1
        assert got["metadata"] == {"author": "me", "license": "MIT", "unicode": "ünïcødé ✓", "empty": ""}
        assert got["producer_name"] == "oracle-test" and got["producer_version"] == "9.8.7"
        assert got["ir_version"] == 8


def test_inspect_output_file(winml, tmp_path):
    p = tmp_path / "rich.onnx"
    onnx.save(rich_model(), str(p))
    out = tmp_path / "res.json"
    r = U.run([winml, "inspect", "-m", p, "-f", "json", "-o", out])
    assert r.returncode == 0, U.describe(r)
    assert out.read_text() == r.stdout
    json.loads(r.stdout)
    # -o with the table view: the file still gets the JSON, stdout the table
    out2 = tmp_path / "res2.json"
    r2 = U.run([winml, "inspect", "-m", p, "-o", out2])
    assert r2.returncode == 0, U.describe(r2)
    assert out2.read_text() == r.stdout
    assert r2.stdout and not r2.stdout.lstrip().startswith("{")
    assert not U.leftovers(tmp_path)
    # the table view mentions what matters
    for s in ("com.microsoft:FusedMatMul", "float16", "batch", "author"):
        assert s in r2.stdout, f"table view lacks {s!r}:\n{r2.stdout}"


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["inspect", "--help"], ["sys", "--help"],
                                  ["help"]])
def test_help_version(winml, argv):
    r = U.run([winml, *argv])
    assert r.returncode == 0, U.describe(r)
    assert r.stdout.strip(), U.describe(r)
    if argv == ["--version"]:
        assert r.stdout.startswith("winml ") and len(r.stdout.strip().splitlines()) == 1


@pytest.mark.parametrize("case", ["unknown_flag", "missing_m", "missing_file", "unknown_format", "missing_value",
                                  "extra_arg", "unknown_command", "folder", "not_onnx", "empty"])
def test_usage_errors(winml, tmp_path, case):
    good = tmp_path / "m.onnx"
    onnx.save(small_models()["ml_opset"], str(good))
    (tmp_path / "junk.onnx").write_bytes(b"\xff\xff\xff\xff this is not protobuf")
    (tmp_path / "empty.onnx").write_bytes(b"")
    argv, needles = {
        "unknown_flag": (["inspect", "-m", good, "--bogus"], ["--bogus"]),
        "missing_m": (["inspect", "-f", "json"], ["-m"]),
        "missing_file": (["inspect", "-m", tmp_path / "nope.onnx", "-f", "json"], ["nope.onnx"]),
        "unknown_format": (["inspect", "-m", good, "-f", "yaml"], ["yaml"]),
        "missing_value": (["inspect", "-m"], ["-m"]),
        "extra_arg": (["inspect", "-m", good, "stray"], ["stray"]),
        "unknown_command": (["frobnicate"], ["frobnicate"]),
        "folder": (["inspect", "-m", tmp_path, "-f", "json"], [str(tmp_path)]),
        "not_onnx": (["inspect", "-m", tmp_path / "junk.onnx", "-f", "json"], ["junk.onnx"]),
        "empty": (["inspect", "-m", tmp_path / "empty.onnx", "-f", "json"], ["empty.onnx"]),
    }[case]
    prog = "winml" if case == "unknown_command" else "winml inspect"
    r = U.run([winml, *argv])
    U.assert_clean_error(r, prog, *needles)
    assert ": error: " in r.stderr


def test_no_arguments(winml):
    r = U.run([winml])
    assert r.returncode == 2 and r.stdout == "" and "usage" in r.stderr.lower(), U.describe(r)


def test_sys_json(winml):
    r = U.run([winml, "sys", "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    s = json.loads(r.stdout)
    flags = U.read_cpuinfo_flags()
    assert flags, "/proc/cpuinfo has no flags line"
    feats = s["cpu"]["features"]
    # features whose /proc/cpuinfo flag has the same name
    for f in ("avx2", "avx", "fma", "f16c", "sse4_2", "bmi2", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
              "avx512_bf16", "avx_vnni"):
        if f in feats:
            assert feats[f] == (f in flags), f"cpu.features.{f}={feats[f]} but /proc/cpuinfo says {f in flags}"
    assert "avx2" in feats
    total = U.read_proc_meminfo_total()
    got = s["memory"]["total_bytes"]
    assert abs(got - total) <= max(total // 100, 64 << 20), f"memory.total_bytes {got} vs /proc/meminfo {total}"
    assert 0 < s["memory"]["available_bytes"] <= got
    assert s["cpu"]["logical_cores"] == os.cpu_count()
    r2 = U.run([winml, "sys"])
    assert r2.returncode == 0 and r2.stdout.strip(), U.describe(r2)
