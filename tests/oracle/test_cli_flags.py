"""Hostile flag values and flag combinations, under the normal and the ASan+UBSan builds: each one is exit 2 with
one line naming the flag and the reason, before any large allocation or work, and writes nothing (the -o folder
stays empty). Found by probing every numeric / enum / path flag of every command (missing, empty, negative, zero,
trailing junk, 1e12, 2^63, 2^64, NaN, inf, repeats, contradictions, a folder / FIFO / /dev/zero where a file goes):

  - crashes: perf --warmup 2^63-1 (warmup + 1 overflowed a malloc size: SIGSEGV); quantize --block-size 2^62
    (block * bits / 8 wrapped: SIGSEGV, a .winml-lock left behind);
  - runaway time or memory: perf --duration inf / 1e300 and --iterations 1e9, eval --samples 1e9,
    tokenize --pad-to 10^8 (ran past 60 s) and 2^31-1 ("out of memory" naming no flag);
  - values silently changed: --bits 4294967300 read as 4, --fold-max-bytes -1 as 2^64-1, counts past 2^63 clamped,
    --threads 10^13 reported as 1316134911, ' -5' and hexadecimal (0x10) numbers read;
  - NaN accepted: quantize --percentile, eval --threshold METRIC=nan / inf, --layer-threshold;
  - contradictions where the last flag silently won: --symmetric --asymmetric, -o A --output-dir B, --ids twice;
  - catalog -t with a misspelt task: an empty list and exit 0;
  - files the tool did not write: `-o CKPT/config.json` (inspect, config, tokenize ...) replaced the checkpoint's own
    JSON with the result; quantize / optimize --report that cannot be written was found after OUT.onnx was written.
The numbers of every command go through one parser (src/cli/cli.c: wm_cli_int_arg, wm_cli_num_arg, wm_cli_list_arg).
"""
import hashlib
import json
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import oracle_util as U


@pytest.fixture(scope="module")
def models(request):
    """A MatMul model with symbolic batch / sequence dims (perf, eval, quantize, optimize take it), a WordLevel
    tokenizer folder and a Hugging Face checkpoint folder (config.json only: inspect and config read it)."""
    d = U.scratch(request, "cli_flags")
    w = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence", 64])],
                          [numpy_helper.from_array(w, "W")])
    model = d / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="oracle"), str(model))
    tok = d / "tok"
    tok.mkdir(exist_ok=True)
    (tok / "tokenizer.json").write_text(json.dumps({"model": {
        "type": "WordLevel", "vocab": {"a": 0, "b": 1, "[UNK]": 2, "[PAD]": 3}, "unk_token": "[UNK]"},
        "pre_tokenizer": {"type": "Whitespace"}}))
    ck = d / "ck"
    ck.mkdir(exist_ok=True)
    (ck / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 96,
        "max_position_embeddings": 128, "rms_norm_eps": 1e-6, "hidden_act": "silu", "tie_word_embeddings": False}))
    fifo = d / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    return {"M": str(model), "T": str(tok), "C": str(ck), "FIFO": str(fifo)}


