"""One TensorFlow process: strategy, recipe, timer, progress, evaluation, callbacks,
environment, the run itself, and the pure summary of what it recorded.

Modules here import TensorFlow, except ``summary`` (raw logs -> summary.json),
which read-only commands use, and ``threads`` (``--cpu-threads``, applied before
TensorFlow loads). This ``__init__`` imports nothing, so importing
``bench.train.summary`` stays cheap.
"""
