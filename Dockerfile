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
# hadolint ignore=DL3006
FROM runtime-${VARIANT} AS final
ARG VARIANT
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    PRIORART_INDEX_DIR=/data/index PRIORART_DEVICE=auto PRIORART_VARIANT=${VARIANT} \
    NUMBA_CACHE_DIR=/tmp/priorart-numba
COPY --from=build /wheels /wheels
RUN python -m pip install --no-cache-dir --no-index --find-links /wheels /wheels/*.whl && rm -rf /wheels \
 && useradd --create-home --uid 10001 priorart && mkdir -p /data/index && chown priorart /data/index
USER 10001
WORKDIR /home/priorart
EXPOSE 8000
VOLUME ["/data/index"]
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/ready', timeout=4).status == 200 else 1)"]
CMD ["priorart", "serve", "/data/index", "--host", "0.0.0.0", "--port", "8000"]
