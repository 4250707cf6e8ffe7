"""Model builders. Imports TensorFlow only in submodules, never here.

TF 2.20's ``tf.keras`` is Keras 3, while tf-models-official builds tf_keras
(Keras 2) models, so TensorFlow must see ``TF_USE_LEGACY_KERAS=1`` before it
first loads. This is the one place that sets it: ``bench`` imports this
package before anything of its own touches TensorFlow, and tests that import
``models.resnet`` directly come through here too.
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
