#!/usr/bin/env bash
# Runs every libFuzzer target built in build-asan (make unit-asan).
#   scripts/fuzz.sh smoke [TARGET]        a few seconds each (CI)
#   scripts/fuzz.sh long SECS [TARGET]    a longer run (default 600 s each)
# Seeds of fuzz_X: tests/fuzz/seeds/X/* plus, for onnx, the ONNX backend
# node-test models. Failing inputs land in tests/fuzz/corpus-run/ as
# crash-*/leak-*/timeout-*/oom-* files, which fail the run, as does a fuzzer
# that exits with an error.
# Targets run WM_FUZZ_JOBS at a time (default nproc: each fuzzer is one
# process on one core, and each still runs its full SECS); a target's lines
# are printed together, in target order, once all have run.
set -euo pipefail
mode=${1:-smoke}
B=${WM_BUILD_ASAN:-build-asan}
if [ "$mode" = smoke ]; then
  only=${2:-}
  # the CI's budget: WM_FUZZ_SMOKE_TOTAL seconds (default 210, what 21 targets of 10 s took) shared by all
  # targets, so that a new target does not lengthen the gate; WM_FUZZ_SMOKE_SECS fixes the time of each instead
  n=$(ls "$B"/fuzz_* 2>/dev/null | wc -l || true)
  secs=$(( ${WM_FUZZ_SMOKE_TOTAL:-210} / (n > 0 ? n : 1) ))
  [ -n "$only" ] && secs=10
  [ "$secs" -ge 5 ] || secs=5
  secs=${WM_FUZZ_SMOKE_SECS:-$secs}
else
  secs=${2:-600}
  only=${3:-}
fi
run=${WM_FUZZ_RUN:-tests/fuzz/corpus-run} # corpus and failing inputs (the oracle test of this gate points it elsewhere)
jobs=${WM_FUZZ_JOBS:-$(nproc)}
status=0
work=$(mktemp -d) # per target: its lines (.log), its summary of failures (.sum), failed (.fail), ran to the end (.done)
trap 'rm -rf "$work"' EXIT

# one target: everything it prints goes to $work/NAME.log, what failed to $work/NAME.sum
fuzz_one() {
  local bin=$1 name kind seeds i f log frc found summary
  name=$(basename "$bin"); kind=${name#fuzz_}
  summary="$work/$name.sum"
  exec 2>"$work/$name.log"
  mkdir -p "$run/$kind"
  seeds=$(mktemp -d)
  i=0
  for f in tests/fuzz/seeds/"$kind"/*; do [ -f "$f" ] && cp "$f" "$seeds/s$i" && i=$((i+1)); done
  if [ "$kind" = onnx ]; then
    for f in /usr/share/libonnx-testdata/data/node/*/model.onnx; do
      cp "$f" "$seeds/s$i"; i=$((i+1))
      [ "$mode" = smoke ] && [ $i -ge 200 ] && break
    done
  fi
  [ "$kind" = config ] && for f in examples/recipes/*/*/*/*.json; do cp "$f" "$seeds/s$i"; i=$((i+1)); done
  [ "$kind" = ep_rules ] && for f in data/ep_rules/*.json; do cp "$f" "$seeds/s$i"; i=$((i+1)); done
  echo "$name: $mode run, ${secs}s, $i seeds" >&2
  log=$(mktemp)
  frc=0
  ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS="suppressions=$PWD/tests/lsan-system.supp" "$bin" -max_total_time="$secs" -max_len=65536 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$run/$name-" "$run/$kind" "$seeds" >"$log" 2>&1 || frc=$?
  grep -E '^(stat::number_of_executed_units|stat::new_units_added|==[0-9]+==|SUMMARY)' "$log" >&2 || true
  rm -rf "$seeds"
  # each kind on its own: `ls a b c` fails when any one pattern matches nothing, which hid a leak-* file here
  found=$(ls -d "$run/$name"-crash-* "$run/$name"-leak-* "$run/$name"-timeout-* "$run/$name"-oom-* 2>/dev/null || true)
  if [ -n "$found" ] || [ "$frc" -ne 0 ]; then
    echo "$name: failing inputs found (fuzzer exit $frc):" >&2
    [ -n "$found" ] && echo "$found" >&2
    tail -20 "$log" >&2
    {
      echo "== $name: fuzzer exit $frc; inputs: ${found:-none}"
      # the finding's headline and its first frames inside our code
      grep -m1 -E '^==[0-9]+==(ERROR|WARNING)|^SUMMARY|deadly signal|out-of-memory|timeout|took .* of CPU' "$log" || true
      grep -E '^ +#[0-9]+ ' "$log" | grep -v -E 'libFuzzer|fuzzer::|compiler-rt|libc\.so|__libc_start' | head -8 || true
      grep -m1 '^SUMMARY' "$log" || true
    } >>"$summary"
    # keep the input beside the log where CI can show it in base64 (small inputs only)
    for f in $found; do
      [ "$(stat -c %s "$f")" -le 4096 ] && { echo "   input $(basename "$f") base64: $(base64 -w0 "$f")" >>"$summary"; }
    done
    touch "$work/$name.fail"
  else
    echo "$name: no crashes" >&2
  fi
  rm -f "$log"
  touch "$work/$name.done" # not reached when a step above failed (errexit holds in the background job)
}

names=()
for bin in "$B"/fuzz_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin"); kind=${name#fuzz_}
  [ -n "$only" ] && [ "$only" != "$kind" ] && continue
  names+=("$name")
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  fuzz_one "$bin" &
done
wait
summary="$work/summary"
: >"$summary"
for name in ${names[@]+"${names[@]}"}; do
  cat "$work/$name.log" >&2 2>/dev/null || true
  if [ -e "$work/$name.fail" ] || [ ! -e "$work/$name.done" ]; then
    status=1
    [ -e "$work/$name.done" ] || echo "$name: fuzz.sh stopped before the end of this target" >&2
    if [ -e "$work/$name.sum" ]; then cat "$work/$name.sum" >>"$summary"; else echo "== $name: stopped early" >>"$summary"; fi
  fi
done
if [ "$status" -ne 0 ]; then
  echo "== fuzz $mode: FAILED targets (repeated from above):" >&2
  cat "$summary" >&2
fi
exit $status
