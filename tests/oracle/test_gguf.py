"""GGUF end to end (issue 31): winml reads a .gguf as a checkpoint, against gguf-py and transformers.

  - dequantization of every supported type against gguf-py's gguf.quants.dequantize, bit for bit (blocks made by
    gguf.quants.quantize where gguf-py can quantize the type, random blocks with finite scales for the K types,
    every 16-bit pattern for F16 / BF16);
  - SmolLM2-135M-Instruct (Q4_1/Q8_0 GGUF, llama architecture, gpt2 tokenizer; tests/oracle/real_weights.py): the
    checkpoint view's tensors equal transformers' dequantized checkpoint (hf_from_gguf) exactly, Q/K included;
    `winml build -p fp32` logits within 1e-4 of transformers on that checkpoint (onnxruntime and our engine);
    greedy 64 tokens identical to transformers' generate on 5 prompts, with and without --chat;
  - tokenizers: the tokenizer.json + tokenizer_config.json made from the metadata give the ids of transformers'
    GGUF tokenizer over the tokenizer corpus (tests/oracle/tok_corpus.py), through our C tokenizer and through the
    `tokenizers` library, for SmolLM2 (gpt2 byte-level) and Gemma 3 (SentencePiece-style, merges rebuilt from the
    vocabulary), and for SentencePiece vocabularies trained here written as llama and phi3 GGUFs (merges from scores);
  - the default build (precision gguf) carries SmolLM2's Q4_1 / Q8_0 blocks into MatMulNBits and
    GatherBlockQuantized without requantizing: the manifest's per-tensor record, the blocks dequantized by numpy equal
    to transformers' weights (Q8_0 bit for bit, Q4_1 within 1e-6 of max |w|), onnxruntime running the build with
    logits that agree with our engine's, greedy 64 tokens identical to transformers in at least 9 of 10 runs and
    perplexity (our engine and onnxruntime) within 0.5% of transformers' float32;
  - `winml inspect` of a GGUF; hostile files through the CLI under ASan: one clear line, exit 2, nothing written.

WM_WEIGHTS_CACHE names the weight cache (real_weights.py); WM_TOK_LINES the corpus slice (default 2000).
"""
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_util as U  # noqa: E402
import gguf_carry_util as C  # noqa: E402
import real_weights as RW  # noqa: E402
import tok_corpus  # noqa: E402

import gguf  # the oracle venv has it: missing is a failure, not a skip
from gguf import GGMLQuantizationType as T  # noqa: E402

LINES = int(os.environ.get("WM_TOK_LINES", "2000"))
PROMPTS = ["What is the capital of France?", "Write a Python function that reverses a string.",
           "Explique la photosynthèse en deux phrases.", "List three prime numbers greater than 100.",
           "<|im_start|>Tell me a short story about a robot 🤖 and a cat.<|im_end|>"]


def tool(build_dir):
    p = os.path.join(build_dir, "wm_ggufttool")
    if not os.access(p, os.X_OK):
        pytest.fail(f"wm_ggufttool not found at {p} (build the tests/tools targets)", pytrace=False)
    return p


def run_ok(argv, timeout=1200):
    r = U.run(argv, timeout=timeout)
    assert r.returncode == 0, U.describe(r)
    return r


# ---------------------------------------------------------------- dequantization against gguf-py

def _k_blocks(rng, t, n_blocks):
    """Random blocks of a K type with finite f16 scales (gguf-py cannot quantize these types)."""
    bs, ts = gguf.GGML_QUANT_SIZES[t]
    raw = rng.integers(0, 256, size=(n_blocks, ts), dtype=np.uint8)
    def f16(n):
        return (rng.uniform(-2, 2, size=n) * 10.0 ** rng.integers(-4, 1, size=n)).astype(np.float16).view(np.uint8).reshape(n, 2)
    if t in (T.Q4_K, T.Q5_K):
        raw[:, 0:2], raw[:, 2:4] = f16(n_blocks), f16(n_blocks)
    else:  # Q6_K: d last
        raw[:, ts - 2:] = f16(n_blocks)
    return raw


