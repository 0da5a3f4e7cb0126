"""Engine vs onnxruntime on the com.microsoft (contrib) attention, rotary and quantized-matmul ops.

(a) single-node graphs built with onnx.helper for each op and its attribute / input variants,
    compared with onnxruntime's own CPU kernels (max abs diff <= 1e-4, float32);
(b) tiny random BERT and GPT-2 (with past key values) from transformers, exported with
    torch.onnx and fused by onnxruntime's transformers optimizer (Attention,
    SkipLayerNormalization, FastGelu / BiasGelu, MultiHeadAttention) - test_engine_contrib_fused.py;
(c) onnxruntime-genai model builder graphs (GroupQueryAttention, MatMulNBits,
    SkipSimplifiedLayerNormalization, RotaryEmbedding) - test_engine_contrib_genai.py.
Every engine run repeats twice and must be bit-identical (wm_run --repeat 2).
"""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from engine_oracle import MS, check, make_model, ort_run, q8_rows, wm_run

F = TP.FLOAT
RNG = np.random.default_rng(1234)


def rnd(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


# ------------------------------------------------------------------ com.microsoft Attention

def attention_case(tmp, build_dir, B=2, S=5, IN=16, N=2, sizes=None, mask=None, past=0, uni=0, bias=True,
                   attn_bias=False, scale=None, name="att"):
    dq, dk, dv = sizes or (IN, IN, IN)
    H = dq // N
    T = past + S
    attrs = {"num_heads": N, "unidirectional": uni}
    if sizes:
        attrs["qkv_hidden_sizes"] = list(sizes)
    if scale:
        attrs["scale"] = scale
    inits = [numpy_helper.from_array(rnd(IN, dq + dk + dv, scale=0.3), "W")]
    feeds = {"x": rnd(B, S, IN)}
    ins, io = ["x", "W"], [("x", F, [B, S, IN])]
    ins.append("bias" if bias else "")
    if bias:
        inits.append(numpy_helper.from_array(rnd(dq + dk + dv, scale=0.1), "bias"))
    if mask is not None:
        ins.append("mask")
        feeds["mask"] = mask
        io.append(("mask", TP.INT32, list(mask.shape)))
    else:
        ins.append("")
    outs = [("y", F, [B, S, dv])]
    node_outs = ["y"]
    if past:
        ins.append("past")
        feeds["past"] = rnd(2, B, N, past, H)
        io.append(("past", F, [2, B, N, past, H]))
    else:
        ins.append("")
    if past or uni:
        node_outs.append("present")
        outs.append(("present", F, [2, B, N, T, H]))
    if attn_bias:
        ins.append("ab")
        feeds["ab"] = rnd(1, N, S, T)
        io.append(("ab", F, [1, N, S, T]))
    while ins and ins[-1] == "":
        ins.pop()
    node = helper.make_node("Attention", ins, node_outs, domain=MS, **attrs)
    m = make_model([node], io, outs, inits)
    return check(build_dir, tmp, m, feeds, what=name)


def test_attention_basic(tmp_path, build_dir):
    attention_case(tmp_path, build_dir)


def test_attention_no_bias_scale(tmp_path, build_dir):
    attention_case(tmp_path, build_dir, bias=False, scale=0.3)


def test_attention_mask_1d_key_lengths(tmp_path, build_dir):
    attention_case(tmp_path, build_dir, mask=np.array([5, 3], np.int32))


def test_attention_mask_1d_end_start(tmp_path, build_dir):
    attention_case(tmp_path, build_dir, mask=np.array([5, 4, 0, 1], np.int32))


def test_attention_mask_2d_raw(tmp_path, build_dir):
    attention_case(tmp_path, build_dir, mask=np.array([[1, 1, 1, 0, 0], [0, 1, 1, 1, 1]], np.int32))


def test_attention_mask_3d_raw(tmp_path, build_dir):
    m = (RNG.random((2, 5, 5)) > 0.3).astype(np.int32)
    m[:, :, 0] = 1
    attention_case(tmp_path, build_dir, mask=m)


def test_attention_unidirectional_past_present(tmp_path, build_dir):
    attention_case(tmp_path, build_dir, past=4, uni=1, S=3)


def test_attention_unidirectional_past_raw_mask(tmp_path, build_dir):
    m = np.ones((2, 7), np.int32)
    m[1, :2] = 0
    attention_case(tmp_path, build_dir, past=4, uni=1, S=3, mask=m)


def test_attention_qkv_hidden_sizes(tmp_path, build_dir):
    attention_case(tmp_path, build_dir, sizes=(16, 16, 24))


def test_attention_bias_input(tmp_path, build_dir):
    attention_case(tmp_path, build_dir, attn_bias=True, uni=1)


# ------------------------------------------------------------------ MultiHeadAttention

def mha_case(tmp, build_dir, fmt="bsnh", B=2, S=4, L=6, N=2, H=8, Hv=8, bias=False, kpm=None, past=0, uni=0,
             attn_bias=False, name="mha", half=False):
    """half: every float input, initializer and output float16 (onnxruntime's float16 kernel the reference)."""
    D, Dv = N * H, N * Hv
    F = TP.FLOAT16 if half else TP.FLOAT
    feeds, io = {}, []
    ins = []
    if fmt == "qkv":
        L = S
        feeds["q"] = rnd(B, S, N, 3, H)
        io.append(("q", F, [B, S, N, 3, H]))
        ins = ["q", "", ""]
    elif fmt == "kv":
        feeds["q"], feeds["k"] = rnd(B, S, D), rnd(B, L, N, 2, H)
        io += [("q", F, [B, S, D]), ("k", F, [B, L, N, 2, H])]
        ins = ["q", "k", ""]
    elif fmt == "bnsh":
        feeds["q"], feeds["k"], feeds["v"] = rnd(B, S, D), rnd(B, N, L, H), rnd(B, N, L, Hv)
        io += [("q", F, [B, S, D]), ("k", F, [B, N, L, H]), ("v", F, [B, N, L, Hv])]
        ins = ["q", "k", "v"]
    else:
        feeds["q"], feeds["k"], feeds["v"] = rnd(B, S, D), rnd(B, L, D), rnd(B, L, Dv)
        io += [("q", F, [B, S, D]), ("k", F, [B, L, D]), ("v", F, [B, L, Dv])]
        ins = ["q", "k", "v"]
    T = past + L
    inits = []
    if bias:
        inits.append(numpy_helper.from_array(rnd(2 * D + Dv, scale=0.2), "bias"))
    ins.append("bias" if bias else "")
    if kpm is not None:
        feeds["kpm"] = kpm
        io.append(("kpm", TP.INT32, list(kpm.shape)))
    ins.append("kpm" if kpm is not None else "")
    if attn_bias:
        feeds["ab"] = rnd(B, 1, S, T)
        io.append(("ab", F, [B, 1, S, T]))
    ins.append("ab" if attn_bias else "")
    outs, node_outs = [("y", F, [B, S, Dv])], ["y"]
    if past:
        feeds["pk"], feeds["pv"] = rnd(B, N, past, H), rnd(B, N, past, Hv)
        io += [("pk", F, [B, N, past, H]), ("pv", F, [B, N, past, Hv])]
        ins += ["pk", "pv"]
        node_outs += ["present_k", "present_v"]
        outs += [("present_k", F, [B, N, T, H]), ("present_v", F, [B, N, T, Hv])]
    while ins[-1] == "":
        ins.pop()
    attrs = {"num_heads": N}
    if uni:
        attrs["unidirectional"] = 1
    node = helper.make_node("MultiHeadAttention", ins, node_outs, domain=MS, **attrs)
    m = make_model([node], io, outs, inits)
    ref = None
    if fmt in ("qkv", "kv"):  # onnxruntime's CPU kernel lacks packed layouts: it runs the unpacked equivalent
        rf = dict(feeds)
        if fmt == "qkv":
            p = rf.pop("q")
            rf["q"], rf["k"], rf["v"] = (np.ascontiguousarray(p[:, :, :, i].reshape(B, S, D)) for i in range(3))
            rio = [("q", F, [B, S, D]), ("k", F, [B, L, D]), ("v", F, [B, L, Dv])] + io[1:]
        else:
            p = rf.pop("k")
            rf["k"], rf["v"] = (np.ascontiguousarray(p[:, :, :, i].reshape(B, L, D)) for i in range(2))
            rio = [io[0], ("k", F, [B, L, D]), ("v", F, [B, L, Dv])] + io[2:]
        rins = ["q", "k", "v"] + ins[3:] if fmt == "qkv" else ["q", "k", "v"] + ins[3:]
        rnode = helper.make_node("MultiHeadAttention", rins, node_outs, domain=MS, **attrs)
        ref = (make_model([rnode], rio, outs, inits), rf)
    if half:
        feeds = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in feeds.items()}
        for i, t in enumerate(inits):
            inits[i] = numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name)
        m = make_model([node], io, outs, inits)
    return check(build_dir, tmp, m, feeds, what=name, ref=ref, atol=4e-3 if half else 1e-4)


