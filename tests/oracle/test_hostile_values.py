"""Hostile VALUES inside well-formed model folders (stop 51): the parse succeeds, then the value must not make the
work run away, crash or build a silently different model. Each case runs the normal and the ASan+UBSan build
(`wm` fixture): exit 2, one stderr line naming the file and the field, the -o folder absent, nothing left beside it.

Found by sweeping config.json's size keys of llama / qwen2 / gemma3_text / phi / gpt_neox / bert / vit / clip /
whisper / wav2vec2 / bart / t5 (0, -1, 2^31, 2^40, 1e300, 3.5, "12", 1e-300, NaN, heads not dividing, rope
factors 0 / negative / 1e300, layer_types of the wrong length, id2label of 10^6 entries) through `winml inspect` and
`winml build --random-weights`, safetensors whose shapes disagree with config.json, preprocessor_config.json values,
generation_config.json / genai_config.json values, 10^7-entry tokenizers and long audio:
  - defects fixed: Gemma 3 `sliding_window: 0` built the family's default window (transformers masks every key);
    `image_std` 1e-45 (a float32 denormal) gave inf pixels and null scores with exit 0; a tied checkpoint carrying an
    lm_head.weight of another vocabulary was built with the tied head (transformers refuses the size mismatch);
  - already refused well (kept here so they stay so): sizes out of range, float / string sizes, heads or kv heads
    not dividing, layer_types length, rope factor 0, id2label keys out of range or a config.json over 16 MiB,
    random weights larger than the free disk, and every tensor whose shape config.json contradicts.
"""
import copy
import json
import os
import shutil
import struct
import zlib

import numpy as np
import pytest

import oracle_util as U


def _cfg(cls, **kw):
    d = cls(**kw).to_dict()
    d.pop("transformers_version", None)
    return d


@pytest.fixture(scope="module")
def bases():
    import transformers as T
    dec = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=96, max_position_embeddings=128)
    return {
        "llama": _cfg(T.LlamaConfig, **dec, architectures=["LlamaForCausalLM"]),
        "gemma3_text": _cfg(T.Gemma3TextConfig, **dec, head_dim=16, sliding_window=4,
                            layer_types=["sliding_attention", "full_attention"], architectures=["Gemma3ForCausalLM"]),
        "bert": _cfg(T.BertConfig, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                     vocab_size=96, max_position_embeddings=80, architectures=["BertForSequenceClassification"]),
        "vit": _cfg(T.ViTConfig, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                    image_size=32, patch_size=8, architectures=["ViTForImageClassification"]),
        "t5": _cfg(T.T5Config, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, vocab_size=96,
                   architectures=["T5ForConditionalGeneration"]),
        "whisper": _cfg(T.WhisperConfig, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=96,
                        num_mel_bins=80, max_source_positions=1500, max_target_positions=64,
                        architectures=["WhisperForConditionalGeneration"]),
    }


def _set(**kv):
    return lambda d: d.update(kv)


def _drop_head_dim(**kv):
    def f(d):
        d.pop("head_dim", None)
        d.update(kv)
    return f


# name -> (family, change to config.json, words the one error line must hold besides "config.json")
CONFIG_CASES = {
    # fixed in stop 51: 0 was read as "absent" and the default window built
    "gemma3_sliding_window_0": ("gemma3_text", _set(sliding_window=0), ["'sliding_window'", "at least 1"]),
    # refused before stop 51 (regression guards)
    "hidden_2p40": ("llama", _set(hidden_size=1 << 40), ["'hidden_size'"]),
    "hidden_float": ("llama", _set(hidden_size=3.5), ["'hidden_size'"]),
    "hidden_string": ("llama", _set(hidden_size="32"), ["'hidden_size'"]),
    "layers_1e300": ("llama", _set(num_hidden_layers=1e300), ["'num_hidden_layers'"]),
    "vocab_0": ("llama", _set(vocab_size=0), ["'vocab_size'"]),
    "kv_not_dividing": ("llama", _set(num_key_value_heads=3), ["'num_key_value_heads'", "does not divide"]),
    "heads_not_dividing": ("bert", _drop_head_dim(num_attention_heads=5), ["'num_attention_heads'", "does not divide"]),
    "rope_factor_0": ("llama", _set(rope_parameters={"rope_type": "linear", "factor": 0, "rope_theta": 1e4},
                                    rope_scaling={"rope_type": "linear", "factor": 0, "rope_theta": 1e4}),
                      ["factor", "> 0"]),
    "layer_types_short": ("gemma3_text", _set(layer_types=["full_attention"]), ["'layer_types'", "1 entries for 2"]),
    "id2label_out_of_range": ("bert", _set(id2label={"0": "a", "999999999": "b"}), ["'id2label'", "999999999"]),
    "vit_patch_0": ("vit", _set(patch_size=0), ["'patch_size'"]),
    "t5_d_model_0": ("t5", _set(d_model=0), ["'d_model'"]),
    "whisper_mels_1e6": ("whisper", _set(num_mel_bins=10 ** 6), ["'num_mel_bins'"]),
}


