#!/usr/bin/env bash
# The Python packages the device check needs that the lent GPU machines lack (the device tool's KINDS.md lists
# what they have): grain with the two of its needs they miss (array-record, portpicker), and simplejpeg, as
# CPython 3.12 x86-64 wheels in .whl/ at the checkout's root, ignored through git's info/exclude. A device call
# names .whl in `carry`; tests/perf/device/jax_gpu.sh installs them there. Run here, where PyPI answers:
#
#   bash tests/perf/device/fetch_wheels.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
exclude="$(git rev-parse --git-common-dir)/info/exclude"
mkdir -p "$(dirname "$exclude")"
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"
py=${PYTHON:-python3}
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
# One version of each (two stop the install there); grain's own version is the one setup.cfg's range takes here.
for package in "grain>=0.2.13,<0.3" array-record portpicker "simplejpeg>=1.8"; do
  "$py" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d .whl "$package"
done
du -ch .whl/*.whl | tail -n 1
