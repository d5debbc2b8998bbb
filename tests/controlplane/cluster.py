"""A real etcd + kube-apiserver on loopback, for end-to-end tests and local use.

The binaries come from ``build.sh`` (built once from Debian packages and cached
outside the repository). There is no kubelet, controller-manager or scheduler:
pods are stored but never run, so tests assert on API objects.

    with ControlPlane() as cp:
        api = kubernetes.client.CoreV1Api(cp.api_client())

``python -m tests.controlplane.cluster`` starts one and waits for Ctrl-C.
"""

from __future__ import annotations

import argparse
import base64
import collections
import contextlib
import datetime
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import kubernetes.client
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HERE = Path(__file__).resolve().parent
BUILD_SCRIPT = HERE / "build.sh"

# Inside --service-cluster-ip-range; the apiserver's own Service IP goes into
# its serving certificate, as for a real cluster.
SERVICE_CIDR = "10.0.0.0/24"
KUBERNETES_SERVICE_IP = "10.0.0.1"
SA_ISSUER = "https://kubernetes.default.svc"
ADMIN_USER = "vgpu-e2e-admin"


class ControlPlaneError(RuntimeError):
    """The binaries could not be built, or the control plane did not come up."""


class _ExitedEarly(ControlPlaneError):
    """A child exited during startup: most often a port taken since we picked it."""


@dataclass(frozen=True)
class Binaries:
    kube_apiserver: Path
    kubectl: Path
    etcd: Path


