"""Every code point through each normalizer and character-class pre-tokenizer, ours (wm_toktool
normalize / pretok) against the Python `tokenizers` library: the character tables (categories,
combining classes, decompositions, case mappings, White_Space, regex classes) must agree.

`python tests/oracle/tok_unicode_probe.py [--planes 0,1,2,3,14] [--only NAME]` prints the code
points that differ, as ranges, per component.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tok_oracle  # noqa: E402

QWEN_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
              r"|\s+(?!\S)|\s+")


def components():
    """name -> (normalizer or None, pre_tokenizer or None, probe(c) -> list of strings)"""
    from tokenizers import Regex, normalizers as N, pre_tokenizers as P
    nf = lambda c: ["a" + c + "\u0334", "a\u0345" + c]  # noqa: E731  (decomposition, combining class)
    mid = lambda c: ["a" + c + "b"]  # noqa: E731
    rx = lambda c: ["a" + c + "b", " " + c + c + "1", "1" + c + " x"]  # noqa: E731
    return {
        "NFD": (N.NFD(), None, nf), "NFC": (N.NFC(), None, nf), "NFKD": (N.NFKD(), None, nf),
        "NFKC": (N.NFKC(), None, nf), "Lowercase": (N.Lowercase(), None, lambda c: [c]),
        "StripAccents": (N.StripAccents(), None, mid),
        "BertNormalizer": (N.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=True,
                                            lowercase=True), None, mid),
        "Whitespace": (None, P.Whitespace(), lambda c: ["a" + c + "b", "!" + c + "?"]),
        "WhitespaceSplit": (None, P.WhitespaceSplit(), mid),
        "BertPreTokenizer": (None, P.BertPreTokenizer(), mid),
        "Digits": (None, P.Digits(individual_digits=True), mid),
        "ByteLevelRegex": (None, P.ByteLevel(add_prefix_space=False, use_regex=True), rx),
        "QwenRegex": (None, P.Split(Regex(QWEN_REGEX), behavior="isolated"), rx),
        # SentencePiece's nmt_nfkc character map over grapheme clusters (needs the xlmr fixture)
        "Precompiled": (_precompiled, None, lambda c: ["a" + c + "b", c + "\u0301", "x" + c + c + "\u200d" + c]),
    }


def _precompiled():
    from tokenizers import normalizers as N
    p = os.path.join(tok_oracle.cache_dir(), "spm-xlmr.model")
    if not os.path.exists(p):
        tok_oracle.build_fixtures(["xlmr"])
    from sentencepiece import sentencepiece_model_pb2
    m = sentencepiece_model_pb2.ModelProto()
    with open(p, "rb") as f:
        m.ParseFromString(f.read())
    return N.Precompiled(m.normalizer_spec.precompiled_charsmap)


def codepoints(planes):
    for p in planes:
        for cp in range(p << 16, (p + 1) << 16):
            if 0xD800 <= cp <= 0xDFFF or cp == 0:
                continue
            yield cp


def _ranges(cps):
    out, start, prev = [], None, None
    for cp in sorted(cps):
        if start is None:
            start = prev = cp
        elif cp == prev + 1:
            prev = cp
        else:
            out.append((start, prev))
            start = prev = cp
    if start is not None:
        out.append((start, prev))
    return out


def probe(name, planes, work, batch=1, stride=1):
    """Returns the sorted list of code points whose outputs differ for component `name` (with
    batch > 1, the probes of `batch` code points share one input line, joined by newlines, and a
    differing line reports all of its code points; stride > 1 probes every stride-th code point)."""
    from tokenizers import Tokenizer, models
    norm, pre, mk = components()[name]
    if callable(norm) and not hasattr(norm, "normalize_str"):
        norm = norm()
    t = Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    if norm:
        t.normalizer = norm
    if pre:
        t.pre_tokenizer = pre
    model = os.path.join(work, name + ".json")
    t.save(model)
    cps, inputs = [], []
    group, parts = [], []
    for k, cp in enumerate(codepoints(planes)):
        if k % stride:
            continue
        group.append(cp)
        parts.extend(mk(chr(cp)))
        if len(group) >= batch:
            cps.append(tuple(group))
            inputs.append("\n".join(parts))
            group, parts = [], []
    if group:
        cps.append(tuple(group))
        inputs.append("\n".join(parts))
    path = os.path.join(work, name + ".jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for s in inputs:
            f.write(json.dumps(s, ensure_ascii=False) + "\n")
    r = subprocess.run([tok_oracle.toktool(), "pretok" if pre else "normalize", model, path], capture_output=True,
                       timeout=3600)
    if r.returncode:
        raise RuntimeError(f"wm_toktool failed: {r.stderr.decode(errors='replace')[-500:]}")
    ours = [json.loads(x) for x in r.stdout.decode("utf-8").split("\n") if x]
    assert len(ours) == len(inputs), (len(ours), len(inputs))
    bad = set()
    for cp, s, o in zip(cps, inputs, ours):
        if pre:
            ref = t.pre_tokenizer.pre_tokenize_str(s)
            m = tok_oracle.byte_to_char_map(s)
            o = [(a, (m.get(b, -1), m.get(e, -1))) for a, (b, e) in o]
        else:
            ref = t.normalizer.normalize_str(s)
        if o != ref:
            bad.update(cp)
    return sorted(bad)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--planes", default="0,1,2,3,14")
    ap.add_argument("--only", default="")
    ap.add_argument("--batch", type=int, default=1)
    args = ap.parse_args()
    planes = [int(x) for x in args.planes.split(",")]
    names = [n for n in args.only.split(",") if n] or list(components())
    total = 0
    with tempfile.TemporaryDirectory() as work:
        for n in names:
            bad = probe(n, planes, work, args.batch)
            total += len(bad)
            rs = _ranges(bad)
            print(f"{n}: {len(bad)} code points differ" + (": " + " ".join(
                f"{a:04X}" if a == b else f"{a:04X}-{b:04X}" for a, b in rs[:60]) if bad else ""))
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
