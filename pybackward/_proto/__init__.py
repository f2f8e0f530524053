"""Generated protobuf bindings of Paddle's framework.proto (`python -m grpc_tools.protoc -Iproto
--python_out=pybackward/_proto proto/framework.proto`); nothing here is edited by hand.
May import: nothing of pybackward.
"""
