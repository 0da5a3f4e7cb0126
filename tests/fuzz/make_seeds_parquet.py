"""Writes the seeds of fuzz_parquet (tests/fuzz/seeds/parquet/) and fuzz_arrow (tests/fuzz/seeds/arrow/) with pyarrow: small files of every codec, page
version, dictionary and plain values, nulls, a struct {bytes, path} and a list column. Each seed starts with the
target's option byte: 28 reads all rows under the largest cap on decompressed bytes (1 KiB << 7)."""
import io
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq

seeds = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "seeds")
out, aout = os.path.join(seeds, "parquet"), os.path.join(seeds, "arrow")
os.makedirs(out, exist_ok=True)
os.makedirs(aout, exist_ok=True)
t = pa.table({
    "text": ["a", None, "bc"] * 3,
    "label": pa.array([1, None, 3] * 3, pa.int64()),
    "i": pa.array([1, 2, 3] * 3, pa.int32()),
    "f": pa.array([1.5, None, -2.0] * 3, pa.float32()),
    "d": [0.25, 1e20, None] * 3,
    "b": [True, None, False] * 3,
    "fx": pa.array([b"ab", b"cd", None] * 3, pa.binary(2)),
    "image": pa.array([{"bytes": b"\x00\x01", "path": "x.png"}, None, {"bytes": None, "path": "y"}] * 3),
    "answers": pa.array([{"text": ["a", "b"], "answer_start": [1, 2]}, None, {"text": [], "answer_start": [3]}] * 3),
})
for codec in ["NONE", "SNAPPY", "GZIP", "ZSTD"]:
    for v in ["1.0", "2.0"]:
        for dic in [True, False]:
            b = io.BytesIO()
            pq.write_table(t, b, compression=codec, data_page_version=v, use_dictionary=dic, row_group_size=4)
            with open(os.path.join(out, f"{codec.lower()}_v{v[0]}_{'dict' if dic else 'plain'}"), "wb") as f:
                f.write(bytes([28]) + b.getvalue())
# Arrow IPC: the stream format (as the datasets library caches it) in batches of 4 rows, and the file format
small = t.drop_columns(["fx"]).append_column("fx", pa.array([b"ab", b"cd", None] * 3, pa.binary(2)))
for kind in ["stream", "file"]:
    b = io.BytesIO()
    w = pa.ipc.new_stream(b, small.schema) if kind == "stream" else pa.ipc.new_file(b, small.schema)
    w.write_table(small, max_chunksize=4)
    w.close()
    with open(os.path.join(aout, kind), "wb") as f:
        f.write(bytes([28]) + b.getvalue())
large = pa.table({"text": pa.array(["a", None, "bc"] * 3, pa.large_string()), "n": pa.array([1, 2, None] * 3, pa.int8()),
                  "l": pa.array([[1.5], None, []] * 3, pa.large_list(pa.float32())), "z": pa.nulls(9)})
b = io.BytesIO()
with pa.ipc.new_stream(b, large.schema) as w:
    w.write_table(large)
with open(os.path.join(aout, "large_types"), "wb") as f:
    f.write(bytes([28]) + b.getvalue())
