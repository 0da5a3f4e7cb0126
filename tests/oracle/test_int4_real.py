"""int4 from float weights keeps the quality (issue 31): SmolLM2-135M real weights, 256 tokens of fortunes.

- `winml build -p int4` (the default recipe: asymmetric blocks of 32 with uint8 zero points, onnxruntime's fast
  MatMulNBits path; the token table / tied head and llama.cpp Q4_K_M's attn_v / ffn_down layers at 8 bits) within
  BOUND_DEFAULT of fp32's perplexity, which the old default (blocks of 128, symmetric, no 8-bit table) exceeds;
  onnxruntime computes the same file to nearly the same perplexity (see the test);
- float zero points (quant.rtn_float_zero_points, opt-in: onnxruntime runs them ~10x slower per decode step,
  bench/bench_int4_decode.py) within BOUND_FLOAT_ZP: SmolLM2's float weights come from a Q4_1 GGUF (blocks of 32
  with a float offset), which float zero points represent exactly; bench/int4_quality.py --noise measures the fit
  off that grid;
- importance-weighted fitting with a calibration text (quant.rtn_importance, opt-in) within BOUND_IMPORTANCE and
  below the default;
GPTQ (recipe quant.rtn_gptq) is opt-in and has no quality bound here: on SmolLM2 with a few thousand calibration
tokens it fits the calibration text and loses on other text (bench/int4_quality.py, the report of issue 31);
tests/oracle/test_gptq.py checks its arithmetic against a numpy reference and its builds.
Perplexity is computed from the logits of one forward pass (test_int8_real's helpers).
"""
import json
import os

import pytest

import oracle_util as U  # noqa: E402
import real_weights as RW  # noqa: E402
from test_int8_real import _logits, float_activation_copy, fp32_ppl, perplexity, smol  # noqa: F401  (fixtures shared)

BOUND_DEFAULT = 1.06  # uint8 zero points: 1.042x on 3000 bytes (bench/int4_quality.py); issue 31's goal is 1.02
BOUND_FLOAT_ZP = 1.02
BOUND_IMPORTANCE = 1.02  # quant.rtn_importance with a calibration text: 1.0238x on 3000 bytes, 1.0059x on these 256
OLD_DEFAULT = {"rtn_block_size": 128, "symmetric": True, "rtn_float_zero_points": False, "rtn_8bit_weights": [],
               "rtn_8bit_layer_weights": []}


def _recipe(winml, hf, path, **quant):
    r = U.run([winml, "config", "-m", hf, "-p", "int4"])
    assert r.returncode == 0, U.describe(r)
    rec = json.loads(r.stdout)
    rec["quant"].update(quant)
    path.write_text(json.dumps(rec))
    return rec


def _build(winml, hf, out, recipe=None):
    argv = [winml, "build", "-m", hf, "-o", out, "-q", "-f", "json"]
    argv += ["-c", recipe] if recipe else ["-p", "int4"]
    r = U.run(argv, timeout=1800)
    assert r.returncode == 0, U.describe(r)
    return out / "model.onnx"


def _ppl(build_dir, path, ids, tmp):
    mine, ort = _logits(build_dir, path, ids, tmp)
    return perplexity(mine, ids), perplexity(ort, ids)


def test_int4_default_recipe(smol, winml):
    """The default int4 recipe says what it does: asymmetric blocks of 32 with uint8 zero points (float ones are
    opt-in), the 8-bit table."""
    hf, _, _ = smol
    r = U.run([winml, "config", "-m", hf, "-p", "int4"])
    assert r.returncode == 0, U.describe(r)
    q = json.loads(r.stdout)["quant"]
    assert q["rtn_block_size"] == 32 and q["symmetric"] is False and q["rtn_float_zero_points"] is False
    assert q["rtn_8bit_weights"] == ["embed_tokens.", "lm_head.", "shared.", "embed_positions."]
    assert q["rtn_8bit_layer_weights"] == ["attn.v_proj.", "mlp.down_proj."]


def _zero_point_types(path):
    """{bits: set of zero-point element types} over the model's MatMulNBits nodes (None: no zero points)."""
    import onnx
    m = onnx.load(str(path), load_external_data=False)
    inits = {t.name: t.data_type for t in m.graph.initializer}
    out = {}
    for n in m.graph.node:
        if n.op_type == "MatMulNBits":
            bits = next(a.i for a in n.attribute if a.name == "bits")
            zp = n.input[3] if len(n.input) > 3 and n.input[3] else None
            out.setdefault(bits, set()).add(inits[zp] if zp else None)
    return out