def ensure_binaries(build_script: Path = BUILD_SCRIPT) -> Binaries:
    """Run build.sh (instant once cached) and return the binaries it made.

    Its progress is passed on to our stderr as it comes (a cold build takes
    minutes, and silence would look like a hang) and its last lines go into
    the error, so that a failed build is explained wherever it is reported.
    """
    proc = subprocess.Popen(
        ["bash", str(build_script)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    tail: collections.deque[str] = collections.deque(maxlen=30)
    for line in proc.stderr:
        sys.stderr.write(line)
        tail.append(line)
    lines = proc.stdout.read().strip().splitlines()
    returncode = proc.wait()
    if returncode != 0 or not lines:
        raise ControlPlaneError(
            f"{build_script} failed with exit code {returncode}:\n{''.join(tail)}"
        )
    bin_dir = Path(lines[-1])
    binaries = Binaries(bin_dir / "kube-apiserver", bin_dir / "kubectl", bin_dir / "etcd")
    for path in (binaries.kube_apiserver, binaries.kubectl, binaries.etcd):
        if not os.access(path, os.X_OK):
            raise ControlPlaneError(f"{build_script} reported {bin_dir} but {path} is missing")
    return binaries


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# --- certificates -----------------------------------------------------------------


@dataclass(frozen=True)
class KeyPair:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org is not None:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _issue(
    subject: x509.Name,
    issuer: KeyPair | None,
    *,
    ca: bool = False,
    server_names: Sequence[str] = (),
    server_ips: Sequence[str] = (),
    client: bool = False,
) -> KeyPair:
    key = ec.generate_private_key(ec.SECP256R1())
    # Backdated a little: the apiserver and the client may see a clock a few
    # seconds apart from the one that signed.
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.cert.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        builder = builder.add_extension(
            x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
        )
    else:
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [ExtendedKeyUsageOID.SERVER_AUTH]
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server_names or server_ips:
        sans: list[x509.GeneralName] = [x509.DNSName(n) for n in server_names]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    signer = issuer.key if issuer else key
    return KeyPair(builder.sign(signer, hashes.SHA256()), key)


def make_ca(common_name: str) -> KeyPair:
    """A self-signed CA, e.g. for a webhook server under test."""
    return _issue(_name(common_name), None, ca=True)


def make_serving_cert(
    ca: KeyPair, common_name: str, *, names: Sequence[str] = (), ips: Sequence[str] = ()
) -> KeyPair:
    return _issue(_name(common_name), ca, server_names=names, server_ips=ips)


def make_client_cert(ca: KeyPair, user: str, group: str | None = None) -> KeyPair:
    """A client certificate; the apiserver reads CN as the user and O as the group."""
    return _issue(_name(user, group), ca, client=True)


def _die_with_parent(argv: Sequence[str]) -> list[str]:
    # If the Python process dies without stopping its children (SIGKILL, a
    # crashed test run), the kernel then sends them SIGTERM instead of leaving
    # etcd and the apiserver holding ports forever. setpriv (util-linux) sets
    # that before exec; a preexec_fn would do the same but is unsafe with threads.
    setpriv = shutil.which("setpriv")
    if setpriv is None or sys.platform != "linux":
        return list(argv)
    return [setpriv, "--pdeathsig=TERM", "--", *argv]


class ChildProcess:
    """A child in its own process group, so that stopping it reaches only what it spawned."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, *,
                 env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        self.name = name
        self.log_path = log_path
        self._log: IO[bytes] = log_path.open("wb")
        self.popen = subprocess.Popen(
            _die_with_parent(argv),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=cwd,
        )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        if self.alive():
            pgid = self.popen.pid  # start_new_session: the child leads its own group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, signal.SIGKILL)
                self.popen.wait(timeout)
        self._log.close()


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
    ) -> None:
        self._requested_workdir = workdir
        self._keep = keep_workdir or bool(os.environ.get("VGPU_CP_KEEP"))
        self._extra_args = list(extra_apiserver_args)
        self._startup_timeout = startup_timeout
        self._binaries = binaries
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
        """Create a namespace and its ``default`` ServiceAccount.

        There is no controller-manager to make the ServiceAccount, and the
        ServiceAccount admission plugin refuses pods whose account is missing.
        """
        with self.api_client() as api_client:
            core = kubernetes.client.CoreV1Api(api_client)
            k = kubernetes.client
            namespace = k.V1Namespace(metadata=k.V1ObjectMeta(name=name))
            account = k.V1ServiceAccount(metadata=k.V1ObjectMeta(name="default"))
            _create_ignoring_conflict(lambda: core.create_namespace(namespace))
            _create_ignoring_conflict(lambda: core.create_namespaced_service_account(name, account))

    def etcd_compact(self) -> int:
        """Compact etcd up to its current revision; returns that revision.

        Talks to etcd's JSON gateway directly (no etcdctl in Debian's
        etcd-server), so that reads at an older resourceVersion get 410 Gone.
        """
        header = self._etcd_post("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})
        revision = int(header["header"]["revision"])
        self._etcd_post("/v3/kv/compaction", {"revision": str(revision), "physical": True})
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
            self._write_pki()
            # Ports are picked and then bound by the child, so another process
            # can take one in between; a retry with fresh ports covers that.
            last_error: ControlPlaneError | None = None
            for _attempt in range(3):
                try:
                    self._start_processes(binaries)
                    break
                except _ExitedEarly as e:
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

    def _write_pki(self) -> None:
        wd = self.workdir
        ca = make_ca("vgpu-e2e-ca")
        serving = make_serving_cert(
            ca,
            "kube-apiserver",
            names=[
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
            ips=["127.0.0.1", KUBERNETES_SERVICE_IP],
        )
        admin = make_client_cert(ca, ADMIN_USER, "system:masters")
        sa_key = ec.generate_private_key(ec.SECP256R1())
        files: dict[str, bytes] = {
            "ca.crt": ca.cert_pem(),
            "ca.key": ca.key_pem(),
            "apiserver.crt": serving.cert_pem(),
            "apiserver.key": serving.key_pem(),
            "admin.crt": admin.cert_pem(),
            "admin.key": admin.key_pem(),
            "sa.key": sa_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
            "sa.pub": sa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
        }
        for name, data in files.items():
            path = wd / name
            path.write_bytes(data)
            path.chmod(0o600)

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
        etcd = ChildProcess(
            "etcd",
            [
                str(binaries.etcd),
                "--name=vgpu-e2e",
                f"--data-dir={self._etcd_data}",
                f"--listen-client-urls={self._etcd_url}",
                f"--advertise-client-urls={self._etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=vgpu-e2e={peer_url}",
                "--initial-cluster-state=new",
                "--logger=zap",
                "--log-outputs=stderr",
                "--log-level=warn",
            ],
            wd / "etcd.log",
        )
        self._procs.append(etcd)
        self._wait_until(etcd, "etcd /health", self._etcd_healthy)

        self._server = f"https://127.0.0.1:{api_port}"
        args = [
            str(binaries.kube_apiserver),
            f"--etcd-servers={self._etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
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
            "--profiling=false",
            *self._extra_args,
        ]
        apiserver = ChildProcess("kube-apiserver", args, wd / "kube-apiserver.log")
        self._procs.append(apiserver)
        self._write_kubeconfig()
        self._wait_until(apiserver, "kube-apiserver /readyz", self._apiserver_ready)

    def _write_kubeconfig(self) -> None:
        wd = self.workdir

        def b64(name: str) -> str:
            return base64.b64encode((wd / name).read_bytes()).decode()

        config: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "vgpu-e2e",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": b64("ca.crt"),
                    },
                }
            ],
            "users": [
                {
                    "name": ADMIN_USER,
                    "user": {
                        "client-certificate-data": b64("admin.crt"),
                        "client-key-data": b64("admin.key"),
                    },
                }
            ],
            "contexts": [
                {"name": "vgpu-e2e", "context": {"cluster": "vgpu-e2e", "user": ADMIN_USER}}
            ],
            "current-context": "vgpu-e2e",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig.chmod(0o600)

    def _wait_until(self, proc: ChildProcess, what: str, probe: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self._startup_timeout
        while time.monotonic() < deadline:
            if not proc.alive():
                raise _ExitedEarly(
                    f"{proc.name} exited with code {proc.popen.returncode} before {what}; "
                    f"last lines of {proc.log_path}:\n{proc.log_tail()}"
                )
            if probe():
                return
            time.sleep(0.2)
        raise ControlPlaneError(
            f"{what} not ready after {self._startup_timeout:.0f}s; "
            f"last lines of {proc.log_path}:\n{proc.log_tail()}"
        )

    def _etcd_healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self._etcd_url}/health", timeout=2) as resp:
                return bool(json.load(resp).get("health") == "true")
        except (OSError, ValueError):
            return False

    def _etcd_post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(
            f"{self.etcd_url}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            answer: dict[str, Any] = json.load(resp)
            return answer

    def _apiserver_ready(self) -> bool:
        if self._tls is None:
            self._tls = ssl.create_default_context(cafile=str(self.ca_cert))
            self._tls.load_cert_chain(
                str(self.workdir / "admin.crt"), str(self.workdir / "admin.key")
            )
        try:
            with urllib.request.urlopen(
                f"{self._server}/readyz", timeout=2, context=self._tls
            ) as resp:
                return bool(resp.status == 200)
        except (OSError, urllib.error.URLError):
            return False

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
