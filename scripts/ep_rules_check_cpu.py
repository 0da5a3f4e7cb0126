# Compares `winml analyze --ep cpu` with onnxruntime CPU session creation on the ONNX backend node tests (.venv).
import glob, subprocess, json, onnxruntime as ort, random, sys
ort.set_default_logger_severity(4)
ms = sorted(glob.glob("./.venv/lib/python3.11/site-packages/onnx/backend/test/data/node/*/model.onnx"))
random.seed(1); ms = [m for m in ms if "expanded" not in m]
agree = {"both_ok":0,"both_bad":0}; mism=[]
for m in ms:
    r = subprocess.run(["./build/winml","analyze","-m",m,"--ep","cpu","-f","json","-q"],capture_output=True,text=True)
    if r.returncode == 2: mism.append((m.split('/')[-2],"analyze error",r.stderr.strip()[:80])); continue
    ours = r.returncode == 0
    try:
        ort.InferenceSession(m, providers=["CPUExecutionProvider"]); theirs=True
    except Exception as e: theirs=False; err=str(e)[:100]
    if ours == theirs: agree["both_ok" if ours else "both_bad"] += 1
    else:
        d=json.loads(r.stdout); t=d["targets"][0]
        mism.append((m.split('/')[-2], "ours="+("ok" if ours else "bad"), "ort="+("ok" if theirs else "bad"), [n["op"]+":"+n["reason"][:70] for n in t["nodes"][:1]]))
print(ort.__version__, len(ms), agree, len(mism))
import collections
c=collections.Counter((x[1],x[3][0].split(":")[0] if len(x)>3 and x[3] else x[0][:30]) for x in mism)
print(sorted(c.items()))
