"""Google's script name: the same classifier, flags and outputs as run_custom_classifier.py.

Command lines written for google-research/bert's run_classifier.py run
unchanged (see README.md, "Coming from google-research/bert or
bert-multi-gpu"); run_custom_classifier.py stays for the multi-GPU fork's users.
"""

from absl import flags

import run_custom_classifier  # defines every flag (and quiets TensorFlow's start-up)

# --help lists the classifier's flags, as they belong to this script too.
flags.adopt_module_key_flags(run_custom_classifier)

if __name__ == "__main__":
    run_custom_classifier.common_flags.run_script(run_custom_classifier.main)