def _folder(tmp_path, cfg):
    m = tmp_path / "m"
    m.mkdir()
    (m / "config.json").write_text(json.dumps(cfg))
    return m


def _assert_nothing_written(out):
    assert not out.exists(), f"{out} was written"
    assert not U.leftovers(out.parent), U.leftovers(out.parent)


@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
def test_hostile_config_value(case, bases, wm, tmp_path):
    fam, change, words = CONFIG_CASES[case]
    cfg = copy.deepcopy(bases[fam])
    change(cfg)
    m = _folder(tmp_path, cfg)
    out = tmp_path / "out"
    r = U.run([wm, "inspect", "-m", m, "-f", "json"], timeout=120)
    U.assert_clean_error(r, "winml inspect", "config.json", *words)
    r = U.run([wm, "build", "-m", m, "-o", out, "--random-weights"], timeout=120)
    U.assert_clean_error(r, "winml build", "config.json", *words)
    _assert_nothing_written(out)


def test_sliding_window_0_without_sliding_layers_builds(bases, winml, tmp_path):
    """Qwen2-MoE writes sliding_window 0 with use_sliding_window false: no layer slides, so 0 is no window."""
    cfg = copy.deepcopy(bases["gemma3_text"])
    cfg.update(sliding_window=0, layer_types=["full_attention", "full_attention"])
    m = _folder(tmp_path, cfg)
    r = U.run([winml, "build", "-m", m, "-o", tmp_path / "out", "--random-weights", "-q"], timeout=300)
    assert r.returncode == 0, U.describe(r)


def test_random_weights_over_free_disk(bases, wm, tmp_path):
    """18.8 TiB of random weights: refused before writing, naming the size and the free space."""
    cfg = copy.deepcopy(bases["llama"])
    cfg.update(hidden_size=65536, intermediate_size=262144, num_hidden_layers=100, num_attention_heads=64,
               num_key_value_heads=64, head_dim=1024, vocab_size=32000)
    m = _folder(tmp_path, cfg)
    out = tmp_path / "out"
    r = U.run([wm, "build", "-m", m, "-o", out, "--random-weights"], timeout=120)
    U.assert_clean_error(r, "winml build", "TiB", "free")
    _assert_nothing_written(out)


# ---------------------------------------------------------------- weights that contradict config.json

def _mismatches(sd):
    q, emb, norm = ("model.layers.0.self_attn.q_proj.weight", "model.embed_tokens.weight",
                    "model.layers.0.input_layernorm.weight")
    last = [k for k in sd if ".layers.1." in k]
    return {  # name -> (change to the state dict, words)
        "q_proj_short": (lambda d: d.__setitem__(q, d[q][:-1].copy()), [q, "[31, 32]", "expected [32, 32]"]),
        "q_proj_3d": (lambda d: d.__setitem__(q, d[q][None].copy()), [q, "[1, 32, 32]"]),
        "missing_layer": (lambda d: [d.pop(k) for k in last], ["missing tensor", "model.layers.1."]),
        "extra_layer": (lambda d: [d.__setitem__(k.replace(".1.", ".2."), d[k]) for k in last],
                        ["model.layers.2.", "not understood"]),
        "vocab_rows": (lambda d: d.__setitem__(emb, np.concatenate([d[emb], d[emb][:5]])), [emb, "[101, 32]"]),
        "lm_head_rows": (lambda d: d.__setitem__("lm_head.weight", d["lm_head.weight"][:-5].copy()),
                         ["lm_head.weight", "[91, 32]", "expected [96, 32]"]),
        "norm_scalar": (lambda d: d.__setitem__(norm, np.array(1.0, np.float32)), [norm, "shape []"]),
        "q_proj_int32": (lambda d: d.__setitem__(q, d[q].astype(np.int32)), [q, "I32"]),
    }


@pytest.fixture(scope="module")
def tiny_llama(request, bases):
    """A tiny llama checkpoint of numpy weights (the llama naming scheme), config.json from transformers."""
    from safetensors.numpy import save_file
    d = U.scratch(request, "hostile_llama")
    cfg = bases["llama"]
    H, I, V, L, hd = 32, 64, 96, 2, 8
    rng = np.random.default_rng(0)
    w = lambda *s: (0.2 * rng.standard_normal(s)).astype(np.float32)  # noqa: E731
    sd = {"model.embed_tokens.weight": w(V, H), "model.norm.weight": np.ones(H, np.float32),
          "lm_head.weight": w(V, H)}
    for i in range(L):
        p = f"model.layers.{i}."
        sd.update({p + "input_layernorm.weight": np.ones(H, np.float32),
                   p + "post_attention_layernorm.weight": np.ones(H, np.float32),
                   p + "self_attn.q_proj.weight": w(4 * hd, H), p + "self_attn.k_proj.weight": w(2 * hd, H),
                   p + "self_attn.v_proj.weight": w(2 * hd, H), p + "self_attn.o_proj.weight": w(H, 4 * hd),
                   p + "mlp.gate_proj.weight": w(I, H), p + "mlp.up_proj.weight": w(I, H),
                   p + "mlp.down_proj.weight": w(H, I)})
    (d / "config.json").write_text(json.dumps(dict(cfg, tie_word_embeddings=False)))
    save_file(sd, str(d / "model.safetensors"))
    return d, sd


