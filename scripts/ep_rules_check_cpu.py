# Compares `winml analyze --ep cpu` with onnxruntime CPU session creation on the ONNX backend node tests shipped
# with the onnx wheel. Usage: python scripts/ep_rules_check_cpu.py [BUILD_DIR]   (default build/; run with the
# venv's python). Prints the agreement counts and every mismatch with onnxruntime's reason. Sessions that fail
# for a reason of this machine, not of the kernel registry (a missing locale for StringNormalizer), are counted
# apart as "environment".
import glob
import json
import os
import subprocess
import sys

import onnx
import onnxruntime as ort

ort.set_default_logger_severity(4)
build = sys.argv[1] if len(sys.argv) > 1 else "build"
winml = os.path.join(build, "winml")
node_dir = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
models = sorted(m for m in glob.glob(os.path.join(node_dir, "*", "model.onnx")) if "expanded" not in m)
ENV_ERRORS = ("Failed to construct locale",)
agree = {"both_ok": 0, "both_bad": 0}
env, mism = [], []
for m in models:
    name = os.path.basename(os.path.dirname(m))
    r = subprocess.run([winml, "analyze", "-m", m, "--ep", "cpu", "-f", "json", "-q"], capture_output=True, text=True)
    if r.returncode == 2:
        mism.append((name, "analyze error", r.stderr.strip()[:100]))
        continue
    ours = r.returncode == 0
    why = ""
    try:
        ort.InferenceSession(m, providers=["CPUExecutionProvider"])
        theirs = True
    except Exception as e:  # noqa: BLE001 - any refusal is the answer we compare with
        theirs, why = False, str(e).replace("\n", " ")
    if not theirs and any(k in why for k in ENV_ERRORS):
        env.append(name)
        continue
    if ours == theirs:
        agree["both_ok" if ours else "both_bad"] += 1
        continue
    nodes = json.loads(r.stdout)["targets"][0]["nodes"] if r.stdout else []
    mism.append((name, "ours=" + ("ok" if ours else "bad"), "ort=" + ("ok" if theirs else "bad"),
                 (nodes[0]["op"] + ": " + nodes[0]["reason"][:80]) if nodes else why[:120]))
print(f"onnxruntime {ort.__version__}: {len(models)} node tests; {agree}; environment-only failures: {len(env)} "
      f"({', '.join(env)}); mismatches: {len(mism)}")
for x in mism:
    print("  ", *x)
sys.exit(1 if mism else 0)