def test_dequant_matches_gguf_py(build_dir, tmp_path):
    rng = np.random.default_rng(31)
    w = gguf.GGUFWriter(str(tmp_path / "q.gguf"), "llama")
    want = {}
    rows, cols = 6, 1024
    for t in (T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1):
        for k, x in enumerate([rng.standard_normal((rows, cols)).astype(np.float32) * 3,
                               (rng.standard_normal((rows, cols)) * 1e-3 + 5).astype(np.float32)]):
            name = f"{t.name}.{k}"
            if t == T.F32:
                b = x
            elif t == T.F16:
                b = x.astype(np.float16)
            else:
                b = gguf.quants.quantize(x, t)
            w.add_tensor(name, b, raw_dtype=None if t in (T.F32, T.F16) else t)
            want[name] = gguf.quants.dequantize(b if t not in (T.F32, T.F16) else b.view(np.uint8), t) \
                if t not in (T.F32, T.F16) else b.astype(np.float32)
    for t in (T.F16, T.BF16):  # every 16-bit pattern: subnormals, infinities, NaNs
        pat = np.arange(65536, dtype=np.uint16).reshape(64, 1024)
        name = f"{t.name}.all"
        w.add_tensor(name, pat.view(np.uint8) if t == T.BF16 else pat.view(np.float16),
                     raw_dtype=t if t == T.BF16 else None)
        want[name] = gguf.quants.dequantize(pat.view(np.uint8), t)
    for t in (T.Q4_K, T.Q5_K, T.Q6_K):
        raw = _k_blocks(rng, t, rows * 4).reshape(rows, -1)
        name = f"{t.name}.rand"
        w.add_tensor(name, raw, raw_dtype=t)
        want[name] = gguf.quants.dequantize(raw, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    for name, ref in want.items():
        out = tmp_path / (name + ".bin")
        run_ok([tool(build_dir), "dequant", tmp_path / "q.gguf", name, out])
        got = np.fromfile(out, dtype=np.float32).reshape(ref.shape)
        same = (got == ref) | (np.isnan(got) & np.isnan(ref))
        assert same.all(), f"{name}: {int((~same).sum())} values differ, first at {np.argwhere(~same)[0]}: " \
                           f"{got[tuple(np.argwhere(~same)[0])]} vs {ref[tuple(np.argwhere(~same)[0])]}"


# ---------------------------------------------------------------- SmolLM2: weights, logits, generation

@pytest.fixture(scope="module")
def smollm2(request, winml):
    path = RW.smollm2_gguf()
    hf = RW.hf_from_gguf(path)
    out = U.scratch(request, "smollm2") / "build"
    t0 = time.time()
    r = run_ok([winml, "build", "-m", path, "-o", out, "-p", "fp32", "-f", "json"])
    secs = time.time() - t0
    U.note(f"SmolLM2 GGUF -> winml build -p fp32: {secs:.1f} s")
    return path, hf, out, json.loads(r.stdout)


def test_smollm2_view_equals_transformers_weights(smollm2, build_dir, tmp_path):
    """The tensors the builder reads (dequantized, Q/K un-permuted) are transformers' float weights exactly."""
    from safetensors.numpy import load_file
    path, hf, _, _ = smollm2
    ref = load_file(os.path.join(hf, "model.safetensors"))
    names = ["model.embed_tokens.weight", "model.norm.weight"] + [
        f"model.layers.{i}.{m}.weight" for i in (0, 17, 29) for m in
        ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
         "mlp.up_proj", "mlp.down_proj", "input_layernorm", "post_attention_layernorm")]
    for n in names:
        out = tmp_path / "t.bin"
        run_ok([tool(build_dir), "hf", path, n, out])
        got = np.fromfile(out, dtype=np.float32).reshape(ref[n].shape)
        assert np.array_equal(got, ref[n]), f"{n}: max diff {np.abs(got - ref[n]).max()}"


def test_smollm2_build_manifest(smollm2):
    _, _, out, man = smollm2
    assert man["source_format"] == "gguf" and man["model_type"] == "llama" and man["precision"] == "fp32"
    files = {a["file"] for a in man["artifacts"]}
    assert {"model.onnx", "model.onnx.data", "tokenizer.json", "tokenizer_config.json", "config.json",
            "generation_config.json", "genai_config.json"} <= files
    cfg = json.load(open(os.path.join(out, "config.json")))
    assert cfg["model_type"] == "llama" and cfg["num_key_value_heads"] == 3 and cfg["tie_word_embeddings"] is True
    tc = json.load(open(os.path.join(out, "tokenizer_config.json")))
    assert tc["eos_token"] == "<|im_end|>" and "<|im_start|>" in tc["chat_template"]


def _feeds(ids):
    ids = np.asarray([ids], dtype=np.int64)
    f = {"input_ids": ids, "attention_mask": np.ones_like(ids), "position_ids": np.arange(ids.shape[1])[None]}
    for i in range(30):
        f[f"past_key_values.{i}.key"] = np.zeros((1, 3, 0, 64), np.float32)
        f[f"past_key_values.{i}.value"] = np.zeros((1, 3, 0, 64), np.float32)
    return f


def test_smollm2_logits(smollm2, build_dir, tmp_path):
    import torch
    import transformers
    from engine_util import engine_run, ort_run
    _, hf, out, _ = smollm2
    tok = transformers.AutoTokenizer.from_pretrained(hf)
    m = transformers.AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32).eval()
    worst = {"onnxruntime": 0.0, "engine": 0.0}
    for p in PROMPTS[:3]:
        ids = tok(p).input_ids
        with torch.no_grad():
            ref = m(torch.tensor([ids])).logits.numpy()
        feeds = _feeds(ids)
        got = {"onnxruntime": ort_run(os.path.join(out, "model.onnx"), feeds)["logits"],
               "engine": engine_run(build_dir, os.path.join(out, "model.onnx"), feeds, tmp_path)[0]["logits"]}
        for k, v in got.items():
            worst[k] = max(worst[k], float(np.abs(v.astype(np.float64) - ref).max()))
    U.note(f"SmolLM2 GGUF logits max abs diff vs transformers: {worst}")
    # winml's engine within 1e-4 (issue 31). onnxruntime runs the same graph as a second witness; its bound is
    # looser because transformers' own float32 logits lie up to 5.9e-5 from float64 ones on these prompts, so two
    # float32 implementations may differ by twice that without either being wrong (measured: 9.4e-5)
    assert worst["engine"] <= 1e-4, f"engine: logits differ by {worst['engine']}"
    assert worst["onnxruntime"] <= 2e-4, f"onnxruntime: logits differ by {worst['onnxruntime']}"


@pytest.fixture(scope="module")
def smollm2_ref(smollm2):
    import torch
    import transformers
    _, hf, _, _ = smollm2
    tok = transformers.AutoTokenizer.from_pretrained(hf)
    m = transformers.AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32).eval()
    return tok, m


