"""winml inspect / config / export / build on checkpoints: the seed architectures (config.json from the
published figures), the checked-in recipes, the build folder (manifest digests, genai_config, tokenizer
files, atomic replacement), external data, and hostile or unsupported checkpoints (exit 2, one line
naming the problem, nothing left behind; run under ASan+UBSan when that build exists).

Parameter counts are checked against transformers itself: the model class instantiated on the meta
device from the same config (no weights allocated).
"""
import glob
import hashlib
import json
import os
import shutil
import struct

import numpy as np
import onnx
import pytest

import builder_util as BU
import oracle_util as U

ROOT = U.ROOT
RECIPES = os.path.join(ROOT, "examples", "recipes", "cross-encoder_mmarco-mMiniLMv2-L12-H384-v1", "cpu", "cpu")


@pytest.fixture(scope="module")
def seeds(request):
    d = U.scratch(request, "seeds")
    return {name: BU.seed_dir(str(d), name) for name in BU.SEEDS}


def meta_param_count(folder):
    import torch
    import transformers as T
    cfg = T.AutoConfig.from_pretrained(folder)
    cls = getattr(T, cfg.architectures[0])
    with torch.device("meta"):
        m = cls(cfg)
    return sum(p.numel() for p in m.parameters())  # shared (tied) parameters are listed once


@pytest.mark.parametrize("name", sorted(BU.SEEDS))
def test_inspect_seed_checkpoint(name, seeds, winml):
    d = seeds[name]
    info = U.inspect_json(winml, d)
    cfg = BU.SEEDS[name]
    assert info["format"] == "hf"
    assert info["model_type"] == cfg["model_type"]
    assert info["inference_class"] == cfg["architectures"][0]
    assert info["weights"] is None
    want = meta_param_count(d)
    assert info["parameters"] == want, (info["parameters"], want)
    assert info["size_bytes"]["fp32"] == 4 * want
    assert info["external_data"] == (4 * want >= 100 << 20)
    assert info["over_protobuf_limit"] == (4 * want > 2**31 - 1)
    if cfg["model_type"] == "xlm-roberta":
        assert info["task"] == "text-classification" and info["family"] == "encoder"
        assert [(i["name"], i["dtype"], i["shape"]) for i in info["inputs"]] == [
            ("input_ids", "int32", [1, 512]), ("attention_mask", "int32", [1, 512])]
        assert info["outputs"] == [{"name": "logits", "dtype": "float32", "shape": [1, 1]}]
    else:
        assert info["task"] == "text-generation" and info["family"] == "decoder"
        L = cfg.get("num_hidden_layers", cfg.get("n_layer"))
        assert len(info["inputs"]) == 3 + 2 * L and len(info["outputs"]) == 1 + 2 * L
        kv = info["inputs"][3]
        heads = cfg.get("num_attention_heads", cfg.get("n_head"))
        hd = cfg.get("head_dim") or cfg.get("hidden_size", cfg.get("n_embd")) // heads
        assert kv["shape"] == ["batch_size", cfg.get("num_key_value_heads", heads), "past_sequence_length", hd]
        feats = " ".join(info["features"])
        assert ("RMSNorm" in feats) == (cfg["model_type"] != "gpt2")
        assert ("q/k RMSNorm" in feats) == (cfg["model_type"] in ("qwen3", "gemma3_text"))
        assert ("RMSNorm (1 + weight)" in feats) == cfg["model_type"].startswith("gemma")
        assert ("q/k/v bias" in feats) == (cfg["model_type"] in ("qwen2", "gpt2"))


