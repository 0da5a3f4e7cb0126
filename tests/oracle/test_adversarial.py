"""The adversarial ONNX corpus (items 1-9 of shared/facts/untrusted-input.md), crafted here.

Each hostile model is given to `winml inspect -m` and to `wm_testtool roundtrip IN OUT` (the
ASan+UBSan build when present). Each must exit 2 with exactly one stderr line
'<prog>: error: ...' that names the problem, print nothing on stdout, report nothing from a
sanitizer, and write no OUT file, data file or temporary file. Links that stay inside the model
folder, a checksum key, and offsets that end exactly at EOF must load (exit 0).
"""
import concurrent.futures as cf
import json
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import oracle_util as U

F16 = np.arange(4, dtype=np.float32).tobytes()  # the 16 bytes a float[4] tensor needs


# --------------------------------------------------------------------------- builders


def ext_tensor(loc, offset=None, length=None, dims=(4,), extra=(), dtype=TensorProto.FLOAT, name="W"):
    t = TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    kv = [] if loc is None else [("location", loc)]
    kv += [("offset", offset)] if offset is not None else []
    kv += [("length", length)] if length is not None else []
    kv += list(extra)
    for k, v in kv:
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def raw_tensor(dims, raw, dtype=TensorProto.FLOAT, name="W"):
    t = TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(dims)
    t.raw_data = raw
    return t


