#!/usr/bin/env bash
# Runs the libFuzzer targets built in build-asan (make unit-asan).
#   scripts/fuzz.sh smoke        a few seconds each (CI)
#   scripts/fuzz.sh long [SECS]  a longer run (default 600 s each)
# Seeds: the ONNX backend node-test models. New corpus entries go to a
# scratch folder; crashes are written as crash-* files in tests/fuzz/corpus-run.
set -euo pipefail
mode=${1:-smoke}
secs=${2:-600}
[ "$mode" = smoke ] && secs=${WM_FUZZ_SMOKE_SECS:-15}
B=build-asan
run=tests/fuzz/corpus-run
mkdir -p "$run/onnx"
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
i=0
for f in /usr/share/libonnx-testdata/data/node/*/model.onnx tests/fuzz/seeds/onnx/*; do
  [ -f "$f" ] || continue
  cp "$f" "$seeds/seed$i"; i=$((i+1))
  [ "$mode" = smoke ] && [ $i -ge 200 ] && break
done
echo "fuzz_onnx: $mode run, ${secs}s, $i seeds" >&2
ASAN_OPTIONS=detect_leaks=1 "$B/fuzz_onnx" -max_total_time="$secs" -max_len=65536 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$run/" "$run/onnx" "$seeds" 2>&1 \
  | grep -E '^(#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss|==[0-9]+==|SUMMARY|.*crash-)' || true
# libFuzzer exits non-zero on a crash; a crash file is the signal we check
if ls "$run"/crash-* "$run"/leak-* "$run"/timeout-* >/dev/null 2>&1; then
  echo "fuzz_onnx: found failing inputs:" >&2; ls "$run"/crash-* "$run"/leak-* "$run"/timeout-* 2>/dev/null >&2
  exit 1
fi
echo "fuzz_onnx: no crashes" >&2
