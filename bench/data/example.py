"""tf.train.Example, written and read without TensorFlow.

A TFRecord of ImageNet holds one serialized ``tf.train.Example``: a map from
feature names to lists of bytes, 64-bit integers or floats. TensorFlow's
classes come from tensorflow/core/example/{example,feature}.proto, which no
package without TensorFlow ships (TensorBoard bundles other protos, not these),
so the same messages are declared here, field for field, in a descriptor pool of
their own, and protobuf's runtime (installed with grain, TensorBoard and
TensorFlow alike) parses and serializes them: the bytes are TensorFlow's
(tests/test_data_example.py checks both ways), and no wire format is parsed by
hand. The pool is private, so TensorFlow's own ``tensorflow.Example`` loaded in
the same process cannot clash with it.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping, Sequence

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

# What a feature holds, as tf.train.Feature's ``kind`` oneof names it.
KINDS = ("bytes_list", "float_list", "int64_list")
_PACKAGE = "podbench.tfexample"

Value = bytes | str | int | float
FeatureValue = Value | Sequence[Value]


@dataclass(frozen=True)
class Feature:
    """One feature of a parsed Example.

    Attributes:
      kind: "bytes_list", "float_list" or "int64_list"; None when the feature is set to no kind at all
        (TensorFlow's parser then treats it as absent).
      values: its values (bytes, float or int), possibly none.
    """

    kind: str | None
    values: tuple

    def __post_init__(self):
        if self.kind is not None and self.kind not in KINDS:
            raise ValueError(f"unknown feature kind {self.kind!r}; one of: {', '.join(KINDS)}")
        if self.kind is None and self.values:
            raise ValueError("a feature of no kind holds no values")


def serialize_example(features: Mapping[str, FeatureValue]) -> bytes:
    """A serialized tf.train.Example holding ``features``, byte for byte what TensorFlow's deterministic
    serialization writes.

    Deterministic: the features' map is written in key order. protobuf's default order
    follows its hash table, whose seed changes from process to process, so the same
    record written twice (a synthetic set made with more processes, a rerun) would
    differ in its bytes; parsed, both orders are the same Example.

    Args:
      features: name -> a value or a list of values of one type: bytes or str (a bytes_list; str is
        stored as UTF-8), int (an int64_list) or float (a float_list).

    Returns:
      The serialized Example.

    Raises:
      ValueError: an empty list (its kind cannot be told), a list mixing types, a bool, or an int
        beyond 64 bits.
    """
    example = _example_class()()
    feature_map = example.features.feature
    for name, value in features.items():
        kind, values = _kind_of(name, value)
        getattr(feature_map[name], kind).value.extend(values)
    return example.SerializeToString(deterministic=True)


def parse_example(serialized: bytes) -> dict[str, Feature]:
    """The features of a serialized tf.train.Example.

    Raises:
      ValueError: the bytes are not an Example (protobuf's DecodeError).
    """
    try:
        example = _example_class().FromString(serialized)
    except message.DecodeError as err:
        raise ValueError(f"not a tf.train.Example ({err})") from None
    parsed = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        parsed[name] = Feature(kind, tuple(getattr(feature, kind).value) if kind else ())
    return parsed


def _kind_of(name: str, value: FeatureValue) -> tuple[str, list]:
    """(the list kind, the values as protobuf takes them) of one feature."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise ValueError(f"feature {name!r} is an empty list: its kind (bytes, int or float) cannot be told")
    types = {type(v) for v in values}
    if bool in types or len(types) != 1 or not types <= {bytes, str, int, float}:
        names = ", ".join(sorted(t.__name__ for t in types))
        raise ValueError(f"feature {name!r} must hold values of one type, bytes, str, int or float; got {names}")
    (kind_type,) = types
    if kind_type is int:
        if any(not -2**63 <= v < 2**63 for v in values):
            raise ValueError(f"feature {name!r} holds an int beyond 64 bits")
        return "int64_list", values
    if kind_type is float:
        return "float_list", values
    return "bytes_list", [v.encode() if isinstance(v, str) else v for v in values]


@lru_cache(maxsize=1)
def _example_class():
    """tf.train.Example's message class, built once from the declaration below."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_example_proto())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.Example"))


def _example_proto() -> descriptor_pb2.FileDescriptorProto:
    """example.proto and feature.proto as TensorFlow declares them: the same messages, fields and numbers.

    BytesList, FloatList, Int64List {repeated value = 1} (the numbers packed); Feature {oneof kind:
    bytes_list = 1, float_list = 2, int64_list = 3}; Features {map<string, Feature> feature = 1};
    Example {Features features = 1}.
    """
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="podbench/tfexample.proto", package=_PACKAGE, syntax="proto3")

    def message_type(name: str) -> descriptor_pb2.DescriptorProto:
        return proto.message_type.add(name=name)

    for name, value_type in (("BytesList", field.TYPE_BYTES), ("FloatList", field.TYPE_FLOAT),
                             ("Int64List", field.TYPE_INT64)):
        values = message_type(name).field.add(name="value", number=1, label=field.LABEL_REPEATED, type=value_type)
        if value_type != field.TYPE_BYTES:
            values.options.packed = True
    feature = message_type("Feature")
    feature.oneof_decl.add(name="kind")
    for number, (kind, type_name) in enumerate(zip(KINDS, ("BytesList", "FloatList", "Int64List")), start=1):
        feature.field.add(name=kind, number=number, label=field.LABEL_OPTIONAL, type=field.TYPE_MESSAGE,
                          type_name=f".{_PACKAGE}.{type_name}", oneof_index=0)
    features = message_type("Features")
    entry = features.nested_type.add(name="FeatureEntry")  # what protobuf makes of a map field
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, label=field.LABEL_OPTIONAL, type=field.TYPE_STRING)
    entry.field.add(name="value", number=2, label=field.LABEL_OPTIONAL, type=field.TYPE_MESSAGE,
                    type_name=f".{_PACKAGE}.Feature")
    features.field.add(name="feature", number=1, label=field.LABEL_REPEATED, type=field.TYPE_MESSAGE,
                       type_name=f".{_PACKAGE}.Features.FeatureEntry")
    message_type("Example").field.add(name="features", number=1, label=field.LABEL_OPTIONAL,
                                      type=field.TYPE_MESSAGE, type_name=f".{_PACKAGE}.Features")
    return proto
