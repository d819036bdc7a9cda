"""TFRecord files as TensorFlow writes them, made without TensorFlow:
tf.train.Example messages built and serialized by protobuf's own runtime
(Debian's python3-protobuf), from the schema of tensorflow/core/example/
example.proto and feature.proto declared here with protobuf's descriptor
API, and framed as tf.io.TFRecordWriter frames them (uint64 length, masked
CRC-32C of the length, data, masked CRC-32C of the data), the CRC from
python3-crc32c. Used by test_tfrecord.py and tests/fuzz/make_format_seeds.py."""
import gzip
import struct

import crc32c
from google.protobuf import descriptor_pb2, message_factory


def example_classes(packed):
    """tensorflow.Example and its parts, from feature.proto's schema; with
    packed False the number lists are declared [packed = false], so that
    protobuf writes each value as its own field (what proto2 writers and
    older TensorFlow did)."""
    F = descriptor_pb2.FieldDescriptorProto
    pkg = "tensorflow" if packed else "tensorflow_unpacked"
    fdp = descriptor_pb2.FileDescriptorProto(name=pkg + "/example.proto", package=pkg, syntax="proto3")

    def lst(name, kind):
        m = fdp.message_type.add(name=name)
        f = m.field.add(name="value", number=1, type=kind, label=F.LABEL_REPEATED)
        if kind != F.TYPE_BYTES:
            f.options.packed = packed

    lst("BytesList", F.TYPE_BYTES)
    lst("FloatList", F.TYPE_FLOAT)
    lst("Int64List", F.TYPE_INT64)
    feat = fdp.message_type.add(name="Feature")
    feat.oneof_decl.add(name="kind")
    for n, (name, t) in enumerate((("bytes_list", "BytesList"), ("float_list", "FloatList"),
                                   ("int64_list", "Int64List")), 1):
        feat.field.add(name=name, number=n, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                       type_name=".%s.%s" % (pkg, t), oneof_index=0)
    fs = fdp.message_type.add(name="Features")
    entry = fs.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".%s.Feature" % pkg)
    fs.field.add(name="feature", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                 type_name=".%s.Features.FeatureEntry" % pkg)
    ex = fdp.message_type.add(name="Example")
    ex.field.add(name="features", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                 type_name=".%s.Features" % pkg)
    return message_factory.GetMessages([fdp])[pkg + ".Example"]


EXAMPLE = example_classes(True)
EXAMPLE_UNPACKED = example_classes(False)


def example(values, cls=EXAMPLE):
    """values: key -> bytes / list of bytes, int / list of ints, float list."""
    ex = cls()
    for key, v in values.items():
        f = ex.features.feature[key]
        v = v if isinstance(v, list) else [v]
        if v and isinstance(v[0], bytes):
            f.bytes_list.value.extend(v)
        elif v and isinstance(v[0], float):
            f.float_list.value.extend(v)
        else:
            f.int64_list.value.extend(v)
    return ex.SerializeToString()


def masked(data):
    c = crc32c.crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(data):
    """One record as tf.io.TFRecordWriter writes it."""
    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", masked(n)) + data + struct.pack("<I", masked(data))


def write(path, records, compress=False):
    body = b"".join(frame(r) for r in records)
    path.write_bytes(gzip.compress(body) if compress else body)
    return body
