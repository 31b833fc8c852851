"""Evaluation metrics: streamed as counts in the graph, finished in numpy.

The graph only accumulates counts (a confusion matrix, or per-label true and
false positives for multi-label). Counts add up exactly across batches and
across replicas, so distributed evaluation gives the same numbers as a single
device, and every derived metric (precision, recall, F1, Matthews correlation)
is computed once, from the final counts, by the pure functions below.
"""

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1


def streaming_counts(name, shape, increment):
    """An Estimator metric (value, update_op) that sums `increment` into a local variable.

    Args:
      name: a fixed variable scope; replicas find the same variable by it.
      increment: float32 tensor of `shape` to add for this batch.
    """
    with tf1.variable_scope(name):
        total = tf1.get_variable(
            "total", shape, dtype=tf.float32, initializer=tf1.zeros_initializer(),
            trainable=False, collections=[tf1.GraphKeys.LOCAL_VARIABLES,
                                          tf1.GraphKeys.METRIC_VARIABLES],
            # One copy per replica, summed when read across replicas.
            synchronization=tf.VariableSynchronization.ON_READ,
            aggregation=tf.VariableAggregation.SUM)
    update_op = total.assign_add(increment)
    # Read in cross-replica context, where the copies are summed.
    value = tf.distribute.get_replica_context().merge_call(
        lambda strategy: tf.identity(total))
    return value, update_op


def confusion_matrix_metric(label_ids, predicted_ids, num_labels, weights=None):
    """Streams a [num_labels, num_labels] confusion matrix (rows: true, cols: predicted)."""
    batch = tf.math.confusion_matrix(tf.reshape(label_ids, [-1]),
                                     tf.reshape(predicted_ids, [-1]),
                                     num_classes=num_labels, weights=weights,
                                     dtype=tf.float32)
    return streaming_counts("confusion_matrix", [num_labels, num_labels], batch)


def multi_label_counts_metric(label_multi_hot, predicted_multi_hot, weights=None):
    """Streams [num_labels, 3] counts of (true positives, false positives, false negatives)."""
    truth = tf.cast(label_multi_hot, tf.float32)
    predicted = tf.cast(predicted_multi_hot, tf.float32)
    counts = tf.stack([truth * predicted, (1.0 - truth) * predicted,
                       truth * (1.0 - predicted)], axis=-1)  # [batch, labels, 3]
    if weights is not None:
        counts *= tf.cast(weights, tf.float32)[:, tf.newaxis, tf.newaxis]
    num_labels = label_multi_hot.shape[-1]
    return streaming_counts("multi_label_counts", [num_labels, 3],
                            tf.reduce_sum(counts, axis=0))


def _safe_divide(numerator, denominator):
    numerator = np.asarray(numerator, dtype=np.float64)
    denominator = np.asarray(denominator, dtype=np.float64)
    return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1), 0.0)


def _f1(precision, recall):
    return _safe_divide(2 * precision * recall, precision + recall)


def matthews_correlation(confusion):
    """Multi-class Matthews correlation (Gorodkin's R_K); 0 when undefined."""
    c = np.asarray(confusion, dtype=np.float64)
    total = c.sum()
    correct = np.trace(c)
    true_counts = c.sum(axis=1)
    predicted_counts = c.sum(axis=0)
    numerator = correct * total - np.dot(true_counts, predicted_counts)
    denominator = np.sqrt(total ** 2 - np.dot(predicted_counts, predicted_counts)) * \
        np.sqrt(total ** 2 - np.dot(true_counts, true_counts))
    return float(numerator / denominator) if denominator > 0 else 0.0


def classification_report(confusion, label_names, positive_label=None):
    """Accuracy, per-label and macro precision/recall/F1, and MCC from a confusion matrix.

    Args:
      confusion: [num_labels, num_labels] counts, rows true, columns predicted.
      positive_label: for two labels, the one whose precision/recall/F1 are
        reported as the binary scores (default: the second label).
    Returns:
      A flat dict name -> float.
    """
    c = np.asarray(confusion, dtype=np.float64)
    true_positives = np.diag(c)
    precision = _safe_divide(true_positives, c.sum(axis=0))
    recall = _safe_divide(true_positives, c.sum(axis=1))
    f1 = _f1(precision, recall)
    report = {
        "num_examples": int(round(c.sum())),
        "accuracy": float(_safe_divide(true_positives.sum(), c.sum())),
        "macro_precision": float(precision.mean()),
        "macro_recall": float(recall.mean()),
        "macro_f1": float(f1.mean()),
        "matthews_corrcoef": matthews_correlation(c),
    }
    for index, name in enumerate(label_names):
        report["precision[%s]" % name] = float(precision[index])
        report["recall[%s]" % name] = float(recall[index])
        report["f1[%s]" % name] = float(f1[index])
    if len(label_names) == 2:
        positive = 1 if positive_label is None else list(label_names).index(positive_label)
        report["precision"] = float(precision[positive])
        report["recall"] = float(recall[positive])
        report["f1"] = float(f1[positive])
    return report


def multi_label_report(counts, label_names):
    """Micro and macro precision/recall/F1 from [num_labels, 3] (tp, fp, fn) counts."""
    counts = np.asarray(counts, dtype=np.float64)
    tp, fp, fn = counts[:, 0], counts[:, 1], counts[:, 2]
    precision = _safe_divide(tp, tp + fp)
    recall = _safe_divide(tp, tp + fn)
    f1 = _f1(precision, recall)
    micro_precision = float(_safe_divide(tp.sum(), tp.sum() + fp.sum()))
    micro_recall = float(_safe_divide(tp.sum(), tp.sum() + fn.sum()))
    report = {
        "micro_precision": micro_precision,
        "micro_recall": micro_recall,
        "micro_f1": float(_f1(micro_precision, micro_recall)),
        "macro_precision": float(precision.mean()),
        "macro_recall": float(recall.mean()),
        "macro_f1": float(f1.mean()),
    }
    for index, name in enumerate(label_names):
        report["f1[%s]" % name] = float(f1[index])
    return report
