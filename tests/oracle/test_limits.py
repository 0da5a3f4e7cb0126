"""Bounds on the engine's memory and time and on eval's data set reading (issue 30: never crash, never run away).

Each case runs the normal build and the ASan+UBSan build (`binary` fixture) and expects a clean exit 2 naming the
node or file and the bound (and how to raise it), or exit 0 where a bound is met exactly or raised:
  - a plan, a folded constant, an eager (data-dependent) allocation or an op's own buffer over the memory limit:
    Expand / ConstantOfShape to a 16 TiB shape from a 200-byte model, a 64 MiB value under --max-memory /
    WM_MAX_MEMORY, Unique's sort buffer, the KV cache of generate --max-length;
  - Loop with a trip count of 2^62 (or a while-style Loop whose cond never turns false): --max-loop-iterations /
    WM_MAX_LOOP_ITERATIONS, the 10^7 default, --timeout; a Scan over more steps than the cap;
  - eval --mode task data sets: a 10^7-row file with --samples 10 (peak RSS as with a 100-row file), a 100 MB line,
    a header only, labels out of the model's range, NaN / inf / fractional labels, a UTF-8 BOM, invalid UTF-8.
Nothing may be left behind: every run gets its own empty TMPDIR, checked empty afterwards.
"""
import json
import os
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import oracle_util as U

HUGE = [1 << 21, 1 << 21]  # 2^42 float32 elements: 16 TiB, under the engine's old 2^46-element cap


@pytest.fixture(params=["normal", "asan"])
def binary(request, winml, asan_dir):
    return winml if request.param == "normal" else U.binary(asan_dir, "winml")


def run(argv, tmp_path, env=None, timeout=300, fresh=False):
    """Runs argv with a private empty TMPDIR (and env additions); checks that nothing was left in it."""
    tmp = tmp_path / f"tmpdir{len(list(tmp_path.glob('tmpdir*')))}"
    tmp.mkdir()
    old = dict(os.environ)
    os.environ.update({"TMPDIR": str(tmp), **(env or {})})
    try:
        r = (U.run_fresh if fresh else U.run)(argv, timeout=timeout)
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert not list(tmp.iterdir()), "files left behind: " + repr(list(tmp.iterdir()))
    return r


def save(model, path):
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def perf(binary, model, *args):
    return [binary, "perf", "-m", model, "--warmup", "0", "--iterations", "1", "--no-llm", "-f", "json", *args]


# --------------------------------------------------------------------------- memory


def expand_model(tmp_path, shape, folded=False, name="big.onnx"):
    """y = Expand(x, shape): x a graph input [1] (planned), or an initializer (folded when the session is made)."""
    x = numpy_helper.from_array(np.ones(1, np.float32), "x")
    inits = [numpy_helper.from_array(np.array(shape, np.int64), "shape")] + ([x] if folded else [])
    inputs = [] if folded else [h.make_tensor_value_info("x", T.FLOAT, [1])]
    g = h.make_graph([h.make_node("Expand", ["x", "shape"], ["y"], name="big_expand")], "g", inputs,
                     [h.make_tensor_value_info("y", T.FLOAT, ["a", "b"])], inits)
    return save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), tmp_path / name)


def test_plan_over_available_memory(binary, tmp_path):
    """A 200-byte model whose plan needs 16 TiB: refused at planning, naming node, op, value, shape, size, limit."""
    m = expand_model(tmp_path, HUGE)
    assert os.path.getsize(m) < 300
    r = run(perf(binary, m), tmp_path)
    U.assert_clean_error(r, "winml perf", "node 'big_expand' (Expand)", "output 'y' [2097152, 2097152] float32",
                         "16.0 TiB", "memory available to this process", "--max-memory SIZE", "WM_MAX_MEMORY")


def test_folded_constant_over_available_memory(binary, tmp_path):
    """The same Expand of constants is folded when the session is made: refused there, before allocating."""
    r = run(perf(binary, expand_model(tmp_path, HUGE, folded=True)), tmp_path)
    U.assert_clean_error(r, "winml perf", "node 'big_expand' (Expand)", "[2097152, 2097152]", "16.0 TiB",
                         "--max-memory")


