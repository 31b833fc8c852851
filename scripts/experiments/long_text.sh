#!/usr/bin/env bash
# README "long texts": head truncation vs --long_text=windows on the 1,500 full
# movie reviews (max_seq_length 128, 1 epoch), seeds 1 and 2.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/setup_env.sh requirements.txt
RUN_DIR=${RUN_DIR:-runs/long_reviews}
M=${MODEL_DIR:-runs/models/all-MiniLM-L6-v2}
fetch_minilm "$M"
"$PY" scripts/experiments/make_splits.py long_reviews "$RUN_DIR"
for seed in 1 2; do
  for mode in truncate windows; do
    "$PY" run_custom_classifier.py --task_name=custom --data_dir="$RUN_DIR" \
      --file_format=csv --text_a_column=review --label_column=label \
      --vocab_file="$M/vocab.txt" --bert_config_file="$M/bert_config.json" \
      --init_checkpoint="$M/bert_model.ckpt" --output_dir="$RUN_DIR/${mode}_$seed" \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5 --num_train_epochs=1 \
      --pooling=mean --seed=$seed --long_text=$mode --do_train --do_eval \
      > "$RUN_DIR/${mode}_$seed.log" 2>&1
    echo "$mode seed $seed: $(grep -E '^(accuracy|num_examples) ' "$RUN_DIR/${mode}_$seed/eval_results.txt" | tr '\n' ' ')"
  done
done
