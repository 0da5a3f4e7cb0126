"""Tiny transformer checkpoints exported with torch.onnx for the optimizer/quantizer oracle tests.

Models are built by transformers from small configs with random weights (every parameter drawn from
N(0, 0.1), so LayerNorm scales are not 1 and biases not 0), exported by both exporters:
  "ts"  the legacy TorchScript exporter (dynamo=False, opset 17, eager attention)
  "dyn" the dynamo exporter (opset 18, sdpa attention, transformers' default)
Exports are cached for the whole pytest process (they take seconds each).

run_model(path, feeds) is the one place a runtime executes a model: onnxruntime's CPU provider with its
own graph optimizations off (so what runs is exactly our graph). WM_RUNNER plugs in another runner:
WM_RUNNER=engine runs winml's own engine (wm_run from $WM_BUILD, safetensors in and out); any other value is
a command that gets `<cmd> MODEL.onnx IN.npz OUT.npz` and writes the outputs in order as arr_0, arr_1, ...
"""
import os
import subprocess
import tempfile
import warnings

import numpy as np

L = 2  # layers of every tiny model
H = 32  # hidden size
NH = 4  # attention heads
KVH = 2  # key/value heads of the grouped-query decoders
HD = H // NH  # head size (8: GroupQueryAttention needs a multiple of 8)

_CACHE = {}
_DIR = None


def _dir():
    global _DIR
    if _DIR is None:
        _DIR = tempfile.mkdtemp(prefix="wm_opt_models_")
    return _DIR


def run_model(path, feeds):
    """Runs model `path` on `feeds` (dict name -> array); returns the outputs as a list of arrays."""
    runner = os.environ.get("WM_RUNNER")
    if runner == "engine":
        return _run_engine(path, feeds)
    if runner:
        with tempfile.TemporaryDirectory() as d:
            fin, fout = os.path.join(d, "in.npz"), os.path.join(d, "out.npz")
            np.savez(fin, **feeds)
            subprocess.run([runner, path, fin, fout], check=True)
            z = np.load(fout)
            return [z[f"arr_{i}"] for i in range(len(z.files))]
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = {i.name for i in s.get_inputs()}
    return s.run(None, {k: v for k, v in feeds.items() if k in names})


def _run_engine(path, feeds):
    import onnx
    from safetensors.numpy import load_file, save_file
    import oracle_util as U
    tool = U.binary(U.build_dir("WM_BUILD", "build"), "wm_run")
    outs = [o.name for o in onnx.load(path, load_external_data=False).graph.output]
    with tempfile.TemporaryDirectory() as d:
        fin, fout = os.path.join(d, "in.safetensors"), os.path.join(d, "out.safetensors")
        save_file({k: np.ascontiguousarray(v) for k, v in feeds.items() if k in input_types(path)}, fin)
        subprocess.run([tool, path, fin, fout], check=True, capture_output=True)
        got = load_file(fout)
        return [got[n] for n in outs]


def input_types(path):
    """name -> (elem_type, dims with None for symbolic) of the graph inputs that are not initializers."""
    import onnx
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    return {i.name: (i.type.tensor_type.elem_type,
                     [d.dim_value if d.HasField("dim_value") else None for d in i.type.tensor_type.shape.dim])
            for i in m.graph.input if i.name not in inits}


def _randomize(model, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    model.eval()
    return model


def _encoder(kind):
    import transformers as tf
    common = dict(vocab_size=120, hidden_size=H, num_hidden_layers=L, num_attention_heads=NH, intermediate_size=37,
                  max_position_embeddings=64, hidden_act="gelu")
    if kind == "bert":
        return tf.BertModel(tf.BertConfig(**common))
    return tf.XLMRobertaForSequenceClassification(tf.XLMRobertaConfig(type_vocab_size=1, num_labels=1, pad_token_id=1,
                                                                      **common))


def _decoder(kind):
    import transformers as tf
    if kind == "gpt2":
        return tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=120, n_embd=H, n_layer=L, n_head=NH, n_positions=64))
    common = dict(vocab_size=120, hidden_size=H, intermediate_size=48, num_hidden_layers=L, num_attention_heads=NH,
                  num_key_value_heads=KVH, max_position_embeddings=64)
    if kind == "llama":
        return tf.LlamaForCausalLM(tf.LlamaConfig(**common))
    return tf.Qwen2ForCausalLM(tf.Qwen2Config(**common))


ENCODERS = ("bert", "xlmr")
DECODERS = ("gpt2", "llama", "qwen2")
EXPORTERS = ("ts", "dyn")


def export(kind, exporter, opset=None):
    """Path of the cached export of tiny model `kind` by `exporter` ("ts" or "dyn")."""
    key = (kind, exporter, opset)
    if key in _CACHE:
        return _CACHE[key]
    import torch
    impl = "eager" if exporter == "ts" else "sdpa"
    warnings.filterwarnings("ignore")
    path = os.path.join(_dir(), f"{kind}_{exporter}{'' if opset is None else opset}.onnx")
    dynamo = exporter == "dyn"
    ops = opset or (18 if dynamo else 17)
    with torch.no_grad():
        if kind in ENCODERS:
            model = _randomize(_encoder(kind), 1)
            model.config._attn_implementation = impl
            _export_encoder(model, path, dynamo, ops)
        else:
            model = _randomize(_decoder(kind), 2)
            model.config._attn_implementation = impl
            _export_decoder(model, path, dynamo, ops, kind == "llama")
    _CACHE[key] = path
    return path


