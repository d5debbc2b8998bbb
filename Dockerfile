# The one image every vgpu component runs from:
#   docker build -t REGISTRY/vgpu:0.1.0 .
# Its entry point is the `vgpu` command; the manifests pass the subcommand
# (`scheduler`, `webhook`, `nodeagent`, `certs`) as the first argument.
#
# BASE is any image with python3 (3.11 or later) and its venv module. CI builds this file
# without a Docker daemon (tests/image/build.sh, buildah) on a base assembled from
# Debian's packages, since it reaches no image registry.
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY vgpu vgpu
COPY webhook webhook
COPY scheduler scheduler
COPY nodeagent nodeagent
COPY certs certs
COPY tests/image/slim.py tests/image/slim.py
# Everything goes into one virtual environment that the final stage copies whole: no pip,
# no build tools and no wheel files in the image, and no install step there that a
# daemonless builder would need special mounts for.
# A builder behind a TLS-intercepting proxy mounts its CA bundle and names it in PIP_CERT
# (tests/image/build.sh does); it is used by this stage only.
ARG PIP_CERT
RUN --mount=type=cache,target=/root/.cache/pip \
    if [ -n "${PIP_CERT:-}" ]; then export PIP_CERT; else unset PIP_CERT; fi \
 && python3 -m venv /opt/vgpu \
 && /opt/vgpu/bin/pip install --disable-pip-version-check . \
 && /opt/vgpu/bin/pip uninstall --yes --quiet pip setuptools \
 && /opt/vgpu/bin/python -OO /src/tests/image/slim.py /opt/vgpu
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