_REF_GEN = {}


def _reference(ref, prompt, chat):
    """transformers' greedy 64 tokens (no end id) for the prompt, as (prompt ids, new ids); computed once."""
    import torch
    tok, m = ref
    if chat:
        text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
        ids = tok(text, add_special_tokens=False).input_ids
    else:
        ids = tok(prompt).input_ids
    if (prompt, chat) not in _REF_GEN:
        with torch.no_grad():
            o = m.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                           do_sample=False, max_new_tokens=64, min_new_tokens=64, eos_token_id=None, pad_token_id=2)
        _REF_GEN[(prompt, chat)] = (ids, o[0, len(ids):].tolist())
    return _REF_GEN[(prompt, chat)]


def _generate(winml, out, prompt, chat):
    r = run_ok([winml, "generate", "-m", out, "--prompt", prompt, "--max-new-tokens", "64", "--eos", "999999",
                "-f", "json"] + (["--chat"] if chat else []))
    return json.loads(r.stdout)


@pytest.mark.parametrize("chat", [False, True], ids=["plain", "chat"])
@pytest.mark.parametrize("k", range(len(PROMPTS)))
def test_smollm2_generate(smollm2, smollm2_ref, winml, k, chat):
    _, _, out, _ = smollm2
    ids, want = _reference(smollm2_ref, PROMPTS[k], chat)
    got = _generate(winml, out, PROMPTS[k], chat)
    assert got["prompt_tokens"] == len(ids)
    agree = next((i for i, (a, b) in enumerate(zip(got["ids"], want)) if a != b), len(want))
    assert got["ids"] == want, f"first {agree} of 64 tokens agree"


# ---------------------------------------------------------------- SmolLM2: the default build carries the GGUF's blocks

@pytest.fixture(scope="module")
def smollm2_carried(request, winml):
    """`winml build -m FILE.gguf` with no -p: precision gguf, the Q4_1 / Q8_0 blocks carried as they are."""
    out = U.scratch(request, "smollm2_carried") / "build"
    t0 = time.time()
    r = run_ok([winml, "build", "-m", RW.smollm2_gguf(), "-o", out, "-f", "json"])
    U.note(f"SmolLM2 GGUF -> winml build (carried): {time.time() - t0:.1f} s")
    return out, json.loads(r.stdout)


def test_smollm2_carried_manifest(smollm2_carried):
    """Every quantized tensor is carried (none requantized, none left float) and the manifest says how: Q4_1 as
    4-bit block 32 with float zero points, the tied Q8_0 embedding as 8-bit block 32 (implicit zero point 128) both
    in the lm_head's MatMulNBits and the GatherBlockQuantized sharing its codes."""
    out, man = smollm2_carried
    assert man["precision"] == "gguf"
    q = next(s for s in man["stages"] if s["name"] == "quant")
    assert q["ops"].get("MatMulNBits") == 211 and q["ops"].get("GatherBlockQuantized") == 1, q["ops"]
    summary = {(e["gguf_type"], e["onnx"], e["result"]): e["tensors"] for e in q["carried"]["summary"]}
    assert summary == {("Q4_1", "MatMulNBits", "carried"): 210, ("Q8_0", "MatMulNBits", "carried"): 1,
                       ("Q8_0", "GatherBlockQuantized", "carried"): 1}, summary
    forms = {t["gguf_type"]: (t["bits"], t["block"], t["zero_points"], t["exact"]) for t in q["carried"]["tensors"]}
    assert forms == {"Q4_1": (4, 32, "float", True), "Q8_0": (8, 32, "none", True)}, forms
    rec = json.load(open(out / "winml_build_config.json"))
    assert rec["quant"]["mode"] == "gguf"


def test_smollm2_carried_weights_exact(smollm2_carried, smollm2):
    """The carried blocks dequantized by numpy are transformers' dequantized weights: Q8_0 bit for bit, Q4_1 (float
    zero point -m/d) within 1e-6 of the largest |w|."""
    out, man = smollm2_carried
    _, hf, _, _ = smollm2
    got = C.check_carried_exact(out, man, hf, lambda w: w.replace(".attn.", ".self_attn."))
    U.note(f"SmolLM2 carried blocks vs transformers' weights (tensors, worst diff / max |w|): {got}")
    assert set(got) == {"Q4_1", "Q8_0"}


def test_smollm2_carried_onnxruntime_and_engine(smollm2_carried, smollm2_ref, build_dir, tmp_path, monkeypatch):
    """onnxruntime runs the carried build, and its logits agree with our engine's on the prompts (and both with
    transformers' on the dequantized weights)."""
    monkeypatch.setenv("WM_NBITS_I15", "0")  # the float32 path (gguf_carry_util.CARRIED_LOGITS_TOL)
    import torch
    from engine_util import engine_run, ort_run
    out, _ = smollm2_carried
    tok, m = smollm2_ref
    worst = {"ort_vs_engine": 0.0, "engine_vs_hf": 0.0, "ort_vs_hf": 0.0}
    for p in PROMPTS[:3]:
        ids = tok(p).input_ids
        with torch.no_grad():
            ref = m(torch.tensor([ids])).logits.numpy().astype(np.float64)
        feeds = _feeds(ids)
        ort = ort_run(os.path.join(out, "model.onnx"), feeds)["logits"].astype(np.float64)
        eng = engine_run(build_dir, os.path.join(out, "model.onnx"), feeds, tmp_path)[0]["logits"].astype(np.float64)
        assert ort.shape == eng.shape == ref.shape
        worst["ort_vs_engine"] = max(worst["ort_vs_engine"], float(np.abs(ort - eng).max()))
        worst["engine_vs_hf"] = max(worst["engine_vs_hf"], float(np.abs(eng - ref).max()))
        worst["ort_vs_hf"] = max(worst["ort_vs_hf"], float(np.abs(ort - ref).max()))
        assert ort[0, -1].argmax() == eng[0, -1].argmax() == ref[0, -1].argmax()
    U.note(f"SmolLM2 carried logits, max abs diff: {worst}")
    assert worst["ort_vs_engine"] <= C.CARRIED_LOGITS_TOL, worst


