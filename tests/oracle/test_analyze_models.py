"""`winml analyze` on real model graphs: our builder's exports of tiny random checkpoints (plain, optimized,
fp16, int4) and torch.onnx exports of tiny transformers models.

Checked against independent computations:
- per target, the level counts add up to the node count the onnx package reads, and the partition estimate
  covers every non-Constant node;
- the op histogram equals a collections.Counter over onnx's node list and `winml inspect -f json`'s op_counts;
- components follow the name-scope rule of data/ep_rules/SCHEMA.md, recomputed here from the node names
  (exactly for plain exports, where every node is scoped; fused graphs keep "layers 0-1 attn" / "mlp");
- contrib ops (GroupQueryAttention, MatMulNBits, SkipSimplifiedLayerNormalization, ...) get the level and reason
  the rule files give (read here with json);
- the CPU rules agree with reality: a model that onnxruntime (graph optimizations off, so every node needs its
  own kernel) AND our engine both run is all-supported on cpu; a made-up op and a real op with a dtype onnxruntime
  has no kernel for are not.
"""
import collections
import json
import os
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import builder_util as BU
import opt_models as OM
import oracle_util as U
from engine_util import engine_run

RULES = os.path.join(U.ROOT, "data", "ep_rules")
OURS = ["qwen3", "gpt2", "bert"]  # builder families: GQA decoder, MHA decoder with biases, encoder
VARIANTS = ["plain", "opt", "fp16", "int4"]
TORCH = [("bert", "ts"), ("gpt2", "ts"), ("llama", "dyn")]


def analyze(winml, path, *extra):
    r = U.run([winml, "analyze", "-m", path, "-f", "json", *extra], timeout=120)
    assert r.returncode in (0, 1), U.describe(r)
    d = json.loads(r.stdout)
    worst = max((t["verdict"] for t in d["targets"]), key=["supported", "partial", "unknown", "unsupported"].index)
    assert (r.returncode == 0) == (worst == "supported"), U.describe(r)
    return d


# ------------------------------------------------------------------ models

@pytest.fixture(scope="module")
def ours(request, winml):
    """(kind, variant) -> model path, built once per module with export / optimize / quantize."""
    root = U.scratch(request, "analyze_models")
    cache = {}

    def get(kind, variant):
        key = (kind, variant)
        if key in cache:
            return cache[key]
        if variant == "plain":
            ckpt = str(root / f"ckpt_{kind}")
            BU.make_tiny(kind, ckpt)
            out = str(root / f"x_{kind}")
            r = U.run([winml, "export", "-m", ckpt, "-o", out, "-q", "-f", "json"], timeout=300)
            assert r.returncode == 0, U.describe(r)
            path = os.path.join(out, "model.onnx")
        elif variant == "opt":
            path = str(root / f"{kind}_opt.onnx")
            r = U.run([winml, "optimize", "-m", get(kind, "plain"), "-o", path, "-q", "-f", "json"], timeout=300)
            assert r.returncode == 0, U.describe(r)
        else:
            path = str(root / f"{kind}_{variant}.onnx")
            r = U.run([winml, "quantize", "-m", get(kind, "opt"), "-o", path, "-p", variant, "-q", "-f", "json"],
                      timeout=300)
            assert r.returncode == 0, U.describe(r)
        cache[key] = path
        return path
    return get


ALL_MODELS = [("ours", k, v) for k in OURS for v in VARIANTS] + [("torch", k, e) for k, e in TORCH]


@pytest.fixture
def model_path(request, ours):
    src, kind, var = request.param
    return ours(kind, var) if src == "ours" else OM.export(kind, var)


def _ids(p):
    return "-".join(p)


# ------------------------------------------------------------------ independent references

def onnx_histogram(m):
    return collections.Counter((n.domain if n.domain not in ("", "ai.onnx") else "", n.op_type) for n in m.graph.node)


def inspect_histogram(winml, path):
    d = U.inspect_json(winml, path)
    out = collections.Counter()
    for k, v in d["op_counts"].items():
        dom, _, op = k.rpartition(":")
        out[(dom, op)] += v
    return out


ROOTS = {"model", "transformer", "bert", "roberta", "base_model", "module"}
LAYER = re.compile(r"^(.*?)([._]?)(\d{1,6})$")