def model_with(t, where="initializer"):
    """A model whose tensor t sits as an initializer, a Constant attribute, a sparse initializer's
    values, or an initializer of an If subgraph."""
    out = helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)
    if where == "initializer":
        g = helper.make_graph([helper.make_node("Identity", [t.name], ["Y"])], "g", [], [out], [t])
    elif where == "constant":
        g = helper.make_graph([helper.make_node("Constant", [], ["Y"], value=t)], "g", [], [out])
    elif where == "sparse":
        idx = numpy_helper.from_array(np.array([0], dtype=np.int64), "idx")
        sp = helper.make_sparse_tensor(t, idx, [8])
        g = helper.make_graph([helper.make_node("Identity", [t.name], ["Y"])], "g", [], [out],
                              sparse_initializer=[sp])
    elif where == "subgraph":
        sub = helper.make_graph([helper.make_node("Identity", [t.name], ["s"])], "sub", [],
                                [helper.make_tensor_value_info("s", TensorProto.FLOAT, None)], [t])
        g = helper.make_graph([helper.make_node("If", ["c"], ["Y"], then_branch=sub, else_branch=sub)], "g",
                              [helper.make_tensor_value_info("c", TensorProto.BOOL, [])], [out])
    else:
        raise ValueError(where)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(field, payload):
    """A length-delimited field: tag, length, payload."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def nested_bytes(levels, chain):
    """ModelProto bytes nested `levels` times through the repeating field chain (list of field
    numbers, outermost first), built outside-in with O(n) work: every message holds one field."""
    headers = []
    inner = 0
    fields = [chain[i % len(chain)] for i in range(levels)]
    for f in reversed(fields):
        h = varint(f << 3 | 2) + varint(inner)
        headers.append(h)
        inner += len(h)
    return b"".join(reversed(headers))


def small_valid_model():
    """A few hundred bytes: an initializer, attributes of several kinds, value_info, metadata."""
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "W")
    nodes = [
        helper.make_node("MatMul", ["X", "W"], ["m"], name="mm"),
        helper.make_node("LeakyRelu", ["m"], ["r"], alpha=0.1, name="lr"),
        helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0], name="tr"),
        helper.make_node("Constant", [], ["k"], name="k",
                         value=numpy_helper.from_array(np.array([0.5], dtype=np.float32), "kv")),
        helper.make_node("Add", ["t", "k"], ["Y"], name="add", doc_string="adds k"),
    ]
    g = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n", 2])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3, "n"])], [w],
                          doc_string="a small model",
                          value_info=[helper.make_tensor_value_info("m", TensorProto.FLOAT, ["n", 3]),
                                      helper.make_tensor_value_info("t", TensorProto.FLOAT, [3, "n"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="adv")
    helper.set_model_props(m, {"k": "v"})
    onnx.checker.check_model(m)
    return m


# --------------------------------------------------------------------------- the corpus

# name -> (setup(folder) -> model bytes or ModelProto, needles, any_of)
# the model folder is tmp/m; tmp/outside holds real 16-byte files a naive loader would open.
CASES = {}


def case(name, needles=(), any_of=None, ok=False):
    def deco(fn):
        CASES[name] = (fn, tuple(needles), any_of, ok)
        return fn
    return deco


def _loc_case(name, loc, needles=None, any_of=None):
    @case(name, needles if needles is not None else ("location", loc), any_of)
    def _(m):
        return model_with(ext_tensor(loc))


# (1)-(3) locations that leave the folder
_loc_case("loc_dotdot_etc_passwd", "../../etc/passwd")
_loc_case("loc_dotdot_outside_existing", "../outside/w.bin")  # exists and has the right size
_loc_case("loc_sub_dotdot", "sub/../../x")
_loc_case("loc_sub_dotdot_deep", "sub/../sub/../../outside/w.bin")
_loc_case("loc_backslash_dotdot", "..\\outside\\w.bin")
_loc_case("loc_abs_etc_hosts", "/etc/hosts")
_loc_case("loc_windows_drive", "C:\\Windows\\win.ini")
_loc_case("loc_windows_drive_fwd", "C:/Windows/win.ini")
_loc_case("loc_windows_drive_relative", "c:win.ini")
_loc_case("loc_unc", "\\\\host\\share\\x")
_loc_case("loc_backslash_root", "\\etc\\hosts")
_loc_case("loc_empty", "", needles=("location",))
_loc_case("loc_trailing_dotdot", "sub/..", needles=("location", "sub/.."))


@case("loc_abs_outside_existing", ("location", "outside"), any_of=["absolute"])
def _(m):
    return model_with(ext_tensor(os.path.join(os.path.dirname(m), "outside", "w.bin")))


@case("loc_nul_byte", ("external_data",), any_of=["nul"])
def _(m):
    # protobuf string with an embedded NUL: 'w.bin\0../../etc/passwd'
    return model_with(ext_tensor("w.bin\x00../../etc/passwd"))


@case("loc_no_location", ("location",))
def _(m):
    return model_with(ext_tensor(None, offset="0", length="16"))


@case("loc_missing_file", ("location", "nope.bin"))
def _(m):
    return model_with(ext_tensor("nope.bin"))


# (4) links out of the folder
@case("symlink_file_outside", ("location", "w.bin"), any_of=["outside", "link"])
def _(m):
    os.symlink(os.path.join(os.path.dirname(m), "outside", "w.bin"), os.path.join(m, "w.bin"))
    return model_with(ext_tensor("w.bin"))


@case("symlink_file_outside_relative", ("location", "w.bin"), any_of=["outside", "link"])
def _(m):
    os.symlink("../outside/w.bin", os.path.join(m, "w.bin"))
    return model_with(ext_tensor("w.bin"))


@case("symlink_folder_outside", ("location", "sub/w.bin"), any_of=["outside", "link"])
def _(m):
    os.symlink(os.path.join(os.path.dirname(m), "outside"), os.path.join(m, "sub"))
    return model_with(ext_tensor("sub/w.bin"))


@case("symlink_chain_outside", ("location", "a.bin"), any_of=["outside", "link"])
def _(m):
    # a.bin -> b.bin (inside) -> ../outside/w.bin
    os.symlink("../outside/w.bin", os.path.join(m, "b.bin"))
    os.symlink("b.bin", os.path.join(m, "a.bin"))
    return model_with(ext_tensor("a.bin"))


@case("symlink_to_etc_passwd", ("location", "w.bin"), any_of=["outside", "link"])
def _(m):
    os.symlink("/etc/passwd", os.path.join(m, "w.bin"))
    return model_with(ext_tensor("w.bin", offset="0", length="16"))


@case("symlink_dangling", ("location", "w.bin"))
def _(m):
    os.symlink("gone.bin", os.path.join(m, "w.bin"))
    return model_with(ext_tensor("w.bin"))


@case("data_is_folder", ("sub",), any_of=["regular", "folder", "directory"])
def _(m):
    os.mkdir(os.path.join(m, "sub"))
    return model_with(ext_tensor("sub"))


@case("data_is_fifo", ("fifo.bin",), any_of=["regular", "fifo"])
def _(m):
    os.mkfifo(os.path.join(m, "fifo.bin"))  # opening it for reading must not block
    return model_with(ext_tensor("fifo.bin"))


# links that stay inside: must load
@case("symlink_inside_relative_ok", ok=True)
def _(m):
    with open(os.path.join(m, "real.bin"), "wb") as f:
        f.write(F16)
    os.symlink("real.bin", os.path.join(m, "link.bin"))
    return model_with(ext_tensor("link.bin"))


@case("symlink_inside_absolute_ok", ok=True)
def _(m):
    os.mkdir(os.path.join(m, "data"))
    with open(os.path.join(m, "data", "real.bin"), "wb") as f:
        f.write(F16)
    os.symlink(os.path.join(m, "data", "real.bin"), os.path.join(m, "link.bin"))
    return model_with(ext_tensor("link.bin"))


@case("symlink_inside_folder_ok", ok=True)
def _(m):
    os.mkdir(os.path.join(m, "data"))
    with open(os.path.join(m, "data", "w.bin"), "wb") as f:
        f.write(F16)
    os.symlink("data", os.path.join(m, "sub"))
    return model_with(ext_tensor("sub/w.bin"))


# (5) offsets and lengths (w.bin holds 16 bytes unless said otherwise)
def _off_case(name, offset, length, dims=(4,), size=16, needles=None, any_of=("offset", "length")):
    @case(name, needles or (), list(any_of))
    def _(m):
        with open(os.path.join(m, "w.bin"), "wb") as f:
            f.write(bytes(size))
        return model_with(ext_tensor("w.bin", offset=offset, length=length, dims=dims))


_off_case("off_2p64_minus_4096_len_8192", str(2**64 - 4096), "8192", dims=(2048,))
_off_case("off_2p64_minus_1", str(2**64 - 1), "16")
_off_case("off_2p64_overflow", str(2**64), "16", needles=("offset",))
_off_case("off_past_eof", "32", "16")
_off_case("off_at_eof_len", "16", "16")
_off_case("len_past_eof", "8", "16")
_off_case("off_no_len_short", "8", None, any_of=("offset", "length", "shape"))
_off_case("len_sum_overflow", "8", str(2**64 - 4), any_of=("length",))
_off_case("len_mismatch_shape", "0", "8", any_of=("length",))
for _i, _v in enumerate(["12abc", "-1", "+5", " 5", "5 ", "0x10", "", "1e3", "٣"]):
    _off_case(f"off_not_decimal_{_i}", _v, "16", needles=("offset",))
for _i, _v in enumerate(["-16", "16abc", "+16", " 16", "0x10"]):
    _off_case(f"len_not_decimal_{_i}", "0", _v, needles=("length",))


@case("off_len_exact_eof_ok", ok=True)
def _(m):
    with open(os.path.join(m, "w.bin"), "wb") as f:
        f.write(bytes(4096) + F16)
    return model_with(ext_tensor("w.bin", offset="4096", length="16"))


@case("ext_empty_tensor_at_eof_ok", ok=True)
def _(m):
    with open(os.path.join(m, "w.bin"), "wb") as f:
        f.write(F16)
    return model_with(ext_tensor("w.bin", offset="16", length="0", dims=(0,)))


# (6) shapes against bytes
_DIM_ANY = ["raw_data", "dims", "shape"]


@case("dims_2p40_raw_4", any_of=_DIM_ANY)
def _(m):
    return model_with(raw_tensor([2**40], b"\0" * 4))


@case("raw_shorter_than_shape", any_of=_DIM_ANY)
def _(m):
    return model_with(raw_tensor([10], b"\0" * 36))


@case("raw_longer_than_shape", any_of=_DIM_ANY)
def _(m):
    return model_with(raw_tensor([2], b"\0" * 12))


@case("dims_product_overflow", any_of=["dims"])
def _(m):
    return model_with(raw_tensor([2**32, 2**32, 2], b"\0" * 4))


@case("dims_bytes_overflow", any_of=_DIM_ANY + ["overflow"])
def _(m):
    return model_with(raw_tensor([2**62], b"\0" * 4))  # numel fits in 64 bits, numel*4 does not


@case("dims_negative", any_of=["dims", "negative"])
def _(m):
    return model_with(raw_tensor([-1], b"\0" * 4))


@case("dims_2p40_external_4", any_of=["length", "shape", "bytes"])
def _(m):
    with open(os.path.join(m, "w.bin"), "wb") as f:
        f.write(bytes(4))
    return model_with(ext_tensor("w.bin", offset="0", length="4", dims=(2**40,)))


@case("dims_2p40_external_nolen", any_of=["length", "shape", "bytes"])
def _(m):
    with open(os.path.join(m, "w.bin"), "wb") as f:
        f.write(bytes(4))
    return model_with(ext_tensor("w.bin", dims=(2**40,)))


@case("raw_short_in_constant", any_of=_DIM_ANY)
def _(m):
    return model_with(raw_tensor([2**40], b"\0" * 4), "constant")


@case("raw_short_in_sparse", any_of=_DIM_ANY)
def _(m):
    return model_with(raw_tensor([2**40], b"\0" * 4), "sparse")


@case("raw_short_in_subgraph", any_of=_DIM_ANY)
def _(m):
    return model_with(raw_tensor([2**40], b"\0" * 4), "subgraph")


@case("ext_location_in_subgraph", ("location", "../outside/w.bin"))
def _(m):
    return model_with(ext_tensor("../outside/w.bin"), "subgraph")


@case("string_with_raw", ("raw_data",))
def _(m):
    return model_with(raw_tensor([1], b"abcd", dtype=TensorProto.STRING))


@case("bad_data_type", ("data_type",))
def _(m):
    return model_with(raw_tensor([1], b"abcd", dtype=999))


@case("raw_and_external", ("raw_data",))
def _(m):
    with open(os.path.join(m, "w.bin"), "wb") as f:
        f.write(F16)
    t = ext_tensor("w.bin")
    t.raw_data = F16
    return model_with(t)


# (7) keys
@case("key_duplicate_location", ("duplicate", "location"))
def _(m):
    with open(os.path.join(m, "w.bin"), "wb") as f:
        f.write(F16)
    return model_with(ext_tensor("w.bin", extra=[("location", "../outside/w.bin")]))


@case("key_duplicate_offset", ("duplicate", "offset"))
def _(m):
    with open(os.path.join(m, "w.bin"), "wb") as f:
        f.write(F16)
    return model_with(ext_tensor("w.bin", offset="0", extra=[("offset", "4")]))


@case("key_unknown", ("unknown", "basepath"))
def _(m):
    with open(os.path.join(m, "w.bin"), "wb") as f:
        f.write(F16)
    return model_with(ext_tensor("w.bin", extra=[("basepath", "/etc")]))


@case("key_empty", ("unknown",))
def _(m):
    with open(os.path.join(m, "w.bin"), "wb") as f:
        f.write(F16)
    return model_with(ext_tensor("w.bin", extra=[("", "x")]))


@case("key_checksum_ok", ok=True)
def _(m):
    with open(os.path.join(m, "w.bin"), "wb") as f:
        f.write(F16)
    return model_with(ext_tensor("w.bin", offset="0", length="16", extra=[("checksum", "0" * 40)]))


@case("ext_entries_not_external", ("external_data",))
def _(m):
    t = raw_tensor([4], F16)
    e = t.external_data.add()
    e.key, e.value = "location", "../../etc/passwd"
    return model_with(t)


# (8) wire format: nesting and lengths
@case("nested_100000_attr_graph", ("nested",))
def _(m):
    # ModelProto.graph(7) { GraphProto.node(1) { NodeProto.attribute(5) { AttributeProto.g(6) { node ... } } } }
    return ld(7, nested_bytes(100_000 - 1, [1, 5, 6]))


@case("nested_100000_type", ("nested",))
def _(m):
    # graph.input(11) ValueInfoProto.type(2) TypeProto.sequence_type(4) Sequence.elem_type(1) ...
    return ld(7, ld(11, ld(2, nested_bytes(100_000, [4, 1]))))


@case("nested_65_attr_graph", ("nested",))
def _(m):
    return ld(7, nested_bytes(66, [1, 5, 6]))


@case("length_past_file", ("length",))
def _(m):
    return varint(7 << 3 | 2) + varint(1000) + ld(1, b"")


@case("length_past_parent", ("length",))
def _(m):
    # graph of 4 bytes holds a node claiming 100 bytes; the file has plenty after the graph
    graph = varint(1 << 3 | 2) + varint(100) + b"\x0a\x00"
    return ld(7, graph) + ld(14, b"x" * 200)  # trailing bytes: a valid field (metadata_props) holds them


def read_varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def fields(b, start=0, end=None):
    """(field number, wire type, tag offset, payload offset, payload end) of one message's fields."""
    end = len(b) if end is None else end
    i, out = start, []
    while i < end:
        tag, j = read_varint(b, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            _, k = read_varint(b, j)
            out.append((num, wt, i, j, k))
        elif wt == 2:
            n, k = read_varint(b, j)
            out.append((num, wt, i, k, k + n))
            k += n
        elif wt == 1:
            k = j + 8
            out.append((num, wt, i, j, k))
        elif wt == 5:
            k = j + 4
            out.append((num, wt, i, j, k))
        else:
            raise ValueError(wt)
        i = k
    return out


def with_length(b, fld, new_len):
    """b with the length prefix of field fld (from fields()) replaced by new_len."""
    num, _, tag_at, pay_at, _ = fld
    hdr = varint(num << 3 | 2) + varint(new_len)
    return b[:tag_at] + hdr + b[pay_at:]


@case("length_hand_edit_graph", ("length",))
def _(m):
    # the graph's length prefix of a real model, raised to one byte past the end of the file
    b = small_valid_model().SerializeToString()
    g = [f for f in fields(b) if f[0] == 7][0]
    return with_length(b, g, len(b) - g[3] + 1)


@case("length_hand_edit_initializer", ("length",))
def _(m):
    # the initializer inside the graph claims more than the graph holds (but less than the file)
    b = small_valid_model().SerializeToString()
    g = [f for f in fields(b) if f[0] == 7][0]
    init = [f for f in fields(b, g[3], g[4]) if f[0] == 5][0]
    left_in_graph = g[4] - init[3]
    assert len(b) - init[3] > left_in_graph + 1  # the file has the bytes; the parent does not
    edited = with_length(b, init, left_in_graph + 1)
    # keep the graph's own prefix consistent with its new size
    grown = len(edited) - len(b)
    return with_length(edited, g, g[4] - g[3] + grown)


@case("length_2p63", ("length",))
def _(m):
    return varint(7 << 3 | 2) + varint(2**63) + b"\0" * 16


@case("length_max_varint", ("length",))
def _(m):
    return varint(7 << 3 | 2) + b"\xff" * 9 + b"\x01" + b"\0" * 16


@case("varint_11_bytes", any_of=["varint", "10 bytes"])
def _(m):
    return b"\x08" + b"\x80" * 10 + b"\x01" + ld(7, b"")


@case("tag_11_bytes", any_of=["varint", "10 bytes", "tag"])
def _(m):
    return b"\x80" * 10 + b"\x01" + ld(7, b"")


@case("group_wire_type", any_of=["group", "wire"])
def _(m):
    return ld(7, b"") + varint(3 << 3 | 3) + varint(3 << 3 | 4)


@case("invalid_wire_type", any_of=["wire"])
def _(m):
    return ld(7, b"") + varint(5 << 3 | 7) + b"\0"


@case("field_number_zero", any_of=["field"])
def _(m):
    return ld(7, b"") + b"\x02\x00"


@case("packed_float_ragged", any_of=["packed", "multiple"])
def _(m):
    # TensorProto.float_data(4) packed with 6 bytes
    t = ld(8, b"W") + varint(2 << 3 | 0) + varint(1) + ld(4, b"\0" * 6)
    return ld(7, ld(5, t))


@case("truncated_fixed32", any_of=["truncated", "32-bit"])
def _(m):
    # AttributeProto.f(2) fixed32 with 2 bytes left
    return ld(7, ld(1, ld(5, ld(1, b"a") + varint(2 << 3 | 5) + b"\0\0")))


@case("string_with_nul", any_of=["nul"])
def _(m):
    return ld(2, b"prod\0ucer") + ld(7, b"")


@case("no_graph", ("graph",))
def _(m):
    return varint(1 << 3) + varint(8)  # ir_version only


@case("empty_file", ("empty",))
def _(m):
    return b""


@case("over_2gib_model", any_of=["2^31-1", "limit"])
def _(m):
    return "SPARSE_2GIB"  # a sparse file of 2^31 bytes (costs no disk)


# --------------------------------------------------------------------------- running


def _prepare(tmp_path, name):
    fn, needles, any_of, ok = CASES[name]
    m = tmp_path / "m"
    m.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "w.bin").write_bytes(F16)
    (tmp_path / "x").write_bytes(F16)
    if name in ("loc_sub_dotdot", "loc_sub_dotdot_deep"):
        (m / "sub").mkdir()
    # names a loader that treats Windows paths as plain names would happily open
    for odd in ("C:\\Windows\\win.ini", "\\\\host\\share\\x", "c:win.ini", "\\etc\\hosts"):
        (m / odd).write_bytes(F16)
    res = fn(str(m))
    path = m / "model.onnx"
    if isinstance(res, onnx.ModelProto):
        path.write_bytes(res.SerializeToString())
    elif res == "SPARSE_2GIB":
        with open(path, "wb") as f:
            f.truncate(2**31)
    else:
        path.write_bytes(res)
    return path, needles, any_of, ok


