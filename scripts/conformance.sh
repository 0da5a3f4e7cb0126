#!/usr/bin/env bash
# Runs the ONNX backend node-test suites in the engine: Debian libonnx-testdata
# and the newer suite inside the onnx wheel of the oracle venv. Prints one line
# per failing case and the totals; exits 1 when a case fails that is not in
# tests/conformance/expected_failures.txt, or a listed case passes.
set -uo pipefail
BUILD=${WM_BUILD:-build}
VENV=${VENV:-.venv}
here=tests/conformance
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
suites=()
[ -d /usr/share/libonnx-testdata/data/node ] && suites+=("debian:/usr/share/libonnx-testdata/data/node")
wheel=$(ls -d "$VENV"/lib/python3*/site-packages/onnx/backend/test/data/node 2>/dev/null | head -1)
[ -n "$wheel" ] && suites+=("onnx:$wheel")
[ ${#suites[@]} -gt 0 ] || { echo "conformance: no test suite found (install libonnx-testdata, make venv)" >&2; exit 2; }
for s in "${suites[@]}"; do
  "$BUILD/wm_conformance" --tolerances "$here/tolerances.txt" --prefix "${s%%:*}" "${s#*:}" > "$out/${s%%:*}.txt" || exit 2
done
cat "$out"/*.txt | grep -v '^conformance:' > "$out/all.txt"
grep -oE '^[a-z0-9]+/[^ #]+' "$here/expected_failures.txt" | sort > "$out/expected"
grep '^fail ' "$out/all.txt" | sed -E 's/^fail ([^:]+):.*/\1/' | sort > "$out/failed"
grep '^pass ' "$out/all.txt" | sed -E 's/^pass //' | sort > "$out/passed"
grep '^fail ' "$out/all.txt"
new=$(comm -23 "$out/failed" "$out/expected")
fixed=$(comm -12 "$out/passed" "$out/expected")
np=$(wc -l < "$out/passed"); nf=$(wc -l < "$out/failed"); nu=$(grep -c '^unsupported ' "$out/all.txt")
echo "conformance: $np passed, $nf failed, $nu unsupported"
rc=0
[ -n "$new" ] && { echo "conformance: new failures (not in $here/expected_failures.txt):"; echo "$new"; rc=1; }
[ -n "$fixed" ] && { echo "conformance: listed as expected failures but passing now (remove them):"; echo "$fixed"; rc=1; }
exit $rc
