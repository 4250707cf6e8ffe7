"""The TensorFlow engine: one TensorFlow process (strategy, recipe, timer, progress, evaluation,
callbacks, checkpoints, environment, the peak probe, the run itself).

Every module here imports TensorFlow except ``process`` (the child's entry point, which
loads it after the checks). What both engines share is in bench/harness/. This
``__init__`` imports nothing.
"""
