#!/usr/bin/env bash
# Creates the Python venv of the oracle tests (onnx, onnxruntime, numpy,
# pytest). Python is only a test oracle: the product never runs it.
set -euo pipefail
VENV=${1:-.venv}
REQ=tests/oracle/requirements.txt
stamp="$VENV/.req-$(sha256sum "$REQ" | cut -c1-16)"
[ -f "$stamp" ] && exit 0
echo "creating the oracle venv in $VENV" >&2
python3 -m venv "$VENV"
# --no-compile: pip would byte-compile all 13.6k .py files of the wheels (40 CPU s, mostly torch and transformers
# modules no test imports); Python compiles the imported ones on first import instead
"$VENV/bin/pip" install -q --disable-pip-version-check --no-compile -r "$REQ"
touch "$stamp"
