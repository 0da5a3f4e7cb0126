"""Hub data sets read offline (issue 32): Parquet files (src/core/parquet.c), gzip-compressed JSONL and the hub
caches (src/core/dataset_hub.c). The oracle is pyarrow: every file here is written by it and every cell read back
by wm_tabletool (wm_table_read, the reader of eval --dataset and calibration) must equal pyarrow's value."""
import gzip
import io
import json
import math
import os
import struct

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import oracle_util as U
from test_images import photos, vision_folders  # noqa: F401 (fixtures: the ViT build and photographs)

CODECS = ["NONE", "SNAPPY", "GZIP", "ZSTD"]


def table():
    """Every type the reader supports, nulls in each column, a struct {bytes, path} (the datasets Image feature) and a
    struct of lists (SQuAD's answers)."""
    n = 23
    return pa.table({
        "text": [["hello", None, "wörld \"q\"", "", "tab\tnew\nline"][i % 5] for i in range(n)],
        "label": pa.array([[1, 2, None, -4, 2**40][i % 5] for i in range(n)], pa.int64()),
        "i32": pa.array([i * 7 - 50 for i in range(n)], pa.int32()),
        "f": pa.array([[1.5, 3.8, None, -2.0, 1e-7][i % 5] for i in range(n)], pa.float32()),
        "d": [[0.1, 1e20, None, 2.5, 100.0][i % 5] for i in range(n)],
        "b": [[True, False, None][i % 3] for i in range(n)],
        "fx": pa.array([[b"ab", None, b"\x00z"][i % 3] for i in range(n)], pa.binary(2)),
        "image": pa.array([[{"bytes": b"\x00\x01png", "path": "x.png"}, None, {"bytes": None, "path": "y"},
                            {"bytes": b"", "path": None}][i % 4] for i in range(n)]),
        "answers": pa.array([[{"text": ["a", "b"], "answer_start": [1, 2]}, {"text": [], "answer_start": []}, None,
                              {"text": None, "answer_start": [3]}, {"text": ["x", None], "answer_start": [7]}][i % 5]
                             for i in range(n)]),
    })


def expected_cells(t):
    """pyarrow's values as the columns wm_tabletool names (struct fields flattened to 'image.bytes')."""
    cols = {}
    for name in t.column_names:
        col = t.column(name)
        if pa.types.is_struct(col.type):
            for k in range(col.type.num_fields):
                f = col.type.field(k)
                cols[f"{name}.{f.name}"] = (f.type, [None if v is None else v[f.name] for v in col.to_pylist()])
        else:
            cols[name] = (col.type, col.to_pylist())
    return cols


def same(ty, want, got_hex):
    if want is None:
        return got_hex is None
    if got_hex is None:
        return False
    got = bytes.fromhex(got_hex)
    if pa.types.is_list(ty) or pa.types.is_large_list(ty):
        return json.loads(got) == want
    if pa.types.is_boolean(ty):
        return got == (b"true" if want else b"false")
    if pa.types.is_integer(ty):
        return int(got) == want
    if pa.types.is_float32(ty):
        return struct.pack("<f", float(got)) == struct.pack("<f", want)
    if pa.types.is_floating(ty):
        return float(got) == want
    if isinstance(want, str):
        return got == want.encode()
    return got == want


def check(got, t, rows=None):
    want = expected_cells(t)
    assert got["columns"] == list(want), got["columns"]
    n = t.num_rows if rows is None else min(rows, t.num_rows)
    assert len(got["rows"]) == n
    assert got["lines"] == list(range(1, n + 1))
    for c, name in enumerate(got["columns"]):
        ty, vals = want[name]
        for r in range(n):
            assert same(ty, vals[r], got["rows"][r][c]), (name, r, vals[r], got["rows"][r][c])


