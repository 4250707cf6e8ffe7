"""podbench harness: everything that runs TensorFlow or talks to the user."""
# Imported for its side effect: sets TF_USE_LEGACY_KERAS before TensorFlow loads.
import models  # noqa: F401