def _files(d):
    out = []
    for root, dirs, files in os.walk(d):
        for f in files + [x for x in dirs if os.path.islink(os.path.join(root, x))]:
            out.append(os.path.relpath(os.path.join(root, f), d))
    return sorted(out)


@pytest.mark.parametrize("name", list(CASES))
def test_hostile(name, tmp_path, winml_asan, testtool_asan):
    path, needles, any_of, ok = _prepare(tmp_path, name)
    m = path.parent
    before = _files(m)
    outdir = tmp_path / "out"
    outdir.mkdir()
    out = outdir / "o.onnx"
    r1 = U.run([winml_asan, "inspect", "-m", path, "-f", "json"], timeout=15)
    r2 = U.run([testtool_asan, "roundtrip", path, out], timeout=15)
    try:
        if ok:
            for r in (r1, r2):
                assert not U.crashed(r) and r.returncode == 0, U.describe(r)
            info = json.loads(r1.stdout)
            assert info["external_data"] and info["external_data"][0]["size_bytes"] > 0
            # the copy holds the same bytes, inline (read here through the link, by hand)
            a = onnx.load(str(path), load_external_data=False)
            b = onnx.load(str(out))
            for ta, tb in zip(a.graph.initializer, b.graph.initializer):
                e = {kv.key: kv.value for kv in ta.external_data}
                with open(m / e["location"], "rb") as f:
                    f.seek(int(e.get("offset", "0")))
                    want = f.read(int(e["length"])) if "length" in e else f.read()
                assert tb.data_location != TensorProto.EXTERNAL and tb.raw_data == want
            assert _files(outdir) == ["o.onnx"], _files(outdir)
        else:
            for r, prog in ((r1, "winml inspect"), (r2, "wm_testtool")):
                line = U.assert_clean_error(r, prog, *needles, any_of=any_of)
                if name.startswith(("loc_", "symlink_")) and name not in ("loc_missing_file", "symlink_dangling"):
                    # refused by the path rules, not by a failed open of a missing file
                    assert "no such file" not in line.lower(), U.describe(r)
            assert _files(outdir) == [], f"output left behind: {_files(outdir)}"
        assert _files(m) == before, f"model folder changed: {sorted(set(_files(m)) - set(before))}"
    finally:
        if name == "over_2gib_model":
            os.unlink(path)


