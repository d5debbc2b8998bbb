"""etcd and kube-apiserver: their command lines and the probes that say they are up.

The flags are the ones the whole e2e suite expects (``tests/controlplane/README.md``
explains each); :class:`tests.controlplane.cluster.ControlPlane` starts the processes
and adds a test's own apiserver flags after these.
"""

from __future__ import annotations

import ipaddress
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Inside --service-cluster-ip-range; the apiserver's own Service IP goes into
# its serving certificate, as for a real cluster.
SERVICE_CIDR = "10.0.0.0/24"
KUBERNETES_SERVICE_IP = "10.0.0.1"
SA_ISSUER = "https://kubernetes.default.svc"


@dataclass(frozen=True)
class ServedTo:
    """Where the apiserver of a cluster with pod networking is reached
    (:mod:`tests.controlplane.real_cluster`): the pods reach it through the ``kubernetes``
    Service, whose endpoint is ``advertise_address``, and the cluster's Services get their
    IPs from ``service_cidr``, which is routed to the node where kube-proxy serves them."""

    advertise_address: str
    service_cidr: str

    @property
    def kubernetes_service_ip(self) -> str:
        """The first address of the range: the ``kubernetes`` Service's, in the
        apiserver's certificate as the pods' clients dial it."""
        return str(next(ipaddress.ip_network(self.service_cidr).hosts()))

    def apiserver_args(self) -> list[str]:
        # Every address: the host's clients keep using 127.0.0.1, the node's the
        # advertised one. The lease reconciler writes that one into the kubernetes
        # Service's Endpoints, which kube-proxy reads.
        return ["--bind-address=0.0.0.0", f"--advertise-address={self.advertise_address}",
                "--endpoint-reconciler-type=lease",
                f"--service-cluster-ip-range={self.service_cidr}"]


def etcd_args(etcd: Path, data_dir: Path, client_url: str, peer_url: str) -> list[str]:
    """A single-member etcd serving ``client_url``, its data in ``data_dir``."""
    return [
        str(etcd),
        "--name=vgpu-e2e",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=vgpu-e2e={peer_url}",
        "--initial-cluster-state=new",
        "--logger=zap",
        "--log-outputs=stderr",
        "--log-level=warn",
    ]


def apiserver_args(kube_apiserver: Path, wd: Path, etcd_url: str, port: int,
                   extra: Sequence[str] = ()) -> list[str]:
    """kube-apiserver on loopback ``port``, its PKI files in ``wd``, then ``extra``."""
    return [
        str(kube_apiserver),
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        "--insecure-port=0",
        f"--tls-cert-file={wd / 'apiserver.crt'}",
        f"--tls-private-key-file={wd / 'apiserver.key'}",
        f"--client-ca-file={wd / 'ca.crt'}",
        "--authorization-mode=RBAC",
        f"--service-account-issuer={SA_ISSUER}",
        f"--service-account-key-file={wd / 'sa.pub'}",
        f"--service-account-signing-key-file={wd / 'sa.key'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # Projected, bound tokens: a pod then needs only its ServiceAccount
        # to exist, not a token Secret that no controller-manager would make.
        "--feature-gates=BoundServiceAccountTokenVolume=true",
        # Without a node lifecycle controller every new Node would keep the
        # not-ready taint this plugin adds.
        "--disable-admission-plugins=TaintNodesByCondition",
        # No kube-proxy or endpoints to keep; the reconciler would only
        # write the loopback address into the kubernetes Service.
        "--endpoint-reconciler-type=none",
        # The webhook must see (and deny) privileged vGPU pods; without this
        # the apiserver refuses them before admission.
        "--allow-privileged=true",
        # A real node's kubelet (tests/controlplane/real_node.py) accepts only clients of
        # the test CA, and its Hostname address (the node's name) resolves nowhere:
        # `kubectl logs` and exec reach it by its InternalIP with the admin certificate.
        f"--kubelet-client-certificate={wd / 'admin.crt'}",
        f"--kubelet-client-key={wd / 'admin.key'}",
        "--kubelet-preferred-address-types=InternalIP",
        "--profiling=false",
        *extra,
    ]


def etcd_healthy(etcd_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{etcd_url}/health", timeout=2) as resp:
            return bool(json.load(resp).get("health") == "true")
    except (OSError, ValueError):
        return False


def etcd_post(etcd_url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """A request to etcd's JSON gateway (there is no etcdctl in Debian's etcd-server)."""
    req = urllib.request.Request(
        f"{etcd_url}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        answer: dict[str, Any] = json.load(resp)
        return answer


def apiserver_ready(server: str, tls: ssl.SSLContext) -> bool:
    try:
        with urllib.request.urlopen(f"{server}/readyz", timeout=2, context=tls) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False
