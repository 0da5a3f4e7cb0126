#!/usr/bin/env python3
"""Generates src/hf/tokenizer_unidata.c: the Unicode data the tokenizers need, in the Unicode
versions the Rust `tokenizers` crate (v0.23) was built with, from the Unicode Character Database as
packaged on npm (@unicode/unicode-X.Y.Z, code point ranges per property):

  8.0   unicode_categories 0.1.1 (BertNormalizer control/accent filters, BERT and Punctuation
        pre-tokenizers): P*, Cc|Cf|Co, Mn
  9.0   unicode-normalization-alignments 0.1.12 (NFC/NFD/NFKC/NFKD, StripAccents): assigned code
        points (decompositions, combining classes and compositions of later characters do not
        exist there; for earlier ones they are immutable, so utf8proc's data masked by this is
        exact), Mark
  16.0  regex-syntax (Rust regex \\w: Alphabetic, M, Nd, Pc, Join_Control) and Oniguruma 6.9.10
        (\\p{..}, \\s, \\w, \\d in Split patterns): what each general category gained / lost since
        14.0, the version of Debian's PCRE2 10.42 tables (checked by a unit test)
  17.0  Rust std (char::to_lowercase, char::is_numeric): full lowercase mapping, N*

usage: scripts/gen_tok_unicode.py [--cache DIR]   (needs npm and node; writes the C file)
"""
import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERSIONS = {"8": "8.0.0", "9": "9.0.0", "14": "14.0.0", "16": "16.0.0", "17": "17.0.0"}
GC = {"L": "Letter", "Lu": "Uppercase_Letter", "Ll": "Lowercase_Letter", "Lt": "Titlecase_Letter",
      "Lm": "Modifier_Letter", "Lo": "Other_Letter", "M": "Mark", "Mn": "Nonspacing_Mark", "Mc": "Spacing_Mark",
      "Me": "Enclosing_Mark", "N": "Number", "Nd": "Decimal_Number", "Nl": "Letter_Number", "No": "Other_Number",
      "P": "Punctuation", "Pc": "Connector_Punctuation", "Pd": "Dash_Punctuation", "Ps": "Open_Punctuation",
      "Pe": "Close_Punctuation", "Pi": "Initial_Punctuation", "Pf": "Final_Punctuation",
      "Po": "Other_Punctuation", "S": "Symbol", "Sm": "Math_Symbol", "Sc": "Currency_Symbol",
      "Sk": "Modifier_Symbol", "So": "Other_Symbol", "Z": "Separator", "Zs": "Space_Separator",
      "Zl": "Line_Separator", "Zp": "Paragraph_Separator", "C": "Other", "Cc": "Control", "Cf": "Format",
      "Cs": "Surrogate", "Co": "Private_Use", "Cn": "Unassigned"}

NODE = r"""
const [root, spec] = [process.argv[2], JSON.parse(process.argv[3])];
const out = {};
for (const [key, rel, kind] of spec) {
  const m = (await import(root + '/' + rel)).default;
  if (kind === 'ranges') out[key] = m.map(r => [r.begin, r.end - 1]);
  else out[key] = [...m.entries()];
}
process.stdout.write(JSON.stringify(out));
"""


def fetch(cache, ver):
    name = f"@unicode/unicode-{ver}"
    tgz = [f for f in os.listdir(cache) if f.startswith(f"unicode-unicode-{ver}-") and f.endswith(".tgz")]
    if not tgz:
        subprocess.run(["npm", "pack", name, "--silent"], cwd=cache, check=True, capture_output=True)
        tgz = [f for f in os.listdir(cache) if f.startswith(f"unicode-unicode-{ver}-") and f.endswith(".tgz")]
    d = os.path.join(cache, "u" + ver)
    if not os.path.isdir(d):
        with tarfile.open(os.path.join(cache, tgz[0])) as tf:
            tf.extractall(d, filter="data")
    return os.path.join(d, "package"), tgz[0]


def load(pkg, spec):
    with tempfile.NamedTemporaryFile("w", suffix=".mjs", delete=False) as f:
        f.write(NODE)
        script = f.name
    try:
        r = subprocess.run(["node", script, pkg, json.dumps(spec)], check=True, capture_output=True, text=True)
    finally:
        os.unlink(script)
    return json.loads(r.stdout)


def to_set(ranges):
    s = set()
    for a, b in ranges:
        s.update(range(a, b + 1))
    return s


def to_ranges(cps):
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


def c_items(items, per_line=6):
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return ",\n    ".join(lines)