def test_max_memory_flag_and_env(binary, tmp_path):
    """A 64 MiB activation runs by default, and is refused under --max-memory 16M or WM_MAX_MEMORY=16M."""
    m = expand_model(tmp_path, [4096, 4096])
    r = run(perf(binary, m), tmp_path)
    assert r.returncode == 0, U.describe(r)
    assert json.loads(r.stdout)["model_info"]["output_shapes"] == [[4096, 4096]]
    r = run(perf(binary, m, "--max-memory", "16M"), tmp_path)
    U.assert_clean_error(r, "winml perf", "node 'big_expand' (Expand)", "64.0 MiB", "limit of 16.0 MiB",
                         "--max-memory")
    r = run(perf(binary, m), tmp_path, env={"WM_MAX_MEMORY": "16M"})
    U.assert_clean_error(r, "winml perf", "big_expand", "limit of 16.0 MiB set by WM_MAX_MEMORY")
    r = run(perf(binary, m, "--max-memory", "80M"), tmp_path, env={"WM_MAX_MEMORY": "16M"})  # the flag wins
    assert r.returncode == 0, U.describe(r)
    r = run(perf(binary, m, "--max-memory", "lots"), tmp_path)
    U.assert_clean_error(r, "winml perf", "--max-memory: 'lots' is not a size")
    r = run(perf(binary, m), tmp_path, env={"WM_MAX_MEMORY": "lots"})
    U.assert_clean_error(r, "winml perf", "WM_MAX_MEMORY: 'lots' is not a size")


def eager_model(tmp_path):
    """y = ConstantOfShape(shape): the shape is a graph input, so the plan is eager (shapes follow the data)."""
    g = h.make_graph([h.make_node("ConstantOfShape", ["shape"], ["y"], name="eager_fill",
                                  value=numpy_helper.from_array(np.ones(1, np.float32), "v"))], "g",
                     [h.make_tensor_value_info("shape", T.INT64, [2])], [h.make_tensor_value_info("y", T.FLOAT, ["a", "b"])])
    return save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), tmp_path / "eager.onnx")


def shape_input(tmp_path, shape, name):
    from safetensors.numpy import save_file
    p = tmp_path / name
    save_file({"shape": np.array(shape, np.int64)}, str(p))
    return p


def test_eager_allocations_are_bounded(binary, tmp_path):
    m = eager_model(tmp_path)
    r = run(perf(binary, m, "--input-data", shape_input(tmp_path, HUGE, "huge.safetensors")), tmp_path)
    U.assert_clean_error(r, "winml perf", "node 'eager_fill' (ConstantOfShape)", "[2097152, 2097152] float32",
                         "16.0 TiB", "--max-memory")
    small = shape_input(tmp_path, [4096, 4096], "small.safetensors")
    r = run(perf(binary, m, "--input-data", small), tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["engine"]["data_dependent_shapes"], U.describe(r)
    r = run(perf(binary, m, "--input-data", small, "--max-memory", "16M"), tmp_path)
    U.assert_clean_error(r, "winml perf", "node 'eager_fill' (ConstantOfShape)", "64.0 MiB", "limit of 16.0 MiB")


def test_op_buffer_is_bounded(binary, tmp_path):
    """Unique sorts its input in a buffer of its own (16 bytes an element): taken from the same budget."""
    g = h.make_graph([h.make_node("Unique", ["x"], ["y"], name="uniq")], "g",
                     [h.make_tensor_value_info("x", T.INT64, [1 << 20])], [h.make_tensor_value_info("y", T.INT64, ["u"])])
    m = save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), tmp_path / "unique.onnx")
    r = run(perf(binary, m, "--max-memory", "12M"), tmp_path)
    U.assert_clean_error(r, "winml perf", "node 'uniq' (Unique): a sort buffer of 16.0 MiB", "limit of 12.0 MiB")
    r = run(perf(binary, m, "--max-memory", "40M"), tmp_path)
    assert r.returncode == 0, U.describe(r)


