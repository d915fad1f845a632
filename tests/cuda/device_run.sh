#!/usr/bin/env bash
# On a GPU machine (the `run` tool, after tests/cuda/device_bundle.sh here; docs/CUDA.md): unpack
# Bun and the packages carried in scratch/cuda-device/, put the prebuilt CUDA library where the
# backend looks for it, and run the cuda suite with LOOM_REQUIRE_CUDA=1 (a skip is a failure).
# Arguments go to `bun test` (default: tests/cuda); `--bench` runs bench/cuda.ts instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
b=scratch/cuda-device
if command -v bun >/dev/null 2>&1; then BUN=$(command -v bun); else
  mkdir -p /tmp/loom-bun
  [ -x /tmp/loom-bun/bun ] || { xz -dc "$b/bun.xz" > /tmp/loom-bun/bun && chmod +x /tmp/loom-bun/bun; }
  BUN=/tmp/loom-bun/bun
fi
if [ ! -e node_modules/@huggingface ]; then
  rm -rf node_modules && mkdir -p node_modules/.bin && tar -xzf "$b/node_modules.tgz" -C node_modules
  ln -sf "$BUN" node_modules/.bin/bun
fi
mkdir -p native/build && cp -n "$b"/libloom_cuda-*.so native/build/ 2>/dev/null || true
export LOOM_REQUIRE_CUDA=1
# cuBLAS: the system's, else the one pip installed beside PyTorch (nvidia-cublas-cu12/13)
if [ -z "${LOOM_CUBLAS:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so\.1[23]'; then
  d=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
  for f in "$d"/libcublas.so.13 "$d"/libcublas.so.12; do [ -e "$f" ] && { export LOOM_CUBLAS="$f"; break; }; done
fi
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L
if [ "${1:-}" = "--bench" ]; then shift; exec "$BUN" bench/cuda.ts "$@"; fi
exec "$BUN" test "${@:-tests/cuda}"
