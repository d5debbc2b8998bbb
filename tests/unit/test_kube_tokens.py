"""A token file is read again as client-go reads it (issue 24: a kubeconfig's ``tokenFile``
was read once, so a rotated token stopped working on the kubeconfig path)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane.pki import make_ca
from vgpu.errors import ConfigError
from vgpu.kube import adapter, tokens
from vgpu.kube.transport import InClusterTransport


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_token_is_kept_50_seconds_then_read_again(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("first\n")
    clock = Clock()
    source = tokens.TokenFile(str(path), clock)
    assert source.token() == "first"
    path.write_text("second")
    clock.now += 49.9
    assert source.token() == "first"
    clock.now += 0.2
    assert source.token() == "second"


def test_a_failed_read_keeps_the_token_a_first_one_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "token"
    with pytest.raises(ConfigError, match="cannot read the token file"):
        tokens.TokenFile(str(path)).token()
    path.write_text("")
    with pytest.raises(ConfigError, match="is empty"):
        tokens.TokenFile(str(path)).token()
    path.write_text("kept")
    clock = Clock()
    source = tokens.TokenFile(str(path), clock)
    assert source.token() == "kept"
    path.unlink()  # being replaced, as a rotation does
    clock.now += 60
    assert source.token() == "kept"
    path.write_text("")
    assert source.token() == "kept"
    path.write_text("new")
    assert source.token() == "new"


def kubeconfig(tmp_path: Path, server: str, user: dict[str, Any]) -> Path:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": server}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "users": [{"name": "u", "user": user}]}))
    return path


@pytest.mark.parametrize(("user", "found"), [
    ({"tokenFile": "token"}, "relative"),  # relative to the kubeconfig's folder
    ({"tokenFile": "/abs/token"}, "/abs/token"),
    ({"token": "t"}, None),
    ({"tokenFile": "token", "exec": {"command": "x", "apiVersion": "v1"}}, None),
    ({}, None),
])
def test_the_kubeconfigs_token_file(tmp_path: Path, user: dict[str, Any],
                                    found: str | None) -> None:
    path = kubeconfig(tmp_path, "http://127.0.0.1:1", user)
    want = str(tmp_path / "token") if found == "relative" else found
    assert tokens.kubeconfig_token_file(str(path)) == want


class Recorder(BaseHTTPRequestHandler):
    seen: list[str]

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("Authorization", ""))
        body = b'{"kind":"Node","metadata":{"name":"n"}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []

    class Handler(Recorder):
        pass

    Handler.seen = seen
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()


def test_a_kubeconfig_client_sends_the_rotated_token(
        tmp_path: Path, recorder: tuple[str, list[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    url, seen = recorder
    (tmp_path / "token").write_text("before")
    clock = Clock()
    monkeypatch.setattr(tokens, "monotonic", clock)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    cluster = adapter.connect(str(kubeconfig(tmp_path, url, {"tokenFile": "token"})))
    assert cluster is not None
    cluster.get("nodes", "n")
    (tmp_path / "token").write_text("after")
    clock.now += 51
    cluster.get("nodes", "n")
    assert seen == ["Bearer before", "Bearer after"]


def test_in_cluster_the_service_account_token_is_read_the_same_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "token").write_text("sa-1")
    (tmp_path / "ca.crt").write_bytes(make_ca("ca").cert_pem())
    clock = Clock()
    monkeypatch.setattr(tokens, "monotonic", clock)
    transport = InClusterTransport("127.0.0.1", "1", str(tmp_path))
    assert transport._bearer() == "sa-1"
    (tmp_path / "token").write_text("sa-2")
    clock.now += 51
    assert transport._bearer() == "sa-2"
