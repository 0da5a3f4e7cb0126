"""Messages a user can act on (issue 30): bad input gets one line naming the file, the field and
the reason, exit code 2, and nothing half-written - under the normal and the ASan+UBSan builds.

  - config.json / generation_config.json numbers: non-finite literals (1e999) and values out of
    their meaning's range (rope_scaling factor 0 or negative, rope_theta 0, top_p 1.5) are refused
    naming the field and the value;
  - a FIFO or a folder where a checkpoint file belongs is said to be one ("is a FIFO (a regular file
    is needed)"), never "missing", and opening it never blocks;
  - errors while running a model (run, generate, perf, eval) name the model file;
  - `run -m BUILD/model.onnx` is accepted like `-m BUILD`; an .onnx file without tokenizer files
    next to it gets a message saying what run needs;
  - numeric flags name the flag, the value and the accepted range.
The hub's size checks are in test_hub.py (they need its local hub server).
"""
import json
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import oracle_util as U


def run(wm, *args, timeout=60):
    return U.run([wm, *args], timeout=timeout)


# --------------------------------------------------------------------------- checkpoints

CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
          "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "silu"}


def checkpoint(tmp_path, config_text=None, **files):
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "config.json").write_text(config_text if config_text is not None else json.dumps(CONFIG))
    for name, text in files.items():
        (d / name.replace("__", ".")).write_text(text)
    return d


def config_error(wm, ckpt, tmp_path, *needles):
    """`winml config -m CKPT -o OUT` fails cleanly and writes no OUT (nor a temporary of it)."""
    out = tmp_path / "recipe.json"
    r = run(wm, "config", "-m", ckpt, "-o", out)
    U.assert_clean_error(r, "winml config", *needles)
    assert not list(tmp_path.glob("recipe.json*")), "nothing may be written on an error"
    return r


def with_config(**kv):
    c = dict(CONFIG)
    c.update(kv)
    return json.dumps(c)


def test_valid_checkpoint_is_accepted(wm, tmp_path):
    """The control: the same checkpoint with sane values passes (so the refusals below are about the values)."""
    ck = checkpoint(tmp_path, with_config(rope_scaling={"rope_type": "linear", "factor": 2.0}))
    r = run(wm, "config", "-m", ck)
    assert r.returncode == 0 and not U.crashed(r), U.describe(r)


@pytest.mark.parametrize("text,needles", [
    # a literal beyond the double range: cJSON makes it inf; it used to say "expected a number, got a number"
    (with_config().replace('"rope_theta": 10000.0', '"rope_theta": 1e999'),
     ("config.json: field 'rope_theta': 1e999 is not a finite number",)),
    (with_config(rope_scaling={"rope_type": "linear", "factor": 2.0}).replace('"factor": 2.0', '"factor": -1e999'),
     ("field 'rope_scaling.factor': -1e999 is not a finite number",)),
    (with_config().replace('"hidden_size": 64', '"hidden_size": 1e400'),
     ("field 'hidden_size': 1e400 is not a finite number",)),
    # positive-only values: a factor of 0 or below, a base of 0, a fraction over 1
    (with_config(rope_scaling={"rope_type": "linear", "factor": 0}),
     ("field 'rope_scaling.factor': 0 is out of range", "> 0")),
    (with_config(rope_scaling={"rope_type": "dynamic", "factor": -2.5}),
     ("field 'rope_scaling.factor': -2.5 is out of range", "> 0")),
    (with_config(rope_theta=0), ("field 'rope_theta': 0 is out of range", "> 0")),
    (with_config(partial_rotary_factor=1.5), ("field 'partial_rotary_factor': 1.5 is out of range", "(0, 1]")),
    (with_config(rope_scaling={"rope_type": "longrope", "short_factor": [1, 0], "long_factor": [1, 1],
                               "original_max_position_embeddings": 128}),
     ("field 'rope_scaling.short_factor[1]': 0 is out of range",)),
])
def test_config_numbers(wm, tmp_path, text, needles):
    config_error(wm, checkpoint(tmp_path, text), tmp_path, *needles)


