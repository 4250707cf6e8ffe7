"""One worker of tests/perf/test_stop_agreement.py (TF_CONFIG set by the test): prints its timings as JSON.

Not a test module. Every worker makes the same collective calls in the same order:
a warm ResNet-50 fit under MultiWorkerMirroredStrategy, then the block-end stop
agreement (bench.train.checkpoints.agreement, the function every block end calls),
then fits again, so slow drift of a shared machine hits both.
"""
from __future__ import annotations

import json
import os
import sys
import time

import models  # noqa: F401  (TF_USE_LEGACY_KERAS before TensorFlow loads)
from bench.train.checkpoints import agreement
from resnet_fit import compiled_resnet, timed_fit

BATCH = int(os.environ.get("PODBENCH_PERF_BATCH", "8"))
STEPS = int(os.environ.get("PODBENCH_PERF_STEPS", "4"))
CALLS = int(os.environ.get("PODBENCH_PERF_AGREE_CALLS", "200"))


def main() -> int:
    resnet = compiled_resnet(BATCH, STEPS, strategy="multi_worker")
    agree = agreement(resnet.strategy)
    for _ in range(10):  # traced once, then warm
        agree((0, 0, 0))
    step_s = [timed_fit(resnet.model, resnet.dataset, 1, STEPS) / STEPS]
    agree_s = []
    for _ in range(CALLS):
        start_s = time.perf_counter()
        agree((0, 0, 0))  # a training block's decision: checkpoint due, stop, by SIGTERM
        agree_s.append(time.perf_counter() - start_s)
    step_s.append(timed_fit(resnet.model, resnet.dataset, 2, STEPS) / STEPS)
    print(json.dumps({"agree_s": agree_s, "step_s": step_s}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
