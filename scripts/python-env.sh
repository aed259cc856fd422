#!/usr/bin/env bash
# Makes the project's Python environment in .venv with python/requirements.txt, or reuses
# it when it already holds exactly those pins. Prints nothing else when it is current.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
stamp=$venv/.strata-requirements
if [[ -x $venv/bin/python ]] && cmp -s python/requirements.txt "$stamp"; then
  exit 0
fi
echo "python-env: building $venv from python/requirements.txt"
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -r python/requirements.txt
cp python/requirements.txt "$stamp"