def test_mha_bsnh_cross(tmp_path, build_dir):
    mha_case(tmp_path, build_dir)


@pytest.mark.parametrize("kw", [dict(), dict(bias=True, Hv=4), dict(attn_bias=True, kpm=np.array([[1, 1, 1, 1, 0, 0],
                                [1, 0, 1, 1, 1, 1]], np.int32)), dict(past=3, bias=True)],
                         ids=["plain", "bias", "masks", "past"])
def test_mha_float16(kw, tmp_path, build_dir):
    """float16 MultiHeadAttention (what fp16 builds of rotary encoders fuse, e.g. ModernBERT), computed in float32."""
    mha_case(tmp_path, build_dir, half=True, name="mha16", **kw)


def test_mha_bias_different_v_head(tmp_path, build_dir):
    mha_case(tmp_path, build_dir, bias=True, Hv=4)


def test_mha_key_padding_mask_1d(tmp_path, build_dir):
    mha_case(tmp_path, build_dir, kpm=np.array([6, 2], np.int32))


def test_mha_key_padding_mask_2d(tmp_path, build_dir):
    mha_case(tmp_path, build_dir, kpm=np.array([[1, 1, 1, 1, 0, 0], [1, 0, 1, 1, 1, 1]], np.int32))


def test_mha_packed_qkv(tmp_path, build_dir):
    mha_case(tmp_path, build_dir, fmt="qkv")


def test_mha_packed_kv(tmp_path, build_dir):
    mha_case(tmp_path, build_dir, fmt="kv")


def test_mha_bnsh_kv(tmp_path, build_dir):
    mha_case(tmp_path, build_dir, fmt="bnsh")


def test_mha_past_present_unidirectional(tmp_path, build_dir):
    mha_case(tmp_path, build_dir, S=3, L=3, past=5, uni=1, bias=True)


def test_mha_attention_bias(tmp_path, build_dir):
    mha_case(tmp_path, build_dir, attn_bias=True)


