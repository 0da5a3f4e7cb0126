"""The reference system's 299 recipes (../shared/reference-recipes, laid out as
<org>_<name>/[<ep>/<device>/]<task>_<precision>_config[_<part>].json) through winml:

- every file parses and validates (`winml config -c FILE -f json`), and every field it holds is either one the
  recipe model uses or listed in `reference_fields_kept` (nothing read silently and dropped);
- every recipe whose model_type and task the builder serves builds with --random-weights from a tiny config of its
  model_type, and the model's inputs and outputs are the recipe's (names, dtypes, static shapes); its static
  (static / qdq) quant sections too: QDQ calibrated by our engine on seeded samples, said in the manifest;
- every other recipe is refused by `winml build` with exit 2 and ONE error line naming the unsupported
  loader.model_type or loader.task, and nothing is left in the output folder (loader.trust_remote_code is a
  permission, as in transformers: it refuses nothing; a checkpoint with custom code, auto_map, is refused by its config); `winml config` says the same (buildable false, the same reason).

The counts of each are asserted and printed. Builds are deduplicated by what decides the graph (model_type,
task, quant mode, inputs, outputs, optim switches); every file is still parsed and checked on its own.
"""
import collections
import json
import os
import re
import shutil
import subprocess

import numpy as np
import onnx
import pytest

import oracle_util as U
from recipe_survey import field_paths, recipe_files

REF = os.path.join(os.path.dirname(U.ROOT), "shared", "reference-recipes")

# What the builder serves today (asserted: a change in coverage must update these numbers knowingly).
# Before the encoder-decoder part recipes built (opus-mt's 8, TrOCR's 8): built 195, model_type 104. The 7
# wav2vec2 recipes with loader.trust_remote_code (standard Wav2Vec2 checkpoints) were refused for that field
# until 2026-12-07; the field is a permission only, so they build (their build key holds the field). bart-large-mnli's
# 6 text-classification recipes (BartForSequenceClassification) and the 15 vitpose recipes (keypoint-detection) build
# since stop 51 (was built 211, model_type 88).
WANT = {"parsed": 299, "built": 232, "model_type": 67, "task": 0, "quant.mode": 0}

# Fields the recipe model uses (the rest must come back as kept). An object's members are listed on their own.
USED = {
    "loader", "loader.task", "loader.model_class", "loader.model_type", "loader.trust_remote_code",
    "export", "export.opset_version", "export.batch_size", "export.input_tensors", "export.input_tensors[].name",
    "export.input_tensors[].dtype", "export.input_tensors[].shape", "export.input_tensors[].value_range",
    "export.output_tensors", "export.output_tensors[].name", "export.dynamic_axes",
    "optim", "quant", "quant.mode", "quant.weight_type", "quant.activation_type", "quant.calibration_method",
    "quant.samples", "quant.seed", "quant.per_channel", "quant.symmetric", "quant.weight_symmetric", "quant.activation_symmetric",
    "quant.fp16_keep_io_types", "quant.fp16_op_block_list", "quant.op_types_to_quantize", "quant.nodes_to_exclude",
    "compile", "eval", "eval.task", "eval.dataset", "eval.dataset.path", "eval.dataset.split",
    "eval.dataset.samples",
}
OPTIM_PASSES = {"gelu_fusion", "layer_norm_fusion", "matmul_add_fusion"}  # mapped onto passes (not kept)

# Tiny configs of the model_types the builder serves (sizes small; positions enough for the longest sequence
# the type's recipes ask for, plus roberta's padding offset, as the real checkpoints have).
ENC = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4, vocab_size=96)
AUDIO = dict(ENC, conv_dim=(16, 16, 16), conv_kernel=(10, 3, 3), conv_stride=(5, 2, 2), num_conv_pos_embeddings=16,
             num_conv_pos_embedding_groups=4, classifier_proj_size=16)


