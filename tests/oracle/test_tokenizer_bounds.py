"""Tokenizer bounds (issue 30: never crash, never run away): hostile tokenizer.json files and texts end with a
clear error (exit 2) or finish in linear time, under the normal and the ASan+UBSan builds; encoding a long text
keeps memory small and linear; and the streamed encoder (each pre-tokenizer step splits a batch at a time,
normalizers rewrite segments of the text) still gives exactly what the `tokenizers` library gives on long texts.
"""
import json
import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_util as U  # noqa: E402
import tok_corpus  # noqa: E402
import tok_oracle  # noqa: E402


@pytest.fixture(scope="session")
def fixtures(build_dir):
    os.environ.setdefault("WM_BUILD", build_dir)
    try:
        return tok_oracle.build_fixtures()
    except Exception as e:  # a missing registry or npm is a failure, not a skip
        pytest.fail(f"cannot build the tokenizer fixtures: {e}", pytrace=False)


@pytest.fixture(params=["normal", "asan"])
def winml_both(request, winml, asan_dir):
    """The normal binary and the ASan+UBSan one: the bounds must hold in both."""
    return winml if request.param == "normal" else U.binary(asan_dir, "winml")


def run_stdin(argv, data, timeout, stdout_file=None):
    """Runs argv with data (bytes) on stdin (stdout into stdout_file when given); a run past timeout comes back
    with returncode U.TIMEOUT_RC."""
    argv = [str(a) for a in argv]
    out = open(stdout_file, "wb") if stdout_file else subprocess.PIPE
    try:
        r = subprocess.run(argv, input=data, stdout=out, stderr=subprocess.PIPE, timeout=timeout, env=U.env_for())
    except subprocess.TimeoutExpired as e:
        r = subprocess.CompletedProcess(argv, U.TIMEOUT_RC, e.stdout or b"",
                                        (e.stderr or b"") + f"\n[killed: no exit within {timeout} s]".encode())
    finally:
        if stdout_file:
            out.close()
    r.stdout = (r.stdout or b"").decode("utf-8", "replace")
    r.stderr = r.stderr.decode("utf-8", "replace")
    return r


def wordlevel(**extra):
    tok = {"model": {"type": "WordLevel", "vocab": {"a": 0, "b": 1, "[UNK]": 2, "[CLS]": 3}, "unk_token": "[UNK]"}}
    tok.update(extra)
    return json.dumps(tok)