def test_smollm2_carried_generate(smollm2_carried, smollm2_ref, winml):
    """Greedy 64 tokens of the carried build against transformers on the dequantized weights, 5 prompts plain and
    with --chat: at least 9 of the 10 identical."""
    out, _ = smollm2_carried
    same, firsts = 0, []
    for prompt in PROMPTS:
        for chat in (False, True):
            ids, want = _reference(smollm2_ref, prompt, chat)
            got = _generate(winml, out, prompt, chat)
            assert got["prompt_tokens"] == len(ids)
            same += got["ids"] == want
            firsts.append(next((i for i, (a, b) in enumerate(zip(got["ids"], want)) if a != b), 64))
    U.note(f"SmolLM2 carried build: {same} of 10 greedy runs identical to transformers (first difference at {firsts})")
    assert same >= 9, f"{same} of 10 identical; first differing token per run: {firsts}"


def test_smollm2_carried_perplexity(smollm2_carried, smollm2_ref, winml, tmp_path):
    """Perplexity of the carried build (our engine, and onnxruntime) within 0.5% of transformers' float32 on the
    dequantized weights, over the text and windows of the Gemma 3 perplexity test."""
    out, _ = smollm2_carried
    tok, m = smollm2_ref
    text = C.fortunes_text(3200)
    (tmp_path / "text.txt").write_text(text, encoding="utf-8")
    ids = tok(text, return_tensors="pt").input_ids
    want, count = C.hf_perplexity(m, ids, C.WINDOW, C.STRIDE)
    r = run_ok([winml, "eval", "--mode", "task", "-m", out, "--dataset", tmp_path / "text.txt", "--task",
                "text-generation", "--max-length", str(C.WINDOW), "--stride", str(C.STRIDE), "-f", "json"])
    got = json.loads(r.stdout)["metrics"]
    assert got["tokens"] == ids.size(1) and got["scored_tokens"] == count
    ort, n = C.ort_perplexity(out / "model.onnx", ids[0].tolist(), C.WINDOW, C.STRIDE, *C.decoder_sizes(out))
    assert n == count
    rel, rel_ort = abs(got["perplexity"] - want) / want, abs(ort - want) / want
    U.note(f"SmolLM2 perplexity over {ids.size(1)} tokens (window {C.WINDOW}, stride {C.STRIDE}): transformers fp32 "
           f"{want:.4f}, winml carried {got['perplexity']:.4f} ({rel:+.2%}), onnxruntime carried {ort:.4f} "
           f"({rel_ort:+.2%})")
    assert rel <= 0.005 and rel_ort <= 0.005


# ---------------------------------------------------------------- tokenizers

def _transformers_tok_json(gguf_path):
    """tokenizer.json of transformers' GGUF tokenizer for gguf_path (AutoTokenizer(gguf_file=...)), cached beside
    the file: Gemma's takes minutes to build (merges rebuilt in Python)."""
    out = gguf_path + ".tok"
    done = os.path.join(out, ".complete")
    with RW._Lock():
        if not os.path.exists(done):
            shutil.rmtree(out, ignore_errors=True)
            from transformers import AutoTokenizer
            d, f = os.path.split(gguf_path)
            AutoTokenizer.from_pretrained(d, gguf_file=f).save_pretrained(out)
            open(done, "w").close()
    return os.path.join(out, "tokenizer.json")


def _compare_tokenizer(build_dir, gguf_path, work, lines, ref_json=None):
    """Our made tokenizer (C, and the `tokenizers` library) against transformers' GGUF tokenizer: ids of every
    line with special tokens, and of every line without; returns the agreement counts."""
    from tokenizers import Tokenizer
    import tok_oracle
    made = os.path.join(work, "made")
    os.makedirs(made, exist_ok=True)
    run_ok([tool(build_dir), "made", gguf_path, made])
    ref = Tokenizer.from_file(ref_json or _transformers_tok_json(gguf_path))
    lib = Tokenizer.from_file(os.path.join(made, "tokenizer.json"))
    texts = os.path.join(work, "texts.jsonl")
    with open(texts, "w", encoding="utf-8") as f:
        for s in lines:
            f.write(json.dumps(s, ensure_ascii=False) + "\n")
    os.environ.setdefault("WM_BUILD", build_dir)
    counts = {}
    for special in (True, False):
        want = [e.ids for e in ref.encode_batch(lines, add_special_tokens=special)]
        ours_c = tok_oracle.run_tool(["encode", made, texts] + ([] if special else ["--no-special"]))
        ours_lib = [e.ids for e in lib.encode_batch(lines, add_special_tokens=special)]
        bad_c = [i for i, (o, w) in enumerate(zip(ours_c, want)) if o.get("ids") != w]
        bad_lib = [i for i, (o, w) in enumerate(zip(ours_lib, want)) if o != w]
        counts[special] = (len(lines) - len(bad_c), len(lines) - len(bad_lib))
        assert not bad_c, f"C tokenizer: {len(bad_c)} lines differ, first {lines[bad_c[0]]!r}: " \
                          f"{ours_c[bad_c[0]]} vs {want[bad_c[0]]}"
        assert not bad_lib, f"tokenizers library: {len(bad_lib)} lines differ, first {lines[bad_lib[0]]!r}"
    return counts


