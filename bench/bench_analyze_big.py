#!/usr/bin/env python3
"""`winml analyze` on a ~3 GB external-data model with many nodes: CPU time per 10k nodes, and proof that no
weight byte is read.

The model is written with the onnx package: N blocks "/model/layers.i/mlp/{MatMul,Add,Relu,Mul}" over a
[H, H] float32 weight each (H = 512: 1 MiB per weight, 3000 blocks = 3 GiB, 12k nodes); every weight is an
external-data initializer pointing into one model.onnx.data file (written directly, offsets aligned to 4 KiB).
Before each analysis the data file is dropped from the page cache (posix_fadvise DONTNEED, after fsync), so
any byte winml touched would show as storage reads.

Measured for the `winml analyze` child (reaped by this process, so its I/O accounting lands in
/proc/self/io and its rusage in RUSAGE_CHILDREN): CPU seconds (user + sys), wall, peak RSS, rchar (bytes
read through read()/pread()) and read_bytes (bytes fetched from storage, mmap faults included), compared with
the data file's size (the rusage and I/O of /usr/bin/time itself are included: a few KiB).
Page-cache residency of the data file after the run is read with mincore (mmap of
the file without touching it).

usage: bench/bench_analyze_big.py [--work DIR] [--winml build/winml] [--blocks 3000] [--hidden 512] [--keep]
Not part of the test suite (writes 3 GB).
"""
import argparse
import ctypes
import mmap
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def write_model(path, blocks, hidden):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    data = path + ".data"
    wbytes = hidden * hidden * 4
    align = 4096
    stride = (wbytes + align - 1) // align * align
    chunk = np.random.default_rng(0).standard_normal(hidden * hidden).astype(np.float32).tobytes()
    with open(data, "wb") as f:
        for i in range(blocks):
            f.seek(i * stride)
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())
    inits, nodes = [], []
    x = "input"
    for i in range(blocks):
        w = TensorProto()
        w.name = f"model.layers.{i}.mlp.weight"
        w.data_type = TensorProto.FLOAT
        w.dims.extend([hidden, hidden])
        w.data_location = TensorProto.EXTERNAL
        for k, v in (("location", os.path.basename(data)), ("offset", str(i * stride)), ("length", str(wbytes))):
            e = w.external_data.add()
            e.key, e.value = k, v
        b = numpy_helper.from_array(np.full(hidden, 0.01, np.float32), f"model.layers.{i}.mlp.bias")
        s = numpy_helper.from_array(np.array(0.5, np.float32), f"model.layers.{i}.mlp.scale")
        inits += [w, b, s]
        p = f"/model/layers.{i}/mlp"
        nodes += [helper.make_node("MatMul", [x, w.name], [f"{p}/mm"], name=f"{p}/MatMul"),
                  helper.make_node("Add", [f"{p}/mm", b.name], [f"{p}/add"], name=f"{p}/Add"),
                  helper.make_node("Relu", [f"{p}/add"], [f"{p}/relu"], name=f"{p}/Relu"),
                  helper.make_node("Mul", [f"{p}/relu", s.name], [f"{p}/out"], name=f"{p}/Mul")]
        x = f"{p}/out"
    g = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", hidden])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", hidden])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return data, len(nodes)


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def resident_bytes(path):
    """Bytes of path in the page cache (mincore over a mapping that is never touched)."""
    size = os.path.getsize(path)
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        p = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if p in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap")
        page = os.sysconf("SC_PAGE_SIZE")
        n = (size + page - 1) // page
        vec = (ctypes.c_ubyte * n)()
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        rc = libc.mincore(ctypes.c_void_p(p), ctypes.c_size_t(size), vec)
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.munmap(ctypes.c_void_p(p), ctypes.c_size_t(size))
        if rc != 0:
            raise OSError(ctypes.get_errno(), "mincore")
        return sum(1 for v in vec if v & 1) * page
    finally:
        os.close(fd)


def proc_io():
    out = {}
    with open("/proc/self/io") as f:
        for line in f:
            k, v = line.split(":")
            out[k] = int(v)
    return out


def measure(argv):
    """Runs argv under /usr/bin/time (its %M is the child's own peak RSS: a process forked from this large
    Python process would inherit its ru_maxrss)."""
    tf = os.path.join(os.path.dirname(argv[argv.index("-m") + 1]), "time.txt")
    io0, ru0 = proc_io(), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", tf, *argv], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    io1, ru1 = proc_io(), resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"winml analyze failed ({r.returncode}): {r.stderr.strip()}")
    with open(tf) as f:
        maxrss = int(f.read().split()[-1]) * 1024
    os.remove(tf)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return dict(wall=wall, cpu=cpu, maxrss=maxrss, rchar=io1["rchar"] - io0["rchar"],
                read_bytes=io1["read_bytes"] - io0["read_bytes"], rc=r.returncode)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/wm_bench_analyze_big")
    ap.add_argument("--winml", default=os.path.join(ROOT, "build", "winml"))
    ap.add_argument("--blocks", type=int, default=3000)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(a.work, "model.onnx")
    t0 = time.monotonic()
    data, n_nodes = write_model(model, a.blocks, a.hidden)
    dsize, msize = os.path.getsize(data), os.path.getsize(model)
    print(f"wrote {model}: {msize / 2**20:.1f} MiB graph, {n_nodes} nodes; {data}: {dsize / 2**30:.2f} GiB "
          f"({time.monotonic() - t0:.1f} s)", flush=True)
    for label, extra in (("--ep cpu", ["--ep", "cpu"]), ("all EPs (8 targets)", [])):
        drop_cache(data)
        before = resident_bytes(data)
        r = measure([a.winml, "analyze", "-m", model, "-f", "json", *extra])
        after = resident_bytes(data)
        print(f"analyze {label}: rc {r['rc']}, {r['cpu']:.3f} s CPU ({r['cpu'] / n_nodes * 1e4:.3f} s per 10k nodes), "
              f"{r['wall']:.3f} s wall, peak RSS {r['maxrss'] / 2**20:.1f} MiB; rchar {r['rchar'] / 2**20:.2f} MiB, "
              f"read_bytes {r['read_bytes'] / 2**20:.2f} MiB (graph file {msize / 2**20:.1f} MiB, data file "
              f"{dsize / 2**20:.0f} MiB); data file in page cache before {before / 2**20:.1f} MiB, after "
              f"{after / 2**20:.1f} MiB", flush=True)
    if not a.keep:
        os.remove(model)
        os.remove(data)


if __name__ == "__main__":
    sys.exit(main())