def test_generated_inputs_are_bounded(binary, tmp_path):
    """perf's generated inputs are sized by --batch-size / --dim: checked against the same limit."""
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"], name="act")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, ["batch", 1024])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["batch", 1024])])
    m = save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), tmp_path / "relu.onnx")
    r = run(perf(binary, m, "--batch-size", "4096"), tmp_path, env={"WM_MAX_MEMORY": "8M"})
    U.assert_clean_error(r, "winml perf", "input 'x' [4096, 1024] float32 needs 16.0 MiB", "--batch-size",
                         "limit of 8.0 MiB set by WM_MAX_MEMORY")
    r = run(perf(binary, m, "--batch-size", "1024"), tmp_path, env={"WM_MAX_MEMORY": "9M"})  # 4 MiB in + 4 out
    assert r.returncode == 0, U.describe(r)


# --------------------------------------------------------------------------- time


def loop_model(tmp_path, trip=None, name="loop.onnx"):
    """y = Loop(M=trip, cond=true, x): the body adds 1 and passes cond on; trip None: a while-style Loop (no M)."""
    body = h.make_graph(
        [h.make_node("Identity", ["cond_in"], ["cond_out"]), h.make_node("Add", ["v_in", "one"], ["v_out"])], "body",
        [h.make_tensor_value_info("iter", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
         h.make_tensor_value_info("v_in", T.FLOAT, [1])],
        [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("v_out", T.FLOAT, [1])],
        [numpy_helper.from_array(np.ones(1, np.float32), "one")])
    inits = [numpy_helper.from_array(np.array(True), "cond")]
    if trip is not None:
        inits.append(numpy_helper.from_array(np.array(trip, np.int64), "M"))
    node = h.make_node("Loop", ["M" if trip is not None else "", "cond", "x"], ["y"], name="runaway_loop", body=body)
    g = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, [1])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1])], inits)
    return save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), tmp_path / name)


def test_loop_iteration_cap(binary, tmp_path):
    m = loop_model(tmp_path, 1 << 62)
    r = run(perf(binary, m, "--max-loop-iterations", "1000"), tmp_path, timeout=120)
    U.assert_clean_error(r, "winml perf", "node 'runaway_loop' (Loop)", "stopped after 1000 iterations",
                         "trip count of 4611686018427387904", "--max-loop-iterations N", "WM_MAX_LOOP_ITERATIONS")
    r = run(perf(binary, m), tmp_path, env={"WM_MAX_LOOP_ITERATIONS": "500"}, timeout=120)
    U.assert_clean_error(r, "winml perf", "runaway_loop", "stopped after 500 iterations")
    w = loop_model(tmp_path, None, "while.onnx")
    r = run(perf(binary, w, "--max-loop-iterations", "700"), tmp_path, timeout=120)
    U.assert_clean_error(r, "winml perf", "node 'runaway_loop' (Loop)", "stopped after 700 iterations",
                         "--max-loop-iterations")
    r = run(perf(binary, loop_model(tmp_path, 1000, "exact.onnx"), "--max-loop-iterations", "1000"), tmp_path)
    assert r.returncode == 0, U.describe(r)  # exactly the cap runs
    r = run(perf(binary, m, "--max-loop-iterations", "0"), tmp_path)
    U.assert_clean_error(r, "winml perf", "--max-loop-iterations: '0' is not an integer")


def test_loop_default_cap(winml, tmp_path):
    """With no flag, the 2^62 trip count stops at the default of 10^7 iterations (the normal build: the ASan build
    takes minutes for 10^7 iterations; its checks of the same path are test_loop_iteration_cap's)."""
    r = run(perf(winml, loop_model(tmp_path, 1 << 62)), tmp_path, timeout=300)
    U.assert_clean_error(r, "winml perf", "node 'runaway_loop' (Loop)", "stopped after 10000000 iterations",
                         "--max-loop-iterations")