def test_tiny_llama_builds(tiny_llama, winml, tmp_path):
    """The unchanged checkpoint builds (so each refusal below is the change's doing)."""
    r = U.run([winml, "build", "-m", tiny_llama[0], "-o", tmp_path / "out", "-q"], timeout=300)
    assert r.returncode == 0, U.describe(r)


@pytest.mark.parametrize("case", ["q_proj_short", "q_proj_3d", "missing_layer", "extra_layer", "vocab_rows",
                                  "lm_head_rows", "norm_scalar", "q_proj_int32"])
def test_weights_contradicting_config(case, tiny_llama, wm, tmp_path):
    from safetensors.numpy import save_file
    src, sd = tiny_llama
    change, words = _mismatches(sd)[case]
    d = {k: v.copy() for k, v in sd.items()}
    change(d)
    m = tmp_path / "m"
    m.mkdir()
    shutil.copy(src / "config.json", m)
    save_file(d, str(m / "model.safetensors"))
    out = tmp_path / "out"
    for cmd in (["inspect", "-m", m, "-f", "json"], ["build", "-m", m, "-o", out]):
        r = U.run([wm, *cmd], timeout=120)
        U.assert_clean_error(r, "winml " + cmd[0], *words)
    _assert_nothing_written(out)


# ---------------------------------------------------------------- preprocessor_config.json

def _png(path, w, h):
    raw = b"".join(b"\0" + bytes((x * 7 + y * 3) % 256 for x in range(w * 3)) for y in range(h))

    def chunk(t, data):
        return struct.pack(">I", len(data)) + t + data + struct.pack(">I", zlib.crc32(t + data) & 0xFFFFFFFF)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                     chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    return path


PREP = {"image_processor_type": "ViTImageProcessor", "do_resize": True, "size": {"height": 32, "width": 32},
        "do_normalize": True, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "resample": 2}


@pytest.fixture(scope="module")
def vit_folder(request, bases, build_dir):
    d = U.scratch(request, "hostile_vit")
    src = d / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps(bases["vit"]))
    (src / "preprocessor_config.json").write_text(json.dumps(PREP))
    r = U.run([U.binary(build_dir, "winml"), "build", "-m", src, "-o", d / "vit", "--random-weights", "-q"], 300)
    assert r.returncode == 0, U.describe(r)
    return d / "vit", _png(d / "img.png", 40, 30)


@pytest.mark.parametrize("std, ok", [([1e-45, 1, 1], False), ([0, 1, 1], False), ([1e-20, 1, 1], True)])
def test_image_std_divisor(std, ok, vit_folder, wm, tmp_path):
    """A denormal std (1e-45) made every pixel inf and the scores null with exit 0; now refused like 0."""
    folder, img = vit_folder
    d = tmp_path / "m"
    shutil.copytree(folder, d)
    (d / "preprocessor_config.json").write_text(json.dumps(dict(PREP, image_std=std)))
    r = U.run([wm, "run", "-m", d, "--image", img, "-f", "json"], timeout=120)
    if ok:
        assert r.returncode == 0 and not U.crashed(r), U.describe(r)
        return
    U.assert_clean_error(r, "winml run", "preprocessor_config.json", "'image_std'")


@pytest.mark.parametrize("rows, ok", [(91, False), (96, True)])
def test_tied_lm_head_of_another_shape(rows, ok, tiny_llama, wm, tmp_path):
    """tie_word_embeddings true and an lm_head.weight of 91 rows for vocab_size 96: transformers refuses it (size
    mismatch); winml ignored the tensor and built the tied head, a silently different model. The same shape builds."""
    from safetensors.numpy import save_file
    src, sd = tiny_llama
    d = {k: v.copy() for k, v in sd.items()}
    d["lm_head.weight"] = d["model.embed_tokens.weight"][:rows].copy()
    m = tmp_path / "m"
    m.mkdir()
    (m / "config.json").write_text(json.dumps(dict(json.loads((src / "config.json").read_text()),
                                                   tie_word_embeddings=True)))
    save_file(d, str(m / "model.safetensors"))
    out = tmp_path / "out"
    r = U.run([wm, "build", "-m", m, "-o", out, "-q"], timeout=300)
    if ok:
        assert r.returncode == 0 and not U.crashed(r), U.describe(r)
        return
    U.assert_clean_error(r, "winml build", "lm_head.weight", "[91, 32]", "expected [96, 32]", "config.json")
    _assert_nothing_written(out)
