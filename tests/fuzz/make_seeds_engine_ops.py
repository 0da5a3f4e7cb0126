#!/usr/bin/env python3
"""Writes the seeds of fuzz_engine_ops (tests/fuzz/seeds/engine_ops/*.bin): small graphs of the ops and edge values
the target is about (integer Div/Mod by -1 and 0 at the minimum, Pow overflow, Abs(MIN), Cast of NaN/inf, Slice, Pad,
Range, Tile, reductions, shape values...), in the byte layout fuzz_engine_ops.c decodes. The element types, attribute
names and strings are read from that file's tables, so a seed keeps its meaning when they grow.

    python3 tests/fuzz/make_seeds_engine_ops.py
"""
import os
import re
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = open(os.path.join(HERE, "fuzz_engine_ops.c")).read()


def table(name):
    body = re.search(r"%s\[\] = \{(.*?)\};" % re.escape(name), SRC, re.S).group(1)
    return body


DTYPES = re.findall(r"WM_DT_(\w+)", table("DTYPES"))
ATTRS = re.findall(r'\{"(\w+)", A_\w+\}', table("ATTRS"))
STRINGS = re.findall(r'"([^"]*)"', table("STRINGS"))
FLOATS = [x.strip() for x in table("V").replace("\n", " ").split(",")]
DIMS = [int(x) for x in re.findall(r"-?\d+", table("D"))]

# value classes of int_value() (by the switch's case labels) and float_value() (by the V table)
I = {"0": 0, "1": 1, "-1": 2, "2": 3, "3": 4, "-2": 5, "min": 6, "max": 7, "min+1": 8, "max-1": 9, "4": 10, "5": 11,
     "i32min": 12, "i32max": 13, "2^31": 14, "2^62": 15, "-2^62": 16, "7": 17, "-7": 18, "64": 19, "6": 23,
     "12": 27, "13": 28}
TO = {"INT32": I["6"], "UINT64": I["13"], "INT8": I["3"], "UINT32": I["12"]}  # ONNX element type codes
F = {v: i for i, v in enumerate(FLOATS)}


def fv(text):
    return F[text]


def dt(name):
    return DTYPES.index(name)


def tensor(dtype, dims, classes):
    """A new tensor: [dtype][rank][dim classes...][value classes...]."""
    out = [dt(dtype), len(dims)] + [DIMS.index(d) for d in dims]
    n = 1
    for d in dims:
        n *= d
    assert len(classes) == n, (dims, classes)
    return out + list(classes)


def attr(name, kind_byte=0, values=(), string=None):
    """[name][kind (0: the table's kind)][count][values] (+ [string] for strings)."""
    out = [ATTRS.index(name), kind_byte, len(values)] + list(values)
    if string is not None:
        out.append(STRINGS.index(string))
    return out


def node(op, inputs, n_out=1, attrs=()):
    """inputs: ("in", tensor), ("const", tensor), ("prev", k) or ("none",)."""
    out = [0xFF, 0xFF] + list(op.encode()) + [0, len(inputs), n_out - 1, len(attrs)]
    for kind, *rest in inputs:
        if kind == "prev":
            out += [2, rest[0]]
        elif kind == "none":
            out += [3]
        else:
            out += [0 if kind == "in" else 1] + rest[0]
            if kind == "in":
                out += [1] * rest[0][1]  # a run-time input: each dim declared (one byte per dim)
    for a in attrs:
        out += a
    return out


def graph(nodes, opset_bits=0, no_fold=False, no_opt=False):
    flags = opset_bits | (8 if no_fold else 0) | (16 if no_opt else 0)
    body = [flags, len(nodes) - 1]
    for n in nodes:
        body += n
    return bytes(body)


SEEDS = {}
for d in ("INT32", "INT64", "INT8", "UINT64"):
    edge = [I["min"], I["7"], I["min"], I["-7"]]
    by = [I["-1"], I["0"], I["0"], I["2"]]
    for op in ("Div", "Mod"):
        SEEDS["%s_%s_run" % (op.lower(), d.lower())] = graph([node(op, [("in", tensor(d, [4], edge)),
                                                                        ("in", tensor(d, [4], by))])])
        SEEDS["%s_%s_fold" % (op.lower(), d.lower())] = graph([node(op, [("const", tensor(d, [4], edge)),
                                                                         ("const", tensor(d, [4], by))]),
                                                                node("Identity", [("prev", 0)])])
SEEDS["fmod_int64"] = graph([node("Mod", [("const", tensor("INT64", [2], [I["min"], I["-7"]])),
                                          ("const", tensor("INT64", [2], [I["-1"], I["0"]]))],
                                  attrs=[attr("fmod", values=[I["1"]])]), node("Identity", [("prev", 0)])])