def _export_encoder(model, path, dynamo, opset):
    import torch

    class Enc(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            o = self.m(input_ids=input_ids, attention_mask=attention_mask)
            return o.logits if hasattr(o, "logits") else o.last_hidden_state

    ids = torch.randint(2, 100, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.int64)
    kw = dict(input_names=["input_ids", "attention_mask"], output_names=["out"], opset_version=opset, dynamo=dynamo)
    if dynamo:
        b, s = torch.export.Dim("batch"), torch.export.Dim("seq")
        kw["dynamic_shapes"] = {"input_ids": {0: b, 1: s}, "attention_mask": {0: b, 1: s}}
    else:
        kw["dynamic_axes"] = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    torch.onnx.export(Enc(model), (ids, mask), path, **kw)


def _export_decoder(model, path, dynamo, opset, with_positions):
    import torch
    from transformers.cache_utils import DynamicCache
    nl = model.config.num_hidden_layers
    kvh = getattr(model.config, "num_key_value_heads", None) or model.config.num_attention_heads
    hd = model.config.hidden_size // model.config.num_attention_heads

    class Dec(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, *rest):
            pos = rest[0] if with_positions else None
            past = rest[1:] if with_positions else rest
            cache = DynamicCache(config=self.m.config)
            for i in range(nl):
                cache.update(past[2 * i], past[2 * i + 1], i)
            o = self.m(input_ids=input_ids, attention_mask=attention_mask, position_ids=pos, past_key_values=cache,
                       use_cache=True)
            out = [o.logits]
            for i in range(nl):
                out += [o.past_key_values.layers[i].keys, o.past_key_values.layers[i].values]
            return tuple(out)

    b, s, p = 2, 3, 4
    ids = torch.randint(0, 100, (b, s))
    mask = torch.ones(b, p + s, dtype=torch.int64)
    pos = torch.arange(p, p + s).unsqueeze(0).expand(b, s)
    past = [torch.randn(b, kvh, p, hd) for _ in range(2 * nl)]
    names = ["input_ids", "attention_mask"] + (["position_ids"] if with_positions else [])
    pnames = [f"past_key_values.{i}.{k}" for i in range(nl) for k in ("key", "value")]
    onames = ["logits"] + [f"present.{i}.{k}" for i in range(nl) for k in ("key", "value")]
    args = (ids, mask) + ((pos,) if with_positions else ()) + tuple(past)
    kw = dict(input_names=names + pnames, output_names=onames, opset_version=opset, dynamo=dynamo)
    if dynamo:
        B, S, P, T = (torch.export.Dim(n) for n in ("batch", "seq", "past", "total"))
        rest = ([{0: B, 1: S}] if with_positions else []) + [{0: B, 2: P} for _ in pnames]
        kw["dynamic_shapes"] = ({0: B, 1: S}, {0: B, 1: T}, tuple(rest))
    else:
        da = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"}}
        if with_positions:
            da["position_ids"] = {0: "batch", 1: "seq"}
        for n in pnames:
            da[n] = {0: "batch", 2: "past"}
        kw["dynamic_axes"] = da
    torch.onnx.export(Dec(model), args, path, **kw)


def decoder_feeds(path, b, s, p, seed=0, vocab=100):
    """Feeds for an exported decoder: batch b, s new tokens after p cached ones, an all-ones mask."""
    rng = np.random.default_rng(seed)
    f = {"input_ids": rng.integers(0, vocab, (b, s)).astype(np.int64),
         "attention_mask": np.ones((b, p + s), np.int64),
         "position_ids": np.tile(np.arange(p, p + s, dtype=np.int64), (b, 1))}
    for name, (_, dims) in input_types(path).items():
        if name.startswith("past_key_values."):
            f[name] = rng.standard_normal((b, dims[1], p, dims[3])).astype(np.float32)
    return f


def encoder_feeds(b, s, seed=0, padded=True):
    """Feeds for an exported encoder; with padded, the second row's last two tokens are masked out."""
    rng = np.random.default_rng(seed)
    mask = np.ones((b, s), np.int64)
    if padded and b > 1:
        mask[1, -2:] = 0
    return {"input_ids": rng.integers(2, 100, (b, s)).astype(np.int64), "attention_mask": mask}


def compare(a, b):
    """(max abs diff, min cosine) over output lists a and b."""
    worst, cos = 0.0, 1.0
    for x, y in zip(a, b):
        x = np.asarray(x, np.float64)
        y = np.asarray(y, np.float64)
        assert x.shape == y.shape, (x.shape, y.shape)
        if x.size == 0:
            continue
        worst = max(worst, float(np.max(np.abs(x - y))))
        den = np.linalg.norm(x) * np.linalg.norm(y)
        cos = min(cos, float(np.dot(x.ravel(), y.ravel()) / den) if den else 1.0)
    return worst, cos


def sqnr_db(ref, test):
    ref = np.asarray(ref, np.float64)
    err = ref - np.asarray(test, np.float64)
    return float(10 * np.log10(np.sum(ref ** 2) / max(np.sum(err ** 2), 1e-300)))
