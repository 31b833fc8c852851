"""Google's run_classifier.py: the same classifier, flags and outputs as run_custom_classifier.py.

Command lines written for google-research/bert's run_classifier.py run
unchanged (see docs/migration.md); run_custom_classifier.py stays for the
multi-GPU fork's users. Imported as a module, it has Google's names
(DataProcessor, InputExample, the GLUE processors, convert_examples_to_features,
input_fn_builder, model_fn_builder, ...: bert_toolkit/tasks/classification/
google_api.py), so processors and code written against Google's module run too.
"""

from bert_toolkit.tasks.classification.google_api import *  # noqa: F401,F403

if __name__ == "__main__":
    from bert_toolkit.cli import main

    main.run_classifier()
