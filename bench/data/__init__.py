"""tf.data input and the TFRecord format: pipeline, preprocessing, records, framing, tools.

``spec`` (what a pipeline must produce) and ``tfrecord`` (the file framing)
import no TensorFlow; the rest do. This ``__init__`` imports nothing.
"""
