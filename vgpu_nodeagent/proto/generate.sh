#!/usr/bin/env sh
# Regenerate the Python modules of the kubelet device-plugin API (api.proto) and of the
# kubelet pod-resources API (podresources.proto).
# Needs grpcio-tools and mypy-protobuf (both in the `dev` extra):
#   pip install -e '.[dev]' && vgpu_nodeagent/proto/generate.sh
# The include root is the repository root and the files are named by their package path,
# so the generated gRPC module imports `vgpu_nodeagent.proto.api_pb2` as a package import. The proto packages stay `v1beta1` and `v1`,
# so the RPC paths (/v1beta1.DevicePlugin/Allocate, /v1.PodResourcesLister/List) are the
# kubelet's.
set -eu
cd "$(dirname "$0")/../.."
python="${PYTHON:-python}"
"$python" -m grpc_tools.protoc -I . \
    --python_out=. --grpc_python_out=. \
    --mypy_out=. --mypy_grpc_out=. \
    vgpu_nodeagent/proto/api.proto vgpu_nodeagent/proto/podresources.proto
echo "regenerated vgpu_nodeagent/proto/{api,podresources}_pb2*.py{,i}"
