"""Google's run_classifier.py as a module: its names, each a thin adapter over ours.

Tutorials and users' code import `run_classifier` for its processors and
helpers (Google's own run_classifier_with_tfhub.py does); the root
run_classifier.py re-exports these, so such code runs unchanged:

    DataProcessor, InputExample            data.py's (same fields and methods)
    InputFeatures, PaddingInputExample     Google's plain records
    ColaProcessor, MnliProcessor, MrpcProcessor, XnliProcessor   data.py's readers
    convert_single_example, convert_examples_to_features
    file_based_convert_examples_to_features, file_based_input_fn_builder,
    input_fn_builder                       features as Google's make them
    create_model, model_fn_builder         the classifier as Google's builds it, on
                                           our BERT graph, optimizer and training log

The arguments and return types are Google's: features are lists of ints,
input_fns read `params["batch_size"]`, and the model_fn's evaluation gives
eval_accuracy and eval_loss, its predictions `probabilities`.
"""

import collections

import numpy as np
import tensorflow as tf

from bert_toolkit.engine import input_pipeline, training_plan
from bert_toolkit.engine import model_fn_builder as engine_model_fn
from bert_toolkit.engine.model_fn_builder import Head
from bert_toolkit.estimator_compat import tf_estimator
from bert_toolkit.model import modeling
from bert_toolkit.tasks.classification import head as classifier_head
from bert_toolkit.tasks.classification.data import (  # noqa: F401  (Google's names)
    ColaProcessor,
    DataProcessor,
    InputExample,
    MnliProcessor,
    MrpcProcessor,
    XnliProcessor,
)

tf1 = tf.compat.v1

__all__ = ["DataProcessor", "InputExample", "InputFeatures", "PaddingInputExample",
           "ColaProcessor", "MnliProcessor", "MrpcProcessor", "XnliProcessor",
           "convert_single_example", "convert_examples_to_features",
           "file_based_convert_examples_to_features", "file_based_input_fn_builder",
           "input_fn_builder", "create_model", "model_fn_builder"]


class PaddingInputExample(object):
    """A fake example that fills a batch: zero features, is_real_example False."""


class InputFeatures(object):
    """One example's features: lists of ints, and its label id."""

    def __init__(self, input_ids, input_mask, segment_ids, label_id, is_real_example=True):
        self.input_ids = input_ids
        self.input_mask = input_mask
        self.segment_ids = segment_ids
        self.label_id = label_id
        self.is_real_example = is_real_example


def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer):
    """[InputFeatures] of `examples`, tokenized in one batch (our tokenizer's
    encode_pairs: [CLS] a [SEP] (b [SEP]), truncated as Google truncates)."""
    label_map = {label: i for i, label in enumerate(label_list)}
    real = [e for e in examples if not isinstance(e, PaddingInputExample)]
    # Google's test: an empty text_b is no second text.
    texts_b = [e.text_b or None for e in real]
    ids, mask, segments = tokenizer.encode_pairs(
        [e.text_a for e in real], texts_b if any(texts_b) else None, max_seq_length)
    rows = iter(range(len(real)))
    features = []
    for example in examples:
        if isinstance(example, PaddingInputExample):
            zeros = [0] * max_seq_length
            features.append(InputFeatures(zeros, list(zeros), list(zeros), 0, False))
            continue
        row = next(rows)
        # Our processors' test examples have no label (Google's had a dummy one).
        label_id = 0 if example.label is None else label_map[example.label]
        features.append(InputFeatures(ids[row].tolist(), mask[row].tolist(),
                                      segments[row].tolist(), label_id))
    return features


def convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer):
    """The InputFeatures of one example (ex_index: Google's, for its log lines)."""
    del ex_index
    return convert_examples_to_features([example], label_list, max_seq_length, tokenizer)[0]


def _feature_rows(features):
    for feature in features:
        yield {"input_ids": feature.input_ids, "input_mask": feature.input_mask,
               "segment_ids": feature.segment_ids, "label_ids": [feature.label_id],
               "is_real_example": [int(feature.is_real_example)]}


def file_based_convert_examples_to_features(examples, label_list, max_seq_length, tokenizer,
                                            output_file):
    """Writes the examples' features to the TFRecord file `output_file` (Google's
    features: input_ids, input_mask, segment_ids, label_ids, is_real_example)."""
    input_pipeline.write_tfrecord(output_file, _feature_rows(convert_examples_to_features(
        examples, label_list, max_seq_length, tokenizer)))


def _batches(dataset, params, is_training, drop_remainder):
    if is_training:
        dataset = dataset.repeat().shuffle(buffer_size=100)
    return dataset.batch(params["batch_size"], drop_remainder=drop_remainder)


