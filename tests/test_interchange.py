"""What one platform writes, the other reads (docs/platforms.md): a classifier trained and
exported under TensorFlow 2.15.1 serves, resumes training and feeds its TFRecords
under TensorFlow 2.21, and the reverse.

The other platform is the interpreter $BERT_TOOLKIT_OTHER_PYTHON names (a virtualenv
of the other TensorFlow with requirements.txt installed; .ci/run sets it for its
second platform); without it the test is skipped. Each side runs the checkout's own
scripts, so the test exercises what users run.
"""

import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tiny import REPO, write_sentiment_csv, write_tiny_model

OTHER_PYTHON = os.environ.get("BERT_TOOLKIT_OTHER_PYTHON", "")
# Each platform's toolkit sets its own TensorFlow environment: TF_USE_LEGACY_KERAS,
# which this process's may have set for its tf-keras, must not reach the other.
ENV = {name: value for name, value in os.environ.items() if name != "TF_USE_LEGACY_KERAS"}
ENV["TF_CPP_MIN_LOG_LEVEL"] = "3"
SENTENCES = ["the movie was great and the acting was good", "dull , awful plot",
             "a fine story", "bad music and bad acting"]

pytestmark = [pytest.mark.long, pytest.mark.skipif(
    not os.path.isfile(OTHER_PYTHON),
    reason="BERT_TOOLKIT_OTHER_PYTHON names no interpreter of the other platform")]

# Reads what a run wrote, in whichever interpreter runs it; prints JSON.
PROBE = r"""
import json, os, sys
import numpy as np
import bert_toolkit  # noqa: F401  (TensorFlow's environment)
import tensorflow as tf

output_dir, sentences = sys.argv[1], json.loads(sys.argv[2])
versions = [name for name in os.listdir(os.path.join(output_dir, "serving")) if name.isdigit()]
version_dir = os.path.join(output_dir, "serving", max(versions, key=int))  # the newest
model = tf.saved_model.load(version_dir)
text = model.signatures["text"](text_a=tf.constant(sentences))
(record_file,) = tf.io.gfile.glob(os.path.join(output_dir, "train-*.tf_record"))
records = list(tf.data.TFRecordDataset(record_file))
first = tf.train.Example.FromString(records[0].numpy())
checkpoint = tf.train.load_checkpoint(tf.train.latest_checkpoint(output_dir))
weights = checkpoint.get_tensor("bert/encoder/layer_0/output/dense/kernel")
print(json.dumps({
    "tensorflow": tf.__version__,
    "probabilities": text["probabilities"].numpy().tolist(),
    "records": len(records),
    "first_input_ids": list(first.features.feature["input_ids"].int64_list.value),
    "global_step": int(checkpoint.get_tensor("global_step")),
    "weights_sum": float(np.sum(weights, dtype=np.float64)),
}))
"""


def tensorflow_version(python):
    """The TensorFlow release installed for `python` (read from its metadata: no import)."""
    return subprocess.run([python, "-c", "import importlib.metadata as m; "
                           "print(m.version('tensorflow'))"],
                          env=ENV, capture_output=True, text=True).stdout.strip()


def train(python, root, epochs, output_dir, *flags):
    """Runs run_custom_classifier.py under `python` (export included), to `epochs`
    epochs in `output_dir`; returns its stderr."""
    model_dir, data_dir = os.path.join(root, "model"), os.path.join(root, "data")
    if not os.path.isdir(data_dir):
        write_tiny_model(model_dir, with_classifier_labels=2)
        os.makedirs(data_dir)
        write_sentiment_csv(os.path.join(data_dir, "train.csv"), 48, seed=1)
        write_sentiment_csv(os.path.join(data_dir, "dev.csv"), 16, seed=2)
    model = {name: os.path.join(model_dir, file_name) for name, file_name in (
        ("vocab_file", "vocab.txt"), ("bert_config_file", "bert_config.json"),
        ("init_checkpoint", "bert_model.ckpt"))}
    result = subprocess.run(
        [python, "run_custom_classifier.py", "--task_name=custom", "--data_dir=" + data_dir,
         "--text_a_column=sentence", "--label_column=label",
         "--vocab_file=" + model["vocab_file"], "--bert_config_file=" + model["bert_config_file"],
         "--init_checkpoint=" + model["init_checkpoint"], "--output_dir=" + output_dir,
         "--max_seq_length=16", "--learning_rate=3e-3", "--train_batch_size=8",
         "--num_train_epochs=%d" % epochs, "--do_train", "--save_for_serving"] + list(flags),
        cwd=REPO, env=ENV, capture_output=True, text=True)
    assert result.returncode == 0, "%s: %s" % (python, result.stderr[-3000:])
    return result.stderr


