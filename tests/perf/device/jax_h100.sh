#!/usr/bin/env bash
# The JAX engine on one NVIDIA H100, from a bare machine of the workplace's device tool, in under 8 minutes.
#
#   bash tests/perf/device/jax_h100.sh OUT_DIR
#
# Runs from this checkout (PYTHONPATH) with the machine's own JAX (0.11 with CUDA), flax, optax, orbax,
# numpy, pandas, matplotlib and tensorboard: no TensorFlow, no network, nothing installed. In order:
#   1. `podbench peak --framework jax`: the matmul probe in every native dtype;
#   2. `podbench sweep --framework jax --batch-sizes ...`: one device's curve, 224x224, bfloat16, synthetic;
#   3. the default JAX benchmark (224x224, bfloat16) at the fastest batch of the curve;
#   4. tests/perf/jax_overhead.py: the harness's loop against a bare jitted loop, ABBA rounds.
# Every run directory is written under OUT_DIR/runs; what comes back from the device tool (8 files, two
# folders deep at most) is OUT_DIR/*.json, OUT_DIR/log.txt and OUT_DIR/runs.tar.gz.
#
# PODBENCH_DEVICE_DRY=1 runs the same steps at sizes a CPU finishes in minutes (32x32 images, ResNet-10),
# to check the script itself where there is no GPU (tests/test_perf_device_script.py does).
set -uo pipefail
out=${1:?usage: bash tests/perf/device/jax_h100.sh OUT_DIR}
mkdir -p "$out/runs"
cd "$(dirname "$0")/../../.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# One compilation a shape for the whole script: the default run reuses its batch's compilation from the sweep.
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-/tmp/podbench-jax-cache}"
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0
py=${PYTHON:-python3}
log="$out/log.txt"
say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$log"; }

if [ "${PODBENCH_DEVICE_DRY:-0}" = 1 ]; then
  batches=2,4; steps=(--train-steps 12 --warmup-steps 4 --steps-per-epoch 4); model=(--image-size 32 --depth 10)
  overhead=(--image-size 32 --depth 10 --steps 8 --rounds 2); default_steps=(--train-steps 12 --warmup-steps 4 --steps-per-epoch 4)
else
  # 50 warm-up + 100 measured steps a size (blocks of 25): about 10 s of steps each at the H100's rates.
  batches=64,128,256,512; steps=(--train-steps 150 --warmup-steps 50 --steps-per-epoch 50); model=()
  overhead=(--steps 100 --rounds 4); default_steps=()
fi

say "machine"
{ nvidia-smi 2>&1 || true; "$py" -c "import jax, sys; print(sys.version); print('jax', jax.__version__); print(jax.devices())"; } >> "$log" 2>&1

say "1. podbench peak --framework jax"
timeout 150 "$py" -m bench.cli peak --framework jax --json > "$out/peak.json" 2>> "$log" || say "peak failed ($?)"

say "2. the device curve: batches $batches"
timeout 330 "$py" -m bench.cli sweep --framework jax --batch-sizes "$batches" "${steps[@]}" "${model[@]}" --no-peak \
  --quiet --output "$out/runs/sweep" >> "$log" 2>&1 || say "sweep failed ($?)"
cp "$out/runs/sweep/sweep.json" "$out/sweep.json" 2>/dev/null
best=$("$py" -c "
import json, sys
sizes = [s for s in json.load(open(sys.argv[1]))['sizes'] if s.get('images_per_sec')]
print(max(sizes, key=lambda s: s['images_per_sec'])['per_replica_batch_size'] if sizes else '')" "$out/sweep.json" 2>> "$log")
best=${best:-256}
say "fastest batch: $best"

say "3. the default JAX benchmark at batch $best"
timeout 200 "$py" -m bench.cli run --framework jax --batch-size "$best" "${default_steps[@]}" "${model[@]}" \
  --output "$out/runs/default" --json > "$out/default.json" 2>> "$log" || say "default run failed ($?)"

say "4. the harness against a bare jitted loop"
timeout 150 "$py" tests/perf/jax_overhead.py --batch-size "$best" "${overhead[@]}" --out "$out/overhead.json" \
  >> "$log" 2>&1 || say "overhead failed ($?)"

tar -czf "$out/runs.tar.gz" -C "$out" runs 2>> "$log"
say "done"
