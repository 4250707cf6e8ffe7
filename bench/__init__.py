"""podbench harness: everything that runs TensorFlow or talks to the user.

Packages by concern (ARCHITECTURE.md draws the map): ``cli`` (argv -> command),
``train`` (one TensorFlow process), ``data`` (tf.data and TFRecords),
``results`` (what a run writes, read back), ``report`` (tables, charts, text),
``cluster`` (more than one process). At the top: ``config`` (what the user asked
for), ``resolve`` (what will run), ``presets``, ``errors``, ``humanize``.
"""
# Imported for its side effect: sets TF_USE_LEGACY_KERAS before TensorFlow loads.
import models  # noqa: F401
