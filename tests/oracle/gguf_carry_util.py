"""What the GGUF oracle tests share about carried builds (`winml build -m FILE.gguf`, precision gguf) and
perplexity: the carried MatMulNBits / GatherBlockQuantized weights dequantized by numpy from the model's
initializers, the exactness check against transformers' dequantized checkpoint, perplexity by transformers and by
onnxruntime over the same windows, and the ids of a prompt as the greedy checks encode it.
"""
import json
import os

import numpy as np
import pytest

FORTUNES = "/usr/share/games/fortunes/literature"
WINDOW, STRIDE = 544, 272  # perplexity windows longer than Gemma 3's 512-token sliding window
# onnxruntime vs our engine on a carried build with float32 activations (WM_NBITS_I15=0: the same weights, two
# float32 implementations; measured 7e-5 on SmolLM2). A carried build says accuracy_level 2, where our engine's
# decode rows (below 8) take 15-bit activations; the greedy and perplexity tests check that default path against
# transformers, these parity checks the graph's weights and ops with the float32 path
CARRIED_LOGITS_TOL = 2e-4


def fortunes_text(n_chars):
    """The perplexity tests' text: the first n_chars of the fortunes literature file (Debian package fortunes)."""
    if not os.path.exists(FORTUNES):
        pytest.fail(f"{FORTUNES} not found (Debian package fortunes)", pytrace=False)
    with open(FORTUNES, encoding="utf-8", errors="replace") as f:
        return f.read()[:n_chars]


def perplexity_windows(n, window, stride):
    """(begin, end, targets) of each window as the transformers perplexity guide walks a text of n tokens."""
    out, prev_end = [], 0
    for begin in range(0, n, stride):
        end = min(begin + window, n)
        out.append((begin, end, end - prev_end))
        prev_end = end
        if end == n:
            break
    return out


def hf_perplexity(model, ids, window, stride):
    """Perplexity of ids (a [1, n] tensor) by transformers (labels of each window's new tokens); (ppl, scored)."""
    import torch
    nll, count = 0.0, 0
    for begin, end, trg in perplexity_windows(ids.size(1), window, stride):
        inp = ids[:, begin:end]
        tgt = inp.clone()
        tgt[:, :-trg] = -100
        with torch.no_grad():
            loss = model(inp, labels=tgt).loss
        k = int((tgt[:, 1:] != -100).sum())
        nll += float(loss) * k
        count += k
    return float(np.exp(nll / count)), count


def ort_perplexity(model_path, ids, window, stride, L, kvh, hd):
    """The same perplexity with onnxruntime running a decoder build (one prefill per window, empty cache)."""
    import onnxruntime as ort
    s = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    names = {i.name for i in s.get_inputs()}
    nll, count = 0.0, 0
    for begin, end, trg in perplexity_windows(len(ids), window, stride):
        x = np.asarray([ids[begin:end]], np.int64)
        T = x.shape[1]
        feeds = {"input_ids": x, "attention_mask": np.ones_like(x), "position_ids": np.arange(T)[None]}
        for i in range(L):
            for kv in ("key", "value"):
                feeds[f"past_key_values.{i}.{kv}"] = np.zeros((1, kvh, 0, hd), np.float32)
        logits = s.run(["logits"], {k: v for k, v in feeds.items() if k in names})[0][0].astype(np.float64)
        lp = logits - logits.max(-1, keepdims=True)
        lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
        first = max(T - trg, 1)  # the scored targets: the window's new tokens (not its first token)
        for t in range(first, T):
            nll -= lp[t - 1, x[0, t]]
            count += 1
    return float(np.exp(nll / count)), count


