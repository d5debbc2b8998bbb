"""The config file's format version: ``version: v1`` at the top of the file.

As in NVIDIA's device-plugin config, the version names the file's layout, so that a later
layout can be told apart from this one and converted, or refused, instead of misread. A
file without ``version`` was written before the key existed, in the one layout there was
then: it is read as v1. A version this vgpu does not know is refused with the list of those
it reads; nothing is guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu.errors import ConfigError

#: The key, at the top level of the file only (a section has no version of its own).
KEY = "version"
#: The version ``vgpu config defaults`` writes.
CURRENT = "v1"
#: The versions this vgpu reads, oldest first.
SUPPORTED: tuple[str, ...] = ("v1",)
#: What ``vgpu config defaults --explain`` says about the key.
DOC = (f"format of the config file; one without '{KEY}' is read as {CURRENT}; supported: "
       f"{', '.join(SUPPORTED)}")


def settings_of(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The file's settings without its ``version`` key, once the version is one this vgpu
    reads (absent: v1); :class:`ConfigError` listing the supported ones otherwise."""
    if KEY not in data:
        return data
    given = data[KEY]
    if not isinstance(given, str) or given not in SUPPORTED:
        raise ConfigError(f"{KEY}: {given!r} is not a config version this vgpu reads; "
                          f"supported: {', '.join(SUPPORTED)}")
    return {key: value for key, value in data.items() if key != KEY}