def test_int4_default_quality(smol, fp32_ppl, winml, build_dir, tmp_path):  # noqa: F811
    hf, d, ids = smol
    fp = fp32_ppl[0]
    new = _build(winml, hf, d / "int4")
    import onnx
    # every 4-bit and 8-bit MatMulNBits with uint8 zero points: onnxruntime's fast path (float ones have none)
    assert _zero_point_types(new) == {4: {onnx.TensorProto.UINT8}, 8: {onnx.TensorProto.UINT8}}
    p_new, p_new_ort = _ppl(build_dir, new, ids, tmp_path)
    _recipe(winml, hf, tmp_path / "old.json", **OLD_DEFAULT)
    old = _build(winml, hf, d / "int4_old", tmp_path / "old.json")
    p_old, _ = _ppl(build_dir, old, ids, tmp_path)
    U.note(f"SmolLM2 int4, {len(ids)} fortunes tokens: perplexity fp32 {fp:.4f}; default {p_new:.4f} "
           f"({p_new / fp:.4f}x; onnxruntime {p_new_ort:.4f}); old default (b128 sym RTN) {p_old:.4f} "
           f"({p_old / fp:.4f}x)")
    assert p_new <= BOUND_DEFAULT * fp, (p_new, fp)
    assert p_old > BOUND_DEFAULT * fp  # the bound says something the old default did not reach
    _recipe(winml, hf, tmp_path / "fzp.json", rtn_float_zero_points=True)
    fzp = _build(winml, hf, d / "int4_fzp", tmp_path / "fzp.json")
    assert _zero_point_types(fzp)[4] == {onnx.TensorProto.FLOAT}
    p_fzp, _ = _ppl(build_dir, fzp, ids, tmp_path)
    U.note(f"SmolLM2 int4 with float zero points (opt-in): {p_fzp:.4f} ({p_fzp / fp:.4f}x)")
    assert p_fzp <= BOUND_FLOAT_ZP * fp, (p_fzp, fp)
    # 0.33% apart measured (39.652 vs 39.522; with float zero points 0.3%). The cause: at accuracy_level 4
    # onnxruntime quantizes MatMulNBits' activations to int8 at every row count (node by node on Gemma 3's int4
    # build: v_proj of layer 0, 64 rows, 7.5e-3 of max |y| from the exact dequantized product) while our engine
    # keeps float activations from 32 rows on (2.8e-7). Both meet accuracy_level 4 (a minimum): the bound is 0.5%.
    assert abs(p_new_ort / p_new - 1) < 0.005, f"onnxruntime {p_new_ort} vs winml {p_new}"
    # the cause pinned: the same file with accuracy_level taken off every MatMulNBits (float activations in both
    # engines) agrees to 1e-5, so no node differs otherwise (with it off the 8-bit nodes only, 0.8% apart: the
    # 4-bit nodes' uint8 zero points take onnxruntime's int8 path too)
    m = onnx.load(str(new), load_external_data=False)
    f32 = float_activation_copy(m, new)
    p_f, p_f_ort = _ppl(build_dir, f32, ids, tmp_path)
    U.note(f"SmolLM2 int4 default without accuracy_level: winml {p_f:.6f}, onnxruntime {p_f_ort:.6f}")
    assert abs(p_f_ort / p_f - 1) < 1e-5, f"onnxruntime {p_f_ort} vs winml {p_f}"


@pytest.mark.parametrize("model", ["gemma3", "smollm2"])
def test_bench_peers_score_eval_ids(model, winml, tmp_path):
    """bench/int4_quality.py scores onnxruntime on the ids `winml eval` scores (the tokenizer's special tokens
    added: Gemma's <bos> first). It once encoded without them: onnxruntime then read Gemma 3 without <bos>
    (perplexity 48.5 against winml eval's 26.6 on the same int4 file, 26.72 on the same ids)."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                    "bench"))
    import int4_quality as Q
    hf = RW.hf_from_gguf(RW.gemma3_gguf() if model == "gemma3" else RW.smollm2_gguf())
    Q.text_file(tmp_path / "text.txt", 3000)
    text = (tmp_path / "text.txt").read_text(encoding="utf-8")
    r = U.run([winml, "tokenize", "-m", hf, "--text", text, "-f", "json"])  # winml eval's encoding of the text
    assert r.returncode == 0, U.describe(r)
    want = json.loads(r.stdout)["ids"]
    assert Q.eval_ids(hf, tmp_path / "text.txt") == want
    if model == "gemma3":
        assert want[0] == 2  # <bos>


@pytest.mark.parametrize("n", [2, 511, 512, 513, 857, 3000])
def test_bench_windows_score_each_token_once(n):
    """bench/int4_quality.py's windows score every token but the first exactly once, as `winml eval` does
    (scored_tokens = tokens - 1). They once skipped each later window's first new token: onnxruntime's Gemma 3 int4
    perplexity came out 26.720 on 854 tokens where winml eval scored 856 (26.542 on the same 856)."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                    "bench"))
    import int4_quality as Q
    scored = []
    for start, end, first in Q.windows(n, 512, 256):
        assert end - start <= 512 and first >= 1
        scored += [start + i for i in range(first, end - start)]  # row i-1 predicts token start+i
    assert scored == list(range(1, n))


