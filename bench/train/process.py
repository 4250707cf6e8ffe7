"""The TensorFlow engine's training process, which `podbench run` starts and supervises:
`python -m bench.train.process`. Its life (request, parent, exit code) is the harness's
(bench/harness/child.py); here is only what TensorFlow needs before and as it loads.
"""
from __future__ import annotations

import os
import sys

import models  # noqa: F401  (TF_USE_LEGACY_KERAS before TensorFlow loads)
from bench.harness import child


def before_tensorflow(request: dict) -> None:
    # TensorFlow's C++ INFO lines would interleave with the progress lines; a level the user set wins.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


def load_execute():
    from bench.train.run import execute  # noqa: PLC0415 (TensorFlow loads here)

    return execute


if __name__ == "__main__":
    sys.exit(child.main(load_execute, before_tensorflow))
