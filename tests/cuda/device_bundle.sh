#!/usr/bin/env bash
# Prepare what a GPU machine lent by the `run` tool needs to run the cuda suite (docs/CUDA.md):
# the CUDA library built here with nvcc, Bun (xz: the binary alone is over the 64 MiB that `run`
# carries) and the packages src/ imports at load time, in scratch/cuda-device/ (gitignored).
# Then: run(command="bash tests/cuda/device_run.sh", carry=["scratch/cuda-device"]).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=scratch/cuda-device
mkdir -p "$out"
lib=$(./node_modules/.bin/bun tests/cuda/build_cuda.ts | sed -n 's/.*: \(\/.*libloom_cuda-[0-9a-f]*\.so\)$/\1/p')
[ -n "$lib" ] || { echo "the CUDA library did not build" >&2; exit 1; }
rm -f "$out"/libloom_cuda-*.so
cp "$lib" "$out/"
bun_bin=$(readlink -f node_modules/.bin/bun)
[ -f "$out/bun.xz" ] || xz -T0 -6 -c "$bun_bin" > "$out/bun.xz"
tar -czhf "$out/node_modules.tgz" -C node_modules @huggingface tinybench
du -sh "$out"