def test_timeout(binary, tmp_path):
    m = loop_model(tmp_path, 1 << 62)
    r = run(perf(binary, m, "--max-loop-iterations", "1000000000000", "--timeout", "0.5"), tmp_path, timeout=120)
    U.assert_clean_error(r, "winml perf", "node 'runaway_loop' (Loop)", "over the timeout of 0.5 s",
                         "--timeout SECONDS", "WM_TIMEOUT")
    r = run(perf(binary, m), tmp_path, env={"WM_TIMEOUT": "0.5", "WM_MAX_LOOP_ITERATIONS": "1000000000000"},
            timeout=120)
    U.assert_clean_error(r, "winml perf", "runaway_loop", "over the timeout of 0.5 s set by WM_TIMEOUT")
    r = run(perf(binary, m, "--timeout", "soon"), tmp_path)
    U.assert_clean_error(r, "winml perf", "--timeout: 'soon' is not a number in (0, ")


def test_scan_steps_cap(binary, tmp_path):
    """A Scan runs its body once per step: more steps than the cap are refused before the first."""
    body = h.make_graph([h.make_node("Add", ["s_in", "x_t"], ["s_out"]), h.make_node("Identity", ["s_out"], ["e"])],
                        "body", [h.make_tensor_value_info("s_in", T.FLOAT, [1]),
                                 h.make_tensor_value_info("x_t", T.FLOAT, [1])],
                        [h.make_tensor_value_info("s_out", T.FLOAT, [1]), h.make_tensor_value_info("e", T.FLOAT, [1])])
    node = h.make_node("Scan", ["s0", "xs"], ["s", "es"], name="long_scan", num_scan_inputs=1, body=body)
    g = h.make_graph([node], "g", [h.make_tensor_value_info("xs", T.FLOAT, [5000, 1])],
                     [h.make_tensor_value_info("s", T.FLOAT, [1]), h.make_tensor_value_info("es", T.FLOAT, [5000, 1])],
                     [numpy_helper.from_array(np.zeros(1, np.float32), "s0")])
    m = save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), tmp_path / "scan.onnx")
    r = run(perf(binary, m, "--max-loop-iterations", "4999"), tmp_path)
    U.assert_clean_error(r, "winml perf", "node 'long_scan' (Scan)", "5000 steps are over the limit of 4999",
                         "--max-loop-iterations")
    r = run(perf(binary, m, "--max-loop-iterations", "5000"), tmp_path)
    assert r.returncode == 0, U.describe(r)


@pytest.fixture(scope="module")
def decoder(request):
    """A tiny llama exported with its KV cache (2 layers, 2 KV heads of 12): no tokenizer, fed --ids."""
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from test_generate import MODELS, VOCAB, export_with_past
    cfg = transformers.AutoConfig.for_model("llama", vocab_size=VOCAB, **MODELS["llama"])
    path = U.scratch(request, "llama") / "model.onnx"
    export_with_past(transformers.AutoModelForCausalLM.from_config(cfg).eval(), cfg, path)
    return path


def test_kv_cache_bounded(binary, decoder, tmp_path):
    """The KV cache is sized by --max-length: checked against the memory limit before it is allocated."""
    def gen(*args):
        return run([binary, "generate", "-m", decoder, "--ids", "1,2,3", "--max-new-tokens", "2", "-f", "json", *args],
                   tmp_path)
    U.assert_clean_error(gen("--max-length", "1000000000000"), "winml generate",
                         "the KV cache of 2 layers x 1000000000000 tokens", "memory available", "--max-memory")
    U.assert_clean_error(gen("--max-length", "4611686018427387904"), "winml generate", "too large to count in 64 bits")
    U.assert_clean_error(gen("--max-length", "100000", "--max-memory", "1M"), "winml generate",
                         "the KV cache of 2 layers x 100000 tokens", "limit of 1.0 MiB")
    r = gen("--max-length", "64", "--max-memory", "64M")
    assert r.returncode == 0 and len(json.loads(r.stdout)["ids"]) == 2, U.describe(r)


