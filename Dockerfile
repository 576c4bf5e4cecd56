# syntax=docker/dockerfile:1
# priorart service image. CPU by default; GPU (CUDA runtime, onnxruntime-gpu, faiss GPU build) with
#   docker build --build-arg VARIANT=gpu -t priorart:gpu .
# The index folder is mounted at /data/index (build it with `priorart build`, see README).
ARG VARIANT=cpu
ARG PYTHON_VERSION=3.11

# ---- build stage: wheels for the project and its service dependencies (no torch, no gensim) ----
FROM python:${PYTHON_VERSION}-slim-bookworm AS build
ARG VARIANT
WORKDIR /src
COPY pyproject.toml README.md ./
COPY service ./service
COPY training ./training
RUN python -m pip install --no-cache-dir --upgrade pip==25.3 \
 && if [ "$VARIANT" = "gpu" ]; then EXTRAS="gpu"; else EXTRAS="service"; fi \
 && python -m pip wheel --no-cache-dir --wheel-dir /wheels ".[${EXTRAS}]" \
 && if [ "$VARIANT" = "gpu" ]; then python -m pip wheel --no-cache-dir --wheel-dir /wheels \
      fastapi uvicorn orjson prometheus-client ir-measures swagger-ui-bundle-v2; fi

# ---- runtime bases ----
FROM python:${PYTHON_VERSION}-slim-bookworm AS runtime-cpu
FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04 AS runtime-gpu
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends python3.11 python3-pip curl \
 && rm -rf /var/lib/apt/lists/* && ln -sf /usr/bin/python3.11 /usr/local/bin/python

# ---- final image ----
# The kernels (numba) are compiled here, once, into a kernel cache shipped in the image and read-only at run time:
# `priorart warmup` loads a small synthetic index (no data needed) as the server does. Compiled for CPU levels, not
# for the build host's CPU, so that the cache holds on every node: x86-64-v4 (AVX-512; compiled without running it)
# and the generic x86-64 baseline. `priorart serve` picks the best level its CPU runs, copies the cache into
# NUMBA_CACHE_DIR (numba reads only a folder it can write to) and logs one warning where it cannot use it (another
# architecture, numba or Python: the kernels are then compiled at load, 30-40 s). Without it every new container
# compiled them: ready after ~45 s instead of ~4.6 s (docs/DEPLOYMENT.md, Start-up).
# hadolint ignore=DL3006
FROM runtime-${VARIANT} AS final
ARG VARIANT
ARG KERNEL_CPUS=x86-64-v4,generic
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    PRIORART_INDEX_DIR=/data/index PRIORART_DEVICE=auto PRIORART_VARIANT=${VARIANT} \
    PRIORART_KERNEL_CACHE=/opt/priorart/kernel-cache NUMBA_CACHE_DIR=/tmp/priorart-numba
COPY --from=build /wheels /wheels
RUN python -m pip install --no-cache-dir --no-index --find-links /wheels /wheels/*.whl && rm -rf /wheels \
 && priorart warmup --kernel-cache "$PRIORART_KERNEL_CACHE" --cpu "$KERNEL_CPUS" && chmod -R a+rX,go-w /opt/priorart \
 && useradd --create-home --uid 10001 priorart && mkdir -p /data/index && chown priorart /data/index
USER 10001
WORKDIR /home/priorart
EXPOSE 8000
VOLUME ["/data/index"]
# ready in ~4.6 s on the real-data index, ~10 s on 100k documents (docs/DEPLOYMENT.md); probed every second
# until then (Docker 25+; older engines probe at --interval), a 1M-document index may take a minute
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --start-interval=1s --retries=3 \
  CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/ready', timeout=4).status == 200 else 1)"]
CMD ["priorart", "serve", "/data/index", "--host", "0.0.0.0", "--port", "8000"]
