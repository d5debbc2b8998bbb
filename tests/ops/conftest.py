from __future__ import annotations

import pytest

from vgpu import logs


@pytest.fixture(autouse=True)
def _no_global_logging_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    # `vgpu ...` configures structlog to print to the sys.stderr of the moment, which under
    # pytest is a capture file closed after the test; loggers used later (other tests'
    # threads) would then write to a closed file. The commands log the same without it.
    monkeypatch.setattr(logs, "setup", lambda *args, **kwargs: None)