@pytest.fixture(scope="module")
def tabletool(asan_dir):
    """wm_tabletool of the ASan build when there is one (these files are small; every read is checked by it)."""
    p = U.binary(asan_dir, "wm_tabletool")
    assert os.access(p, os.X_OK), f"wm_tabletool not built in {asan_dir}"
    return p


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("dictionary", [True, False])
def test_parquet_values_equal_pyarrow(tabletool, tmp_path, codec, version, dictionary):
    t = table()
    p = tmp_path / "t.parquet"
    # row groups of 5: several row groups, the last one short; small pages: several pages per chunk
    pq.write_table(t, p, compression=codec, data_page_version=version, use_dictionary=dictionary,
                   row_group_size=5, data_page_size=64, write_batch_size=3)
    md = pq.ParquetFile(p).metadata
    assert md.num_row_groups == 5
    assert md.row_group(0).column(0).compression == (codec if codec != "NONE" else "UNCOMPRESSED")
    check(read(tabletool, p), t)


def test_parquet_row_cap_and_large_dictionary(tabletool, tmp_path):
    """--samples stops inside a row group; a dictionary over its page size falls back to PLAIN pages mid-chunk."""
    n = 3000
    t = pa.table({"sentence": [f"row {i} " + "x" * (i % 37) for i in range(n)], "label": list(range(n))})
    p = tmp_path / "big.parquet"
    pq.write_table(t, p, compression="SNAPPY", row_group_size=1000, dictionary_pagesize_limit=2000)
    check(read(tabletool, p), t)
    check(read(tabletool, p, "1234"), t, 1234)


def test_gzip_jsonl(tabletool, tmp_path):
    rows = [{"text": "héllo", "label": 1}, {"text": "b", "label": 0}]
    p = tmp_path / "train.jsonl.gz"
    with gzip.open(p, "wt", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    got = read(tabletool, p)
    assert got["columns"] == ["text", "label"]
    assert [[bytes.fromhex(c).decode() for c in r] for r in got["rows"]] == [["héllo", "1"], ["b", "0"]]


# ---------------------------------------------------------------- hostile files (ASan build)

def small_parquet(codec="NONE", **kw):
    b = io.BytesIO()
    pq.write_table(pa.table({"text": ["abc", "de", None] * 4, "label": [1, 2, 3] * 4}), b, compression=codec,
                   row_group_size=6, **kw)
    return bytearray(b.getvalue())


def footer(data):
    n = struct.unpack("<I", data[-8:-4])[0]
    return len(data) - 8 - n, n


def hostile_cases():
    cases = {}
    d = small_parquet()
    cases["truncated footer"] = (d[:-3], ["parquet"])
    fs, fn = footer(d)
    cases["footer length past the file"] = (d[:-8] + struct.pack("<I", len(d) * 2) + b"PAR1", ["footer length"])
    cases["footer cut in half"] = (d[:fs] + d[fs:fs + fn // 2] + struct.pack("<I", fn // 2) + b"PAR1",
                                   ["malformed parquet footer"])
    cases["not parquet"] = (bytearray(b"hello world, not a parquet file"), ["not a parquet file"])
    # one cell listing 5M nulls: run-length definition levels claim them in a few bytes (read whole before)
    b = io.BytesIO()
    pq.write_table(pa.table({"z": pa.array([[None] * 5_000_000], pa.list_(pa.int32()))}), b)
    cases["a list of 5M nulls"] = (bytearray(b.getvalue()), ["column z", "more than 4194304 elements"])
    # a huge row count in the footer (the i64 num_rows, field 3): rows over the cell cap, nothing allocated for them
    md = pq.ParquetFile(io.BytesIO(bytes(d))).metadata
    nr = md.num_rows
    zz = lambda v: (v << 1) ^ (v >> 63)  # noqa: E731

    def varint(v):
        out = bytearray()
        while True:
            b = v & 0x7F
            v >>= 7
            out.append(b | (0x80 if v else 0))
            if not v:
                return bytes(out)
    foot = bytes(d[fs:fs + fn])
    needle = bytes([0x16]) + varint(zz(nr))  # field 3 (delta 1 from the schema list), type i64
    assert foot.count(needle) >= 1
    k = foot.index(needle)
    huge = foot[:k] + bytes([0x16]) + varint(zz(2**50)) + foot[k + len(needle):]
    cases["huge row count"] = (d[:fs] + huge + struct.pack("<I", len(huge)) + b"PAR1", ["rows"])
    # bad offsets: the data_page_offset (ColumnMetaData field 9, i64, after field 7: header 0x26) of each column
    # of the first row group moved past the end of the file (plain pages: no dictionary offset before it)
    p = small_parquet(use_dictionary=False)
    pfs, pfn = footer(p)
    pmd = pq.ParquetFile(io.BytesIO(bytes(p))).metadata
    pfoot = bytes(p[pfs:pfs + pfn])
    bad = pfoot
    for col in range(pmd.num_columns):
        off = pmd.row_group(0).column(col).data_page_offset
        # (ColumnChunk.file_offset, field 2 after no field 1, has the same header and value: moved too, unread)
        assert bad.count(bytes([0x26]) + varint(zz(off))) >= 1
        bad = bad.replace(bytes([0x26]) + varint(zz(off)), bytes([0x26]) + varint(zz(off + 10**9)))
    cases["bad column offset"] = (p[:pfs] + bad + struct.pack("<I", len(bad)) + b"PAR1",
                                  ["column text", "outside the file"])
    # a snappy bomb: a page whose snappy data says it is 2 GB, the page header a few bytes
    s = small_parquet("SNAPPY", use_dictionary=False)
    md2 = pq.ParquetFile(io.BytesIO(bytes(s))).metadata
    start = md2.row_group(0).column(0).data_page_offset
    cases["snappy bomb"] = (snappy_bomb(s, start), ["snappy"])
    return cases


def snappy_bomb(s, start):
    """The first data page of a SNAPPY column whose snappy stream claims 2**31-1 bytes (its header unchanged)."""
    data = bytes(s)
    # read the page header by hand (Thrift compact): fields until STOP; only where it ends matters

    def varint_at(q):
        v = sh = 0
        while True:
            b = data[q]
            q += 1
            v |= (b & 0x7F) << sh
            sh += 7
            if not b & 0x80:
                return v, q

    def skip_struct(q):
        while True:
            b = data[q]
            q += 1
            if b == 0:
                return q
            ty = b & 15
            if not b >> 4:
                _, q = varint_at(q)
            if ty in (1, 2):
                continue
            if ty in (3,):
                q += 1
            elif ty in (4, 5, 6):
                _, q = varint_at(q)
            elif ty == 8:
                n, q = varint_at(q)
                q += n
            elif ty == 12:
                q = skip_struct(q)
            else:
                raise AssertionError(f"unexpected thrift type {ty}")
    body = skip_struct(start)
    _, after = varint_at(body)  # the snappy stream's length prefix
    big = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x07])
    return bytearray(data[:body] + big + data[after:])


