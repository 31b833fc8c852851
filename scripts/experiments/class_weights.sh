#!/usr/bin/env bash
# README "Imbalanced labels": all-MiniLM-L6-v2 on 1 positive sentence in 10,
# without and with --class_weights=balanced. Results: RUN_DIR/out_*/eval_results.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/setup_env.sh requirements.txt
RUN_DIR=${RUN_DIR:-runs/imbalanced}
M=${MODEL_DIR:-runs/models/all-MiniLM-L6-v2}
fetch_minilm "$M"
"$PY" scripts/experiments/make_splits.py imbalanced "$RUN_DIR"
for weights in none balanced; do
  extra=()
  [ "$weights" = balanced ] && extra=(--class_weights=balanced)
  "$PY" run_custom_classifier.py --task_name=custom --data_dir="$RUN_DIR" \
    --file_format=csv --text_a_column=sentence --label_column=label \
    --vocab_file="$M/vocab.txt" --bert_config_file="$M/bert_config.json" \
    --init_checkpoint="$M/bert_model.ckpt" --output_dir="$RUN_DIR/out_$weights" \
    --max_seq_length=64 --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=2 \
    --pooling=mean --do_train --do_eval "${extra[@]}" > "$RUN_DIR/out_$weights.log" 2>&1
  echo "$weights: $(grep -E '^(accuracy|macro_f1|f1\[1\]) ' "$RUN_DIR/out_$weights/eval_results.txt" | tr '\n' ' ')"
done
