"""What a run records in output_dir: labels and head settings."""

import os

import pytest
import tensorflow as tf

from bert_toolkit.engine import run_folder
from bert_toolkit.errors import InputError

tf1 = tf.compat.v1


def test_head_settings_are_recorded_and_a_change_refused(tmp_path):
    out = str(tmp_path)
    path = os.path.join(out, run_folder.HEAD_SETTINGS_FILE)
    run_folder.check_head_settings(out, {"pooling": "mean"})  # nothing recorded yet
    assert not os.path.exists(path)
    run_folder.save_records(out, ["a", "b"], {"pooling": "mean"})
    run_folder.check_head_settings(out, {"pooling": "mean"})
    assert run_folder.read_saved_labels(out) == ["a", "b"]
    with pytest.raises(InputError, match="trained with --pooling=mean"):
        run_folder.check_head_settings(out, {"pooling": "pooler"})
    with open(path, "w") as f:
        f.write('["mean"]\n')
    with pytest.raises(InputError, match="expected a JSON object"):
        run_folder.check_head_settings(out, {"pooling": "mean"})
