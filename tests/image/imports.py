"""Run inside the image by tests/image/build.sh, as the image's user: what the components
import at run time is there and works, so a dependency the image lacks, or a shared
library that stripping broke, fails the build instead of a pod.

- Every module of vgpu and its components imports (what a component loads lazily is
  named in LAZY), which loads numpy, grpc and protobuf, aiohttp, cryptography, structlog,
  prometheus-client, PyYAML, urllib3 and orjson.
- The compiled parts do some work: numpy multiplies matrices (its OpenBLAS), grpc starts
  and stops a server, PyYAML parses with its C loader. (``vgpu certs --out-dir``, which
  build.sh runs next, signs certificates with cryptography.)
- The ``kubernetes`` package is absent, and ``connect()`` with a kubeconfig says so in
  one line.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import tempfile
from concurrent import futures

#: The product's packages by pyproject.toml's rule (vgpu and every vgpu_*), as installed.
PACKAGES = tuple(sorted(m.name for m in pkgutil.iter_modules()
                        if m.ispkg and (m.name == "vgpu" or m.name.startswith("vgpu_"))))
#: Imported inside functions at run time: the node agent's NVML backend.
LAZY = ("pynvml",)


def import_everything() -> int:
    assert {"vgpu", "vgpu_scheduler", "vgpu_nodeagent", "vgpu_webhook"} <= set(PACKAGES), PACKAGES
    count = 0
    for name in PACKAGES:
        package = importlib.import_module(name)
        for module in pkgutil.walk_packages(package.__path__, f"{name}."):
            importlib.import_module(module.name)
            count += 1
    for name in LAZY:
        importlib.import_module(name)
    return count


def exercise_compiled_parts() -> None:
    import grpc
    import numpy as np
    import yaml

    matrix = np.arange(64 * 64, dtype=np.float64).reshape(64, 64)
    assert float((matrix @ np.eye(64)).sum()) == float(matrix.sum())
    assert yaml.load("a: [1, 2]", Loader=yaml.CSafeLoader) == {"a": [1, 2]}
    with tempfile.TemporaryDirectory() as folder:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
        server.add_insecure_port(f"unix:{folder}/check.sock")
        server.start()
        server.stop(None)


def kubeconfig_is_one_clear_error() -> None:
    from vgpu.errors import ConfigError
    from vgpu.kube.adapter import connect

    try:
        importlib.import_module("kubernetes")
    except ImportError:
        pass
    else:
        raise SystemExit("the kubernetes package is in the image; nothing in a pod uses it")
    with tempfile.NamedTemporaryFile() as kubeconfig:
        try:
            connect(kubeconfig.name)
        except ConfigError as exc:
            assert "'kubernetes' package" in str(exc), exc
        else:
            raise SystemExit("connect() with a kubeconfig did not fail without kubernetes")


def main() -> None:
    count = import_everything()
    exercise_compiled_parts()
    kubeconfig_is_one_clear_error()
    print(f"imported {count} modules of {', '.join(PACKAGES)} and {', '.join(LAZY)}; "
          f"numpy, grpc and PyYAML work; no kubernetes", file=sys.stderr)


if __name__ == "__main__":
    main()
