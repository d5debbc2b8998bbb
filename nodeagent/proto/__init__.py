"""Generated Python modules of the kubelet device-plugin API v1beta1 (see ``api.proto``).

Do not edit ``api_pb2*``; run ``nodeagent/proto/generate.sh`` after changing the proto.
"""

from __future__ import annotations