def template(n_ids, n_pieces):
    return wordlevel(post_processor={
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "X", "type_id": 0}}] * n_pieces + [{"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"X": {"id": "X", "ids": [3] * n_ids, "tokens": ["[CLS]"] * n_ids}}})


def test_template_with_a_million_ids_loads_in_linear_time(winml_both, tmp_path):
    """A TemplateProcessing special token of 10^6 ids: the load walked the id list from its head for every id
    (quadratic: 10^5 ids took 280 s); now seconds, and the template applies (10^6 + 1 tokens)."""
    path = tmp_path / "tokenizer.json"
    path.write_text(template(10 ** 6, 1))
    t0 = time.monotonic()
    r = run_stdin([winml_both, "tokenize", "-m", path, "--text", "a", "-f", "json"], b"", 300, tmp_path / "out.json")
    assert r.returncode == 0 and not U.crashed(r), U.describe(r)
    assert time.monotonic() - t0 < 240
    j = json.loads((tmp_path / "out.json").read_text())
    assert j["count"] == 10 ** 6 + 1 and j["ids"][0] == 3 and j["ids"][-1] == 0


def test_template_adding_too_many_tokens_is_refused(winml_both, tmp_path):
    """1000 pieces of a special token of 1100 ids would add 1.1 million tokens to every encoding."""
    path = tmp_path / "tokenizer.json"
    path.write_text(template(1100, 1000))
    r = U.run([winml_both, "tokenize", "-m", path, "--text", "a"], timeout=300)
    U.assert_clean_error(r, "winml tokenize", "tokenizer.json", "WM_TOK_MAX_TEMPLATE_TOKENS")


def test_rescanning_regex_stops_at_its_budget(winml_both, tmp_path):
    """Split on a*b|a over 300,000 'a': each match rescanned the rest of the text (quadratic, about a minute);
    now the regex budget (linear in the text) ends it with a message naming the limit, in well under that."""
    path = tmp_path / "tokenizer.json"
    path.write_text(wordlevel(pre_tokenizer={"type": "Split", "pattern": {"Regex": "a*b|a"},
                                             "behavior": "Isolated", "invert": False}))
    t0 = time.monotonic()
    r = run_stdin([winml_both, "tokenize", "-m", path, "--text", "-"], b"a" * 300000, timeout=120)
    U.assert_clean_error(r, "winml tokenize", "regex", "WM_TREGEX_BUDGET_PER_BYTE")
    assert time.monotonic() - t0 < 60
    r = run_stdin([winml_both, "tokenize", "-m", path, "--text", "-", "-f", "json"], b"ab" * 150000, 120,
                  tmp_path / "o.json")  # the same pattern on an ordinary text
    assert r.returncode == 0 and not U.crashed(r), U.describe(r)
    assert json.loads((tmp_path / "o.json").read_text())["count"] == 150000


def test_repeating_added_token_stops_at_its_budget(winml_both, tmp_path):
    """An added token of 5000 'a' + 'b' over a text of 'a's: the matcher walked 5000 bytes from every position."""
    path = tmp_path / "tokenizer.json"
    path.write_text(wordlevel(added_tokens=[{"id": 9, "content": "a" * 5000 + "b", "single_word": False,
                                             "lstrip": False, "rstrip": False, "normalized": False,
                                             "special": True}]))
    r = run_stdin([winml_both, "tokenize", "-m", path, "--text", "-"], b"a" * 400000, timeout=120)
    U.assert_clean_error(r, "winml tokenize", "added tokens", "WM_TADDED_BUDGET_PER_BYTE")


def long_texts():
    """Six texts of 100-300 KB: real English, many scripts, long runs without spaces, of digits, of spaces."""
    lines = tok_corpus.corpus(3000, 17)
    out = []
    for k, sep in enumerate([" ", "\n", "  ", "", "\t", " \u3000 "]):
        s = sep.join(lines[k * 500:(k + 1) * 500])
        if k == 3:
            s = "1234567890" * 3000 + s + " " * 20000 + "end"
        out.append(s)
    return out



@pytest.mark.parametrize("vocab,needles", [
    # not JSON, but spliced into {"model": {..., "vocab": <vocab.json>}} it closed the model early and added fields
    ('{"a": 0, "b": 1, "ab": 2}}, "normalizer": {"type": "Lowercase"}, "x": {"y": 1', ["vocab.json", "trailing bytes"]),
    ('{"a": 0, "b": 1', ["vocab.json", "not valid json"]),
    ("[" * 100 + "]" * 100, ["vocab.json", "nested deeper than 64"]),
], ids=["spliced", "truncated", "deep"])
def test_gpt2_folder_vocab_that_is_not_json_is_refused(vocab, needles, winml_both, tmp_path):
    """vocab.json + merges.txt (no tokenizer.json): a vocab.json that is not one JSON object is refused naming it
    (the spliced one loaded before, exit 0); the same folder with a valid vocab.json tokenizes"""
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b\n")
    (tmp_path / "vocab.json").write_text(vocab)
    r = U.run([winml_both, "tokenize", "-m", tmp_path, "--text", "ab"], timeout=60)
    U.assert_clean_error(r, "winml tokenize", *needles)
    (tmp_path / "vocab.json").write_text('{"a": 0, "b": 1, "ab": 2}')
    r = U.run([winml_both, "tokenize", "-m", tmp_path, "--text", "ab", "-f", "json"], timeout=60)
    assert r.returncode == 0 and json.loads(r.stdout)["ids"] == [2], U.describe(r)


@pytest.mark.parametrize("name", ["gpt2", "qwen3", "llama2", "bert", "xlmr", "spbpe_ms", "misc_bpe", "misc_wl"])
def test_long_texts_match_tokenizers(name, fixtures, tmp_path):
    """The streamed pre-tokenizer and the segmented normalizers cut long texts into batches and segments: the
    result must be what `tokenizers` gives for the whole text (ids, tokens, offsets, words, pairs)."""
    model, pytok, lossless = fixtures[name]
    st = tok_oracle.compare(name, model, pytok, lossless, long_texts(), str(tmp_path))
    assert st.counts.get("single:ids", (0, 0))[0] == 6
    bad = {k: b for k, (n, b) in st.counts.items() if b}
    assert not bad, f"{name}: mismatches {bad}; first: " + json.dumps(st.examples[:2], ensure_ascii=False)[:3000]


def test_encoding_a_long_text_keeps_memory_small(fixtures, build_dir, tmp_path):
    """Qwen3 on 20 MB of English as one text: the encoder used about 63 bytes per byte of text (the whole text's
    pieces, matches, per-byte alignments, normalizer work areas and the tokens twice); now under 10."""
    text = tmp_path / "text.txt"
    lines = tok_corpus.corpus(2000, 5)
    data = "\n".join(lines).encode()
    with open(text, "wb") as f:
        while f.tell() < 20 << 20:
            f.write(data)
    size = os.path.getsize(text)
    model = fixtures["qwen3"][0]
    tool = os.path.join(build_dir, "wm_toktool")

    def run(args):
        """peak_rss comes from the tool (VmHWM of its own image): ru_maxrss of a child started from this
        process would carry this Python process's own peak (Linux keeps the pre-exec peak)."""
        r = subprocess.run([tool] + args, capture_output=True, timeout=600, env=U.env_for())
        assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
        j = json.loads(r.stdout)
        assert j["peak_rss"] > 0, "the tool cannot read its peak memory (/proc/self/status VmHWM)"
        return j

    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    base = run(["bench", model, str(empty), "--whole"])["peak_rss"]  # the tokenizer alone
    j = run(["bench", model, str(text), "--whole"])
    peak = j["peak_rss"]
    assert j["bytes"] == size and j["tokens"] > size // 8
    per_byte = (peak - base) / size
    sys.stderr.write(f"qwen3 {size} bytes: peak {peak >> 20} MiB, tokenizer {base >> 20} MiB, "
                     f"{per_byte:.1f} bytes per text byte, {j['seconds']:.1f} s\n")
    assert per_byte < 10, f"{per_byte:.1f} bytes of memory per byte of text"
