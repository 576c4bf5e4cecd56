#!/usr/bin/env bash
# One command that sets up a fresh machine and runs every check: ruff, mypy, pytest.
# Usage: bash scripts/test.sh [extra pytest args]   (the whole suite; a bare `pytest` runs only the fast set)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
# the numba kernels compile (into numba's cache beside the package) while ruff and mypy run on the other core: the
# tests' first engines and servers then read them from the cache instead of compiling them, each on its own
python -c "from service.startup import warm_kernels; print('== kernels:', warm_kernels())" &
kernels=$!
echo "== ruff"; ruff check service training tests
echo "== mypy"; mypy
wait "$kernels"
echo "== pytest"
set +e
# two workers (the CI machine's two cores), whole test files per worker, handed out longest first (tests/conftest.py);
# -m "": every test (real data, slow, servers, e2e, load, ray), not the fast set a bare `pytest` runs (pyproject's
# addopts); a -m among the extra arguments comes later and wins.
python -m pytest -q -n "${PRIORART_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder -m "" "$@"
rc=$?
set -e
# pytest exits 5 when it collected nothing: that is a failure of the suite, not a pass.
exit $rc
