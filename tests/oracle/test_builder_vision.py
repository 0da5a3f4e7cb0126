"""Image models from the builder: tiny random checkpoints saved by transformers (vision_util.py) of ViT, DeiT
(plain and with teacher), DINOv2 (plain, SwiGLU, registers), CLIP and SigLIP (both towers, text, vision) and
ResNet (basic, bottleneck) are built with `winml build -p fp32`; the ONNX in onnxruntime and in our engine must match
transformers' PyTorch outputs (logits, embeddings, logits_per_image) within 1e-4 at batch 1 and 3. fp16 builds
run and stay close; `winml inspect` shows the tasks and features; a recipe at another image size interpolates
the position embeddings as transformers does; unsupported vision types and broken checkpoints are refused with a
message naming the field or tensor."""
import json
import os

import numpy as np
import pytest
import torch  # noqa: F401  (the oracle venv has it: a missing one fails the run)
import transformers  # noqa: F401
import onnxruntime  # noqa: F401

import oracle_util as U
import vision_util as V
from engine_util import engine_run, max_abs_diff, ort_run

TOL = 1e-4
FP16_REL = 2e-2  # max abs diff / max |reference| for fp16 weights


@pytest.fixture(scope="module")
def workdir(request):
    return U.scratch(request, "builder_vision")


@pytest.fixture(scope="module")
def built(workdir, winml):
    """name -> (checkpoint folder, torch model, fp32 build folder), made once per module."""
    cache = {}

    def get(name):
        if name not in cache:
            ck, out = str(workdir / f"ckpt_{name}"), str(workdir / f"build_{name}")
            model = V.make(name, ck)
            if V.kind(name) != "text":  # the image processor's settings travel with the build (winml run --image)
                transformers.ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(ck)
            r = U.run([winml, "build", "-m", ck, "-o", out, "-p", "fp32", "-q", "-f", "json"], timeout=300)
            assert r.returncode == 0, U.describe(r)
            cache[name] = (ck, model, out)
        return cache[name]
    return get


def _compare(ours, ref, tol, label):
    diffs = {}
    for k, v in ref.items():
        assert k in ours, f"{label}: output {k} missing (have {sorted(ours)})"
        d = max_abs_diff(ours[k], v)
        diffs[k] = d
        assert d <= tol, f"{label}: {k} differs by {d} (> {tol})"
    return diffs


@pytest.mark.parametrize("name", V.CASES)
def test_fp32_build_matches_transformers(name, built, workdir, build_dir):
    ck, model, out = built(name)
    rng = np.random.default_rng(0)
    for batch in (1, 3):
        feeds, tfeeds = V.feeds(model, name, batch, rng)
        ref = V.reference(model, name, tfeeds)
        assert ref, name
        path = os.path.join(out, "model.onnx")
        d_ort = _compare(ort_run(path, feeds), ref, TOL, f"{name} onnxruntime batch {batch}")
        ours, _ = engine_run(build_dir, path, feeds, workdir)
        d_eng = _compare(ours, ref, TOL, f"{name} engine batch {batch}")
        print(f"{name} batch {batch}: onnxruntime {d_ort} engine {d_eng}")


# SigLIP's attention-pooling head becomes a float16 com.microsoft.MultiHeadAttention (run in float32 inside)
FP16_CASES = [(n, r) for n in ("vit_cls", "dinov2_reg_model", "clip", "siglip", "resnet_basic")
              for r in ("onnxruntime", "engine")]


@pytest.mark.parametrize("name,runner", FP16_CASES)
def test_fp16_build_runs_and_is_close(name, runner, built, workdir, winml, build_dir):
    ck, model, _ = built(name)
    out = str(workdir / f"fp16_{name}")
    if not os.path.exists(out):
        r = U.run([winml, "build", "-m", ck, "-o", out, "-p", "fp16", "-q", "-f", "json"], timeout=300)
        assert r.returncode == 0, U.describe(r)
    feeds, tfeeds = V.feeds(model, name, 3, np.random.default_rng(1))
    ref = V.reference(model, name, tfeeds)
    path = os.path.join(out, "model.onnx")
    ours = ort_run(path, feeds) if runner == "onnxruntime" else engine_run(build_dir, path, feeds, workdir)[0]
    for label in (runner,):
        for k, v in ref.items():
            assert ours[k].dtype == np.float32, f"{name} {label}: {k} is {ours[k].dtype} (fp16 keeps float32 IO)"
            rel = max_abs_diff(ours[k], v) / float(np.abs(v).max())
            assert rel <= FP16_REL, f"{name} fp16 {label}: {k} relative diff {rel}"


