"""VitPose (keypoint-detection) from the builder: tiny random VitPoseForPoseEstimation checkpoints saved by
transformers, one per head the reference's recipes need (the simple decoder: ReLU + bilinear upsampling + Conv 3x3;
the classic one: two ConvTranspose + BatchNorm + ReLU, Conv 1x1) and ViTPose++'s per-dataset experts (num_experts 3,
part_features; expert 0, dataset_index 0, is built), on a non-square 64x48 image with the patch Conv's padding 2 and
no CLS token. Our ONNX in onnxruntime and in our engine must match transformers' heatmaps within 1e-4 at batch 1
and 3; `winml inspect` shows the task, heatmaps and features; `winml run --image` gives each keypoint's heatmap
maximum (checked against transformers on the same pixels); broken configs and checkpoints are refused by name."""
import json
import os

import numpy as np
import pytest
import torch
import transformers

import oracle_util as U
from engine_util import engine_run, max_abs_diff, ort_run

TOL = 1e-4
CASES = ("simple", "classic", "moe")


def make(name, out):
    """A tiny VitPoseForPoseEstimation of head `name` with non-trivial weights and BatchNorm statistics, saved."""
    torch.manual_seed(0)
    bb = transformers.VitPoseBackboneConfig(image_size=[64, 48], patch_size=[16, 16], hidden_size=32,
                                            num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2,
                                            num_experts=3 if name == "moe" else 1, part_features=8, out_indices=[2])
    cfg = transformers.VitPoseConfig(backbone_config=bb, use_simple_decoder=name == "simple", num_labels=5)
    m = transformers.VitPoseForPoseEstimation(cfg).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        for n, b in m.named_buffers():
            if n.endswith("running_var"):
                b.copy_(torch.rand_like(b) + 0.5)
            elif n.endswith("running_mean"):
                b.copy_(torch.randn_like(b) * 0.1)
    m.save_pretrained(out)
    transformers.VitPoseImageProcessor(size={"height": 64, "width": 48}).save_pretrained(out)
    return m


def reference(model, name, x):
    kw = {"dataset_index": torch.zeros(x.shape[0], dtype=torch.long)} if name == "moe" else {}
    with torch.no_grad():
        return model(torch.from_numpy(x), **kw).heatmaps.numpy()


@pytest.fixture(scope="module")
def workdir(request):
    return U.scratch(request, "builder_vitpose")


@pytest.fixture(scope="module")
def built(workdir, winml):
    cache = {}

    def get(name):
        if name not in cache:
            ck, out = str(workdir / f"ckpt_{name}"), str(workdir / f"build_{name}")
            model = make(name, ck)
            r = U.run([winml, "build", "-m", ck, "-o", out, "-p", "fp32", "-q", "-f", "json"], timeout=300)
            assert r.returncode == 0, U.describe(r)
            cache[name] = (ck, model, out)
        return cache[name]
    return get


@pytest.mark.parametrize("name", CASES)
def test_fp32_build_matches_transformers(name, built, workdir, build_dir):
    ck, model, out = built(name)
    rng = np.random.default_rng(0)
    path = os.path.join(out, "model.onnx")
    for batch in (1, 3):
        x = rng.standard_normal((batch, 3, 64, 48)).astype(np.float32)
        ref = reference(model, name, x)
        assert ref.shape == (batch, 5, 16, 12)
        d_ort = max_abs_diff(ort_run(path, {"pixel_values": x})["heatmaps"], ref)
        ours, _ = engine_run(build_dir, path, {"pixel_values": x}, workdir)
        d_eng = max_abs_diff(ours["heatmaps"], ref)
        print(f"{name} batch {batch}: onnxruntime {d_ort} engine {d_eng}")
        assert d_ort <= TOL and d_eng <= TOL, (name, batch, d_ort, d_eng)


@pytest.mark.parametrize("name,feature", [
    ("simple", "bilinear upsampling x4"), ("classic", "ConvTranspose 4x4 stride 2"), ("moe", "expert 0 of 3")])
def test_inspect_shows_task_heatmaps_and_features(name, feature, built, winml):
    ck, model, _ = built(name)
    r = U.run([winml, "inspect", "-m", ck, "-f", "json"], timeout=60)
    assert r.returncode == 0, U.describe(r)
    j = json.loads(r.stdout)
    assert j["task"] == "keypoint-detection" and j["tasks"] == ["keypoint-detection"], j
    assert j["inference_class"] == "VitPoseForPoseEstimation"
    assert [(o["name"], o["shape"][1:]) for o in j["outputs"]] == [("heatmaps", [5, 16, 12])], j["outputs"]
    px = [i for i in j["inputs"] if i["name"] == "pixel_values"][0]
    assert px["shape"][1:] == [3, 64, 48], px
    assert any(feature in f for f in j["features"]), j["features"]
    assert any("pad 2" in f for f in j["features"]) and any("no CLS" in f for f in j["features"]), j["features"]
    if name == "simple":  # every parameter is used: the count is torch's
        assert j["parameters"] == sum(p.numel() for p in model.parameters()), j["parameters"]