def test_int4_importance_quality(smol, fp32_ppl, winml, build_dir, tmp_path):  # noqa: F811
    """quant.rtn_importance with a calibration text (opt-in): each block's search weighted by its input columns'
    variance, with the columns' mean as a second term (a shift shared by a block's weights moves the output by the
    mean times its sum), from our engine's run of the float model on the text (fortunes files the evaluated text does
    not use, as bench/int4_quality.py's CALIB_FILES). On bench/int4_quality.py's 3000 bytes it gave 1.0238x fp32
    against RTN's 1.0415x (the plain search, whose weights say nothing of the inputs, 1.070x); a fit that ignored or
    misread the statistics would not beat RTN here. onnxruntime computes the file alike."""
    hf, d, ids = smol
    fp = fp32_ppl[0]
    calib = tmp_path / "calib.txt"
    calib.write_text("".join(open(os.path.join("/usr/share/games/fortunes", f), encoding="utf-8",
                                  errors="ignore").read() for f in ("science", "wisdom", "work")), encoding="utf-8")
    _recipe(winml, hf, tmp_path / "dflt.json")
    dflt = _build(winml, hf, tmp_path / "int4", tmp_path / "dflt.json")
    p_dflt, _ = _ppl(build_dir, dflt, ids, tmp_path)
    _recipe(winml, hf, tmp_path / "imp.json", rtn_importance=True, calibration_text=str(calib))
    imp = _build(winml, hf, tmp_path / "int4_imp", tmp_path / "imp.json")
    man = json.loads((imp.parent / "build_manifest.json").read_text())
    quant = next(s for s in man["stages"] if s["name"] == "quant")
    assert "importance-weighted" in json.dumps(quant), quant
    p_imp, p_imp_ort = _ppl(build_dir, imp, ids, tmp_path)
    U.note(f"SmolLM2 int4 with importance (calibration text), {len(ids)} tokens: {p_imp:.4f} ({p_imp / fp:.4f}x; "
           f"onnxruntime {p_imp_ort:.4f}); default {p_dflt:.4f} ({p_dflt / fp:.4f}x)")
    # measured on these 256 tokens: 38.2037 (1.0059x) against the default's 39.6524 (1.0441x)
    assert p_imp < 0.98 * p_dflt, (p_imp, p_dflt)
    assert p_imp <= BOUND_IMPORTANCE * fp, (p_imp, fp)
    # 0.47% apart measured (38.2037 vs 38.3816): onnxruntime's int8 activations at accuracy_level 4, as in
    # test_int4_default_quality (which pins that cause)
    assert abs(p_imp_ort / p_imp - 1) < 0.01, f"onnxruntime {p_imp_ort} vs winml {p_imp}"


def test_int4_per_kind_blocks_real(smol, fp32_ppl, winml, build_dir, tmp_path):  # noqa: F811
    """quant.rtn_8bit_block_size / rtn_table_block_size: the 8-bit weights (v_proj / down_proj in Q4_K_M's layers) in
    blocks of 128, a 4-bit token table (and the tied head sharing its codes) in blocks of 16: onnxruntime takes
    both attributes and computes the file as our engine does; the blocks are the ones asked for, except v_proj's
    (K 576, no multiple of 128): the largest power of two that divides it, 64, not a last block padded to 640."""
    import onnx
    hf, d, ids = smol
    fp = fp32_ppl[0]
    _recipe(winml, hf, tmp_path / "kinds.json", rtn_8bit_weights=[], rtn_8bit_block_size=128, rtn_table_block_size=16)
    path = _build(winml, hf, tmp_path / "int4_kinds", tmp_path / "kinds.json")
    m = onnx.load(str(path), load_external_data=False)
    blocks = set()
    for n in m.graph.node:
        if n.op_type in ("MatMulNBits", "GatherBlockQuantized"):
            a = {x.name: x.i for x in n.attribute}
            blocks.add((n.op_type, a["bits"], a["block_size"]))
    assert blocks == {("MatMulNBits", 4, 32), ("MatMulNBits", 8, 128), ("MatMulNBits", 8, 64),
                      ("MatMulNBits", 4, 16), ("GatherBlockQuantized", 4, 16)}, blocks
    v8 = [n for n in m.graph.node
          if n.op_type == "MatMulNBits" and "v_proj" in n.input[1] and n.input[1].endswith("_Q8")]
    assert v8 and all({x.name: x.i for x in n.attribute}["block_size"] == 64 for n in v8), len(v8)
    p, p_ort = _ppl(build_dir, path, ids, tmp_path)
    U.note(f"SmolLM2 int4, 8-bit blocks of 128 and a 4-bit table in blocks of 16: {p:.4f} ({p / fp:.4f}x; "
           f"onnxruntime {p_ort:.4f})")
    # onnxruntime quantizes the activations to int8 per block at accuracy_level 4 (test_int4_default_quality): with
    # v_proj's 8-bit blocks of 64 instead of 128 padded to 640 the two moved from 42.5995 / 42.7770 (0.42%) to
    # 42.7153 / 42.4998 (0.51%) on these 256 tokens
    assert abs(p_ort / p - 1) < 0.007, f"onnxruntime {p_ort} vs winml {p}"
    assert p <= 1.15 * fp