SEEDS["pow_int32"] = graph([node("Pow", [("in", tensor("INT32", [3], [I["3"], I["-2"], I["0"]])),
                                         ("in", tensor("INT32", [3], [I["64"], I["i32max"], I["-1"]]))])])
SEEDS["pow_int64_float"] = graph([node("Pow", [("in", tensor("INT64", [2], [I["2"], I["0"]])),
                                               ("in", tensor("FLOAT", [2], [fv("1e60"), fv("-1.0")]))])])
SEEDS["abs_neg_min"] = graph([node("Abs", [("in", tensor("INT64", [2], [I["min"], I["max"]]))]),
                              node("Neg", [("prev", 0)])])
for d in ("INT32", "UINT64", "INT8", "UINT32"):
    SEEDS["cast_float_%s" % d.lower()] = graph([node("Cast", [("in", tensor("FLOAT", [4], [fv("NAN"), fv("INFINITY"),
                                                                                          fv("-FLT_MAX"), fv("300.7")]))],
                                                     attrs=[attr("to", values=[TO[d]])])])
    SEEDS["cast_double_%s_fold" % d.lower()] = graph([node("Cast", [("const", tensor("DOUBLE", [3], [fv("1e60"), fv("NAN"),
                                                                                                   fv("-1e30")]))],
                                                           attrs=[attr("to", values=[TO[d]])]),
                                                      node("Identity", [("prev", 0)])])
# MoE: 2 rows of 4, 2 experts, interleaved SwiGLU with inner size 2 (fc1 [2, 4, 4], fc2 [2, 4, 2]); a NaN logit
SEEDS["moe_swiglu"] = graph([node("com.microsoft:MoE", [
    ("in", tensor("FLOAT", [2, 4], [fv("1.0"), fv("-1.0"), fv("0.5"), fv("300.7")] * 2)),
    ("in", tensor("FLOAT", [2, 2], [fv("NAN"), fv("1.0"), fv("-1.0"), fv("1.0")])),
    ("const", tensor("FLOAT", [2, 4, 4], [fv("0.5"), fv("-1.0")] * 16)), ("none",),
    ("const", tensor("FLOAT", [2, 4, 2], [fv("1.0"), fv("-FLT_MAX")] * 8))],
    attrs=[attr("k", values=[I["2"]]), attr("activation_type", string="swiglu"),
           attr("normalize_routing_weights", values=[I["1"]])])])
# QMoE: the same shape with 4-bit experts, a scale per row (fc1 [2, 4, 2] bytes, fc2 [2, 4, 1]); an infinite scale
SEEDS["qmoe_int4_rows"] = graph([node("com.microsoft:QMoE", [
    ("in", tensor("FLOAT", [2, 4], [fv("1.0"), fv("-1.0"), fv("0.5"), fv("300.7")] * 2)),
    ("in", tensor("FLOAT", [2, 2], [fv("NAN"), fv("1.0"), fv("-1.0"), fv("1.0")])),
    ("const", tensor("UINT8", [2, 4, 2], [I["7"], I["max"]] * 8)),
    ("const", tensor("FLOAT", [2, 4], [fv("0.5"), fv("INFINITY")] * 4)), ("none",),
    ("const", tensor("UINT8", [2, 4, 1], [I["64"], I["0"]] * 4)),
    ("const", tensor("FLOAT", [2, 4], [fv("1.0"), fv("-FLT_MAX")] * 4))],
    attrs=[attr("k", values=[I["2"]]), attr("activation_type", string="swiglu"),
           attr("expert_weight_bits", values=[I["4"]]), attr("normalize_routing_weights", values=[I["1"]])])])
SEEDS["pad_extremes"] = graph([node("Pad", [("in", tensor("FLOAT", [2], [fv("1.0"), fv("2.0")])),
                                            ("const", tensor("INT64", [2], [I["min"], I["max"]]))])], opset_bits=2)
SEEDS["slice_extremes"] = graph([node("Slice", [("in", tensor("INT64", [5], [0, 1, 3, 4, 10])),
                                                ("const", tensor("INT64", [1], [I["max"]])),
                                                ("const", tensor("INT64", [1], [I["min"]])),
                                                ("const", tensor("INT64", [1], [I["0"]])),
                                                ("const", tensor("INT64", [1], [I["min"]]))])])
SEEDS["range_float_huge"] = graph([node("Range", [("const", tensor("FLOAT", [], [fv("0.0")])),
                                                  ("const", tensor("FLOAT", [], [fv("1e60")])),
                                                  ("const", tensor("FLOAT", [], [fv("1.0")]))])])
