#!/usr/bin/env bash
# Set up (creates .venv if missing, installs the package with its dev extras) and run the whole test suite.
#   scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
exec "$PY" -m pytest -n 2 "$@"