def probe(python, output_dir):
    result = subprocess.run([python, "-c", PROBE, output_dir, json.dumps(SENTENCES)],
                            cwd=REPO, env=ENV, capture_output=True, text=True)
    assert result.returncode == 0, "%s: %s" % (python, result.stderr[-3000:])
    return json.loads(result.stdout.splitlines()[-1])


def test_a_run_crosses_between_the_platforms_both_ways(tmp_path):
    """One run, its epochs on alternate platforms: each resumes from the checkpoint
    and reads the TFRecords the other wrote, and each platform serves the other's
    export."""
    this, other = sys.executable, OTHER_PYTHON
    assert tensorflow_version(this) != tensorflow_version(other), \
        "both interpreters run one TensorFlow"
    root, output_dir = str(tmp_path), str(tmp_path / "run")

    # Epoch 1 here; the SavedModel's text signature (in-graph WordPiece included),
    # the TFRecords and the checkpoint read the same on the other TensorFlow.
    train(this, root, 1, output_dir)
    written, read = probe(this, output_dir), probe(other, output_dir)
    assert written["tensorflow"] != read["tensorflow"]
    np.testing.assert_allclose(read["probabilities"], written["probabilities"], atol=1e-5)
    for key in ("records", "first_input_ids", "global_step", "weights_sum"):
        assert read[key] == written[key], key
    assert written["global_step"] == 6  # 48 examples, batch 8, one epoch

    # Epoch 2 there: it resumes from this platform's checkpoint, on the TFRecords
    # written here (the same key: no second file), writes the dev set's records,
    # and exports again; this platform serves that.
    log = train(other, root, 2, output_dir, "--do_eval")
    assert "(step 6 of 12)" in log, log[-2000:]
    assert len(glob.glob(os.path.join(output_dir, "train-*.tf_record"))) == 1
    resumed_here, resumed_there = probe(this, output_dir), probe(other, output_dir)
    assert resumed_there["global_step"] == resumed_here["global_step"] == 12
    np.testing.assert_allclose(resumed_here["probabilities"], resumed_there["probabilities"],
                               atol=1e-5)
    assert resumed_here["weights_sum"] != written["weights_sum"]

    # Epoch 3 here again: it resumes from the other platform's checkpoint and
    # evaluates on the dev records the other wrote, which it reads as they are.
    (eval_records,) = glob.glob(os.path.join(output_dir, "eval-*.tf_record"))
    written_there = os.stat(eval_records).st_mtime_ns
    log = train(this, root, 3, output_dir, "--do_eval")
    assert "(step 12 of 18)" in log, log[-2000:]
    assert glob.glob(os.path.join(output_dir, "eval-*.tf_record")) == [eval_records]
    assert os.stat(eval_records).st_mtime_ns == written_there
    with open(os.path.join(output_dir, "eval_results.json")) as f:
        assert json.load(f)["num_examples"] == 16
    assert tf_checkpoint_step(output_dir) == 18


def tf_checkpoint_step(output_dir):
    """The global step of the newest checkpoint, read in this process."""
    import tensorflow as tf
    return int(tf.train.load_checkpoint(tf.train.latest_checkpoint(output_dir))
               .get_tensor("global_step"))