HUGE = "9223372036854775808"  # 2^63
# (argv with M (model), T (tokenizer folder), C (checkpoint), O (a file in the empty output folder), D (that folder),
#  FIFO; the words the one error line must hold: the flag first)
CASES = [
    # perf: crashes and runaway counts
    (["perf", "-m", "M", "--warmup", "9223372036854775807", "--iterations", "1"], ["--warmup", "[0, 1048576]"]),
    (["perf", "-m", "M", "--iterations", "1000000000"], ["--iterations", "1000000000"]),
    (["perf", "-m", "M", "--iterations", "1e9"], ["--iterations", "1e9"]),
    (["perf", "-m", "M", "--duration", "inf"], ["--duration", "inf"]),
    (["perf", "-m", "M", "--duration", "1e300"], ["--duration", "604800"]),
    (["perf", "-m", "M", "--duration", "nan"], ["--duration", "nan"]),
    (["perf", "-m", "M", "--threads", "9999999999999"], ["--threads", "9999999999999", "[1, 256]"]),
    (["perf", "-m", "M", "--seed", "99999999999999999999"], ["--seed", "99999999999999999999"]),
    (["perf", "-m", "M", "--batch-size", HUGE], ["--batch-size", HUGE]),
    (["perf", "-m", "M", "--seq-len", "12x"], ["--seq-len", "12x"]),
    (["perf", "-m", "M", "--dim", "sequence=99999999999"], ["--dim", "99999999999"]),
    (["perf", "-m", "M", "--llm-runs", "1000000000000"], ["--llm-runs", "[1, 10000]"]),
    (["perf", "-m", "M", "--llm-warmup", "-1"], ["--llm-warmup", "-1"]),
    (["perf", "-m", "M", "--decode-at", "5,"], ["--decode-at", "'5,'"]),
    (["perf", "-m", "M", "--decode-at", "99999999999999999999"], ["--decode-at"]),
    (["perf", "-m", "M", "--timeout", "inf"], ["--timeout", "inf"]),
    (["perf", "-m", "M", "--max-loop-iterations", HUGE], ["--max-loop-iterations", HUGE]),
    (["perf", "-m", "M", "--warmup", " 5"], ["--warmup", "' 5'"]),
    # eval
    (["eval", "-m", "M", "--reference", "M", "--samples", "1000000000"], ["--samples", "[1, 100000]"]),
    (["eval", "-m", "M", "--reference", "M", "--samples", "99999999999999999999"], ["--samples"]),
    (["eval", "-m", "M", "--reference", "M", "--threads", "99999999999"], ["--threads", "99999999999"]),
    (["eval", "-m", "M", "--reference", "M", "--seed", "99999999999999999999"], ["--seed"]),
    (["eval", "-m", "M", "--reference", "M", "--threshold", "mse=nan"], ["--threshold", "nan"]),
    (["eval", "-m", "M", "--reference", "M", "--threshold", "sqnr_db=inf"], ["--threshold", "inf"]),
    (["eval", "-m", "M", "--reference", "M", "--per-layer", "--layer-threshold", "nan"], ["--layer-threshold"]),
    (["eval", "-m", "M", "--reference", "M", "--dim", "batch=-1"], ["--dim", "-1"]),
    (["eval", "-m", "M", "--reference", "FIFO"], ["fifo", "FIFO"]),
    (["eval", "-m", "M", "--reference", "/dev/zero"], ["/dev/zero", "character device"]),
    # quantize (-o in the output folder: it must stay empty)
    (["quantize", "-m", "M", "-o", "O", "-p", "int4", "--block-size", "4611686018427387904"],
     ["--block-size", "[16, 65536]"]),
    (["quantize", "-m", "M", "-o", "O", "-p", "int4", "--block-size", "131072"], ["--block-size", "131072"]),
    (["quantize", "-m", "M", "-o", "O", "-p", "int4", "--block-size", "48"], ["--block-size", "power of two"]),
    (["quantize", "-m", "M", "-o", "O", "-p", "int4", "--bits", "4294967300"], ["--bits", "4294967300"]),
    (["quantize", "-m", "M", "-o", "O", "-p", "int4", "--bits", "5"], ["--bits", "4 or 8"]),
    (["quantize", "-m", "M", "-o", "O", "-p", "int8", "--method", "percentile", "--percentile", "nan"],
     ["--percentile", "nan"]),
    (["quantize", "-m", "M", "-o", "O", "-p", "int8", "--method", "percentile", "--percentile", "0x1p3"],
     ["--percentile", "0x1p3"]),
    (["quantize", "-m", "M", "-o", "O", "-p", "int4", "--accuracy-level", "18446744073709551617"],
     ["--accuracy-level", "[0, 4]"]),
    (["quantize", "-m", "M", "-o", "O", "-p", "int4", "--symmetric", "--asymmetric"],
     ["--symmetric and --asymmetric"]),
    (["quantize", "-m", "M", "-o", "O", "-p", "int8", "--reduce-range", "--no-reduce-range"],
     ["--reduce-range and --no-reduce-range"]),
    (["quantize", "-m", "M", "-o", "O", "-p", "int8", "--keep-io-types", "--fp16-io"], ["--keep-io-types"]),
    (["quantize", "-m", "M", "-o", "O", "-p", "int8", "--samples", HUGE], ["--samples", HUGE]),
    (["quantize", "-m", "M", "-o", "O", "-p", "int8", "--report", "D"], ["not a regular file"]),
    (["quantize", "-m", "M", "-o", "O", "-p", "int8", "--report", "O"], ["--report", "(-o)"]),
    (["quantize", "-m", "M", "-o", "O", "-p", "int8", "--report", "M"], ["not a JSON file"]),
    # optimize
    (["optimize", "-m", "M", "-o", "O", "--fold-max-bytes", "-1"], ["--fold-max-bytes", "'-1'"]),
    (["optimize", "-m", "M", "-o", "O", "--fold-max-bytes", "99999999999999999999"], ["--fold-max-bytes"]),
    (["optimize", "-m", "M", "-o", "O", "--fold-max-bytes", "0x10"], ["--fold-max-bytes", "0x10"]),
    (["optimize", "-m", "M", "-o", "O", "--report", "D"], ["not a regular file"]),
    (["optimize", "-m", "M", "-o", "O", "--report", "O"], ["--report", "(-o)"]),
    # tokenize
    (["tokenize", "-m", "T", "--text", "a", "--pad-to", "100000000"], ["--pad-to", "[0, 1048576]"]),
    (["tokenize", "-m", "T", "--text", "a", "--pad-to", "2147483647"], ["--pad-to"]),
    (["tokenize", "-m", "T", "--text", "a", "--max-length", "1e12"], ["--max-length", "1e12"]),
    # generate's list flags and contradictions (checked before the model is read)
    (["generate", "-m", "M", "--ids", "1", "--ids", "2"], ["--ids given twice"]),
    (["generate", "-m", "M", "--ids", "1", "--prompt", "a"], ["--prompt and --ids"]),
    (["generate", "-m", "M", "--ids", "1,,2"], ["--ids", "'1,,2'"]),
    (["generate", "-m", "M", "--ids", "1", "--eos", "2147483648"], ["--eos", "2147483648"]),
    (["generate", "-m", "M", "--ids", "1", "--temperature", "0x10"], ["--temperature", "0x10"]),
    # one -m, one -o
    (["build", "-m", "C", "-o", "O", "--output-dir", "D/other"], ["-o given twice", "--output-dir"]),
    (["inspect", "-m", "M", "-m", "C"], ["-m given twice"]),
    # catalog
    (["catalog", "-t", "text-generatoin"], ["-t", "text-generatoin"]),
    # JSON results never replace the model's files
    (["inspect", "-m", "C", "-o", "C/config.json"], ["config.json", "a file of the model"]),
    (["config", "-m", "C", "-o", "C/config.json"], ["config.json", "a file of the model"]),
    (["tokenize", "-m", "T", "--text", "a", "-o", "T/tokenizer.json"], ["tokenizer.json", "a file of the model"]),
]


