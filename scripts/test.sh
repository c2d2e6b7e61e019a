#!/usr/bin/env bash
# Set up (creates .venv if missing, installs the package with its dev extras) and run the test suite.
#   scripts/test.sh [pytest args...]          # every test (CI)
#   scripts/test.sh --fast [pytest args...]   # the fast tier: without the tests marked slow (tests/conftest.py)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
if [ "${1:-}" = "--fast" ]; then
  shift
  set -- -m "not slow" "$@"
fi
exec "$PY" -m pytest -n 2 "$@"