def load_initializers(model_path):
    import onnx
    from onnx import numpy_helper
    m = onnx.load(str(model_path), load_external_data=True)
    return m.graph, {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def _attrs(node):
    return {a.name: a.i for a in node.attribute}


def _dequant(codes_u8, scales, zps, N, K, bits, bs):
    """(code - zp) * scale in float32, as the MatMulNBits definition reads its inputs; [N, K]."""
    nblk = K // bs
    q = codes_u8.reshape(N, -1)
    codes = np.stack([q & 15, q >> 4], -1).reshape(N, -1) if bits == 4 else q
    codes = codes[:, :nblk * bs].reshape(N, nblk, bs).astype(np.float32)
    sc = scales.reshape(N, nblk).astype(np.float32)
    if zps is None:
        zp = np.full((N, nblk), float(1 << (bits - 1)), np.float32)
    elif zps.dtype == np.uint8:
        z = zps.reshape(N, -1)
        zp = (np.stack([z & 15, z >> 4], -1).reshape(N, -1) if bits == 4 else z)[:, :nblk].astype(np.float32)
    else:
        zp = zps.reshape(N, nblk).astype(np.float32)
    return ((codes - zp[..., None]) * sc[..., None]).reshape(N, K), zps is None or zps.dtype == np.uint8


def carried_weights(graph, inits, weight):
    """Each op reading carried weight `weight` as blocks: [(op, dequantized [N, K], integer zero points)]."""
    produced = {o: n for n in graph.node for o in n.output}
    out = []
    for n in graph.node:
        if n.op_type == "MatMulNBits" and n.input[1].startswith(weight + "_Q"):
            a = _attrs(n)
            z = inits[n.input[3]] if len(n.input) > 3 and n.input[3] else None
            out.append(("MatMulNBits",) + _dequant(inits[n.input[1]], inits[n.input[2]], z, a["N"], a["K"],
                                                   a["bits"], a["block_size"]))
        if n.op_type == "GatherBlockQuantized":
            data = n.input[0]
            if data not in inits and data in produced and produced[data].op_type == "Reshape":
                data = produced[data].input[0]  # a tied table: the Gemm's codes reshaped
            if not data.startswith(weight + "_Q"):
                continue
            a = _attrs(n)
            sc = inits[n.input[2]]
            z = inits[n.input[3]] if len(n.input) > 3 and n.input[3] else None
            N, nblk = sc.shape[0], sc.size // sc.shape[0]
            out.append(("GatherBlockQuantized",) + _dequant(inits[data], sc, z, N, nblk * a["block_size"],
                                                            a["bits"], a["block_size"]))
    return out


def check_carried_exact(out, manifest, hf_dir, hf_name, per_type=3):
    """For per_type carried tensors of each GGUF type (and every op reading them), the blocks dequantized by numpy
    against transformers' dequantized weight: equal with integer zero points, within 1e-6 of the largest |w| with
    float ones. Returns {gguf_type: (tensors checked, worst relative difference)}."""
    from safetensors.numpy import load_file
    ref = load_file(os.path.join(hf_dir, "model.safetensors"))
    quant = next(s for s in manifest["stages"] if s["name"] == "quant")
    graph, inits = load_initializers(os.path.join(out, "model.onnx"))
    picked = {}
    for t in quant["carried"]["tensors"]:
        if t["result"] == "carried" and len(picked.setdefault(t["gguf_type"], [])) < per_type \
                and t["tensor"] not in picked[t["gguf_type"]]:
            picked[t["gguf_type"]].append(t["tensor"])
    report = {}
    for gt, names in picked.items():
        worst = 0.0
        for w in names:
            want = ref[hf_name(w)].astype(np.float32)
            seen = carried_weights(graph, inits, w)
            assert seen, f"{w}: no MatMulNBits / GatherBlockQuantized reads it"
            for op, got, integer in seen:
                assert got.shape == want.shape, (w, op, got.shape, want.shape)
                rel = float(np.abs(got - want).max() / np.abs(want).max())
                worst = max(worst, rel)
                if integer:
                    assert np.array_equal(got, want), f"{w} ({gt}, {op}): differs by {rel:.3g} of max |w|"
                else:
                    assert rel <= 1e-6, f"{w} ({gt}, {op}): differs by {rel:.3g} of max |w|"
        report[gt] = (len(names), worst)
    return report


def decoder_sizes(out):
    d = json.load(open(os.path.join(out, "genai_config.json")))["model"]["decoder"]
    return d["num_hidden_layers"], d["num_key_value_heads"], d["head_size"]