def scope_of(name):
    """(key, layer) per the component rule of data/ep_rules/SCHEMA.md, written from its text."""
    if "/" not in (name or ""):
        return "(top level)", -1
    parts = [p for p in name.split("/") if p][:-1]
    if not parts:
        return "(top level)", -1
    i = 0
    while i + 1 < len(parts) and parts[i] in ROOTS:
        i += 1
    kept = []
    for j in range(i, len(parts)):
        mm = LAYER.match(parts[j])
        if mm and (mm.group(2) or not mm.group(1)):
            kept.append(mm.group(1) + mm.group(2) + "#")
            if j + 1 < len(parts):
                kept.append(parts[j + 1])
            return "/".join(kept), int(mm.group(3))
        kept.append(parts[j])
    return parts[i], -1


def display(key, layers):
    if not layers:
        rng = ""
    elif len(layers) == 1:
        rng = str(min(layers))
    elif max(layers) - min(layers) + 1 == len(layers):
        rng = f"{min(layers)}-{max(layers)}"
    else:
        rng = f"{min(layers)}-{max(layers)} ({len(layers)} of them)"
    s = re.sub(r"[._]#", " " + rng, key).replace("#", rng)
    return s.replace("/", " ")


def expected_components(m):
    groups = collections.OrderedDict()
    for n in m.graph.node:
        key, layer = scope_of(n.name)
        g = groups.setdefault(key, [0, set()])
        g[0] += 1
        if layer >= 0:
            g[1].add(layer)
    return {display(k, v[1]): v[0] for k, v in groups.items()}


def load_rules():
    out = {}
    for f in sorted(os.listdir(RULES)):
        if f.endswith(".json"):
            with open(os.path.join(RULES, f)) as fh:
                d = json.load(fh)
            out[d["ep"]] = d
    return out


def first_rule(rules, domain, op, device):
    for r in rules["rules"]:
        dom = r.get("domain", "")
        dom = "" if dom == "ai.onnx" else dom
        if dom == domain and r["op_type"] == op and device in r.get("devices", rules["devices"]):
            return r
    return None


# ------------------------------------------------------------------ must-show 1: tables, histograms, components

@pytest.mark.parametrize("model_path", ALL_MODELS, indirect=True, ids=_ids)
def test_counts_histogram_and_components(winml, model_path):
    m = onnx.load(model_path, load_external_data=False)
    n_nodes = len(m.graph.node)
    n_const = sum(1 for n in m.graph.node if n.op_type == "Constant" and n.domain in ("", "ai.onnx"))
    ref_hist = onnx_histogram(m)
    assert inspect_histogram(winml, model_path) == ref_hist
    d = analyze(winml, model_path)
    assert d["nodes"] == n_nodes
    pairs = {(t["ep"], t["device"]) for t in d["targets"]}
    assert {("cpu", "cpu"), ("qnn", "npu"), ("openvino", "npu"), ("vitisai", "npu"), ("dml", "gpu")} <= pairs
    for t in d["targets"]:
        what = f"{t['ep']}/{t['device']}"
        assert sum(t["counts"].values()) == n_nodes, what
        p = t["partitions"]
        assert p["ep_nodes"] + p["cpu_fallback_nodes"] == n_nodes - n_const, what
        assert (p["ep_subgraphs"] == 0) == (p["ep_nodes"] == 0), what
        hist = collections.Counter()
        for o in t["ops"]:
            hist[(o["domain"], o["op"])] += o["count"]
        assert hist == ref_hist, what
        counts = [o["count"] for o in t["ops"]]
        assert counts == sorted(counts, reverse=True), f"{what}: ops not by count"
        assert sum(c["nodes"] for c in t["components"]) == n_nodes, what
        bad = collections.Counter(n["level"] for n in t["nodes"])
        for lv in ("partial", "unknown", "unsupported"):
            assert bad[lv] == t["counts"][lv], what
        for c in t["components"]:
            assert (c["level"] == "supported") == (c["not_supported_nodes"] == 0), (what, c)
            assert c["summary"].startswith(f"{c['component']}: {c['level']} on {what}")


