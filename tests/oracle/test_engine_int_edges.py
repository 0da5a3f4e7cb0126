"""Integer ops at their edges and Cast of NaN/inf/out-of-range floats (src/ops/int_math.h).

Every integer element type through Add, Sub, Mul, Div, Mod (fmod 0 and 1), Pow, Max, Min, BitShift, Abs and Neg
on all pairs of edge values (0, +-1, +-2, 3, +-7, MIN, MIN+1, MAX, MAX-1): the engine (tests/tools/wm_run) must give
the defined results, computed here in Python's unbounded integers (two's-complement wrap, truncating division,
x / 0 = x % 0 = 0, MIN / -1 = MIN, MIN % -1 = 0, shifts by >= the width give 0). onnxruntime must agree with the
same reference wherever its own result is defined on x86: it traps (SIGFPE) on x / 0 and MIN / -1 and computes Pow
in double (inexact past 2^53, the "integer indefinite" value on overflow), so those inputs are left out of its feed
(only), and an op it
does not implement for a type is checked against the reference alone. Cast from float32, float64 and float16 to
every integer type and bool is compared with onnxruntime on NaN, +-inf, huge and fractional values (float16 ->
uint32 differs on NaN and -inf only: onnxruntime converts float16 through int64 there, see int_math.h).

End to end with the ASan+UBSan binary: the small models that died by SIGFPE (INT64_MIN / -1 folded by
`winml optimize`, in the optimizer's shape values, and int32/int64 Div and Mod through `winml perf --input-data`)
now exit 0 with the defined values; a Range over 1e30 floats by 1e-30 and a Pad by INT64_MIN/INT64_MAX exit 2
with a message naming the node."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import save_file

import engine_util as E
import oracle_util as U

import onnxruntime as ort  # the oracle venv has it: missing is a failure, not a skip

TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


def bits(dt):
    return np.dtype(dt).itemsize * 8


def signed(dt):
    return np.issubdtype(dt, np.signedinteger)


def wrap(v, dt):
    b = bits(dt)
    v &= (1 << b) - 1
    if signed(dt) and v >> (b - 1):
        v -= 1 << b
    return v


def edges(dt):
    i = np.iinfo(dt)
    vals = {wrap(v, dt) for v in (0, 1, 2, 3, 7, -1, -2, -7, i.min, i.min + 1, i.max, i.max - 1)}
    return sorted(vals)


def tdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def ref(op, a, b, dt):
    """The defined result of one element (Python integers; a, b as values of dt)."""
    if op == "Add":
        return wrap(a + b, dt)
    if op == "Sub":
        return wrap(a - b, dt)
    if op == "Mul":
        return wrap(a * b, dt)
    if op == "Div":
        return 0 if b == 0 else wrap(tdiv(a, b), dt)
    if op == "Mod":
        return 0 if b == 0 else wrap(a % b, dt)  # Python's %: the divisor's sign (fmod = 0)
    if op == "FMod":
        return 0 if b == 0 else wrap(a - b * tdiv(a, b), dt)  # the dividend's sign (fmod = 1)
    if op == "Pow":
        if b < 0:
            return 1 if a == 1 else (1 if b % 2 == 0 else wrap(-1, dt)) if a == -1 else 0
        return wrap(pow(a, b, 1 << 64), dt)
    if op == "Max":
        return max(a, b)
    if op == "Min":
        return min(a, b)
    if op == "Shl":
        return 0 if b >= bits(dt) or b < 0 else wrap(a << b, dt)
    if op == "Shr":  # arithmetic for a signed type (outside ONNX), the count clamped to width - 1
        if signed(dt):
            return a >> (bits(dt) - 1 if b < 0 or b >= bits(dt) else b)
        return 0 if b >= bits(dt) else a >> b
    if op == "Abs":
        return wrap(abs(a), dt)
    if op == "Neg":
        return wrap(-a, dt)
    raise ValueError(op)


def ort_defined(op, a, b, dt):
    """Whether onnxruntime's x86 result for these operands is defined (no trap, no indefinite value)."""
    i = np.iinfo(dt)
    if op in ("Div", "Mod", "FMod"):
        return b != 0 and not (signed(dt) and a == i.min and b == -1)
    if op == "Pow":  # it computes std::pow in double: exact while operands and result stay within 2^53
        if abs(b) > 2 ** 53 or abs(a) > 2 ** 53:
            return False
        if b < 0:
            return a != 0
        return abs(a) <= 1 or abs(a) ** min(b, 200) <= 2 ** 53
    return True


