#!/usr/bin/env bash
# Set up (creates .venv if missing, installs the package and the TensorBoard viewer), train configs/default.py into runs/default (resumes
# if interrupted), evaluate it from the checkpoint and print a short generated sample.
#   scripts/run.sh [--config.x=value ...]     (extra flags go to the trainer, e.g. --config.train.num_steps=100)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
WORKDIR=${WORKDIR:-runs/default}
"$PY" -m linear_seq.main --config=configs/default.py --workdir="$WORKDIR" "$@"
"$PY" -m linear_seq.evaluate --workdir="$WORKDIR" --generate=300 --prompt="ROMEO:"
echo "Metrics: $WORKDIR/metrics.jsonl, $WORKDIR/eval.json; TensorBoard: .venv/bin/tensorboard --logdir $WORKDIR/tensorboard"