@pytest.mark.parametrize("name", sorted(BU.SEEDS))
def test_config_seed_checkpoint(name, seeds, winml, tmp_path):
    out = tmp_path / "recipe.json"
    r = U.run([winml, "config", "-m", seeds[name], "-o", str(out)])
    assert r.returncode == 0, U.describe(r)
    rec = json.load(open(out))
    assert set(rec) == {"loader", "export", "optim", "quant", "compile", "eval"}
    assert rec["quant"] is None and rec["compile"] == {"ep_config": {"provider": "cpu", "device": "cpu"}}
    assert rec["export"]["opset_version"] == 17 and rec["export"]["batch_size"] == 1
    ids = rec["export"]["input_tensors"][0]
    if BU.SEEDS[name]["model_type"] == "xlm-roberta":
        assert ids == {"name": "input_ids", "dtype": "int32", "shape": [1, 512], "value_range": [0, 250002]}
    else:
        assert ids["shape"] == ["batch_size", "sequence_length"]


def test_checked_in_recipes_are_what_config_writes(seeds, winml):
    d = seeds["cross-encoder/mmarco-mMiniLMv2-L12-H384-v1"]
    for prec in ("fp32", "fp16"):
        r = U.run([winml, "config", "-m", d, "-p", prec, "--ep", "cpu", "--device", "cpu"])
        assert r.returncode == 0, U.describe(r)
        with open(os.path.join(RECIPES, f"text-classification_{prec}_config.json")) as f:
            assert json.load(f) == json.loads(r.stdout), prec


def test_build_accepts_checked_in_recipes(seeds, winml, winml_asan, tmp_path):
    """fp32 and fp16 builds from the checked-in recipes (random weights, external data; the normal build:
    470 MB under ASan is slow): optimized and still valid ONNX; fp16 halves the weights and keeps float32 IO."""
    d = seeds["cross-encoder/mmarco-mMiniLMv2-L12-H384-v1"]
    out = tmp_path / "mm"
    r = U.run([winml, "build", "-m", d, "-o", str(out), "-c",
               os.path.join(RECIPES, "text-classification_fp32_config.json"), "--random-weights", "-f", "json"])
    assert r.returncode == 0 and not U.crashed(r), U.describe(r)
    man = json.loads(r.stdout)
    assert man["stages"][0]["external_data"] is True
    onnx.checker.check_model(str(out / "model.onnx"), full_check=True)
    assert man["stages"][0]["nodes"] < 686  # the reference exporter's graph of this model had 686 nodes
    st = {s["name"]: s for s in man["stages"]}
    assert st["optim"]["status"] == "completed" and st["optim"]["nodes"] < st["export"]["nodes"]
    feeds = {"input_ids": np.full((1, 512), 5, np.int32), "attention_mask": np.ones((1, 512), np.int32)}
    res = BU.run_ort(str(out / "model.onnx"), feeds)
    assert res["logits"].shape == (1, 1) and np.isfinite(res["logits"]).all()
    r = U.run([winml, "build", "-m", d, "-o", str(tmp_path / "mm16"), "-c",
               os.path.join(RECIPES, "text-classification_fp16_config.json"), "--random-weights", "-f", "json"])
    assert r.returncode == 0 and not U.crashed(r), U.describe(r)
    man16 = json.loads(r.stdout)
    assert man16["precision"] == "fp16" and {s["name"]: s for s in man16["stages"]}["quant"]["status"] == "completed"
    assert os.path.getsize(tmp_path / "mm16" / "model.onnx.data") < 0.55 * os.path.getsize(out / "model.onnx.data")
    res16 = BU.run_ort(str(tmp_path / "mm16" / "model.onnx"), feeds)
    assert res16["logits"].dtype == np.float32 and abs(float(res16["logits"][0, 0] - res["logits"][0, 0])) < 0.05
    r = U.run([winml_asan, "build", "-m", d, "-o", str(tmp_path / "bad"), "-c",
               os.path.join(RECIPES, "text-classification_fp16_config.json"), "-p", "int4", "--random-weights"])
    U.assert_clean_error(r, "winml build", "-p int4", "disagrees")
    assert not os.path.exists(tmp_path / "bad")
    assert not glob.glob(str(tmp_path / "*winml-tmp*"))


# ---------------------------------------------------------------- the build folder

