"""The reference's encoder-decoder PART recipes (issues 34 + 32): Helsinki-NLP opus-mt's
translation_{fp32,fp16}_{encoder,decoder}_config.json and TrOCR's image-to-text_fp16_config_{encoder,decoder}.json
(../shared/reference-recipes), their shapes rewritten for tiny random checkpoints saved by transformers (a
MarianMTModel as test_builder_seq2seq makes it; a ViT + TrOCR VisionEncoderDecoderModel as test_builder_trocr),
built with `winml build -c` into one graph each:

- the encoder part (input_ids + attention_mask int32, or pixel_values -> encoder_hidden_states) equals
  transformers' encoder within 1e-4, in onnxruntime and in our engine;
- the decoder part (decoder_input_ids [1, 1] int32, encoder_hidden_states, the encoder's attention_mask,
  decoder_attention_mask [1, T], cache_position [1], past_N_key/value [1, heads, T, head_dim] -> logits,
  present_N_key/value), run step by step with present fed back as past and cache_position 0, 1, 2 ..., gives
  transformers' logits (its decoder with its own cache) within 1e-4 for 8 steps, in onnxruntime and in our engine,
  and present holds the step's K/V in slot cache_position and zeros in the slots not yet written;
- a greedy loop over the two parts returns transformers' generate token for token;
- the fp16 decoder recipe builds an fp16 graph with float32 IO (fp16_keep_io_types) whose logits stay near
  transformers'; `winml perf` runs the static part; a recipe whose cache shape is not the checkpoint's (heads) or
  that lacks a layer's past exits 2 naming the field, leaving nothing behind.
"""
import copy
import json
import os

import numpy as np
import onnx
import pytest
import torch

import oracle_util as U

TOL = 1e-4
REF = os.path.join(os.path.dirname(U.ROOT), "shared", "reference-recipes")
OPUS = os.path.join(REF, "Helsinki-NLP_opus-mt-fr-en", "cpu", "cpu")
TROCR = os.path.join(REF, "microsoft_trocr-base-printed")
SE, T_SLOTS, STEPS = 10, 16, 8
torch.set_num_threads(1)


def load(path):
    with open(path) as f:
        return json.load(f)


def part_recipe(src, dst, *, se, slots, layers, heads, hd, width):
    """The reference recipe src with its shapes rewritten for a checkpoint (sequence se, slots T, layers ...)."""
    doc = copy.deepcopy(load(src))
    e = doc["export"]
    names = [t["name"] for t in e["input_tensors"]]
    if "decoder_input_ids" not in names:
        for t in e["input_tensors"]:
            if t["name"] in ("input_ids", "attention_mask"):
                t["shape"] = [1, se]
    else:
        keep = [t for t in e["input_tensors"] if not t["name"].startswith("past_")]
        for t in keep:
            t["shape"] = {"decoder_input_ids": [1, 1], "encoder_hidden_states": [1, se, width], "attention_mask": [1, se],
                          "decoder_attention_mask": [1, slots], "cache_position": [1]}[t["name"]]
        past = [{"name": f"past_{i}_{kv}", "dtype": "float32", "shape": [1, heads, slots, hd], "value_range": [0, 1]}
                for i in range(layers) for kv in ("key", "value")]
        e["input_tensors"] = keep + past
        e["output_tensors"] = [{"name": "logits"}] + [{"name": f"present_{i}_{kv}"} for i in range(layers)
                                                      for kv in ("key", "value")]
    with open(dst, "w") as f:
        json.dump(doc, f, indent=1)
    return str(dst)


def make_marian(path, std):
    import transformers as T
    torch.manual_seed(0)
    cfg = T.MarianConfig(vocab_size=320, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                         decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=48, max_position_embeddings=64,
                         scale_embedding=True, pad_token_id=319, init_std=std, decoder_start_token_id=319,
                         eos_token_id=0, forced_eos_token_id=0)
    m = T.MarianMTModel(cfg)
    with torch.no_grad():
        m.final_logits_bias.normal_(0, 1.0)
        if std > 0.1:
            m.final_logits_bias[0, 0] += 8.0  # some greedy rows end early
    m.eval()
    m.save_pretrained(path)
    return m


