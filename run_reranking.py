"""Fine-tune BERT to re-rank passages (MS MARCO style), rank candidates, report MRR@10.

Training reads `query \\t positive \\t negative` triples (two pairs each);
evaluation and prediction read `qid \\t pid \\t query \\t passage` candidate
files and write ranked run files (`qid \\t pid \\t rank \\t score`);
evaluation scores dev_run.tsv against the qrels (MRR@10 as the official
msmarco_eval.py computes it, and recall@k). Devices, precision, resume and
export work as in run_custom_classifier.py. See docs/reranking.md.
"""

from bert_toolkit.cli import main

if __name__ == "__main__":
    main.run_reranking()