def tiny_config(model_type, seq, img=224, img_h=None):
    import transformers as T
    vis = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4, image_size=img,
               patch_size=16 if img % 16 == 0 else 14)
    served = {
        "vit": lambda: T.ViTConfig(**vis),
        "dinov2": lambda: T.Dinov2Config(**{k: v for k, v in vis.items() if k != "intermediate_size"}, mlp_ratio=2),
        # the reference's CLIP recipes name a tower; the checkpoint is the whole CLIP (model_type clip)
        "clip_vision_model": lambda: T.CLIPConfig(text_config=dict(**ENC, max_position_embeddings=77),
                                                  vision_config=vis, projection_dim=16),
        "clip_text_model": lambda: T.CLIPConfig(text_config=dict(**ENC, max_position_embeddings=seq),
                                                vision_config=vis, projection_dim=16),
        "resnet": lambda: T.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=3),
        "bert": lambda: T.BertConfig(**ENC, max_position_embeddings=seq),
        "electra": lambda: T.ElectraConfig(**ENC, embedding_size=16, max_position_embeddings=seq),
        "roberta": lambda: T.RobertaConfig(**ENC, max_position_embeddings=seq + 2, type_vocab_size=1),
        "xlm-roberta": lambda: T.XLMRobertaConfig(**ENC, max_position_embeddings=seq + 2, type_vocab_size=1),
        "mpnet": lambda: T.MPNetConfig(**ENC, max_position_embeddings=seq + 2),
        "deberta-v2": lambda: T.DebertaV2Config(**ENC, max_position_embeddings=seq, relative_attention=True,
                                                pos_att_type=["p2c", "c2p"], share_att_key=True, position_buckets=256,
                                                norm_rel_ebd="layer_norm", position_biased_input=False),
        "modernbert": lambda: T.ModernBertConfig(**ENC, max_position_embeddings=seq, pad_token_id=0, bos_token_id=1,
                                                 eos_token_id=2, cls_token_id=1, sep_token_id=2),
        "distilbert": lambda: T.DistilBertConfig(dim=32, hidden_dim=64, n_layers=1, n_heads=4, vocab_size=96,
                                                 max_position_embeddings=seq),
        # an encoder-decoder sequence classifier (bart-large-mnli): 3 labels, BART's special ids (eos 2)
        "bart": lambda: T.BartConfig(vocab_size=96, d_model=32, encoder_layers=1, decoder_layers=1,
                                     encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=16,
                                     decoder_ffn_dim=16, max_position_embeddings=seq, num_labels=3),
        "wav2vec2": lambda: T.Wav2Vec2Config(**AUDIO),
        "hubert": lambda: T.HubertConfig(**AUDIO),
        # the transformer in backbone_config, its last layer's features; the recipes' image is 256x192
        "vitpose": lambda: T.VitPoseConfig(backbone_config=T.VitPoseBackboneConfig(
            **{k: v for k, v in vis.items() if k not in ("intermediate_size", "image_size")},
            image_size=[img_h or img, img], mlp_ratio=2, out_indices=[1]), num_labels=17),
    }
    if model_type in served:
        return served[model_type]().to_dict()
    try:  # the others are refused by name before the checkpoint is read; a real config of the type all the same
        return T.AutoConfig.for_model(model_type).to_dict()
    except ValueError:  # a type transformers does not know (the reference's own: unlimited-ocr, ...)
        return {"model_type": model_type}