@pytest.mark.parametrize("model", ["smollm2", "gemma3"])
def test_tokenizer_matches_transformers(model, build_dir, tmp_path):
    path = RW.smollm2_gguf() if model == "smollm2" else RW.gemma3_gguf()
    lines = tok_corpus.corpus(LINES)
    counts = _compare_tokenizer(build_dir, path, str(tmp_path), lines)
    U.note(f"{model} GGUF tokenizer: ids identical on {counts[True][0]}/{len(lines)} lines (C) and "
           f"{counts[True][1]}/{len(lines)} (tokenizers library) with special tokens, {counts[False][0]}/{len(lines)} "
           f"without")


def _spm_gguf(work, arch):
    """A SentencePiece BPE vocabulary trained here (byte fallback, user-defined and control pieces) written as a
    GGUF of architecture arch with tokenizer.ggml.model "llama" and no merges: the merges are rebuilt from scores."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2
    src = os.path.join(work, "train.txt")
    with open(src, "w", encoding="utf-8") as f:
        f.write("\n".join(s.replace("\n", " ") for s in tok_corpus.training_lines(4000, seed=7)) + "\n")
    prefix = os.path.join(work, "spm")
    spm.SentencePieceTrainer.train(input=src, model_prefix=prefix, vocab_size=3000, model_type="bpe",
                                   byte_fallback=True, character_coverage=0.9995, num_threads=1, minloglevel=2,
                                   user_defined_symbols=["<think>", "</think>"], control_symbols=["<|ctl|>"])
    proto = sentencepiece_model_pb2.ModelProto()
    with open(prefix + ".model", "rb") as f:
        proto.ParseFromString(f.read())
    kind = {1: 1, 2: 2, 3: 3, 4: 4, 6: 6}  # NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE: llama.cpp's numbering
    toks = [p.piece for p in proto.pieces]
    path = os.path.join(work, f"spm-{arch}.gguf")
    w = gguf.GGUFWriter(path, arch)
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores([p.score for p in proto.pieces])
    w.add_token_types([kind.get(p.type, 1) for p in proto.pieces])
    w.add_bos_token_id(toks.index("<s>"))
    w.add_eos_token_id(toks.index("</s>"))
    w.add_unk_token_id(toks.index("<unk>"))
    w.add_block_count(1)
    w.add_embedding_length(8)
    w.add_head_count(2)
    w.add_context_length(64)
    w.add_feed_forward_length(16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("arch", ["llama", "phi3"])
def test_sentencepiece_vocab_matches_transformers(arch, build_dir, tmp_path):
    path = _spm_gguf(str(tmp_path), arch)
    lines = tok_corpus.corpus(min(LINES, 1000))
    _compare_tokenizer(build_dir, path, str(tmp_path), lines, ref_json=_tok_from(path, tmp_path))


def _tok_from(path, tmp_path):
    from transformers import AutoTokenizer
    d, f = os.path.split(path)
    out = os.path.join(str(tmp_path), "ref")
    AutoTokenizer.from_pretrained(d, gguf_file=f).save_pretrained(out)
    return os.path.join(out, "tokenizer.json")


# ---------------------------------------------------------------- inspect and hostile files

def test_inspect_gguf(winml):
    d = U.inspect_json(winml, RW.smollm2_gguf())
    assert d["format"] == "gguf" and d["version"] == 3 and d["tensor_count"] == 272 and d["alignment"] == 32
    assert d["by_type"] == {"F32": {"tensors": 61, "parameters": 35136, "bytes": 140544, "supported": True},
                            "Q4_1": {"tensors": 210, "parameters": 106168320, "bytes": 66355200, "supported": True},
                            "Q8_0": {"tensors": 1, "parameters": 28311552, "bytes": 30081024, "supported": True}}
    t = {x["name"]: x for x in d["tensors"]}
    assert t["blk.3.attn_q.weight"] == {"name": "blk.3.attn_q.weight", "type": "Q4_1", "dims": [576, 576],
                                        "bytes": 207360, "maps_to": "model.layers.3.self_attn.q_proj.weight",
                                        "conversion": "Q/K rows un-permuted"}
    assert d["metadata"]["tokenizer.ggml.tokens"] == "ARRAY<STRING>[49152]"
    c = d["checkpoint"]
    assert c["model_type"] == "llama" and c["parameters"] == 134515008 and c["sizes"]["num_key_value_heads"] == 3
    g = U.inspect_json(winml, RW.gemma3_gguf())
    assert g["by_type"]["Q4_K"]["tensors"] == 27 and g["by_type"]["Q6_K"]["tensors"] == 9
    # gemma3_text comes to the builder's tables on another branch: either it maps, or it says why not
    assert g.get("checkpoint", {}).get("model_type") == "gemma3_text" or "gemma3_text" in g["checkpoint_error"]


def _ragged_rows(path):
    """A Q8_0 matrix whose rows (40 elements, patched into its dims) are not whole 32-element blocks: the carried
    build's blocks could not map onto MatMulNBits blocks of the row."""
    import struct
    w = _tiny_writer(path)
    w.add_tensor("blk.0.attn_q.weight", np.zeros((2, 34), np.uint8), raw_dtype=T.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    b = bytearray(path.read_bytes())
    at = b.index(b"blk.0.attn_q.weight") + len("blk.0.attn_q.weight")
    assert struct.unpack_from("<IQQ", b, at) == (2, 32, 2)
    struct.pack_into("<Q", b, at + 4, 40)
    path.write_bytes(bytes(b))


def _tiny_writer(path, arch="llama"):
    """A one-layer GGUF writer with its metadata and a 4 x 32 token table; the caller adds tensors and writes."""
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(1)
    w.add_embedding_length(32)
    w.add_head_count(2)
    w.add_context_length(64)
    w.add_feed_forward_length(32)
    w.add_vocab_size(4)
    w.add_tensor("token_embd.weight", np.zeros((4, 32), np.float32))
    return w


def _tiny(path, arch="llama", bad_type=None):
    w = _tiny_writer(path, arch)
    if bad_type is not None:
        w.add_tensor("blk.0.attn_q.weight", np.zeros((32, 18), np.uint8), raw_dtype=bad_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("cmd", ["build", "export", "inspect"])
def test_hostile_gguf_cli(cmd, winml_asan, tmp_path):
    src = RW.smollm2_gguf()
    cases = {}
    with open(src, "rb") as f:
        head = f.read(3 << 20)
    (tmp_path / "trunc.gguf").write_bytes(head)  # cut inside the data section
    cases["trunc.gguf"] = ["trunc.gguf", "past"]
    (tmp_path / "meta.gguf").write_bytes(head[:1785000])  # cut inside the tensor infos
    cases["meta.gguf"] = ["meta.gguf", "truncated"]
    _tiny(tmp_path / "iq.gguf", bad_type=T.IQ4_NL)
    cases["iq.gguf"] = ["blk.0.attn_q.weight", "IQ4_NL is not supported"]
    _tiny(tmp_path / "bloom.gguf", arch="bloom")
    cases["bloom.gguf"] = ["general.architecture", "'bloom' is not supported"]
    cases["missing.gguf"] = ["missing.gguf", "cannot open"]
    _ragged_rows(tmp_path / "ragged.gguf")  # refused before any build (the default one carries blocks)
    cases["ragged.gguf"] = ["blk.0.attn_q.weight", "40 elements is not a whole number of Q8_0 blocks"]
    for name, needles in cases.items():
        if cmd == "inspect" and name in ("iq.gguf", "bloom.gguf"):
            d = U.inspect_json(winml_asan, tmp_path / name)  # the file is fine: inspect says why it cannot build
            assert all(n in d["checkpoint_error"] for n in needles), d["checkpoint_error"]
            continue
        out = tmp_path / f"out-{cmd}-{name}"
        argv = [winml_asan, cmd, "-m", tmp_path / name] + ([] if cmd == "inspect" else ["-o", out])
        r = U.run(argv)
        U.assert_clean_error(r, f"winml {cmd}", *needles)
        assert not out.exists(), f"{out} was written"
        assert not U.leftovers(tmp_path)


def test_folder_with_two_ggufs(winml_asan, tmp_path):
    _tiny(tmp_path / "a.gguf")
    _tiny(tmp_path / "b.gguf")
    r = U.run([winml_asan, "build", "-m", tmp_path, "-o", tmp_path / "out"])
    U.assert_clean_error(r, "winml build", "holds 2 .gguf files", "name the file with -m")


# ---------------------------------------------------------------- every architecture table against transformers

ARCHS = {  # H, heads, kv heads, head dim (key_length), I, layers, own lm_head, q/k bias, q/k norm, fused
    "llama": dict(H=256, nh=4, kvh=2, hd=None, I=320, L=2, head=False, bias=False, qk_norm=False, fused=False),
    "qwen2": dict(H=256, nh=4, kvh=2, hd=None, I=320, L=2, head=True, bias=True, qk_norm=False, fused=False),
    "qwen3": dict(H=256, nh=2, kvh=1, hd=128, I=320, L=2, head=False, bias=False, qk_norm=True, fused=False),
    "phi3": dict(H=256, nh=4, kvh=4, hd=None, I=320, L=2, head=True, bias=False, qk_norm=False, fused=True),
}


def _synthetic(path, arch, V=300):
    """A small random model of arch in llama.cpp's layout, its tensors in several ggml types."""
    a = ARCHS[arch]
    rng = np.random.default_rng(len(arch))
    H, nh, kvh, I = a["H"], a["nh"], a["kvh"], a["I"]
    hd = a["hd"] or H // nh
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(a["L"])
    w.add_context_length(256)
    w.add_embedding_length(H)
    w.add_feed_forward_length(I)
    w.add_head_count(nh)
    w.add_head_count_kv(kvh)
    if a["hd"]:
        w.add_key_length(hd)
        w.add_value_length(hd)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(V)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(0)
    types = [T.F32, T.F16, T.Q8_0, T.Q4_1, T.Q5_0, T.Q4_0, T.Q5_1]

    def add(name, shape, t=None, scale=0.05):
        x = (rng.standard_normal(shape) * scale).astype(np.float32)
        t = t if t is not None else types[len(name) % len(types)]
        if t == T.F32:
            w.add_tensor(name, x)
        elif t == T.F16:
            w.add_tensor(name, x.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(x, t), raw_dtype=t)

    add("token_embd.weight", (V, H), T.Q8_0, 1.0)
    add("output_norm.weight", (H,), T.F32, 1.0)
    if a["head"]:
        add("output.weight", (V, H), T.Q4_1)
    for i in range(a["L"]):
        b = f"blk.{i}."
        add(b + "attn_norm.weight", (H,), T.F32, 1.0)
        add(b + "ffn_norm.weight", (H,), T.F32, 1.0)
        if a["fused"]:
            add(b + "attn_qkv.weight", ((nh + 2 * kvh) * hd, H))
            add(b + "ffn_up.weight", (2 * I, H))
        else:
            add(b + "attn_q.weight", (nh * hd, H))
            add(b + "attn_k.weight", (kvh * hd, H))
            add(b + "attn_v.weight", (kvh * hd, H))
            add(b + "ffn_gate.weight", (I, H))
            add(b + "ffn_up.weight", (I, H))
        if a["bias"]:
            for p, n in (("q", nh), ("k", kvh), ("v", kvh)):
                add(b + f"attn_{p}.bias", (n * hd,), T.F32, 0.5)
        if a["qk_norm"]:
            add(b + "attn_q_norm.weight", (hd,), T.F32, 1.0)
            add(b + "attn_k_norm.weight", (hd,), T.F32, 1.0)
        add(b + "attn_output.weight", (H, nh * hd))
        add(b + "ffn_down.weight", (H, I))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()



def _gguf_reference(tmp_path, path, arch):
    """transformers' logits of the synthetic GGUF at path (loaded dequantized) on 17 seeded ids, and the ONNX feeds
    of the same ids with an empty KV cache."""
    import torch
    import transformers
    m = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file=path.name,
                                                          dtype=torch.float32).eval()
    a = ARCHS[arch]
    hd = a["hd"] or a["H"] // a["nh"]
    ids = np.random.default_rng(1).integers(0, 300, size=(1, 17), dtype=np.int64)
    with torch.no_grad():
        ref = m(torch.tensor(ids)).logits.numpy()
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "position_ids": np.arange(17)[None]}
    for i in range(a["L"]):
        for kv in ("key", "value"):
            feeds[f"past_key_values.{i}.{kv}"] = np.zeros((1, a["kvh"], 0, hd), np.float32)
    return ref, feeds


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_architecture_tables_match_transformers(arch, winml, tmp_path):
    """A random model per architecture table row, loaded by transformers from the same GGUF (its own name mapping,
    Q/K un-permutation, fused tensors): `winml build -p fp32` logits within 1e-4."""
    from engine_util import ort_run
    path = tmp_path / f"{arch}.gguf"
    _synthetic(path, arch)
    run_ok([winml, "build", "-m", path, "-o", tmp_path / "b", "-p", "fp32", "-q"])
    ref, feeds = _gguf_reference(tmp_path, path, arch)
    got = ort_run(tmp_path / "b" / "model.onnx", feeds)["logits"]
    d = float(np.abs(got - ref).max())
    assert d <= 1e-4, f"{arch}: logits differ by {d} (ref max {np.abs(ref).max()})"


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_architecture_tables_carried(arch, winml, build_dir, tmp_path, monkeypatch):
    """The same random models built by default (precision gguf): Q8_0 / Q4_1 / Q5_0 / Q4_0 blocks carried, Q5_1
    requantized to 8 bits (onnxruntime's MatMulNBits takes no float zero points at 8 bits) and F32 / F16 matrices
    left float, each said in the manifest; onnxruntime and our engine agree, and both stay near transformers
    (the requantized Q5_1 tensors are the only weights that differ)."""
    monkeypatch.setenv("WM_NBITS_I15", "0")  # the float32 path (gguf_carry_util.CARRIED_LOGITS_TOL)
    from engine_util import engine_run, ort_run
    path = tmp_path / f"{arch}.gguf"
    _synthetic(path, arch)
    r = run_ok([winml, "build", "-m", path, "-o", tmp_path / "b", "-q", "-f", "json"])
    q = next(s for s in json.loads(r.stdout)["stages"] if s["name"] == "quant")
    by = {}
    for t in q["carried"]["tensors"]:
        by.setdefault(t["gguf_type"], set()).add(t["result"])
        if t["result"] == "requantized":
            assert t["bits"] == 8 and not t["exact"] and "float zero points at 8 bits" in t["reason"], t
    assert by.pop("Q5_1", {"requantized"}) == {"requantized"}
    assert by.pop("F32", {"float"}) == {"float"} and by.pop("F16", {"float"}) == {"float"}
    assert set().union(*by.values()) == {"carried"}, by
    ref, feeds = _gguf_reference(tmp_path, path, arch)
    ort = ort_run(tmp_path / "b" / "model.onnx", feeds)["logits"]
    eng = engine_run(build_dir, tmp_path / "b" / "model.onnx", feeds, tmp_path)[0]["logits"]
    d_pair, d_ref = float(np.abs(ort - eng).max()), float(np.abs(eng - ref).max())
    U.note(f"{arch} carried: onnxruntime vs winml {d_pair:.2g}, winml vs transformers {d_ref:.2g} "
           f"(max |logit| {np.abs(ref).max():.2g})")
    assert d_pair <= C.CARRIED_LOGITS_TOL
    assert d_ref <= 2e-2 * np.abs(ref).max()



