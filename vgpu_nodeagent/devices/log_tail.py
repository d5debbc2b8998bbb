"""New lines of a log the agent does not write: the kernel's (``/dev/kmsg``) and the MPS
control daemon's ``control.log``.

Opened at the end, so only what is written after the agent started is read; read without
blocking, so a loop that asks between other work never waits on it. ``/dev/kmsg`` answers
one record per read (``<priority>,<sequence>,<time>,<flags>;<text>``), says ``EAGAIN``
when there is none and ``EPIPE`` when records were overwritten before they were read (they
are lost; reading goes on); a plain file answers chunks, whose last line may be cut and is
kept for the next read. A log that cannot be opened is reported once and read again on the
next call, so one that appears later (a daemon's first line) is picked up.
"""

from __future__ import annotations

import errno
import os

from vgpu import logs

_log = logs.get("vgpu.nodeagent.logtail")
#: Bytes read per call at most, so that a flood of lines cannot hold a loop.
_BUDGET = 1 << 20


def _text(record: str) -> str:
    """A ``/dev/kmsg`` record's message (a plain line as it is)."""
    head, sep, rest = record.partition(";")
    return rest if sep and head.count(",") >= 3 and head.split(",", 1)[0].isdigit() else record


class Tail:
    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._partial = ""
        self._warned = False
        self.error: str | None = None

    def _open(self) -> bool:
        if self._fd is not None:
            return True
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(fd, 0, os.SEEK_END)
        except OSError as exc:
            self.error = f"cannot read {self.path}: {exc.strerror}"
            if not self._warned:
                self._warned = True
                _log.warning("cannot read a log; reading it again later", path=self.path,
                             error=exc.strerror)
            return False
        self._fd, self.error = fd, None
        return True

    def lines(self) -> list[str]:
        """What was written since the last call, one entry a line."""
        if not self._open():
            return []
        assert self._fd is not None
        chunks: list[str] = []
        read = 0
        while read < _BUDGET:
            try:
                data = os.read(self._fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    continue  # /dev/kmsg: records overwritten before this read
                _log.warning("reading a log failed", path=self.path, error=exc.strerror)
                break
            if not data:
                break
            read += len(data)
            chunks.append(data.decode("utf-8", "replace"))
        text = self._partial + "".join(chunks)
        *whole, self._partial = text.split("\n")
        return [_text(line) for line in whole if line]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
