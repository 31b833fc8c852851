"""Question answering on BERT (SQuAD v1.1/v2.0): the span head and its features.

The head is Google's run_squad.py layout: `cls/squad/output_weights` [2, hidden]
and `cls/squad/output_bias` [2] on the final token states give a start and an
end logit per token. Training minimises the mean of the start and end
cross-entropies over the window's positions (position 0, [CLS], stands for
"no answer in this window"). Reading, windows and answer choice live in
squad_data.py and squad_scoring.py, which need no TensorFlow.
"""

import tensorflow as tf

import input_pipeline
from training import Head

tf1 = tf.compat.v1

TOKEN_FEATURES = ("input_ids", "input_mask", "segment_ids")


def feature_spec(max_seq_length, is_training):
    """name -> FixedLenFeature: the token features, unique_ids [1], and for training
    start_positions/end_positions [1]."""
    lengths = {name: max_seq_length for name in TOKEN_FEATURES}
    lengths["unique_ids"] = 1
    if is_training:
        lengths.update(start_positions=1, end_positions=1)
    return input_pipeline.fixed_length_spec(lengths)


def span_logits(sequence_output):
    """(start_logits, end_logits), float32 [batch, seq] each, from [batch, seq, hidden]."""
    hidden_size = sequence_output.shape[-1]
    with tf1.variable_scope("cls/squad"):
        weights = tf1.get_variable(
            "output_weights", [2, hidden_size],
            initializer=tf1.truncated_normal_initializer(stddev=0.02))
        bias = tf1.get_variable("output_bias", [2], initializer=tf1.zeros_initializer())
    logits = tf.nn.bias_add(tf.einsum("bsh,lh->bsl", sequence_output, weights), bias)
    return logits[:, :, 0], logits[:, :, 1]


def position_loss(logits, positions, mask):
    """Mean cross-entropy of the true positions [batch] under logits [batch, seq];
    padding positions (mask 0) get no probability."""
    logits = logits + (1.0 - tf.cast(mask, tf.float32)) * -10000.0
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=positions, logits=logits))


def make_head_fn():
    """The span head for training.build_model_fn (see the module docstring)."""
    def head_fn(model, features, mode):
        start_logits, end_logits = span_logits(model.get_sequence_output())
        predictions = {"unique_ids": tf.reshape(features["unique_ids"], [-1]),
                       "start_logits": start_logits, "end_logits": end_logits}
        serving = {"start_logits": start_logits, "end_logits": end_logits}
        if mode == tf.estimator.ModeKeys.PREDICT:
            return Head(None, predictions, None, serving)
        mask = features["input_mask"]
        start = tf.reshape(features["start_positions"], [-1])
        end = tf.reshape(features["end_positions"], [-1])
        loss = 0.5 * (position_loss(start_logits, start, mask)
                      + position_loss(end_logits, end, mask))
        return Head(loss, predictions, None, serving)

    return head_fn


def head_variable_shapes(hidden_size):
    return {"cls/squad/output_weights": [2, hidden_size], "cls/squad/output_bias": [2]}
