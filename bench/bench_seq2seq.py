"""Encoder-decoder speed (issue 34): winml's engine vs CTranslate2 and onnxruntime, at float32 and int8.

Models: the published configs of whisper-tiny, whisper-base, Helsinki-NLP/opus-mt-en-de (Marian) and
facebook/bart-base (examples/configs/, written by hand; whisper's suppress_tokens list and bart's
task_specific_params left out: generation settings, not architecture) with seeded random weights
(transformers' init), saved as a transformers folder that all three take:
  - winml: `winml build -m CKPT -p fp32|int8 -o DIR` (int8: dynamic int8), `winml generate` on it; the encoder
    and search times come from its JSON (encoder_ms, decode_ms: the model loaded, process start-up excluded);
  - CTranslate2 (bench/requirements-peers.txt): `ct2-transformers-converter`'s converter on the same folder,
    compute_type float32 / int8, inter_threads 1, intra_threads --threads;
  - onnxruntime: our fp32 / int8 build's three graphs, a greedy loop in Python (encoder once, decoder_model on
    the prompt, decoder_with_past_model one token a step), intra_op_num_threads --threads.
  - (fp16 rows: our `-p fp16` build; CTranslate2 is left out there, as it has no float16 compute type on CPU)
  - whisper.cpp (--peers ...,whispercpp; whisper rows at --precisions fp16 only): libwhisper.so built by
    bench/setup_whispercpp.sh from pywhispercpp's PyPI sdist (its vendored whisper.cpp), loaded with ctypes
    ($WHISPER_CPP_LIB); the model is the same transformers folder written here as an f16 ggml file, whisper.cpp's
    usual precision (matrices and convolutions float16; norms, biases, position tables float32), against our
    `-p fp16` build (its CPU convolution takes float16 kernels only: an f32 file aborts in im2col; the format's
    facts: magic, hparams, the mel filters, the vocabulary, tensors under openai's names, ggml's reversed dims;
    whisper.cpp's own converter needs the openai repository's mel filter file, absent here); the same
    log-mel (whisper_set_mel), whisper_encode, then whisper_decode on the prompt and one token a step, the arg max
    in Python with the end token masked, n_threads --threads.
The random weights have no real tokenizer: a word-level tokenizer.json with the model's special tokens at their
ids (CTranslate2's converter reads token strings from one). Inputs: whisper 30 s of espeak-ng speech (a
16 kHz WAV, trimmed to 29.9 s so that it is one window: WhisperFeatureExtractor's log-mel for the peers, the
WAV itself for winml); text models 64 source tokens (63 seeded ids + the end token). Greedy, batch 1, a fixed
output of --new-tokens tokens: the end token can never win (text: final_logits_bias of the end token -1e4;
whisper: suppress_tokens [<|endoftext|>] in generation_config.json and in CTranslate2's generate, masked in the
onnxruntime loop).

Figures (the minimum over --reps runs; the engines take turns within each; wall time, or with --clock cpu process CPU
time: winml's encoder_cpu_ms / decode_cpu_ms, the peers' time.process_time() around the same calls in this process,
all threads of both counted; what preemption on a loaded machine does not inflate): encoder ms (CTranslate2 translator: one call with max_decoding_length 1,
i.e. the encoder + one decoder step, as it has no encoder-only call; its whisper: encode()), and decode tokens/s
= (tokens(N) - tokens(1)) / (T(N) - T(1)), T(n) the time of a generation of n new tokens after the encoder (winml's
decode_ms; CTranslate2 whisper's generate() on encode()'s output; the onnxruntime loop after its encoder run;
CTranslate2's Translator: the whole translate_batch call), so the encoder and the first (cross-cache) step cancel. ratio = ours / best peer at the precision:
encoder as peer ms / our ms, decode as our tok/s / peer tok/s (>= 1.0: we are faster).

  .venv/bin/python bench/bench_seq2seq.py [--models whisper-tiny,whisper-base,opus-mt-en-de,bart-base]
      [--precisions fp32,int8,fp16] [--threads 1] [--new-tokens 32] [--reps 3] [--work DIR] [--winml build/winml]
      [--winml-base OLD/winml]  (a baseline binary timed in the same rounds on the same model) [--clock wall|cpu]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = ["whisper-tiny", "whisper-base", "opus-mt-en-de", "bart-base"]
SPEECH = ("the quick brown fox jumps over the lazy dog. this is a test of the speech recognition benchmark, "
          "read slowly and clearly so that it lasts for half a minute. " * 4)


def specials(cfg):
    """{id: token} of the model's special tokens (the rest of the vocabulary: t<id>)."""
    mt = cfg["model_type"]
    if mt == "whisper":
        sp = {50257: "<|endoftext|>", 50258: "<|startoftranscript|>", 50259: "<|en|>", 50358: "<|translate|>",
              50359: "<|transcribe|>", 50360: "<|startoflm|>", 50361: "<|startofprev|>", 50362: "<|nocaptions|>",
              50363: "<|notimestamps|>"}
        for i in range(50260, 50358):
            sp[i] = f"<|lang{i}|>"
        return sp
    if mt == "marian":
        return {0: "</s>", 1: "<unk>", cfg["pad_token_id"]: "<pad>"}
    return {0: "<s>", 1: "<pad>", 2: "</s>", 3: "<unk>"}


