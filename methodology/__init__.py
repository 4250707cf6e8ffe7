"""The rules and the arithmetic of podbench. Pure Python + pandas; never imports TensorFlow."""
