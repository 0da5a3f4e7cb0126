#!/usr/bin/env bash
# Builds whisper.cpp as bench_seq2seq.py's peer: pywhispercpp's PyPI sdist (pinned in bench/requirements-peers.txt)
# is unpacked and its vendored whisper.cpp built with cmake as shared libraries (CPU only, -march=native); the
# Python package itself is not built (the bench loads libwhisper.so with ctypes). Prints the variable the bench reads:
#   eval "$(bench/setup_whispercpp.sh)"    then bench/bench_seq2seq.py --peers ct2,ort,whispercpp
# Idempotent: a finished build in $WM_WHISPERCPP_DIR (default ~/.cache/winml-bench/whispercpp) is reused.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${WM_WHISPERCPP_DIR:-$HOME/.cache/winml-bench/whispercpp}
ver=$(grep -E '^pywhispercpp==' "$here/requirements-peers.txt" | cut -d= -f3)
[ -n "$ver" ] || { echo "setup_whispercpp.sh: no pywhispercpp==VERSION in bench/requirements-peers.txt" >&2; exit 2; }
src="$dir/pywhispercpp-$ver"
if [ ! -f "$dir/done-$ver" ]; then
  mkdir -p "$dir"
  if [ ! -d "$src" ]; then
    # the sdist file itself: pip download would run its build backend to read the metadata
    url=$(curl -sS -H 'Accept: application/vnd.pypi.simple.v1+json' https://pypi.org/simple/pywhispercpp/ |
          python3 -c "import json,sys; print(next(f['url'] for f in json.load(sys.stdin)['files'] if f['filename'] == 'pywhispercpp-$ver.tar.gz'))")
    curl -sS -o "$dir/pywhispercpp-$ver.tar.gz" "$url"
    tar xzf "$dir/pywhispercpp-$ver.tar.gz" -C "$dir"
  fi
  cmake -S "$src/whisper.cpp" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=ON \
    -DWHISPER_BUILD_TESTS=OFF -DWHISPER_BUILD_EXAMPLES=OFF >&2
  cmake --build "$src/build" -j "${JOBS:-$(nproc)}" --target whisper >&2
  touch "$dir/done-$ver"
fi
echo "export WHISPER_CPP_LIB=$src/build/src/libwhisper.so"
