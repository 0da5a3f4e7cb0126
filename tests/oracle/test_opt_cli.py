"""winml optimize as a command: pass listing, report formats, usage and input errors (exit 2, one line, no output)."""
import json
import os

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import oracle_util as U


def small(path):
    n = [h.make_node("Identity", ["x"], ["a"]), h.make_node("Relu", ["a"], ["y"])]
    g = h.make_graph(n, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)


def test_list_passes(winml):
    r = U.run([winml, "optimize", "--list-passes", "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    passes = json.loads(r.stdout)["passes"]
    names = [p["name"] for p in passes]
    for want in ("constant_folding", "dead_nodes", "layernorm", "rmsnorm", "skiplayernorm", "gelu", "fastgelu",
                 "biasgelu", "quickgelu", "gemm", "rotary", "attention", "gqa", "common_subexpression",
                 "initializer_dedup", "shape_arithmetic", "identity_elimination", "matmul_epilogue"):
        assert want in names
    assert {p["level"] for p in passes} == {"basic", "extended", "all", "engine"}
    assert [p["name"] for p in passes if p["level"] == "engine"] == ["matmul_epilogue", "conv_activation",
                                                                     "matmul_transpose", "matmul_group", "nhwc_layout"]
    r = U.run([winml, "optimize", "-l"])
    assert r.returncode == 0 and "layernorm" in r.stdout


def test_table_and_report(winml, tmp_path):
    src, dst, rep = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx"), str(tmp_path / "rep.json")
    small(src)
    r = U.run([winml, "optimize", "-m", src, "-o", dst, "--report", rep])
    assert r.returncode == 0, U.describe(r)
    assert "nodes: 2 -> 1" in r.stdout
    data = json.load(open(rep))
    assert data["report"]["nodes_before"] == 2 and data["report"]["nodes_after"] == 1
    assert data["report"]["ops_after"] == {"Relu": 1}
    ident = next(p for p in data["report"]["passes"] if p["name"] == "identity_elimination")
    assert ident["fired"] == 1 and ident["ops_delta"] == {"Identity": -1}
    onnx.checker.check_model(onnx.load(dst))
    r = U.run([winml, "optimize", "-m", src, "-o", dst, "-f", "json"])
    assert r.returncode == 0 and json.loads(r.stdout)["output"] == dst


def test_optimize_errors(winml, tmp_path):
    src, out = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    small(src)
    for args, needle in ((["--enable-nope"], "nope"), (["--disable-x"], "--disable-x"), (["--level", "max"], "max"),
                         (["--bogus"], "--bogus"), (["--fold-max-bytes", "x"], "fold-max-bytes")):
        r = U.run([winml, "optimize", "-m", src, "-o", out, *args])
        U.assert_clean_error(r, "winml optimize", needle)
        assert not os.path.exists(out)
    # without -o: the reference's default IN_opt.onnx beside the input (test_reference_flags.py checks more)
    r = U.run([winml, "optimize", "-m", src, "-q"])
    assert r.returncode == 0 and os.path.isfile(tmp_path / "in_opt.onnx"), U.describe(r)
    U.assert_clean_error(U.run([winml, "optimize", "-o", out]), "winml optimize", "-m")
    U.assert_clean_error(U.run([winml, "optimize", "-m", str(tmp_path / "nope.onnx"), "-o", out]), "winml optimize",
                         "nope.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"\x3a\x05hello")
    U.assert_clean_error(U.run([winml, "optimize", "-m", str(tmp_path / "junk.onnx"), "-o", out]), "winml optimize",
                         "junk.onnx")
    assert not os.path.exists(out)


def test_hostile_graphs_do_not_crash(winml_asan, tmp_path):
    """Cycles, undefined inputs, wrong attribute types, bad shapes: a clean error or a valid model, never a crash."""
    out = str(tmp_path / "out.onnx")
    X = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
    Y = h.make_tensor_value_info("y", T.FLOAT, None)
    cases = {
        "cycle": [h.make_node("Relu", ["b"], ["a"]), h.make_node("Relu", ["a"], ["b"]), h.make_node("Add", ["x", "b"], ["y"])],
        "undefined": [h.make_node("Add", ["x", "ghost"], ["y"])],
        "bad_reshape": [h.make_node("Reshape", ["x", "s"], ["y"])],
        "bad_axes": [h.make_node("Unsqueeze", ["x", "ax"], ["u"]), h.make_node("Squeeze", ["u", "ax2"], ["y"])],
        "bad_softmax": [h.make_node("Softmax", ["x"], ["y"], axis=99)],
        "huge_const": [h.make_node("ConstantOfShape", ["big"], ["c"]), h.make_node("Add", ["x", "c"], ["y"])],
        "div_zero": [h.make_node("Div", ["i1", "i0"], ["q"]), h.make_node("Cast", ["q"], ["qf"], to=1),
                     h.make_node("Add", ["x", "qf"], ["y"])],
    }
    inits = [nh.from_array(np.array([7, 7], np.int64), "s"), nh.from_array(np.array([9], np.int64), "ax"),
             nh.from_array(np.array([-9], np.int64), "ax2"), nh.from_array(np.array([1 << 40, 1 << 40], np.int64), "big"),
             nh.from_array(np.array(1, np.int64), "i1"), nh.from_array(np.array(0, np.int64), "i0")]
    for name, nodes in cases.items():
        src = str(tmp_path / f"{name}.onnx")
        g = h.make_graph(nodes, "g", [X], [Y], inits)
        onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), src)
        r = U.run([winml_asan, "optimize", "-m", src, "-o", out])
        assert not U.crashed(r), name + "\n" + U.describe(r)
        assert r.returncode in (0, 2), name + "\n" + U.describe(r)
        if r.returncode == 2:
            U.assert_clean_error(r, "winml optimize")
        for p in ("fp16", "int8-dynamic", "int8", "int4"):
            r = U.run([winml_asan, "quantize", "-m", src, "-o", out, "-p", p])
            assert not U.crashed(r) and r.returncode in (0, 2), name + p + "\n" + U.describe(r)
