#!/usr/bin/env bash
# One command that sets up a fresh machine and runs the demo service on localhost:8000.
# Usage: bash scripts/demo.sh                      (synthetic patents, built-in)
#        bash scripts/demo.sh --data ../shared/data (the real patent data)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/priorart demo "$@"