def c_ranges(name, ranges):
    items = [f"{{0x{a:X}, 0x{b:X}}}" for a, b in ranges] + ["{0, 0}"]
    return f"const wm_urange {name}[] = {{\n    {c_items(items)}}};\nconst size_t {name}_n = {len(ranges)};\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "wm-ucd"))
    args = ap.parse_args()
    os.makedirs(args.cache, exist_ok=True)
    pk, tg = {}, {}
    for k, v in VERSIONS.items():
        pk[k], tg[k] = fetch(args.cache, v)
    gc = lambda n: [n, f"General_Category/{GC[n]}/ranges.mjs", "ranges"]  # noqa: E731
    d8 = load(pk["8"], [gc("P"), gc("Cc"), gc("Cf"), gc("Co"), gc("Mn")])
    d9 = load(pk["9"], [gc("Cn"), gc("M")])
    d14 = load(pk["14"], [gc(n) for n in GC])
    d16 = load(pk["16"], [gc(n) for n in GC] + [["Alphabetic", "Binary_Property/Alphabetic/ranges.mjs", "ranges"],
                                                 ["Join_Control", "Binary_Property/Join_Control/ranges.mjs", "ranges"],
                                                 ["White_Space", "Binary_Property/White_Space/ranges.mjs", "ranges"]])
    d17 = load(pk["17"], [gc("N"), ["lower", "Simple_Case_Mapping/Lowercase/code-points.mjs", "map"],
                          ["special", "Special_Casing/Lowercase/code-points.mjs", "map"],
                          ["White_Space", "Binary_Property/White_Space/ranges.mjs", "ranges"]])
    out = [f"""/*
 * tokenizer_unidata.c - GENERATED by scripts/gen_tok_unicode.py; do not edit.
 * Unicode Character Database ranges (inclusive) from npm {', '.join(tg[k] for k in VERSIONS)}.
 * See tokenizer_unidata.h for what each table is for.
 */
#include "hf/tokenizer_unidata.h"

"""]
    out.append(c_ranges("wm_ud8_punct", d8["P"]))
    out.append(c_ranges("wm_ud8_other", to_ranges(to_set(d8["Cc"]) | to_set(d8["Cf"]) | to_set(d8["Co"]))))
    out.append(c_ranges("wm_ud8_mn", d8["Mn"]))
    all_cp = set(range(0x110000))
    out.append(c_ranges("wm_ud9_assigned", to_ranges(all_cp - to_set(d9["Cn"]))))
    out.append(c_ranges("wm_ud9_mark", d9["M"]))
    word = to_set(d16["Alphabetic"]) | to_set(d16["M"]) | to_set(d16["Nd"]) | to_set(d16["Pc"]) | \
        to_set(d16["Join_Control"])
    out.append(c_ranges("wm_ud16_word", to_ranges(word)))
    out.append(c_ranges("wm_ud17_numeric", d17["N"]))
    if to_set(d17["White_Space"]) != to_set(d16["White_Space"]):
        sys.exit("White_Space changed between 16.0 and 17.0: update wm_uc_is_white")
    # regex classes: what each category gained (+) and lost (-) from 14.0 (PCRE2 10.42) to 16.0
    names = list(GC)
    rows = []
    for n in names:
        a, b = to_set(d14[n]), to_set(d16[n])
        add, rem = to_ranges(b - a), to_ranges(a - b)
        out.append(c_ranges(f"wm_ud16_add_{n}", add))
        out.append(c_ranges(f"wm_ud16_rem_{n}", rem))
        rows.append(f'    {{"{n}", "{GC[n]}", wm_ud16_add_{n}, {len(add)}, wm_ud16_rem_{n}, {len(rem)}}},')
    out.append("const wm_ugc_delta wm_ud16_gc[] = {\n" + "\n".join(rows) + "\n    {0, 0, 0, 0, 0, 0}};\n")
    # lowercase (Rust char::to_lowercase): unconditional special casing first, then simple mappings
    special = {cp: m for cp, m in d17["special"]}
    lower = {cp: [m] for cp, m in d17["lower"] if m != cp}
    for cp, m in special.items():
        if m != [cp]:
            lower[cp] = m
    if any(len(m) > 2 for m in lower.values()):
        sys.exit("a lowercase mapping longer than 2 code points")
    items = [f"{{0x{cp:X}, 0x{m[0]:X}, 0x{m[1] if len(m) > 1 else 0:X}}}" for cp, m in sorted(lower.items())]
    out.append(f"const wm_ulower wm_ud17_lower[] = {{\n    {c_items(items, 4)}}};\n"
               f"const size_t wm_ud17_lower_n = {len(lower)};\n")
    path = os.path.join(ROOT, "src", "hf", "tokenizer_unidata.c")
    with open(path, "w") as f:
        f.write("\n".join(out))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
