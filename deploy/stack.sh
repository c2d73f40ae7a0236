#!/usr/bin/env bash
# The zero-rename stack as plain processes on loopback (see deploy/stack.py):
#
#   deploy/stack.sh up [s3] [spark] [airflow]
#   deploy/stack.sh status | env | down [--purge]
#
# Runs with the project's virtualenv (make venv), or with $PYTHON when set.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-$here/../.venv/bin/python}"
if [[ ! -x "$python" ]]; then
  echo "stack.sh: no Python at $python: run 'make venv' or set PYTHON" >&2
  exit 2
fi
exec "$python" "$here/stack.py" "$@"
