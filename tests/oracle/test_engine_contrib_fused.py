"""Engine vs onnxruntime on real transformer graphs fused by onnxruntime's transformers optimizer
(part (b) of the contrib-op oracle tests, see test_engine_contrib.py).

Tiny random BERT and GPT-2 from transformers (save-free, seeded), exported with torch.onnx and
optimized with onnxruntime.transformers.optimizer.optimize_model:
  * BERT (TorchScript export), model_type bert: com.microsoft Attention (1-D mask index from
    ReduceSum of attention_mask), SkipLayerNormalization, BiasGelu; the same with
    use_multi_head_attention: MultiHeadAttention; with gelu_new: FastGelu;
  * GPT-2 with past key values (TorchScript export): SkipLayerNormalization and FastGelu (the gpt2
    attention fusion matches only older transformers exports, so attention stays in plain ops);
  * GPT-2 with past key values (dynamo export, opset 23): ONNX Attention with past + FastGelu.
Each graph runs a padded prefill and, for GPT-2, a decode step with the past; max abs diff <= 1e-4.
"""
import collections
import os

import numpy as np
import onnx
import pytest

from engine_oracle import compare, ort_run, wm_run
import oracle_util as U  # noqa: E402

import torch  # noqa: E402  (a missing oracle dependency fails the tests, it does not skip them)
import transformers  # noqa: E402
from onnxruntime.transformers.fusion_options import FusionOptions  # noqa: E402
from onnxruntime.transformers.optimizer import optimize_model  # noqa: E402

L, N, HD, E = 2, 4, 8, 32


def op_counts(path):
    m = onnx.load(path, load_external_data=False)
    return collections.Counter((n.domain or "", n.op_type) for n in m.graph.node)


def optimize(src, dst, model_type="bert", **opts):
    fo = FusionOptions(model_type)
    fo.enable_embed_layer_norm = False  # EmbedLayerNormalization is not an op of the engine
    for k, v in opts.items():
        setattr(fo, k, v)
    o = optimize_model(src, model_type=model_type, num_heads=N, hidden_size=E, optimization_options=fo, opt_level=0)
    o.save_model_to_file(dst)
    return op_counts(dst)


class BertWrap(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids, am, tt):
        o = self.m(input_ids=ids, attention_mask=am, token_type_ids=tt)
        return o.last_hidden_state, o.pooler_output