def test_generation_config_numbers(wm, tmp_path):
    ck = checkpoint(tmp_path, generation_config__json='{"top_p": 1.5, "temperature": 0.7}')
    config_error(wm, ck, tmp_path, "generation_config.json: field 'top_p': 1.5 is out of range", "[0, 1]")
    (ck / "generation_config.json").write_text('{"temperature": 1e999}')
    config_error(wm, ck, tmp_path, "generation_config.json: field 'temperature': 1e999 is not a finite number")


@pytest.mark.parametrize("name", ["config.json", "generation_config.json", "tokenizer_config.json"])
@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_checkpoint_file_that_is_not_a_file(wm, tmp_path, name, kind):
    """A FIFO (with no writer: opening it blocking would hang) or a folder in place of a checkpoint file: said
    what it is, promptly; never "missing" and never skipped as if absent."""
    ck = checkpoint(tmp_path)
    p = ck / name
    if p.exists():
        p.unlink()
    if kind == "fifo":
        os.mkfifo(p)
    else:
        p.mkdir()
    want = "is a FIFO (a regular file is needed)" if kind == "fifo" else "is a folder (a regular file is needed)"
    r = config_error(wm, ck, tmp_path, f"{name}: {want}")
    assert "missing" not in r.stderr


# --------------------------------------------------------------------------- build folders and run-time errors

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "whales", "breathe"]


