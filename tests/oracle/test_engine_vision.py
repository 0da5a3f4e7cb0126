"""Vision models in the engine against onnxruntime.

Tiny random ViTForImageClassification, ResNetForImageClassification (bottleneck with
BatchNorm folded into Conv by the exporter; basic with BatchNormalization kept and an odd
image size) and CLIPVisionModel / CLIPVisionModelWithProjection from transformers, exported
with torch.onnx (TorchScript exporter, opset 17, dynamic batch), run in onnxruntime and in
wm_run on the same random pixel_values, batch 1 and 2: every output within 1e-4 (absolute),
and wm_run --repeat 2 checks that reruns are bit-identical.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the venv of make test has it (tests/oracle/requirements.txt)
transformers = pytest.importorskip("transformers")

from engine_util import assert_close, engine_run, ort_run, pixel_outputs  # noqa: E402
import oracle_util as U  # noqa: E402

ATOL = 1e-4


def _randomize_batchnorm(model, gen):
    """Random affine parameters and running statistics, so BatchNorm is not the identity."""
    for mod in model.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            with torch.no_grad():
                mod.weight.copy_(torch.rand(mod.weight.shape, generator=gen) + 0.5)
                mod.bias.copy_(torch.randn(mod.bias.shape, generator=gen) * 0.1)
                mod.running_mean.copy_(torch.randn(mod.running_mean.shape, generator=gen) * 0.1)
                mod.running_var.copy_(torch.rand(mod.running_var.shape, generator=gen) + 0.5)


def _vit():
    cfg = transformers.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                 image_size=32, patch_size=8, num_labels=5)
    return transformers.ViTForImageClassification(cfg), (32, 32), ["logits"], {}


def _resnet_bottleneck():
    cfg = transformers.ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                                    layer_type="bottleneck", num_labels=5)
    return transformers.ResNetForImageClassification(cfg), (32, 32), ["logits"], {}


def _resnet_basic_bn():
    cfg = transformers.ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 24], depths=[2, 1],
                                    layer_type="basic", num_labels=7)
    # PRESERVE keeps BatchNormalization nodes (EVAL folds them into the Conv weights)
    return (transformers.ResNetForImageClassification(cfg), (35, 33), ["logits"],
            {"training": torch.onnx.TrainingMode.PRESERVE})


def _clip():
    cfg = transformers.CLIPVisionConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                        image_size=32, patch_size=8)
    return transformers.CLIPVisionModel(cfg), (32, 32), ["last_hidden_state", "pooler_output"], {}


def _clip_proj():
    cfg = transformers.CLIPVisionConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                        image_size=32, patch_size=8, projection_dim=16)
    return transformers.CLIPVisionModelWithProjection(cfg), (32, 32), ["image_embeds", "last_hidden_state"], {}


MODELS = {
    "vit": _vit,
    "resnet_bottleneck": _resnet_bottleneck,
    "resnet_basic_bn": _resnet_basic_bn,
    "clip_vision": _clip,
    "clip_vision_proj": _clip_proj,
}


@pytest.fixture(scope="module")
def exported(request):
    """name -> (onnx path, image size, output names); exported once per module."""
    d = U.scratch(request, "vision")
    res = {}
    for i, (name, make) in enumerate(MODELS.items()):
        torch.manual_seed(1000 + i)
        model, hw, names, extra = make()
        _randomize_batchnorm(model, torch.Generator().manual_seed(2000 + i))
        model.eval()
        path = str(d / f"{name}.onnx")
        x = torch.randn(1, 3, *hw)
        with torch.no_grad():
            torch.onnx.export(pixel_outputs(model, names), (x,), path, input_names=["pixel_values"], output_names=names,
                              dynamic_axes={"pixel_values": {0: "batch"}, **{n: {0: "batch"} for n in names}},
                              opset_version=17, dynamo=False, **extra)
        res[name] = (path, hw, names)
    return res


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("name", list(MODELS))
def test_vision_model_matches_onnxruntime(name, batch, exported, build_dir, tmp_path):
    path, (h, w), names = exported[name]
    x = np.random.default_rng(batch * 7 + len(name)).standard_normal((batch, 3, h, w)).astype(np.float32)
    feeds = {"pixel_values": x}
    ref = ort_run(path, feeds)
    ours, _ = engine_run(build_dir, path, feeds, tmp_path, repeat=2)  # --repeat 2: reruns bit-identical
    worst = assert_close(ours, ref, atol=ATOL, label=f"{name} batch {batch}")
    for n in names:
        assert ours[n].shape[0] == batch and np.all(np.isfinite(ours[n]))
        assert float(np.std(ref[n])) > 1e-6, f"{n}: the reference output carries no signal"
    print(f"{name} batch {batch}: max abs diff {worst}")


def test_vision_thread_counts_agree(exported, build_dir, tmp_path):
    """1 and 2 threads: both within tolerance of onnxruntime (the partitioning differs, the math does not)."""
    path, (h, w), _ = exported["resnet_basic_bn"]
    x = np.random.default_rng(5).standard_normal((2, 3, h, w)).astype(np.float32)
    ref = ort_run(path, {"pixel_values": x})
    for th in (1, 2):
        ours, _ = engine_run(build_dir, path, {"pixel_values": x}, tmp_path, threads=th)
        assert_close(ours, ref, atol=ATOL, label=f"threads {th}")


def test_ort_optimized_resnet_fusedconv(exported, build_dir, tmp_path):
    """onnxruntime's own optimized graph (Conv + Relu fused into com.microsoft.FusedConv) runs in the engine."""
    import onnx
    import onnxruntime as ort
    path, (h, w), _ = exported["resnet_bottleneck"]
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    ops = {(n.domain, n.op_type) for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node}
    assert ("com.microsoft", "FusedConv") in ops, ops
    x = np.random.default_rng(3).standard_normal((2, 3, h, w)).astype(np.float32)
    ref = ort_run(path, {"pixel_values": x})
    ours, _ = engine_run(build_dir, tmp_path / "opt.onnx", {"pixel_values": x}, tmp_path)
    assert_close(ours, ref, atol=ATOL, label="ORT-optimized ResNet")


