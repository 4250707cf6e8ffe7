#!/usr/bin/env bash
# The JAX engine on one NVIDIA H100, from a bare machine of the workplace's device tool, in under 8 minutes.
#
#   bash tests/perf/device/jax_h100.sh OUT_DIR
#
# Runs from this checkout (PYTHONPATH) with the machine's own JAX (0.11 with CUDA), flax, optax, orbax,
# numpy, pandas, matplotlib and tensorboard: no TensorFlow, no network, nothing installed. In order:
#   1. `podbench peak --framework jax`: the matmul probe in every native dtype;
#   2. `podbench sweep --framework jax --batch-sizes ...`: one device's curve, 224x224, bfloat16, synthetic;
#   3. the default JAX benchmark (224x224, bfloat16, synthetic) at the fastest batch of the curve;
#   4. tests/perf/jax_overhead.py: the harness's loop against a bare jitted loop, ABBA rounds.
# Every run directory is written under OUT_DIR/runs. Each step writes its result in OUT_DIR as soon as it
# ends (peak.json, sweep.json, default.json, overhead.json; log.txt as it goes; runs.tar.gz at the end): what
# comes back from the device tool (8 files, two folders down at most) holds whatever finished.
#
# Compile time: ResNet-50's training step compiles once a batch size. The learning-rate schedule is
# compiled into the step, so every run here shares one length (50 warm-up + 100 measured steps, epochs of
# 50 steps): with XLA's persistent cache the default run and the overhead check reuse the sweep's compilation
# of their batch.
#
# PODBENCH_DEVICE_DRY=1 runs the same steps at sizes a CPU finishes in a minute (32x32 images, ResNet-10),
# to check the script itself where there is no GPU (tests/test_perf_device_script.py).
set -uo pipefail
out=${1:?usage: bash tests/perf/device/jax_h100.sh OUT_DIR}
mkdir -p "$out/runs"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../../.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-/tmp/podbench-jax-cache}"
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0
py=${PYTHON:-python3}
log="$out/log.txt"
say() { echo "== $(date -u +%H:%M:%S) +${SECONDS}s $*" | tee -a "$log"; }

if [ "${PODBENCH_DEVICE_DRY:-0}" = 1 ]; then
  batches=2,4; model=(--image-size 32 --depth 10)
  length=(--steps-per-epoch 4 --train-steps 12 --warmup-steps 4); overhead=(--steps 4 --rounds 2)
  schedule=(--steps-per-epoch 4 --train-steps 12)
else
  batches=64,128,256,512; model=()
  length=(--steps-per-epoch 50 --train-steps 150 --warmup-steps 50); overhead=(--steps 75 --rounds 4)
  schedule=(--steps-per-epoch 50 --train-steps 150)
fi
budget_s=470  # the whole script's, under the 8 minutes asked (the device tool allows 10 a command)
left() { echo $((budget_s - SECONDS)); }

say "machine"
{ nvidia-smi 2>&1 || true; "$py" -c "import jax, sys; print(sys.version); print('jax', jax.__version__); print(jax.devices())"; } >> "$log" 2>&1

say "1. podbench peak --framework jax"
timeout 90 "$py" -m bench.cli peak --framework jax --json > "$out/peak.json" 2>> "$log" || say "peak failed ($?)"

say "2. the device curve: batches $batches"
timeout $(( $(left) - 150 )) "$py" -m bench.cli sweep --framework jax --batch-sizes "$batches" "${length[@]}" "${model[@]}" \
  --no-peak --quiet --output "$out/runs/sweep" >> "$log" 2>&1 || say "sweep failed or cut short ($?)"
cp "$out/runs/sweep/sweep.json" "$out/sweep.json" 2>> "$log"
best=$("$py" -c "
import json, sys
sizes = [s for s in json.load(open(sys.argv[1]))['sizes'] if s.get('images_per_sec')]
print(max(sizes, key=lambda s: s['images_per_sec'])['per_replica_batch_size'] if sizes else '')" "$out/sweep.json" 2>> "$log")
best=${best:-256}
say "fastest batch: $best"

say "3. the default JAX benchmark at batch $best"
timeout $(( $(left) - 70 )) "$py" -m bench.cli run --framework jax --batch-size "$best" "${length[@]}" "${model[@]}" \
  --output "$out/runs/default" --json > "$out/default.json" 2>> "$log" || say "default run failed ($?)"

if [ "$(left)" -gt 40 ]; then
  say "4. the harness against a bare jitted loop, batch $best"
  timeout $(( $(left) - 5 )) "$py" tests/perf/jax_overhead.py --batch-size "$best" "${overhead[@]}" "${schedule[@]}" \
    "${model[@]}" --out "$out/overhead.json" >> "$log" 2>&1 || say "overhead failed or cut short ($?)"
else
  say "4. skipped: $(left) s left of the budget"
fi

tar -czf "$out/runs.tar.gz" -C "$out" runs 2>> "$log"
say "done"