@pytest.mark.parametrize("cmd", [["run", "--text", "x"], ["generate", "--prompt", "x"],
                                 ["eval", "--mode", "task", "--dataset", "d.tsv"]])
@pytest.mark.parametrize("flag,value", [("--max-memory", "1X"), ("--max-loop-iterations", "-3"), ("--timeout", "0")])
def test_bound_flags_on_every_runner(binary, tmp_path, cmd, flag, value):
    """run, generate and eval take the same three flags, checked before anything is loaded."""
    r = run([binary, cmd[0], "-m", tmp_path / "nothing", *cmd[1:], flag, value], tmp_path)
    U.assert_clean_error(r, f"winml {cmd[0]}", f"{flag}: '{value}' is not")


# --------------------------------------------------------------------------- eval data sets


@pytest.fixture(scope="module")
def classifier(request, winml):
    """A tiny BERT sequence classifier (2 labels) built by winml build."""
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from test_run import make
    import tok_oracle
    d, _, _ = tok_oracle.build_fixtures(["bert"])["bert"]
    tmp = U.scratch(request, "clf")
    _, _, b = make(tmp, winml, os.path.join(d, "vocab.txt"), transformers.BertForSequenceClassification,
                   "text-classification", num_labels=2)
    return b


def evaluate(binary, build, dataset, tmp_path, *args, fresh=False):
    """winml eval --mode task; fresh: under /usr/bin/time from a small shell, r.maxrss_kb its peak RSS (the time
    lines taken off r.stderr)."""
    argv = [binary, "eval", "--mode", "task", "-m", build, "--dataset", dataset, *args, "-f", "json"]
    if not fresh:
        return run(argv, tmp_path, timeout=600)
    r = run(["/usr/bin/time", "-f", "maxrss_kb=%M", *argv], tmp_path, fresh=True, timeout=600)
    m = re.findall(r"^maxrss_kb=(\d+)$", r.stderr, re.M)
    assert m, U.describe(r)
    r.maxrss_kb = int(m[-1])
    r.stderr = "".join(ln for ln in r.stderr.splitlines(True)
                       if not ln.startswith(("maxrss_kb=", "Command exited with non-zero status")))
    return r


