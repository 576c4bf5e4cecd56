#!/usr/bin/env bash
# One command that sets up a fresh machine and runs every check: ruff, mypy, pytest.
# Usage: bash scripts/test.sh [extra pytest args]   (the whole suite; a bare `pytest` runs only the fast set)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
# byte-code: where the machine sets PYTHONDONTWRITEBYTECODE (these do) and setup installs with --no-compile, every
# Python process the suite starts (servers, CLI runs, Ray workers, locust) compiled the ~1,300 modules it imports
# again: about 3 s of a core each here. The run writes byte-code once, into a folder of its own (not the sources')
export PYTHONPYCACHEPREFIX="$PWD/.venv/pycache"
unset PYTHONDONTWRITEBYTECODE
echo "== ruff"; ruff check service training lab tests
# mypy at the lowest CPU priority (nice 19): it runs on the core the kernels' compilation leaves free, then in the
# gaps the tests leave (a server starting, a process waiting), and takes almost nothing from a busy core; its report
# is shown after the tests and fails the run as before
mypy_log=$(mktemp)
nice -n 19 mypy > "$mypy_log" 2>&1 &
mypy_pid=$!
# the numba kernels compile into numba's cache beside the package: the tests' first engines and servers then read
# them from the cache instead of compiling them, each on its own
# (the passage kernels in a second process beside the retrieval ones: warm_kernels then reads them from the cache)
python -c "import service.passages.kernels as k; k.warm()" &
passages_pid=$!
python -c "from service.startup import warm_kernels; print('== kernels:', warm_kernels())"
wait "$passages_pid"
# the pretrained encoder (every default build's dense stage) converted once for the machine, before the workers ask
python -c "from training.models.e5 import e5_models; print('== pretrained encoder:', e5_models())"
echo "== pytest"
set +e
# two workers (the CI machine's two cores), whole test files per worker, handed out longest first (tests/conftest.py);
# -m "": every test (real data, slow, servers, e2e, load, ray), not the fast set a bare `pytest` runs (pyproject's
# addopts); a -m among the extra arguments comes later and wins. No test times the product: the figures the docs quote
# are printed by `priorart-lab bench ...` (the README's demo time: `priorart-lab bench demo`).
python -m pytest -q -n "${PRIORART_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder -m "" "$@"
rc=$?
if [ -n "$mypy_pid" ]; then wait "$mypy_pid"; mypy_rc=$?; fi
set -e
echo "== mypy"; cat "$mypy_log"; rm -f "$mypy_log"
# pytest exits 5 when it collected nothing: that is a failure of the suite, not a pass.
if [ "$rc" -ne 0 ]; then exit "$rc"; fi
exit "$mypy_rc"