@pytest.mark.parametrize("case", ["truncated footer", "footer length past the file", "footer cut in half",
                                  "not parquet", "huge row count", "bad column offset", "snappy bomb",
                                  "a list of 5M nulls"])
def test_hostile_parquet_exits_2(asan_dir, tmp_path, case):
    tool = U.binary(asan_dir, "wm_tabletool")
    assert os.access(tool, os.X_OK), f"wm_tabletool not built in {asan_dir}"
    data, needles = hostile_cases()[case]
    p = tmp_path / "bad.parquet"
    p.write_bytes(bytes(data))
    r = U.run([tool, p], timeout=60)
    U.assert_clean_error(r, "wm_tabletool", str(p), *needles)


# ---------------------------------------------------------------- hub names, resolved offline from the caches

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def fake_hub(home, repo, files):
    """A hub cache under home (HF_HOME) holding repo's files {relative path: bytes} at refs/main."""
    root = home / "hub" / ("datasets--" + repo.replace("/", "--"))
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(COMMIT)
    for rel, data in files.items():
        p = root / "snapshots" / COMMIT / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return root / "snapshots" / COMMIT


def parquet_bytes(t, **kw):
    b = io.BytesIO()
    pq.write_table(t, b, **kw)
    return b.getvalue()


def eval_json(winml, build, *args):
    r = U.run([winml, "eval", "--mode", "task", "-m", build, *args, "-f", "json"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def classifier(request, winml, tmp_path_factory):
    """A tiny BERT text-classification build and its transformers model (test_run.make)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from test_run import make
    d = tmp_path_factory.mktemp("cls")
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(200)]
    vocab = d / "vocab.txt"
    vocab.write_text("\n".join(words) + "\n")
    m, tok, b = make(d, winml, str(vocab), transformers.BertForSequenceClassification, "text-classification",
                     scale=4.0, num_labels=2)
    return torch, m, tok, b


def sst2_rows(seed, n):
    import numpy as np
    rng = np.random.default_rng(seed)
    return [{"sentence": " ".join(f"w{int(i)}" for i in rng.integers(0, 200, int(rng.integers(2, 12)))),
             "label": int(rng.integers(0, 2)), "idx": k} for k in range(n)]


def test_eval_hub_cache_equals_jsonl(winml, classifier, tmp_path, monkeypatch):
    """nyu-mll/glue sst2 validation in a fake hub cache, two parquet shards (snappy, zstd): the same metrics as the
    same rows as one JSONL file, and the accuracy transformers' predictions give."""
    torch, m, tok, b = classifier
    rows = sst2_rows(1, 30)
    decoy = sst2_rows(2, 7)
    shard = lambda rs, codec: parquet_bytes(pa.Table.from_pylist(rs), compression=codec)  # noqa: E731
    home = isolated_home(tmp_path, monkeypatch)
    snap = fake_hub(home, "nyu-mll/glue", {
        "sst2/validation-00000-of-00002.parquet": shard(rows[:18], "SNAPPY"),
        "sst2/validation-00001-of-00002.parquet": shard(rows[18:], "ZSTD"),
        "sst2/train-00000-of-00001.parquet": shard(decoy, "NONE"),
        "cola/validation-00000-of-00001.parquet": shard(decoy, "NONE"),
        "README.md": b"# glue\n"})
    jl = tmp_path / "same.jsonl"
    jl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    want = eval_json(winml, b, "--dataset", jl, "--samples", "1000")
    got = eval_json(winml, b, "--dataset", "nyu-mll/glue", "--dataset-config", "sst2", "--split", "validation",
                    "--samples", "1000")
    assert got["dataset_files"] == [str(snap / "sst2" / f"validation-0000{i}-of-00002.parquet") for i in range(2)]
    assert got["metrics"] == want["metrics"] and got["metrics"]["samples"] == len(rows)
    pred = []
    for r in rows:
        with torch.no_grad():
            pred.append(int(m(**tok(r["sentence"], return_tensors="pt")).logits[0].argmax()))
    acc = sum(p == r["label"] for p, r in zip(pred, rows)) / len(rows)
    assert got["metrics"]["accuracy"] == pytest.approx(acc)
    # --samples stops inside the second shard
    part = eval_json(winml, b, "--dataset", "nyu-mll/glue", "--dataset-config", "sst2", "--split", "validation",
                     "--samples", "20")
    jl20 = tmp_path / "same20.jsonl"
    jl20.write_text("".join(json.dumps(r) + "\n" for r in rows[:20]))
    assert part["metrics"] == eval_json(winml, b, "--dataset", jl20)["metrics"]
    # a repository without config folders: <split>.jsonl.gz at the top (mteb's layout)
    fake_hub(home, "mteb/tiny", {"validation.jsonl.gz": gzip.compress(jl.read_bytes())})
    gz = eval_json(winml, b, "--dataset", "mteb/tiny", "--split", "validation", "--samples", "1000")
    assert gz["metrics"] == want["metrics"]


def isolated_home(tmp_path, monkeypatch):
    home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(home))
    for v in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_DATASETS_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(v, raising=False)
    return home


def test_hub_resolution_rules(tabletool, tmp_path, monkeypatch):
    """Which files a name resolves to: the config's folder, else the top / data/; every shard in order; the split
    exactly ("validation" is not "validation_matched"); the recipe's default splits test, validation, train."""
    home = isolated_home(tmp_path, monkeypatch)
    t = lambda k: parquet_bytes(pa.table({"text": [f"{k}"]}))  # noqa: E731
    fake_hub(home, "nyu-mll/glue", {"mnli/validation_matched-00000-of-00001.parquet": t("vm"),
                                    "mnli/validation_mismatched-00000-of-00001.parquet": t("vmm"),
                                    "qnli/validation-00000-of-00001.parquet": t("qnli")})
    fake_hub(home, "timm/mini-imagenet", {f"data/validation-0000{i}-of-00003.parquet": t(f"v{i}") for i in range(3)}
             | {"data/train-00000-of-00001.parquet": t("train")})

    def cells(*args):
        got = read(tabletool, *args)
        return [bytes.fromhex(r[0]).decode() for r in got["rows"]]
    assert cells("nyu-mll/glue", "0", "mnli", "validation_matched") == ["vm"]
    assert cells("nyu-mll/glue", "0", "qnli", "validation") == ["qnli"]
    assert cells("timm/mini-imagenet", "0", "", "validation") == ["v0", "v1", "v2"]
    assert cells("timm/mini-imagenet", "2", "default", "validation") == ["v0", "v1"]
    assert cells("timm/mini-imagenet") == ["v0", "v1", "v2"]  # no split: test, else validation
    r = U.run([tabletool, "nyu-mll/glue", "0", "mnli", "validation"], timeout=60)
    U.assert_clean_error(r, "wm_tabletool", "nyu-mll/glue", "mnli", str(home / "hub"), str(home / "datasets"))


def read(tool, path, *args):
    """wm_tabletool SPEC [MAX_ROWS [CONFIG [SPLIT]]] as JSON."""
    r = U.run([tool, path, *args], timeout=60)
    assert r.returncode == 0, U.describe(r)
    return json.loads(r.stdout)


def test_hub_name_not_cached_names_the_folders(asan_dir, tmp_path, monkeypatch):
    home = isolated_home(tmp_path, monkeypatch)
    tool = U.binary(asan_dir, "wm_tabletool")
    r = U.run([tool, "rajpurkar/squad", "0", "plain_text", "validation"], timeout=60)
    U.assert_clean_error(r, "wm_tabletool", "rajpurkar/squad", "plain_text", "validation", "not in the hugging face caches",
                         str(home / "hub" / "datasets--rajpurkar--squad"), str(home / "datasets" / "rajpurkar___squad"))
    for bad in ["../etc/passwd", "a/b/c", "org/..", "-x/y z"]:
        r = U.run([tool, bad], timeout=60)
        U.assert_clean_error(r, "wm_tabletool", any_of=["not a local file or folder", "not in the hugging face"])
    # a damaged refs/main is refused, naming it
    root = home / "hub" / "datasets--o--n"
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text("../../../../etc")
    r = U.run([tool, "o/n"], timeout=60)
    U.assert_clean_error(r, "wm_tabletool", str(root / "refs" / "main"), "commit")
    # a snapshot file linking outside its repository folder is refused, naming it
    outside = tmp_path / "secret.jsonl"
    outside.write_text('{"text": "not for you"}\n')
    snap = fake_hub(home, "o/m", {"README.md": b""})
    (snap / "test.jsonl").symlink_to(outside)
    r = U.run([tool, "o/m"], timeout=60)
    U.assert_clean_error(r, "wm_tabletool", str(snap / "test.jsonl"), "outside its cache folder")
    # the hub's own layout (a relative link into blobs/) is read
    blob = home / "hub" / "datasets--o--m" / "blobs" / "abc"
    blob.parent.mkdir()
    blob.write_text('{"text": "mine"}\n')
    (snap / "test.jsonl").unlink()
    (snap / "test.jsonl").symlink_to(os.path.relpath(blob, snap))
    got = json.loads(U.run([tool, "o/m"], timeout=60).stdout)
    assert [bytes.fromhex(r[0]).decode() for r in got["rows"]] == ["mine"]


def test_datasets_library_arrow_cache(tabletool, tmp_path, monkeypatch):
    """A data set only in the datasets library's cache: Arrow stream files as `datasets` names them, two shards of
    the config's split read in order (another split and config beside them are not)."""
    home = isolated_home(tmp_path, monkeypatch)
    d = home / "datasets" / "uoft-cs___cifar100" / "cifar100" / "0.0.0" / "abc123"
    d.mkdir(parents=True)
    for name, labels in [("cifar100-test-00000-of-00002", [1, 2]), ("cifar100-test-00001-of-00002", [3]),
                         ("cifar100-train", [9])]:
        write_arrow(d / f"{name}.arrow", pa.table({"fine_label": pa.array(labels, pa.int64())}))
    got = read(tabletool, "uoft-cs/cifar100", "0", "cifar100", "test")
    assert got["files"] == [str(d / "cifar100-test-00000-of-00002.arrow"), str(d / "cifar100-test-00001-of-00002.arrow")]
    assert [bytes.fromhex(r[0]).decode() for r in got["rows"]] == ["1", "2", "3"]


def write_arrow(path, t, kind="stream", chunk=None):
    with pa.OSFile(str(path), "wb") as f:
        w = pa.ipc.new_stream(f, t.schema) if kind == "stream" else pa.ipc.new_file(f, t.schema)
        w.write_table(t, max_chunksize=chunk)
        w.close()


@pytest.mark.parametrize("kind", ["stream", "file"])
def test_arrow_values_equal_pyarrow(tabletool, tmp_path, kind):
    """Arrow IPC (record batches of 5 rows) read back equal to pyarrow's values, the same table as the Parquet test
    plus the large and narrow types the datasets library writes."""
    t = table()
    n = t.num_rows
    t = t.append_column("big", pa.array([["x" * i, None][i % 2] for i in range(n)], pa.large_string()))
    t = t.append_column("i8", pa.array([[-128, 127, None][i % 3] for i in range(n)], pa.int8()))
    t = t.append_column("u64", pa.array([2**64 - 1 - i for i in range(n)], pa.uint64()))
    t = t.append_column("lbin", pa.array([[b"\x00", None][i % 2] for i in range(n)], pa.large_binary()))
    t = t.append_column("ll", pa.array([[[1, None], None, []][i % 3] for i in range(n)], pa.large_list(pa.int16())))
    p = tmp_path / "t.arrow"
    write_arrow(p, t, kind, chunk=5)
    check(read(tabletool, p), t)
    check(read(tabletool, p, "7"), t, 7)


def arrow_hostile():
    t = pa.table({"text": ["abc", None, "de"] * 4, "label": [1, 2, 3] * 4})
    b = io.BytesIO()
    with pa.ipc.new_stream(b, t.schema) as w:
        w.write_table(t, max_chunksize=6)
    d = bytearray(b.getvalue())
    huge = bytearray(d)
    huge[4:8] = struct.pack("<I", 0x7FFFFFF0)  # the schema message's metadata length
    cut = d[:len(d) - 40]  # the last batch's body cut short
    nulls = io.BytesIO()  # one cell listing 5M nulls: a Null child claims any length with no buffer behind it
    nt = pa.table({"z": pa.array([[None] * 5_000_000], pa.list_(pa.null()))})
    with pa.ipc.new_stream(nulls, nt.schema) as w:
        w.write_table(nt)
    return {"metadata length past the end": (huge, ["arrow ipc", "past the end"]),
            "a list of 5M nulls": (bytearray(nulls.getvalue()), ["column z", "5000000 elements", "over the cap"]),
            "truncated body": (cut, ["arrow ipc"]),
            "not arrow": (bytearray(b"\xff\xff\xff\xff\x10\x00\x00\x00" + b"\x00" * 16), ["arrow ipc"])}


@pytest.mark.parametrize("case", ["metadata length past the end", "truncated body", "not arrow", "a list of 5M nulls"])
def test_hostile_arrow_exits_2(asan_dir, tmp_path, case):
    tool = U.binary(asan_dir, "wm_tabletool")
    data, needles = arrow_hostile()[case]
    p = tmp_path / "bad.arrow"
    p.write_bytes(bytes(data))
    U.assert_clean_error(U.run([tool, p], timeout=60), "wm_tabletool", str(p), *needles)


def test_calibration_from_a_cached_hub_dataset(winml, tmp_path, monkeypatch):
    """A static recipe naming ORG/NAME with its config and split calibrates on the cached rows (manifest
    calibration.source = dataset, dataset_file in the cache), as it does on the same rows as a local JSONL."""
    import test_build_static as S
    ck = S.tokenized_checkpoint(tmp_path)
    import numpy as np
    rng = np.random.default_rng(5)
    rows = [{"text": " ".join(f"w{i}" for i in rng.integers(0, 6, rng.integers(3, S.SEQ))), "label": 1}
            for _ in range(12)]
    home = isolated_home(tmp_path, monkeypatch)
    snap = fake_hub(home, "Salesforce/wikitext", {
        "wikitext-2-raw-v1/test-00000-of-00001.parquet": parquet_bytes(pa.Table.from_pylist(rows), compression="GZIP"),
        "wikitext-103-raw-v1/test-00000-of-00001.parquet": parquet_bytes(pa.Table.from_pylist(rows[::-1]))})
    rp = S.dataset_recipe(winml, ck, tmp_path / "hub.json", "Salesforce/wikitext", name="wikitext-2-raw-v1")
    man = S.build(winml, ck, tmp_path / "hub", "-c", rp)
    cal = S.quant_stage(man)["calibration"]
    assert cal["source"] == "dataset" and cal["column"] == "text", cal
    assert cal["dataset_file"] == str(snap / "wikitext-2-raw-v1" / "test-00000-of-00001.parquet"), cal
    jl = tmp_path / "same.jsonl"
    jl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    man2 = S.build(winml, ck, tmp_path / "local", "-c", S.dataset_recipe(winml, ck, tmp_path / "l.json", jl))
    assert S.quant_stage(man2)["calibration"]["source"] == "dataset"
    assert S.act_scales(tmp_path / "hub" / "model.onnx") == S.act_scales(tmp_path / "local" / "model.onnx")


def test_eval_image_bytes_from_parquet(winml, tmp_path, monkeypatch, vision_folders, photos):  # noqa: F811
    """An image-classification set as the hub ships it (timm/mini-imagenet's layout: data/<split>-*.parquet with an
    `image` struct {bytes, path} and an integer `label`): the images are decoded from the table's bytes, and the
    accuracy equals transformers' pipeline on the same images (the ViT of test_images)."""
    import transformers
    vf, ph = vision_folders, photos
    folder, model, proc = vf["vit"]
    names = ["chelsea.png", "rocket.jpg", "astronaut.png", "coffee.png"]
    pipe = transformers.pipeline("image-classification", model=model, image_processor=proc)
    label2id = model.config.label2id
    top1 = [label2id[pipe(ph[n], top_k=1)[0]["label"]] for n in names]
    gold = [top1[0], top1[1], (top1[2] + 1) % 7, top1[3]]  # three right, one wrong
    rows = [{"image": {"bytes": open(ph[n], "rb").read(), "path": n}, "label": g} for n, g in zip(names, gold)]
    home = isolated_home(tmp_path, monkeypatch)
    t = pa.Table.from_pylist(rows)
    snap = fake_hub(home, "timm/mini-imagenet", {
        "data/validation-00000-of-00002.parquet": parquet_bytes(t.slice(0, 2)),
        "data/validation-00001-of-00002.parquet": parquet_bytes(t.slice(2), compression="ZSTD")})
    got = eval_json(winml, folder, "--dataset", "timm/mini-imagenet", "--split", "validation")
    assert got["dataset_files"][0] == str(snap / "data" / "validation-00000-of-00002.parquet")
    m = got["metrics"]
    assert m["samples"] == 4 and m["accuracy"] == 3 / 4, m
    # the same set as a CSV of image files: the same metrics
    csv = tmp_path / "set.csv"
    csv.write_text("image,label\n" + "".join(f"{ph[n]},{g}\n" for n, g in zip(names, gold)))
    assert eval_json(winml, folder, "--dataset", csv)["metrics"] == m
    # uoft-cs/cifar100's layout: the config's folder, an `img` struct and a `fine_label` column (named by the flag)
    c = pa.Table.from_pylist([{"img": r["image"], "fine_label": r["label"]} for r in rows])
    fake_hub(home, "uoft-cs/cifar100", {"cifar100/test-00000-of-00001.parquet": parquet_bytes(c)})
    got = eval_json(winml, folder, "--dataset", "uoft-cs/cifar100", "--dataset-config", "cifar100", "--split", "test",
                    "--label-column", "fine_label")
    assert got["metrics"] == m
