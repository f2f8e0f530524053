"""The schema is Paddle's, and the committed bindings are generated from it."""
from __future__ import annotations

import subprocess
import sys

import pytest
from google.protobuf import descriptor_pb2

from conftest import ROOT, TESTDATA
from pybackward._proto import framework_pb2


def _ours() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto()
    framework_pb2.DESCRIPTOR.CopyToProto(fd)
    return fd


def test_schema_matches_paddle_3_3_1_descriptor():
    paddle = descriptor_pb2.FileDescriptorProto()
    paddle.ParseFromString((TESTDATA / "schema" / "paddle_3.3.1_framework_descriptor.pb").read_bytes())
    ours = _ours()
    assert ours.package == paddle.package == "paddle.framework.proto"
    for fd in (ours, paddle):
        fd.ClearField("name")
        fd.ClearField("syntax")  # "" and "proto2" mean the same
    ours_msgs = {m.name: m for m in ours.message_type}
    for m in paddle.message_type:
        assert ours_msgs.get(m.name) == m, f"message {m.name} differs from Paddle's"
    assert list(ours.enum_type) == list(paddle.enum_type)
    assert ours == paddle


def test_enum_values_the_issue_names():
    VT = framework_pb2.VarType
    assert VT.DENSE_TENSOR == 7 and VT.FP32 == 5 and VT.DENSE_TENSOR_ARRAY == 13
    assert [framework_pb2.AttrType.Value(n) for n in ("INT", "SCALARS")] == [0, 17]
    assert framework_pb2.BlockDesc().forward_block_idx == -1


def test_committed_bindings_are_fresh(tmp_path):
    pytest.importorskip("grpc_tools")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}",
                    f"--python_out={tmp_path}", str(ROOT / "proto" / "framework.proto")], check=True)
    fresh = (tmp_path / "framework_pb2.py").read_text()
    committed = (ROOT / "pybackward" / "_proto" / "framework_pb2.py").read_text()
    assert fresh == committed, ("pybackward/_proto/framework_pb2.py is stale: regenerate with "
                                "python -m grpc_tools.protoc -Iproto --python_out=pybackward/_proto proto/framework.proto")
