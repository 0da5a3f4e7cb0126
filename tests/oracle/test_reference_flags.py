"""The reference system's flags (../shared/facts/reference-system.md), taken with the reference's meaning
(issue 32, "Flags and semantics"): -d/--device on every command with --ep, `auto` for both, full ONNX Runtime EP
names in any case; build's --output-dir / --overwrite and missing parents; `export -o NAME.onnx` writes that
file; optimize / quantize default outputs; `quantize -p int4 -p fp16`; eval's --samples default of 100. Each test
checks the flag's effect, not only its exit code. Bad values run under the ASan+UBSan build: exit 2, one line
naming the flag and the value.
"""
import collections
import json
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import builder_util as BU
import oracle_util as U


@pytest.fixture(scope="module")
def ckpt(request):
    d = str(U.scratch(request, "refflags") / "qwen2")
    BU.make_tiny("qwen2", d)
    return d


@pytest.fixture(scope="module")
def relu(request):
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="/act/Relu")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    p = str(U.scratch(request, "refflags_relu") / "relu.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    return p


@pytest.fixture(scope="module")
def exported(request, ckpt, winml):
    """A float32 decoder ONNX (winml export, folder form) to optimize and quantize."""
    d = U.scratch(request, "refflags_exp") / "exp"
    r = U.run([winml, "export", "-m", ckpt, "-o", str(d), "-q"])
    assert r.returncode == 0, U.describe(r)
    return str(d / "model.onnx")


def ops(path):
    return collections.Counter(n.op_type for n in onnx.load(path, load_external_data=False).graph.node)


def run_ort(path):
    s = ort.InferenceSession(path)
    feeds = {}
    for i in s.get_inputs():
        shape = [d if isinstance(d, int) else (0 if "past" in str(d) else (1 if "batch" in str(d) else 4))
                 for d in i.shape]
        dt = (np.int64 if "int64" in i.type else np.int32 if "int32" in i.type else
              np.float16 if "float16" in i.type else np.float32)
        feeds[i.name] = np.ones(shape, dtype=dt)
    return s.run(None, feeds)


# ------------------------------------------------------------ --ep / -d / auto / full EP names

@pytest.mark.parametrize("flags", [["--ep", "CPUExecutionProvider", "-d", "auto"],
                                   ["--ep", "cpuexecutionprovider", "--device", "AUTO"],
                                   ["--ep", "auto", "-d", "CPU"]])
def test_perf_ep_names_auto_and_d(winml, relu, flags):
    r = U.run([winml, "perf", "-m", relu, *flags, "-f", "json", "--iterations", "3", "--warmup", "1"])
    assert r.returncode == 0, U.describe(r)
    bi = json.loads(r.stdout)["benchmark_info"]
    assert bi["ep"] == "CPUExecutionProvider" and bi["device"] == "cpu" and bi["iterations"] == 3


def test_config_ep_full_name_and_device_auto(winml, ckpt):
    r = U.run([winml, "config", "-m", ckpt, "--ep", "CPUExecutionProvider", "-d", "Auto"])
    assert r.returncode == 0, U.describe(r)
    assert json.loads(r.stdout)["compile"]["ep_config"] == {"provider": "cpu", "device": "cpu"}


# -p auto follows the target device as the reference's per-device recipes do: npu w8a16 (static QDQ, uint16
# activations), gpu fp16, cpu fp32; --ep without -d targets the EP's default device.
AUTO = [((), None, "cpu", "cpu"), (("--ep", "dml"), ("fp16", None), "dml", "gpu"),
        (("--ep", "QNNExecutionProvider"), ("qdq", "uint16"), "qnn", "npu"), (("--ep", "qnn", "-d", "GPU"), ("fp16", None), "qnn", "gpu"),
        (("--ep", "openvino"), None, "openvino", "cpu"), (("--ep", "openvino", "-d", "npu"), ("qdq", "uint16"), "openvino", "npu"),
        (("--ep", "vitisai", "-d", "auto"), ("qdq", "uint16"), "vitisai", "npu")]


@pytest.mark.parametrize("flags,quant,ep,dev", AUTO, ids=[" ".join(a[0]) or "none" for a in AUTO])
def test_config_auto_precision_follows_the_target(winml, ckpt, flags, quant, ep, dev):
    r = U.run([winml, "config", "-m", ckpt, *flags, "-p", "auto"])
    assert r.returncode == 0, U.describe(r)
    rec = json.loads(r.stdout)
    assert rec["compile"]["ep_config"] == {"provider": ep, "device": dev}
    q = rec.get("quant")
    assert (None if not q else (q["mode"], q.get("activation_type"))) == quant, q


def test_ep_devices_agree_with_the_rule_files(winml, ckpt):
    """The devices build/config accept for an EP are the ones its rule file in data/ep_rules covers, in order."""
    ddir = os.path.join(U.ROOT, "data", "ep_rules")
    for f in sorted(os.listdir(ddir)):
        if not f.endswith(".json"):
            continue
        ep, devs = f[:-5], json.load(open(os.path.join(ddir, f)))["devices"]
        r = U.run([winml, "config", "-m", ckpt, "--ep", ep])
        assert r.returncode == 0, U.describe(r)
        assert json.loads(r.stdout)["compile"]["ep_config"]["device"] == devs[0], (ep, devs)
        for d in ("cpu", "gpu", "npu"):
            r = U.run([winml, "config", "-m", ckpt, "--ep", ep, "-d", d])
            assert (r.returncode == 0) == (d in devs), (ep, d, devs, U.describe(r))


def test_build_for_another_ep(winml, ckpt, tmp_path):
    """build --ep dml: the EP's default device (gpu), -p auto = fp16 there, the recipe's compile target says so, the
    compile stage says it did not run; the model still runs here (onnxruntime's CPU EP and ours agree)."""
    out = tmp_path / "dml"
    r = U.run([winml, "build", "-m", ckpt, "-o", str(out), "--ep", "dml", "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    assert "built for dml on gpu: -p auto is fp16" in r.stderr
    man = json.loads(r.stdout)
    assert man["precision"] == "fp16"
    comp = [s for s in man["stages"] if s["name"] == "compile"][0]
    assert comp["winml_status"] == "not run" and "dml" in comp["reason"], comp
    rec = json.load(open(out / "winml_build_config.json"))
    assert rec["compile"]["ep_config"] == {"provider": "dml", "device": "gpu"} and rec["quant"]["mode"] == "fp16"
    m = onnx.load(str(out / "model.onnx"))
    assert any(i.data_type == TensorProto.FLOAT16 for i in m.graph.initializer)


def test_analyze_full_ep_name_and_auto(winml, relu):
    rules = json.load(open(os.path.join(U.ROOT, "data", "ep_rules", "qnn.json")))
    r = U.run([winml, "analyze", "-m", relu, "--ep", "QNNExecutionProvider", "-d", "auto", "-f", "json"])
    assert r.returncode in (0, 1), U.describe(r)
    got = sorted((t["ep"], t["device"]) for t in json.loads(r.stdout)["targets"])
    assert got == sorted(("qnn", d) for d in rules["devices"])  # --device auto: every device of the EP's rules
    r = U.run([winml, "analyze", "-m", relu, "--ep", "auto", "-f", "json"])  # auto: the EP available here
    assert r.returncode in (0, 1), U.describe(r)
    assert {t["ep"] for t in json.loads(r.stdout)["targets"]} == {"cpu"}
    r = U.run([winml, "analyze", "-m", relu, "--ep", "openvino", "-d", "NPU", "-f", "json"])
    assert r.returncode in (0, 1), U.describe(r)
    assert [(t["ep"], t["device"]) for t in json.loads(r.stdout)["targets"]] == [("openvino", "npu")]


def test_catalog_ep_and_device_auto(winml):
    a = U.run([winml, "catalog", "--ep", "auto", "-d", "AUTO", "-f", "json"])
    b = U.run([winml, "catalog", "--ep", "cpu", "-d", "cpu", "-f", "json"])
    assert a.returncode == 0 and b.returncode == 0, U.describe(a) + U.describe(b)
    assert json.loads(a.stdout) == json.loads(b.stdout)


# ------------------------------------------------------------ --ep / -d on every command that runs a model

RUN_FLAGS = [[], ["--ep", "CPUExecutionProvider", "-d", "auto"], ["--ep", "auto", "--device", "CPU"],
             ["--ep", "cpu", "-d", "Cpu"]]


@pytest.fixture(scope="module")
def bert_build(request, winml):
    """A tiny BERT classifier build with a WordPiece tokenizer of its 96-entry vocabulary."""
    import transformers as T
    root = U.scratch(request, "refflags_bert")
    hf = root / "hf"
    BU.make_tiny("bert", str(hf))
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(91)]
    (root / "vocab.txt").write_text("\n".join(words) + "\n")
    T.BertTokenizerFast(vocab_file=str(root / "vocab.txt"), do_lower_case=True).save_pretrained(str(hf))
    r = U.run([winml, "build", "-m", str(hf), "-o", str(root / "b"), "-q"])
    assert r.returncode == 0, U.describe(r)
    return str(root / "b")


@pytest.fixture(scope="module")
def qwen_build(request, winml, ckpt):
    out = U.scratch(request, "refflags_qwen") / "b"
    r = U.run([winml, "build", "-m", ckpt, "-o", str(out), "-q"])
    assert r.returncode == 0, U.describe(r)
    return str(out)


@pytest.mark.parametrize("flags", RUN_FLAGS[1:])
def test_run_ep_and_device(winml, bert_build, flags):
    """run takes the reference's --ep / -d: the CPU EP by any of its names and auto give what no flag gives."""
    got = [U.run([winml, "run", "-m", bert_build, "--text", "w1 w2 w3", "--text", "w7", "-f", "json", *f])
           for f in (RUN_FLAGS[0], flags)]
    assert all(r.returncode == 0 for r in got), U.describe(got[0]) + U.describe(got[1])
    a, b = (json.loads(r.stdout)["results"] for r in got)
    assert len(a) == 2 and a == b


@pytest.mark.parametrize("flags", RUN_FLAGS[1:])
def test_generate_ep_and_device(winml, qwen_build, flags):
    got = [U.run([winml, "generate", "-m", qwen_build, "--ids", "5,9,13", "--max-new-tokens", "6", "-f", "json", *f])
           for f in (RUN_FLAGS[0], flags)]
    assert all(r.returncode == 0 for r in got), U.describe(got[0]) + U.describe(got[1])
    a, b = (json.loads(r.stdout) for r in got)
    assert a["ids"] == b["ids"] and 1 <= len(a["ids"]) <= 6


@pytest.mark.parametrize("flags", RUN_FLAGS[1:])
def test_eval_ep_and_device(winml, relu, flags):
    r = U.run([winml, "eval", "--mode", "compare", "-m", relu, "--reference", relu, "--samples", "7", "-f", "json",
               *flags])
    assert r.returncode == 0, U.describe(r)
    out = json.loads(r.stdout)
    assert out["samples"] == 7 and out["device"] == "cpu" and out["ep"] == "CPUExecutionProvider"


# ------------------------------------------------------------ build: --output-dir, --overwrite, parents, --ep

def test_build_output_dir_overwrite_and_parents(winml, ckpt, tmp_path):
    out = tmp_path / "a" / "b" / "c"  # none of a, b, c exists
    args = [winml, "build", "-m", ckpt, "--output-dir", str(out), "--ep", "CPUExecutionProvider", "-d", "auto", "-q"]
    r = U.run(args)
    assert r.returncode == 0, U.describe(r)
    man = json.load(open(out / "build_manifest.json"))
    rec = json.load(open(out / "winml_build_config.json"))
    assert rec["compile"]["ep_config"] == {"provider": "cpu", "device": "cpu"}
    assert os.path.isfile(out / "model.onnx")
    # an existing build is kept without --overwrite, replaced with it (the reference's name of --rebuild)
    U.assert_clean_error(U.run(args + ["-p", "fp16"]), "winml build", "already exists", "--overwrite")
    r = U.run(args + ["--overwrite"])
    assert r.returncode == 0, U.describe(r)
    assert json.load(open(out / "build_manifest.json"))["timestamp"] >= man["timestamp"]
    assert os.stat(out).st_ino is not None and not U.leftovers(out.parent)
    # --overwrite never deletes a folder winml did not write
    other = tmp_path / "mine"
    other.mkdir()
    (other / "precious.txt").write_text("keep me")
    r = U.run([winml, "build", "-m", ckpt, "--output-dir", str(other), "--overwrite"])
    U.assert_clean_error(r, "winml build", "not a winml build folder")
    assert (other / "precious.txt").read_text() == "keep me"


def test_build_overwrite_replaces(winml, ckpt, tmp_path):
    """--overwrite really rebuilds: the folder's model changes when the precision does."""
    out = tmp_path / "o"
    assert U.run([winml, "build", "-m", ckpt, "-o", str(out), "-q"]).returncode == 0
    assert "MatMulNBits" not in ops(str(out / "model.onnx"))
    r = U.run([winml, "build", "-m", ckpt, "-o", str(out), "-p", "int4", "--overwrite", "-q"])
    assert r.returncode == 0, U.describe(r)
    assert "MatMulNBits" in ops(str(out / "model.onnx"))


# ------------------------------------------------------------ export -o NAME.onnx

def test_export_to_onnx_file(winml, ckpt, tmp_path, exported):
    d = tmp_path / "sub"
    f = d / "x.onnx"
    r = U.run([winml, "export", "-m", ckpt, "-o", str(f), "--external-threshold", "1", "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    assert sorted(os.listdir(d)) == ["x.onnx", "x.onnx.data"]  # the file, its data beside it, nothing else
    m = onnx.load(str(f), load_external_data=False)
    locs = {e.value for t in m.graph.initializer for e in t.external_data if e.key == "location"}
    assert locs == {"x.onnx.data"}
    man = json.loads(r.stdout)
    assert man["final_artifact"] == "x.onnx"
    assert [a["file"] for a in man["artifacts"]] == ["x.onnx", "x.onnx.data"]
    # the same model as the folder form's
    a, b = run_ort(str(f)), run_ort(exported)
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
    # an existing file is replaced only with --overwrite; without data this time, the old data file goes
    U.assert_clean_error(U.run([winml, "export", "-m", ckpt, "-o", str(f)]), "winml export", "x.onnx",
                         "already exists")
    r = U.run([winml, "export", "-m", ckpt, "-o", str(f), "--overwrite", "-q", "--ep", "CPUExecutionProvider", "-d",
               "auto"])  # the reference's --ep / -d on export too
    assert r.returncode == 0, U.describe(r)
    assert sorted(os.listdir(d)) == ["x.onnx"]
    onnx.checker.check_model(str(f), full_check=True)


# ------------------------------------------------------------ optimize / quantize default outputs

def test_optimize_quantize_default_outputs(winml, winml_asan, exported, tmp_path):
    src = tmp_path / "m.onnx"
    src.write_bytes(open(exported, "rb").read())
    r = U.run([winml, "optimize", "-m", str(src), "-q"])
    assert r.returncode == 0, U.describe(r)
    opt = tmp_path / "m_opt.onnx"
    assert opt.exists() and sum(ops(str(opt)).values()) < sum(ops(str(src)).values())
    r = U.run([winml, "quantize", "-m", str(src), "-p", "int4", "-q"])
    assert r.returncode == 0, U.describe(r)
    assert "MatMulNBits" in ops(str(tmp_path / "m_quantized.onnx"))
    # a winml output is replaced on a second run; a file of another program is not
    assert U.run([winml, "optimize", "-m", str(src), "-q"]).returncode == 0
    (tmp_path / "n.onnx").write_bytes(src.read_bytes())
    (tmp_path / "n_opt.onnx").write_text("not mine")
    (tmp_path / "n_quantized.onnx").write_text("not mine either")
    U.assert_clean_error(U.run([winml_asan, "optimize", "-m", str(tmp_path / "n.onnx")]), "winml optimize",
                         "n_opt.onnx", "not written by winml")
    U.assert_clean_error(U.run([winml_asan, "quantize", "-m", str(tmp_path / "n.onnx"), "-p", "fp16"]),
                         "winml quantize", "n_quantized.onnx", "not written by winml")
    assert (tmp_path / "n_opt.onnx").read_text() == "not mine"
    assert (tmp_path / "n_quantized.onnx").read_text() == "not mine either"


# ------------------------------------------------------------ quantize -p int4 -p fp16

@pytest.mark.parametrize("order", [("int4", "fp16"), ("fp16", "int4")])
def test_quantize_int4_and_fp16_compose(winml, exported, tmp_path, order):
    out = tmp_path / "q.onnx"
    r = U.run([winml, "quantize", "-m", exported, "-p", order[0], "-p", order[1], "-o", str(out), "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    assert json.loads(r.stdout)["precision"] == "int4+fp16"
    m = onnx.load(str(out))
    inits = {t.name for t in m.graph.initializer}
    kinds = collections.Counter(n.op_type for n in m.graph.node)
    assert kinds["MatMulNBits"] > 0  # int4 weights: no MatMul with a constant weight is left
    assert not [n.name for n in m.graph.node if n.op_type == "MatMul" and n.input[1] in inits]
    assert any(t.data_type == TensorProto.FLOAT16 for t in m.graph.initializer)  # fp16 for the rest
    assert not any(t.data_type == TensorProto.FLOAT and np.prod(t.dims) > 1 for t in m.graph.initializer)
    y = run_ort(str(out))
    assert y[0].dtype == np.float32 and np.isfinite(y[0]).all()  # float32 IO: fp16_keep_io_types by default


# ------------------------------------------------------------ eval --samples default

def test_eval_samples_default_100(winml, relu):
    r = U.run([winml, "eval", "--mode", "compare", "-m", relu, "--reference", relu, "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    assert json.loads(r.stdout)["samples"] == 100


def test_eval_dataset_samples_default_100(winml, bert_build, tmp_path):
    """Dataset evaluation (--mode onnx, the reference's name) scores the first --samples rows, 100 by default."""
    f = tmp_path / "d.jsonl"
    f.write_text("".join(json.dumps({"text": f"w{i % 91} w{i * 7 % 91}", "label": i % 3}) + "\n" for i in range(150)))
    got = {}
    for extra in ([], ["--samples", "150"], ["--samples", "100"]):
        r = U.run([winml, "eval", "--mode", "onnx", "-m", bert_build, "--dataset", str(f), "-f", "json", *extra])
        assert r.returncode == 0, U.describe(r)
        got[tuple(extra)] = json.loads(r.stdout)["metrics"]
    assert got[()]["samples"] == 100 and got[("--samples", "150")]["samples"] == 150
    assert got[()] == got[("--samples", "100")]


# ------------------------------------------------------------ bad values: exit 2, one line naming flag and value

BAD = [
    (["perf", "-m", "R", "--ep", "NOPE"], "winml perf", ["--ep", "NOPE", "unknown"]),
    (["perf", "-m", "R", "--device", "tpu"], "winml perf", ["--device", "tpu", "unknown"]),
    (["perf", "-m", "R", "--ep", "QNNExecutionProvider"], "winml perf", ["--ep", "QNNExecutionProvider", "not available"]),
    (["perf", "-m", "R", "-d", "gpu"], "winml perf", ["--device", "gpu", "not available"]),
    (["build", "-m", "C", "-o", "OUT", "--ep", "DmlExecutionProvider", "-d", "npu"], "winml build", ["--device", "npu", "dml", "gpu only"]),
    (["build", "-m", "C", "-o", "OUT", "-d", "npu"], "winml build", ["--device", "npu", "--ep"]),
    (["export", "-m", "C", "-o", "OUT", "--ep", "qnn"], "winml export", ["--ep", "qnn", "not available"]),
    (["export", "-m", "C", "-o", "OUT", "--ep", "NOPE"], "winml export", ["--ep", "NOPE"]),
    (["export", "-m", "C", "-o", "OUT", "-d", "npu"], "winml export", ["--device", "npu", "not available"]),
    (["config", "-m", "C", "--device", "tpu"], "winml config", ["--device", "tpu"]),
    (["config", "-m", "C", "--ep", "vitisai", "-d", "gpu"], "winml config", ["--device", "gpu", "vitisai", "npu only"]),
    (["config", "-m", "C", "-d", "gpu"], "winml config", ["--device", "gpu", "--ep"]),
    (["analyze", "-m", "R", "--device", "tpu"], "winml analyze", ["--device", "tpu"]),
    (["analyze", "-m", "R", "--ep", "NOPE"], "winml analyze", ["--ep", "NOPE"]),
    (["catalog", "--ep", "NOPE"], "winml catalog", ["--ep", "NOPE"]),
    (["run", "-m", "R", "--text", "x", "--ep", "QNNExecutionProvider"], "winml run", ["--ep", "QNNExecutionProvider", "not available"]),
    (["run", "-m", "R", "--text", "x", "-d", "npu"], "winml run", ["--device", "npu", "not available"]),
    (["run", "-m", "R", "--text", "x", "--ep", "NOPE"], "winml run", ["--ep", "NOPE", "unknown"]),
    (["generate", "-m", "R", "--ids", "1", "--ep", "DmlExecutionProvider"], "winml generate", ["--ep", "DmlExecutionProvider", "not available"]),
    (["generate", "-m", "R", "--ids", "1", "--device", "GPU"], "winml generate", ["--device", "GPU", "not available"]),
    (["generate", "-m", "S2S", "--ids", "1", "--ep", "openvino"], "winml generate", ["--ep", "openvino", "not available"]),
    (["generate", "-m", "S2S", "--ids", "1", "-d", "tpu"], "winml generate", ["--device", "tpu", "unknown"]),
    (["eval", "-m", "R", "--reference", "R", "--ep", "cuda"], "winml eval", ["--ep", "cuda", "not available"]),
    (["eval", "-m", "R", "--reference", "R", "-d", "npu"], "winml eval", ["--device", "npu", "not available"]),
    (["quantize", "-m", "R", "-p", "int8", "-p", "fp16", "-o", "OUT"], "winml quantize", ["-p int8 -p fp16"]),
    (["quantize", "-m", "R", "-p", "int4", "-p", "int8", "-o", "OUT"], "winml quantize", ["-p int4 -p int8"]),
    # the audit (bad input on the flags of the last two stops): each was accepted, ran or crashed before
    (["build", "-m", "C", "-o", "OUT", "-p", "int8", "-p", "fp16"], "winml build", ["-p int8 -p fp16", "one precision"]),
    (["build", "-m", "C", "-o", "OUT", "-p", "int4", "-p", "fp16"], "winml build", ["-p int4 -p fp16", "quantize"]),
    (["config", "-m", "C", "-p", "fp16", "-p", "int4"], "winml config", ["-p fp16 -p int4", "one precision"]),
    (["build", "-m", "C", "-o", "OUT", "--random-weights", "--seed", " -5"], "winml build", ["--seed", "' -5'"]),
    (["build", "-m", "C", "-o", "OUT", "--random-weights", "--seed", "18446744073709551616"], "winml build",
     ["--seed", "18446744073709551616"]),
    (["generate", "-m", "R", "--ids", "5,,9"], "winml generate", ["--ids", "'5,,9'"]),
    (["generate", "-m", "R", "--ids", "5,"], "winml generate", ["--ids", "'5,'"]),
    # a repeat (that once freed the first list twice) is refused as one: one list per flag (test_cli_flags.py)
    (["generate", "-m", "R", "--ids", "5", "--ids", "-1"], "winml generate", ["--ids given twice"]),
    (["generate", "-m", "R", "--ids", "5", "--eos", "1", "--eos", "x"], "winml generate", ["--eos given twice"]),
    (["generate", "-m", "R", "--ids", "-1"], "winml generate", ["--ids", "'-1'"]),
    (["generate", "-m", "R", "--ids", "5", "--eos", "x"], "winml generate", ["--eos", "'x'"]),
    (["quantize", "-m", "R", "-o", "OUT", "-p", "int4", "--op-types", "Nope"], "winml quantize",
     ["--op-types", "'Nope'", "int4", "MatMul, Gemm, Gather, Attention"]),
    (["quantize", "-m", "R", "-o", "OUT", "-p", "int4", "--op-types", "matmul"], "winml quantize",
     ["--op-types", "'matmul'", "as ONNX spells them"]),
    (["quantize", "-m", "R", "-o", "OUT", "-p", "int8-dynamic", "--op-types", "MatMul,Gather"], "winml quantize",
     ["--op-types", "'Gather'", "int8-dynamic"]),
    (["quantize", "-m", "R", "-o", "OUT", "-p", "int8", "--op-types", "Conv"], "winml quantize",
     ["--op-types", "'Conv'", "int8-static"]),
    (["quantize", "-m", "R", "-o", "OUT", "-p", "fp16", "--op-types", "MatMul"], "winml quantize",
     ["--op-types", "fp16", "op block list"]),
    (["quantize", "-m", "R", "-o", "OUT", "-p", "int4", "--op-types", ""], "winml quantize", ["--op-types", "empty"]),
    (["quantize", "-m", "R", "-o", "OUT", "-p", "int4", "--op-types", "MatMul,,Gemm"], "winml quantize",
     ["--op-types", "empty", "MatMul,,Gemm"]),
    (["quantize", "-m", "R", "-o", "OUT", "-p", "int4", "--op-types", "MatMul", "--op-types", "Gemm"],
     "winml quantize", ["--op-types given twice"]),
    (["quantize", "-m", "R", "-o", "OUT", "-p", "int4", "--exclude", ""], "winml quantize", ["--exclude", "empty"]),
    # a missing model, by each command the audit covers
    (["build", "-m", "MISSING", "-o", "OUT", "-p", "auto", "--ep", "qnn"], "winml build", ["MISSING", "no such"]),
    (["build", "-m", "MISSING.gguf", "-o", "OUT"], "winml build", ["MISSING.gguf", "cannot open"]),
    (["config", "-m", "MISSING", "--ep", "dml"], "winml config", ["MISSING", "no such"]),
    (["quantize", "-m", "MISSING.onnx", "-o", "OUT", "-p", "int4", "--op-types", "MatMul"], "winml quantize",
     ["MISSING.onnx", "cannot open"]),
    (["generate", "-m", "MISSING", "--ids", "1", "--temperature", "0.7", "--top-p", "0.9", "--seed", "3"],
     "winml generate", ["MISSING", "no such"]),
    (["run", "-m", "MISSING", "--audio", "MISSING.wav", "--prompt", "hi"], "winml run", ["MISSING", "no such"]),
    # --seed draws only in Whisper's fallback: on texts or images it was taken and ignored
    (["run", "-m", "R", "--text", "x", "--seed", "3"], "winml run", ["--seed", "apply to --audio"]),
    (["run", "-m", "R", "--audio", "MISSING.wav", "--seed", "3"], "winml run", ["--seed", "is not one"]),
]


@pytest.mark.parametrize("argv,prog,needles", BAD, ids=[" ".join(a for a in b[0] if a not in ("R", "C", "OUT", "S2S", "-m", "-o")) for b in BAD])
def test_bad_values(winml_asan, relu, ckpt, tmp_path, argv, prog, needles):
    s2s = tmp_path / "s2s"  # what generate takes for an encoder-decoder folder; the flags are refused before it is read
    s2s.mkdir()
    (s2s / "encoder_model.onnx").write_bytes(b"")
    sub = {"R": relu, "C": ckpt, "OUT": str(tmp_path / "out"), "S2S": str(s2s)}
    missing = str(tmp_path / "missing")
    argv = [sub.get(a, a.replace("MISSING", missing)) for a in argv]
    needles = [n.replace("MISSING", missing) for n in needles]
    r = U.run([winml_asan, *argv])
    U.assert_clean_error(r, prog, *needles)
    assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize("ops,needles", [([""], ["empty op type name"]), (["Foo"], ["'Foo'", "int4"]),
                                         (["MatMul", "matmul"], ["'matmul'", "as ONNX spells them"])])
def test_recipe_op_types_checked(winml_asan, ckpt, tmp_path, ops, needles):
    """quant.op_types_to_quantize names only op types the mode quantizes: 'Foo' or 'matmul' built a model with
    nothing quantized (exit 0); [] is onnxruntime's "the default" and stays accepted."""
    r = U.run([winml_asan, "config", "-m", ckpt, "-p", "int4", "-o", str(tmp_path / "r.json")])
    assert r.returncode == 0, U.describe(r)
    rec = json.load(open(tmp_path / "r.json"))
    for v, ok in ((ops, False), ([], True), (["MatMul", "Gather", "Attention"], True)):
        rec["quant"]["op_types_to_quantize"] = v
        json.dump(rec, open(tmp_path / "x.json", "w"))
        r = U.run([winml_asan, "config", "-c", str(tmp_path / "x.json"), "--check"])
        if ok:
            assert r.returncode == 0, U.describe(r)
        else:
            U.assert_clean_error(r, "winml config", "x.json", "quant.op_types_to_quantize", *needles)
    rec["quant"]["op_types_to_quantize"] = ops
    json.dump(rec, open(tmp_path / "x.json", "w"))
    out = tmp_path / "out"
    U.assert_clean_error(U.run([winml_asan, "build", "-m", ckpt, "-c", str(tmp_path / "x.json"), "-o", str(out)]),
                         "winml build", "quant.op_types_to_quantize", *needles)
    assert not out.exists() and not U.leftovers(tmp_path)


def test_generate_seed_changes_the_draws(winml, qwen_build):
    """--seed seeds the sampler: it was read from the wrong variable, so every seed drew as seed 0. The same seed
    repeats; different seeds give different draws (8 tokens of a 96-token vocabulary at temperature 1)."""
    def draw(seed):
        r = U.run([winml, "generate", "-m", qwen_build, "--ids", "5,9,13", "--max-new-tokens", "8", "--temperature",
                   "1", "--seed", str(seed), "-f", "json"])
        assert r.returncode == 0, U.describe(r)
        return tuple(json.loads(r.stdout)["ids"])
    got = {s: draw(s) for s in (0, 1, 2, 3)}
    assert draw(2) == got[2]
    assert len(set(got.values())) >= 3, got