@pytest.mark.parametrize("kind", OURS)
def test_components_of_our_exports(winml, ours, kind):
    """Plain exports: every node is scoped, so the components are exactly the SCHEMA rule applied to the names."""
    path = ours(kind, "plain")
    m = onnx.load(path, load_external_data=False)
    assert all("/" in n.name for n in m.graph.node), "the builder names every node by scope"
    want = expected_components(m)
    d = analyze(winml, path, "--ep", "cpu")
    got = {c["component"]: c["nodes"] for c in d["targets"][0]["components"]}
    assert got == want
    assert "layers 0-1 attn" in got and "layers 0-1 mlp" in got
    assert "embed_tokens" in got
    assert ("lm_head" in got) if kind != "bert" else ("classifier" in got)
    # fused graphs: unscoped fused nodes join a neighbour's scope, so the layer groups stay and nothing is left over
    for var in ("opt", "int4"):
        mo = onnx.load(ours(kind, var), load_external_data=False)
        assert any("/" not in n.name for n in mo.graph.node) or var == "int4", "expected fused, unscoped nodes"
        do = analyze(winml, ours(kind, var), "--ep", "qnn", "--device", "npu")
        comps = {c["component"]: c for c in do["targets"][0]["components"]}
        assert "(top level)" not in comps, sorted(comps)
        assert "layers 0-1 attn" in comps and "layers 0-1 mlp" in comps, sorted(comps)
        for name in ("layers 0-1 attn", "layers 0-1 mlp"):
            lay = sum(1 for n in mo.graph.node if "/" in n.name and display(scope_of(n.name)[0], {0, 1}) == name)
            assert comps[name]["nodes"] >= lay > 0, (name, comps[name])


CONTRIB = {"GroupQueryAttention", "MatMulNBits", "SkipSimplifiedLayerNormalization", "SimplifiedLayerNormalization",
           "SkipLayerNormalization", "MultiHeadAttention", "RotaryEmbedding", "FastGelu", "BiasGelu", "QuickGelu",
           "Gelu", "EmbedLayerNormalization", "Attention"}


@pytest.mark.parametrize("kind", OURS)
def test_contrib_ops_follow_the_rule_files(winml, ours, kind):
    rules = load_rules()
    seen = set()
    for var in ("opt", "fp16", "int4"):
        path = ours(kind, var)
        m = onnx.load(path, load_external_data=False)
        d = analyze(winml, path)
        for t in d["targets"]:
            rs = rules[t["ep"]]
            i64 = rs.get("device_checks", {}).get(t["device"], {}).get("int64", rs.get("model_checks", {}).get("int64"))
            for o in t["ops"]:
                dom = o["domain"]
                if dom != "com.microsoft":
                    continue
                seen.add(o["op"])
                r = first_rule(rs, dom, o["op"], t["device"])
                what = f"{var} {t['ep']}/{t['device']} {o['op']}"
                if r is None:
                    assert o["level"] == ("unsupported" if t["ep"] == "cpu" else "unknown"), what
                    assert any(("no CPU kernel" if t["ep"] == "cpu" else "no rule for") in x for x in o["reasons"]), what
                    continue
                if r["level"] == "unsupported":
                    assert o["level"] == "unsupported", what
                    assert r.get("reason", "") in o["reasons"][0], what
                    continue
                constrained = any(k in r for k in ("dtypes", "const_inputs", "attrs", "max_rank", "static_shapes"))
                if not constrained and i64 != "unsupported":
                    assert o["level"] == r["level"], what
                else:  # a constraint may only make it worse, and then says which
                    order = ["supported", "partial", "unknown", "unsupported"]
                    assert order.index(o["level"]) >= order.index(r["level"]), what
                    if o["level"] != r["level"]:
                        assert any(re.search(r"dtype|constant|attribute|rank|static|int64", x) for x in o["reasons"]), what
                if r["level"] == "partial" and r.get("reason"):
                    assert any(r["reason"] in x for x in o["reasons"]), what
        assert any(n.domain == "com.microsoft" for n in m.graph.node), f"{kind} {var}: no contrib op to check"
    assert {"MatMulNBits"} <= seen and seen & {"SkipSimplifiedLayerNormalization", "SkipLayerNormalization"}, seen


# ------------------------------------------------------------------ must-show 3: CPU rules vs onnxruntime and our engine

def feeds_for(m, rng):
    """Feeds for any of the models above from its graph inputs: batch 1, 4 new tokens after 3 cached ones."""
    S, P = 4, 3
    inits = {i.name for i in m.graph.initializer}
    out = {}
    for i in m.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        dims = []
        for k, dd in enumerate(tt.shape.dim):
            if dd.HasField("dim_value"):
                dims.append(dd.dim_value)
            else:
                p = dd.dim_param.lower()
                dims.append(1 if ("batch" in p or k == 0) else P if "past" in p else P + S if "total" in p else S)
        name = i.name.lower()
        np_t = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if "mask" in name:
            a = np.ones(dims, np_t)
        elif "position" in name:
            a = np.broadcast_to(np.arange(P, P + dims[-1]), dims).astype(np_t)
        elif "token_type" in name:
            a = np.zeros(dims, np_t)
        elif np.issubdtype(np_t, np.integer):
            a = rng.integers(2, 60, dims).astype(np_t)
        else:
            a = rng.standard_normal(dims).astype(np_t)
        out[i.name] = np.ascontiguousarray(a)
    return out


