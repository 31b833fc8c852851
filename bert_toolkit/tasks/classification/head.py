"""The classification head on BERT, its loss weights and its streamed report.

Single-label: softmax over `num_labels`, cross-entropy, label ids [batch].
Multi-label: one sigmoid per label, binary cross-entropy, labels as a multi-hot
float vector [batch, num_labels]; a label is predicted when its probability
reaches `threshold`.

The head's variables are `output_weights` [num_labels, hidden] and
`output_bias` [num_labels], as in Google's run_classifier.py.
"""

import math

import tensorflow as tf

from bert_toolkit.engine import metrics, scores
from bert_toolkit.engine.model_fn_builder import Head
from bert_toolkit.errors import InputError
from bert_toolkit.estimator_compat import tf_estimator
from bert_toolkit.model import modeling

tf1 = tf.compat.v1


def class_weights(spec, train_labels, label_list):
    """Per-label loss weights, in label-list order, from --class_weights.

    spec: "balanced" (n / (num_labels * count of the label) over `train_labels`,
    the training examples' labels: rare labels weigh more, and an example's
    weight averages 1) or comma-separated numbers, one per label.
    """
    if spec == "balanced":
        counts = {label: 0 for label in label_list}
        for label in train_labels:
            counts[label] += 1
        missing = [label for label, count in counts.items() if not count]
        if missing:
            raise InputError("--class_weights=balanced: label(s) %s have no training "
                             "example" % ", ".join(repr(m) for m in missing))
        total = sum(counts.values())
        return [total / float(len(label_list) * counts[label]) for label in label_list]
    try:
        weights = [float(part) for part in spec.split(",")]
    except ValueError:
        raise InputError("--class_weights=%s: expected 'balanced' or %d comma-separated "
                         "numbers (labels %s)" % (spec, len(label_list), ", ".join(label_list)))
    if len(weights) != len(label_list) or not all(
            math.isfinite(w) and w > 0 for w in weights):
        raise InputError("--class_weights=%s: expected %d positive numbers, one per label "
                         "in the order %s" % (spec, len(label_list), ", ".join(label_list)))
    return weights


def output_layer(num_labels, hidden_size):
    """Google's classifier variables: (output_weights [num_labels, hidden_size],
    output_bias [num_labels]), float32, in the current variable scope."""
    output_weights = tf1.get_variable(
        "output_weights", [num_labels, hidden_size],
        initializer=tf1.truncated_normal_initializer(stddev=0.02))
    output_bias = tf1.get_variable("output_bias", [num_labels],
                                   initializer=tf1.zeros_initializer())
    return output_weights, output_bias


def make_head_fn(num_labels, dropout_prob, multi_label=False, threshold=0.5,
                 pooling="pooler", probabilities_only=False, label_weights=None):
    """The classification head for model_fn_builder.build_model_fn.

    dropout_prob: dropout on the pooled output in training (Google's code fixes
    0.1, the hidden_dropout_prob of its configs; pass the config's value).
    pooling: one of modeling.POOLING_MODES.
    probabilities_only: the export returns the probabilities alone (the multi-GPU
      fork's signature, --serving_compat).
    label_weights: single-label only, a loss weight per label (class_weights);
    the training loss is the mean of weight[label] x cross-entropy, the eval
    loss stays the plain mean (comparable across runs).
    """
    def head_fn(model, features, mode):
        is_training = mode == tf_estimator.ModeKeys.TRAIN
        # float32 [batch, hidden]
        pooled = modeling.sentence_vector(model, features["input_mask"], pooling)
        if is_training:
            pooled = modeling.dropout(pooled, dropout_prob)
        output_weights, output_bias = output_layer(num_labels, pooled.shape[-1])
        logits = tf.nn.bias_add(tf.matmul(pooled, output_weights, transpose_b=True),
                                output_bias)  # [batch, num_labels]
        if multi_label:
            probabilities = tf.sigmoid(logits)
            predicted = tf.cast(probabilities >= threshold, tf.int32)
        else:
            probabilities = tf.nn.softmax(logits, axis=-1)
            predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
        predictions = {"probabilities": probabilities, "predicted": predicted}
        if "doc_index" in features:  # long texts: which document each window is of
            predictions["doc_index"] = tf.reshape(features["doc_index"], [-1])
        serving = {"probabilities": probabilities}
        if not probabilities_only:
            serving.update({"logits": logits, "label_ids" if not multi_label
                            else "predicted_multi_hot": predicted})
        if mode == tf_estimator.ModeKeys.PREDICT:
            return Head(None, predictions, None, serving)

        if multi_label:
            labels = features["label_ids"]  # float32 [batch, num_labels]
            per_example_loss = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(
                labels=labels, logits=logits), axis=-1)
        else:
            labels = tf.reshape(features["label_ids"], [-1])  # int32 [batch]
            per_example_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=labels, logits=logits)
        if label_weights and is_training:
            loss = tf.reduce_mean(per_example_loss * tf.gather(
                tf.constant(label_weights, tf.float32), labels))
        else:
            loss = tf.reduce_mean(per_example_loss)
        eval_metric_ops = None
        if mode == tf_estimator.ModeKeys.EVAL:
            # 0 for the padding that fills the last batch of every replica.
            weights = features.get("is_real_example")
            eval_metric_ops = {"eval_loss": tf1.metrics.mean(per_example_loss, weights)}
            if multi_label:
                eval_metric_ops["multi_label_counts"] = metrics.multi_label_counts_metric(
                    labels, predicted, weights)
            else:
                eval_metric_ops["confusion_matrix"] = metrics.confusion_matrix_metric(
                    labels, predicted, num_labels, weights)
        return Head(loss, predictions, eval_metric_ops, serving)

    return head_fn


def eval_report(results, label_list, multi_label):
    """The flat dict written to eval_results.{txt,json} from Estimator.evaluate's output."""
    if multi_label:
        report = scores.multi_label_report(results["multi_label_counts"], label_list)
    else:
        report = scores.classification_report(results["confusion_matrix"], label_list)
    report["eval_loss"] = float(results["eval_loss"])
    report["global_step"] = int(results["global_step"])
    # The fork's precision/recall/F1: the binary scores of two labels, else the
    # macro (single-label) or micro (multi-label) averages.
    prefix = "micro_" if multi_label else ("" if len(label_list) == 2 else "macro_")
    return scores.add_original_keys(report, prefix)
