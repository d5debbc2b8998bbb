"""``connect()`` where the ``kubernetes`` package is missing, as in the container image."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vgpu.errors import ConfigError
from vgpu.kube import adapter


def test_a_kubeconfig_without_the_kubernetes_package_is_one_clear_error(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    # A None entry makes `import kubernetes` raise ImportError, as when it is not installed.
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    with pytest.raises(ConfigError) as raised:
        adapter.connect(str(tmp_path))
    message = str(raised.value)
    assert "'kubernetes' package" in message and "service account" in message
    assert "\n" not in message