def _inspect(winml, path, *extra):
    r = U.run([winml, "inspect", "-m", path, "-f", "json", *extra], timeout=60)
    return r, (json.loads(r.stdout) if r.returncode == 0 else None)


@pytest.mark.parametrize("name,task,tasks,outputs", [
    ("vit_cls", "image-classification", ["image-classification", "image-feature-extraction"], ["logits"]),
    ("vit_model", "image-feature-extraction", ["image-classification", "image-feature-extraction"],
     ["last_hidden_state", "pooler_output"]),
    ("clip", "zero-shot-image-classification", ["zero-shot-image-classification"],
     ["logits_per_image", "logits_per_text", "text_embeds", "image_embeds"]),
    ("clip_text", "feature-extraction", ["feature-extraction"], ["last_hidden_state", "pooler_output", "text_embeds"]),
    ("siglip", "zero-shot-image-classification", ["zero-shot-image-classification"],
     ["logits_per_image", "logits_per_text", "text_embeds", "image_embeds"]),
    ("siglip_vision", "image-feature-extraction", ["image-feature-extraction"], ["last_hidden_state", "pooler_output"]),
    ("resnet_bottleneck", "image-feature-extraction", ["image-classification", "image-feature-extraction"],
     ["last_hidden_state", "pooler_output"]),
])
def test_inspect_shows_task_heads_and_features(name, task, tasks, outputs, built, winml):
    ck, model, _ = built(name)
    r, j = _inspect(winml, ck)
    assert r.returncode == 0, U.describe(r)
    assert j["task"] == task and j["tasks"] == tasks
    assert [o["name"] for o in j["outputs"]] == outputs
    assert j["features"], j
    if name in ("vit_cls", "clip", "siglip"):  # every parameter is used: the count (which decides external data) is torch's
        assert j["parameters"] == sum(p.numel() for p in model.parameters()), j["parameters"]
    if name != "clip_text":
        px = [i for i in j["inputs"] if i["name"] == "pixel_values"][0]
        assert px["dtype"] == "float32" and px["shape"][1:] == [3, 32, 32] and isinstance(px["shape"][0], str)
    if name == "clip":
        assert any("first eos" in f or "highest input id" in f for f in j["features"]), j["features"]
    if name == "resnet_bottleneck":
        assert any("folded" in f for f in j["features"])
    if name == "siglip_vision":
        assert any("MAP head" in f for f in j["features"]) and any("no CLS" in f for f in j["features"])
    # the build's own description: the other task of the family is built from the same checkpoint
    if name == "vit_cls":
        r, j2 = _inspect(winml, ck, "-t", "image-feature-extraction")
        assert r.returncode == 0 and [o["name"] for o in j2["outputs"]] == ["last_hidden_state"], U.describe(r)


def test_build_carries_the_image_processor_config(built):
    for name in ("vit_cls", "clip", "resnet_basic"):
        ck, _, out = built(name)
        src, dst = os.path.join(ck, "preprocessor_config.json"), os.path.join(out, "preprocessor_config.json")
        assert os.path.exists(src)
        assert open(src, "rb").read() == open(dst, "rb").read()
        man = json.load(open(os.path.join(out, "build_manifest.json")))
        assert "preprocessor_config.json" in json.dumps(man)


def test_perf_makes_pixel_values_from_the_spec(built, winml):
    for name in ("vit_cls", "clip"):
        _, _, out = built(name)
        r = U.run([winml, "perf", "-m", out, "--iterations", "3", "--warmup", "1", "-f", "json"], timeout=120)
        assert r.returncode == 0, U.describe(r)
        j = json.loads(r.stdout)
        assert j["latency_ms"]["p50"] > 0


def _write_config(d, cfg):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)


@pytest.mark.parametrize("model_type,why", [
    ("siglip2", "SigLIP 2"), ("convnext", "ConvNeXt"), ("swin", "Swin"),
    ("beit", "BEiT"), ("blip", "BLIP"), ("owlvit", "OWL-ViT"),
])
def test_inspect_refuses_other_vision_types_by_name(model_type, why, workdir, winml_asan):
    d = str(workdir / f"cfg_{model_type}")
    _write_config(d, {"model_type": model_type, "hidden_size": 32})
    r, _ = _inspect(winml_asan, d)
    assert r.returncode == 2, U.describe(r)
    assert f"'{model_type}' is not supported" in r.stderr and why in r.stderr, r.stderr