def part_config(doc):
    """An encoder-decoder of the sizes a part recipe fixes (decoder heads, head size, layers, cache slots, the
    encoder's width and length; everything else tiny): the reference's parts take their shapes from the checkpoint."""
    import transformers as T
    e = {t["name"]: t["shape"] for t in doc["export"]["input_tensors"]}
    mt = doc["loader"]["model_type"]
    if "decoder_input_ids" in e:
        _, heads, slots, hd = e["past_0_key"]
        layers = sum(n.startswith("past_") for n in e) // 2
        width, seq = e["encoder_hidden_states"][2], e["encoder_hidden_states"][1]
    else:  # an encoder part: the decoder does not matter
        heads, slots, hd, layers, width, seq = 4, 8, 8, 1, 32, e.get("input_ids", [1, 8])[1]
    if mt == "marian":
        return T.MarianConfig(vocab_size=96, d_model=heads * hd, encoder_layers=1, decoder_layers=layers,
                              encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=16,
                              decoder_ffn_dim=16, max_position_embeddings=max(slots, seq), pad_token_id=95,
                              decoder_start_token_id=95).to_dict()
    img = image_size(doc) or 384
    enc = T.ViTConfig(image_size=img, patch_size=16, hidden_size=width, num_hidden_layers=1, num_attention_heads=4,
                      intermediate_size=16)
    dec = T.TrOCRConfig(vocab_size=96, d_model=heads * hd, decoder_layers=layers, decoder_attention_heads=heads,
                        decoder_ffn_dim=16, max_position_embeddings=slots)
    return T.VisionEncoderDecoderConfig.from_encoder_decoder_configs(enc, dec).to_dict()


PART_TYPES = {"marian", "vision-encoder-decoder"}  # built from part recipes, a config of the recipe's sizes each


def load(path):
    with open(path) as f:
        return json.load(f)


def graph_key(doc):
    """What decides the built graph (and the build's outcome)."""
    e, q = doc["export"], doc.get("quant") or {}
    return json.dumps([doc["loader"].get("model_type"), doc["loader"]["task"], doc["loader"].get("model_class"),
                       doc["loader"].get("trust_remote_code", False), q.get("mode"), q.get("activation_type"), e.get("opset_version"), e["input_tensors"],
                       e.get("output_tensors"), doc.get("optim")], sort_keys=True)


@pytest.fixture(scope="module")
def files():
    fs = recipe_files(REF)
    assert len(fs) == WANT["parsed"], f"{REF}: {len(fs)} recipe files"
    return fs


