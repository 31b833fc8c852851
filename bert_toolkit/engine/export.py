"""SavedModel export for TensorFlow Serving (the layout: export_layout.py).

The serving_default signature takes int32 input_ids, input_mask and
segment_ids [batch, max_seq_length] and returns what the task's head lists in
`Head.serving_outputs`. The vocabulary and the settings a client needs to
tokenize exactly as training did travel in assets.extra/.

Tasks that take whole texts (classification, re-ranking) also get a signature
named `text`: tf.string inputs text_a (and text_b) [batch], tokenized inside
the graph by graph_tokenization.py (core TensorFlow ops only, so stock
TensorFlow Serving runs it), with the outputs of serving_default plus
`labels` (the label names, [batch, num_labels]). One graph serves both: the
id inputs are placeholders whose default is the tokenized text, so
serving_default feeds them and `text` feeds the texts. That is WordPiece
(BERT, ELECTRA, DistilBERT): byte-level BPE and SentencePiece have no exact
form in core TensorFlow ops, so their exports have serving_default alone, and
serving_client.py and serving_server.py tokenize raw text for them with the
tokenizer files the export carries.

The tokenizer files travel in assets.extra/ too: WordPiece's as vocab.txt,
the others' under their own names (serving_config.json's `tokenizer_file`).

`extra_inputs` adds int32 inputs that BERT ignores, so that requests written
for another export keep being accepted unchanged: the multi-GPU fork's
clients send a `label_ids` input, and its token labeller's an `output_mask`
and a `seq_len` too (--serving_compat). They reach the task's head as
features, which may echo one back (the fork's `seq_len` output).
"""

import collections
import json
import os

import tensorflow as tf
from tensorflow.core.framework import tensor_shape_pb2, types_pb2
from tensorflow.core.protobuf import saved_model_pb2

from bert_toolkit import console, fileio
from bert_toolkit.engine import export_layout
from bert_toolkit.estimator_compat import tf_estimator

tf1 = tf.compat.v1

TEXT_SIGNATURE = "text"
_TEXT_LABELS = "text_labels"

TextSignature = collections.namedtuple("TextSignature", ["inputs", "labels", "features_fn"])
"""inputs: the text input names ("text_a"[, "text_b"]); labels: the label names;
features_fn(texts) -> name -> int32 [batch, max_seq_length] (texts: name ->
tf.string [batch])."""


def serving_input_receiver_fn(max_seq_length, text=None, extra_inputs=None):
    """int32 input_ids, input_mask, segment_ids of shape [batch, max_seq_length]; with
    `text` (a TextSignature) also the raw-text inputs, as an alternative; and the
    `extra_inputs` (name -> shape) in serving_default only, features the model
    does not feed to BERT."""
    def receiver_fn():
        # Placeholders must be made here, inside the export graph, not at import.
        ignored = {name: tf1.placeholder(tf.int32, shape, name=name)
                   for name, shape in (extra_inputs or {}).items()}
        if text is None:
            features = {name: tf1.placeholder(tf.int32, [None, max_seq_length], name=name)
                        for name in export_layout.SERVING_INPUTS}
            return tf_estimator.export.ServingInputReceiver(dict(features, **ignored),
                                                            dict(features, **ignored))
        texts = {name: tf1.placeholder(tf.string, [None], name=name) for name in text.inputs}
        from_text = text.features_fn(texts)
        features = {name: tf1.placeholder_with_default(from_text[name],
                                                       [None, max_seq_length], name=name)
                    for name in export_layout.SERVING_INPUTS}
        batch = tf.shape(texts[text.inputs[0]])[0]
        tf.tile(tf.constant([list(text.labels)]), [batch, 1], name=_TEXT_LABELS)
        return tf_estimator.export.ServingInputReceiver(
            dict(features, **ignored), dict(features, **ignored),
            receiver_tensors_alternatives={TEXT_SIGNATURE: texts})
    return receiver_fn


