"""GGUF import of mixture-of-experts decoders (issues 31 + 35): tiny random transformers checkpoints of Mixtral,
Qwen2-MoE, Qwen3-MoE, GraniteMoE and GraniteMoeShared, written here as GGUF files in llama.cpp's layout (the mapping
its convert_hf_to_gguf.py uses, re-implemented in this file: Mixtral as general.architecture llama with
<arch>.expert_count, the experts stacked in blk.N.ffn_{gate,up,down}_exps [E, I, H] / [E, H, I] (GraniteMoE's
input_linear split into gate and up), the router ffn_gate_inp, shared experts ffn_*_shexp and Qwen2-MoE's
ffn_gate_inp_shexp, the llama Q/K row permutation for the llama-derived families, Granite's multipliers as
<arch>.*_scale), then built by `winml build -m FILE.gguf`:

  - F32 files: `-p fp32` logits within 1e-4 of transformers on the original checkpoint, in onnxruntime and in our
    engine, and (quantized files) 12 greedy steps of our engine through the KV cache (batch 2) equal transformers'
    generate();
  - quantized files (Q8_0 / Q4_0 experts, Q8_0 attention): the same against transformers on the dequantized
    weights (gguf-py's own dequantization); the default build (precision gguf) carries Q4_0 experts into
    com.microsoft QMoE as they are and keeps Q8_0 experts float (the manifest says which and why), matching
    transformers on the dequantized weights in both runtimes;
  - hostile files (expert_count 0, expert_used_count over expert_count, an expert stack whose dims disagree with
    the metadata, a GraniteMoE gate stack without its up stack) exit 2 naming the key or tensor, under ASan.
"""
import json
import os
import shutil

import numpy as np
import pytest
import torch

import builder_util as BU
import gguf_carry_util as C
import oracle_util as U
from gguf import GGMLQuantizationType as T
from test_builder import empty_past, greedy

import gguf

DEC = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
           vocab_size=96, max_position_embeddings=128, rope_parameters=dict(rope_type="default", rope_theta=500.0),
           bos_token_id=None, eos_token_id=None, pad_token_id=0, rms_norm_eps=1e-6)


def _specs():
    import transformers as TR
    return {  # every layer sparse, as llama.cpp builds these families; row lengths whole 32-element blocks
        "mixtral": (TR.MixtralConfig, TR.MixtralForCausalLM, dict(DEC, num_local_experts=4, num_experts_per_tok=2)),
        "qwen2_moe": (TR.Qwen2MoeConfig, TR.Qwen2MoeForCausalLM, dict(
            DEC, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=64,
            norm_topk_prob=False)),
        "qwen3_moe": (TR.Qwen3MoeConfig, TR.Qwen3MoeForCausalLM, dict(
            DEC, head_dim=16, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, norm_topk_prob=True)),
        "granitemoe": (TR.GraniteMoeConfig, TR.GraniteMoeForCausalLM, dict(
            DEC, num_local_experts=4, num_experts_per_tok=2, embedding_multiplier=3.0, residual_multiplier=0.4,
            attention_multiplier=0.2, logits_scaling=2.5)),
        "granitemoeshared": (TR.GraniteMoeSharedConfig, TR.GraniteMoeSharedForCausalLM, dict(
            DEC, num_local_experts=4, num_experts_per_tok=2, shared_intermediate_size=32, embedding_multiplier=3.0,
            residual_multiplier=0.4, attention_multiplier=0.2, logits_scaling=2.5)),
        # dense Granite (issue 35's dense families: a table row is all it takes), its multipliers the MoE's
        "granite": (TR.GraniteConfig, TR.GraniteForCausalLM, dict(
            DEC, embedding_multiplier=3.0, residual_multiplier=0.4, attention_multiplier=0.2, logits_scaling=2.5)),
        # dense OLMo 2: norms after attention and MLP, q/k norms over all heads
        "olmo2": (TR.Olmo2Config, TR.Olmo2ForCausalLM, dict(DEC)),
    }


KINDS = ["mixtral", "qwen2_moe", "qwen3_moe", "granitemoe", "granitemoeshared"]
ARCH = {"mixtral": "llama", "qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe", "granitemoe": "granitemoe",
        "granitemoeshared": "granitemoe", "granite": "granite", "olmo2": "olmo2"}
PERMUTED = {"mixtral", "granitemoe", "granitemoeshared", "granite"}  # converted through llama.cpp's LlamaModel
# the quantized files: the experts' type per family, attention matrices Q8_0, the rest F32
EXPERT_TYPE = {"mixtral": T.Q8_0, "qwen2_moe": T.Q4_0, "qwen3_moe": T.Q8_0, "granitemoe": T.Q4_0,
               "granitemoeshared": T.Q8_0, "granite": T.Q4_0, "olmo2": T.Q8_0}