@pytest.fixture(scope="module")
def checks(files, winml):
    """`winml config -c FILE -f json` of every file."""
    out = {}
    for f in files:
        r = subprocess.run([winml, "config", "-c", f, "-f", "json"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"{f}: exit {r.returncode}: {r.stderr}"
        assert r.stderr == "", r.stderr
        out[f] = json.loads(r.stdout)
    return out


def test_every_reference_recipe_parses_and_every_field_is_used_or_kept(files, checks):
    for f in files:
        doc, rep = load(f), checks[f]
        assert rep["valid"] is True and rep["task"] == doc["loader"]["task"], rep
        kept = {k["field"] for k in rep["reference_fields_kept"]}
        assert all(k["why"] for k in rep["reference_fields_kept"]), rep
        for path, _ in field_paths(doc):
            top = re.sub(r"^(eval\.dataset\.(columns_mapping|label_mapping)|export\.compatibility)\..*", r"\1", path)
            if top in USED or top.startswith("optim.") and top[6:] in OPTIM_PASSES:
                assert top not in kept, (f, top)
            elif top != path:
                continue  # a member of a kept object: the object is listed
            else:
                assert path in kept, f"{f}: field '{path}' neither used nor listed as kept ({sorted(kept)})"
        # served tasks: the reference names that map onto one of ours
        served = {"sentence-similarity": "feature-extraction", "zero-shot-classification": "text-classification"}
        if doc["loader"]["task"] in served:
            assert rep["served_task"] == served[doc["loader"]["task"]], rep
    U.note(f"reference recipes: {len(files)} of {len(files)} parse and validate (winml config -c)")


@pytest.fixture(scope="module")
def tiny_dirs(request, files):
    d = U.scratch(request, "tiny_types")
    out, seq, sizes, heights = {}, collections.defaultdict(lambda: 512), collections.defaultdict(set), {}
    for f in files:
        doc = load(f)
        mt = doc["loader"].get("model_type")
        for t in doc["export"]["input_tensors"]:
            if t["name"] == "input_ids" and isinstance(t["shape"][-1], int):
                seq[mt] = max(seq[mt], t["shape"][-1])
        sizes[mt].add(image_size(doc))
        heights[mt, image_size(doc)] = image_height(doc)
    for mt in sorted(sizes):
        for img in sorted(sizes[mt], key=str):  # one config per image size the type's recipes ask for
            p = d / f"{mt}_{img}"
            p.mkdir()
            with open(p / "config.json", "w") as fh:
                json.dump(tiny_config(mt, seq[mt], img or 224, heights.get((mt, img))), fh)
            out[mt, img] = str(p)
    for f in files:  # the part recipes' own sizes
        doc = load(f)
        if doc["loader"].get("model_type") in PART_TYPES:
            cfg = part_config(doc)
            key = json.dumps(cfg, sort_keys=True)
            if key not in out:
                p = d / f"part_{len(out)}"
                p.mkdir()
                with open(p / "config.json", "w") as fh:
                    json.dump(cfg, fh)
                out[key] = str(p)
            out[f] = out[key]
    return out


def image_size(doc):
    """The recipe's static image size (pixel_values' last dim), None for text recipes."""
    for t in doc["export"]["input_tensors"]:
        if t["name"] == "pixel_values" and isinstance(t["shape"][-1], int):
            return t["shape"][-1]
    return None


def image_height(doc):
    """The recipe's static image height (pixel_values' dim 2), None when there is none."""
    for t in doc["export"]["input_tensors"]:
        if t["name"] == "pixel_values" and len(t["shape"]) == 4 and isinstance(t["shape"][2], int):
            return t["shape"][2]
    return None


def check_io(model_path, doc):
    m = onnx.load(model_path, load_external_data=False)
    dt = {"int32": onnx.TensorProto.INT32, "int64": onnx.TensorProto.INT64, "float32": onnx.TensorProto.FLOAT}
    got = {i.name: i.type.tensor_type for i in m.graph.input}
    for t in doc["export"]["input_tensors"]:
        assert t["name"] in got, (t["name"], list(got))
        tt = got[t["name"]]
        assert tt.elem_type == dt[t["dtype"]], t
        assert [d.dim_value if d.HasField("dim_value") else d.dim_param for d in tt.shape.dim] == t["shape"], t
    assert len(got) == len(doc["export"]["input_tensors"]), list(got)
    want_out = [o["name"] for o in doc["export"]["output_tensors"]]
    assert sorted(o.name for o in m.graph.output) == sorted(want_out)


def test_reference_recipes_build_or_are_refused_by_name(files, checks, tiny_dirs, winml, request):
    work = U.scratch(request, "ref_builds")
    outcome, by_key, n_builds = {}, {}, 0
    for i, f in enumerate(files):
        doc = load(f)
        key = graph_key(doc)
        if key in by_key:  # the same graph as a file already built: the same outcome
            outcome[f] = by_key[key]
            continue
        mt, task = doc["loader"].get("model_type"), doc["loader"]["task"]
        out = work / f"b{i}"
        ck = tiny_dirs[f] if f in tiny_dirs else tiny_dirs[mt, image_size(doc)]
        r = subprocess.run([winml, "build", "-c", f, "-m", ck, "--random-weights", "-o", str(out)],
                           capture_output=True, text=True, timeout=300)
        n_builds += 1
        rep = checks[f]
        if r.returncode == 0:
            assert rep["buildable"] is True, (f, rep)
            check_io(str(out / "model.onnx"), doc)
            man = load(out / "build_manifest.json")
            assert {k["field"] for k in man["reference_fields_kept"]} == \
                {k["field"] for k in rep["reference_fields_kept"]}
            if man["task"] != task:
                assert man["recipe_task"] == task, man
            # the reference's fp16 recipes mostly hold no quant section: built as written, and said so
            named = re.search(r"_(fp16|fp32|w8a8|w8a16)_(?:(?:en|de)coder_)?config", os.path.basename(f)).group(1)
            q = doc.get("quant") or {}
            static = q.get("mode") in ("static", "qdq")
            want = "fp16" if q.get("mode") == "fp16" else \
                ("w8a16" if "16" in q.get("activation_type", "") else "int8") if static else "fp32"
            assert man["precision"] == want, (f, man["precision"], want)
            if static:  # QDQ, calibrated by our engine on seeded samples (no dataset here), said in the manifest
                cal = next(s for s in man["stages"] if s["name"] == "quant")["calibration"]
                assert cal["data"] == "seeded" and cal["method"] == q.get("calibration_method", "minmax"), cal
                assert cal["samples"] == q.get("samples", 10), cal
                ops = {n.op_type for n in onnx.load(str(out / "model.onnx"), load_external_data=False).graph.node}
                assert cal["values"] == 0 or "QuantizeLinear" in ops, (f, cal)
            assert (f"the file name says {named}, but its quant section is null" in r.stderr) == \
                (named != "fp32" and not doc.get("quant")), r.stderr
            res = "built"
            if mt in PART_TYPES:  # the parts' real sizes (TrOCR's decoder: 90M random parameters): not kept
                shutil.rmtree(out)
        else:
            lines = r.stderr.strip().splitlines()
            assert r.returncode == 2 and len(lines) == 1, (f, r.returncode, r.stderr)
            msg = lines[0]
            assert msg.startswith(f"winml build: error: {f}: field '"), msg
            if f"field 'loader.model_type': model_type '{mt}' is not supported" in msg:
                res = "model_type"
            elif f"field 'loader.task': task '{task}' is not served" in msg:
                res = "task"
            else:
                pytest.fail(f"{f}: refused for another reason: {msg}")
            assert not out.exists(), f"{f}: refused build left {out}"
            assert rep["buildable"] is False and rep["not_buildable_reason"] in msg, (rep, msg)
        by_key[key] = outcome[f] = res
    counts = collections.Counter(outcome.values())
    reasons = collections.Counter()
    for f, res in outcome.items():
        if res != "built":
            d = load(f)["loader"]
            reasons[(res, d.get("model_type") if res == "model_type" else
                     d["task"] if res == "task" else "static")] += 1
    U.note(f"reference recipes: {len(files)} parsed; built {counts['built']}, refused: model_type {counts['model_type']}, "
           f"task {counts['task']}, static quant.mode {counts['quant.mode']} "
           f"({n_builds} distinct builds run)")
    U.note("refused by: " + ", ".join(f"{r[0]} {r[1]} x{n}" for r, n in reasons.most_common()))
    assert len(outcome) == WANT["parsed"]
    assert dict(counts) == {k: v for k, v in WANT.items() if k != "parsed" and v}, dict(counts)


# The masked-LM head against transformers: each family's ForMaskedLM with tiny random weights (real tensors, not
# --random-weights), built from a fill-mask recipe of the reference (its inputs, logits over the vocabulary per
# token).
MLM = {
    "bert": ("BertConfig", "BertForMaskedLM", dict(ENC, num_hidden_layers=2, max_position_embeddings=512,
                                                   hidden_act="gelu_new")),
    "roberta": ("RobertaConfig", "RobertaForMaskedLM", dict(ENC, num_hidden_layers=2, max_position_embeddings=514,
                                                            type_vocab_size=1)),
    "distilbert": ("DistilBertConfig", "DistilBertForMaskedLM", dict(dim=32, hidden_dim=64, n_layers=2, n_heads=4,
                                                                     vocab_size=96, max_position_embeddings=512)),
}


@pytest.mark.parametrize("model_type", sorted(MLM))
def test_fill_mask_recipe_matches_transformers(model_type, files, winml, tmp_path):
    import torch
    import transformers as T
    import builder_util as BU
    # the fp32 recipe where the reference has one, else its fp16 one built with -p fp32 (exact comparison)
    recipe = sorted((f for f in files if re.search(r"fill-mask_fp(32|16)_", f)
                     and load(f)["loader"]["model_type"] == model_type), key=lambda f: "fp32" not in f)[0]
    cfg_name, cls_name, kw = MLM[model_type]
    torch.manual_seed(0)
    m = getattr(T, cls_name)(getattr(T, cfg_name)(**kw)).eval()
    with torch.no_grad():
        for n, p in m.named_parameters():
            p.copy_(0.25 * torch.randn(p.shape) + (1.0 if "norm" in n.lower() and n.endswith("weight") else 0.0))
    m.save_pretrained(tmp_path / "ck")
    r = subprocess.run([winml, "build", "-c", recipe, "-m", str(tmp_path / "ck"), "-o", str(tmp_path / "out"), "-q",
                        "-p", "fp32"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = load(recipe)
    shape = doc["export"]["input_tensors"][0]["shape"]
    rng = np.random.RandomState(1)
    ids = rng.randint(3, 96, shape).astype(np.int32)
    mask = np.ones_like(ids)
    mask[:, shape[1] * 3 // 4:] = 0  # right padding: the padded positions' logits are compared too
    feeds = {t["name"]: {"input_ids": ids, "attention_mask": mask}.get(t["name"], np.zeros_like(ids))
             for t in doc["export"]["input_tensors"]}
    got = BU.run_ort(str(tmp_path / "out" / "model.onnx"), feeds)["logits"]
    with torch.no_grad():
        want = m(input_ids=torch.tensor(ids, dtype=torch.long), attention_mask=torch.tensor(mask)).logits.numpy()
    assert got.shape == want.shape == (shape[0], shape[1], 96)
    err = float(np.abs(got - want).max())
    U.note(f"fill-mask {model_type} ({os.path.relpath(recipe, REF)}): max |ORT - transformers| = {err:.2e}")
    assert err < 1e-4, err


def test_quantless_fp16_recipe_builds_fp16_with_p(files, tiny_dirs, winml, tmp_path):
    """-p fp16 on a recipe whose quant section is null adds our fp16 section (said on stderr, written to the
    resolved recipe, which validates again); a static (qdq) recipe is refused with -p fp16 (it disagrees with the
    quant section), and builds float32 with -p fp32 (the quant section dropped)."""
    f = next(f for f in files if f.endswith("sentence-similarity_fp16_config.json") and not load(f).get("quant")
             and load(f)["loader"]["model_type"] == "bert")
    out = tmp_path / "o"
    r = subprocess.run([winml, "build", "-c", f, "-m", tiny_dirs["bert", None], "--random-weights", "-o", str(out), "-p",
                        "fp16", "-f", "json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "the recipe's quant section is null: -p fp16 adds the default fp16 quant section" in r.stderr
    man = json.loads(r.stdout)
    assert man["precision"] == "fp16" and man["recipe_task"] == "sentence-similarity", man
    resolved = load(out / "winml_build_config.json")
    assert resolved["quant"]["mode"] == "fp16" and resolved["loader"]["task"] == "sentence-similarity"
    c = subprocess.run([winml, "config", "-c", str(out / "winml_build_config.json"), "--check"], capture_output=True,
                       text=True, timeout=60)
    assert c.returncode == 0 and c.stdout == "" and c.stderr == "", c
    m = onnx.load(str(out / "model.onnx"), load_external_data=False)
    assert all(o.type.tensor_type.elem_type == onnx.TensorProto.FLOAT for o in m.graph.output)  # fp16_keep_io_types
    w16 = next(f for f in files if "w8a16" in f and load(f)["loader"]["model_type"] == "bert")
    r = subprocess.run([winml, "build", "-c", w16, "-m", tiny_dirs["bert", None], "--random-weights", "-o", str(tmp_path / "x"),
                        "-p", "fp16"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "-p fp16 disagrees with the recipe's quant section (qdq)" in r.stderr, r.stderr
    assert not (tmp_path / "x").exists()
    r = subprocess.run([winml, "build", "-c", w16, "-m", tiny_dirs["bert", None], "--random-weights", "-o", str(tmp_path / "x"),
                        "-p", "fp32", "-f", "json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and json.loads(r.stdout)["precision"] == "fp32", r.stderr
    assert "-p fp32 overrides the recipe's quant section (qdq)" in r.stderr
    assert load(tmp_path / "x" / "winml_build_config.json")["quant"] is None


def test_sentence_similarity_build_evaluates_as_embeddings(files, winml, tmp_path):
    """A reference sentence-similarity recipe without an output list pools (mean) into sentence_embedding; the
    build folder's task stays 'sentence-similarity', and `winml run` and `winml eval --mode task` read it as
    feature-extraction: the normalized embedding as sentence-transformers computes it, and the STS evaluation
    (before, eval refused: "task 'sentence-similarity' has no task evaluation")."""
    import csv
    import torch
    import transformers as T
    import tok_oracle
    from scipy.stats import spearmanr
    vocab = os.path.join(tok_oracle.build_fixtures(["bert"])["bert"][0], "vocab.txt")
    doc = load(next(f for f in files if f.endswith("sentence-similarity_fp16_config.json")
                    and load(f)["loader"]["model_type"] == "bert" and not load(f).get("quant")))
    del doc["export"]["output_tensors"]
    for t in doc["export"]["input_tensors"]:
        t["shape"] = [1, 128]
    with open(tmp_path / "r.json", "w") as fh:
        json.dump(doc, fh)
    torch.manual_seed(3)
    m = T.BertModel(T.BertConfig(vocab_size=30522, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                 num_attention_heads=4, max_position_embeddings=128)).eval()
    m.save_pretrained(tmp_path / "hf")
    tok = T.BertTokenizerFast(vocab_file=vocab, do_lower_case=True)
    tok.save_pretrained(tmp_path / "hf")
    r = subprocess.run([winml, "build", "-c", tmp_path / "r.json", "-m", tmp_path / "hf", "-o", tmp_path / "b", "-q"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    resolved = load(tmp_path / "b" / "winml_build_config.json")
    assert resolved["loader"]["task"] == "sentence-similarity" and resolved["export"]["pooling"] == "mean"

    def emb(t):
        enc = tok(t, return_tensors="pt")
        with torch.no_grad():
            h = m(**enc).last_hidden_state[0]
        e = h.mean(0).numpy()
        return e / np.linalg.norm(e)
    sents = ["Whales breathe air.", "The market fell today.", "Dolphins are mammals.", "A cat sat on the mat.",
             "It rained all day.", "Stocks rose sharply."]
    text = sents[0]
    r = subprocess.run([winml, "run", "-m", tmp_path / "b", "--text", text, "-f", "json"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["results"][0]
    assert got["dims"] == 64 and np.allclose(got["embedding"], emb(text), atol=1e-5), got
    pairs = [(sents[i], sents[(i + 1) % len(sents)], float(i)) for i in range(len(sents))]
    with open(tmp_path / "sts.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["sentence1", "sentence2", "score"])
        w.writerows(pairs)
    r = subprocess.run([winml, "eval", "--mode", "task", "-m", tmp_path / "b", "--dataset", tmp_path / "sts.csv", "-f",
                        "json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    cos = [float(emb(a) @ emb(c)) for a, c, _ in pairs]
    assert res["metrics"]["spearman_cosine"] == pytest.approx(spearmanr(cos, [p[2] for p in pairs]).statistic, abs=1e-9)


def test_zero_shot_recipe_finds_the_entailment_label(files, winml, tmp_path):
    """zero-shot-classification is sequence classification of (premise, hypothesis) by an NLI head: the build
    records which id2label entry is entailment (as the reference's pipeline looks it up), or says there is none."""
    import transformers as T
    f = next(f for f in files if "zero-shot-classification" in os.path.basename(f) and load(f).get("quant") is None)
    seq = load(f)["export"]["input_tensors"][0]["shape"][1]
    for labels, want in (({0: "contradiction", 1: "neutral", 2: "ENTAILMENT"}, 2), ({0: "LABEL_0", 1: "LABEL_1"}, None)):
        ck = tmp_path / f"ck{want}"
        T.XLMRobertaConfig(**ENC, max_position_embeddings=seq + 2, type_vocab_size=1, id2label=labels,
                           label2id={v: k for k, v in labels.items()}).save_pretrained(ck)
        r = subprocess.run([winml, "build", "-c", f, "-m", str(ck), "--random-weights", "-o", str(tmp_path / f"b{want}"),
                            "-f", "json"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        man = json.loads(r.stdout)
        assert man["recipe_task"] == "zero-shot-classification" and man["task"] == "text-classification"
        assert man["entailment_label"] == want, man
        assert ("has no label starting with 'entail'" in r.stderr) == (want is None), r.stderr
        m = onnx.load(str(tmp_path / f"b{want}" / "model.onnx"), load_external_data=False)
        assert [d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim][-1] == len(labels)


@pytest.mark.parametrize("text,needles", [
    ("{", ["r.json"]),
    ('{"loader": {"task": "fill-mask"}, "export": {"input_tensors": [{"name": "a", "dtype": "int32", "shape": [1]}],'
     ' "dynamo": 1}}', ["export.dynamo", "true or false"]),
    ('{"loader": {"task": "fill-mask"}, "eval": {"dataset": {"columns_mapping": {"a": [1]}}}}',
     ["eval.dataset.columns_mapping", "an object of strings"]),
    ('{"loader": {"task": "fill-mask"}, "quant": {"mode": "qdq", "calibration_save_path": 3}}',
     ["quant.calibration_save_path", "a string"]),
    ('{"loader": {"task": "fill-mask"}, "optim": {"gelu_fusion": true, "gelu_fusion": false}}',
     ["optim.gelu_fusion", "listed twice"]),
    ('{"loader": {"task": "image-to-vibes"}}', ["loader.task", "image-to-vibes", "fill-mask"]),
    ('{"loader": {"task": "fill-mask"}, "export": {"input_tensors": [{"name": "a", "dtype": "int32", "shape": [1],'
     ' "value_range": [0, 0]}]}}', ["value_range", "high excluded"]),
    ("[" * 100000 + "]" * 100000, ["r.json"]),
], ids=["truncated", "kept-kind", "kept-object", "kept-null-or-string", "optim-twice", "unknown-task", "empty-range",
        "deep-nesting"])
def test_config_check_refuses_bad_recipes_cleanly(text, needles, winml_asan, tmp_path):
    """winml config -c under ASan+UBSan: one line naming the file, the field and the reason, exit 2."""
    p = tmp_path / "r.json"
    p.write_text(text)
    r = subprocess.run([winml_asan, "config", "-c", str(p), "--check"], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, **U.SAN_ENV))
    U.assert_clean_error(r, "winml config", *needles)


def test_vitpose_recipes_pass_the_random_weights_sweep(files, winml, tmp_path):
    """`winml sweep --random-weights` of vitpose recipes (fp32, fp16, static w8a8; ViTPose and ViTPose++ names):
    the tiny config nests its sizes in backbone_config at the recipes' 256x192 image, and every stage passes
    (build, analyze, perf, compare against the float32 export)."""
    want = ["nielsr_vitpose-base-simple/cpu/cpu/keypoint-detection_fp32_config.json",
            "usyd-community_vitpose-plus-small/keypoint-detection_fp16_config.json",
            "usyd-community_vitpose-plus-small/keypoint-detection_w8a8_config.json"]
    picked = [f for f in files if any(f.endswith(w) for w in want)]
    assert len(picked) == 3 and sum(load(f)["loader"]["model_type"] == "vitpose" for f in files) == 15
    lst = tmp_path / "list.txt"
    lst.write_text("\n".join(picked) + "\n")
    r = subprocess.run([winml, "sweep", "-c", str(lst), "-o", str(tmp_path / "o"), "--random-weights", "-q", "-f",
                        "json", "--iterations", "2", "--samples", "2"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    bad = [(x["key"], x["failure_classification"], x["error"]) for x in j["results"] if x["status"] != "passed"]
    assert j["passed"] == 3 and not bad, bad
    assert all(x["cosine_similarity_min"] >= 0.99 for x in j["results"]), j["results"]