def test_fifo_model_file(tmp_path, winml_asan):
    """-m naming a FIFO must be refused, not block on open."""
    p = tmp_path / "model.onnx"
    os.mkfifo(p)
    r = U.run([winml_asan, "inspect", "-m", p, "-f", "json"], timeout=10)
    U.assert_clean_error(r, "winml inspect", "model.onnx", any_of=["regular", "fifo"])


def test_model_folder_argument(tmp_path, winml_asan, testtool_asan):
    r = U.run([winml_asan, "inspect", "-m", tmp_path, "-f", "json"])
    U.assert_clean_error(r, "winml inspect", any_of=["regular", "folder", "directory"])


def test_output_into_symlinked_folder(tmp_path, testtool_asan):
    """Writing: OUT whose data file would be a link out of the folder is refused, nothing written."""
    src = tmp_path / "src.onnx"
    m = small_valid_model()
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.zeros((2, 3), np.float32), "W"))
    onnx.save(m, str(src))
    outdir = tmp_path / "out"
    outdir.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere / "victim", outdir / "o.onnx.data")
    r = U.run([testtool_asan, "roundtrip", src, outdir / "o.onnx", "--external", "always", "--threshold", "0"])
    # the tensor is under 1 KiB so nothing moves out and the link is never touched: a clean success
    assert r.returncode == 0 and not U.crashed(r), U.describe(r)
    assert not os.path.exists(elsewhere / "victim")
    # a tensor >= 1 KiB must go to the data file, whose name is a dangling link out of the folder:
    # refusing, or replacing the link by a new file, are both fine; writing through it is not
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.ones((2, 300), np.float32), "W"))
    onnx.save(m, str(src))
    os.unlink(outdir / "o.onnx")
    r = U.run([testtool_asan, "roundtrip", src, outdir / "o.onnx", "--external", "always"])
    assert not U.crashed(r) and r.returncode in (0, 2), U.describe(r)
    assert not os.path.exists(elsewhere / "victim"), "wrote through a link out of the folder"
    if r.returncode == 2:
        U.assert_clean_error(r, "wm_testtool", "o.onnx.data")
        assert _files(outdir) == ["o.onnx.data"], _files(outdir)  # only the planted link
    else:
        assert not os.path.islink(outdir / "o.onnx.data")
        assert _files(outdir) == ["o.onnx", "o.onnx.data"], _files(outdir)
    # an existing file out of the folder behind the link: refused, the file untouched
    (elsewhere / "victim").write_bytes(b"precious")
    for f in ("o.onnx", "o.onnx.data"):
        if os.path.lexists(outdir / f):
            os.unlink(outdir / f)
    os.symlink(elsewhere / "victim", outdir / "o.onnx.data")
    r = U.run([testtool_asan, "roundtrip", src, outdir / "o.onnx", "--external", "always"])
    assert not U.crashed(r) and r.returncode in (0, 2), U.describe(r)
    assert (elsewhere / "victim").read_bytes() == b"precious", "wrote through a link out of the folder"
    if r.returncode == 2:
        U.assert_clean_error(r, "wm_testtool", "o.onnx.data", any_of=["outside", "link"])
        assert _files(outdir) == ["o.onnx.data"], _files(outdir)


