#!/usr/bin/env bash
# Installs the Debian packages the build and tests need, when missing.
# As root it runs apt-get; otherwise it prints the exact command.
set -euo pipefail
PKGS="cmake make gcc clang libclang-rt-14-dev pkg-config libcjson-dev libcmocka-dev libonnx-testdata libcurl4-openssl-dev python3-venv libpcre2-dev libutf8proc-dev libpng-dev libjpeg62-turbo-dev zlib1g-dev libsndfile1-dev libsoxr-dev libfftw3-dev libzstd-dev libsnappy-dev fortunes espeak-ng npm"
missing=""
for p in $PKGS; do
  # npm may come with a Node.js installed outside Debian: a working npm command is enough
  [ "$p" = npm ] && command -v npm >/dev/null 2>&1 && continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
  echo "installing Debian packages:$missing" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq $missing >/dev/null
else
  echo "missing Debian packages:$missing" >&2
  echo "run: sudo apt-get install -y$missing" >&2
  exit 1
fi
