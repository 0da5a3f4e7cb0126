"""Tiny random vision checkpoints saved by transformers (test_builder_vision.py).

CASES: name -> (config class, model class, config kwargs, input kinds). make(name, path) saves the model with
every parameter re-drawn (norm weights near 1, the rest N(0, 0.25^2); BatchNorm statistics re-drawn too, with
positive variances) so a wrong bias, norm, scale or head cannot hide behind transformers' zero/one init, and
returns the torch model in eval mode.
"""
import numpy as np

VIT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=32,
           patch_size=8, num_labels=3)
DINO = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=4, image_size=32, patch_size=8,
            num_labels=3)
CLIP_T = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=99,
              max_position_embeddings=16, projection_dim=24)
CLIP_V = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, image_size=32,
              patch_size=8, projection_dim=24)
SIG_T = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=99,
             max_position_embeddings=16, eos_token_id=98, bos_token_id=97, pad_token_id=1)
SIG_V = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, image_size=32,
             patch_size=8)
RESNET_BASIC = dict(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 2], layer_type="basic", num_labels=3,
                    image_size=32)
RESNET_BOTTLENECK = dict(embedding_size=8, hidden_sizes=[16, 32], depths=[2, 1], layer_type="bottleneck",
                         image_size=32, downsample_in_bottleneck=True)


def _specs():
    import transformers as T
    return {
        "vit_cls": (T.ViTConfig, T.ViTForImageClassification, VIT, "image"),
        "vit_model": (T.ViTConfig, T.ViTModel, VIT, "image"),
        "deit_cls": (T.DeiTConfig, T.DeiTForImageClassification, VIT, "image"),
        "deit_teacher": (T.DeiTConfig, T.DeiTForImageClassificationWithTeacher, VIT, "image"),
        "dinov2_model": (T.Dinov2Config, T.Dinov2Model, DINO, "image"),
        "dinov2_swiglu_cls": (T.Dinov2Config, T.Dinov2ForImageClassification, dict(DINO, use_swiglu_ffn=True), "image"),
        "dinov2_reg_cls": (T.Dinov2WithRegistersConfig, T.Dinov2WithRegistersForImageClassification,
                           dict(DINO, num_register_tokens=2), "image"),
        "dinov2_reg_model": (T.Dinov2WithRegistersConfig, T.Dinov2WithRegistersModel,
                             dict(DINO, num_register_tokens=3, use_swiglu_ffn=True), "image"),
        # eos_token_id 2: transformers pools CLIP text at the highest id (the configs from before its fix)
        # the towers' own projection_dim (24) is not CLIPModel's (20): the top-level one sizes the projections, as
        # in laion/CLIP-ViT-H-14's config (1024 there, 512 in the sub-configs)
        "clip": (T.CLIPConfig, T.CLIPModel, dict(text_config=dict(CLIP_T, eos_token_id=2), vision_config=CLIP_V,
                                                 projection_dim=20), "both"),
        # any other eos_token_id: pooled at its first occurrence
        "clip_text": (T.CLIPTextConfig, T.CLIPTextModelWithProjection, dict(CLIP_T, eos_token_id=98), "text"),
        "clip_vision": (T.CLIPVisionConfig, T.CLIPVisionModel, CLIP_V, "image"),
        "siglip": (T.SiglipConfig, T.SiglipModel, dict(text_config=dict(SIG_T), vision_config=SIG_V), "both"),
        "siglip_text": (T.SiglipTextConfig, T.SiglipTextModel, dict(SIG_T, projection_size=24), "text"),
        "siglip_vision": (T.SiglipVisionConfig, T.SiglipVisionModel, SIG_V, "image"),
        "resnet_basic": (T.ResNetConfig, T.ResNetForImageClassification, RESNET_BASIC, "image"),
        "resnet_bottleneck": (T.ResNetConfig, T.ResNetModel, RESNET_BOTTLENECK, "image"),
    }


CASES = sorted([
    "vit_cls", "vit_model", "deit_cls", "deit_teacher", "dinov2_model", "dinov2_swiglu_cls", "dinov2_reg_cls",
    "dinov2_reg_model", "clip", "clip_text", "clip_vision", "siglip", "siglip_text", "siglip_vision",
    "resnet_basic", "resnet_bottleneck"])


def kind(name):
    return _specs()[name][3]


def make(name, path, seed=0):
    import torch
    cfg_cls, model_cls, kw, _ = _specs()[name]
    torch.manual_seed(seed)
    model = model_cls(cfg_cls(**kw)).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if ("norm" in n.lower() or "layernorm" in n.lower()) and n.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif n.endswith("logit_scale"):
                p.fill_(1.5)
            elif n.endswith("logit_bias"):
                p.fill_(-0.7)
            else:
                p.copy_(0.25 * torch.randn(p.shape, generator=g))
        for n, b in model.named_buffers():
            if n.endswith("running_mean"):
                b.copy_(0.2 * torch.randn(b.shape, generator=g))
            elif n.endswith("running_var"):
                b.copy_(0.5 + torch.rand(b.shape, generator=g))
    model.save_pretrained(path, safe_serialization=True)
    return model


def feeds(model, name, batch, rng):
    """Inputs for batch images (and texts): the ONNX feed dict and the torch kwargs."""
    import torch
    k = kind(name)
    f = {}
    if k in ("image", "both"):
        cfg = model.config.vision_config if k == "both" else model.config
        size = getattr(cfg, "image_size", 32)
        f["pixel_values"] = rng.standard_normal((batch, 3, size, size)).astype(np.float32)
    if k in ("text", "both"):
        cfg = model.config.text_config if k == "both" else model.config
        nt = batch if k == "text" else 2
        S = cfg.max_position_embeddings  # the build's static sequence
        ids = rng.integers(3, cfg.vocab_size - 2, size=(nt, S), dtype=np.int64)
        mask = np.ones((nt, S), dtype=np.int64)
        for i in range(nt):
            n = S - (i % 3)  # rows 1 and 2 are padded on the right
            if cfg.eos_token_id != 2:
                ids[i, n - 1] = cfg.eos_token_id
            ids[i, n:] = 1
            mask[i, n:] = 0
        f["input_ids"], f["attention_mask"] = ids, mask
    return f, {k_: torch.from_numpy(v) for k_, v in f.items()}


def reference(model, name, tfeeds):
    """transformers' outputs under the ONNX output names."""
    import torch
    with torch.no_grad():
        o = model(**tfeeds)
    out = {}
    for key in ("logits", "last_hidden_state", "pooler_output", "text_embeds", "image_embeds", "logits_per_image",
                "logits_per_text"):
        v = getattr(o, key, None)
        if v is not None:
            out[key] = v.numpy()
    return out