def export_for_serving(estimator, serving_dir, max_seq_length, extra_files,
                       checkpoint_path=None, text=None, extra_inputs=None):
    """Writes serving_dir/<version>/ (saved_model.pb, variables/, assets.extra/).

    extra_files: name -> path of files copied into assets.extra/; text: a
    TextSignature, or None for the id inputs only. Returns the version directory.
    """
    path = estimator.export_saved_model(
        serving_dir, serving_input_receiver_fn(max_seq_length, text, extra_inputs),
        assets_extra=extra_files, checkpoint_path=checkpoint_path)
    path = path.decode("utf-8") if isinstance(path, bytes) else path
    if text is not None:
        _name_text_signature(path, len(text.labels))
    return path


def _name_text_signature(version_dir, num_labels):
    """Renames the Estimator's "text:serving_default" signature to "text" and adds
    its `labels` output (string [batch, num_labels]), in saved_model.pb."""
    path = os.path.join(version_dir, export_layout.SAVED_MODEL_FILE)
    saved_model = saved_model_pb2.SavedModel()
    with open(path, "rb") as f:
        saved_model.ParseFromString(f.read())
    signatures = saved_model.meta_graphs[0].signature_def
    alternative = "%s:serving_default" % TEXT_SIGNATURE
    signatures[TEXT_SIGNATURE].CopyFrom(signatures[alternative])
    del signatures[alternative]
    labels = signatures[TEXT_SIGNATURE].outputs["labels"]
    labels.name = _TEXT_LABELS + ":0"
    labels.dtype = types_pb2.DT_STRING
    labels.tensor_shape.CopyFrom(tensor_shape_pb2.TensorShapeProto(dim=[
        tensor_shape_pb2.TensorShapeProto.Dim(size=-1),
        tensor_shape_pb2.TensorShapeProto.Dim(size=num_labels)]))
    with fileio.atomic_path(path) as temporary:
        with open(temporary, "wb") as f:
            f.write(saved_model.SerializeToString())


def has_text_signature(tokenizer_kind, family_name):
    """Whether an export of a text-taking task gets the in-graph `text` signature: for
    WordPiece (`tokenizer_kind`, families.Family.tokenizer) yes; for the others
    no, said in one line."""
    if tokenizer_kind == "wordpiece":
        return True
    console.info("no in-graph %r signature for %s: its %s tokenizer has no exact form in "
                 "TensorFlow ops; serving_client.py and serving_server.py tokenize raw text "
                 "for this export", TEXT_SIGNATURE, family_name,
                 {"bpe": "byte-level BPE", "unigram": "SentencePiece"}.get(tokenizer_kind,
                                                                         tokenizer_kind))
    return False


def write_serving_config(output_dir, serving_config):
    """output_dir/serving_config.json: the task's settings, labels and tokenizer settings
    (what a client or a later export_hf.py needs); returns its path."""
    path = os.path.join(output_dir, export_layout.SERVING_CONFIG_FILE)
    fileio.write_text_atomically(path, json.dumps(serving_config, indent=2, sort_keys=True)
                                 + "\n")
    return path


def export_model(estimator, output_dir, max_seq_length, tokenizer_files, serving_config,
                 text=None, checkpoint_path=None, extra_inputs=None):
    """Exports output_dir/serving/<version>/ with the tokenizer and serving_config.json.

    tokenizer_files: name in assets.extra/ -> path (vocab.txt for WordPiece;
    see model_files.tokenizer_files); serving_config: the settings dict a
    client reads (also kept in output_dir);
    text: a TextSignature for the raw-text signature, or None; checkpoint_path:
    the checkpoint to export (None: the latest); extra_inputs: ignored int32
    inputs of serving_default (name -> shape).
    """
    if text is not None:
        serving_config = dict(serving_config, text_signature=TEXT_SIGNATURE,
                              text_inputs=list(text.inputs))
    settings_path = write_serving_config(output_dir, serving_config)
    path = export_for_serving(
        estimator, os.path.join(output_dir, export_layout.SERVING_DIR), max_seq_length,
        dict(tokenizer_files, **{export_layout.SERVING_CONFIG_FILE: settings_path}),
        checkpoint_path=checkpoint_path, text=text, extra_inputs=extra_inputs)
    console.info("exported SavedModel for TensorFlow Serving: %s", path)
    return path
