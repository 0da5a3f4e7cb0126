"""`winml generate` (the CausalLM runner: prefill + decode steps over a KV cache kept in two bound
buffer sets, or in one appended in place when GroupQueryAttention reads the past) against
transformers' generate: greedy decoding must give the same tokens, token for token, for tiny random
gpt2 / llama / qwen2 / qwen3 exported with their KV cache, and for the GroupQueryAttention-fused
graphs; sampling with a seed repeats; eos stops the loop."""
import copy
import json
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import oracle_util as U  # noqa: E402

VOCAB = 160
MODELS = {
    "gpt2": dict(n_embd=48, n_layer=2, n_head=4, n_positions=128),
    "llama": dict(hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128),
    "qwen2": dict(hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128),
    "qwen3": dict(hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, max_position_embeddings=128),
}


def export_with_past(model, cfg, path):
    L = cfg.num_hidden_layers
    nkv = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads

    class WithPast(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, *past):
            cache = transformers.DynamicCache()
            for i in range(L):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
            res = [out.logits]
            for layer in out.past_key_values.layers:
                res += [layer.keys, layer.values]
            return tuple(res)

    names = [f"past_key_values.{i}.{k}" for i in range(L) for k in ("key", "value")]
    onames = ["logits"] + [f"present.{i}.{k}" for i in range(L) for k in ("key", "value")]
    dyn = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total_sequence"}}
    dyn.update({n: {0: "batch", 2: "past_sequence"} for n in names})
    past = [torch.randn(1, nkv, 3, hd) for _ in range(2 * L)]
    torch.onnx.export(WithPast(model), (torch.randint(0, VOCAB, (1, 2)), torch.ones(1, 5, dtype=torch.long), *past),
                      str(path), input_names=["input_ids", "attention_mask"] + names, output_names=onames,
                      dynamic_axes=dyn, opset_version=17, dynamo=False)


@pytest.fixture(scope="module", params=sorted(MODELS))
def decoder(request):
    torch.manual_seed(1)
    cfg = transformers.AutoConfig.for_model(request.param, vocab_size=VOCAB, **MODELS[request.param])
    m = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    path = U.scratch(request, request.param) / "model.onnx"
    # export a copy: tracing leaves the traced module altered (gpt2's generate changes after it)
    export_with_past(copy.deepcopy(m), cfg, path)
    return m, path


def generate(winml, path, ids, *extra):
    r = subprocess.run([winml, "generate", "-m", str(path), "--ids", ",".join(map(str, ids)), "-f", "json", *extra],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("prompt_len", [1, 7])
def test_greedy_matches_transformers(winml, decoder, prompt_len):
    m, path = decoder
    rng = np.random.default_rng(prompt_len)
    prompt = rng.integers(0, VOCAB, prompt_len).tolist()
    with torch.no_grad():
        ref = m.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, prompt_len, dtype=torch.long),
                         max_new_tokens=32, min_new_tokens=32, do_sample=False, eos_token_id=None, pad_token_id=0)
    want = ref[0, prompt_len:].tolist()
    got = generate(winml, path, prompt, "--max-new-tokens", "32")
    assert got["ids"] == want
    assert got["prompt_tokens"] == prompt_len and got["stop"] == "length"


def test_sampling_seed_repeats_and_eos_stops(winml, decoder):
    m, path = decoder
    a = generate(winml, path, [3, 4, 5], "--max-new-tokens", "20", "--temperature", "0.9", "--top-k", "40",
                 "--top-p", "0.95", "--seed", "7")
    b = generate(winml, path, [3, 4, 5], "--max-new-tokens", "20", "--temperature", "0.9", "--top-k", "40",
                 "--top-p", "0.95", "--seed", "7")
    c = generate(winml, path, [3, 4, 5], "--max-new-tokens", "20", "--temperature", "5", "--seed", "8")
    assert a["ids"] == b["ids"] and len(a["ids"]) == 20
    assert all(0 <= t < VOCAB for t in c["ids"])
    greedy = generate(winml, path, [3, 4, 5], "--max-new-tokens", "10")["ids"]
    stop = generate(winml, path, [3, 4, 5], "--max-new-tokens", "10", "--eos", str(greedy[2]))
    assert stop["ids"] == greedy[:greedy.index(greedy[2]) + 1] and stop["stop"] == "eos"


def test_cache_overflow_is_a_clear_error(winml, decoder):
    _, path = decoder
    r = subprocess.run([winml, "generate", "-m", str(path), "--ids", "1,2,3", "--max-new-tokens", "5",
                        "--max-length", "4"], capture_output=True, text=True)
    assert r.returncode == 2 and "max length" in r.stderr