@pytest.fixture(scope="module")
def tiny_ckpt(request):
    d = str(U.scratch(request, "tiny") / "qwen2")
    BU.make_tiny("qwen2", d)
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump({"version": "1.0", "model": {"type": "BPE", "vocab": {}, "merges": []}}, f)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "<|im_end|>", "chat_template": [{"name": "default", "template": "{{x}}"}],
                   "model_max_length": 128}, f)
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": [7, 9], "bos_token_id": 1, "top_k": 20, "temperature": 0.7, "do_sample": True}, f)
    return d


def test_build_folder(tiny_ckpt, winml, tmp_path):
    out = tmp_path / "out"
    r = U.run([winml, "build", "-m", tiny_ckpt, "-o", str(out), "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    man = json.loads(r.stdout)
    assert json.load(open(out / "build_manifest.json"))["artifacts"] == man["artifacts"]
    files = sorted(os.listdir(out))
    assert files == sorted(["model.onnx", "winml_build_config.json", "build_manifest.json", "genai_config.json",
                            "tokenizer.json", "tokenizer_config.json", "generation_config.json", "config.json"])
    for a in man["artifacts"]:
        data = open(out / a["file"], "rb").read()
        assert a["bytes"] == len(data) and a["sha256"] == hashlib.sha256(data).hexdigest(), a["file"]
    st = {s["name"]: s for s in man["stages"]}
    assert st["export"]["status"] == "completed" and sum(st["export"]["ops"].values()) == st["export"]["nodes"]
    assert st["optim"]["status"] == "completed" and st["optim"]["nodes"] == len(onnx.load(out / "model.onnx").graph.node)
    assert sum(st["optim"]["ops"].values()) == st["optim"]["nodes"] < st["export"]["nodes"]
    assert st["quant"]["status"] == "skipped" and st["compile"]["status"] == "skipped" and st["compile"]["winml_status"] == "not run"
    assert "compile: not run" in r.stderr  # said on stderr too
    g = json.load(open(out / "genai_config.json"))
    dec = g["model"]["decoder"]
    assert (dec["num_hidden_layers"], dec["num_key_value_heads"], dec["head_size"]) == (2, 2, 8)
    assert dec["inputs"]["past_key_names"] == "past_key_values.%d.key"
    assert dec["outputs"]["present_value_names"] == "present.%d.value"
    assert g["model"]["eos_token_id"] == [7, 9] and g["search"]["top_k"] == 20
    # the optimized decoder appends to its KV cache in place (GroupQueryAttention), as genai_config says
    assert "GroupQueryAttention" in st["optim"]["ops"] and g["search"]["past_present_share_buffer"] is True
    # the resolved recipe rebuilds the same bytes
    out2 = tmp_path / "out2"
    r = U.run([winml, "build", "-m", tiny_ckpt, "-o", str(out2), "-c", str(out / "winml_build_config.json"), "-q"])
    assert r.returncode == 0, U.describe(r)
    assert open(out / "model.onnx", "rb").read() == open(out2 / "model.onnx", "rb").read()


def test_existing_folder_and_rebuild(tiny_ckpt, winml_asan, tmp_path):
    out = tmp_path / "out"
    args = [winml_asan, "build", "-m", tiny_ckpt, "-o", str(out), "-q"]
    assert U.run(args).returncode == 0
    # the same build again: the folder is reused as it is (the reference's build cache, by cache_key)
    before = {f: os.stat(out / f).st_mtime_ns for f in os.listdir(out)}
    r = U.run(args + ["-f", "json"])
    assert r.returncode == 0 and not U.crashed(r), U.describe(r)
    man = json.loads(r.stdout)
    assert man["reused"] is True and man["cache_key"] == json.load(open(out / "build_manifest.json"))["cache_key"]
    assert {f: os.stat(out / f).st_mtime_ns for f in os.listdir(out)} == before
    # another recipe (here the precision), or a checkpoint changed since: refused without --rebuild
    U.assert_clean_error(U.run(args + ["-p", "fp16"]), "winml build", "already exists", "cache_key", "--rebuild")
    cfg = os.path.join(tiny_ckpt, "config.json")
    st = os.stat(cfg)
    os.utime(cfg, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    try:
        U.assert_clean_error(U.run(args), "winml build", "already exists", "--rebuild")
    finally:
        os.utime(cfg, ns=(st.st_atime_ns, st.st_mtime_ns))
    # a build folder tampered with is not reused: it is refused, naming the file
    kept = (out / "model.onnx").read_bytes()
    (out / "model.onnx").write_bytes(kept + b"x")
    U.assert_clean_error(U.run(args), "winml build", "model.onnx", "changed since")
    (out / "model.onnx").write_bytes(kept)
    r = U.run(args + ["--rebuild"])
    assert r.returncode == 0 and not U.crashed(r), U.describe(r)
    other = tmp_path / "not_a_build"
    other.mkdir()
    (other / "precious.txt").write_text("keep me")
    r = U.run([winml_asan, "build", "-m", tiny_ckpt, "-o", str(other), "--rebuild"])
    U.assert_clean_error(r, "winml build", "not a winml build folder")
    assert (other / "precious.txt").read_text() == "keep me"
    assert not glob.glob(str(tmp_path / "*winml-tmp*")) and not glob.glob(str(tmp_path / "*winml-old*"))


def test_export_command(tiny_ckpt, winml, tmp_path):
    out = tmp_path / "exp"
    r = U.run([winml, "export", "-m", tiny_ckpt, "-o", str(out), "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    # the model and the manifest that lets a later --rebuild know the folder is ours
    assert sorted(os.listdir(out)) == ["build_manifest.json", "model.onnx"]
    man = json.load(open(out / "build_manifest.json"))
    assert man["tool"] == "winml" and [a["file"] for a in man["artifacts"]] == ["model.onnx"]
    assert [s["name"] for s in man["stages"]] == ["export"] and man == json.loads(r.stdout)
    onnx.checker.check_model(str(out / "model.onnx"), full_check=True)


def test_external_data_random_weights_deterministic(winml, tmp_path):
    """A model over the 100 MiB threshold streams its weights to model.onnx.data; the seed decides the bytes."""
    d = tmp_path / "big"
    d.mkdir()
    cfg = dict(BU.SEEDS["trl-internal-testing/tiny-Qwen2ForCausalLM-2.5"], hidden_size=192, vocab_size=151936)
    json.dump(cfg, open(d / "config.json", "w"))
    shas = []
    for i, seed in enumerate(["3", "3", "4"]):
        out = tmp_path / f"o{i}"
        argv = [winml, "build", "-m", str(d), "-o", str(out), "--random-weights", "--seed", seed, "-f", "json"]
        if i == 1:  # the portable SHA-256 (no SHA-NI) must give the same digests; --sync (fsync) the same bytes
            argv = ["env", "WM_SHA256_GENERIC=1", *argv, "--sync"]
        r = U.run(argv)
        assert r.returncode == 0, U.describe(r)
        man = json.loads(r.stdout)
        assert man["stages"][0]["external_data"] is True
        arts = {a["file"]: a for a in man["artifacts"]}
        assert arts["model.onnx"]["bytes"] < 1 << 20 and arts["model.onnx.data"]["bytes"] >= 100 << 20
        shas.append(arts["model.onnx.data"]["sha256"])
    assert shas[0] == shas[1] != shas[2]
    with open(tmp_path / "o0" / "model.onnx.data", "rb") as f:
        h = hashlib.sha256()
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    assert h.hexdigest() == shas[0]
    onnx.checker.check_model(str(tmp_path / "o0" / "model.onnx"), full_check=True)
    feeds = {"input_ids": np.array([[1, 2, 3]], np.int64), "attention_mask": np.ones((1, 3), np.int64),
             "position_ids": np.array([[0, 1, 2]], np.int64)}
    for i in range(2):
        for k in ("key", "value"):
            feeds[f"past_key_values.{i}.{k}"] = np.zeros((1, 2, 0, 48), np.float32)
    res = BU.run_ort(str(tmp_path / "o0" / "model.onnx"), feeds)
    assert res["logits"].shape == (1, 3, 151936) and np.isfinite(res["logits"]).all()


# ---------------------------------------------------------------- hostile and unsupported checkpoints

def _st_rewrite(path, edit):
    """Rewrites a safetensors file after edit(dict name -> np.ndarray) (raw writer, no torch)."""
    from safetensors.numpy import load_file, save_file
    t = load_file(path)
    edit(t)
    save_file(t, path)


@pytest.fixture
def ckpt(tmp_path):
    d = str(tmp_path / "ck")
    BU.make_tiny("llama", d)
    return d




def _all_commands(winml, d, tmp_path, *needles):
    for cmd in (["inspect", "-m", d], ["config", "-m", d], ["build", "-m", d, "-o", str(tmp_path / "o")]):
        r = U.run([winml, *cmd])
        U.assert_clean_error(r, "winml " + cmd[0], *needles)
    assert not os.path.exists(tmp_path / "o") and not glob.glob(str(tmp_path / "*winml-tmp*"))


def test_unknown_model_type(ckpt, winml_asan, tmp_path):
    BU.edit_config(ckpt, model_type="frobnicator")
    os.remove(os.path.join(ckpt, "model.safetensors"))
    _all_commands(winml_asan, ckpt, tmp_path, "model_type", "frobnicator", "not supported")


def test_unknown_model_type_with_unknown_tensor_names(ckpt, winml_asan, tmp_path):
    BU.edit_config(ckpt, model_type="frobnicator")
    _st_rewrite(os.path.join(ckpt, "model.safetensors"),
                lambda t: t.update({k.replace("layers", "blocks"): t.pop(k) for k in list(t)}))
    _all_commands(winml_asan, ckpt, tmp_path, "frobnicator", "naming scheme")


def test_unknown_model_type_with_known_naming_builds(ckpt, winml, tmp_path):
    """'any checkpoint using one of these naming schemes': an unlisted model_type with Llama-style tensors."""
    BU.edit_config(ckpt, model_type="my-llama-variant")
    r = U.run([winml, "build", "-m", ckpt, "-o", str(tmp_path / "o"), "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    assert "naming scheme 'llama'" in r.stderr


def test_denied_model_type_with_known_naming(ckpt, winml_asan, tmp_path):
    BU.edit_config(ckpt, model_type="nemotron")
    _all_commands(winml_asan, ckpt, tmp_path, "model_type", "nemotron", "not supported")


def test_multiplier_outside_granite_refused(ckpt, winml_asan, tmp_path):
    """Granite's multipliers are a feature of its table row: another family's config holding one is refused,
    never built without it."""
    BU.edit_config(ckpt, residual_multiplier=0.5)
    _all_commands(winml_asan, ckpt, tmp_path, "residual_multiplier", "not supported")


@pytest.fixture
def gemma3_ckpt(tmp_path):
    d = str(tmp_path / "g3")
    BU.make_tiny("gemma3_text", d)
    return d


@pytest.mark.parametrize("change,needles", [
    ({"use_bidirectional_attention": True}, ["use_bidirectional_attention", "not supported"]),
    ({"final_logit_softcapping": -1.0}, ["final_logit_softcapping", "out of range"]),
    ({"query_pre_attn_scalar": "256"}, ["query_pre_attn_scalar", "expected a number"]),
    ({"layer_types": None, "sliding_window_pattern": 1e9}, ["sliding_window_pattern", "[1, 4096]"]),
    ({"rope_parameters": {"full_attention": {"rope_theta": 1e6}, "sliding_attention": {"rope_theta": 0.5}}},
     ["rope_parameters.sliding_attention.rope_theta", "must be > 1"]),
    ({"rope_parameters": {"sliding_attention": {"rope_type": "yarn"}}}, ["rope_parameters.sliding_attention",
                                                                        "factor", "missing"]),
    ({"rope_parameters": {"full_attention": {}, "sliding": {}}}, ["rope_parameters.sliding", "unexpected"]),
    ({"hidden_activation": "mish"}, ["hidden_activation", "mish", "not supported"]),
])
def test_gemma3_bad_config(gemma3_ckpt, winml_asan, tmp_path, change, needles):
    BU.edit_config(gemma3_ckpt, **change)
    _all_commands(winml_asan, gemma3_ckpt, tmp_path, *needles)


def test_gemma3_missing_sandwich_norm(gemma3_ckpt, winml_asan, tmp_path):
    """The post-sublayer norms are part of the scheme: a checkpoint without one is refused by name."""
    _st_rewrite(os.path.join(gemma3_ckpt, "model.safetensors"),
                lambda t: t.pop("model.layers.1.post_feedforward_layernorm.weight"))
    r = U.run([winml_asan, "build", "-m", gemma3_ckpt, "-o", str(tmp_path / "o")])
    U.assert_clean_error(r, "winml build", "missing tensor", "model.layers.1.post_feedforward_layernorm.weight",
                         "gemma2")
    assert not os.path.exists(tmp_path / "o")


def test_missing_tensor(ckpt, winml_asan, tmp_path):
    _st_rewrite(os.path.join(ckpt, "model.safetensors"), lambda t: t.pop("model.layers.1.self_attn.k_proj.weight"))
    r = U.run([winml_asan, "build", "-m", ckpt, "-o", str(tmp_path / "o")])
    U.assert_clean_error(r, "winml build", "missing tensor", "model.layers.1.self_attn.k_proj.weight")
    assert not os.path.exists(tmp_path / "o")


def test_wrong_tensor_shape(ckpt, winml_asan, tmp_path):
    def edit(t):
        t["model.layers.0.mlp.up_proj.weight"] = np.zeros((65, 32), np.float32)
    _st_rewrite(os.path.join(ckpt, "model.safetensors"), edit)
    r = U.run([winml_asan, "build", "-m", ckpt, "-o", str(tmp_path / "o")])
    U.assert_clean_error(r, "winml build", "model.layers.0.mlp.up_proj.weight", "[65, 32]", "[64, 32]")


def test_tensor_not_understood(ckpt, winml_asan, tmp_path):
    def edit(t):
        t["model.layers.0.post_feedforward_layernorm.weight"] = np.ones(32, np.float32)
    _st_rewrite(os.path.join(ckpt, "model.safetensors"), edit)
    r = U.run([winml_asan, "build", "-m", ckpt, "-o", str(tmp_path / "o")])
    U.assert_clean_error(r, "winml build", "model.layers.0.post_feedforward_layernorm.weight", "not understood")


def test_auto_map_refused(ckpt, winml_asan, tmp_path):
    BU.edit_config(ckpt, auto_map={"AutoModelForCausalLM": "modeling_x.XForCausalLM"})
    os.remove(os.path.join(ckpt, "model.safetensors"))
    open(os.path.join(ckpt, "pytorch_model.bin"), "wb").write(b"PK\x03\x04 not a real pickle")
    _all_commands(winml_asan, ckpt, tmp_path, "auto_map", "custom")


def test_pickle_weights_refused(ckpt, winml_asan, tmp_path):
    os.remove(os.path.join(ckpt, "model.safetensors"))
    open(os.path.join(ckpt, "pytorch_model.bin"), "wb").write(b"\x80\x02 pickle bytes")
    r = U.run([winml_asan, "build", "-m", ckpt, "-o", str(tmp_path / "o")])
    U.assert_clean_error(r, "winml build", "pytorch_model.bin", "pickle", "safetensors")


def test_deep_nesting_config(ckpt, winml_asan, tmp_path):
    with open(os.path.join(ckpt, "config.json"), "w") as f:
        f.write('{"model_type": "llama", "x": ' + "[" * 100000 + "]" * 100000 + "}")
    _all_commands(winml_asan, ckpt, tmp_path, "config.json", "nested deeper")


@pytest.mark.parametrize("change,needles", [
    ({"hidden_size": "32"}, ["hidden_size", "expected an integer"]),
    ({"num_key_value_heads": 3}, ["num_key_value_heads", "does not divide"]),
    ({"hidden_act": "mish"}, ["hidden_act", "mish", "not supported"]),
    ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}}, ["rope_type", "dynamic"]),
    ({"use_parallel_residual": True}, ["use_parallel_residual", "not supported"]),
    ({"vocab_size": None}, ["vocab_size", "missing"]),
    ({"eos_token_id": [1, "two"]}, ["eos_token_id", "expected an integer"]),
])
def test_bad_config_fields(change, needles, ckpt, winml_asan, tmp_path):
    BU.edit_config(ckpt, **change)
    _all_commands(winml_asan, ckpt, tmp_path, *needles)


@pytest.mark.parametrize("text,needles", [
    ('{"version": "1.0", "model": ' + "[" * 100000 + "]" * 100000 + "}", ["tokenizer.json", "nested deeper"]),
    (json.dumps({"version": "1.0", "model": {"type": "WordLevel", "vocab": {"a": 2 ** 40}, "unk_token": "a"}}),
     ["tokenizer.json", "model.vocab", "id must be an integer"]),
    (json.dumps({"version": "1.0", "model": {"type": "WordLevel", "vocab": {"a": -5}, "unk_token": "a"}}),
     ["tokenizer.json", "model.vocab", "id must be an integer"]),
], ids=["deep", "id_2_40", "id_negative"])
def test_malformed_tokenizer_refused_before_the_build(text, needles, ckpt, winml_asan, tmp_path):
    """A checkpoint's tokenizer.json that our loader refuses as malformed: build copied it as it was (exit 0) and
    only run / generate refused it later; now build refuses it first, naming the file and field, writing nothing."""
    with open(os.path.join(ckpt, "tokenizer.json"), "w") as f:
        f.write(text)
    r = U.run([winml_asan, "build", "-m", ckpt, "-o", str(tmp_path / "o")])
    U.assert_clean_error(r, "winml build", *needles)
    assert not os.path.exists(tmp_path / "o") and not glob.glob(str(tmp_path / "*winml-tmp*"))


def test_unsupported_tokenizer_is_carried_with_a_note(ckpt, winml, tmp_path):
    """A well-formed tokenizer.json of a model type the loader does not support is carried as it is, with a note
    naming it (a real model is not refused for a tokenizer only our run / generate would use)."""
    tok = {"version": "1.0", "model": {"type": "Frob", "vocab": {"a": 0}}}
    with open(os.path.join(ckpt, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
    r = U.run([winml, "build", "-m", ckpt, "-o", str(tmp_path / "o")])
    assert r.returncode == 0, U.describe(r)
    assert "unsupported model 'Frob'" in r.stderr and "carried as they are" in r.stderr, U.describe(r)
    with open(tmp_path / "o" / "tokenizer.json") as f:
        assert json.load(f) == tok


def test_duplicate_config_key(ckpt, winml_asan, tmp_path):
    p = os.path.join(ckpt, "config.json")
    text = open(p).read().rstrip().rstrip("}") + ', "hidden_size": 64}'
    open(p, "w").write(text)
    _all_commands(winml_asan, ckpt, tmp_path, "hidden_size", "twice")


@pytest.mark.parametrize("edit,needles", [
    (lambda r: r["export"].update(opset_version="17"), ["export.opset_version", "expected an integer"]),
    (lambda r: r["export"].update(opset_version=9), ["export.opset_version", "[17, 23]"]),
    (lambda r: r.update(extra=1), ["'extra'", "unknown field"]),
    (lambda r: r["export"]["input_tensors"][0].update(dtype="int8"), ["dtype", "int8"]),
    (lambda r: r["export"]["input_tensors"].pop(1), ["attention_mask", "missing"]),
    (lambda r: r["export"]["input_tensors"].append(dict(r["export"]["input_tensors"][0], name="foo")),
     ["'foo'", "not an input"]),
    (lambda r: r["loader"].update(model_type="bert"), ["loader.model_type", "bert"]),
    (lambda r: r["optim"].update(warp_drive=True), ["optim.warp_drive", "unknown field"]),
    (lambda r: r["export"]["input_tensors"][3].update(shape=["batch_size", 3, "past_sequence_length", 8]),
     ["past_key_values.0.key", "expected float32"]),
])
def test_bad_recipe(edit, needles, ckpt, winml_asan, tmp_path):
    r = U.run([winml_asan, "config", "-m", ckpt])
    rec = json.loads(r.stdout)
    edit(rec)
    p = tmp_path / "bad_recipe.json"
    json.dump(rec, open(p, "w"))
    r = U.run([winml_asan, "build", "-m", ckpt, "-c", str(p), "-o", str(tmp_path / "o")])
    U.assert_clean_error(r, "winml build", *needles)
    assert not os.path.exists(tmp_path / "o")


def test_truncated_safetensors(ckpt, winml_asan, tmp_path):
    p = os.path.join(ckpt, "model.safetensors")
    data = open(p, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    open(p, "wb").write(data[: 8 + n + 100])
    r = U.run([winml_asan, "build", "-m", ckpt, "-o", str(tmp_path / "o")])
    U.assert_clean_error(r, "winml build", "model.safetensors")
    assert not os.path.exists(tmp_path / "o")


@pytest.mark.parametrize("name", ["cross-encoder/mmarco-mMiniLMv2-L12-H384-v1", "openai-community/gpt2"])
def test_list_tasks_groups(name, seeds, winml):
    """--list-tasks: the tasks the checkpoint's family serves (an encoder lists no image task, a decoder only
    text-generation), and for each, the reference's task names it serves (task_groups)."""
    r = U.run([winml, "inspect", "-m", seeds[name], "--list-tasks", "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    j = json.loads(r.stdout)
    if j["model_type"] == "gpt2":
        assert j["tasks"] == ["text-generation"] and j["task_groups"] == {"text-generation": ["text-generation"]}
        return
    assert not [t for t in j["tasks"] if t.startswith("image") or "image" in t], j["tasks"]
    assert j["task_groups"]["feature-extraction"] == ["feature-extraction", "sentence-similarity"]
    assert j["task_groups"]["text-classification"] == ["text-classification", "zero-shot-classification",
                                                       "text-ranking"]
    assert set(j["task_groups"]) == set(j["tasks"])


@pytest.mark.parametrize("change,needle", [({"symmetric": True}, "symmetric is true"),
                                           ({"rtn_gptq": True}, "rtn_gptq is true"),
                                           ({"rtn_bits": 8}, "rtn_bits is 8")])
def test_float_zero_points_conflicts_refused(tiny_ckpt, winml, winml_asan, tmp_path, change, needle):
    """Float zero points (opt-in: quant.rtn_float_zero_points) apply to asymmetric 4-bit rounding only: a recipe
    that also asks for symmetric weights, GPTQ or 8 bits is refused naming both fields, never built with one
    silently dropped."""
    r = U.run([winml, "config", "-m", tiny_ckpt, "-p", "int4"])
    assert r.returncode == 0, U.describe(r)
    rec = json.loads(r.stdout)
    rec["quant"]["rtn_float_zero_points"] = True
    rec["quant"].update(change)
    p = tmp_path / "r.json"
    p.write_text(json.dumps(rec))
    out = tmp_path / "o"
    U.assert_clean_error(U.run([winml_asan, "build", "-m", tiny_ckpt, "-c", p, "-o", out]), "winml build",
                         "'quant.rtn_float_zero_points'", needle)
    assert not out.exists()
