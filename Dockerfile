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
#
# The default target is the image with HAMi-core's libvgpu.so for each supported CUDA major
# (the stages after `vgpu`), which the node agent installs on each GPU node at start
# (docs/isolation-setup.md#the-library-in-the-image). Those stages fetch HAMi-core at the
# pinned commit HAMI_CORE_REF and build it in NVIDIA's CUDA devel images, so they need the
# network; `--target vgpu` builds the image without them (what CI builds: it reaches no
# registry and no GitHub).
ARG BASE=python:3.11-slim
ARG BUILD_BASE=${BASE}
ARG HAMI_CORE_REF=8f3a89c67b037d8fdfe6c4cd4d8c4f0cd6504811
ARG HAMI_CORE_REPOSITORY=https://github.com/Project-HAMi/HAMi-core
ARG CUDA12_DEVEL=nvidia/cuda:12.8.1-devel-ubuntu22.04
ARG CUDA13_DEVEL=nvidia/cuda:13.0.0-devel-ubuntu22.04

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
FROM ${BASE} AS vgpu
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

# --- HAMi-core (github.com/Project-HAMi/HAMi-core), built as its authors build it ------------
# Its own build.sh, which configures CMake with -DCMAKE_BUILD_TYPE=Debug: its CMakeLists
# compiles every other build type with -fvisibility=hidden, which leaves the CUDA wrappers
# unexported, and such a library loads but enforces nothing. One build per CUDA major: a
# driver runs what an older toolkit built, and the agent picks the newest its driver runs.
FROM ${CUDA12_DEVEL} AS hami-core-cuda12
ARG HAMI_CORE_REF
ARG HAMI_CORE_REPOSITORY
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      ca-certificates cmake git make >/dev/null \
 && git init -q /hami-core && cd /hami-core \
 && git fetch -q --depth 1 "${HAMI_CORE_REPOSITORY}" "${HAMI_CORE_REF}" \
 && git checkout -q FETCH_HEAD && test "$(git rev-parse HEAD)" = "${HAMI_CORE_REF}" \
 && bash ./build.sh \
 && install -D -m 0644 build/libvgpu.so /out/cuda12/libvgpu.so

FROM ${CUDA13_DEVEL} AS hami-core-cuda13
ARG HAMI_CORE_REF
ARG HAMI_CORE_REPOSITORY
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      ca-certificates cmake git make >/dev/null \
 && git init -q /hami-core && cd /hami-core \
 && git fetch -q --depth 1 "${HAMI_CORE_REPOSITORY}" "${HAMI_CORE_REF}" \
 && git checkout -q FETCH_HEAD && test "$(git rev-parse HEAD)" = "${HAMI_CORE_REF}" \
 && bash ./build.sh \
 && install -D -m 0644 build/libvgpu.so /out/cuda13/libvgpu.so

# The agent's own check of each build (its wrappers exported), and the index it reads at
# start: a build that would enforce nothing fails here, not on a node.
FROM build AS hami-core
ARG HAMI_CORE_REF
ARG HAMI_CORE_REPOSITORY
COPY --from=hami-core-cuda12 /out/ /opt/vgpu/hami-core/
COPY --from=hami-core-cuda13 /out/ /opt/vgpu/hami-core/
RUN /opt/vgpu/bin/python -m vgpu_nodeagent.isolation.hami_bundle /opt/vgpu/hami-core \
      --ref "${HAMI_CORE_REF}" --repository "${HAMI_CORE_REPOSITORY}"

FROM vgpu
ARG HAMI_CORE_REF
LABEL io.vgpu.hami-core.ref="${HAMI_CORE_REF}"
COPY --from=hami-core /opt/vgpu/hami-core /opt/vgpu/hami-core