SEEDS["range_int64_extremes"] = graph([node("Range", [("in", tensor("INT64", [], [I["min"]])),
                                                      ("in", tensor("INT64", [], [I["max"]])),
                                                      ("in", tensor("INT64", [], [I["2^62"]]))])])
SEEDS["tile_huge"] = graph([node("Tile", [("in", tensor("FLOAT", [2], [fv("1.0"), fv("NAN")])),
                                          ("const", tensor("INT64", [1], [I["max"]]))])])
SEEDS["reduce_int64"] = graph([node("ReduceSum", [("in", tensor("INT64", [3], [I["max"], I["1"], I["min"]]))]),
                               node("ReduceProd", [("in", tensor("INT32", [2], [I["i32max"], I["i32min"]]))])])
SEEDS["cumsum_int64"] = graph([node("CumSum", [("in", tensor("INT64", [2], [I["max"], I["max"]])),
                                               ("const", tensor("INT64", [], [I["0"]]))])])
SEEDS["bitshift_uint64"] = graph([node("BitShift", [("in", tensor("UINT64", [3], [I["1"], I["max"], I["7"]])),
                                                    ("in", tensor("UINT64", [3], [I["64"], I["max"], I["0"]]))],
                                       attrs=[attr("direction", string="LEFT")])])
SEEDS["onehot_nan"] = graph([node("OneHot", [("in", tensor("FLOAT", [2], [fv("NAN"), fv("-INFINITY")])),
                                             ("const", tensor("INT64", [1], [I["3"]])),
                                             ("const", tensor("FLOAT", [2], [fv("0.0"), fv("1.0")]))])])
SEEDS["shape_div"] = graph([node("Shape", [("in", tensor("FLOAT", [2], [fv("1.0"), fv("2.0")]))]),
                            node("Concat", [("prev", 0), ("const", tensor("INT64", [1], [I["min"]]))],
                                 attrs=[attr("axis", values=[I["0"]])]),
                            node("Div", [("prev", 1), ("const", tensor("INT64", [2], [I["-2"], I["-1"]]))]),
                            node("Reshape", [("in", tensor("FLOAT", [2], [fv("1.0"), fv("2.0")])), ("prev", 2)])])
SEEDS["expand_shape"] = graph([node("Expand", [("in", tensor("FLOAT", [1], [fv("1.0")])),
                                               ("const", tensor("INT64", [2], [I["2^62"], I["0"]]))])])
SEEDS["gather_min_index"] = graph([node("Gather", [("in", tensor("FLOAT", [3], [fv("1.0")] * 3)),
                                                   ("in", tensor("INT64", [2], [I["min"], I["-1"]]))])])
SEEDS["topk_k"] = graph([node("TopK", [("in", tensor("FLOAT", [4], [fv("NAN"), fv("1.0"), fv("-INFINITY"), fv("0.0")])),
                                       ("const", tensor("INT64", [1], [I["max"]]))], n_out=2)])
SEEDS["trilu_k"] = graph([node("Trilu", [("in", tensor("FLOAT", [2, 2], [fv("1.0")] * 4)),
                                         ("const", tensor("INT64", [], [I["min"]]))])])
SEEDS["resize_scales"] = graph([node("Resize", [("in", tensor("FLOAT", [1, 2], [fv("1.0"), fv("2.0")])),
                                                ("none",),
                                                ("const", tensor("FLOAT", [2], [fv("INFINITY"), fv("NAN")]))])])
SEEDS["maxpool_dilation"] = graph([node("MaxPool", [("in", tensor("FLOAT", [1, 1, 2], [fv("1.0"), fv("2.0")]))],
                                        attrs=[attr("kernel_shape", values=[I["2^62"]]),
                                               attr("dilations", values=[I["max"]])])])
SEEDS["d2s_blocksize"] = graph([node("DepthToSpace", [("in", tensor("FLOAT", [1, 1, 1, 1], [fv("1.0")]))],
                                     attrs=[attr("blocksize", values=[I["2^31"]])])])
SEEDS["clip_sign_int8"] = graph([node("Clip", [("in", tensor("INT8", [3], [I["min"], I["max"], I["0"]])),
                                               ("const", tensor("INT8", [], [I["max"]])),
                                               ("const", tensor("INT8", [], [I["min"]]))]),
                                 node("Sign", [("prev", 0)])])
SEEDS["constantofshape"] = graph([node("ConstantOfShape", [("const", tensor("INT64", [3], [I["0"], I["2^62"],
                                                                                          I["2^62"]]))]),
                                  node("Transpose", [("prev", 0)])])

if __name__ == "__main__":
    out = os.path.join(HERE, "seeds", "engine_ops")
    os.makedirs(out, exist_ok=True)
    for name, data in sorted(SEEDS.items()):
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(data)
    print("%d seeds in %s" % (len(SEEDS), out))