def export_bert(path, act="gelu"):
    cfg = transformers.BertConfig(vocab_size=99, hidden_size=E, num_hidden_layers=L, num_attention_heads=N,
                                  intermediate_size=37, max_position_embeddings=64, hidden_act=act,
                                  attn_implementation="eager")
    torch.manual_seed(0)
    m = BertWrap(transformers.BertModel(cfg).eval())
    ids = torch.randint(0, 99, (2, 7))
    am = torch.ones(2, 7, dtype=torch.long)
    tt = torch.zeros(2, 7, dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    dyn = {k: {0: "b", 1: "s"} for k in names + ["last_hidden_state"]}
    dyn["pooler_output"] = {0: "b"}
    torch.onnx.export(m, (ids, am, tt), path, input_names=names, output_names=["last_hidden_state", "pooler_output"],
                      dynamic_axes=dyn, opset_version=17, dynamo=False)


class Gpt2Wrap(torch.nn.Module):
    """GPT-2 taking / returning the past as one (2, B, heads, P, head) tensor per layer."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids, pos, am, past_0, past_1):
        from transformers.cache_utils import DynamicCache
        c = DynamicCache()
        for i, p in enumerate((past_0, past_1)):
            c.update(p[0], p[1], i)
        o = self.m(input_ids=ids, position_ids=pos, attention_mask=am, past_key_values=c, use_cache=True)
        pk = o.past_key_values
        return (o.logits, *[torch.stack([pk.layers[i].keys, pk.layers[i].values]) for i in range(L)])


def export_gpt2(path, dynamo):
    cfg = transformers.GPT2Config(vocab_size=97, n_embd=E, n_layer=L, n_head=N, n_positions=64,
                                  attn_implementation="sdpa" if dynamo else "eager")
    torch.manual_seed(0)
    m = Gpt2Wrap(transformers.GPT2LMHeadModel(cfg).eval())
    B, S, P = 2, 3, 4
    ids = torch.randint(0, 97, (B, S))
    pos = torch.arange(P, P + S).unsqueeze(0).repeat(B, 1)
    am = torch.ones(B, P + S, dtype=torch.long)
    past = [torch.randn(2, B, N, P, HD) for _ in range(L)]
    names = ["input_ids", "position_ids", "attention_mask", "past_0", "past_1"]
    outs = ["logits", "present_0", "present_1"]
    if dynamo:
        bd, sd, pd = (torch.export.Dim(n, min=1, max=32) for n in ("b", "s", "p"))
        td = torch.export.Dim("t", min=2, max=64)
        shapes = ({0: bd, 1: sd}, {0: bd, 1: sd}, {0: bd, 1: td}, {1: bd, 3: pd}, {1: bd, 3: pd})
        torch.onnx.export(m, (ids, pos, am, *past), path, input_names=names, output_names=outs,
                          dynamic_shapes=shapes, opset_version=23, dynamo=True)
    else:
        dyn = {"input_ids": {0: "b", 1: "s"}, "position_ids": {0: "b", 1: "s"}, "attention_mask": {0: "b", 1: "t"},
               "logits": {0: "b", 1: "s"}}
        dyn.update({f"past_{i}": {1: "b", 3: "p"} for i in range(L)})
        dyn.update({f"present_{i}": {1: "b", 3: "t"} for i in range(L)})
        torch.onnx.export(m, (ids, pos, am, *past), path, input_names=names, output_names=outs, dynamic_axes=dyn,
                          opset_version=17, dynamo=False)


@pytest.fixture(scope="module")
def work(request):
    return U.scratch(request, "fused")


def bert_feeds():
    rng = np.random.default_rng(7)
    am = np.ones((2, 7), np.int64)
    am[1, 4:] = 0  # padded second sequence
    return dict(input_ids=rng.integers(0, 99, (2, 7)).astype(np.int64), attention_mask=am,
                token_type_ids=np.zeros((2, 7), np.int64))


def run_pair(build_dir, work, path, feeds, tag, atol=1e-4):
    ref = ort_run(path, feeds)
    got = wm_run(build_dir, path, feeds, work, tag=tag)
    worst = compare(ref, got, atol, what=tag)
    print(f"{tag}: max abs diff {max(worst.values()):.3g}")
    return ref


@pytest.mark.parametrize("variant", ["attention", "mha", "fastgelu"])
def test_bert_fused(build_dir, work, variant):
    raw = os.path.join(work, f"bert_{variant}.onnx")
    export_bert(raw, act="gelu_new" if variant == "fastgelu" else "gelu")
    opt = raw[:-5] + "_opt.onnx"
    ops = optimize(raw, opt, use_multi_head_attention=variant == "mha")
    want = {"attention": ["Attention", "SkipLayerNormalization", "BiasGelu"],
            "mha": ["MultiHeadAttention", "SkipLayerNormalization", "BiasGelu"],
            "fastgelu": ["Attention", "SkipLayerNormalization", "FastGelu"]}[variant]
    for op in want:
        assert ops[("com.microsoft", op)] >= 1, f"optimizer did not produce {op}: {ops}"
    run_pair(build_dir, work, opt, bert_feeds(), f"bert_{variant}")


def gpt2_steps(build_dir, work, path, tag):
    rng = np.random.default_rng(3)
    B, S = 2, 5
    empty = {f"past_{i}": np.zeros((2, B, N, 0, HD), np.float32) for i in range(L)}
    feeds = dict(input_ids=rng.integers(0, 97, (B, S)).astype(np.int64),
                 position_ids=np.tile(np.arange(S), (B, 1)).astype(np.int64), attention_mask=np.ones((B, S), np.int64),
                 **empty)
    ref = run_pair(build_dir, work, path, feeds, f"{tag}_prefill")
    step = dict(input_ids=rng.integers(0, 97, (B, 1)).astype(np.int64),
                position_ids=np.full((B, 1), S, np.int64), attention_mask=np.ones((B, S + 1), np.int64),
                **{f"past_{i}": ref[f"present_{i}"] for i in range(L)})
    run_pair(build_dir, work, path, step, f"{tag}_decode")


def test_gpt2_past_torchscript(build_dir, work):
    raw = os.path.join(work, "gpt2.onnx")
    export_gpt2(raw, dynamo=False)
    opt = raw[:-5] + "_opt.onnx"
    ops = optimize(raw, opt)
    for op in ("SkipLayerNormalization", "FastGelu"):
        assert ops[("com.microsoft", op)] >= 1, f"optimizer did not produce {op}: {ops}"
    gpt2_steps(build_dir, work, opt, "gpt2_ts")


def test_gpt2_past_dynamo_onnx_attention(build_dir, work):
    raw = os.path.join(work, "gpt2d.onnx")
    export_gpt2(raw, dynamo=True)
    opt = raw[:-5] + "_opt.onnx"
    ops = optimize(raw, opt)  # model_type bert: the gpt2 post-processing fails on bias-free Gemm nodes
    assert ops[("", "Attention")] >= 1 and ops[("com.microsoft", "FastGelu")] >= 1, ops
    gpt2_steps(build_dir, work, opt, "gpt2_dynamo")
