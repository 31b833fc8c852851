"""The token classification head on BERT, its feature spec and its streamed report."""

import tensorflow as tf

from bert_toolkit.engine import input_pipeline, metrics, scores
from bert_toolkit.engine.model_fn_builder import Head
from bert_toolkit.estimator_compat import tf_estimator
from bert_toolkit.model import modeling
from bert_toolkit.tasks.seq_labeling import features

tf1 = tf.compat.v1


def feature_spec(max_seq_length):
    """name -> tf.io.FixedLenFeature of the window features."""
    lengths = {name: max_seq_length for name in features.FEATURE_NAMES}
    lengths["sentence_index"] = 1
    return input_pipeline.fixed_length_spec(lengths)


# The multi-GPU fork's export (--serving_compat=bert_multi_gpu): its inputs besides
# BERT's, taken and ignored but for seq_len, which its answer echoes.
FORK_SERVING_INPUTS = {"label_ids": [None, None], "output_mask": [None, None], "seq_len": [None]}


def make_head_fn(num_labels, dropout_prob, fork_serving=False):
    """The token classification head for model_fn_builder.build_model_fn.

    Variables output_weights [num_labels, hidden] and output_bias [num_labels]
    on the float32 sequence output; dropout `dropout_prob` in training. Loss:
    mean cross-entropy over the first sub-tokens of labelled words
    (label_mask). Serving outputs: label_ids int32 [batch, seq] and
    probabilities float32 [batch, seq, num_labels]; with `fork_serving`, the
    fork's: predictions (label ids per position) int32 [batch, seq] and seq_len
    int32 [batch] (its input, echoed; the real tokens but [CLS] and [SEP] when
    the request has none).
    """
    def head_fn(model, features, mode):
        # float32 [batch, seq, hidden]; ModernBERT's with its head on every token.
        sequence = model.get_token_head_input()
        if mode == tf_estimator.ModeKeys.TRAIN:
            sequence = modeling.dropout(sequence, dropout_prob)
        output_weights = tf1.get_variable(
            "output_weights", [num_labels, sequence.shape[-1]],
            initializer=tf1.truncated_normal_initializer(stddev=0.02))
        output_bias = tf1.get_variable("output_bias", [num_labels],
                                       initializer=tf1.zeros_initializer())
        logits = tf.nn.bias_add(tf.einsum("bsh,lh->bsl", sequence, output_weights),
                                output_bias)  # [batch, seq, num_labels]
        probabilities = tf.nn.softmax(logits, axis=-1)
        predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)  # [batch, seq]
        serving = {"label_ids": predicted, "probabilities": probabilities}
        if fork_serving:
            seq_len = features.get("seq_len")
            if seq_len is None:
                seq_len = tf.reduce_sum(features["input_mask"], axis=1) - 2
            serving = {"predictions": predicted, "seq_len": tf.reshape(seq_len, [-1])}
        predictions = {"label_ids": predicted}
        # Estimator.predict needs them to merge windows; an export has no such input.
        for name in ("word_ids", "sentence_index"):
            if name in features:
                predictions[name] = features[name]
        if mode == tf_estimator.ModeKeys.PREDICT:
            return Head(None, predictions, None, serving)

        labels = features["label_ids"]  # int32 [batch, seq]
        label_mask = tf.cast(features["label_mask"], tf.float32)  # [batch, seq]
        per_token_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits)  # [batch, seq]
        loss = tf.reduce_sum(per_token_loss * label_mask) / tf.maximum(
            tf.reduce_sum(label_mask), 1.0)
        eval_metric_ops = None
        if mode == tf_estimator.ModeKeys.EVAL:
            # Each word once, from the window that scores it; 0 for the padding
            # examples that fill the last batch of every replica.
            weights = label_mask * tf.cast(features["word_ids"] >= 0, tf.float32)
            if "is_real_example" in features:
                weights *= features["is_real_example"][:, tf.newaxis]
            eval_metric_ops = {
                "eval_loss": tf1.metrics.mean(per_token_loss, weights),
                "confusion_matrix": metrics.confusion_matrix_metric(
                    labels, predicted, num_labels, tf.reshape(weights, [-1]))}
        return Head(loss, predictions, eval_metric_ops, serving)

    return head_fn


def eval_report(results, label_list, task_name):
    """The flat dict of eval_results from Estimator.evaluate's streamed counts.

    Every task: token accuracy over words, num_words, eval_loss (mean over
    words), global_step. pos and punct add per-label and macro P/R/F1 and
    Matthews correlation (ner's per-tag scores would be misleading: its
    entity scores come from the written predictions).
    """
    report = scores.classification_report(results["confusion_matrix"], label_list)
    report["num_words"] = report.pop("num_examples")
    if task_name == "ner":
        report = {"accuracy": report["accuracy"], "num_words": report["num_words"]}
    report["eval_loss"] = float(results["eval_loss"])
    report["global_step"] = int(results["global_step"])
    # ner's eval_precision/recall/f1score are the entity scores (report_from_predictions).
    return scores.add_original_keys(report, "macro_")
