"""TLS for the webhook: certificate and key from files, reloaded when they change.

The listening socket keeps one *front* :class:`ssl.SSLContext` for its whole life. Its
SNI callback, which OpenSSL calls for every handshake (with or without a server name),
moves the new connection onto the *current* context. A reload builds a complete new
context from the files and swaps one reference, so:

- connections already open keep the certificate they were set up with and are never
  dropped (a reload touches no live connection);
- a half-rotated pair (new certificate, old key: a Secret's files are not replaced
  together) fails to load into the new context and the old one stays in use until the
  pair matches again; a context is never left half updated, which ``load_cert_chain``
  on the live context could do.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import ssl
from collections.abc import Callable

from cryptography import x509

from vgpu import logs
from vgpu.errors import ConfigError

log = logs.get("vgpu.webhook.tls")

Stamp = tuple[tuple[int, int, int, int], ...]


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A server context with TLS 1.2 as the floor; raises ssl/OS errors as they come."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


def not_after(cert_file: str) -> dt.datetime | None:
    """When the (first) certificate in ``cert_file`` expires; None when unreadable."""
    try:
        with open(cert_file, "rb") as handle:
            return x509.load_pem_x509_certificate(handle.read()).not_valid_after_utc
    except (OSError, ValueError):
        return None


class CertReloader:
    """Holds the current certificate and swaps it in when the files change."""

    def __init__(self, cert_file: str, key_file: str,
                 on_reload: Callable[[bool], None] | None = None) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.on_reload = on_reload
        self._stamp = self._files_stamp()
        try:
            self.current = server_context(cert_file, key_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"cannot load the TLS certificate {cert_file} with key {key_file}: {exc}"
            ) from None
        self.expires = not_after(cert_file)
        self.front = server_context(cert_file, key_file)
        self.front.sni_callback = self._choose
        self.reloads = 0

    def _choose(self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None,
                context: ssl.SSLContext) -> None:
        connection.context = self.current

    def _files_stamp(self) -> Stamp:
        # os.stat follows symlinks: a Secret volume swaps its ..data link atomically, so
        # the inode changes even when the size and mtime of the new file do not.
        stamps = []
        for path in (self.cert_file, self.key_file):
            try:
                st = os.stat(path)
                stamps.append((st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size))
            except OSError:
                stamps.append((0, 0, 0, 0))
        return tuple(stamps)

    def check(self) -> bool:
        """Reload when the files changed since the last look; True when a new pair is live."""
        stamp = self._files_stamp()
        if stamp == self._stamp:
            return False
        # Remember the stamp before reading: a change during the read is seen next time.
        self._stamp = stamp
        try:
            fresh = server_context(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            log.warning("certificate reload failed; keeping the previous one",
                        cert_file=self.cert_file, key_file=self.key_file, error=str(exc))
            if self.on_reload is not None:
                self.on_reload(False)
            return False
        self.current = fresh
        self.expires = not_after(self.cert_file)
        self.reloads += 1
        log.info("certificate reloaded", cert_file=self.cert_file,
                 expires=self.expires.isoformat() if self.expires else None)
        if self.on_reload is not None:
            self.on_reload(True)
        return True

    async def watch(self, interval: float) -> None:
        """Check the files every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            self.check()