def model(op, dt, unary=False, attrs=None):
    tp = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    onnx_op = {"FMod": "Mod", "Shl": "BitShift", "Shr": "BitShift"}.get(op, op)
    kw = dict(attrs or {})
    if op == "FMod":
        kw["fmod"] = 1
    if op in ("Shl", "Shr"):
        kw["direction"] = "LEFT" if op == "Shl" else "RIGHT"
    ins = ["x"] if unary else ["x", "y"]
    g = helper.make_graph([helper.make_node(onnx_op, ins, ["z"], **kw)], "g",
                          [helper.make_tensor_value_info(n, tp, [None]) for n in ins],
                          [helper.make_tensor_value_info("z", tp, [None])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m


def ort_try(path, feeds):
    """onnxruntime's outputs, or None when it has no kernel for this op and type (or the ONNX spec has not the type
    for the op: the engine serves every integer type)."""
    try:
        return E.ort_run(path, feeds)
    except Exception as e:
        if any(k in str(e) for k in ("NOT_IMPLEMENTED", "Could not find an implementation", "Type Error")):
            return None
        raise


BINARY = ["Add", "Sub", "Mul", "Div", "Mod", "FMod", "Pow", "Max", "Min", "Shl", "Shr"]


@pytest.mark.parametrize("dt", TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("op", BINARY)
def test_binary_edges(build_dir, tmp_path, op, dt):
    ev = edges(dt)
    pairs = [(a, b) for a in ev for b in ev]
    x = np.array([a for a, _ in pairs], dtype=dt)
    y = np.array([b for _, b in pairs], dtype=dt)
    path = tmp_path / "m.onnx"
    onnx.save(model(op, dt), path)
    ours, _ = E.engine_run(build_dir, path, {"x": x, "y": y}, tmp_path)
    want = np.array([ref(op, a, b, dt) for a, b in pairs], dtype=object)
    got = ours["z"]
    assert got.dtype == np.dtype(dt)
    bad = [(a, b, int(g), w) for (a, b), g, w in zip(pairs, got, want) if int(g) != w]
    assert not bad, f"{op} {np.dtype(dt).name}: (x, y, engine, defined) {bad[:8]}"
    keep = [k for k, (a, b) in enumerate(pairs) if ort_defined(op, a, b, dt)]
    theirs = ort_try(path, {"x": x[keep], "y": y[keep]})
    if theirs is not None:  # onnxruntime agrees with the definition wherever it has one
        diff = [(pairs[k], int(t), want[k]) for k, t in zip(keep, theirs["z"]) if int(t) != want[k]]
        assert not diff, f"onnxruntime {op} {np.dtype(dt).name}: (x, y), ort, defined {diff[:8]}"


@pytest.mark.parametrize("dt", TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("op", ["Abs", "Neg"])
def test_unary_edges(build_dir, tmp_path, op, dt):
    x = np.array(edges(dt), dtype=dt)
    path = tmp_path / "m.onnx"
    onnx.save(model(op, dt, unary=True), path)
    ours, _ = E.engine_run(build_dir, path, {"x": x}, tmp_path)
    want = [ref(op, int(a), 0, dt) for a in x]
    assert [int(v) for v in ours["z"]] == want, f"{op} {np.dtype(dt).name}"
    theirs = ort_try(path, {"x": x})
    if theirs is not None:
        assert [int(v) for v in theirs["z"]] == want, f"onnxruntime {op} {np.dtype(dt).name}"


CAST_SRC = [np.nan, -np.nan, np.inf, -np.inf, 1e20, -1e20, 3e9, -3e9, 300.7, -300.7, 70000.5, -70000.5, 5e9, -5e9,
            1.9e19, -1.0, -0.5, 0.0, -0.0, 2.0 ** 63, 2.0 ** 64, 4294967301.0, 1e-40, 65504.0, -65504.0]
CAST_TO = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.bool_]


@pytest.mark.parametrize("src", [np.float32, np.float64, np.float16], ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("to", CAST_TO, ids=lambda t: np.dtype(t).name)
def test_cast_special_values(build_dir, tmp_path, src, to):
    with np.errstate(over="ignore"):
        x = np.array(CAST_SRC, dtype=src)
    tp_in = helper.np_dtype_to_tensor_dtype(np.dtype(src))
    tp_out = helper.np_dtype_to_tensor_dtype(np.dtype(to))
    g = helper.make_graph([helper.make_node("Cast", ["x"], ["z"], to=tp_out)], "g",
                          [helper.make_tensor_value_info("x", tp_in, [None])],
                          [helper.make_tensor_value_info("z", tp_out, [None])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    path = tmp_path / "cast.onnx"
    onnx.save(m, path)
    ours, _ = E.engine_run(build_dir, path, {"x": x}, tmp_path)
    theirs = E.ort_run(path, {"x": x})
    keep = np.ones(len(x), dtype=bool)
    if src == np.float16 and to == np.uint32:  # onnxruntime goes through int64 here: NaN, -inf -> 0 (int_math.h)
        keep = ~(np.isnan(x) | (x == -np.inf))
    assert np.array_equal(ours["z"][keep], theirs["z"][keep]), (
        f"Cast {np.dtype(src).name} -> {np.dtype(to).name}: {list(zip(x[keep], ours['z'][keep], theirs['z'][keep]))}")
    if to == np.int32:  # the integer indefinite value, as x86 gives it
        assert ours["z"][0] == np.iinfo(np.int32).min and ours["z"][2] == np.iinfo(np.int32).min


# ---------------------------------------------------------------- end to end, hostile inputs (ASan+UBSan binary)

I64 = np.iinfo(np.int64)


def save_model(path, nodes, inits, ins, outs, opset=17):
    g = helper.make_graph(nodes, "g", ins, outs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def test_optimize_folds_min_div_minus_one(winml_asan, tmp_path):
    """Div(INT64_MIN, -1) of constants (a 117-byte model) died by SIGFPE in `winml optimize`; it folds to MIN."""
    m = save_model(tmp_path / "div.onnx", [helper.make_node("Div", ["a", "b"], ["c"]),
                                             helper.make_node("Add", ["c", "x"], ["y"])],
                   [numpy_helper.from_array(np.array([I64.min], np.int64), "a"),
                    numpy_helper.from_array(np.array([-1], np.int64), "b")],
                   [helper.make_tensor_value_info("x", TensorProto.INT64, [1])],
                   [helper.make_tensor_value_info("y", TensorProto.INT64, [1])])
    assert os.path.getsize(m) < 200
    out = tmp_path / "out.onnx"
    r = U.run([winml_asan, "optimize", "-m", m, "-o", out, "-q"])
    assert not U.crashed(r) and r.returncode == 0, U.describe(r)
    g = onnx.load(out).graph
    assert [n.op_type for n in g.node] == ["Add"]
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    assert consts[g.node[0].input[0]].tolist() == [I64.min]


def test_optimize_shape_values_divide_as_the_engine(winml_asan, tmp_path):
    """Concat([MIN], [7]) / [-1, -2] feeding a Reshape: the optimizer's shape values trapped on MIN / -1."""
    m = save_model(tmp_path / "sv.onnx", [helper.make_node("Concat", ["a", "s"], ["c"], axis=0),
                                            helper.make_node("Div", ["c", "b"], ["d"]),
                                            helper.make_node("Reshape", ["x", "d"], ["y"])],
                   [numpy_helper.from_array(np.array([I64.min], np.int64), "a"),
                    numpy_helper.from_array(np.array([-1, -2], np.int64), "b"),
                    numpy_helper.from_array(np.array([7], np.int64), "s")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    out = tmp_path / "out.onnx"
    r = U.run([winml_asan, "optimize", "-m", m, "-o", out, "-q"])
    assert not U.crashed(r) and r.returncode == 0, U.describe(r)
    g = onnx.load(out).graph
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    shape = [consts[n.input[1]] for n in g.node if n.op_type == "Reshape"][0]
    assert shape.tolist() == [I64.min, -3]  # truncating, as the engine's Div (it floored to -4)


@pytest.mark.parametrize("dt", [np.int32, np.int64], ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("op", ["Div", "Mod"])
def test_perf_input_data_min_by_minus_one(winml_asan, tmp_path, op, dt):
    """`winml perf --input-data` with x = [MIN, 7, MIN], y = [-1, 0, 0]: SIGFPE before; now exit 0."""
    tp = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    m = save_model(tmp_path / "m.onnx", [helper.make_node(op, ["x", "y"], ["z"])], [],
                   [helper.make_tensor_value_info("x", tp, [3]), helper.make_tensor_value_info("y", tp, [3])],
                   [helper.make_tensor_value_info("z", tp, [3])])
    mn = np.iinfo(dt).min
    feeds = tmp_path / "in.safetensors"
    save_file({"x": np.array([mn, 7, mn], dt), "y": np.array([-1, 0, 0], dt)}, str(feeds))
    r = U.run([winml_asan, "perf", "-m", m, "--iterations", "1", "--warmup", "0", "--threads", "1",
               "--input-data", feeds])
    assert not U.crashed(r) and r.returncode == 0, U.describe(r)


def test_range_of_1e30_floats_is_an_error(winml_asan, tmp_path):
    m = save_model(tmp_path / "range.onnx", [helper.make_node("Range", ["a", "b", "d"], ["y"], name="rng")],
                   [numpy_helper.from_array(np.array(0, np.float32), "a"),
                    numpy_helper.from_array(np.array(1e30, np.float32), "b"),
                    numpy_helper.from_array(np.array(1e-30, np.float32), "d")],
                   [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    r = U.run([winml_asan, "perf", "-m", m, "--iterations", "1", "--warmup", "0", "--threads", "1"])
    U.assert_clean_error(r, "winml perf", "'rng'", "too many elements")


def test_pad_by_int64_extremes_is_an_error(winml_asan, tmp_path):
    m = save_model(tmp_path / "pad.onnx", [helper.make_node("Pad", ["x", "p"], ["y"], name="pad")],
                   [numpy_helper.from_array(np.array([I64.min, I64.max], np.int64), "p")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    r = U.run([winml_asan, "perf", "-m", m, "--iterations", "1", "--warmup", "0", "--threads", "1"])
    U.assert_clean_error(r, "winml perf", "'pad'", "crop more")
