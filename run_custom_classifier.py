"""Fine-tune, evaluate, predict with and export a BERT sentence (pair) classifier.

GLUE tasks (cola, mnli, mnli-mm, mrpc, xnli, qqp, sst-2, rte, qnli) in their
file layouts, or `--task_name=custom` for your own TSV/CSV/JSON Lines files
(columns named by flags), single- or multi-label. One command line of Google's
run_classifier.py works unchanged; see docs/classification.md for the new flags.
"""

from bert_toolkit.cli import main

if __name__ == "__main__":
    main.run_classifier()