def write_rows(path, n, header="text\tlabel\n", extra=b""):
    """A TSV of n short rows (blocks of 10^5 alike rows), then extra."""
    block = "".join("the quick brown fox jumps over it %d\t%d\n" % (i, i % 2) for i in range(min(n, 100000))).encode()
    with open(path, "wb") as f:
        f.write(header.encode())
        for _ in range(n // 100000):
            f.write(block)
        f.write(b"".join(block.splitlines(True)[:n % 100000]))
        f.write(extra)
    return path


def test_samples_stream_the_table(binary, classifier, tmp_path):
    """--samples 10 of a 10^7-row file (about 400 MB) reads 10 rows: peak RSS as with a 100-row file."""
    big = write_rows(tmp_path / "big.tsv", 10_000_000)
    small = write_rows(tmp_path / "small.tsv", 100)
    r = evaluate(binary, classifier, big, tmp_path, "--samples", "10", fresh=True)
    assert r.returncode == 0 and json.loads(r.stdout)["metrics"]["samples"] == 10, U.describe(r)
    rs = evaluate(binary, classifier, small, tmp_path, "--samples", "10", fresh=True)
    assert rs.returncode == 0, U.describe(rs)
    U.note(f"eval --samples 10: peak RSS {r.maxrss_kb} KB on 10^7 rows, {rs.maxrss_kb} KB on 100 rows ({binary})")
    assert r.maxrss_kb < rs.maxrss_kb + 16 * 1024, (r.maxrss_kb, rs.maxrss_kb)
    os.unlink(big)


def test_long_line_refused(binary, classifier, tmp_path):
    """A 100 MB line is refused (file, line, length, limit) without being held, and is never read past --samples."""
    f = write_rows(tmp_path / "long.tsv", 1, extra=b"y" * (100 << 20) + b"\t1\nlast row\t0\n")
    r = evaluate(binary, classifier, f, tmp_path, fresh=True)
    U.assert_clean_error(r, "winml eval", f"{f}:3: the line is 104857602 bytes long", "over the limit of 8388608 bytes",
                         "--max-line-bytes")
    small = evaluate(binary, classifier, write_rows(tmp_path / "small.tsv", 1), tmp_path, fresh=True)
    U.note(f"eval on a 100 MB line: peak RSS {r.maxrss_kb} KB, {small.maxrss_kb} KB on a 1-row file ({binary})")
    # at most the 8 MiB line buffer (with ASan's quarantine of its smaller steps): far from the 100 MB line
    assert r.maxrss_kb < small.maxrss_kb + 40 * 1024, (r.maxrss_kb, small.maxrss_kb)
    r = evaluate(binary, classifier, f, tmp_path, "--samples", "1")
    assert r.returncode == 0 and json.loads(r.stdout)["metrics"]["samples"] == 1, U.describe(r)
    g = write_rows(tmp_path / "kb.tsv", 1, extra=b"z " * 1000 + b"\t1\n")  # a 2002-byte line 3
    r = evaluate(binary, classifier, g, tmp_path, "--max-line-bytes", "2001")
    U.assert_clean_error(r, "winml eval", f"{g}:3: the line is 2002 bytes long, over the limit of 2001 bytes")
    r = evaluate(binary, classifier, g, tmp_path, "--max-line-bytes", "2002")
    assert r.returncode == 0 and json.loads(r.stdout)["metrics"]["samples"] == 2, U.describe(r)


@pytest.mark.parametrize("kind,text,needles", [
    ("header-only", "text\tlabel\n", ["no data rows"]),
    ("blank-lines", "text\tlabel\n\n\n", ["no data rows"]),
    ("out-of-range", "text\tlabel\na fox\t1\na dog\t5\n", [":3: label '5' is not a class of the model",
                                                          "has 2 labels (0 to 1)"]),
    ("negative", "text\tlabel\na fox\t-1\n", [":2: label '-1'", "2 labels"]),
    ("nan", "text\tlabel\na fox\tnan\n", [":2: label 'nan'", "2 labels"]),
    ("inf", "text\tlabel\na fox\t1\na cat\tinf\n", [":3: label 'inf'", "2 labels"]),
    ("huge", "text\tlabel\na fox\t1e300\n", [":2: label '1e300'", "2 labels"]),
    ("fraction", "text\tlabel\na fox\t0.5\n", [":2: label '0.5'", "2 labels"]),
    ("word", "text\tlabel\na fox\tpositive\n", [":2: label 'positive'", "2 labels"]),
    ("invalid-utf8", b"text\tlabel\na fox\t1\nbad \xc3\x28 byte\t0\n", [":3: invalid UTF-8 at byte 5"]),
    ("nul", b"text\tlabel\na\x00b\t1\n", [":2: a NUL byte at byte 2"]),
])
def test_bad_tables(binary, classifier, tmp_path, kind, text, needles):
    f = tmp_path / f"{kind}.tsv"
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    r = evaluate(binary, classifier, f, tmp_path)
    U.assert_clean_error(r, "winml eval", str(f), *needles)


def test_bom_csv(binary, classifier, tmp_path):
    """A CSV saved with a UTF-8 byte order mark (Excel) finds its 'text' column."""
    f = tmp_path / "bom.csv"
    f.write_bytes(b"\xef\xbb\xbftext,label\r\n\"a quick, brown fox\",1\r\nthe dog,0\r\n")
    r = evaluate(binary, classifier, f, tmp_path)
    assert r.returncode == 0, U.describe(r)
    got = json.loads(r.stdout)
    assert got["metrics"]["samples"] == 2
