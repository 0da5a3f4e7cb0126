#!/usr/bin/env bash
# The main job on a default model, as far as the tool goes today:
# describe this machine, then write a 150 MB model (our writer decides on
# external data by size), and inspect it and a real model from the ONNX
# test suite without reading their weights.
set -euo pipefail
B=${WM_BUILD:-build}
out=${WM_DEMO_DIR:-$B/demo}
mkdir -p "$out"
echo "== winml sys" >&2
"$B/winml" sys
echo >&2
echo "== writing $out/demo.onnx: 150 MB of float32 weights (over the 100 MiB threshold -> external data)" >&2
"$B/wm_testtool" mkbig "$out/demo.onnx" 150000000
ls -l "$out"/demo.onnx* >&2
echo >&2
echo "== winml inspect -m $out/demo.onnx" >&2
"$B/winml" inspect -m "$out/demo.onnx"
suite=/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d/model.onnx
if [ -f "$suite" ]; then
  echo >&2
  echo "== winml inspect -m $suite" >&2
  "$B/winml" inspect -m "$suite"
fi