def test_refusals_name_the_field_or_tensor(built, workdir, winml, winml_asan):
    """Hostile or inconsistent configs and checkpoints (the ASan + UBSan binary): exit 2, the field or tensor
    named, no output folder."""
    base = dict(V.VIT, model_type="vit", architectures=["ViTForImageClassification"])
    cases = [
        (dict(base, patch_size=7), "patch_size"),
        (dict(base, image_size=-1), "image_size"),
        (dict(base, pooler_act="relu", architectures=["ViTModel"]), "pooler_act"),
        (dict(V.RESNET_BASIC, model_type="resnet", depths=[1]), "depths"),
        (dict(V.RESNET_BASIC, model_type="resnet", layer_type="wide"), "layer_type"),
        (dict(V.RESNET_BASIC, model_type="resnet", hidden_act="gelu"), "hidden_act"),
        (dict(V.RESNET_BASIC, model_type="resnet", hidden_sizes=[8, 1e9]), "hidden_sizes"),
        (dict(base, num_register_tokens=2, model_type="dinov2_with_registers", use_swiglu_ffn="yes"), "use_swiglu_ffn"),
        (dict(base, image_size=8192, patch_size=1), "patches"),
        (dict(base, mlp_ratio=64, model_type="dinov2", hidden_size=1 << 16, num_attention_heads=1 << 8), "MLP width"),
        ({"model_type": "clip", "text_config": V.CLIP_T}, "vision_config"),
    ]
    for i, (cfg, field) in enumerate(cases):
        d = str(workdir / f"bad_{i}")
        _write_config(d, cfg)
        r = U.run([winml_asan, "build", "-m", d, "-o", str(workdir / f"bad_out_{i}"), "--random-weights", "-q"],
                  timeout=120)
        assert r.returncode == 2 and field in r.stderr, (cfg, U.describe(r))
        assert not os.path.exists(str(workdir / f"bad_out_{i}"))
    # a checkpoint whose position table does not fit the config: the tensor is named
    ck, _, _ = built("vit_cls")
    d = str(workdir / "bad_shape")
    os.makedirs(d, exist_ok=True)
    cfg = json.load(open(os.path.join(ck, "config.json")))
    cfg["image_size"] = 40
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    os.symlink(os.path.join(ck, "model.safetensors"), os.path.join(d, "model.safetensors"))
    r = U.run([winml_asan, "build", "-m", d, "-o", str(workdir / "bad_shape_out"), "-q"], timeout=120)
    assert r.returncode == 2 and "position_embeddings" in r.stderr, U.describe(r)
    # another image size in a recipe: a patch that does not divide it, or a ResNet (no position table), refused
    for case, size, why in (("vit_cls", 44, "not a multiple of patch_size 8"),
                            ("resnet_basic", 64, "builds at its config's image_size 32 only")):
        ck, _, _ = built(case)
        rec = _resized_recipe(winml, ck, str(workdir / f"recipe_{case}_{size}.json"), size)
        out = str(workdir / f"out_{case}_{size}")
        r = U.run([winml_asan, "build", "-m", ck, "-c", rec, "-o", out, "-q"], timeout=120)
        assert r.returncode == 2 and "pixel_values" in r.stderr and why in r.stderr, U.describe(r)
        assert not os.path.exists(out)


def _resized_recipe(winml, ck, path, size):
    """The checkpoint's default recipe with pixel_values at size x size."""
    r = U.run([winml, "config", "-m", ck], timeout=60)
    assert r.returncode == 0, U.describe(r)
    j = json.loads(r.stdout)
    for t in j["export"]["input_tensors"]:
        if t["name"] == "pixel_values":
            t["shape"] = [1, 3, size, size]
    json.dump(j, open(path, "w"))
    return path


@pytest.mark.parametrize("name", ["vit_model", "deit_cls", "dinov2_reg_model", "clip_vision", "siglip_vision"])
@pytest.mark.parametrize("size", [16, 48])
def test_recipe_at_another_image_size_interpolates_positions(name, size, built, workdir, winml, build_dir):
    """A recipe at another image size than the config's (the reference's DINOv2 recipes ask 224 of checkpoints
    whose config says 518): the position table is resized as transformers' interpolate_pos_encoding does it
    (bicubic, align_corners=False; DINOv2 always, ViT/DeiT/CLIP/SigLIP when asked), down (grid 4 -> 2) and up
    (4 -> 6); onnxruntime and our engine against transformers within 1e-4, CLS / distillation rows untouched."""
    import inspect
    ck, model, _ = built(name)
    rec = _resized_recipe(winml, ck, str(workdir / f"resize_{name}_{size}.json"), size)
    out = str(workdir / f"resize_{name}_{size}")
    r = U.run([winml, "build", "-m", ck, "-c", rec, "-o", out], timeout=300)
    assert r.returncode == 0, U.describe(r)
    assert "position embeddings interpolated" in r.stderr, r.stderr
    px = np.random.default_rng(size).standard_normal((1, 3, size, size)).astype(np.float32)
    kw = {"pixel_values": torch.from_numpy(px)}
    if "interpolate_pos_encoding" in inspect.signature(model.forward).parameters:
        kw["interpolate_pos_encoding"] = True
    with torch.no_grad():
        o = model(**kw)
    ref = {k: getattr(o, k).numpy() for k in ("logits", "last_hidden_state") if getattr(o, k, None) is not None}
    path = os.path.join(out, "model.onnx")
    _compare(ort_run(path, {"pixel_values": px}), ref, TOL, f"{name} {size} onnxruntime")
    ours, _ = engine_run(build_dir, path, {"pixel_values": px}, workdir)
    _compare(ours, ref, TOL, f"{name} {size} engine")