def _right_padded(B, L):
    return np.array([[1] * (L - b * L // 5) + [0] * (b * L // 5) for b in range(B)], np.int32)


@pytest.mark.parametrize("kw", [dict(B=3, S=300, L=300, N=2, H=64, Hv=64, kpm=_right_padded(3, 300)),
                                dict(B=2, S=40, L=600, N=2, H=80, Hv=80, kpm=_right_padded(2, 600)),
                                dict(B=2, S=200, L=200, N=2, H=64, Hv=64, past=100, uni=1, bias=True)],
                         ids=["padded-300", "padded-cross-600", "causal-past-300"])
def test_mha_masked_long(kw, tmp_path, build_dir):
    """Masked or causal rows over more than 256 keys (a cross-encoder's batch of right-padded pairs, a prefill after
    a past): the ops size the core's scratch from the shapes and set the masks after, so the masked path's larger
    tiles must fit in it (they once overran it: heap corruption, wrong logits)."""
    mha_case(tmp_path, build_dir, name="mha_masked_long", **kw)


# ------------------------------------------------------------------ GroupQueryAttention

def rope_caches(P, rot, base=10000.0):
    inv = 1.0 / base ** (np.arange(0, rot, 2, dtype=np.float64) / rot)
    ang = np.arange(P)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def gqa_case(tmp, build_dir, B=1, S=5, Nq=4, Nkv=2, H=16, past_buf=0, past_len=None, seqlens=None, total=None,
             packed=False, rotary=False, interleaved=False, rot=None, window=-1, softcap=0.0, scale=None,
             attn_bias=False, sink=False, smooth=False, rows=None, f16=False, threads=2, name="gqa"):
    feeds, io, inits = {}, [], []
    if packed:
        feeds["q"] = rnd(B, S, (Nq + 2 * Nkv) * H)
        io.append(("q", F, [B, S, (Nq + 2 * Nkv) * H]))
        ins = ["q", "", ""]
    else:
        feeds["q"], feeds["k"], feeds["v"] = rnd(B, S, Nq * H), rnd(B, S, Nkv * H), rnd(B, S, Nkv * H)
        io += [("q", F, [B, S, Nq * H]), ("k", F, [B, S, Nkv * H]), ("v", F, [B, S, Nkv * H])]
        ins = ["q", "k", "v"]
    feeds["pk"], feeds["pv"] = rnd(B, Nkv, past_buf, H), rnd(B, Nkv, past_buf, H)
    io += [("pk", F, [B, Nkv, past_buf, H]), ("pv", F, [B, Nkv, past_buf, H])]
    ins += ["pk", "pv"]
    if seqlens is None:
        pl = past_len if past_len is not None else 0
        seqlens = [pl + S - 1] * B
    total = total if total is not None else max(seqlens) + 1
    feeds["seqlens_k"] = np.array(seqlens, np.int32)
    feeds["total"] = np.array(total, np.int32)
    io += [("seqlens_k", TP.INT32, [B]), ("total", TP.INT32, [])]
    ins += ["seqlens_k", "total"]
    attrs = {"num_heads": Nq, "kv_num_heads": Nkv}
    if rotary:
        c, s_ = rope_caches(max(64, total, past_buf), rot or H)
        inits += [numpy_helper.from_array(c, "cos"), numpy_helper.from_array(s_, "sin")]
        ins += ["cos", "sin"]
        attrs["do_rotary"] = 1
        attrs["rotary_interleaved"] = int(interleaved)
    else:
        ins += ["", ""]
    ins.append("")  # position_ids
    T = max(total, past_buf)
    if attn_bias:
        feeds["ab"] = rnd(1, Nq, S, total)
        io.append(("ab", F, [1, Nq, S, total]))
    ins.append("ab" if attn_bias else "")
    if sink:
        inits.append(numpy_helper.from_array(rnd(Nq), "sink"))
    ins.append("sink" if sink else "")
    while ins[-1] == "":
        ins.pop()
    if window > 0:
        attrs["local_window_size"] = window
    if softcap:
        attrs["softcap"] = softcap
    if scale:
        attrs["scale"] = scale
    if smooth:
        attrs["smooth_softmax"] = 1
    node = helper.make_node("GroupQueryAttention", ins, ["y", "present_k", "present_v"], domain=MS, **attrs)
    outs = [("y", F, [B, S, Nq * H]), ("present_k", F, [B, Nkv, T, H]), ("present_v", F, [B, Nkv, T, H])]
    atol = 1e-4
    if f16:  # type T float16 throughout (the float16 KV cache of an fp16 decoder); both engines round
        feeds = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in feeds.items()}
        inits = [numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name) for t in inits]
        io = [(n, TP.FLOAT16 if t == F else t, sh) for n, t, sh in io]
        outs = [(n, TP.FLOAT16, sh) for n, _, sh in outs]
        atol = 4e-3  # onnxruntime rounds the rotated query to float16, the engine keeps it in float32
    m = make_model([node], io, outs, inits)
    return check(build_dir, tmp, m, feeds, rows=rows, atol=atol, threads=threads, what=name)


def test_gqa_prefill_empty_past(tmp_path, build_dir):
    gqa_case(tmp_path, build_dir)


def test_gqa_prefill_packed_rotary(tmp_path, build_dir):
    gqa_case(tmp_path, build_dir, packed=True, rotary=True, B=2)


def test_gqa_rotary_interleaved_partial(tmp_path, build_dir):
    gqa_case(tmp_path, build_dir, rotary=True, interleaved=True, rot=16, H=32)


def test_gqa_decode_max_length_buffer(tmp_path, build_dir):
    # past/present share one max-length buffer: 7 valid past rows of 16, one new token
    gqa_case(tmp_path, build_dir, S=1, past_buf=16, past_len=7, rotary=True)


def test_gqa_decode_ragged_batch(tmp_path, build_dir):
    gqa_case(tmp_path, build_dir, B=3, S=1, past_buf=12, seqlens=[5, 9, 3], total=10, rotary=True, packed=True)


def test_gqa_decode_grown_past(tmp_path, build_dir):
    # past holds exactly the past tokens (no shared buffer): present grows by one
    gqa_case(tmp_path, build_dir, S=1, past_buf=6, past_len=6, Nq=6, Nkv=2)


def test_gqa_continued_prompt(tmp_path, build_dir):
    gqa_case(tmp_path, build_dir, S=3, past_buf=10, past_len=4, rotary=True)


def test_gqa_local_window(tmp_path, build_dir):
    gqa_case(tmp_path, build_dir, S=9, window=3)
    gqa_case(tmp_path, build_dir, S=1, past_buf=12, past_len=10, window=4, name="gqa_window_decode")


def test_gqa_softcap_scale(tmp_path, build_dir):
    gqa_case(tmp_path, build_dir, softcap=0.5, scale=0.2)


def test_gqa_attention_bias(tmp_path, build_dir):
    gqa_case(tmp_path, build_dir, attn_bias=True)
    gqa_case(tmp_path, build_dir, attn_bias=True, S=1, past_buf=8, past_len=5, name="gqa_bias_decode")


def test_gqa_head_sink_and_smooth_softmax(tmp_path, build_dir):
    gqa_case(tmp_path, build_dir, sink=True, name="gqa_sink")
    gqa_case(tmp_path, build_dir, smooth=True, name="gqa_smooth")


def test_gqa_mqa_one_kv_head(tmp_path, build_dir):
    gqa_case(tmp_path, build_dir, Nq=8, Nkv=1, S=1, past_buf=9, past_len=8)


def test_gqa_padded_first_prompt(tmp_path, build_dir):
    # batch 2 right-padded prompt: only the valid query rows of entry 1 are defined
    gqa_case(tmp_path, build_dir, B=2, S=6, seqlens=[5, 3], total=6,
             rows={"y": (1, slice(0, 4)), "present_k": (1, slice(None), slice(0, 4)),
                   "present_v": (1, slice(None), slice(0, 4))})


def test_gqa_float16(tmp_path, build_dir):
    # the fp16 decoder's path: float16 query/keys/values, KV cache, rotary tables, bias and sinks
    gqa_case(tmp_path, build_dir, S=1, past_buf=40, past_len=33, rotary=True, Nq=14, Nkv=2, H=64, f16=True,
             name="gqa16_decode")
    gqa_case(tmp_path, build_dir, B=3, S=1, past_buf=12, seqlens=[5, 9, 3], total=10, rotary=True, packed=True,
             f16=True, name="gqa16_ragged")
    gqa_case(tmp_path, build_dir, S=20, past_buf=32, rotary=True, f16=True, name="gqa16_prefill")
    gqa_case(tmp_path, build_dir, S=11, past_buf=24, past_len=6, rotary=True, interleaved=True, rot=16, H=32,
             f16=True, name="gqa16_continued")
    gqa_case(tmp_path, build_dir, S=6, past_buf=8, past_len=2, Nq=6, Nkv=2, attn_bias=True, sink=True, f16=True,
             name="gqa16_bias_sink")


def test_gqa_long_decode_split_keys(tmp_path, build_dir):
    # one query over hundreds of keys: the keys split in chunks of 128 (more work units than batch x kv heads),
    # each chunk's softmax combined by its log-sum-exp; partial last chunks, ragged rows (one below the split,
    # one whose later chunks are empty), a local window (leading chunks excluded), mask values, float16, MQA
    gqa_case(tmp_path, build_dir, S=1, past_buf=700, past_len=650, rotary=True, Nq=14, Nkv=2, H=64,
             threads=5, name="gqa_split")
    gqa_case(tmp_path, build_dir, B=3, S=1, past_buf=640, seqlens=[600, 130, 299], total=601, rotary=True,
             packed=True, threads=3, name="gqa_split_ragged")
    gqa_case(tmp_path, build_dir, S=1, past_buf=520, past_len=515, window=200, threads=4, name="gqa_split_window")
    gqa_case(tmp_path, build_dir, S=1, past_buf=300, past_len=290, attn_bias=True, Nq=8, Nkv=1, threads=6,
             name="gqa_split_bias_mqa")
    gqa_case(tmp_path, build_dir, S=1, past_buf=400, past_len=333, rotary=True, Nq=14, Nkv=2, H=64, f16=True,
             threads=3, name="gqa16_split")


def test_decode_split_keys_thread_independent(tmp_path, build_dir):
    # the chunks follow the keys alone: 1, 2 and 7 threads give the same bits (MHA decode over 500 past keys)
    import onnx
    from engine_oracle import wm_run
    B, N, H, P = 1, 4, 16, 500
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v", "", "", "", "pk", "pv"], ["y", "ok", "ov"],
                            domain=MS, num_heads=N, unidirectional=1)
    io = [("q", F, [B, 1, N * H]), ("k", F, [B, 1, N * H]), ("v", F, [B, 1, N * H]), ("pk", F, [B, N, P, H]),
          ("pv", F, [B, N, P, H])]
    m = make_model([node], io, [("y", F, None), ("ok", F, None), ("ov", F, None)])
    feeds = {"q": rnd(B, 1, N * H), "k": rnd(B, 1, N * H), "v": rnd(B, 1, N * H), "pk": rnd(B, N, P, H),
             "pv": rnd(B, N, P, H)}
    check(build_dir, tmp_path, m, feeds, what="mha_split")
    path = str(tmp_path / "mha_split.onnx")
    onnx.save(m, path)
    got = [wm_run(build_dir, path, feeds, tmp_path, threads=t, tag=f"t{t}")["y"] for t in (1, 2, 7)]
    assert np.array_equal(got[0], got[1]) and np.array_equal(got[0], got[2])