def test_int4_sensitive_8bit_real(smol, fp32_ppl, winml, build_dir, tmp_path):  # noqa: F811
    """quant.rtn_8bit_percent (opt-in, with rtn_importance): instead of llama.cpp Q4_K_M's fixed attn_v / ffn_down
    layers, the matrices whose 4-bit copy has the largest relative output error per weight on the calibration
    activations go to 8 bits, within the given percent of the 4-bit matrices' weights. The manifest lists them; the
    model's 8-bit MatMulNBits are exactly the listed ones plus the table's (the tied head); the file holds at most the
    budget and nearly fill it; the quality is within BOUND_DEFAULT of fp32 (no gain over the same recipe without
    8-bit matrices is claimed: see the note below) and onnxruntime computes the file alike. A recipe without
    rtn_importance is refused by name (exit 2)."""
    import onnx
    hf, d, ids = smol
    fp = fp32_ppl[0]
    calib = tmp_path / "calib.txt"
    calib.write_text("".join(open(os.path.join("/usr/share/games/fortunes", f), encoding="utf-8",
                                  errors="ignore").read() for f in ("science", "wisdom", "work")), encoding="utf-8")
    _recipe(winml, hf, tmp_path / "bad.json", rtn_8bit_percent=10)
    r = U.run([winml, "build", "-m", hf, "-o", tmp_path / "bad", "-q", "-c", tmp_path / "bad.json"])
    assert r.returncode == 2 and "quant.rtn_8bit_percent" in r.stderr, U.describe(r)
    assert not (tmp_path / "bad").exists()
    base = dict(rtn_importance=True, calibration_text=str(calib), samples=1, rtn_8bit_layer_weights=[],
                rtn_8bit_block_size=256)  # one calibration sequence of 512 tokens: a faster test
    _recipe(winml, hf, tmp_path / "sens.json", rtn_8bit_percent=10, **base)
    path = _build(winml, hf, tmp_path / "int4_sens", tmp_path / "sens.json")
    man = json.loads((path.parent / "build_manifest.json").read_text())
    chosen = next(s for s in man["stages"] if s["name"] == "quant")["sensitive_8bit"]
    assert chosen and all(w.endswith(".weight") and "embed_tokens" not in w for w in chosen), chosen
    m = onnx.load(str(path), load_external_data=False)
    eight, four, sizes = set(), 0, {}
    for n in m.graph.node:
        if n.op_type == "MatMulNBits":
            a = {x.name: x.i for x in n.attribute}
            if a["bits"] == 8:
                w = n.input[1][:-len("_Q8")]
                eight.add(w)
                if w in chosen:
                    sizes[w] = a["K"] * a["N"]  # the attributes: the codes are padded to whole blocks of 256
            else:
                four += a["K"] * a["N"]
    assert eight - set(chosen) <= {"model.embed_tokens.weight"}, (eight, chosen)  # the 8-bit table's tied head
    assert set(chosen) <= eight
    moved = sum(sizes.values())
    assert moved <= 0.10 * (moved + four) + 1, (moved, four)  # within the budget
    assert moved >= 0.10 * (moved + four) - max(sizes.values()), (moved, four)  # and nearly filling it
    p, p_ort = _ppl(build_dir, path, ids, tmp_path)
    U.note(f"SmolLM2 int4 + importance + 10% 8-bit by sensitivity ({len(chosen)} matrices: {chosen[:4]} ...): "
           f"{p:.4f} ({p / fp:.4f}x; onnxruntime {p_ort:.4f})")
    # No gain is claimed: measured on these 256 tokens with one calibration sequence, 38.9678 (1.026x) against
    # 38.5659 with no 8-bit matrices at all (the same recipe, rtn_8bit_percent absent); bench/int4_quality.py's
    # rows (README) differ by about 1% either way. The bound is the default's: a broken choice or a wrong 8-bit
    # matrix would exceed it.
    assert p <= BOUND_DEFAULT * fp, (p, fp)
    assert abs(p_ort / p - 1) < 0.01, f"onnxruntime {p_ort} vs winml {p}"
