"""The multi-GPU fork's multi-label classifier script, under its name and with its flags.

    python run_custom_classifier_mlabel.py --num_labels=10 --task_name=Mlabel \\
      --data_dir=... --vocab_file=... --bert_config_file=... --init_checkpoint=... \\
      --do_train=true --do_eval=true --do_predict=true --output_dir=...

It is run_custom_classifier.py (the same classifier: one sigmoid per label)
with the fork's --num_labels: task `mlabel` reads the fork's train.tsv,
dev.tsv and test.tsv (a header, then id, text and one 0/1 column per label),
and test_results.tsv holds each example's label probabilities, tab-separated.
See docs/migration.md.
"""

from bert_toolkit.cli import main

if __name__ == "__main__":
    main.run_classifier_mlabel()
