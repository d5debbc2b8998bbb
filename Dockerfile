# The one image every vgpu component runs from:
#   docker build -t REGISTRY/vgpu:0.1.0 .
# Its entry point is the `vgpu` command; the manifests pass the subcommand
# (`scheduler`, `webhook`, `nodeagent`, `certs`) as the first argument.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY vgpu vgpu
COPY webhook webhook
COPY scheduler scheduler
COPY nodeagent nodeagent
COPY certs certs
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels vgpu \
 && useradd --uid 65532 --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin vgpu
# Non-root by default; only the node agent's DaemonSet runs it as root (the kubelet's
# device-plugin socket needs that). The manifests mount the root filesystem read-only.
USER 65532:65532
ENTRYPOINT ["vgpu"]
CMD ["--help"]
