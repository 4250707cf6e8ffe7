"""The input and the TFRecord format: tf.data's pipeline and grain's, preprocessing, records, framing, tools.

tf.data's modules (``pipeline``, ``preprocess``, ``record_checks``, ``tools``)
import TensorFlow; the grain input's (``grain_input``, ``record_index``,
``jpeg``) and what both share (``spec``, ``records``, ``example``,
``record_problems``, ``tfrecord``, ``synthetic_jpegs``, ``synthetic_set``)
do not (ARCHITECTURE.md says where TensorFlow still loads). This ``__init__``
imports nothing.
"""
