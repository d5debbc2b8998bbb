"""Generated Python modules of the kubelet's gRPC APIs: device plugin v1beta1
(``api.proto``) and pod resources v1 (``podresources.proto``).

Do not edit ``*_pb2*``; run ``vgpu_nodeagent/proto/generate.sh`` after changing a proto.
"""

from __future__ import annotations
