#!/usr/bin/env bash
# The JAX engine's device check on one NVIDIA H100 or H200, from a bare machine of the device tool, in under 8
# minutes: tests/perf/device/check.py says what it measures and in which order.
#
#   bash tests/perf/device/jax_gpu.sh OUT_DIR
#
# Runs from this checkout (PYTHONPATH) with the machine's own JAX (0.11 with CUDA), flax, optax, orbax, numpy,
# pandas, matplotlib and tensorboard: no TensorFlow, no network. What the machine lacks (grain, its array-record
# and portpicker, simplejpeg) comes as CPython 3.12 wheels in .whl/ (tests/perf/device/fetch_wheels.sh, here;
# the device call carries .whl) and is installed into /tmp/podbench-site. One GPU is measured unless
# PODBENCH_DEVICE_GPUS names others (CUDA_VISIBLE_DEVICES' form); the log says which.
#
# Give the commit being measured (commit first, then measure) so the evidence names it beside the code's digest:
#   PODBENCH_COMMIT=$(git rev-parse HEAD) bash tests/perf/device/jax_gpu.sh "$OUT"
#
# PODBENCH_DEVICE_DRY=1 runs every step at a CPU's sizes (tests/test_perf_device_script.py).
set -uo pipefail
out=${1:?usage: bash tests/perf/device/jax_gpu.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
py=${PYTHON:-python3}
if [ "${PODBENCH_DEVICE_DRY:-0}" != 1 ] && ls .whl/*.whl >/dev/null 2>&1; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/podbench-site \
    .whl/*.whl >> "$out/log.txt" 2>&1 || echo "== the carried wheels did not install: see log.txt" | tee -a "$out/log.txt"
  export PYTHONPATH="/tmp/podbench-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-/tmp/podbench-jax-cache}"
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0
if [ "${PODBENCH_DEVICE_DRY:-0}" != 1 ]; then
  gpus=$(nvidia-smi --list-gpus 2>/dev/null | wc -l)
  export CUDA_VISIBLE_DEVICES="${PODBENCH_DEVICE_GPUS:-0}"
  echo "== $gpus GPU(s) here; measuring CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES" | tee -a "$out/log.txt"
fi
exec "$py" tests/perf/device/check.py "$out" "${@:2}"
