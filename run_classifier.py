"""Google's script name: the same classifier, flags and outputs as run_custom_classifier.py.

Command lines written for google-research/bert's run_classifier.py run
unchanged (see docs/migration.md); run_custom_classifier.py stays for the
multi-GPU fork's users.
"""

from bert_toolkit.cli import main

if __name__ == "__main__":
    main.run_classifier()
