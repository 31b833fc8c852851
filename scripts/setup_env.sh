# Sourced by the other scripts: finds a Python 3.9-3.11 (TensorFlow 2.15.1 has
# wheels for no other), creates the virtualenv $VENV (default .venv) and
# installs the requirements file given as $1 into it. Sets $PY.
set -euo pipefail
VENV=${VENV:-.venv}
find_python() {
    local candidate
    for candidate in ${PYTHON:-} python3.11 python3.10 python3.9 python3; do
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c \
            'import sys; sys.exit(not ((3, 9) <= sys.version_info[:2] <= (3, 11)))'; then
            echo "$candidate"; return 0
        fi
    done
    echo "error: no Python 3.9-3.11 found (TensorFlow 2.15.1 supports only these); set PYTHON=/path/to/python3.11" >&2
    return 1
}
if [ ! -x "$VENV/bin/python" ]; then
    "$(find_python)" -m venv "$VENV"
fi
PY="$VENV/bin/python"
"$PY" -m pip install --quiet --disable-pip-version-check -r "${1:-requirements.txt}"