@pytest.mark.parametrize("act,params", [("Relu", []), ("LeakyRelu", [0.1]), ("Clip", [-0.5, 0.7]),
                                        ("HardSigmoid", [0.3, 0.4]), ("Sigmoid", []), ("Tanh", [])])
@pytest.mark.parametrize("group", [1, 4])
def test_fusedconv_residual_activation(act, params, group, build_dir, tmp_path):
    """com.microsoft.FusedConv with the residual input Z and each activation, against onnxruntime's kernel."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(group)
    C, M = 8, 8
    wt = rng.standard_normal((M, C // group, 3, 3)).astype(np.float32) * 0.3
    b = rng.standard_normal(M).astype(np.float32)
    attrs = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 1], group=group, activation=act, domain="com.microsoft")
    if params:
        attrs["activation_params"] = params
    node = helper.make_node("FusedConv", ["x", "w", "b", "z"], ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, C, 9, 11]),
                                        helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, M, 5, 11])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(wt, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    path = tmp_path / "fc.onnx"
    onnx.save(m, str(path))
    feeds = {"x": rng.standard_normal((2, C, 9, 11)).astype(np.float32),
             "z": rng.standard_normal((2, M, 5, 11)).astype(np.float32)}
    ours, _ = engine_run(build_dir, path, feeds, tmp_path)
    assert_close(ours, ort_run(path, feeds), atol=1e-5, label=f"FusedConv {act}")


@pytest.mark.parametrize("batch", [1, 3])
def test_clip_text_causal_sdpa_fused(batch, winml, build_dir, tmp_path):
    """CLIP's text tower as torch.onnx exports it with sdpa: the causal mask is a 2-D [S, S] Where(Trilu) tensor
    added to every batch's and head's scores. The optimizer fuses each layer into Attention (the mask as its
    attention_bias, broadcast over batch and heads), and the engine's result matches onnxruntime's on the export."""
    import subprocess

    import onnx
    cfg = transformers.CLIPTextConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                      vocab_size=99, max_position_embeddings=16, projection_dim=16)
    torch.manual_seed(77)
    model = transformers.CLIPTextModelWithProjection(cfg).eval()
    names = ["text_embeds", "last_hidden_state"]
    path = str(tmp_path / "clip_text.onnx")
    ids = torch.randint(3, 99, (1, 11))
    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids):
            out = self.model(input_ids=input_ids)
            return tuple(getattr(out, n) for n in names)

    with torch.no_grad():
        torch.onnx.export(Wrap(), (ids,), path, input_names=["input_ids"],
                          output_names=names, dynamic_axes={"input_ids": {0: "batch"}, **{n: {0: "batch"} for n in names}},
                          opset_version=17, dynamo=False)
    ops = [n.op_type for n in onnx.load(path).graph.node]
    assert "Trilu" in ops and "Softmax" in ops, "the export no longer spells the causal mask this test is about"
    opt = str(tmp_path / "clip_text_opt.onnx")
    r = subprocess.run([winml, "optimize", "-m", path, "-o", opt, "-q"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    fused = [n.op_type for n in onnx.load(opt).graph.node]
    assert fused.count("Attention") == 2 and "Softmax" not in fused, sorted(set(fused))
    x = np.random.default_rng(batch).integers(3, 99, (batch, 11)).astype(np.int64)
    ref = ort_run(path, {"input_ids": x})
    ours, _ = engine_run(build_dir, path, {"input_ids": x}, tmp_path, repeat=2)
    assert_close(ours, ref, atol=ATOL, label=f"clip text batch {batch}")
    assert_close(ort_run(opt, {"input_ids": x}), ref, atol=ATOL, label="the fused model in onnxruntime")
    # causal: a later token changes its own and later positions' states, never earlier ones
    x2 = x.copy()
    x2[:, 6] = (x2[:, 6] - 3 + 1) % 96 + 3
    ours2, _ = engine_run(build_dir, path, {"input_ids": x2}, tmp_path)
    h, h2 = ours["last_hidden_state"], ours2["last_hidden_state"]
    assert np.array_equal(h[:, :6], h2[:, :6]) and np.abs(h[:, 6:] - h2[:, 6:]).max() > 1e-3