def file_based_input_fn_builder(input_file, seq_length, is_training, drop_remainder):
    """input_fn(params) over a file of file_based_convert_examples_to_features: int32
    features, batches of params["batch_size"], shuffled and repeated in training."""
    spec = input_pipeline.fixed_length_spec({
        "input_ids": seq_length, "input_mask": seq_length, "segment_ids": seq_length})
    spec["label_ids"] = tf.io.FixedLenFeature([], tf.int64)
    spec["is_real_example"] = tf.io.FixedLenFeature([], tf.int64)

    def decode(record):
        return {name: tf.cast(value, tf.int32)
                for name, value in tf.io.parse_single_example(record, spec).items()}

    def input_fn(params):
        return _batches(tf.data.TFRecordDataset(input_file).map(decode), params, is_training,
                        drop_remainder)
    return input_fn


def input_fn_builder(features, seq_length, is_training, drop_remainder):
    """input_fn(params) over InputFeatures held in memory (small data sets)."""
    columns = collections.OrderedDict(
        (name, np.array([getattr(f, name) for f in features], dtype=np.int32).reshape(shape))
        for name, shape in (("input_ids", [-1, seq_length]), ("input_mask", [-1, seq_length]),
                            ("segment_ids", [-1, seq_length]), ("label_id", [-1])))
    columns["label_ids"] = columns.pop("label_id")

    def input_fn(params):
        return _batches(tf.data.Dataset.from_tensor_slices(dict(columns)), params, is_training,
                        drop_remainder)
    return input_fn


def _classifier_outputs(pooled_output, labels, num_labels, is_training):
    """Google's head on the pooled [CLS] vector [batch, hidden]: (loss, per_example_loss
    [batch], logits [batch, num_labels], probabilities [batch, num_labels])."""
    output_weights, output_bias = classifier_head.output_layer(
        num_labels, pooled_output.shape[-1])
    with tf1.variable_scope("loss"):
        if is_training:
            pooled_output = modeling.dropout(pooled_output, 0.1)
        logits = tf.nn.bias_add(tf.matmul(pooled_output, output_weights, transpose_b=True),
                                output_bias)
        probabilities = tf.nn.softmax(logits, axis=-1)
        per_example_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.reshape(labels, [-1]), logits=logits)
        return tf.reduce_mean(per_example_loss), per_example_loss, logits, probabilities


def create_model(bert_config, is_training, input_ids, input_mask, segment_ids, labels,
                 num_labels, use_one_hot_embeddings):
    """Google's classifier graph: BERT, then a softmax layer on the pooled output.
    Returns (loss, per_example_loss, logits, probabilities)."""
    model = modeling.BertModel(bert_config, is_training, input_ids, input_mask, segment_ids,
                               use_one_hot_embeddings=use_one_hot_embeddings)
    return _classifier_outputs(model.get_pooled_output(), labels, num_labels, is_training)


def _google_head_fn(num_labels):
    """model_fn_builder's head_fn: Google's outputs, metrics and predictions."""
    def head_fn(model, features, mode):
        is_training = mode == tf_estimator.ModeKeys.TRAIN
        labels = features.get("label_ids", tf.zeros_like(features["input_ids"][:, 0]))
        loss, per_example_loss, logits, probabilities = _classifier_outputs(
            model.get_pooled_output(), labels, num_labels, is_training)
        predictions = {"probabilities": probabilities}
        if mode == tf_estimator.ModeKeys.PREDICT:
            return Head(None, predictions, None, predictions)
        weights = tf.cast(features.get("is_real_example", tf.ones_like(labels)), tf.float32)
        predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
        eval_metric_ops = {
            "eval_accuracy": tf1.metrics.accuracy(tf.reshape(labels, [-1]), predicted,
                                                  weights),
            "eval_loss": tf1.metrics.mean(per_example_loss, weights)}
        return Head(loss, predictions, eval_metric_ops, predictions)
    return head_fn


def model_fn_builder(bert_config, num_labels, init_checkpoint, learning_rate,
                     num_train_steps, num_warmup_steps, use_tpu, use_one_hot_embeddings):
    """Google's model_fn for an Estimator: the classifier of create_model, trained with
    our AdamW (Google's recipe: warmup, linear decay, clipping) and progress log."""
    del use_one_hot_embeddings  # a TPU speed-up; the lookup is the same
    if use_tpu:
        raise ValueError("use_tpu: TPUs are not supported by this toolkit; use GPUs or CPUs")

    def model_fn(features, labels, mode, params):
        del labels
        batch = features["input_ids"].shape[0] or (params or {}).get("batch_size") or 1
        plan = training_plan.plan_steps(num_train_steps or 1, num_warmup_steps or 0,
                                        int(batch), 1, 1)
        inner = engine_model_fn.build_model_fn(
            bert_config, _google_head_fn(num_labels), plan, init_checkpoint=init_checkpoint,
            learning_rate=learning_rate)
        return inner(features, None, mode)
    return model_fn
