# The one image every vgpu component runs from:
#   docker build -t REGISTRY/vgpu:0.1.0 .
# Its entry point is the `vgpu` command; the manifests pass the subcommand
# (`scheduler`, `webhook`, `nodeagent`, `certs`) as the first argument.
#
# BASE is any image with python3 (3.11 or later); BUILD_BASE, for the build stage, the same
# python3 with its venv module and, to strip the shared libraries, binutils (installed with
# apt-get when missing). By default both are python:3.11-slim. CI builds this file without
# a Docker daemon (tests/image/build.sh, buildah) on two bases assembled from Debian's
# packages, since it reaches no image registry: the build stage's, and the image's, which
# is the same tree with only what python3 needs (tests/image/trim_base.py).
ARG BASE=python:3.11-slim
ARG BUILD_BASE=${BASE}

FROM ${BUILD_BASE} AS build
WORKDIR /src
# The context is what .dockerignore admits: pyproject.toml, README.md, the product's
# packages (every vgpu* folder) and tests/image/slim.py.
COPY . .
# Everything goes into one virtual environment that the final stage copies whole: no pip,
# no build tools and no wheel files in the image, and no install step there that a
# daemonless builder would need special mounts for. vgpu's dependencies go in less the
# kubernetes client, which nothing in a pod imports (tests/image/slim.py says why); then
# slim.py drops test suites, stubs and sources, and strips the symbols of the shared
# libraries (about 14 MB; Python's tracebacks are unchanged).
# A builder behind a TLS-intercepting proxy mounts its CA bundle and names it in PIP_CERT
# (tests/image/build.sh does); it is used by this stage only.
ARG PIP_CERT
RUN --mount=type=cache,target=/root/.cache/pip \
    if [ -n "${PIP_CERT:-}" ]; then export PIP_CERT; else unset PIP_CERT; fi \
 && python3 -m venv /opt/vgpu \
 && python3 tests/image/slim.py requirements pyproject.toml > /tmp/requirements.txt \
 && /opt/vgpu/bin/pip install --disable-pip-version-check -r /tmp/requirements.txt \
 && /opt/vgpu/bin/pip install --disable-pip-version-check --no-deps . \
 && /opt/vgpu/bin/pip uninstall --yes --quiet pip setuptools \
 && python3 tests/image/slim.py trim /opt/vgpu
RUN command -v strip >/dev/null || { apt-get update -qq \
      && apt-get install -y -qq --no-install-recommends binutils >/dev/null; } \
 && python3 tests/image/slim.py strip /opt/vgpu
FROM ${BASE}
ENV PATH=/opt/vgpu/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/vgpu /opt/vgpu
# A user entry for the uid the pods run as, written directly: useradd is not in every base.
RUN echo 'vgpu:x:65532:65532:vgpu:/nonexistent:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'vgpu:x:65532:' >> /etc/group
# Non-root by default; only the node agent's DaemonSet runs it as root (the kubelet's
# device-plugin socket needs that). The manifests mount the root filesystem read-only.
USER 65532:65532
ENTRYPOINT ["vgpu"]
CMD ["--help"]
