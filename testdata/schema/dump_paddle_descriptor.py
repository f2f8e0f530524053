"""Write the FileDescriptorProto of Paddle's framework.proto, as the wheel ships it.

Run with a Python that has paddlepaddle==3.3.1:
    FLAGS_enable_pir_api=0 python testdata/schema/dump_paddle_descriptor.py
tests/legacy/test_schema.py compares pybackward's schema with this snapshot.
"""
import os
import pathlib

os.environ.setdefault("FLAGS_enable_pir_api", "0")
from google.protobuf import descriptor_pb2  # noqa: E402
from paddle.base.proto import framework_pb2  # noqa: E402

fd = descriptor_pb2.FileDescriptorProto()
framework_pb2.DESCRIPTOR.CopyToProto(fd)
out = pathlib.Path(__file__).with_name("paddle_3.3.1_framework_descriptor.pb")
out.write_bytes(fd.SerializeToString(deterministic=True))
print(out)