def tokenizer(path, cfg):
    from tokenizers import Tokenizer, models, pre_tokenizers
    V = cfg["vocab_size"]
    sp = specials(cfg)
    vocab = {sp.get(i, f"t{i}"): i for i in range(V)}
    t = Tokenizer(models.WordLevel(vocab, unk_token="<unk>" if "<unk>" in vocab else "<|endoftext|>"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    t.save(os.path.join(path, "tokenizer.json"))
    if cfg["model_type"] == "whisper":
        tc = {"eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>", "unk_token": "<|endoftext|>",
              "pad_token": "<|endoftext|>"}
    elif cfg["model_type"] == "marian":
        tc = {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
    else:
        tc = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
    tc["tokenizer_class"] = "PreTrainedTokenizerFast"
    json.dump(tc, open(os.path.join(path, "tokenizer_config.json"), "w"))


def checkpoint(name, work):
    """The random-weight transformers folder of a published config (made once)."""
    import torch
    import transformers as T
    d = os.path.join(work, name, "ckpt")
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return d, json.load(open(os.path.join(ROOT, "examples", "configs", name, "config.json")))
    cfg = json.load(open(os.path.join(ROOT, "examples", "configs", name, "config.json")))
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(0)
    kw = {k: v for k, v in cfg.items() if k not in ("architectures", "_name_or_path", "transformers_version")}
    mt = cfg["model_type"]
    if mt == "whisper":
        m = T.WhisperForConditionalGeneration(T.WhisperConfig(**kw))
    elif mt == "marian":
        m = T.MarianMTModel(T.MarianConfig(**kw))
    else:
        m = T.BartForConditionalGeneration(T.BartConfig(**kw))
    m.eval()
    if mt != "whisper":
        with torch.no_grad():  # a fixed output length: the end token never wins
            m.final_logits_bias[0, cfg["eos_token_id"]] = -1e4
    m.save_pretrained(d)
    tokenizer(d, cfg)
    if mt == "whisper":
        T.WhisperFeatureExtractor(feature_size=80).save_pretrained(d)
        g = {"decoder_start_token_id": 50258, "eos_token_id": 50257, "pad_token_id": 50257, "bos_token_id": 50257,
             "lang_to_id": {"<|en|>": 50259}, "task_to_id": {"transcribe": 50359, "translate": 50358},
             "no_timestamps_token_id": 50363, "is_multilingual": True, "max_length": 448,
             "suppress_tokens": [50257], "begin_suppress_tokens": [220, 50257]}
    else:
        g = {"decoder_start_token_id": cfg["decoder_start_token_id"], "eos_token_id": cfg["eos_token_id"],
             "pad_token_id": cfg["pad_token_id"], "forced_eos_token_id": None, "num_beams": 1,
             "no_repeat_ngram_size": 0, "max_length": 512}
        if "bos_token_id" in cfg:
            g["bos_token_id"] = cfg["bos_token_id"]
    json.dump(g, open(os.path.join(d, "generation_config.json"), "w"), indent=1)
    if mt != "whisper":  # forced_eos in config.json too: off, for a fixed length
        c = json.load(open(os.path.join(d, "config.json")))
        c["forced_eos_token_id"] = None
        json.dump(c, open(os.path.join(d, "config.json"), "w"), indent=1)
    return d, cfg


def speech_wav(work):
    import soundfile as sf
    import soxr
    out = os.path.join(work, "speech30.wav")
    if os.path.exists(out):
        return out
    raw = os.path.join(work, "speech_raw.wav")
    subprocess.run(["espeak-ng", "-s", "120", "-w", raw, SPEECH], check=True, capture_output=True)
    y, sr = sf.read(raw, dtype="float32")
    y = soxr.resample(y, sr, 16000, quality="HQ")
    n = int(29.9 * 16000)
    if len(y) < n:
        y = np.concatenate([y, np.zeros(n - len(y), np.float32)])
    sf.write(out, y[:n], 16000, subtype="PCM_16")
    return out


def features(wav):
    import soundfile as sf
    import transformers as T
    y, _ = sf.read(wav, dtype="float32")
    fe = T.WhisperFeatureExtractor(feature_size=80)
    return fe(y, sampling_rate=16000, return_tensors="np").input_features.astype(np.float32)


PROMPT = [50258, 50259, 50359, 50363]  # <|startoftranscript|><|en|><|transcribe|><|notimestamps|>


def source_ids(cfg):
    rng = np.random.default_rng(0)
    return [int(x) for x in rng.integers(10, cfg["vocab_size"] - 10, 63)] + [cfg["eos_token_id"]]


# ---------------------------------------------------------------- winml

def winml_build(winml, ck, prec, work, name):
    out = os.path.join(work, name, f"winml_{prec}")
    if not os.path.exists(os.path.join(out, "build_manifest.json")):
        r = subprocess.run([winml, "build", "-m", ck, "-o", out, "-p", prec, "-q", "--overwrite"], capture_output=True,
                           text=True)
        if r.returncode:
            sys.exit(f"winml build {name} {prec}: {r.stderr}")
    return out


CLOCK = time.perf_counter  # --clock cpu: time.process_time (this process's CPU time, every thread)


def winml_time(winml, build, cfg, n, threads, wav):
    argv = [winml, "generate", "-m", build, "-f", "json", "--threads", str(threads), "--max-new-tokens", str(n)]
    if cfg["model_type"] == "whisper":
        argv += ["--audio", wav, "--language", "en", "--task", "transcribe"]
    else:
        argv += ["--ids", ",".join(map(str, source_ids(cfg)))]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"winml generate: {r.stderr}")
    j = json.loads(r.stdout)
    got = len(j["outputs"][0]["ids"]) - (0 if cfg["model_type"] == "whisper" else 1)
    if CLOCK is time.process_time:
        return j["encoder_cpu_ms"], j["decode_cpu_ms"], got
    return j["encoder_ms"], j["decode_ms"], got


# ---------------------------------------------------------------- CTranslate2

# CTranslate2's compute types on this CPU (ctranslate2.get_supported_compute_types("cpu"): float32, int8,
# int8_float32): it has no float16 there, so the fp16 rows have onnxruntime (and whisper.cpp) as peers only
CT2_TYPES = {"fp32": "float32", "int8": "int8"}


def ct2_convert(ck, work, name, prec):
    import ctranslate2.converters as C
    out = os.path.join(work, name, f"ct2_{prec}")
    if not os.path.exists(os.path.join(out, "model.bin")):
        C.TransformersConverter(ck).convert(out, quantization=None if prec == "fp32" else "int8", force=True)
    return out


def ct2_model(path, cfg, prec, threads):
    import ctranslate2
    ct = CT2_TYPES[prec]
    if cfg["model_type"] == "whisper":
        return ctranslate2.models.Whisper(path, device="cpu", compute_type=ct, inter_threads=1, intra_threads=threads)
    return ctranslate2.Translator(path, device="cpu", compute_type=ct, inter_threads=1, intra_threads=threads)


def ct2_time(model, cfg, n, feats):
    """(encoder ms, whole-call ms, tokens) of one generation of n new tokens."""
    import ctranslate2
    if cfg["model_type"] == "whisper":
        sp = specials(cfg)
        t0 = CLOCK()
        enc = model.encode(ctranslate2.StorageView.from_array(feats), to_cpu=False)
        t1 = CLOCK()
        # its max_length gives max_length / 2 new tokens here (counted: as many logits vectors as tokens)
        res = model.generate(enc, [[sp[t] for t in PROMPT]], beam_size=1, max_length=2 * n,
                             suppress_tokens=[50257], suppress_blank=False, return_scores=False)
        t2 = CLOCK()
        return 1e3 * (t1 - t0), 1e3 * (t2 - t1), len(res[0].sequences_ids[0])
    src = [specials(cfg).get(i, f"t{i}") for i in source_ids(cfg)]
    t0 = CLOCK()
    res = model.translate_batch([src], beam_size=1, max_decoding_length=n, min_decoding_length=n)
    t1 = CLOCK()
    return None, 1e3 * (t1 - t0), len(res[0].hypotheses[0])


# ---------------------------------------------------------------- onnxruntime

def ort_sessions(build, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return [ort.InferenceSession(os.path.join(build, f), so, providers=["CPUExecutionProvider"])
            for f in ("encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx")]


def ort_time(sess, cfg, n, feats):
    enc_s, dec_s, past_s = sess
    whisper = cfg["model_type"] == "whisper"
    t0 = CLOCK()
    if whisper:
        h = enc_s.run(["last_hidden_state"], {"input_features": feats})[0]
        extra, prompt = {}, np.array([PROMPT], np.int64)
    else:
        ids = np.array([source_ids(cfg)], np.int64)
        mask = np.ones_like(ids)
        h = enc_s.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})[0]
        extra, prompt = {"encoder_attention_mask": mask}, np.array([[cfg["decoder_start_token_id"]]], np.int64)
    t1 = CLOCK()
    names = [o.name for o in dec_s.get_outputs()]
    out = dict(zip(names, dec_s.run(names, {"input_ids": prompt, "encoder_hidden_states": h, **extra})))
    past_names = [o.name for o in past_s.get_outputs()]
    toks = []
    for i in range(n):
        lg = out["logits"][0, -1].copy()
        lg[cfg["eos_token_id"]] = -np.inf
        tok = int(lg.argmax())
        toks.append(tok)
        if i == n - 1:
            break
        feeds = {"input_ids": np.array([[tok]], np.int64), **extra}
        for k, v in out.items():
            if k.startswith("present."):
                feeds["past_key_values." + k[8:]] = v
        nxt = dict(zip(past_names, past_s.run(past_names, feeds)))
        for k, v in nxt.items():  # the cross-attention caches stay those of the first step
            out[k] = v
    t2 = CLOCK()
    return 1e3 * (t1 - t0), 1e3 * (t2 - t1), len(toks)


# ---------------------------------------------------------------- whisper.cpp

# transformers' Whisper names -> openai's (whisper.cpp reads those): facts of the two layouts
WCPP_LAYER = {"self_attn.q_proj": "attn.query", "self_attn.k_proj": "attn.key", "self_attn.v_proj": "attn.value",
              "self_attn.out_proj": "attn.out", "self_attn_layer_norm": "attn_ln", "encoder_attn.q_proj":
              "cross_attn.query", "encoder_attn.k_proj": "cross_attn.key", "encoder_attn.v_proj": "cross_attn.value",
              "encoder_attn.out_proj": "cross_attn.out", "encoder_attn_layer_norm": "cross_attn_ln", "fc1": "mlp.0",
              "fc2": "mlp.2", "final_layer_norm": "mlp_ln"}
WCPP_TOP = {"encoder.conv1": "encoder.conv1", "encoder.conv2": "encoder.conv2",
            "encoder.embed_positions.weight": "encoder.positional_embedding", "encoder.layer_norm": "encoder.ln_post",
            "decoder.embed_positions.weight": "decoder.positional_embedding",
            "decoder.embed_tokens.weight": "decoder.token_embedding.weight", "decoder.layer_norm": "decoder.ln"}


def wcpp_name(k):
    k = k[len("model."):] if k.startswith("model.") else k
    for a, b in WCPP_TOP.items():
        if k == a or k.startswith(a + "."):
            return b + k[len(a):]
    side, _, i, rest = k.split(".", 3)  # encoder.layers.3.fc1.weight
    for a, b in WCPP_LAYER.items():
        if rest.startswith(a + "."):
            return f"{side}.blocks.{i}.{b}{rest[len(a):]}"
    raise KeyError(k)


def wcpp_convert(ck, work, name):
    """The transformers folder as an f16 ggml file for whisper.cpp (written once)."""
    import struct

    import torch
    import transformers as T
    out = os.path.join(work, name, "ggml-f16.bin")
    if os.path.exists(out):
        return out
    m = T.WhisperForConditionalGeneration.from_pretrained(ck, torch_dtype=torch.float32)
    c = m.config
    fe = T.WhisperFeatureExtractor(feature_size=c.num_mel_bins)
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<I", 0x67676D6C))
        f.write(struct.pack("<11i", c.vocab_size, c.max_source_positions, c.d_model, c.encoder_attention_heads,
                            c.encoder_layers, c.max_target_positions, c.d_model, c.decoder_attention_heads,
                            c.decoder_layers, c.num_mel_bins, 1))
        filt = np.ascontiguousarray(fe.mel_filters.T, np.float32)  # [n_mel, n_fft / 2 + 1], Slaney as librosa's
        f.write(struct.pack("<2i", *filt.shape))
        f.write(filt.tobytes())
        n_text = 50257  # the byte-level vocabulary before the special tokens (whisper.cpp names those itself)
        f.write(struct.pack("<i", n_text))
        for i in range(n_text):
            w = f"t{i}".encode()
            f.write(struct.pack("<i", len(w)) + w)
        for k, v in m.state_dict().items():
            if k == "proj_out.weight":  # tied to the token embedding
                continue
            a = v.detach().float().numpy()
            if k.endswith(("conv1.bias", "conv2.bias")):
                a = a.reshape(-1, 1)
            nm = wcpp_name(k)
            half = a.ndim >= 2 and not nm.endswith(("positional_embedding", ".bias"))
            f.write(struct.pack("<3i", a.ndim, len(nm), 1 if half else 0))
            f.write(struct.pack(f"<{a.ndim}i", *reversed(a.shape)))
            f.write(nm.encode())
            f.write(np.ascontiguousarray(a, np.float16 if half else np.float32).tobytes())
    os.replace(tmp, out)
    return out


class WhisperCpp:
    def __init__(self, path, threads):
        import ctypes
        lib = os.environ.get("WHISPER_CPP_LIB", "")
        if not os.path.exists(lib):
            sys.exit("--peers whispercpp: set WHISPER_CPP_LIB to libwhisper.so (eval \"$(bench/setup_whispercpp.sh)\")")
        L = self.L = ctypes.CDLL(lib)
        L.whisper_init_from_file.restype = ctypes.c_void_p
        L.whisper_init_from_file.argtypes = [ctypes.c_char_p]
        L.whisper_set_mel.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.c_int, ctypes.c_int]
        L.whisper_encode.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        L.whisper_decode.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32), ctypes.c_int, ctypes.c_int,
                                     ctypes.c_int]
        L.whisper_get_logits.restype = ctypes.POINTER(ctypes.c_float)
        L.whisper_get_logits.argtypes = [ctypes.c_void_p]
        L.whisper_n_vocab.argtypes = [ctypes.c_void_p]
        self.ctx = L.whisper_init_from_file(path.encode())
        if not self.ctx:
            sys.exit(f"whisper.cpp could not load {path}")
        self.V, self.threads, self.ct = L.whisper_n_vocab(self.ctx), threads, ctypes

    def time(self, n, feats, eos):
        ct, L = self.ct, self.L
        mel = np.ascontiguousarray(feats[0], np.float32)
        t0 = CLOCK()
        assert L.whisper_set_mel(self.ctx, mel.ctypes.data_as(ct.POINTER(ct.c_float)), mel.shape[1], mel.shape[0]) == 0
        assert L.whisper_encode(self.ctx, 0, self.threads) == 0
        t1 = CLOCK()
        toks, past, cur = [], 0, list(PROMPT)
        for i in range(n):
            arr = (ct.c_int32 * len(cur))(*cur)
            assert L.whisper_decode(self.ctx, arr, len(cur), past, self.threads) == 0
            past += len(cur)
            lg = np.ctypeslib.as_array(L.whisper_get_logits(self.ctx), shape=(len(cur), self.V))[-1].copy()
            lg[eos] = -np.inf
            tok = int(lg.argmax())
            toks.append(tok)
            cur = [tok]
        t2 = CLOCK()
        return 1e3 * (t1 - t0), 1e3 * (t2 - t1), len(toks)