# --------------------------------------------------------------------------- (9) truncation


def test_truncation_every_byte(tmp_path, winml_asan, testtool_asan):
    full = small_valid_model().SerializeToString()
    assert 200 <= len(full) <= 1000, len(full)
    d = tmp_path / "t"
    d.mkdir()
    paths = []
    for n in range(len(full) + 1):
        p = d / f"p{n}.onnx"
        p.write_bytes(full[:n])
        paths.append(p)
    outdir = tmp_path / "out"
    outdir.mkdir()

    def one(n):
        p = paths[n]
        r1 = U.run([winml_asan, "inspect", "-m", p, "-f", "json"], timeout=60)
        r2 = U.run([testtool_asan, "roundtrip", p, outdir / f"o{n}.onnx"], timeout=60)
        return n, r1, r2

    bad, loaded = [], 0
    with cf.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as ex:
        for n, r1, r2 in ex.map(one, range(len(full) + 1)):
            o = outdir / f"o{n}.onnx"
            for r, prog in ((r1, "winml inspect"), (r2, "wm_testtool")):
                if U.crashed(r) or r.returncode not in (0, 2):
                    bad.append(f"prefix {n}: {prog} crashed / bad exit:\n{U.describe(r)}")
                elif r.returncode == 2:
                    lines = r.stderr.rstrip("\n").split("\n")
                    if len(lines) != 1 or not lines[0].startswith(prog + ": error: ") or r.stdout:
                        bad.append(f"prefix {n}: {prog} error output not one clean line:\n{U.describe(r)}")
            if (r1.returncode == 0) != (r2.returncode == 0):
                bad.append(f"prefix {n}: inspect exit {r1.returncode} but roundtrip exit {r2.returncode}")
            if r2.returncode == 0:
                loaded += 1
                # a prefix we accept is a valid protobuf message: onnx agrees, and the copy equals it
                try:
                    ref = onnx.load_from_string(full[:n])
                    if onnx.load(str(o)) != ref:
                        bad.append(f"prefix {n}: saved copy differs from the prefix as onnx reads it")
                except Exception as e:
                    bad.append(f"prefix {n}: we load it, onnx does not: {e}")
                o.unlink()
            elif o.exists():
                bad.append(f"prefix {n}: failed but left {o}")
    left = _files(outdir)
    U.note(f"adversarial: truncation of a {len(full)} B model at every byte: {len(full) + 1} prefixes, "
           f"{loaded} load, {len(full) + 1 - loaded} refused, {len(bad)} problems")
    assert loaded >= 1  # the full model at least
    assert not left, f"files left: {left}"
    assert not bad, "\n".join(bad[:20])


# the cases whose header claims sizes: refused before anything is sized from them
CHEAP = ["dims_2p40_raw_4", "dims_product_overflow", "dims_bytes_overflow", "dims_2p40_external_4",
         "dims_2p40_external_nolen", "off_2p64_minus_4096_len_8192", "len_sum_overflow", "length_2p63",
         "length_past_parent", "nested_100000_attr_graph", "nested_100000_type", "raw_short_in_sparse"]


@pytest.mark.parametrize("name", CHEAP)
def test_claimed_sizes_cost_little(name, tmp_path, winml):
    """The plain build refuses these in well under a second of CPU, at a small peak RSS (test_hostile checks the
    message under ASan+UBSan)."""
    path, _, _, _ = _prepare(tmp_path, name)
    r, cpu, rss = U.run_measured([winml, "inspect", "-m", path, "-f", "json"])
    assert r.returncode == 2, U.describe(r)
    assert cpu < 1.0 and rss < 64 << 20, (cpu, rss)