def test_precision_gguf_usage(winml, tmp_path):
    """-p gguf needs a GGUF with its blocks (not a safetensors checkpoint, not --random-weights; `winml quantize` has
    no GGUF to carry); -p int4 from a GGUF says it requantizes from the dequantized values; `winml export` of a GGUF
    and `winml config -p fp32` stay float32."""
    hf = RW.hf_from_gguf(RW.smollm2_gguf())
    path = tmp_path / "llama.gguf"
    _synthetic(path, "llama")
    for argv, needles in [
        (["build", "-m", hf, "-o", tmp_path / "o1", "-p", "gguf"], ["precision gguf", "the source is not a GGUF"]),
        (["config", "-m", hf, "-p", "gguf"], ["precision gguf", "the source is not a GGUF"]),
        (["build", "-m", path, "-o", tmp_path / "o2", "-p", "gguf", "--random-weights"], ["not with --random-weights"]),
        (["build", "-m", path, "-o", tmp_path / "o3", "-p", "int9"], ["unknown precision 'int9'", "gguf"]),
    ]:
        r = U.run([winml] + argv)
        U.assert_clean_error(r, f"winml {argv[0]}", *needles)
    assert not U.leftovers(tmp_path)
    r = run_ok([winml, "build", "-m", path, "-o", tmp_path / "i4", "-p", "int4", "-f", "json"])
    assert "requantized from its dequantized values" in r.stderr
    assert json.loads(r.stdout)["precision"] == "int4"
    rec = json.loads(run_ok([winml, "config", "-m", path]).stdout)
    assert rec["quant"]["mode"] == "gguf" and rec["quant"]["rtn_accuracy_level"] == 2
    r = run_ok([winml, "export", "-m", path, "-o", tmp_path / "ex", "-f", "json"])
    assert json.loads(r.stdout)["precision"] == "fp32"


