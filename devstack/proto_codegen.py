"""`python -m devstack.proto_codegen` (`make proto`): compile proto/ for Python with the locked protoc.

protoc comes from grpcio-tools and the typed stubs (.pyi) from mypy-protobuf, both dev dependencies; the generated
modules are committed next to the package they mirror (proto/lifecycle/deletion/v1/service.proto becomes
lifecycle/deletion/v1/service_pb2.py and .pyi), so the image needs only the protobuf runtime.
tests/contract/test_generated_code.py regenerates into a temporary folder and fails if the committed code differs.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = PROJECT_ROOT / "proto"
# What protoc writes for each .proto: the messages and their stubs.
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi")


def proto_files(root: Path = PROTO_ROOT) -> list[Path]:
    return sorted(root.rglob("*.proto"))


def compile_protos(out: Path, root: Path = PROTO_ROOT) -> list[Path]:
    """Compile every .proto under `root` into `out`, as packages mirroring the protobuf packages' paths; returns
    the files written. Also used by the tests for their own older and newer versions of the contract."""
    protos = proto_files(root)
    plugin = Path(sys.executable).parent / "protoc-gen-mypy"
    well_known_types = resources.files("grpc_tools") / "_proto"
    args = [
        "grpc_tools.protoc",
        f"--proto_path={root}",
        f"--proto_path={well_known_types}",
        f"--plugin=protoc-gen-mypy={plugin}",
        f"--python_out={out}",
        f"--mypy_out={out}",
        *(str(proto.relative_to(root)) for proto in protos),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {root}")
    return generated_files(out, root)


def generated_files(out: Path, root: Path = PROTO_ROOT) -> list[Path]:
    """The files compile_protos writes into `out` for the .proto files under `root`."""
    files = []
    for proto in proto_files(root):
        stem = out / proto.relative_to(root).with_suffix("")
        files += [stem.with_name(stem.name + suffix) for suffix in GENERATED_SUFFIXES]
    return files


if __name__ == "__main__":
    for written in compile_protos(PROJECT_ROOT):
        print(written.relative_to(PROJECT_ROOT))