DENSE = ["granite", "olmo2"]


def _permute(w, n_head):
    """llama.cpp's converter's Q/K row order (rows of each head pairwise interleaved)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _qdq(x, t):
    """x as the GGUF of type t holds it, read back by gguf-py (blocks along the last dim, as a GGUF row)."""
    if t == T.F32:
        return x
    return gguf.quants.dequantize(gguf.quants.quantize(x, t), t).reshape(x.shape).astype(np.float32)


def _role(name):
    """the quantization of an HF tensor in the quantized files: experts (a dense model's MLP), attention matrices,
    or F32"""
    dense = name.endswith(("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"))
    if (dense or any(s in name for s in (".experts.", "input_linear", "output_linear"))) and "shared" not in name:
        return "experts"
    if "self_attn." in name and name.endswith("_proj.weight"):
        return "attn"
    return "f32"


def write_gguf(kind, cfg, sd, path, quant, tweak=None):
    """sd (transformers' saved names, float32) as llama.cpp's converter writes kind; quant: the experts of
    EXPERT_TYPE[kind] and Q8_0 attention, else everything F32. tweak(writer_kv, tensors) may change the file."""
    arch = ARCH[kind]
    kv = {"block_count": cfg.num_hidden_layers, "context_length": cfg.max_position_embeddings,
          "embedding_length": cfg.hidden_size, "feed_forward_length": cfg.intermediate_size,
          "attention.head_count": cfg.num_attention_heads, "attention.head_count_kv": cfg.num_key_value_heads,
          "rope.freq_base": 500.0, "attention.layer_norm_rms_epsilon": cfg.rms_norm_eps,
          "vocab_size": cfg.vocab_size}
    E = getattr(cfg, "num_local_experts", None) or getattr(cfg, "num_experts", None)
    if E:
        kv["expert_count"], kv["expert_used_count"] = E, cfg.num_experts_per_tok
    if getattr(cfg, "moe_intermediate_size", None):
        kv["expert_feed_forward_length"] = cfg.moe_intermediate_size
    if getattr(cfg, "shared_expert_intermediate_size", None):
        kv["expert_shared_feed_forward_length"] = cfg.shared_expert_intermediate_size
    if getattr(cfg, "shared_intermediate_size", None):
        kv["expert_shared_feed_forward_length"] = cfg.shared_intermediate_size
    if getattr(cfg, "head_dim", None) and cfg.head_dim != cfg.hidden_size // cfg.num_attention_heads:
        kv["attention.key_length"] = kv["attention.value_length"] = cfg.head_dim
    if kind.startswith("granite"):
        kv.update({"attention.scale": cfg.attention_multiplier, "embedding_scale": cfg.embedding_multiplier,
                   "residual_scale": cfg.residual_multiplier, "logit_scale": cfg.logits_scaling})
    ts = {}  # GGUF name -> (HF-order array, ggml type)
    used = set()

    def put(name, x, hf_name, *more):
        used.update((hf_name,) + more)
        t = T.F32
        if quant and _role(hf_name) == "experts":
            t = EXPERT_TYPE[kind]
        elif quant and _role(hf_name) == "attn":
            t = T.Q8_0
        ts[name] = (np.ascontiguousarray(x, dtype=np.float32), t)

    L = cfg.num_hidden_layers
    put("token_embd.weight", sd["model.embed_tokens.weight"], "model.embed_tokens.weight")
    put("output_norm.weight", sd["model.norm.weight"], "model.norm.weight")
    if "lm_head.weight" in sd:
        put("output.weight", sd["lm_head.weight"], "lm_head.weight")
    leaf = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
            "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
            "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
            "block_sparse_moe.gate": "ffn_gate_inp", "mlp.gate": "ffn_gate_inp",
            "block_sparse_moe.router.layer": "ffn_gate_inp", "block_sparse_moe.output_linear": "ffn_down_exps",
            "mlp.shared_expert.gate_proj": "ffn_gate_shexp", "mlp.shared_expert.up_proj": "ffn_up_shexp",
            "mlp.shared_expert.down_proj": "ffn_down_shexp", "mlp.shared_expert_gate": "ffn_gate_inp_shexp",
            "shared_mlp.output_linear": "ffn_down_shexp", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
            "mlp.down_proj": "ffn_down"}
    if kind == "olmo2":  # llama.cpp's OLMo 2 names: its norms follow the sublayers
        leaf.update({"post_attention_layernorm": "post_attention_norm", "post_feedforward_layernorm": "post_ffw_norm"})
    for i in range(L):
        p = f"model.layers.{i}."
        for hf, g in leaf.items():
            for suf in ("weight", "bias"):
                n = f"{p}{hf}.{suf}"
                if n not in sd:
                    continue
                x = sd[n]
                if kind in PERMUTED and hf in ("self_attn.q_proj", "self_attn.k_proj"):
                    x = _permute(x, cfg.num_attention_heads if "q_proj" in hf else cfg.num_key_value_heads)
                put(f"blk.{i}.{g}.{suf}", x, n)
        for hf, g in (("w1", "ffn_gate_exps"), ("w3", "ffn_up_exps"), ("w2", "ffn_down_exps"),
                      ("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps"), ("down_proj", "ffn_down_exps")):
            names = [f"{p}block_sparse_moe.experts.{e}.{hf}.weight" for e in range(E or 0)] + \
                    [f"{p}mlp.experts.{e}.{hf}.weight" for e in range(E or 0)]
            got = [sd[n] for n in names if n in sd]
            if got:
                put(f"blk.{i}.{g}.weight", np.stack(got), *[n for n in names if n in sd])
        for hf, gate, up, I in (("block_sparse_moe.input_linear", "ffn_gate_exps", "ffn_up_exps",
                                 cfg.intermediate_size),
                                ("shared_mlp.input_linear", "ffn_gate_shexp", "ffn_up_shexp",
                                 getattr(cfg, "shared_intermediate_size", 0))):
            n = f"{p}{hf}.weight"
            if n in sd:
                x = sd[n]
                put(f"blk.{i}.{gate}.weight", x[..., :I, :], n)
                put(f"blk.{i}.{up}.weight", x[..., I:, :], n)
    if tweak:
        tweak(kv, ts)
    w = gguf.GGUFWriter(str(path), arch)
    for k, v in kv.items():
        key = f"{arch}.{k}"
        if isinstance(v, float):
            w.add_float32(key, v)
        else:
            w.add_uint32(key, int(v))
    for name, (x, t) in ts.items():
        if t == T.F32:
            w.add_tensor(name, x)
        else:
            w.add_tensor(name, gguf.quants.quantize(x, t), raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert used == set(sd), f"the writer left tensors out: {sorted(set(sd) - used)}"


@pytest.fixture(scope="module")
def workdir(request):
    return U.scratch(request, "gguf_moe")


@pytest.fixture(scope="module")
def tiny(workdir):
    from safetensors.numpy import load_file
    specs = _specs()
    cache = {}

    def get(kind):
        if kind not in cache:
            d = str(workdir / f"ckpt_{kind}")
            model = BU.make_tiny(kind, d, spec=specs[kind])
            cache[kind] = (d, model, load_file(os.path.join(d, "model.safetensors")))
        return cache[kind]
    return get


def _dequantized_model(kind, ckpt, sd, out):
    """transformers on the weights the quantized GGUF holds (each quantized tensor through gguf-py)."""
    import transformers
    from safetensors.numpy import save_file
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    q = {}
    for n, x in sd.items():
        r = _role(n)
        q[n] = _qdq(x, EXPERT_TYPE[kind]) if r == "experts" else _qdq(x, T.Q8_0) if r == "attn" else x
    save_file(q, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    for f in ("config.json", "generation_config.json"):
        if os.path.exists(os.path.join(ckpt, f)):
            shutil.copy(os.path.join(ckpt, f), out)
    return transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def built(tiny, workdir, winml):
    """(kind, quant, precision) -> (reference transformers model, model.onnx path, manifest)"""
    cache = {}

    def get(kind, quant, precision="fp32"):
        key = (kind, quant, precision)
        if key not in cache:
            ckpt, model, sd = tiny(kind)
            tag = f"{kind}_{'q' if quant else 'f32'}"
            path = workdir / f"{tag}.gguf"
            if not path.exists():
                write_gguf(kind, model.config, sd, path, quant)
            ref = _dequantized_model(kind, ckpt, sd, str(workdir / f"ref_{tag}")) if quant else model
            out = workdir / f"out_{tag}_{precision}"
            if out.exists():
                shutil.rmtree(out)
            r = U.run([winml, "build", "-m", path, "-o", out, "-p", precision, "-q", "-f", "json"], timeout=300)
            assert r.returncode == 0, U.describe(r)
            cache[key] = (ref, str(out / "model.onnx"), json.loads(r.stdout))
        return cache[key]
    return get


def _prefill(model, run_model, path):
    rng = np.random.default_rng(5)
    ids = BU.random_ids(rng, (1, 17), model.config.vocab_size)
    with torch.no_grad():
        ref = model(torch.tensor(ids)).logits.numpy()
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "position_ids": np.arange(17)[None],
             **empty_past(model, 1)}
    return run_model(path, feeds)["logits"], ref


@pytest.mark.parametrize("quant", [False, True], ids=["f32", "quantized"])
@pytest.mark.parametrize("kind", KINDS + DENSE)
def test_fp32_build_logits_match_transformers(kind, quant, built, run_model):
    ref_model, path, man = built(kind, quant)
    assert man["source_format"] == "gguf" and man["model_type"] == kind
    got, ref = _prefill(ref_model, run_model, path)
    d = float(np.abs(got - ref).max())
    assert d <= 1e-4, f"{kind}: logits differ by {d} (max |logit| {np.abs(ref).max():.3g})"
    assert np.abs(ref).max() > 1e-2


@pytest.mark.parametrize("kind", KINDS)
def test_greedy_steps_match_generate(kind, built):
    """our engine's greedy tokens through the KV cache of the fp32 build of the quantized file (the F32 files' logits
    above already equal transformers') against transformers' generate() on the dequantized weights"""
    import copy
    ref_model, path, _ = built(kind, True)
    rng = np.random.default_rng(7)
    B, S = 2, 6
    ids = BU.random_ids(rng, (B, S), ref_model.config.vocab_size)
    mask = np.ones((B, S), np.int64)  # unpadded: the build's GroupQueryAttention takes no left padding
    gen = copy.deepcopy(ref_model.generation_config)
    gen.eos_token_id, gen.pad_token_id, gen.do_sample = None, 0, False
    with torch.no_grad():
        want = ref_model.generate(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                                  generation_config=gen, max_new_tokens=12, min_new_tokens=12).numpy()[:, S:]
    np.testing.assert_array_equal(greedy(BU.RUNNERS["engine"], path, ref_model, ids, mask, 12), want)


@pytest.mark.parametrize("kind", KINDS)
def test_inspect_maps_the_expert_stacks(kind, tiny, workdir, winml):
    ckpt, model, sd = tiny(kind)
    path = workdir / f"inspect_{kind}.gguf"
    write_gguf(kind, model.config, sd, path, quant=True)
    d = U.inspect_json(winml, path)
    assert d["checkpoint"]["model_type"] == kind, d.get("checkpoint_error")
    t = {x["name"]: x for x in d["tensors"]}
    E = getattr(model.config, "num_local_experts", None) or model.config.num_experts
    g = t["blk.0.ffn_gate_exps.weight"]
    assert g["type"] == EXPERT_TYPE[kind].name and g["dims"][2] == E
    if kind.startswith("granite"):
        assert g["maps_to"] == "model.layers.0.block_sparse_moe.input_linear.weight"
        assert g["conversion"] == "rows stacked with its pair" and "maps_to" not in t["blk.0.ffn_up_exps.weight"]
    else:
        assert g["maps_to"].endswith("experts.0.w1.weight" if kind == "mixtral" else "experts.0.gate_proj.weight")
        assert g["conversion"] == "experts split: one tensor per expert"


@pytest.mark.parametrize("kind", KINDS)
def test_default_build_carries_4bit_experts_into_qmoe(kind, built, run_model, monkeypatch):
    """precision gguf: Q4_0 experts become com.microsoft QMoE on their blocks as they are (4-bit, blocks of 32, the
    implicit zero point 8; checked value by value at build), Q8_0 experts stay MoE on the dequantized values with
    the reason in the manifest (onnxruntime's CPU QMoE computes 8-bit blocked experts away from their values); both
    runtimes then match transformers on the dequantized weights"""
    monkeypatch.setenv("WM_NBITS_I15", "0")  # the float32 path (gguf_carry_util.CARRIED_LOGITS_TOL)
    import onnx
    ref_model, path, man = built(kind, True, "gguf")
    q = next(s for s in man["stages"] if s["name"] == "quant")
    moe = [t for t in q["carried"]["tensors"] if ".experts.fc" in t["tensor"]]
    assert len(moe) == 2 * ref_model.config.num_hidden_layers, q["carried"]["tensors"]
    ops = [n.op_type for n in onnx.load(path, load_external_data=False).graph.node]
    if EXPERT_TYPE[kind] == T.Q4_0:
        assert all(t["result"] == "carried" and t["onnx"] == "QMoE" and t["bits"] == 4 and t["block"] == 32 and
                   t["zero_points"] == "none" and t["exact"] for t in moe), moe
        assert "carried as QMoE (their GGUF blocks" in q["reason"], q["reason"]
        assert ops.count("QMoE") == 2 and "MoE" not in ops
    else:
        assert all(t["result"] == "float" and t["onnx"] == "MoE" and "8-bit blocked experts" in t["reason"] and
                   t["exact"] for t in moe), moe
        assert "their GGUF blocks do not fit QMoE" in q["reason"], q["reason"]
        assert ops.count("MoE") == 2 and "QMoE" not in ops
    got, ref = _prefill(ref_model, run_model, path)
    d = float(np.abs(got - ref).max())
    U.note(f"{kind} default GGUF build: logits vs transformers on the dequantized weights {d:.2g}")
    assert d <= C.CARRIED_LOGITS_TOL, d


# ---------------------------------------------------------------- hostile files

def _hostile(kind, tweak):
    def make(tiny, path):
        _, model, sd = tiny(kind)
        write_gguf(kind, model.config, sd, path, quant=False, tweak=tweak)
    return make


def _set(key, v):
    def t(kv, ts):
        kv[key] = v
    return t


def _shrink_experts(kv, ts):
    x, t = ts["blk.0.ffn_gate_exps.weight"]
    ts["blk.0.ffn_gate_exps.weight"] = (x[:-1], t)


def _drop(name):
    def t(kv, ts):
        del ts[name]
    return t


HOSTILE = [
    ("mixtral", _set("expert_count", 0), ["llama.expert_count", ": 0", "1 to 65536 experts"]),
    ("qwen3_moe", _set("expert_used_count", 9), ["qwen3moe.expert_used_count", "9 is more than the 8 experts"]),
    ("qwen2_moe", _shrink_experts, ["blk.0.ffn_gate_exps.weight", "[32, 32, 3]", "qwen2moe.expert_count"]),
    ("granitemoe", _drop("blk.1.ffn_up_exps.weight"), ["blk.1.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight",
                                                       "missing"]),
    # the audit's cases: counts past their range are refused before any tensor is sized from them
    ("mixtral", _set("expert_count", 2**32 - 1), ["llama.expert_count", "4294967295", "out of range"]),
    ("mixtral", _set("expert_count", 70000), ["llama.expert_count", "over 65536"]),
    ("mixtral", _set("expert_used_count", 0), ["llama.expert_used_count", "at least 1 expert"]),
    ("qwen3_moe", _set("expert_feed_forward_length", 2**32 - 1), ["qwen3moe.expert_feed_forward_length",
                                                                  "out of range [1, 16777216]"]),
    # a shared width of 0 left the shared tensors to no module ("not understood by naming scheme", no key named)
    ("qwen2_moe", _set("expert_shared_feed_forward_length", 0), ["qwen2moe.expert_shared_feed_forward_length",
                                                                 "0 is out of range [1, 16777216]"]),
    ("granitemoeshared", _set("expert_shared_feed_forward_length", 0),
     ["granitemoe.expert_shared_feed_forward_length", "0 is out of range [1, 16777216]"]),
    # a 2-D stack: its own dims named (it was shown as [64, 32, 0])
    ("mixtral", lambda kv, ts: ts.__setitem__("blk.0.ffn_down_exps.weight", (ts["blk.0.ffn_down_exps.weight"][0][0],
                                                                             ts["blk.0.ffn_down_exps.weight"][1])),
     ["blk.0.ffn_down_exps.weight", "2-D [64, 32]", "expected the experts stacked [64, 32, 4]"]),
]


@pytest.mark.parametrize("kind,tweak,needles", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_expert_metadata_refused_by_name(kind, tweak, needles, tiny, tmp_path, winml_asan):
    """build refuses each file naming the key or tensor; inspect (and --list-tasks) refuses it with the same message
    (the checks are the checkpoint's, which both run: inspect exited 0 on these files before)"""
    path = tmp_path / "bad.gguf"
    _hostile(kind, tweak)(tiny, path)
    out = tmp_path / "out"
    r = U.run([winml_asan, "build", "-m", path, "-o", out], timeout=300)
    msg = U.assert_clean_error(r, "winml build", *needles)
    assert not out.exists()
    for extra in ([], ["--list-tasks"]):
        r = U.run([winml_asan, "inspect", "-m", path, "-f", "json", *extra], timeout=300)
        got = U.assert_clean_error(r, "winml inspect", *needles)
        assert got.split(": error: ", 1)[1] == msg.split(": error: ", 1)[1], (got, msg)
    assert not out.exists() and not U.leftovers(tmp_path)
