#!/usr/bin/env bash
# Builds llama.cpp as the benches' peer without compiling llama-cpp-python's wheel: the PyPI sdist of
# llama-cpp-python (pinned in bench/requirements-peers.txt) is unpacked, its vendored llama.cpp (the exact version
# its ctypes bindings were written for) is built with cmake as shared libraries (CPU only, -march=native), and its
# Python package is used from the unpacked folder. Prints the two variables that make `import llama_cpp` work:
#   eval "$(bench/setup_llamacpp.sh)"    then e.g. python bench/int4_quality.py ... (llama.cpp rows appear)
# Idempotent: a finished build in $WM_LLAMACPP_DIR (default ~/.cache/winml-bench/llamacpp) is reused.
# LLAMA_CPP_CONVERT: llama.cpp's convert_hf_to_gguf.py of the same version (it imports the `gguf` package, which
# tests/oracle/requirements.txt installs; the sdist's gguf-py folder is empty).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${WM_LLAMACPP_DIR:-$HOME/.cache/winml-bench/llamacpp}
py=${PYTHON:-python3}
ver=$(grep -E '^llama-cpp-python==' "$here/requirements-peers.txt" | cut -d= -f3)
[ -n "$ver" ] || { echo "setup_llamacpp.sh: no llama-cpp-python==VERSION in bench/requirements-peers.txt" >&2; exit 2; }
src="$dir/llama_cpp_python-$ver"
if [ ! -f "$dir/done-$ver" ]; then
  mkdir -p "$dir"
  if [ ! -d "$src" ]; then
    "$py" -m pip download --no-deps --no-binary :all: -d "$dir" "llama-cpp-python==$ver" >&2
    tar xzf "$dir/llama_cpp_python-$ver.tar.gz" -C "$dir"
  fi
  # AMX kernels left out as bench_llm_peers.py's llama_cmake_args does (see there why)
  amx=""
  grep -q ' amx_tile ' /proc/cpuinfo 2>/dev/null && amx="-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
  # shellcheck disable=SC2086
  cmake -S "$src/vendor/llama.cpp" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
    -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF $amx >&2
  cmake --build "$src/build" -j "${JOBS:-$(nproc)}" --target llama >&2
  touch "$dir/done-$ver"
fi
# what llama_cpp's Python package imports besides numpy: checked on every call, since the build is reused across
# venvs (a recreated venv lacks them, and bench_llm_peers.py would then rebuild llama-cpp-python from its sdist)
"$py" -c "import diskcache, jinja2" 2>/dev/null || "$py" -m pip install -q diskcache jinja2 >&2
echo "export PYTHONPATH=$src${PYTHONPATH:+:$PYTHONPATH}"
echo "export LLAMA_CPP_LIB_PATH=$src/build/bin"
echo "export LLAMA_CPP_CONVERT=$src/vendor/llama.cpp/convert_hf_to_gguf.py"