def make_trocr(path):
    import transformers as T
    enc = T.ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=48)
    dec = T.TrOCRConfig(vocab_size=160, max_position_embeddings=64, bos_token_id=0, pad_token_id=1, eos_token_id=2,
                        decoder_start_token_id=0, d_model=24, decoder_layers=2, decoder_attention_heads=2,
                        decoder_ffn_dim=40, activation_function="relu", scale_embedding=True,
                        tie_word_embeddings=False)
    cfg = T.VisionEncoderDecoderConfig.from_encoder_decoder_configs(enc, dec)
    cfg.decoder_start_token_id, cfg.pad_token_id, cfg.eos_token_id = 0, 1, 2
    torch.manual_seed(0)
    m = T.VisionEncoderDecoderModel(config=cfg).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for n, p in m.named_parameters():
            p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g) if "norm" in n.lower() and n.endswith("weight")
                    else 0.1 * torch.randn(p.shape, generator=g))
    m.save_pretrained(path)
    return m


def build(winml, ck, recipe, out, extra=()):
    r = U.run([winml, "build", "-m", ck, "-c", recipe, "-o", out, *extra], timeout=300)
    assert r.returncode == 0, U.describe(r)
    return out


@pytest.fixture(scope="module")
def parts(request, winml):
    d = U.scratch(request, "builder_s2s_parts")
    out = {}
    for use, std in (("par", 0.02), ("gen", 0.5)):
        ck = str(d / f"marian_{use}")
        m = make_marian(ck, std)
        c = m.config
        kw = dict(se=SE, slots=T_SLOTS, layers=c.decoder_layers, heads=c.decoder_attention_heads,
                  hd=c.d_model // c.decoder_attention_heads, width=c.d_model)
        enc = part_recipe(os.path.join(OPUS, "translation_fp32_encoder_config.json"), d / f"enc_{use}.json", **kw)
        dec = part_recipe(os.path.join(OPUS, "translation_fp32_decoder_config.json"), d / f"dec_{use}.json", **kw)
        out[use] = (m, ck, build(winml, ck, enc, str(d / f"b_enc_{use}"), ["-q"]),
                    build(winml, ck, dec, str(d / f"b_dec_{use}"), ["-q"]), dec)
    ck = str(d / "trocr")
    m = make_trocr(ck)
    dc = m.config.decoder
    n_pos = (32 // 8) ** 2 + 1
    kw = dict(se=n_pos, slots=T_SLOTS, layers=dc.decoder_layers, heads=dc.decoder_attention_heads,
              hd=dc.d_model // dc.decoder_attention_heads, width=m.config.encoder.hidden_size)
    enc = part_recipe(os.path.join(TROCR, "image-to-text_fp16_config_encoder.json"), d / "enc_trocr.json", **kw)
    with open(enc) as f:
        doc = json.load(f)
    doc["export"]["input_tensors"][0]["shape"] = [1, 3, 32, 32]
    with open(enc, "w") as f:
        json.dump(doc, f)
    dec = part_recipe(os.path.join(TROCR, "image-to-text_fp16_config_decoder.json"), d / "dec_trocr.json", **kw)
    out["trocr"] = (m, ck, build(winml, ck, enc, str(d / "b_enc_trocr"), ["-q"]),
                    build(winml, ck, dec, str(d / "b_dec_trocr"), ["-q"]), dec)
    out["dir"] = d
    return out


def src_row(m, rng):
    ids = rng.integers(2, m.config.vocab_size - 1, size=(1, SE)).astype(np.int32)
    mask = np.ones((1, SE), np.int32)
    mask[0, 7:] = 0  # right padding: masked in the encoder and in the cross-attention
    ids[mask == 0] = m.config.pad_token_id
    return ids, mask


def step_feeds(model_path, L, heads, hd, ehs, tok, t, cache, enc_mask=None):
    feeds = {"decoder_input_ids": np.array([[tok]], np.int32), "encoder_hidden_states": ehs,
             "decoder_attention_mask": (np.arange(T_SLOTS) <= t).astype(np.int64)[None],
             "cache_position": np.array([t], np.int64)}
    if enc_mask is not None:
        feeds["attention_mask"] = enc_mask.astype(np.int64)
    for i in range(L):
        for kv in ("key", "value"):
            feeds[f"past_{i}_{kv}"] = cache.get(f"{i}_{kv}", np.zeros((1, heads, T_SLOTS, hd), np.float32))
    return feeds


def decode_steps(run, dec_path, L, heads, hd, ehs, toks, enc_mask=None, check=None):
    """Runs the decoder part over toks (one a step); returns the logits [steps, V]."""
    cache, out = {}, []
    for t, tok in enumerate(toks):
        r = run(dec_path, step_feeds(dec_path, L, heads, hd, ehs, tok, t, cache, enc_mask))
        for i in range(L):
            for kv in ("key", "value"):
                p = r[f"present_{i}_{kv}"]
                assert p.shape == (1, heads, T_SLOTS, hd)
                assert not p[:, :, t + 1:].any(), f"step {t}: slots after cache_position written"
                cache[f"{i}_{kv}"] = p
        if check:
            check(t, cache)
        out.append(r["logits"][0, -1])
    return np.stack(out)


def hf_steps(m, enc_out, enc_mask, toks, check_cache=None):
    """transformers' decoder with its own cache, one token a step: logits [steps, V]."""
    from transformers.modeling_outputs import BaseModelOutput
    out, pkv = [], None
    with torch.no_grad():
        for t, tok in enumerate(toks):
            kw = {} if enc_mask is None else {"attention_mask": torch.tensor(enc_mask.astype(np.int64))}
            r = m(encoder_outputs=BaseModelOutput(last_hidden_state=torch.tensor(enc_out)),
                  decoder_input_ids=torch.tensor([[tok]]), past_key_values=pkv, use_cache=True, **kw)
            pkv = r.past_key_values
            if check_cache:
                check_cache(t, pkv)
            out.append(r.logits[0, -1].numpy())
    return np.stack(out)


@pytest.mark.parametrize("kind", ["par", "trocr"])
def test_parts_equal_transformers(kind, parts, run_model):
    m, ck, enc_dir, dec_dir, _ = parts[kind]
    rng = np.random.default_rng(3)
    enc_path, dec_path = os.path.join(enc_dir, "model.onnx"), os.path.join(dec_dir, "model.onnx")
    assert sorted(o.name for o in onnx.load(enc_path).graph.output) == ["encoder_hidden_states"]
    if kind == "trocr":
        px = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
        with torch.no_grad():
            ref_h = m.encoder(pixel_values=torch.tensor(px)).last_hidden_state.numpy()
        h = run_model(enc_path, {"pixel_values": px})["encoder_hidden_states"]
        enc_mask, dc = None, m.config.decoder
        L, heads, hd = dc.decoder_layers, dc.decoder_attention_heads, dc.d_model // dc.decoder_attention_heads
        start = m.config.decoder_start_token_id
        vocab = dc.vocab_size
    else:
        ids, enc_mask = src_row(m, rng)
        with torch.no_grad():
            ref_h = m.get_encoder()(input_ids=torch.tensor(ids.astype(np.int64)),
                                    attention_mask=torch.tensor(enc_mask.astype(np.int64))).last_hidden_state.numpy()
        h = run_model(enc_path, {"input_ids": ids, "attention_mask": enc_mask})["encoder_hidden_states"]
        c = m.config
        L, heads, hd = c.decoder_layers, c.decoder_attention_heads, c.d_model // c.decoder_attention_heads
        start, vocab = c.decoder_start_token_id, c.vocab_size
    valid = slice(None) if enc_mask is None else enc_mask[0].astype(bool)
    err = np.abs(h[0, valid] - ref_h[0, valid]).max()
    assert h.shape == ref_h.shape and err < TOL, f"{kind} encoder part: {err}"
    toks = [start] + list(rng.integers(3, vocab - 2, size=STEPS - 1))
    hf_kv = {}

    def keep(t, pkv):  # transformers' self-attention cache after step t (layer 0 key)
        hf_kv[t] = pkv.self_attention_cache.layers[0].keys[0].numpy().copy()

    want = hf_steps(m, ref_h, enc_mask, toks, keep)

    def same_cache(t, cache):  # slots 0..t of present_0_key are transformers' cache
        err = np.abs(cache["0_key"][0, :, :t + 1] - hf_kv[t]).max()
        assert err < TOL, f"step {t}: present_0_key {err}"

    got = decode_steps(run_model, dec_path, L, heads, hd, ref_h, toks, enc_mask, same_cache)
    err = np.abs(got - want).max()
    U.note(f"{kind} decoder part: {STEPS} steps, max |logits - transformers| {err:.2e}")
    assert err < TOL, f"{kind} decoder part over {STEPS} steps: {err}"


def test_greedy_loop_equals_generate(parts, run_model):
    m, ck, enc_dir, dec_dir, _ = parts["gen"]
    c = m.config
    L, heads, hd = c.decoder_layers, c.decoder_attention_heads, c.d_model // c.decoder_attention_heads
    m.generation_config.forced_eos_token_id = None
    rng = np.random.default_rng(5)
    ended = 0
    for row in range(3):
        ids, mask = src_row(m, rng)
        with torch.no_grad():
            want = m.generate(input_ids=torch.tensor(ids.astype(np.int64)),
                              attention_mask=torch.tensor(mask.astype(np.int64)), max_new_tokens=STEPS, num_beams=1,
                              do_sample=False)[0].tolist()
        h = run_model(os.path.join(enc_dir, "model.onnx"), {"input_ids": ids, "attention_mask": mask})
        h = h["encoder_hidden_states"]
        dec_path = os.path.join(dec_dir, "model.onnx")
        got, cache = [c.decoder_start_token_id], {}
        for t in range(STEPS):
            r = run_model(dec_path, step_feeds(dec_path, L, heads, hd, h, got[-1], t, cache, mask))
            cache = {f"{i}_{kv}": r[f"present_{i}_{kv}"] for i in range(L) for kv in ("key", "value")}
            got.append(int(np.argmax(r["logits"][0, -1])))
            if got[-1] == c.eos_token_id:
                ended += 1
                break
        assert got == want, (row, got, want)
    U.note(f"greedy over the parts: 3 rows equal transformers' generate ({ended} ended before {STEPS} tokens)")


def test_fp16_decoder_part(parts, winml, run_model):
    """The fp16 recipe: an fp16 graph with float32 IO, logits near transformers' (fp16 weights)."""
    m, ck, enc_dir, _, _ = parts["par"]
    c = m.config
    d = parts["dir"]
    kw = dict(se=SE, slots=T_SLOTS, layers=c.decoder_layers, heads=c.decoder_attention_heads,
              hd=c.d_model // c.decoder_attention_heads, width=c.d_model)
    rec = part_recipe(os.path.join(OPUS, "translation_fp16_decoder_config.json"), d / "dec_fp16.json", **kw)
    out = build(winml, ck, rec, str(d / "b_dec_fp16"), ["-q"])
    man = load(os.path.join(out, "build_manifest.json"))
    assert man["precision"] == "fp16", man["precision"]
    g = onnx.load(os.path.join(out, "model.onnx")).graph
    assert all(v.type.tensor_type.elem_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.INT32, onnx.TensorProto.INT64)
               for v in list(g.input) + list(g.output))
    assert any(i.data_type == onnx.TensorProto.FLOAT16 for i in g.initializer)
    rng = np.random.default_rng(3)
    ids, mask = src_row(m, rng)
    with torch.no_grad():
        ref_h = m.get_encoder()(input_ids=torch.tensor(ids.astype(np.int64)),
                                attention_mask=torch.tensor(mask.astype(np.int64))).last_hidden_state.numpy()
    toks = [c.decoder_start_token_id] + list(rng.integers(3, c.vocab_size - 2, size=3))
    want = hf_steps(m, ref_h, mask, toks)
    got = decode_steps(run_model, os.path.join(out, "model.onnx"), c.decoder_layers, c.decoder_attention_heads,
                       c.d_model // c.decoder_attention_heads, ref_h, toks, mask)
    err = np.abs(got - want).max()
    U.note(f"fp16 decoder part: max |logits - transformers fp32| {err:.2e}")
    assert err < 2e-2, err


def test_perf_runs_the_parts(parts, winml):
    for kind in ("par", "trocr"):
        for p in parts[kind][2:4]:
            r = U.run([winml, "perf", "-m", p, "--iterations", "2", "--warmup", "1"], timeout=120)
            assert r.returncode == 0, U.describe(r)


@pytest.mark.parametrize("edit,flags,needles", [
    (lambda d: d["export"]["input_tensors"][-1]["shape"].__setitem__(1, 3), [],
     ["'export.input_tensors[past_1_value].shape'", "[1, 3, 16, 16]", "expected [1, 2, 16, 16]"]),
    (lambda d: d["export"]["input_tensors"].pop(), [],
     ["'export.input_tensors'", "no 'past_1_value'"]),
    (lambda d: d["export"]["input_tensors"][0]["shape"].__setitem__(1, 4), [],
     ["'export.input_tensors[decoder_input_ids].shape'", "one token a step"]),
    (lambda d: d["export"]["input_tensors"][3]["shape"].__setitem__(1, 65), [],
     ["'export.input_tensors[decoder_attention_mask].shape'", "max_position_embeddings 64"]),
    (lambda d: d["export"]["output_tensors"].pop(), [],
     ["'export.output_tensors'"]),
    (lambda d: None, ["-p", "int8"],
     ["precision int8", "builds in fp32 or fp16"]),
])
def test_bad_part_recipe_refused(edit, flags, needles, parts, winml_asan, tmp_path):
    m, ck, _, _, dec = parts["par"]
    doc = load(dec)
    edit(doc)
    rp = tmp_path / "rec.json"
    rp.write_text(json.dumps(doc))
    r = U.run([winml_asan, "build", "-m", ck, "-c", str(rp), "-o", str(tmp_path / "o"), *flags])
    U.assert_clean_error(r, "winml build", str(rp), *needles)
    assert not (tmp_path / "o").exists()
