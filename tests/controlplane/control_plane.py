"""The :class:`ControlPlane`: etcd + kube-apiserver on free loopback ports, stopped on exit.

Its lifecycle (workdir, PKI, processes, retries on a lost port, bootstrap) and the client
surface tests use (``api_client()``, ``kubectl()``, ``ensure_namespace()``,
``etcd_compact()``). Tests import it from :mod:`tests.controlplane.cluster`.
"""

from __future__ import annotations

import base64
import os
import shutil
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

import kubernetes.client

from tests.controlplane.binaries import Binaries, ControlPlaneError, ensure_binaries
from tests.controlplane.daemons import (
    ServedTo,
    apiserver_args,
    apiserver_ready,
    etcd_args,
    etcd_healthy,
    etcd_post,
)
from tests.controlplane.pki import write_kubeconfig, write_pki
from tests.controlplane.processes import ChildProcess, ExitedEarly, free_port, wait_until


class ControlPlane:
    """etcd + kube-apiserver on free loopback ports, stopped on exit.

    ``feature_gates`` and ``extra_apiserver_args`` let a test change the
    apiserver's flags; the defaults are the ones the whole e2e suite expects.
    """

    def __init__(
        self,
        *,
        workdir: Path | None = None,
        keep_workdir: bool = False,
        extra_apiserver_args: Sequence[str] = (),
        startup_timeout: float = 90.0,
        binaries: Binaries | None = None,
        served_to: ServedTo | None = None,
        etcd_for_apiserver: Callable[[str], str] | None = None,
    ) -> None:
        self._requested_workdir = workdir
        self._keep = keep_workdir or bool(os.environ.get("VGPUDEV_KEEP_CP"))
        #: Set for a cluster with pod networking (``real_cluster``), None on loopback only.
        self.served_to = served_to
        self._extra_args = [*(served_to.apiserver_args() if served_to else ()),
                            *extra_apiserver_args]
        self._startup_timeout = startup_timeout
        self._binaries = binaries
        #: The etcd URL the API server is given, from etcd's own (a proxy in between).
        self._etcd_for_apiserver = etcd_for_apiserver or (lambda url: url)
        self._procs: list[ChildProcess] = []
        self._workdir: Path | None = None
        self._etcd_data: Path | None = None
        self._etcd_url = ""
        self._server = ""
        self._tls: ssl.SSLContext | None = None
        self.startup_seconds = 0.0

    # --- public surface ---------------------------------------------------------

    @property
    def workdir(self) -> Path:
        if self._workdir is None:
            raise ControlPlaneError("control plane not started")
        return self._workdir

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def server(self) -> str:
        """The apiserver's URL, ``https://127.0.0.1:PORT``."""
        if not self._server:
            raise ControlPlaneError("control plane not started")
        return self._server

    @property
    def ca_cert(self) -> Path:
        return self.workdir / "ca.crt"

    @property
    def etcd_url(self) -> str:
        if not self._etcd_url:
            raise ControlPlaneError("control plane not started")
        return self._etcd_url

    @property
    def binaries(self) -> Binaries:
        if self._binaries is None:
            self._binaries = ensure_binaries()
        return self._binaries

    @property
    def kubectl_path(self) -> Path:
        return self.binaries.kubectl

    @property
    def pids(self) -> list[int]:
        """Process ids of the running etcd and kube-apiserver."""
        return [p.popen.pid for p in self._procs if p.alive()]

    @property
    def apiserver_log(self) -> Path:
        return self.workdir / "kube-apiserver.log"

    def api_client(self) -> kubernetes.client.ApiClient:
        """A new client authenticated as cluster admin (``O=system:masters``)."""
        config = kubernetes.client.Configuration(host=self.server)
        config.ssl_ca_cert = str(self.ca_cert)
        config.cert_file = str(self.workdir / "admin.crt")
        config.key_file = str(self.workdir / "admin.key")
        return kubernetes.client.ApiClient(config)

    def kubectl(
        self, *args: str, check: bool = True, input_text: str | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl against this control plane."""
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        proc = subprocess.run(
            [str(self.kubectl_path), *args],
            input=input_text,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise ControlPlaneError(
                f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}{proc.stdout}"
            )
        return proc

    def ensure_namespace(self, name: str) -> None:
        """Create a namespace, its ``default`` ServiceAccount and ``kube-root-ca.crt``.

        There is no controller-manager to make them: the ServiceAccount admission plugin
        refuses pods whose account is missing, and a real kubelet cannot mount a pod's
        service-account token volume without the CA ConfigMap.
        """
        with self.api_client() as api_client:
            core = kubernetes.client.CoreV1Api(api_client)
            k = kubernetes.client
            namespace = k.V1Namespace(metadata=k.V1ObjectMeta(name=name))
            account = k.V1ServiceAccount(metadata=k.V1ObjectMeta(name="default"))
            root_ca = k.V1ConfigMap(metadata=k.V1ObjectMeta(name="kube-root-ca.crt"),
                                    data={"ca.crt": self.ca_cert.read_text()})
            _create_ignoring_conflict(lambda: core.create_namespace(namespace))
            _create_ignoring_conflict(lambda: core.create_namespaced_service_account(name, account))
            _create_ignoring_conflict(lambda: core.create_namespaced_config_map(name, root_ca))

    def etcd_compact(self) -> int:
        """Compact etcd up to its current revision; returns that revision.

        Talks to etcd's JSON gateway directly (no etcdctl in Debian's
        etcd-server), so that reads at an older resourceVersion get 410 Gone.
        """
        header = etcd_post(self.etcd_url, "/v3/kv/range",
                           {"key": base64.b64encode(b"/").decode()})
        revision = int(header["header"]["revision"])
        etcd_post(self.etcd_url, "/v3/kv/compaction",
                  {"revision": str(revision), "physical": True})
        return revision

    # --- lifecycle ----------------------------------------------------------------

    def start(self) -> ControlPlane:
        if self._procs:
            raise ControlPlaneError("already started")
        binaries = self.binaries
        began = time.monotonic()
        if self._requested_workdir is not None:
            self._requested_workdir.mkdir(parents=True, exist_ok=True)
            self._workdir = self._requested_workdir
        else:
            self._workdir = Path(tempfile.mkdtemp(prefix="vgpu-cp-"))
        try:
            write_pki(self.workdir, [self.served_to.advertise_address,
                                     self.served_to.kubernetes_service_ip]
                      if self.served_to else [])
            # Ports are picked and then bound by the child, so another process
            # can take one in between; a retry with fresh ports covers that.
            last_error: ControlPlaneError | None = None
            for _attempt in range(3):
                try:
                    self._start_processes(binaries)
                    break
                except ExitedEarly as e:
                    last_error = e
                    self._stop_processes()
            else:
                assert last_error is not None
                raise last_error
            self._bootstrap()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        self._stop_processes()
        if self._workdir is not None and not self._keep and self._requested_workdir is None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        self._server = ""
        self._etcd_url = ""
        self._tls = None

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- internals ----------------------------------------------------------------

    def _start_processes(self, binaries: Binaries) -> None:
        wd = self.workdir
        etcd_client, etcd_peer, api_port = free_port(), free_port(), free_port()
        # etcd fsyncs every write; on tmpfs that costs nothing, which keeps a
        # suite of many small writes fast on a shared 2-core machine.
        shm = Path("/dev/shm")
        data_parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else wd
        self._etcd_data = Path(tempfile.mkdtemp(prefix="vgpu-cp-etcd-", dir=data_parent))
        self._etcd_url = f"http://127.0.0.1:{etcd_client}"
        peer_url = f"http://127.0.0.1:{etcd_peer}"
        etcd = ChildProcess("etcd", etcd_args(binaries.etcd, self._etcd_data, self._etcd_url,
                                              peer_url), wd / "etcd.log")
        self._procs.append(etcd)
        self._wait_until(etcd, "etcd /health", lambda: etcd_healthy(self._etcd_url))

        self._server = f"https://127.0.0.1:{api_port}"
        args = apiserver_args(binaries.kube_apiserver, wd,
                              self._etcd_for_apiserver(self._etcd_url), api_port,
                              self._extra_args)
        apiserver = ChildProcess("kube-apiserver", args, wd / "kube-apiserver.log")
        self._procs.append(apiserver)
        write_kubeconfig(self.kubeconfig, self.server, wd)
        self._wait_until(apiserver, "kube-apiserver /readyz", self._apiserver_ready)

    def _wait_until(self, proc: ChildProcess, what: str, probe: Callable[[], bool]) -> None:
        wait_until(proc, what, probe, self._startup_timeout)

    def _apiserver_ready(self) -> bool:
        if self._tls is None:
            self._tls = ssl.create_default_context(cafile=str(self.ca_cert))
            self._tls.load_cert_chain(
                str(self.workdir / "admin.crt"), str(self.workdir / "admin.key")
            )
        return apiserver_ready(self._server, self._tls)

    def _bootstrap(self) -> None:
        # /readyz does not wait for the bootstrap controller to create the
        # system namespaces; tests that write into "default" at once would race it.
        deadline = time.monotonic() + self._startup_timeout
        with self.api_client() as api_client:
            core = kubernetes.client.CoreV1Api(api_client)
            while True:
                try:
                    core.read_namespace("default")
                    break
                except kubernetes.client.ApiException as e:
                    if e.status != 404 or time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        self.ensure_namespace("default")

    def _stop_processes(self) -> None:
        # apiserver first: stopping etcd under it only makes it log errors.
        for proc in reversed(self._procs):
            proc.stop()
        self._procs.clear()
        if self._etcd_data is not None:
            shutil.rmtree(self._etcd_data, ignore_errors=True)
            self._etcd_data = None


def _create_ignoring_conflict(create: Callable[[], object]) -> None:
    try:
        create()
    except kubernetes.client.ApiException as e:
        if e.status != 409:
            raise

