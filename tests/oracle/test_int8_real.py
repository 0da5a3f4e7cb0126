"""int8 builds on real weights compute the same in onnxruntime as in our engine (issue 31).

SmolLM2-135M-Instruct (real_weights: the GGUF dequantized by transformers into a float checkpoint) is built as fp32
and as int8 two ways a user gets one: `winml build -p int8` and `winml quantize -p int8` of the fp32 model (dynamic:
DynamicQuantizeLinear + MatMulInteger). Both engines run each file on the same 256 tokens of the Debian fortunes
text (one forward pass, no cache); perplexity is computed from the logits in float64.

What used to be wrong: both int8 files multiplied uint8 activations with full-range int8 weights in integer kernels,
and onnxruntime's u8s8 kernels on x86 without VNNI (vpmaddubsw) add pairs of products in int16, which such weights
overflow: our engine gave perplexity 62.6 and onnxruntime 2.3e7 on the same build. Now `build -p int8` writes
MatMulNBits bits 8 with float activations (as for encoders), and `quantize -p int8` gives int8 weights 7 bits by
default (reduce_range, as onnxruntime's quantizer offers), which no int16 pair sum can overflow.
"""
import json
import os

import numpy as np
import pytest

import onnx  # the oracle venv has these: missing is a failure, not a skip
import onnxruntime  # noqa: F401
import transformers

import oracle_util as U  # noqa: E402
import real_weights as RW  # noqa: E402
from engine_util import engine_run, ort_run  # noqa: E402

FORTUNES = "/usr/share/games/fortunes/fortunes"
N_TOK = 256
LAYERS, KV_HEADS, HEAD_DIM = 30, 3, 64


def text_ids(tok, n=N_TOK):
    if not os.path.exists(FORTUNES):
        pytest.fail(f"{FORTUNES} not found (Debian package fortunes)", pytrace=False)
    with open(FORTUNES, encoding="utf-8", errors="replace") as f:
        ids = tok(f.read()[:8 * n], add_special_tokens=False).input_ids[:n]
    assert len(ids) == n
    return ids


def feeds(ids):
    x = np.asarray([ids], dtype=np.int64)
    f = {"input_ids": x, "attention_mask": np.ones_like(x), "position_ids": np.arange(x.shape[1])[None]}
    for i in range(LAYERS):
        for kv in ("key", "value"):
            f[f"past_key_values.{i}.{kv}"] = np.zeros((1, KV_HEADS, 0, HEAD_DIM), np.float32)
    return f


def perplexity(logits, ids):
    """exp(mean NLL) of ids[1:] given the logits of positions [0, n-1), in float64."""
    z = logits[0, :-1].astype(np.float64)
    z = z - z.max(-1, keepdims=True)
    lse = np.log(np.exp(z).sum(-1))
    nll = lse - z[np.arange(len(ids) - 1), ids[1:]]
    return float(np.exp(nll.mean()))


def model_feeds(path, f):
    """The feeds path's graph takes (a build may drop position_ids)."""
    names = {i.name for i in onnx.load(str(path), load_external_data=False).graph.input}
    return {k: v for k, v in f.items() if k in names}


@pytest.fixture(scope="module")
def smol(request, winml):
    hf = RW.hf_from_gguf(RW.smollm2_gguf())
    d = U.scratch(request, "smollm2_int8")
    r = U.run([winml, "build", "-m", hf, "-o", d / "fp32", "-p", "fp32", "-q"], timeout=900)
    assert r.returncode == 0, U.describe(r)
    ids = text_ids(transformers.AutoTokenizer.from_pretrained(hf))
    return hf, d, ids


def _logits(build_dir, path, ids, tmp):
    f = model_feeds(path, feeds(ids))
    mine = engine_run(build_dir, path, f, tmp)[0]["logits"]
    ort = ort_run(path, f)["logits"]
    return mine, ort


@pytest.fixture(scope="module")
def fp32_ppl(smol, build_dir, tmp_path_factory):
    _, d, ids = smol
    mine, ort = _logits(build_dir, d / "fp32" / "model.onnx", ids, tmp_path_factory.mktemp("fp32run"))
    return perplexity(mine, ids), perplexity(ort, ids)


def _int8_build(winml, hf, d):
    out = d / "int8"
    r = U.run([winml, "build", "-m", hf, "-o", out, "-p", "int8", "-q"], timeout=900)
    assert r.returncode == 0, U.describe(r)
    return out / "model.onnx"


def _int8_quantize(winml, hf, d):
    out = d / "q8" / "model.onnx"
    out.parent.mkdir(exist_ok=True)
    r = U.run([winml, "quantize", "-m", d / "fp32" / "model.onnx", "-o", out, "-p", "int8", "-q", "-f", "json"],
              timeout=900)
    assert r.returncode == 0, U.describe(r)
    return out


# name, how the file is made, bound on perplexity / fp32's in both engines (None: only the engines' agreement:
# dynamic int8's one uint8 range per activation tensor costs SmolLM2 about 1.65x by itself)
VARIANTS = [("build -p int8", _int8_build, 1.03), ("quantize -p int8", _int8_quantize, None)]


@pytest.mark.parametrize("name,make,bound", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_int8_same_in_onnxruntime(smol, fp32_ppl, winml, build_dir, tmp_path, name, make, bound):
    hf, d, ids = smol
    path = make(winml, hf, d)
    ops = {n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node}
    mine, ort = _logits(build_dir, path, ids, tmp_path)
    p_mine, p_ort = perplexity(mine, ids), perplexity(ort, ids)
    diff = float(np.abs(mine.astype(np.float64) - ort).max())
    fp = fp32_ppl[0]
    U.note(f"SmolLM2 {name} ({', '.join(sorted(ops & {'MatMulNBits', 'MatMulInteger', 'DynamicQuantizeMatMul'}))}),"
           f" {N_TOK} fortunes tokens: perplexity winml {p_mine:.4f}, onnxruntime {p_ort:.4f} (fp32: winml {fp:.4f},"
           f" onnxruntime {fp32_ppl[1]:.4f}); logits max abs diff winml vs onnxruntime {diff:.4f}")
    assert abs(fp32_ppl[1] / fp - 1) < 1e-3
    assert abs(p_ort / p_mine - 1) < 0.01, f"onnxruntime perplexity {p_ort} vs winml {p_mine}"
    assert diff < 0.5, f"logits differ by {diff}"
    top_mine, top_ort = mine[0].argmax(-1), ort[0].argmax(-1)
    assert (top_mine == top_ort).mean() >= 0.97
    if bound is not None:
        assert p_mine <= bound * fp and p_ort <= bound * fp, (p_mine, p_ort, fp)
