"""SavedModel export for TensorFlow Serving (the layout: export_layout.py).

The serving_default signature takes int32 input_ids, input_mask and
segment_ids [batch, max_seq_length] and returns what the task's head lists in
`Head.serving_outputs`. The vocabulary and the settings a client needs to
tokenize exactly as training did travel in assets.extra/.

`extra_inputs` adds int32 inputs that the model ignores, so that requests
written for another export keep being accepted unchanged: the multi-GPU
fork's clients send a `label_ids` input (see classifier.SERVING_COMPAT).
"""

import json
import os

import tensorflow as tf

import export_layout
import fileio

tf1 = tf.compat.v1


def serving_input_receiver_fn(max_seq_length, extra_inputs=None):
    """int32 input_ids, input_mask, segment_ids of shape [batch, max_seq_length], and
    the ignored `extra_inputs` (name -> shape) in the signature only."""
    def receiver_fn():
        # Placeholders must be made here, inside the export graph, not at import.
        features = {name: tf1.placeholder(tf.int32, [None, max_seq_length], name=name)
                    for name in export_layout.SERVING_INPUTS}
        ignored = {name: tf1.placeholder(tf.int32, shape, name=name)
                   for name, shape in (extra_inputs or {}).items()}
        return tf.estimator.export.ServingInputReceiver(features, dict(features, **ignored))
    return receiver_fn


def export_for_serving(estimator, serving_dir, max_seq_length, extra_files,
                       checkpoint_path=None, extra_inputs=None):
    """Writes serving_dir/<version>/ (saved_model.pb, variables/, assets.extra/).

    extra_files: name -> path of files copied into assets.extra/. Returns the
    version directory.
    """
    path = estimator.export_saved_model(
        serving_dir, serving_input_receiver_fn(max_seq_length, extra_inputs),
        assets_extra=extra_files, checkpoint_path=checkpoint_path)
    return path.decode("utf-8") if isinstance(path, bytes) else path


def export_model(estimator, output_dir, max_seq_length, vocab_file, serving_config,
                 checkpoint_path=None, extra_inputs=None):
    """Exports output_dir/serving/<version>/ with the vocab and serving_config.json.

    serving_config: the settings dict a client reads (also kept in output_dir).
    """
    settings_path = os.path.join(output_dir, export_layout.SERVING_CONFIG_FILE)
    fileio.write_text_atomically(settings_path,
                                 json.dumps(serving_config, indent=2, sort_keys=True) + "\n")
    path = export_for_serving(
        estimator, os.path.join(output_dir, export_layout.SERVING_DIR), max_seq_length,
        {export_layout.VOCAB_FILE: vocab_file,
         export_layout.SERVING_CONFIG_FILE: settings_path},
        checkpoint_path=checkpoint_path, extra_inputs=extra_inputs)
    tf1.logging.info("exported SavedModel for TensorFlow Serving: %s", path)
    return path