@pytest.fixture(scope="module", params=["gpt2", "llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3_text"])
def fused_decoder(request, winml):
    """`winml build` of a tiny checkpoint (default recipe: attention fused into GroupQueryAttention, whose past
    the runner binds as one max-length cache that each step appends to in place). mistral, gemma2 and gemma3_text
    have sliding layers (window 4: local_window_size), gemma2 soft-caps its scores (softcap)."""
    import builder_util as BU
    d = U.scratch(request, request.param + "_gqa")
    m = BU.make_tiny(request.param, str(d / "hf"), seed=3)
    r = subprocess.run([winml, "build", "-m", str(d / "hf"), "-o", str(d / "build"), "-q", "-f", "json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    optim = {st["name"]: st for st in json.loads(r.stdout)["stages"]}["optim"]
    assert optim["ops"].get("GroupQueryAttention") == m.config.num_hidden_layers, optim["ops"]
    return m, d / "build"


def test_in_place_cache_greedy_matches_transformers(winml, fused_decoder, monkeypatch):
    """The in-place cache (one buffer set) gives transformers' tokens, and the same tokens as the two-set form and
    as every-position logits (the runner's steps narrow the head to the last position unless WM_LOGITS_ALL)."""
    m, path = fused_decoder
    prompt = np.random.default_rng(5).integers(3, m.config.vocab_size, 9).tolist()
    with torch.no_grad():
        ref = m.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, 9, dtype=torch.long), max_new_tokens=40,
                         min_new_tokens=40, do_sample=False, eos_token_id=None, pad_token_id=0)
    want = ref[0, 9:].tolist()
    assert generate(winml, path, prompt, "--max-new-tokens", "40")["ids"] == want
    monkeypatch.setenv("WM_KV_COPY", "1")
    assert generate(winml, path, prompt, "--max-new-tokens", "40")["ids"] == want
    monkeypatch.delenv("WM_KV_COPY")
    monkeypatch.setenv("WM_LOGITS_ALL", "1")
    assert generate(winml, path, prompt, "--max-new-tokens", "40")["ids"] == want
    monkeypatch.delenv("WM_LOGITS_ALL")
    r = subprocess.run([winml, "perf", "-m", str(path), "--warmup", "1", "--iterations", "2", "--seq-len", "4",
                        "--prompt-len", "8", "--gen-len", "4", "--llm-runs", "1", "--decode-at", "16", "-f", "json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    llm = json.loads(r.stdout)["llm"]
    assert llm["kv_cache"] == "in_place" and llm["decode_at_context"][0]["decode_tokens_per_sec"] > 0
    assert llm["logits"] == "last_position"


def test_plain_export_uses_two_buffer_sets(winml, decoder):
    m, path = decoder
    r = subprocess.run([winml, "perf", "-m", str(path), "--warmup", "1", "--iterations", "2", "--seq-len", "4",
                        "--prompt-len", "8", "--gen-len", "4", "--llm-runs", "1", "-f", "json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    llm = json.loads(r.stdout)["llm"]
    assert llm["kv_cache"] == "double_buffer"
    assert llm["logits"] == "last_position"  # torch.onnx's head: MatMul straight on [B, S, H]


def built_head_last_position(winml, tmp_path, kind, seed, prec):
    """A tiny KIND checkpoint built at PREC, whose head perf reports narrowed to the last position:
    (the transformers model, the build folder)."""
    import builder_util as BU
    m = BU.make_tiny(kind, str(tmp_path / "hf"), seed=seed)
    path = tmp_path / "b"
    r = subprocess.run([winml, "build", "-m", str(tmp_path / "hf"), "-o", str(path), "-p", prec, "-q"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([winml, "perf", "-m", str(path), "--warmup", "1", "--iterations", "2", "--seq-len", "4",
                        "--prompt-len", "8", "--gen-len", "4", "--llm-runs", "1", "-f", "json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["llm"]["logits"] == "last_position"
    return m, path


def test_fp16_build_narrows_the_head_through_its_cast(winml, tmp_path, monkeypatch):
    """An fp16 build ends Gemm -> Reshape -> Cast(float32) -> logits: the runner narrows that head too (perf says
    last_position), and greedy tokens are the same as with every position's logits."""
    _, path = built_head_last_position(winml, tmp_path, "qwen2", 4, "fp16")
    prompt = list(range(5, 14))
    want = generate(winml, path, prompt, "--max-new-tokens", "20")["ids"]
    monkeypatch.setenv("WM_LOGITS_ALL", "1")
    assert generate(winml, path, prompt, "--max-new-tokens", "20")["ids"] == want


@pytest.mark.parametrize("prec", ["fp32", "fp16"])
def test_softcapped_head_is_narrowed(winml, tmp_path, monkeypatch, prec):
    """Gemma 2 soft-caps its logits (Gemm -> Div -> Tanh -> Mul -> Reshape [-> Cast] -> logits): the cap acts row by
    row, so the runner still narrows the head to the last position (perf says last_position); greedy tokens equal
    transformers' (fp32) and those of every position's logits."""
    m, path = built_head_last_position(winml, tmp_path, "gemma2", 6, prec)
    prompt = list(range(5, 14))
    got = generate(winml, path, prompt, "--max-new-tokens", "20", "--eos", "999999")["ids"]
    if prec == "fp32":
        with torch.no_grad():
            ref = m.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, 9, dtype=torch.long),
                             max_new_tokens=20, min_new_tokens=20, do_sample=False, eos_token_id=None, pad_token_id=0)
        assert got == ref[0, 9:].tolist()
    monkeypatch.setenv("WM_LOGITS_ALL", "1")
    assert generate(winml, path, prompt, "--max-new-tokens", "20", "--eos", "999999")["ids"] == got


def test_int8_build_narrows_its_quantized_head(winml, tmp_path, monkeypatch):
    """A dynamically quantized build's head (`winml quantize -p int8-dynamic` of an fp32 build; `build -p int8-rtn` writes
    MatMulNBits bits 8 since int8 u8s8 products went wrong in onnxruntime) is DynamicQuantizeLinear ->
    MatMulInteger -> Cast -> Mul (the tied table quantized for MatMulInteger): the runner narrows it to the last
    position too, and greedy tokens equal those of every position's logits (only the prefill's activation scale
    differs: the last row's own, as in a decode step)."""
    import shutil
    import builder_util as BU
    import onnx
    BU.make_tiny("qwen2", str(tmp_path / "hf"), seed=4)
    r = subprocess.run([winml, "build", "-m", str(tmp_path / "hf"), "-o", str(tmp_path / "b32"), "-p", "fp32", "-q"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "b8"
    shutil.copytree(tmp_path / "b32", path)
    r = subprocess.run([winml, "quantize", "-m", str(tmp_path / "b32" / "model.onnx"), "-o", str(path / "model.onnx"),
                        "-p", "int8-dynamic", "-q", "--overwrite"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    ops = [n.op_type for n in onnx.load(str(path / "model.onnx"), load_external_data=False).graph.node]
    assert "Gemm" not in ops and "MatMul" not in ops and ops.count("MatMulInteger") == 7 * 2 + 1
    r = subprocess.run([winml, "perf", "-m", str(path), "--warmup", "1", "--iterations", "2", "--seq-len", "4",
                        "--prompt-len", "8", "--gen-len", "4", "--llm-runs", "1", "-f", "json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["llm"]["logits"] == "last_position"
    for start in (5, 30):
        prompt = list(range(start, start + 9))
        want = generate(winml, path, prompt, "--max-new-tokens", "20")["ids"]
        monkeypatch.setenv("WM_LOGITS_ALL", "1")
        assert generate(winml, path, prompt, "--max-new-tokens", "20")["ids"] == want
        monkeypatch.delenv("WM_LOGITS_ALL")


def clm_cut(testtool, path, n, k, m, env=None):
    import os
    r = subprocess.run([testtool, "clm-cut", str(path), str(n), str(k), str(m)], capture_output=True, text=True,
                       timeout=300, env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("kv_copy", [False, True])
def test_cache_cut_continues_as_a_fresh_sequence(testtool, fused_decoder, kv_copy):
    """wm_clm_truncate (perf's --decode-at rounds cut the cache back): after 30 tokens cut to 12, the next 5
    steps give the logits of 12 tokens + those 5 in one prefill, in place and in the two-set form (whose past is
    packed by its length, so a cut moves each head's rows); without the cut they differ (control)."""
    _, path = fused_decoder
    got = clm_cut(testtool, path, 30, 12, 5, {"WM_KV_COPY": "1"} if kv_copy else None)
    assert got["inplace"] == (0 if kv_copy else 1)
    assert got["diff_cut"] <= 1e-4 * max(1.0, got["scale"]), got
    assert got["diff_nocut"] > 1e-2 * got["scale"], got
    assert got["over_error"] == 1


def test_cache_cut_concat_graph(testtool, decoder):
    _, path = decoder
    got = clm_cut(testtool, path, 20, 7, 4)
    assert got["inplace"] == 0
    assert got["diff_cut"] <= 1e-4 * max(1.0, got["scale"]), got
    assert got["diff_nocut"] > 1e-2 * got["scale"], got


# ---- the model's context (issue 30: never crash, never run away) ----

def with_config(path, m, dst, genai_context=None):
    """The exported decoder in folder dst with the model's config.json (its context: max_position_embeddings /
    n_positions 128), and a genai_config.json naming genai_context when given."""
    import shutil
    dst.mkdir()
    shutil.copy(path, dst / "model.onnx")
    m.config.to_json_file(str(dst / "config.json"))
    if genai_context:
        (dst / "genai_config.json").write_text(json.dumps({"model": {"context_length": genai_context}}))
    return dst


@pytest.fixture(params=["normal", "asan"])
def winml_both(request, winml, asan_dir):
    """The normal binary and the ASan+UBSan one (the limits must hold in both)."""
    return winml if request.param == "normal" else U.binary(asan_dir, "winml")


def test_prompt_longer_than_the_context_is_refused(winml_both, decoder, tmp_path):
    """A prompt of 129 tokens for a model of 128 positions: exit 2 naming both lengths and where the context came
    from (it was run: past the learned position table, or silently past what the model was trained on)."""
    m, path = decoder
    d = with_config(path, m, tmp_path / "m")
    r = subprocess.run([winml_both, "generate", "-m", str(d), "--ids", ",".join(["5"] * 129), "--max-new-tokens", "4"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    assert "129 tokens" in r.stderr and "context of 128 tokens" in r.stderr, r.stderr
    assert "config.json" in r.stderr and "runtime error" not in r.stderr
    d2 = with_config(path, m, tmp_path / "g", genai_context=64)  # genai_config.json comes first
    r = subprocess.run([winml_both, "generate", "-m", str(d2), "--ids", ",".join(["5"] * 65)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "context of 64 tokens" in r.stderr and "genai_config.json" in r.stderr, r.stderr


@pytest.mark.parametrize("name,text,needle", [
    ("genai_config.json", "{not json", "genai_config.json"),
    ("genai_config.json", '{"model": {"context_length": "4k"}}', "model.context_length"),
    ("genai_config.json", '{"model": {"context_length": 1e300}}', "model.context_length"),
    ("config.json", '{"model_type": "llama", "max_position_embeddings": ', "config.json"),
])
def test_unreadable_context_config_is_refused(winml_both, decoder, tmp_path, name, text, needle):
    """A config that is there but cannot be parsed, or a context_length that is not a whole number, is an error
    naming the file (and field): the context is never silently unknown (--eos given, so only the context reads
    the files)."""
    m, path = decoder
    d = with_config(path, m, tmp_path / "m")
    (d / name).write_text(text)
    r = subprocess.run([winml_both, "generate", "-m", str(d), "--ids", "5,6", "--eos", "1", "--max-new-tokens", "2"],
                       capture_output=True, text=True, timeout=300)
    U.assert_clean_error(r, "winml generate", str(d / name), needle)


def test_generation_stops_at_the_context(winml, decoder, tmp_path):
    """Prompt 120 + --max-new-tokens 20 on a 128-token model: the 8 tokens that fit, the same as transformers'
    greedy generate of 8, with "stop": "context" and a note (transformers warns and runs on)."""
    m, path = decoder
    d = with_config(path, m, tmp_path / "m")
    prompt = np.random.default_rng(5).integers(0, VOCAB, 120).tolist()
    with torch.no_grad():
        ref = m.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, 120, dtype=torch.long),
                         max_new_tokens=8, min_new_tokens=8, do_sample=False, eos_token_id=None, pad_token_id=0)
    got = generate(winml, d, prompt, "--max-new-tokens", "20")
    assert got["ids"] == ref[0, 120:].tolist()
    assert got["stop"] == "context" and got["context"] == 128
    assert "8 new, of the 20" in got["note"]
    full = generate(winml, d, prompt[:8], "--max-new-tokens", "120")  # 8 + 120 == 128: all of them fit
    assert len(full["ids"]) == 120 and full["stop"] == "length" and "note" not in full
    at = generate(winml, d, prompt + prompt[:8], "--max-new-tokens", "5")  # a prompt of exactly 128: nothing fits
    assert at["ids"] == [] and at["stop"] == "context"


@pytest.mark.parametrize("flag,value", [("--max-new-tokens", "1e30"), ("--max-new-tokens", "9999999999"),
                                        ("--max-length", "1e300"), ("--top-k", "1e19"), ("--threads", "inf"),
                                        ("--temperature", "nan")])
def test_extreme_counts_are_usage_errors(winml_both, decoder, flag, value):
    """Counts past int32 (and NaN) are refused before anything is allocated; they were converted to long
    (undefined for 1e30) and sized the cache and the output buffer."""
    _, path = decoder
    r = subprocess.run([winml_both, "generate", "-m", str(path), "--ids", "1,2", flag, value],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    assert flag in r.stderr and "runtime error" not in r.stderr, r.stderr
