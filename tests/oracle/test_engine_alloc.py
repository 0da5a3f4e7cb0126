"""After the first run of an input shape (which makes the plan), wm_session_run makes no heap
allocation: counted by tests/tools/wm_alloccount, which interposes malloc/calloc/realloc/
aligned_alloc for the whole process (thread pool included)."""
import json
import subprocess

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _count(build_dir, path):
    r = subprocess.run([f"{build_dir}/wm_alloccount", str(path), "25"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_encoder_run_loop_allocates_nothing(build_dir, tmp_path):
    cfg = transformers.XLMRobertaConfig(vocab_size=120, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, max_position_embeddings=40, pad_token_id=1)
    m = transformers.XLMRobertaForSequenceClassification(cfg).eval()
    ids = torch.randint(2, 120, (1, 8))
    path = tmp_path / "xlmr.onnx"
    torch.onnx.export(m, (ids, torch.ones_like(ids)), str(path), input_names=["input_ids", "attention_mask"],
                      output_names=["logits"], opset_version=17, dynamo=False,
                      dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}})
    d = _count(build_dir, path)
    assert d == {"runs": 25, "allocations": 0}


def test_decoder_run_loop_allocates_nothing(build_dir, tmp_path):
    cfg = transformers.Qwen2Config(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    m = transformers.Qwen2ForCausalLM(cfg).eval()

    class NoCache(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits

    ids = torch.randint(0, 128, (1, 8))
    path = tmp_path / "qwen2.onnx"
    torch.onnx.export(NoCache(m), (ids, torch.ones_like(ids)), str(path), input_names=["input_ids", "attention_mask"],
                      output_names=["logits"], opset_version=17, dynamo=False,
                      dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}})
    assert _count(build_dir, path) == {"runs": 25, "allocations": 0}


def test_eager_run_loop_reuses_its_buffers(build_dir, tmp_path):
    """A graph whose shapes follow its data (NonZero) runs eagerly, allocating node by node; from the second
    run on, each allocation takes the buffer the same request got before, so the loop allocates nothing."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    nodes = [h.make_node("Greater", ["x", "zero"], ["pos"]), h.make_node("NonZero", ["pos"], ["idx"]),
             h.make_node("Reshape", ["idx", "flat"], ["i"]), h.make_node("Gather", ["x", "i"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [4096])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [h.make_tensor("zero", T.FLOAT, [], [0.0]), h.make_tensor("flat", T.INT64, [1], [-1])])
    path = tmp_path / "nonzero.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    assert _count(build_dir, path) == {"runs": 25, "allocations": 0}
    r = subprocess.run([f"{build_dir}/wm_run", str(path), str(_inputs(tmp_path)), str(tmp_path / "o.safetensors"),
                        "--repeat", "10", "--stats"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert st["eager"] == 1 and 0 < st["run_allocs"] <= 8, st  # one run's buffers, not ten runs'


def _inputs(tmp_path):
    import numpy as np
    from safetensors.numpy import save_file
    p = tmp_path / "x.safetensors"
    save_file({"x": np.random.default_rng(0).standard_normal(4096).astype(np.float32)}, str(p))
    return p


def test_output_view_takes_its_source_bytes(build_dir, tmp_path):
    """logits = Reshape(MatMul(...)): the graph output is a view of the MatMul's buffer, so the plan holds one
    [64, 1024] block, not two, and the values are the product (numpy)."""
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
    from safetensors.numpy import load_file, save_file
    w = np.random.default_rng(1).standard_normal((64, 1024)).astype(np.float32)
    nodes = [h.make_node("MatMul", ["x", "w"], ["mm"]), h.make_node("Reshape", ["mm", "shape"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [64, 64])],
                     [h.make_tensor_value_info("y", T.FLOAT, [64, 32, 32])],
                     [nh.from_array(w, "w"), h.make_tensor("shape", T.INT64, [3], [64, 32, 32])])
    path, inp, out = tmp_path / "view.onnx", tmp_path / "x.safetensors", tmp_path / "y.safetensors"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    x = np.random.default_rng(2).standard_normal((64, 64)).astype(np.float32)
    save_file({"x": x}, str(inp))
    r = subprocess.run([f"{build_dir}/wm_run", str(path), str(inp), str(out), "--repeat", "2", "--stats"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert st["eager"] == 0 and st["arena_bytes"] < 2 * 64 * 1024 * 4, st
    np.testing.assert_allclose(load_file(str(out))["y"], (x @ w).reshape(64, 32, 32), rtol=1e-4, atol=1e-4)
