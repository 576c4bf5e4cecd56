#!/usr/bin/env bash
# Set up a fresh Linux machine for priorart: system packages (when root) and a virtual environment.
# Usage: bash scripts/setup.sh            (idempotent; re-running only installs what changed)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3

# System packages: FreeDict lexicons (query translation), the Ding German-English dictionary (trans-de-en:
# `priorart build --lexicons freedict,ding`, measured in docs/RESULTS.md), Chromium (browser tests) and PostgreSQL
# (the watches' shared database: the tests start a server of their own, tests/postgres_server.py).
APT_PKGS="dict-freedict-deu-eng dict-freedict-fra-eng dict-freedict-eng-deu dict-freedict-eng-fra dict-freedict-deu-fra dict-freedict-fra-deu trans-de-en chromium postgresql"
missing=""
for p in $APT_PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing system packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
  else
    echo "setup: WARNING: cannot install$missing (not root or no apt-get); translation falls back to" \
         "aligned-claims-only, and the browser and PostgreSQL tests are skipped" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
# torch is pinned (2.13.0 CPU wheel on the machine); a looser pin would pull CUDA wheels.
# pip's output (and the build backend's notes, e.g. setuptools' "Editable installation" warning) goes to a log,
# shown only when the install fails; the import check below says what is missing either way.
# --no-compile: pip writes no byte-code for every module of every wheel (ray's and torch's included); Python compiles
# a module when it is first imported. The extras' install into a new venv: 153 s with it, 67 s without (measured)
if ! python -m pip install -q --no-compile --disable-pip-version-check -e ".[service,training,ray,dev,bench]" \
    > .venv/pip-install.log 2>&1; then
  grep -v "is ignored: it is neither a file nor a directory" .venv/pip-install.log >&2 || true
  echo "setup: pip install failed (log: .venv/pip-install.log)" >&2
fi
python -c "import service, training, torch, onnxruntime, faiss, gensim, ray.serve, numba, sqlalchemy, alembic, psycopg" \
  || { echo "setup: dependency check failed" >&2; exit 1; }
# the [bench] extra: peers of `priorart-lab bench first-stage`, which skips (and names) any that does not import
python -c "import bm25s, numba, pyterrier_pisa" 2>/dev/null \
  || echo "setup: WARNING: a benchmark peer (bm25s, numba, pyterrier-pisa) does not import;" \
          "priorart-lab bench first-stage will skip it" >&2
echo "setup: ok ($(python --version), venv .venv)"