def ort_runs(path, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 4
    try:
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        s.run(None, feeds)
        return True, ""
    except Exception as e:  # noqa: BLE001 - a refusal is the answer
        return False, str(e).splitlines()[0][:200]


def test_cpu_rules_agree_with_onnxruntime_and_engine(winml, build_dir, ours, tmp_path):
    both, refused = [], []
    for src, kind, var in ALL_MODELS:
        path = ours(kind, var) if src == "ours" else OM.export(kind, var)
        m = onnx.load(path, load_external_data=False)
        feeds = feeds_for(m, np.random.default_rng(0))
        ok_ort, why = ort_runs(path, feeds)
        try:
            engine_run(build_dir, path, feeds, tmp_path)
            ok_eng = True
        except AssertionError as e:
            ok_eng, why = False, why or str(e)[:200]
        d = analyze(winml, path, "--ep", "cpu")
        t = d["targets"][0]
        label = f"{src}:{kind}:{var}"
        if ok_ort and ok_eng:
            both.append(label)
            # runs on the CPU EP: nothing unsupported/unknown; "partial" only where onnxruntime inserts Casts
            # around a float16 node without a float16 kernel (its InsertCastTransformer runs at every level)
            assert t["counts"]["unsupported"] == 0 and t["counts"]["unknown"] == 0, (label, t["nodes"][:5])
            for n in t["nodes"]:
                assert n["level"] == "partial" and "float16 has no kernel: Casts" in n["reason"], (label, n)
            if not any(i.data_type == TensorProto.FLOAT16 for i in m.graph.initializer):
                assert t["verdict"] == "supported", label
        else:
            refused.append((label, why))
    U.note(f"analyze cpu vs reality: {len(both)} models run by onnxruntime and the engine, all-supported; "
           f"not run by both: {refused}")
    assert len(both) >= len(ALL_MODELS) - 2, refused  # the check must cover (nearly) every model


def _graph(tmp_path, name, node, inputs, outputs, opset=17, domain_opsets=()):
    g = helper.make_graph([node], "g", inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), *domain_opsets])
    p = str(tmp_path / f"{name}.onnx")
    onnx.save(m, p)
    return p


def test_cpu_rules_refuse_what_onnxruntime_refuses(winml, tmp_path):
    vi = helper.make_tensor_value_info
    cases = {
        # a made-up op in the default domain and in a custom one
        "madeup": (helper.make_node("FrobnicateTensor", ["x"], ["y"], name="/model/layers.0/mlp/frob"),
                   [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3])], (), "no CPU kernel"),
        "madeup_domain": (helper.make_node("Frob", ["x"], ["y"], domain="example.custom"),
                          [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3])],
                          (helper.make_opsetid("example.custom", 1),), "no CPU kernel"),
        # real ops with a dtype onnxruntime's CPU provider has no kernel for
        "max_int16": (helper.make_node("Max", ["x", "z"], ["y"]),
                      [vi("x", TensorProto.INT16, [4]), vi("z", TensorProto.INT16, [4])],
                      [vi("y", TensorProto.INT16, [4])], (), "dtype int16 not supported"),
        "topk_uint64": (helper.make_node("TopK", ["x", "k"], ["v", "i"]),
                        [vi("x", TensorProto.UINT64, [5]), vi("k", TensorProto.INT64, [1])],
                        [vi("v", TensorProto.UINT64, [None]), vi("i", TensorProto.INT64, [None])], (),
                        "dtype uint64 not supported"),
        "sqrt_int32": (helper.make_node("Sqrt", ["x"], ["y"]), [vi("x", TensorProto.INT32, [3])],
                       [vi("y", TensorProto.INT32, [3])], (), "dtype int32 not supported"),
    }
    import onnxruntime as ort
    for name, (node, ins, outs, doms, needle) in cases.items():
        p = _graph(tmp_path, name, node, ins, outs, domain_opsets=doms)
        with pytest.raises(Exception):
            so = ort.SessionOptions()
            so.log_severity_level = 4
            ort.InferenceSession(p, so, providers=["CPUExecutionProvider"])
        r = U.run([winml, "analyze", "-m", p, "--ep", "cpu", "-f", "json"])
        assert r.returncode == 1, U.describe(r)
        t = json.loads(r.stdout)["targets"][0]
        assert t["counts"]["unsupported"] == 1 and t["verdict"] == "unsupported", (name, t)
        assert needle in t["nodes"][0]["reason"], (name, t["nodes"])
    # and the same ops with a dtype that has a kernel are supported and do run
    p = _graph(tmp_path, "max_f32", helper.make_node("Max", ["x", "z"], ["y"]),
               [vi("x", TensorProto.FLOAT, [4]), vi("z", TensorProto.FLOAT, [4])], [vi("y", TensorProto.FLOAT, [4])])
    ort.InferenceSession(p, providers=["CPUExecutionProvider"])
    assert U.run([winml, "analyze", "-m", p, "--ep", "cpu", "-f", "json"]).returncode == 0