def test_run_image_gives_each_keypoints_maximum(built, workdir, winml):
    from PIL import Image
    ck, model, out = built("simple")
    img = (np.random.default_rng(3).random((100, 80, 3)) * 255).astype(np.uint8)
    path = str(workdir / "person.png")
    Image.fromarray(img).save(path)
    r = U.run([winml, "run", "-m", out, "--image", path, "-f", "json"], timeout=60)
    assert r.returncode == 0, U.describe(r)
    kps = json.loads(r.stdout)["results"][0]["keypoints"]
    # the documented preprocessing without boxes: the whole image resized (PIL bilinear) to 64x48, rescaled and
    # normalized with ImageNet's mean / std, then transformers' heatmaps on those pixels
    x = np.asarray(Image.fromarray(img).resize((48, 64), Image.BILINEAR), dtype=np.float32) / 255.0
    x = ((x - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]).astype(np.float32).transpose(2, 0, 1)[None]
    ref = reference(model, "simple", x)[0]
    assert len(kps) == 5
    for k, kp in enumerate(kps):
        flat = ref[k].reshape(-1)
        assert kp["label"] == f"LABEL_{k}"
        assert abs(kp["score"] - flat.max()) <= 1e-3, (k, kp, flat.max())
        i = int(np.argmax(flat))  # ties within the tolerance aside, the same position
        if np.sort(flat)[-2] < flat.max() - 1e-3:
            assert (kp["x"], kp["y"]) == (i % 12 / 12, i // 12 / 16), (k, kp, i)


def _write(d, cfg):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)


def test_refusals_name_the_field_or_tensor(built, workdir, winml_asan):
    """Inconsistent configs and checkpoints (the ASan + UBSan binary): exit 2, the field or tensor named, no output."""
    ck, _, _ = built("classic")
    base = json.load(open(os.path.join(ck, "config.json")))
    bb = base["backbone_config"]
    cases = [
        (dict(base, backbone_config=dict(bb, out_indices=[1], out_features=["stage1"])), "out_indices"),
        (dict(base, backbone_config=dict(bb, num_experts=2, part_features=32)), "part_features"),
        (dict(base, backbone_config=dict(bb, patch_size=[16, 8])), "patch_size"),
        (dict(base, backbone_config=dict(bb, image_size=[64, 40])), "patch_size"),
        (dict(base, backbone_config=dict(bb, model_type="vit")), "model_type"),
        (dict(base, backbone_config=None), "backbone_config"),
        (dict(base, use_simple_decoder="yes"), "use_simple_decoder"),
        (dict(base, scale_factor=0), "scale_factor"),
    ]
    for i, (cfg, field) in enumerate(cases):
        d, out = str(workdir / f"bad_{i}"), str(workdir / f"bad_out_{i}")
        _write(d, cfg)
        r = U.run([winml_asan, "build", "-m", d, "-o", out, "--random-weights", "-q"], timeout=120)
        assert r.returncode == 2 and field in r.stderr, (cfg, U.describe(r))
        assert not os.path.exists(out)
    # the checkpoint with a head tensor missing, or an expert of another shape: the tensor is named
    from safetensors.numpy import load_file, save_file
    for i, (src, drop, reshape) in enumerate([("classic", "head.batchnorm2.running_var", None),
                                              ("moe", None, "backbone.encoder.layer.1.mlp.experts.2.weight")]):
        ck, _, _ = built(src)
        d, out = str(workdir / f"badck_{i}"), str(workdir / f"badck_out_{i}")
        os.makedirs(d, exist_ok=True)
        t = load_file(os.path.join(ck, "model.safetensors"))
        if drop:
            del t[drop]
        else:
            t[reshape] = t[reshape][:, :-1].copy()
        save_file(t, os.path.join(d, "model.safetensors"))
        with open(os.path.join(ck, "config.json")) as f, open(os.path.join(d, "config.json"), "w") as g:
            g.write(f.read())
        r = U.run([winml_asan, "build", "-m", d, "-o", out, "-q"], timeout=120)
        assert r.returncode == 2 and (drop or reshape) in r.stderr, U.describe(r)
        assert not os.path.exists(out)