def test_onnx_attention_split_masked_chunks(tmp_path, build_dir):
    # ONNX Attention (opset 23), one query over 600 keys: chunks whose keys the boolean mask drops entirely
    # (their scores -inf) weigh nothing next to the kept ones, as in onnxruntime; a row with every key masked is
    # NaN split or not (the ONNX reference's softmax of -inf; onnxruntime differs there, so it is checked alone)
    import onnx
    from engine_oracle import wm_run

    def model(T, lo, hi):
        q, k, v = rnd(1, 4, 1, 16), rnd(1, 2, T, 16), rnd(1, 2, T, 16)
        m = np.zeros((1, 1, 1, T), bool)
        m[..., lo:hi] = True
        io = [("q", F, [1, 4, 1, 16]), ("k", F, [1, 2, T, 16]), ("v", F, [1, 2, T, 16]), ("m", TP.BOOL, [1, 1, 1, T])]
        node = helper.make_node("Attention", ["q", "k", "v", "m"], ["y"])
        return make_model([node], io, [("y", F, None)], opset=23, ms=False), {"q": q, "k": k, "v": v, "m": m}

    for lo, hi in ((300, 600), (130, 140), (0, 1)):
        check(build_dir, tmp_path, *model(600, lo, hi), threads=3, what=f"att23_split_{lo}_{hi}")
    for T in (600, 100):  # split and whole-row paths
        m, feeds = model(T, 0, 0)
        path = str(tmp_path / f"att23_none_{T}.onnx")
        onnx.save(m, path)
        assert np.isnan(wm_run(build_dir, path, feeds, tmp_path, threads=3, tag=f"none{T}")["y"]).all()


# ------------------------------------------------------------------ com.microsoft RotaryEmbedding

def rope_case(tmp, build_dir, rank=3, B=2, S=5, N=3, H=16, interleaved=0, pos="2d", rot=0, name="rope"):
    P = 32
    c, s_ = rope_caches(P, rot or H)
    if rank == 3:
        x = rnd(B, S, N * H)
    else:
        x = rnd(B, N, S, H)
    feeds = {"x": x}
    if pos == "2d":
        feeds["pos"] = RNG.integers(0, P, (B, S)).astype(np.int64)
    else:
        feeds["pos"] = np.array([7], np.int64)
    attrs = {"interleaved": interleaved}
    if rank == 3 or rot:
        attrs["num_heads"] = N
    if rot:
        attrs["rotary_embedding_dim"] = rot
    node = helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=MS, **attrs)
    m = make_model([node], [("x", F, list(x.shape)), ("pos", TP.INT64, list(feeds["pos"].shape))],
                   [("y", F, list(x.shape))],
                   [numpy_helper.from_array(c, "cos"), numpy_helper.from_array(s_, "sin")])
    return check(build_dir, tmp, m, feeds, what=name)


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_3d_position_ids(tmp_path, build_dir, interleaved):
    rope_case(tmp_path, build_dir, interleaved=interleaved)


def test_rotary_scalar_start_position(tmp_path, build_dir):
    rope_case(tmp_path, build_dir, pos="start")


def test_rotary_4d(tmp_path, build_dir):
    rope_case(tmp_path, build_dir, rank=4)


def test_rotary_partial_dim(tmp_path, build_dir):
    rope_case(tmp_path, build_dir, rot=8, interleaved=1)


# ------------------------------------------------------------------ MatMulNBits

def pack_bits(codes, bits):
    """codes (..., n) of `bits` bits -> bytes, low bits first along the last axis."""
    per = 8 // bits
    c = codes.reshape(*codes.shape[:-1], -1, per).astype(np.uint16)
    out = np.zeros(c.shape[:-1], np.uint16)
    for i in range(per):
        out |= c[..., i] << (i * bits)
    return out.astype(np.uint8)


