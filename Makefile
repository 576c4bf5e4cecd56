# The handful of commands a newcomer needs (each is also a plain script under scripts/).
.PHONY: setup test demo demo-real lint bench

setup:      ## create .venv and install system packages (idempotent)
	bash scripts/setup.sh
test:       ## everything CI runs: ruff, mypy, pytest
	bash scripts/test.sh
demo:       ## synthetic demo index, served on http://127.0.0.1:8000
	bash scripts/demo.sh
demo-real:  ## the same on the real data in ../shared/data
	bash scripts/demo.sh --data ../shared/data
lint:
	.venv/bin/ruff check service training lab tests && .venv/bin/mypy
bench:      ## first-stage and service benchmarks (printed figures)
	.venv/bin/priorart-lab bench first-stage
