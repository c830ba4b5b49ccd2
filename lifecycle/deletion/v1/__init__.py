"""The deletion contract's messages, generated from proto/lifecycle/deletion/v1/service.proto by `make proto`.

service_pb2.py and service_pb2.pyi are protoc's output, committed: never edit them, change the .proto and run
`make proto` (tests/contract/test_generated_code.py fails while they differ from what it generates).
"""
