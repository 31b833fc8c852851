"""Eval metrics: reports from counts (scores.py) and the counts streamed in the graph
(metrics.py)."""


import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit.engine import metrics, scores

from tiny import cpu_session, cpu_strategy

tf1 = tf.compat.v1


def test_classification_report_binary_by_hand():
    # rows true, columns predicted; labels (neg, pos): 40 TN, 10 FP, 5 FN, 45 TP
    report = scores.classification_report([[40, 10], [5, 45]], ["neg", "pos"])
    assert report["accuracy"] == pytest.approx(0.85)
    assert report["precision"] == pytest.approx(45 / 55)
    assert report["recall"] == pytest.approx(45 / 50)
    assert report["f1"] == pytest.approx(2 * (45 / 55) * 0.9 / (45 / 55 + 0.9))
    mcc = (45 * 40 - 10 * 5) / np.sqrt(55 * 50 * 50 * 45)
    assert report["matthews_corrcoef"] == pytest.approx(mcc)
    assert report["num_examples"] == 100
    assert report["macro_f1"] == pytest.approx((report["f1[neg]"] + report["f1[pos]"]) / 2)


def test_matthews_is_zero_when_one_class_is_always_predicted():
    assert scores.matthews_correlation([[0, 10], [0, 20]]) == 0.0
    assert scores.matthews_correlation([[3, 0, 0], [0, 4, 0], [0, 0, 5]]) == pytest.approx(1)


def test_multi_label_report_micro_and_macro():
    # per label: tp, fp, fn, tn (10 examples)
    report = scores.multi_label_report([[8, 2, 0, 0], [1, 0, 3, 6]], ["a", "b"])
    assert report["micro_precision"] == pytest.approx(9 / 11)
    assert report["micro_recall"] == pytest.approx(9 / 12)
    assert report["f1[b]"] == pytest.approx(2 * 1.0 * 0.25 / 1.25)
    assert report["num_examples"] == 10
    assert report["accuracy[a]"] == pytest.approx(0.8) and report["accuracy[b]"] == 0.7
    # The multi-GPU fork's run_custom_classifier_mlabel.py keys, by label index.
    assert report["eval_accuracy_1"] == 0.7 and report["eval_precision_0"] == 0.8
    assert report["eval_recall_1"] == 0.25 and report["eval_f1score_1"] == report["f1[b]"]


def test_streamed_confusion_matrix_merges_replicas_exactly():
    """Counts summed over two CPU replicas equal the counts of the whole batch."""
    labels = np.array([0, 1, 2, 1, 0, 2, 2, 1])
    predicted = np.array([0, 2, 2, 1, 1, 2, 0, 1])
    graph = tf.Graph()
    with graph.as_default():
        strategy = cpu_strategy(2)

        def replica_fn():
            start = tf.distribute.get_replica_context().replica_id_in_sync_group * 4
            return metrics.confusion_matrix_metric(
                tf.constant(labels)[start:start + 4], tf.constant(predicted)[start:start + 4],
                num_labels=3)

        with strategy.scope():
            value, update = strategy.extended.call_for_each_replica(replica_fn)
            update = strategy.group(update)
        init = tf1.local_variables_initializer()
    with cpu_session(graph) as sess:
        sess.run(init)
        sess.run(update)
        sess.run(update)
        got = sess.run(strategy.experimental_local_results(value)[0])
    expected = 2 * np.array([[1, 1, 0], [0, 2, 1], [1, 0, 2]])
    np.testing.assert_array_equal(got, expected)
