"""Fine-tune BERT on SQuAD v1.1/v2.0 and answer questions: Google's run_squad.py.

Google's command line works unchanged (--train_file, --predict_file,
--doc_stride, --max_query_length, --n_best_size, --max_answer_length,
--version_2_with_negative, --null_score_diff_threshold, ...), with the
flags every fine-tuning script here shares (devices, precision,
accumulation, resume, export). --do_predict writes Google's
predictions.json, nbest_predictions.json and (v2.0) null_odds.json; when the
predict file has answers it also writes eval_results.txt with the official
exact match and F1. See docs/squad.md and bert_toolkit/tasks/squad/.
"""

from bert_toolkit.cli import main

if __name__ == "__main__":
    main.run_squad()