# ---------------------------------------------------------------- counts and dims a header claims (resource limits)

def _gs(x):
    import struct
    x = x.encode()
    return struct.pack("<Q", len(x)) + x


def _ghead(n_tensors, n_kv):
    import struct
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + _gs("general.architecture") + struct.pack("<I", 8) + \
        _gs("llama")


def _gtensor(name, dims, typ=0, off=0):
    import struct
    return _gs(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + \
        struct.pack("<IQ", typ, off)


def _garray(key, elem, count, tail):
    import struct
    return _gs(key) + struct.pack("<IIQ", 9, elem, count) + tail


HUGE_GGUF = {
    "tensors_2p63": (lambda: _ghead(2**63, 1), ["tensor count 9223372036854775808", "cannot fit"]),
    "kv_2p40": (lambda: _ghead(0, 2**40), ["metadata count 1099511627776", "cannot fit"]),
    "tensors_1e9": (lambda: _ghead(10**9, 1) + _gtensor("t0", [4]), ["tensor count 1000000000", "cannot fit"]),
    "string_array_2p60": (lambda: _ghead(0, 2) + _garray("tokenizer.ggml.tokens", 8, 2**60, _gs("a")),
                          ["tokenizer.ggml.tokens", "cannot fit"]),
    "u32_array_2p60": (lambda: _ghead(0, 2) + _garray("x.scores", 4, 2**60, bytes(16)), ["x.scores", "past the end"]),
    "string_2p62": (lambda: _ghead(0, 2) + _gs("x.s") + (8).to_bytes(4, "little") + (2**62).to_bytes(8, "little") +
                    b"abc", ["'x.s'", "past the end"]),
    "dims_2p40_squared": (lambda: _ghead(1, 1) + _gtensor("token_embd.weight", [2**40, 2**40]),
                          ["token_embd.weight", "overflow"]),
    "dims_2p32_cubed": (lambda: _ghead(1, 1) + _gtensor("token_embd.weight", [2**32] * 3),
                        ["token_embd.weight", "overflow"]),
    "n_dims_1000": (lambda: _ghead(1, 1) + _gs("token_embd.weight") + (1000).to_bytes(4, "little") +
                    (1).to_bytes(8, "little") * 1000 + bytes(12), ["token_embd.weight", "1000 dimensions"]),
    "offset_2p63": (lambda: _ghead(1, 1) + _gtensor("token_embd.weight", [4], 0, 2**63), ["past the end"]),
}


@pytest.mark.parametrize("name", list(HUGE_GGUF))
def test_claimed_counts_refused_before_allocating(name, winml, winml_asan, tmp_path):
    """Counts, array lengths, string lengths and dims a GGUF header claims are checked against the file before
    anything is sized from them: exit 2 naming the file and what is wrong, in well under a second of CPU and a small
    peak RSS (the plain build; the ASan build for a clean error)."""
    make, needles = HUGE_GGUF[name]
    p = tmp_path / f"{name}.gguf"
    p.write_bytes(make())
    for cmd in ("inspect", "build"):
        out = tmp_path / "out"
        argv = [cmd, "-m", p] + (["-o", out] if cmd == "build" else [])
        U.assert_clean_error(U.run([winml_asan, *argv], timeout=60), f"winml {cmd}", str(p), *needles)
        r, cpu, rss = U.run_measured([winml, *argv])
        assert r.returncode == 2, U.describe(r)
        assert cpu < 1.0 and rss < 64 << 20, (cmd, cpu, rss)
        assert not out.exists() and not U.leftovers(tmp_path)
