"""Child process for the multi-GB checks of test_external.py.

onnxruntime sessions and onnx.load of GB-sized models run here, not in the pytest process:
Linux keeps a process's peak RSS across fork/vfork + exec, so a pytest process that once held
GBs would make every later child's getrusage() peak RSS report GBs (and RSS tests fail).

  big_child.py gather MODEL IDX...   Gather outputs of every Y_k for each idx, as float32 bits
  big_child.py w0 MODEL IDX...       W0[idx] as onnx reads it (inline raw_data), as float32 bits
  big_child.py run MODEL IN.npz OUT.npz   runs MODEL on the arrays of IN.npz, saves the outputs
Prints one JSON object on stdout (run: the output names). onnxruntime is imported only here, so
the pytest process stays small.
"""
import json
import sys

import numpy as np


def bits(x):
    return int(np.asarray(x, dtype=np.float32).view(np.uint32))


def session(model):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def main():
    cmd, model = sys.argv[1], sys.argv[2]
    if cmd == "run":
        feeds = dict(np.load(sys.argv[3]))
        sess = session(model)
        names = [o.name for o in sess.get_outputs()]
        outs = [np.array(y.tolist(), dtype=str) if y.dtype == object else y for y in sess.run(None, feeds)]
        np.savez(sys.argv[4], **dict(zip(names, outs)))
        print(json.dumps(names))
        return
    idxs = [int(v) for v in sys.argv[3:]]
    if cmd == "gather":
        sess = session(model)
        names = [o.name for o in sess.get_outputs()]
        res = {}
        for i in idxs:
            outs = sess.run(None, {"idx": np.array([i], dtype=np.int64)})
            res[str(i)] = {n: [list(y.shape), bits(y.reshape(-1)[0])] for n, y in zip(names, outs)}
        print(json.dumps(res))
    elif cmd == "w0":
        import onnx
        from onnx import numpy_helper
        m = onnx.load(model, load_external_data=False)
        w0 = numpy_helper.to_array(m.graph.initializer[0])
        print(json.dumps({str(i): bits(w0[i]) for i in idxs}))
    else:
        sys.exit(f"big_child.py: unknown command {cmd}")


if __name__ == "__main__":
    main()