# ------------------------------------------------------------------ console view

def test_console_view(winml, ours):
    path = ours("qwen3", "int4")
    r = U.run([winml, "analyze", "-m", path, "--ep", "qnn", "--device", "npu"])
    assert r.returncode == 1, U.describe(r)
    out = r.stdout
    assert "\033[" not in out, "no colour when stdout is not a TTY"
    d = analyze(winml, path, "--ep", "qnn", "--device", "npu")
    t = d["targets"][0]
    c = t["counts"]
    line = next(x for x in out.splitlines() if x.startswith("qnn/npu "))
    assert line.split()[1:8] == [t["verdict"], str(c["supported"]), str(c["partial"]), str(c["unsupported"]),
                                 str(c["unknown"]), str(t["partitions"]["ep_subgraphs"]),
                                 str(t["partitions"]["cpu_fallback_nodes"])], line
    for o in t["ops"]:
        assert re.search(rf"^  {re.escape(o['op'])}( \[\S+\])?\s+{o['count']}\s+{o['level']}\b", out, re.M), o
    for comp in t["components"]:
        assert re.search(rf"^  {re.escape(comp['component'])}\s+{comp['nodes']}\s+{comp['level']}", out, re.M), comp
    assert "partitions (linear node order)" in out
    q = U.run([winml, "analyze", "-m", path, "--ep", "qnn", "--device", "npu", "-q"])
    assert q.returncode == 1 and len(q.stdout.splitlines()) == 3, U.describe(q)


# ------------------------------------------------------------------ per-op constraints of the EP rule files (v2 data)

def _target(winml, path, ep, device):
    r = U.run([winml, "analyze", "-m", path, "--ep", ep, "--device", device, "-f", "json"])
    assert r.returncode in (0, 1), U.describe(r)
    t = json.loads(r.stdout)["targets"][0]
    assert (t["ep"], t["device"]) == (ep, device)
    return t


def _node_reason(t, op):
    return " ".join(n["reason"] for n in t["nodes"] if n["op"] == op)


def _init_graph(tmp_path, name, node, inputs, outputs, inits, opset=17, domain_opsets=()):
    g = helper.make_graph([node], "g", inputs, outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), *domain_opsets])
    p = str(tmp_path / f"{name}.onnx")
    onnx.save(m, p)
    return p