def _argv(args, models, out_dir):
    sub = dict(models, O=str(out_dir / "out.onnx"), D=str(out_dir))
    res = []
    for a in args:
        if a in sub:
            res.append(sub[a])
        elif a.startswith(("C/", "T/", "D/")):
            res.append(os.path.join(sub[a[0]], a[2:]))
        else:
            res.append(a)
    return res


def _digest(folder):
    return {n: hashlib.sha256(open(os.path.join(folder, n), "rb").read()).hexdigest()
            for n in sorted(os.listdir(folder)) if os.path.isfile(os.path.join(folder, n))}


@pytest.mark.parametrize("args,needles", CASES, ids=[" ".join(c[0][:1] + c[0][3:])[:60] for c in CASES])
def test_hostile_flag_is_a_usage_error(wm, models, tmp_path, args, needles):
    out = tmp_path / "o"
    out.mkdir()
    before = {k: _digest(models[k]) for k in ("T", "C")}
    model_bytes = open(models["M"], "rb").read()
    r, cpu, rss = U.run_measured([wm, *_argv(args, models, out)], timeout=60)
    line = U.assert_clean_error(r, "winml " + args[0], *needles)
    assert needles[0].lower() in line.lower()
    assert os.listdir(out) == [], f"{args}: left {os.listdir(out)}"
    assert {k: _digest(models[k]) for k in ("T", "C")} == before
    assert open(models["M"], "rb").read() == model_bytes
    assert cpu < 20 and rss < 1 << 30, f"{args}: {cpu:.1f} s CPU, {rss >> 20} MiB before the usage error"


def test_json_result_may_be_a_new_file_in_the_model_folder(winml, models, tmp_path):
    """The guard protects the model's files, not its folder: a new result file there is written; a result
    elsewhere is replaced run after run."""
    ck = models["C"]
    new = os.path.join(ck, "inspect_result.json")
    try:
        r = U.run([winml, "inspect", "-m", ck, "-o", new, "-q"])
        assert r.returncode == 0, U.describe(r)
        assert json.load(open(new))["model_type"] == "llama"
    finally:
        if os.path.exists(new):
            os.unlink(new)
    elsewhere = tmp_path / "r.json"
    for _ in range(2):
        r = U.run([winml, "inspect", "-m", ck, "-o", elsewhere, "-q"])
        assert r.returncode == 0, U.describe(r)


def test_bounds_are_not_refused_below_them(winml, models, tmp_path):
    """The bounds cut hostile values only: values at the edge the commands serve still run."""
    r = U.run([winml, "perf", "-m", models["M"], "--warmup", "0", "--iterations", "3", "--seq-len", "4",
               "--duration", "0.05", "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    r = U.run([winml, "quantize", "-m", models["M"], "-o", tmp_path / "q.onnx", "-p", "int4", "--block-size", "64",
               "--bits", "8", "--accuracy-level", "4", "--symmetric", "--symmetric", "-q"])
    assert r.returncode == 0, U.describe(r)
    r = U.run([winml, "optimize", "-m", models["M"], "-o", tmp_path / "o.onnx", "--fold-max-bytes", "0", "-q"])
    assert r.returncode == 0, U.describe(r)
    r = U.run([winml, "tokenize", "-m", models["T"], "--text", "a b", "--pad-to", "6", "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    assert json.loads(r.stdout)["ids"] == [0, 1, 0, 0, 0, 0]  # `tokenizers`' enable_padding(length=6): pad_id 0
