"""Fine-tune, evaluate, predict with and export a BERT token labeller.

    --task_name=ner    named entities, CoNLL files tagged BIO or BIOES
    --task_name=pos    part-of-speech (or any per-word tag), CoNLL files
    --task_name=punct  punctuation restoration, trained from plain text

Files train.txt, dev.txt and test.txt in --data_dir (or --train_file, ...).
The multi-GPU fork's tasks PUNCT, NAMED_ENTITY and NORM run as punct, ner and
pos on its train.tsv/dev.tsv/test.tsv (a sentence a line: words, a tab,
labels; see bert_toolkit/tasks/seq_labeling/readers.py); task names are
case-insensitive.
Long sentences are split into overlapping windows and merged back, so every
word gets a label. The flags shared with run_custom_classifier.py (devices,
precision, accumulation, resume, export) work the same; see
docs/seq_labeling.md.
"""

from bert_toolkit.cli import main

if __name__ == "__main__":
    main.run_seq_labeling()