def nbits_case(tmp, build_dir, M=3, K=64, N=40, block=32, bits=4, zp="packed", bias=False, a_rank=2, fp16=False,
               g_idx=False, name="nbits", accuracy=0, atol=None):
    kb = (K + block - 1) // block
    codes = RNG.integers(0, 1 << bits, (N, kb * block))
    codes[:, K:] = 0
    B = pack_bits(codes.reshape(N, kb, block), bits)
    ft, nt = (TP.FLOAT16, np.float16) if fp16 else (F, np.float32)
    scales = (RNG.random((N, kb)) * 0.1 + 0.01).astype(nt)
    inits = [numpy_helper.from_array(B, "B"), numpy_helper.from_array(scales.reshape(-1), "scales")]
    ins = ["A", "B", "scales"]
    if zp == "packed":
        z = RNG.integers(0, 1 << bits, (N, ((kb * bits + 7) // 8) * (8 // bits)))
        inits.append(numpy_helper.from_array(pack_bits(z, bits).reshape(-1), "zp"))
        ins.append("zp")
    elif zp == "float":
        inits.append(numpy_helper.from_array((RNG.random((N, kb)) * (1 << bits)).astype(nt).reshape(-1), "zp"))
        ins.append("zp")
    else:
        ins.append("")
    if g_idx:
        inits.append(numpy_helper.from_array((np.arange(K) // block).astype(np.int32), "g_idx"))
        ins.append("g_idx")
    else:
        ins.append("")
    if bias:
        inits.append(numpy_helper.from_array(rnd(N).astype(nt), "bias"))
        ins.append("bias")
    while ins[-1] == "":
        ins.pop()
    shape = [M, K] if a_rank == 2 else [2, M, K]
    feeds = {"A": rnd(*shape).astype(nt)}
    node = helper.make_node("MatMulNBits", ins, ["Y"], domain=MS, K=K, N=N, bits=bits, block_size=block,
                            accuracy_level=accuracy)
    m = make_model([node], [("A", ft, shape)], [("Y", ft, shape[:-1] + [N])], inits)
    return check(build_dir, tmp, m, feeds, atol=atol or (2e-2 if fp16 else 1e-4), what=name)


@pytest.mark.parametrize("block", [16, 32, 64, 128, 256])
@pytest.mark.parametrize("zp", ["packed", "none"])
def test_matmulnbits_4bit_blocks(tmp_path, build_dir, block, zp):
    nbits_case(tmp_path, build_dir, K=256 + 16, block=block, zp=zp, name=f"nbits_{block}_{zp}")


def test_matmulnbits_decode_shares_thread_independent(tmp_path, build_dir):
    # a decode GEMV (M = 1, int8 activations) is split into claimed shares by weight bytes, up to 4 per thread:
    # every column must come out the same bits whatever the thread count (1, 2, 3), and match onnxruntime
    import onnx
    from engine_oracle import compare, ort_run, wm_run
    K, N, block = 896, 1200, 32
    kb = K // block
    B = pack_bits(RNG.integers(0, 16, (N, kb, block)), 4)
    scales = (RNG.random((N, kb)) * 0.1 + 0.01).astype(np.float32)
    node = helper.make_node("MatMulNBits", ["A", "B", "scales"], ["Y"], domain=MS, K=K, N=N, bits=4,
                            block_size=block, accuracy_level=4)
    m = make_model([node], [("A", TP.FLOAT, [1, K])], [("Y", TP.FLOAT, [1, N])],
                   [numpy_helper.from_array(B, "B"), numpy_helper.from_array(scales.reshape(-1), "scales")])
    path = str(tmp_path / "nbits_decode.onnx")
    onnx.save(m, path)
    feeds = {"A": rnd(1, K).astype(np.float32)}
    got = {t: wm_run(build_dir, path, feeds, tmp_path, threads=t, tag=f"t{t}")["Y"] for t in (1, 2, 3)}
    assert np.array_equal(got[1], got[2]) and np.array_equal(got[1], got[3]), "decode MatMulNBits differs by thread count"
    # both sides quantize A to int8 per block the same way (measured max abs diff ~1e-5)
    compare(ort_run(path, feeds), {"Y": got[2]}, atol=1e-3, what="nbits_decode")


def _one_engine_node(build_dir, path, monkeypatch, op):
    """The session runs path's graph with exactly one node of engine op `op` (its WM_PROFILE line says so)."""
    import oracle_util as U
    monkeypatch.setenv("WM_PROFILE", "50")
    r = U.run([U.binary(build_dir, "winml"), "perf", "-m", path, "--iterations", "1", "--warmup", "0", "-f", "json"])
    monkeypatch.delenv("WM_PROFILE")
    assert r.returncode == 0, U.describe(r)
    lines = [ln for ln in r.stderr.splitlines() if ln.split()[:1] == [op]]
    assert lines and "(1 nodes)" in lines[0], r.stderr


def _parts_alone(build_dir, tmp_path, got, feeds, singles):
    """Each (name, model) of singles, one node alone, gives output Y_name bit for bit as in got."""
    import onnx
    from engine_oracle import wm_run
    for name, one in singles:
        p1 = str(tmp_path / f"one_{name}.onnx")
        onnx.save(one, p1)
        alone = wm_run(build_dir, p1, feeds, tmp_path, threads=2, tag=f"one_{name}")[f"Y_{name}"]
        assert np.array_equal(got[f"Y_{name}"], alone), f"{name}: grouped output differs from its node alone"


@pytest.mark.parametrize("fp16,accuracy,M", [(False, 4, 1), (False, 4, 5), (False, 0, 1), (True, 4, 1)])
def test_matmulnbits_group(tmp_path, build_dir, monkeypatch, fp16, accuracy, M):
    # MatMulNBits nodes on the same input (q/k/v-like parts, one of N = 10, not a multiple of 4) run as one engine
    # MatMulNBitsGroup: every output bit for bit the one its node gives alone, and onnxruntime's within tolerance;
    # a node on another input, or with zero points, stays as it is
    import onnx
    from engine_oracle import compare, ort_run, wm_run
    K, block = 96, 32
    kb = K // block
    ft, nt = (TP.FLOAT16, np.float16) if fp16 else (F, np.float32)
    parts = {"q": 64, "k": 10, "v": 24, "other": 16, "zp": 8}
    inits, nodes, outs = [], [], []
    for name, N in parts.items():
        B = pack_bits(RNG.integers(0, 16, (N, kb, block)), 4)
        inits += [numpy_helper.from_array(B, f"B_{name}"),
                  numpy_helper.from_array((RNG.random((N, kb)) * 0.1 + 0.01).astype(nt).reshape(-1), f"s_{name}")]
        ins = ["A2" if name == "other" else "A", f"B_{name}", f"s_{name}"]
        if name == "zp":
            inits.append(numpy_helper.from_array(pack_bits(RNG.integers(0, 16, (N, 4)), 4).reshape(-1), "z_zp"))
            ins.append("z_zp")
        nodes.append(helper.make_node("MatMulNBits", ins, [f"Y_{name}"], domain=MS, K=K, N=N, bits=4,
                                      block_size=block, accuracy_level=accuracy))
        outs.append((f"Y_{name}", ft, [M, N]))
    feeds = {"A": rnd(M, K).astype(nt), "A2": rnd(M, K).astype(nt)}
    m = make_model(nodes, [("A", ft, [M, K]), ("A2", ft, [M, K])], outs, inits)
    path = str(tmp_path / "group.onnx")
    onnx.save(m, path)
    _one_engine_node(build_dir, path, monkeypatch, "MatMulNBitsGroup")
    got = wm_run(build_dir, path, feeds, tmp_path, threads=2, tag="group")
    _parts_alone(build_dir, tmp_path, got, feeds, [  # each node alone: the plain MatMulNBits
        (name, make_model([nodes[i]], [("A", ft, [M, K]), ("A2", ft, [M, K])], [(f"Y_{name}", ft, [M, N])],
                          [t for t in inits if t.name.endswith("_" + name)])) for i, (name, N) in enumerate(parts.items())])
    compare(ort_run(path, feeds), got, atol=2e-2 if fp16 else (1e-3 if accuracy == 4 else 1e-4), what="nbits_group")


@pytest.mark.parametrize("M,ns", [(1, (64, 10, 24)), (5, (64, 10, 24)), (1, (64, 128, 24))])
def test_matmul_fp16_group(tmp_path, build_dir, monkeypatch, M, ns):
    # float16 MatMuls by constant weights on the same input run as one engine MatMulGroup: each output bit for bit
    # the one its MatMul gives alone, and onnxruntime's within float16 tolerance; one on another input stays apart.
    # (64, 128, 24): parts before the last fill whole 64-column panels and are packed in place; else side by side
    import onnx
    from engine_oracle import compare, ort_run, wm_run
    K = 96
    parts = {"q": ns[0], "k": ns[1], "v": ns[2], "other": 16}
    H = TP.FLOAT16
    inits = [numpy_helper.from_array((rnd(K, N) * 0.2).astype(np.float16), f"W_{name}") for name, N in parts.items()]
    nodes = [helper.make_node("MatMul", ["A2" if name == "other" else "A", f"W_{name}"], [f"Y_{name}"])
             for name in parts]
    ins = [("A", H, [M, K]), ("A2", H, [M, K])]
    m = make_model(nodes, ins, [(f"Y_{name}", H, [M, N]) for name, N in parts.items()], inits, ms=False)
    path = str(tmp_path / "mmgroup.onnx")
    onnx.save(m, path)
    _one_engine_node(build_dir, path, monkeypatch, "MatMulGroup")
    feeds = {"A": rnd(M, K).astype(np.float16), "A2": rnd(M, K).astype(np.float16)}
    got = wm_run(build_dir, path, feeds, tmp_path, threads=2, tag="mmgroup")
    _parts_alone(build_dir, tmp_path, got, feeds, [
        (name, make_model([nodes[i]], ins, [(f"Y_{name}", H, [M, N])], [inits[i]], ms=False))
        for i, (name, N) in enumerate(parts.items())])
    compare(ort_run(path, feeds), got, atol=2e-2, what="matmul_group")


def test_matmulnbits_8bit(tmp_path, build_dir):
    nbits_case(tmp_path, build_dir, bits=8, zp="packed", name="nbits8")
    nbits_case(tmp_path, build_dir, bits=8, zp="none", name="nbits8_nozp")


def test_matmulnbits_float_zero_points_bias_3d(tmp_path, build_dir):
    nbits_case(tmp_path, build_dir, zp="float", bias=True, a_rank=3, K=96)


def test_matmulnbits_trivial_g_idx(tmp_path, build_dir):
    # onnxruntime 1.32 ignores packed uint8 zero points when g_idx is given (it uses 8): no zero points here
    nbits_case(tmp_path, build_dir, g_idx=True, zp="none")


def test_matmulnbits_fp16(tmp_path, build_dir):
    nbits_case(tmp_path, build_dir, fp16=True, bias=True)


@pytest.mark.parametrize("fp16", [False, True])
@pytest.mark.parametrize("M", [1, 5])
def test_matmulnbits_int8_activations(tmp_path, build_dir, fp16, M):
    # accuracy_level 4, block 32, default zero point: the path whose weights a session packs on AVX-512 (float32 or
    # float16 scales; 33 blocks: a full 16-block super-group and a partial one); both sides quantize A to int8
    nbits_case(tmp_path, build_dir, M=M, K=1056, N=70, block=32, zp="none", fp16=fp16, accuracy=4, atol=3e-2,
               name=f"nbits_acc4_{'f16' if fp16 else 'f32'}_{M}")


def test_matmulnbits_decode_row(tmp_path, build_dir):
    nbits_case(tmp_path, build_dir, M=1, K=512, N=96, block=32)


@pytest.mark.parametrize("a_t,b_t,bzp", [(TP.UINT8, TP.INT8, "none"), (TP.UINT8, TP.UINT8, "col"),
                                         (TP.INT8, TP.INT8, "scalar"), (TP.INT8, TP.UINT8, "col")])
def test_matmulinteger_constant_b_packed(tmp_path, build_dir, a_t, b_t, bzp):
    # a constant B (an int8 build's weights) runs on the kernel table's packed integer GEMM: exact int32 sums, for
    # rows from 1 (decode) to 70 over 3-D A, per-tensor A zero point, B zero point per column. The reference is the
    # exact integer product: onnxruntime's u8 x s8 kernel saturates int16 pair sums where MLAS takes its AVX2 path
    # (Zen 4 here: 150 of 154 values wrong at M = 1), which says nothing of ours; it is checked where it is exact.
    np_of = {TP.UINT8: np.uint8, TP.INT8: np.int8}
    lo = {TP.UINT8: 0, TP.INT8: -128}
    K, N = 200, 77
    B = RNG.integers(lo[b_t], lo[b_t] + 256, (K, N)).astype(np_of[b_t])
    inits = [numpy_helper.from_array(B, "B"), numpy_helper.from_array(np.array(lo[a_t] + 100, np_of[a_t]), "az")]
    ins = ["A", "B", "az"]
    if bzp == "col":
        inits.append(numpy_helper.from_array(RNG.integers(lo[b_t], lo[b_t] + 256, N).astype(np_of[b_t]), "bz"))
        ins.append("bz")
    elif bzp == "scalar":
        inits.append(numpy_helper.from_array(np.array(lo[b_t] + 3, np_of[b_t]), "bz"))
        ins.append("bz")
    bz = {"none": 0, "scalar": lo[b_t] + 3}.get(bzp)
    for M in (1, 70):
        A = RNG.integers(lo[a_t], lo[a_t] + 256, (2, M, K)).astype(np_of[a_t])
        node = helper.make_node("MatMulInteger", ins, ["Y"])
        m = make_model([node], [("A", a_t, [2, M, K])], [("Y", TP.INT32, [2, M, N])], inits, opset=17, ms=False)
        path = tmp_path / f"mi_{a_t}_{b_t}_{bzp}_{M}.onnx"
        onnx.save(m, path)
        zb = numpy_helper.to_array(inits[2]).astype(np.int64) if bzp == "col" else bz
        exact = (A.astype(np.int64) - (lo[a_t] + 100)) @ (B.astype(np.int64) - zb)
        got = wm_run(build_dir, str(path), {"A": A}, tmp_path, tag=path.stem)["Y"]
        assert got.dtype == np.int32 and np.array_equal(got, exact), f"M={M}: {int(np.sum(got != exact))} differ"
        ort = ort_run(str(path), {"A": A})["Y"]
        if np.array_equal(ort, exact):  # where onnxruntime's kernel is exact, both agree bit for bit
            assert np.array_equal(got, ort)


def test_matmulinteger_dynamic_activations(tmp_path, build_dir):
    # the int8 build's pattern: DynamicQuantizeLinear gives A and its zero point at run time, B is constant
    K, N = 96, 50
    B = RNG.integers(-128, 128, (K, N)).astype(np.int8)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("MatMulInteger", ["xq", "B"], ["Y"])]
    m = make_model(nodes, [("x", F, [3, 1, K])], [("Y", TP.INT32, [3, 1, N]), ("xq", TP.UINT8, [3, 1, K])],
                   [numpy_helper.from_array(B, "B")], opset=17, ms=False)
    path = tmp_path / "mi_dynamic.onnx"
    onnx.save(m, path)
    feeds = {"x": rnd(3, 1, K)}
    ref, got = ort_run(str(path), feeds), wm_run(build_dir, str(path), feeds, tmp_path, tag="mi_dynamic")
    # the quantized activations as onnxruntime's, and their product with B exact (onnxruntime's own u8 x s8 product
    # saturates where MLAS takes its AVX2 path; compared with it only where it is exact)
    assert np.array_equal(got["xq"], ref["xq"])
    exact = ref["xq"].astype(np.int64) @ B.astype(np.int64)
    assert np.array_equal(got["Y"], exact), f"{int(np.sum(got['Y'] != exact))} differ"
    if np.array_equal(ref["Y"], exact):
        assert np.array_equal(got["Y"], ref["Y"])


def dqmm_inits(b_t, scale, zp, bias, K, N):
    np_of, lo = {TP.UINT8: np.uint8, TP.INT8: np.int8}[b_t], {TP.UINT8: 0, TP.INT8: -128}[b_t]
    W = RNG.integers(lo, lo + 256, (K, N)).astype(np_of)
    ws = (RNG.random(N if scale == "col" else ()) * 0.02 + 0.001).astype(np.float32)
    inits, ins = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(ws, "ws")], ["W", "ws"]
    if zp != "none":
        inits.append(numpy_helper.from_array(RNG.integers(lo, lo + 256, N if zp == "col" else ()).astype(np_of), "wz"))
    ins.append("wz" if zp != "none" else "")
    if bias:
        inits.append(numpy_helper.from_array(rnd(N), "bias"))
    ins.append("bias" if bias else "")
    while ins and not ins[-1]:
        ins.pop()
    return inits, ins


def ort_dql(x):
    """DynamicQuantizeLinear of x by onnxruntime alone (exact on every CPU): (xq, x_scale, x_zero_point)."""
    m = make_model([helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"])], [("x", F, list(x.shape))],
                   [("xq", TP.UINT8, list(x.shape)), ("xs", F, []), ("xz", TP.UINT8, [])], opset=17, ms=False)
    import onnxruntime as ort
    r = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    return r[0], np.float32(r[1]), int(r[2])


def exact_dq_matmul(x, inits, ins, sfx=""):
    """DynamicQuantizeMatMul / the int8 chain computed exactly: A quantized as onnxruntime's DynamicQuantizeLinear,
    the integer product in int64, then float32 (int32 sum) * (a_scale * w_scale) [+ bias], as the ops do in order.
    onnxruntime's own u8 x s8 product saturates int16 pair sums where MLAS takes its AVX2 path (Zen 4 here), so it
    is not the reference for the integer part."""
    t = {i.name[:len(i.name) - len(sfx)]: numpy_helper.to_array(i) for i in inits}
    xq, xs, xz = ort_dql(x)
    W = t["W"].astype(np.int64)
    wz = t["wz"].astype(np.int64) if "wz" in ins else 0
    acc = (xq.astype(np.int64) - xz) @ (W - wz)
    y = acc.astype(np.int32).astype(np.float32) * (xs * t["ws"].astype(np.float32))
    return y + t["bias"] if "bias" in ins else y


@pytest.mark.parametrize("b_t,scale,zp,bias", [(TP.INT8, "col", "none", False), (TP.INT8, "scalar", "scalar", True),
                                              (TP.UINT8, "col", "col", True), (TP.UINT8, "scalar", "none", False)])
def test_dynamic_quantize_matmul(tmp_path, build_dir, b_t, scale, zp, bias):
    # com.microsoft DynamicQuantizeMatMul: A quantized to uint8 as DynamicQuantizeLinear does, the exact product,
    # times a_scale * b_scale, plus bias; rows from 1 (decode) to 70, K past one kernel block
    K, N = 600, 70
    inits, ins = dqmm_inits(b_t, scale, zp, bias, K, N)
    node = helper.make_node("DynamicQuantizeMatMul", ["A", "W"] + ins[1:], ["Y"], domain=MS)
    for M in (1, 70):
        m = make_model([node], [("A", F, [2, M, K])], [("Y", F, [2, M, N])], inits, opset=17)
        path = tmp_path / f"dqmm_{b_t}_{scale}_{zp}_{bias}_{M}.onnx"
        onnx.save(m, path)
        A = rnd(2, M, K)
        got = wm_run(build_dir, str(path), {"A": A}, tmp_path, tag=path.stem)["Y"]
        np.testing.assert_allclose(got, exact_dq_matmul(A, inits, ins), rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("bias", [False, True])
def test_dynamic_quant_chain_fuses_bit_exact(tmp_path, build_dir, bias):
    # an int8 build's product, DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(a_scale * w_scale) [-> Add]:
    # `winml optimize` (and the engine's session) make it one DynamicQuantizeMatMul, whose values are those of
    # onnxruntime running the four or five nodes (graph optimizations off), bit for bit; two products share the
    # DynamicQuantizeLinear
    import onnx
    import onnxruntime as ort

    import oracle_util as U
    K, N = 300, 40
    inits, ins = dqmm_inits(TP.INT8, "col", "col", bias, K, N)
    inits2, _ = dqmm_inits(TP.INT8, "scalar", "none", False, K, N)
    for t in inits2:
        t.name += "2"
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"])]
    for sfx, wz, b in (("", "wz", bias), ("2", None, False)):
        nodes += [helper.make_node("MatMulInteger", ["xq", "W" + sfx, "xz"] + ([wz] if wz else []), ["mi" + sfx]),
                  helper.make_node("Cast", ["mi" + sfx], ["mf" + sfx], to=TP.FLOAT),
                  helper.make_node("Mul", ["xs", "ws" + sfx], ["sc" + sfx]),
                  helper.make_node("Mul", ["mf" + sfx, "sc" + sfx], ["y" + sfx if not b else "p" + sfx])]
        if b:
            nodes.append(helper.make_node("Add", ["p" + sfx, "bias"], ["y" + sfx]))
    m = make_model(nodes, [("x", F, [1, 5, K])], [("y", F, [1, 5, N]), ("y2", F, [1, 5, N])], inits + inits2,
                   opset=17, ms=False)
    src, opt = str(tmp_path / "chain.onnx"), str(tmp_path / "chain_opt.onnx")
    onnx.save(m, src)
    r = U.run([U.binary(build_dir, "winml"), "optimize", "-m", src, "-o", opt, "-q"])
    assert r.returncode == 0, U.describe(r)
    ops = [n.op_type for n in onnx.load(opt).graph.node]
    assert ops == ["DynamicQuantizeMatMul"] * 2, ops
    feeds = {"x": rnd(1, 5, K) * 3}
    ref = [exact_dq_matmul(feeds["x"], inits, ins), exact_dq_matmul(feeds["x"], inits2, ["W", "ws"], sfx="2")]
    for path in (src, opt):  # the engine fuses the plain chain itself: the chain's values, bit for bit
        got = wm_run(build_dir, path, feeds, tmp_path, tag=os.path.basename(path)[:-5])
        for want, name in zip(ref, ("y", "y2")):
            np.testing.assert_array_equal(got[name], want)
    # onnxruntime runs the fused file too, and agrees with its own unfused chain (its integer product may saturate:
    # see exact_dq_matmul; where it does not, it equals the exact one)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    chain = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"]).run(None, feeds)
    fused = ort.InferenceSession(opt, providers=["CPUExecutionProvider"]).run(None, feeds)
    for want, have in zip(chain, fused):
        np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ bad input: one clear error, no crash

def engine_error(build_dir, tmp, model, feeds, tag):
    import os

    import onnx
    from safetensors.numpy import save_file

    import oracle_util as U
    path = os.path.join(str(tmp), f"{tag}.onnx")
    onnx.save(model, path)
    inp = os.path.join(str(tmp), f"{tag}_in.safetensors")
    save_file({k: np.array(v, order="C", copy=True) for k, v in feeds.items()}, inp)
    r = U.run([U.binary(build_dir, "wm_run"), path, inp, os.path.join(str(tmp), f"{tag}_out.safetensors")])
    assert not U.crashed(r) and r.returncode == 2, U.describe(r)
    return r.stderr


def test_gqa_seqlens_out_of_range_is_an_input_error(tmp_path, build_dir):
    B, S, Nq, Nkv, H = 1, 1, 2, 1, 16
    node = helper.make_node("GroupQueryAttention", ["q", "k", "v", "pk", "pv", "seqlens_k", "total"],
                            ["y", "pko", "pvo"], domain=MS, num_heads=Nq, kv_num_heads=Nkv)
    io = [("q", F, [B, S, Nq * H]), ("k", F, [B, S, Nkv * H]), ("v", F, [B, S, Nkv * H]),
          ("pk", F, [B, Nkv, 4, H]), ("pv", F, [B, Nkv, 4, H]), ("seqlens_k", TP.INT32, [B]), ("total", TP.INT32, [])]
    m = make_model([node], io, [("y", F, None), ("pko", F, None), ("pvo", F, None)])
    feeds = {"q": rnd(B, S, Nq * H), "k": rnd(B, S, Nkv * H), "v": rnd(B, S, Nkv * H), "pk": rnd(B, Nkv, 4, H),
             "pv": rnd(B, Nkv, 4, H), "seqlens_k": np.array([9], np.int32), "total": np.array(5, np.int32)}
    err = engine_error(build_dir, tmp_path, m, feeds, "gqa_bad")
    assert "GroupQueryAttention" in err and "seqlens_k" in err, err


def test_unsupported_variants_refused_at_creation(tmp_path, build_dir):
    # MatMulNBits with act-order g_idx and QuantizeLinear to int4: refused with the reason, exit 2
    K, N, block = 32, 4, 16
    inits = [numpy_helper.from_array(np.zeros((N, 2, 8), np.uint8), "B"),
             numpy_helper.from_array(np.ones(N * 2, np.float32), "s"),
             numpy_helper.from_array(np.arange(K, dtype=np.int32) % 2, "g")]
    node = helper.make_node("MatMulNBits", ["A", "B", "s", "", "g"], ["Y"], domain=MS, K=K, N=N, bits=4, block_size=block)
    err = engine_error(build_dir, tmp_path, make_model([node], [("A", F, [1, K])], [("Y", F, None)], inits),
                       {"A": rnd(1, K)}, "nbits_gidx")
    assert "g_idx" in err, err
    q = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], output_dtype=TP.INT4)
    err = engine_error(build_dir, tmp_path, make_model([q], [("x", F, [4])], [("y", TP.INT4, None)],
                                                       [numpy_helper.from_array(np.float32(0.5), "s")], ms=False),
                       {"x": rnd(4)}, "q_int4")
    assert "int4" in err, err


# ---------------------------------------------------------------- MatMulNBits with zero points (asymmetric int4)

@pytest.mark.parametrize("kernels", ["", "avx2", "generic"])
def test_matmulnbits_zero_points_every_m(tmp_path, asan_dir, monkeypatch, kernels):
    """Asymmetric int4 at accuracy_level 4 (an asymmetric int4 build): the session sized the op's workspace as if
    the weights had no zero points (one slice for the int8 path) while the run took the float path with a slice per
    thread, and corrupted the heap from 32 rows on. Each kernel table, M across the int8 / float boundary, on the
    ASan+UBSan build (the overrun is silent in the plain one), against onnxruntime."""
    if kernels:
        monkeypatch.setenv("WM_KERNELS", kernels)
    K, N, bs = 256, 96, 32
    rng = np.random.default_rng(5)
    kb = K // bs
    B = rng.integers(0, 256, (N, kb, bs // 2), dtype=np.uint8)
    S = (rng.random((N, kb), dtype=np.float32) * 0.02 + 0.01).astype(np.float32)
    Z = rng.integers(0, 256, (N, (kb + 1) // 2), dtype=np.uint8)
    node = helper.make_node("MatMulNBits", ["A", "B", "S", "Z"], ["C"], domain=MS, K=K, N=N, bits=4, block_size=bs,
                            accuracy_level=4)
    inits = [numpy_helper.from_array(B, "B"), numpy_helper.from_array(S, "S"), numpy_helper.from_array(Z, "Z")]
    model = make_model([node], [("A", TP.FLOAT, [None, K])], [("C", TP.FLOAT, [None, N])], inits)
    for M in (1, 31, 32, 70):
        A = (rng.random((M, K), dtype=np.float32) - 0.5) * 2
        # int8 activations (onnxruntime) against the float path from 32 rows on: a relative 2e-2 as in test_kernels_ort
        check(asan_dir, tmp_path, model, {"A": A}, atol=2e-2 * 8, what=f"nbits_zp_{kernels or 'best'}_M{M}")


@pytest.mark.parametrize("kernels", ["", "avx2", "generic"])
def test_matmulnbits_float_zero_points_accuracy4(tmp_path, asan_dir, monkeypatch, kernels):
    """Float zero points (a carried GGUF's Q4_1 / Q4_K blocks, an int4 build with quant.rtn_float_zero_points) at
    accuracy_level 4: below 32 rows our engine takes int8 activations for them as for uint8 ones (the zero point
    folded as -zp * sum(q), llama.cpp's Q4_1 x Q8_1 arithmetic), where onnxruntime keeps float activations (its int8
    path takes uint8 zero points only); the reference there is onnxruntime at level 0 on the activations quantized
    by numpy (q8_rows), from 32 rows on onnxruntime itself (float on both sides). Each kernel table, M on both
    sides of the int8 / float boundary, on the ASan+UBSan build (the workspace is sized before the zero points are
    bound)."""
    if kernels:
        monkeypatch.setenv("WM_KERNELS", kernels)
    K, N, bs = 256, 96, 32
    rng = np.random.default_rng(6)
    kb = K // bs
    B = rng.integers(0, 256, (N, kb, bs // 2), dtype=np.uint8)
    S = (rng.random((N, kb), dtype=np.float32) * 0.02 + 0.01).astype(np.float32)
    Z = (rng.random((N, kb), dtype=np.float32) * 15).astype(np.float32)
    inits = [numpy_helper.from_array(B, "B"), numpy_helper.from_array(S, "S"), numpy_helper.from_array(Z, "Z")]
    model, level0 = (make_model([helper.make_node("MatMulNBits", ["A", "B", "S", "Z"], ["C"], domain=MS, K=K, N=N,
                                                  bits=4, block_size=bs, accuracy_level=acc)],
                                [("A", TP.FLOAT, [None, K])], [("C", TP.FLOAT, [None, N])], inits) for acc in (4, 0))
    for M in (1, 5, 31, 32, 70):
        A = (rng.random((M, K), dtype=np.float32) - 0.5) * 2
        ref = (level0, {"A": q8_rows(A, bs)}) if M < 32 else None
        # outputs ~1: the same products in float32 on both sides agree to ~1e-6 (the int8 activations against
        # float ones differ by ~1e-2)
        check(asan_dir, tmp_path, model, {"A": A}, atol=2e-4, ref=ref, what=f"nbits_fzp_{kernels or 'best'}_M{M}")


@pytest.mark.parametrize("S,N,H,fmt", [(1500, 1, 64, "bsnh"), (577, 2, 80, "qkv")], ids=["whisper-1500", "577-head80"])
def test_mha_long_self_attention(S, N, H, fmt, tmp_path, build_dir):
    """Whole-sequence attention over several key blocks (the tiled path's online softmax) vs onnxruntime."""
    mha_case(tmp_path, build_dir, fmt=fmt, B=1, S=S, L=S, N=N, H=H, Hv=H, name="mha_long")
