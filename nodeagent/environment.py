"""What the node must provide before the agent serves: the kubelet's device-plugin folder,
and HAMi-core's library and preload list when ``nodeagent.hamiCorePath`` is set."""

from __future__ import annotations

import os

from vgpu.config import Config
from vgpu.errors import ConfigError
from vgpu_nodeagent.isolation import grants


def check(config: Config) -> None:
    folder = config.nodeagent.device_plugin_dir
    if not os.path.isdir(folder):
        raise ConfigError(f"device-plugin folder {folder} does not exist: mount the "
                          "kubelet's /var/lib/kubelet/device-plugins into the agent or "
                          "pass --device-plugin-dir")
    library = config.nodeagent.hami_core_path
    if not library:
        return
    if not os.path.isfile(library):
        raise ConfigError(f"nodeagent.hamiCorePath: {library} is not a file; mount the "
                          "host folder holding libvgpu.so at the same path in the agent")
    preload = grants.preload_host_path(config)
    try:
        os.makedirs(os.path.dirname(preload), exist_ok=True)
        with open(preload, "w", encoding="ascii") as handle:
            handle.write(grants.preload_content())
    except OSError as exc:
        raise ConfigError(f"cannot write {preload} for HAMi-core: {exc.strerror}") from None
