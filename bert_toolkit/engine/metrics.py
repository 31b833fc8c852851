"""Evaluation metrics streamed as counts in the graph (finished by scores.py).

The graph only accumulates counts (a confusion matrix, or per-label true and
false positives for multi-label). Counts add up exactly across batches and
across replicas, so distributed evaluation gives the same numbers as a single
device, and every derived metric (precision, recall, F1, Matthews correlation)
is computed once, from the final counts, by the pure functions of scores.py.
"""

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
    """Streams [num_labels, 4] counts of (true positives, false positives, false
    negatives, true negatives)."""
    truth = tf.cast(label_multi_hot, tf.float32)
    predicted = tf.cast(predicted_multi_hot, tf.float32)
    counts = tf.stack([truth * predicted, (1.0 - truth) * predicted,
                       truth * (1.0 - predicted), (1.0 - truth) * (1.0 - predicted)],
                      axis=-1)  # [batch, labels, 4]
    if weights is not None:
        counts *= tf.cast(weights, tf.float32)[:, tf.newaxis, tf.newaxis]
    num_labels = label_multi_hot.shape[-1]
    return streaming_counts("multi_label_counts", [num_labels, 4],
                            tf.reduce_sum(counts, axis=0))