def _recipe(path, model_type, task, inputs, outputs):
    j = {"loader": {"task": task, "model_type": model_type},
         "export": {"opset_version": 17, "batch_size": 1,
                    "input_tensors": [{"name": n, "dtype": d, "shape": s} for n, d, s in inputs],
                    "output_tensors": [{"name": o} for o in outputs]},
         "optim": None, "quant": None, "compile": None}
    with open(path, "w") as f:
        json.dump(j, f)
    return path


@pytest.mark.parametrize("tower", ["clip_text_model", "clip_vision_model"])
def test_recipe_builds_one_tower_of_a_clip_checkpoint(tower, built, workdir, winml):
    """The reference's zero-shot recipes build each tower alone from the CLIP checkpoint (loader.model_type
    clip_text_model / clip_vision_model, outputs text_embeds / image_embeds + last_hidden_state); the other tower's
    tensors are left unused. The embeddings are CLIPModel's get_text_features / get_image_features."""
    ck, model, _ = built("clip")
    text = tower == "clip_text_model"
    ins = ([("input_ids", "int32", [1, 16]), ("attention_mask", "int32", [1, 16])] if text
           else [("pixel_values", "float32", [1, 3, 32, 32])])
    emb = "text_embeds" if text else "image_embeds"
    rec = _recipe(str(workdir / f"{tower}.json"), tower, "feature-extraction" if text else "image-feature-extraction",
                  ins, [emb, "last_hidden_state"])
    out = str(workdir / f"tower_{tower}")
    r = U.run([winml, "build", "-m", ck, "-c", rec, "-o", out, "-q"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    rng = np.random.default_rng(5)
    if text:
        ids = rng.integers(3, 90, size=(1, 16)).astype(np.int32)
        mask = np.ones((1, 16), np.int32)
        mask[0, 12:] = 0
        feeds = {"input_ids": ids, "attention_mask": mask}
        with torch.no_grad():
            ref = model.get_text_features(input_ids=torch.from_numpy(ids).long(),
                                          attention_mask=torch.from_numpy(mask).long())
    else:
        feeds = {"pixel_values": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)}
        with torch.no_grad():
            ref = model.get_image_features(pixel_values=torch.from_numpy(feeds["pixel_values"]))
    ref = getattr(ref, "pooler_output", ref).numpy()
    ours = ort_run(os.path.join(out, "model.onnx"), feeds)
    assert sorted(ours) == sorted([emb, "last_hidden_state"])
    assert max_abs_diff(ours[emb], ref) <= TOL


def test_recipe_lists_a_subset_of_the_outputs(built, workdir, winml, build_dir):
    """The reference's image-feature-extraction recipes list last_hidden_state alone: the graph gives that."""
    ck, model, _ = built("dinov2_model")
    rec = _recipe(str(workdir / "dino_subset.json"), "dinov2", "image-feature-extraction",
                  [("pixel_values", "float32", [1, 3, 32, 32])], ["last_hidden_state"])
    out = str(workdir / "dino_subset")
    r = U.run([winml, "build", "-m", ck, "-c", rec, "-o", out, "-q"], timeout=300)
    assert r.returncode == 0, U.describe(r)
    feeds, tfeeds = V.feeds(model, "dinov2_model", 1, np.random.default_rng(2))
    ref = V.reference(model, "dinov2_model", tfeeds)
    path = os.path.join(out, "model.onnx")
    for ours in (ort_run(path, feeds), engine_run(build_dir, path, feeds, workdir)[0]):
        assert sorted(ours) == ["last_hidden_state"]
        assert max_abs_diff(ours["last_hidden_state"], ref["last_hidden_state"]) <= TOL
    _recipe(rec, "dinov2", "image-feature-extraction", [("pixel_values", "float32", [1, 3, 32, 32])], ["logits"])
    r = U.run([winml, "build", "-m", ck, "-c", rec, "-o", str(workdir / "dino_bad"), "-q"], timeout=60)
    assert r.returncode == 2 and "'logits' is not an output" in r.stderr, U.describe(r)
