#!/usr/bin/env bash
# Fine-tunes a BERT re-ranker on MS MARCO passage triples, ranks the dev top-1000
# candidates and reports MRR@10 (see docs/reranking.md).
#
#   BERT=models/my_bert DATA=msmarco OUT=runs/rerank bash scripts/run_reranking.sh [flags]
#
# BERT: a folder with bert_config.json, vocab.txt, bert_model.ckpt.* (convert a
# Hugging Face model with convert_hf_checkpoint.py). DATA: a folder with
# triples.train.small.tsv, top1000.dev, qrels.dev.tsv. Extra arguments go to
# run_reranking.py (e.g. --num_gpu_cores=4 --use_gpu --precision=auto). POOLING=mean
# for a sentence-transformers model (convert_hf_checkpoint.py says when).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BERT:?set BERT to the model folder}" "${DATA:?set DATA to the MS MARCO folder}"
OUT=${OUT:-runs/reranking}
PYTHON=${PYTHON:-python}
exec "$PYTHON" run_reranking.py \
  --bert_config_file="$BERT/bert_config.json" --vocab_file="$BERT/vocab.txt" \
  --init_checkpoint="$BERT/bert_model.ckpt" --data_dir="$DATA" --output_dir="$OUT" \
  --do_train --do_eval --max_seq_length="${MAX_SEQ_LENGTH:-512}" \
  --max_query_length="${MAX_QUERY_LENGTH:-64}" \
  --max_train_triples="${MAX_TRAIN_TRIPLES:-400000}" --num_train_epochs="${EPOCHS:-1}" \
  --train_batch_size="${BATCH:-32}" --learning_rate="${LR:-3e-6}" \
  --eval_batch_size="${EVAL_BATCH:-64}" --pooling="${POOLING:-pooler}" "$@"
