#!/usr/bin/env bash
# The README's measured classifier runs on all-MiniLM-L6-v2 (--pooling=mean):
#   bash scripts/experiments/classifier_runs.sh class_weights
#       1 positive sentence in 10, without and with --class_weights=balanced
#   bash scripts/experiments/classifier_runs.sh long_text
#       the 1,500 full reviews: head truncation vs --long_text=windows, seeds 1 and 2;
#       truncation also for 13 epochs, as many updates as one epoch of windows
# Results: RUN_DIR/<run>/eval_results.txt, logs beside them.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/setup_env.sh requirements.txt
EXPERIMENT=${1:?give class_weights or long_text}
RUN_DIR=${RUN_DIR:-runs/$EXPERIMENT}
M=${MODEL_DIR:-runs/models/all-MiniLM-L6-v2}
fetch_minilm "$M"
MODEL_FLAGS=(--vocab_file="$M/vocab.txt" --bert_config_file="$M/bert_config.json"
             --init_checkpoint="$M/bert_model.ckpt" --pooling=mean --do_train --do_eval
             --task_name=custom --data_dir="$RUN_DIR" --file_format=csv --label_column=label
             --train_batch_size=32 --learning_rate=5e-5)

run() {  # run NAME FLAGS...: one fine-tuning run, then its summary line
  local name=$1; shift
  "$PY" run_custom_classifier.py "${MODEL_FLAGS[@]}" --output_dir="$RUN_DIR/$name" "$@" \
    > "$RUN_DIR/$name.log" 2>&1
  echo "$name: $(grep -E '^(accuracy|macro_f1|f1\[1\]|num_examples) ' \
    "$RUN_DIR/$name/eval_results.txt" | tr '\n' ' ')"
}

case "$EXPERIMENT" in
  class_weights)
    "$PY" scripts/experiments/make_splits.py imbalanced "$RUN_DIR"
    for weights in none balanced; do
      extra=()
      [ "$weights" = balanced ] && extra=(--class_weights=balanced)
      run "out_$weights" --text_a_column=sentence --max_seq_length=64 --num_train_epochs=2 \
        "${extra[@]}"
    done ;;
  long_text)
    "$PY" scripts/experiments/make_splits.py long_reviews "$RUN_DIR"
    for seed in 1 2; do
      for mode in truncate windows; do
        run "${mode}_$seed" --text_a_column=review --max_seq_length=128 \
          --num_train_epochs=1 --seed="$seed" --long_text="$mode"
      done
      run "truncate_13_epochs_$seed" --text_a_column=review --max_seq_length=128 \
        --num_train_epochs=13 --seed="$seed" --long_text=truncate
    done ;;
  *) echo "unknown experiment $EXPERIMENT: give class_weights or long_text" >&2; exit 1 ;;
esac