def test_qnn_matmulnbits_gpu_only(winml, tmp_path):
    """matmulnbits_op_builder.cc: GPU backend only, bits 4, block_size 32, float32 A, constant B/scales."""
    vi = helper.make_tensor_value_info
    K, N = 64, 8
    B = helper.make_tensor("B", TensorProto.UINT8, [N, K // 32, 16], bytes(N * (K // 32) * 16), raw=True)
    S = helper.make_tensor("S", TensorProto.FLOAT, [N * (K // 32)], [0.5] * (N * (K // 32)))
    ms = (helper.make_opsetid("com.microsoft", 1),)

    def model(name, bits=4, block=32):
        node = helper.make_node("MatMulNBits", ["A", "B", "S"], ["Y"], domain="com.microsoft", K=K, N=N, bits=bits,
                                block_size=block, name=name)
        return _init_graph(tmp_path, name, node, [vi("A", TensorProto.FLOAT, [1, 4, K])],
                           [vi("Y", TensorProto.FLOAT, [1, 4, N])], [B, S], domain_opsets=ms)
    p = model("mmnb")
    npu, gpu = _target(winml, p, "qnn", "npu"), _target(winml, p, "qnn", "gpu")
    assert npu["counts"]["unsupported"] == 1 and "GPU only" in _node_reason(npu, "MatMulNBits"), npu["nodes"]
    assert gpu["counts"]["supported"] == 1 and gpu["verdict"] == "supported", gpu["nodes"]
    # bits=8 is outside the GPU builder's {4}
    g8 = _target(winml, model("mmnb8", bits=8), "qnn", "gpu")
    assert g8["counts"]["unsupported"] == 1 and "attribute bits=8 not allowed" in _node_reason(g8, "MatMulNBits")


def test_qnn_topk_needs_constant_k_and_opset10(winml, tmp_path):
    vi = helper.make_tensor_value_info
    x, v, i = vi("x", TensorProto.FLOAT, [2, 5]), vi("v", TensorProto.FLOAT, [2, 3]), vi("i", TensorProto.INT64, [2, 3])
    k_init = helper.make_tensor("k", TensorProto.INT64, [1], [3])
    const = _init_graph(tmp_path, "topk_const", helper.make_node("TopK", ["x", "k"], ["v", "i"]), [x], [v, i], [k_init])
    dyn = _graph(tmp_path, "topk_dyn", helper.make_node("TopK", ["x", "k"], ["v", "i"]),
                 [x, vi("k", TensorProto.INT64, [1])], [v, i])
    old = _graph(tmp_path, "topk_9", helper.make_node("TopK", ["x"], ["v", "i"], k=3), [x], [v, i], opset=9)
    smallest = _init_graph(tmp_path, "topk_small", helper.make_node("TopK", ["x", "k"], ["v", "i"], largest=0), [x],
                           [v, i], [k_init])
    for dev in ("npu", "gpu"):
        assert _target(winml, const, "qnn", dev)["counts"]["supported"] == 1
        t = _target(winml, dyn, "qnn", dev)
        assert t["counts"]["unsupported"] == 1 and "must be constant" in _node_reason(t, "TopK"), t["nodes"]
        t = _target(winml, old, "qnn", dev)  # the k-attribute form of opsets 1..9 is outside the supported range
        assert t["counts"]["unsupported"] == 1 and "TopK-1..9" in _node_reason(t, "TopK"), t["nodes"]
        t = _target(winml, smallest, "qnn", dev)
        assert t["counts"]["unsupported"] == 1 and "attribute largest=0 not allowed" in _node_reason(t, "TopK")


def test_qnn_pad_rank_and_mode(winml, tmp_path):
    vi = helper.make_tensor_value_info
    pads6 = helper.make_tensor("pads", TensorProto.INT64, [12], [0] * 12)
    x6 = vi("x", TensorProto.FLOAT, [1, 1, 1, 1, 1, 2])
    p = _init_graph(tmp_path, "pad6", helper.make_node("Pad", ["x", "pads"], ["y"]), [x6],
                    [vi("y", TensorProto.FLOAT, [1, 1, 1, 1, 1, 2])], [pads6])
    t = _target(winml, p, "qnn", "npu")
    assert t["counts"]["unsupported"] == 1 and "exceeds max_rank 5" in _node_reason(t, "Pad"), t["nodes"]
    pads2 = helper.make_tensor("pads", TensorProto.INT64, [4], [0, 1, 0, 1])
    x2, y2 = vi("x", TensorProto.FLOAT, [2, 3]), vi("y", TensorProto.FLOAT, [2, 5])
    ok = _init_graph(tmp_path, "pad_edge", helper.make_node("Pad", ["x", "pads"], ["y"], mode="edge"), [x2], [y2], [pads2])
    assert _target(winml, ok, "qnn", "npu")["counts"]["supported"] == 1
    wrap = _init_graph(tmp_path, "pad_wrap", helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap"), [x2], [y2],
                       [pads2], opset=19)
    t = _target(winml, wrap, "qnn", "npu")
    assert t["counts"]["unsupported"] == 1 and "attribute mode='wrap' not allowed" in _node_reason(t, "Pad")


def test_openvino_device_dtype_sets(winml, tmp_path):
    """data_ops.cc: the GPU type list has no uint32 (CPU's has; NPU uses CPU's); no device takes float64."""
    vi = helper.make_tensor_value_info
    u32 = _graph(tmp_path, "add_u32", helper.make_node("Add", ["a", "b"], ["c"]),
                 [vi("a", TensorProto.UINT32, [4]), vi("b", TensorProto.UINT32, [4])], [vi("c", TensorProto.UINT32, [4])])
    assert _target(winml, u32, "openvino", "cpu")["counts"]["supported"] == 1
    assert _target(winml, u32, "openvino", "npu")["counts"]["supported"] == 1
    t = _target(winml, u32, "openvino", "gpu")
    assert t["counts"]["unsupported"] == 1 and "input 0 dtype uint32 not supported" in _node_reason(t, "Add"), t
    f64 = _graph(tmp_path, "relu_f64", helper.make_node("Relu", ["a"], ["c"]), [vi("a", TensorProto.DOUBLE, [4])],
                 [vi("c", TensorProto.DOUBLE, [4])])
    for dev in ("cpu", "gpu", "npu"):
        t = _target(winml, f64, "openvino", dev)
        assert t["counts"]["unsupported"] == 1 and "dtype float64 not supported" in _node_reason(t, "Relu"), (dev, t)
    # ReduceMax rejects int8 on every device (op_list_ exclusion), takes int32
    rm = lambda n, dt: _graph(tmp_path, n, helper.make_node("ReduceMax", ["a"], ["c"], keepdims=0),
                              [vi("a", dt, [4])], [vi("c", dt, [])])
    t = _target(winml, rm("rmax_i8", TensorProto.INT8), "openvino", "cpu")
    assert t["counts"]["unsupported"] == 1 and "dtype int8 not supported" in _node_reason(t, "ReduceMax")
    assert _target(winml, rm("rmax_i32", TensorProto.INT32), "openvino", "cpu")["counts"]["supported"] == 1


def test_openvino_device_only_ops(winml, tmp_path):
    """GroupQueryAttention is listed for GPU only; Sinh for CPU only (so also NPU, which uses the CPU list)."""
    vi = helper.make_tensor_value_info
    p = _graph(tmp_path, "sinh", helper.make_node("Sinh", ["a"], ["c"]), [vi("a", TensorProto.FLOAT, [4])],
               [vi("c", TensorProto.FLOAT, [4])])
    assert _target(winml, p, "openvino", "cpu")["counts"]["supported"] == 1
    assert _target(winml, p, "openvino", "npu")["counts"]["supported"] == 1
    t = _target(winml, p, "openvino", "gpu")
    assert t["counts"]["unsupported"] == 1 and "CPU/NPU only" in _node_reason(t, "Sinh"), t["nodes"]


def test_qnn_htp_vs_gpu_builder_checks(winml, tmp_path):
    """onnxruntime-qnn@cee6c0d9: BatchNormalization's HTP dtype table has no float64 (GPU has no builder dtype check);
    ReduceProd is refused on HTP only; HTP has no rank-5 MaxPool; Upsample takes float32 only off HTP."""
    vi = helper.make_tensor_value_info
    D = TensorProto.DOUBLE
    prm = [helper.make_tensor(n, D, [2], [1.0, 1.0]) for n in ("s", "b", "m", "v")]
    bn = _init_graph(tmp_path, "bn_f64", helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"]),
                     [vi("x", D, [1, 2, 3, 3])], [vi("y", D, [1, 2, 3, 3])], prm)
    t = _target(winml, bn, "qnn", "npu")
    assert t["counts"]["unsupported"] == 1 and "input 0 dtype float64 not supported" in _node_reason(
        t, "BatchNormalization"), t["nodes"]
    assert _target(winml, bn, "qnn", "gpu")["counts"]["supported"] == 1
    rp = _graph(tmp_path, "rprod", helper.make_node("ReduceProd", ["a"], ["c"], keepdims=0),
                [vi("a", TensorProto.FLOAT, [4])], [vi("c", TensorProto.FLOAT, [])])
    t = _target(winml, rp, "qnn", "npu")
    assert t["counts"]["unsupported"] == 1 and "HTP" in _node_reason(t, "ReduceProd"), t["nodes"]
    assert _target(winml, rp, "qnn", "gpu")["counts"]["supported"] == 1
    mp = _graph(tmp_path, "maxpool3d", helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[1, 1, 1]),
                [vi("x", TensorProto.FLOAT, [1, 1, 2, 2, 2])], [vi("y", TensorProto.FLOAT, [1, 1, 2, 2, 2])])
    t = _target(winml, mp, "qnn", "npu")
    assert t["counts"]["unsupported"] == 1 and "exceeds max_rank 4" in _node_reason(t, "MaxPool"), t["nodes"]
    assert _target(winml, mp, "qnn", "gpu")["counts"]["supported"] == 1
    sc = helper.make_tensor("sc", TensorProto.FLOAT, [4], [1.0, 1.0, 2.0, 2.0])
    up = _init_graph(tmp_path, "up_f16", helper.make_node("Upsample", ["x", "sc"], ["y"]),
                     [vi("x", TensorProto.FLOAT16, [1, 1, 2, 2])], [vi("y", TensorProto.FLOAT16, [1, 1, 4, 4])], [sc],
                     opset=9)
    assert _target(winml, up, "qnn", "npu")["counts"]["supported"] == 1
    t = _target(winml, up, "qnn", "gpu")
    assert t["counts"]["unsupported"] == 1 and "input 0 dtype float16 not supported" in _node_reason(t, "Upsample")


def test_qnn_constant_inputs_and_attributes(winml, tmp_path):
    """cumsum_op_builder.cc: constant axis, reverse=0; slice_op_builder.cc: constant starts/ends;
    simple_op_builder.cc: ScatterND reduction none/add/mul."""
    vi = helper.make_tensor_value_info
    x, y = vi("x", TensorProto.FLOAT, [4]), vi("y", TensorProto.FLOAT, [4])
    ax = helper.make_tensor("ax", TensorProto.INT64, [], [0])
    ok = _init_graph(tmp_path, "cumsum", helper.make_node("CumSum", ["x", "ax"], ["y"]), [x], [y], [ax])
    rev = _init_graph(tmp_path, "cumsum_rev", helper.make_node("CumSum", ["x", "ax"], ["y"], reverse=1), [x], [y], [ax])
    dyn = _graph(tmp_path, "cumsum_dyn", helper.make_node("CumSum", ["x", "ax"], ["y"]),
                 [x, vi("ax", TensorProto.INT64, [])], [y])
    for dev in ("npu", "gpu"):
        assert _target(winml, ok, "qnn", dev)["counts"]["supported"] == 1
        t = _target(winml, rev, "qnn", dev)
        assert t["counts"]["unsupported"] == 1 and "attribute reverse=1 not allowed" in _node_reason(t, "CumSum")
        t = _target(winml, dyn, "qnn", dev)
        assert t["counts"]["unsupported"] == 1 and "must be constant" in _node_reason(t, "CumSum")
    sl = _graph(tmp_path, "slice_dyn", helper.make_node("Slice", ["x", "st", "en"], ["y"]),
                [x, vi("st", TensorProto.INT64, [1]), vi("en", TensorProto.INT64, [1])], [vi("y", TensorProto.FLOAT, [2])])
    t = _target(winml, sl, "qnn", "npu")
    assert t["counts"]["unsupported"] == 1 and "must be constant" in _node_reason(t, "Slice"), t["nodes"]
    idx = helper.make_tensor("i", TensorProto.INT64, [1, 1], [0])
    sn = _init_graph(tmp_path, "scatternd_max",
                     helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction="max"),
                     [x, vi("u", TensorProto.FLOAT, [1])], [y], [idx], opset=18)
    t = _target(winml, sn, "qnn", "gpu")
    assert t["counts"]["unsupported"] == 1 and "attribute reduction='max' not allowed" in _node_reason(t, "ScatterND")


def test_vitisai_ops_after_sin(winml, tmp_path):
    """Ryzen AI 1.7.0 table (amd/RyzenAI-SW docs/tools/ops_support.mdx): TopK, ThresholdedRelu and Xor are listed."""
    vi = helper.make_tensor_value_info
    x, v, i = vi("x", TensorProto.FLOAT, [2, 5]), vi("v", TensorProto.FLOAT, [2, 3]), vi("i", TensorProto.INT64, [2, 3])
    k = helper.make_tensor("k", TensorProto.INT64, [1], [3])
    tk = _init_graph(tmp_path, "vai_topk", helper.make_node("TopK", ["x", "k"], ["v", "i"]), [x], [v, i], [k])
    t = _target(winml, tk, "vitisai", "npu")
    assert t["counts"]["supported"] == 1 and t["verdict"] == "supported", t["nodes"]
    tr = _graph(tmp_path, "vai_trelu", helper.make_node("ThresholdedRelu", ["a"], ["c"]),
                [vi("a", TensorProto.FLOAT, [4])], [vi("c", TensorProto.FLOAT, [4])])
    assert _target(winml, tr, "vitisai", "npu")["counts"]["supported"] == 1
    xo = _graph(tmp_path, "vai_xor", helper.make_node("Xor", ["a", "b"], ["c"]),
                [vi("a", TensorProto.BOOL, [4]), vi("b", TensorProto.BOOL, [4])], [vi("c", TensorProto.BOOL, [4])])
    assert _target(winml, xo, "vitisai", "npu")["counts"]["supported"] == 1