# ---------------------------------------------------------------- table

def measure(fns, n, reps):
    """{engine: (encoder ms, decode tok/s, tokens)}: minima over reps of T(n) and T(1), T the time after the encoder
    (the whole call where the engine has no separate encoder: CTranslate2's Translator, whose encoder ms is then
    T(1)). The engines take turns within each repetition, so that a load change on this shared machine falls on
    all of them."""
    full, one = {k: [] for k in fns}, {k: [] for k in fns}
    for _ in range(reps):
        for k, fn in fns.items():
            full[k].append(fn(n))
            one[k].append(fn(1))
    res = {}
    for k in fns:
        f, o = full[k], one[k]
        enc = min(e for e, _, _ in f + o) if f[0][0] is not None else min(t for _, t, _ in o)
        tn, t1 = min(t for _, t, _ in f), min(t for _, t, _ in o)
        toks = f[0][2]  # the tokens each call gave (an engine may stop short of n): counted, not assumed
        res[k] = (enc, (toks - o[0][2]) / max(tn - t1, 1e-9) * 1e3, toks)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--precisions", default="fp32,int8,fp16")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--work", default="/tmp/bench_seq2seq")
    ap.add_argument("--winml", default=os.path.join(ROOT, "build", "winml"))
    ap.add_argument("--peers", default="ct2,ort", help="ct2, ort, whispercpp (comma-separated)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: process CPU time (ours from generate's JSON encoder_cpu_ms / decode_cpu_ms, the peers' "
                    "by time.process_time in this process), which other jobs' preemption does not inflate")
    ap.add_argument("--winml-base", default="", help="a second winml binary (a baseline build) timed on the same "
                    "model in the same rounds: before / after figures of a change side by side")
    a = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if a.clock == "cpu" else time.perf_counter
    os.makedirs(a.work, exist_ok=True)
    wav = speech_wav(a.work)
    feats = features(wav)
    n, rows = a.new_tokens, []
    print(f"# {a.clock} time, threads {a.threads}, {n} new tokens, greedy, batch 1, min of {a.reps} runs; load: "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    print("| model | precision | engine | encoder ms | decode tok/s | tokens |")
    print("|---|---|---|---|---|---|")
    for name in a.models.split(","):
        ck, cfg = checkpoint(name, a.work)
        for prec in a.precisions.split(","):
            b = winml_build(a.winml, ck, prec, a.work, name)
            fns = {"winml": lambda k: winml_time(a.winml, b, cfg, k, a.threads, wav)}
            if a.winml_base:
                fns["winml-base"] = lambda k: winml_time(a.winml_base, b, cfg, k, a.threads, wav)
            if "ct2" in a.peers and prec in CT2_TYPES:
                m = ct2_model(ct2_convert(ck, a.work, name, prec), cfg, prec, a.threads)
                fns["ctranslate2"] = lambda k: ct2_time(m, cfg, k, feats)
            if "ort" in a.peers:
                s = ort_sessions(b, a.threads)
                fns["onnxruntime"] = lambda k: ort_time(s, cfg, k, feats)
            if "whispercpp" in a.peers and cfg["model_type"] == "whisper" and prec == "fp16":
                w = WhisperCpp(wcpp_convert(ck, a.work, name), a.threads)
                fns["whisper.cpp"] = lambda k: w.time(k, feats, cfg["eos_token_id"])
            res = measure(fns, n, a.reps)
            fns.clear()
            for eng, (enc, tps, toks) in res.items():
                print(f"| {name} | {prec} | {eng} | {enc:.1f} | {tps:.1f} | {toks} |", flush=True)
            peers = [v for k, v in res.items() if not k.startswith("winml")]
            if peers:
                ours = res["winml"]
                be, bt = min(p[0] for p in peers), max(p[1] for p in peers)
                rows.append((name, prec, be / ours[0], ours[1] / bt))
                print(f"| {name} | {prec} | ratio ours/best peer | {be / ours[0]:.2f}x | {ours[1] / bt:.2f}x | |",
                      flush=True)
                if "winml-base" in res:
                    base = res["winml-base"]
                    print(f"| {name} | {prec} | ratio base/best peer | {be / base[0]:.2f}x | {base[1] / bt:.2f}x | |",
                          flush=True)
    shutil.rmtree(os.path.join(a.work, "tmp"), ignore_errors=True)


if __name__ == "__main__":
    main()