def encoder_model(rows):
    """input_ids [1, S] -> Gather from a [rows, 4] table -> hidden [1, S, 4]: with fewer rows than the vocab,
    ids past the table fail while the model runs (Gather: index out of range)."""
    table = numpy_helper.from_array(np.arange(rows * 4, dtype=np.float32).reshape(rows, 4) / 10, "emb")
    g = helper.make_graph([helper.make_node("Gather", ["emb", "input_ids"], ["last_hidden_state"])], "enc",
                          [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "S"])],
                          [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [1, "S", 4])],
                          [table])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def decoder_model(rows):
    """A causal LM with one layer of KV cache: logits = Gather(emb, input_ids); present = Concat(past, new), the new
    keys and values also gathered by id - ids past the table fail while the model runs."""
    emb = numpy_helper.from_array(-np.arange(rows * 8, dtype=np.float32).reshape(rows, 8) / 10, "emb")  # argmax 0
    kv = numpy_helper.from_array(np.ones((rows, 2), dtype=np.float32), "kv")
    axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["logits"]),
             helper.make_node("Gather", ["kv", "input_ids"], ["k0"]),
             helper.make_node("Unsqueeze", ["k0", "axes"], ["k1"])]
    ins = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "S"])]
    outs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "S", 8])]
    for which in ("key", "value"):
        nodes.append(helper.make_node("Concat", [f"past_key_values.0.{which}", "k1"], [f"present.0.{which}"], axis=2))
        ins.append(helper.make_tensor_value_info(f"past_key_values.0.{which}", TensorProto.FLOAT, [1, 1, "P", 2]))
        outs.append(helper.make_tensor_value_info(f"present.0.{which}", TensorProto.FLOAT, [1, 1, "T", 2]))
    g = helper.make_graph(nodes, "dec", ins, outs, [emb, kv, axes])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def build_folder(tmp_path, rows, name="b", decoder=False):
    d = tmp_path / name
    d.mkdir()
    onnx.save(decoder_model(rows) if decoder else encoder_model(rows), d / "model.onnx")
    (d / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (d / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    (d / "winml_build_config.json").write_text('{"loader": {"task": "feature-extraction"}}')
    return d


def test_run_accepts_an_onnx_file_in_a_build_folder(wm, tmp_path):
    """`run -m BUILD/model.onnx` runs what `run -m BUILD` runs (it used to say "model.onnx/model.onnx: Not a
    directory")."""
    b = build_folder(tmp_path, rows=len(VOCAB))
    outs = []
    for m in (b, b / "model.onnx"):
        r = run(wm, "run", "-m", m, "--text", "hello whales", "-f", "json")
        assert r.returncode == 0 and not U.crashed(r), U.describe(r)
        outs.append(json.loads(r.stdout)["results"])
    assert outs[0] == outs[1]


def test_run_onnx_without_tokenizer_says_what_run_needs(wm, tmp_path):
    d = tmp_path / "lone"
    d.mkdir()
    onnx.save(encoder_model(4), d / "x.onnx")
    r = run(wm, "run", "-m", d / "x.onnx", "--text", "hello")
    U.assert_clean_error(r, "winml run", str(d), "tokenizer")
    assert "Not a directory" not in r.stderr
    r = run(wm, "run", "-m", d, "--text", "hello")  # a folder without model.onnx
    U.assert_clean_error(r, "winml run", f"{d}: a folder without model.onnx", "tokenizer files")
    r = run(wm, "run", "-m", tmp_path / "nothing", "--text", "hello")
    U.assert_clean_error(r, "winml run", "no such file or folder")


def test_run_time_errors_name_the_model_file(wm, tmp_path):
    """A model that fails while it runs (its embedding table is shorter than the vocab): run, eval --mode task and
    generate name the model file in the message, with the engine's reason."""
    b = build_folder(tmp_path, rows=4)
    model = str(b / "model.onnx")
    r = run(wm, "run", "-m", b, "--text", "whales breathe")
    U.assert_clean_error(r, "winml run", model, "out of range")
    ds = tmp_path / "sts.csv"
    ds.write_text("sentence1,sentence2,score\nwhales breathe,hello world,1.0\n")
    r = run(wm, "eval", "--mode", "task", "-m", b, "--dataset", ds)
    U.assert_clean_error(r, "winml eval", model, "out of range")
    g = build_folder(tmp_path, rows=4, name="g", decoder=True)
    r = run(wm, "generate", "-m", g, "--ids", "1", "--max-new-tokens", "2", "-f", "json")  # the control: in range
    assert r.returncode == 0 and not U.crashed(r), U.describe(r)
    r = run(wm, "generate", "-m", g, "--ids", "7", "--max-new-tokens", "1")
    U.assert_clean_error(r, "winml generate", str(g / "model.onnx"), "out of range")


def test_perf_and_eval_compare_errors_name_the_model_file(wm, tmp_path):
    """A Reshape that only fails for the size given at run time (--dim N=2 into [3])."""
    g = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"])], "r",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
                          [numpy_helper.from_array(np.array([3], dtype=np.int64), "shape")])
    p = tmp_path / "reshape.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), p)
    r = run(wm, "perf", "-m", p, "--dim", "N=2", "--iterations", "1", "--warmup", "0")
    U.assert_clean_error(r, "winml perf", str(p))
    r = run(wm, "eval", "-m", p, "--reference", p, "--dim", "N=2", "--samples", "1")
    U.assert_clean_error(r, "winml eval", str(p))


# --------------------------------------------------------------------------- flags

@pytest.mark.parametrize("args,prog,needles", [
    (["run", "-m", "x", "--text", "t", "--threads", "abc"], "winml run", ("--threads: 'abc' is not an integer",)),
    (["run", "-m", "x", "--text", "t", "--threads", "100000"], "winml run", ("--threads: '100000'", "[0, 256]")),
    (["generate", "-m", "x", "--ids", "1", "--temperature", "-1"], "winml generate",
     ("--temperature: '-1' is not a number",)),
    (["generate", "-m", "x", "--ids", "1", "--max-new-tokens", "1e999"], "winml generate",
     ("--max-new-tokens: '1e999' is not an integer",)),
    (["generate", "-m", "x", "--ids", "1", "--top-p", "nan"], "winml generate", ("--top-p: 'nan'",)),
    (["generate", "-m", "x", "--ids", "1", "--repetition-penalty", "0"], "winml generate",
     ("--repetition-penalty: '0'", "(0, ")),
    (["eval", "--mode", "task", "-m", "x", "--dataset", "d", "--samples", "x"], "winml eval",
     ("--samples: 'x' is not an integer",)),
    (["run", "-qZ", "-m", "x", "--text", "t"], "winml run", ("unknown option '-Z'",)),
])
def test_flag_values_name_the_flag(wm, args, prog, needles):
    r = run(wm, *args)
    U.assert_clean_error(r, prog, *needles)
