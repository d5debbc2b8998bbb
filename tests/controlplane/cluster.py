"""A real etcd + kube-apiserver on loopback, for end-to-end tests and local use.

The binaries come from ``build.sh`` (built once from Debian packages and cached
outside the repository). There is no kubelet, controller-manager or scheduler:
pods are stored but never run, so tests assert on API objects.

    with ControlPlane() as cp:
        api = kubernetes.client.CoreV1Api(cp.api_client())

``python -m tests.controlplane.cluster`` starts one and waits for Ctrl-C.

This module is the package's front: the names tests and benchmarks import
(``ControlPlane``, ``ChildProcess``, ``free_port``, ``ensure_binaries``, ``make_ca``,
``make_serving_cert``...) and the command line. The pieces live beside it:
``control_plane`` (the class), ``binaries`` (build.sh's output), ``pki`` (certificates
and the admin kubeconfig), ``daemons`` (etcd's and the apiserver's flags and probes) and
``processes`` (child processes in their own groups).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tests.controlplane.binaries import Binaries, ControlPlaneError, ensure_binaries
from tests.controlplane.control_plane import ControlPlane
from tests.controlplane.pki import KeyPair, make_ca, make_client_cert, make_serving_cert
from tests.controlplane.processes import ChildProcess, free_port

__all__ = [
    "Binaries",
    "ChildProcess",
    "ControlPlane",
    "ControlPlaneError",
    "KeyPair",
    "ensure_binaries",
    "free_port",
    "make_ca",
    "make_client_cert",
    "make_serving_cert",
]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.controlplane.cluster",
        description="Start etcd + kube-apiserver on loopback and wait for Ctrl-C.",
    )
    parser.add_argument("--workdir", type=Path, help="keep certificates, logs and kubeconfig here")
    parser.add_argument(
        "--apiserver-arg",
        action="append",
        default=[],
        metavar="FLAG",
        help="extra kube-apiserver flag, e.g. --apiserver-arg=--v=4 (repeatable)",
    )
    args = parser.parse_args(argv)

    cp = ControlPlane(workdir=args.workdir, extra_apiserver_args=args.apiserver_arg)
    stop = False

    def on_signal(_signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with cp:
        print(f"control plane up in {cp.startup_seconds:.1f}s", flush=True)
        print(f"server:     {cp.server}")
        print(f"kubeconfig: {cp.kubeconfig}")
        print(f"kubectl:    {cp.kubectl_path}")
        print(f"logs:       {cp.workdir}")
        print(f"\nexport KUBECONFIG={cp.kubeconfig}\nalias kubectl={cp.kubectl_path}")
        print("\nCtrl-C stops it.", flush=True)
        while not stop:
            time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
