"""Scores from counts: precision, recall, F1, Matthews correlation. No TensorFlow.

Pure functions of final counts (a confusion matrix, per-label true/false
positives, or correct/true/predicted totals), so every script and the
streamed metrics of metrics.py derive them the same way.
"""

import numpy as np


def safe_divide(numerator, denominator):
    """numerator / denominator elementwise, 0 where the denominator is 0."""
    numerator = np.asarray(numerator, dtype=np.float64)
    denominator = np.asarray(denominator, dtype=np.float64)
    return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1), 0.0)


def f1_score(precision, recall):
    """The harmonic mean of precision and recall, 0 where both are 0 (elementwise)."""
    return safe_divide(2 * precision * recall, precision + recall)


def precision_recall_f1(correct, true, predicted):
    """(precision, recall, F1) as floats from counts of correct, true and predicted items."""
    precision = float(safe_divide(correct, predicted))
    recall = float(safe_divide(correct, true))
    return precision, recall, float(f1_score(precision, recall))


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
    precision = safe_divide(true_positives, c.sum(axis=0))
    recall = safe_divide(true_positives, c.sum(axis=1))
    f1 = f1_score(precision, recall)
    report = {
        "num_examples": int(round(c.sum())),
        "accuracy": float(safe_divide(true_positives.sum(), c.sum())),
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
    """Micro and macro precision/recall/F1, and each label's precision, recall, F1 and
    accuracy, from [num_labels, 4] (tp, fp, fn, tn) counts; also the multi-GPU
    fork's keys for label i: eval_accuracy_i, eval_precision_i, eval_recall_i,
    eval_f1score_i."""
    counts = np.asarray(counts, dtype=np.float64)
    tp, fp, fn, tn = counts[:, 0], counts[:, 1], counts[:, 2], counts[:, 3]
    precision = safe_divide(tp, tp + fp)
    recall = safe_divide(tp, tp + fn)
    f1 = f1_score(precision, recall)
    micro_precision = float(safe_divide(tp.sum(), tp.sum() + fp.sum()))
    micro_recall = float(safe_divide(tp.sum(), tp.sum() + fn.sum()))
    report = {
        "micro_precision": micro_precision,
        "micro_recall": micro_recall,
        "micro_f1": float(f1_score(micro_precision, micro_recall)),
        "macro_precision": float(precision.mean()),
        "macro_recall": float(recall.mean()),
        "macro_f1": float(f1.mean()),
    }
    accuracy = safe_divide(tp + tn, tp + fp + fn + tn)
    report["num_examples"] = int(round(float(counts[0].sum()))) if len(counts) else 0
    for index, name in enumerate(label_names):
        for key, values in (("precision", precision), ("recall", recall), ("f1", f1),
                            ("accuracy", accuracy)):
            report["%s[%s]" % (key, name)] = float(values[index])
            fork_key = "f1score" if key == "f1" else key
            report["eval_%s_%d" % (fork_key, index)] = float(values[index])
    return report


# eval_results keys of the original scripts -> the key of ours whose value they hold:
# Google's run_classifier.py wrote eval_accuracy, eval_loss, global_step and loss;
# the multi-GPU fork added eval_precision, eval_recall and eval_f1score.
GOOGLE_KEYS = {"eval_accuracy": "accuracy", "loss": "eval_loss"}
FORK_KEYS = {"eval_precision": "precision", "eval_recall": "recall", "eval_f1score": "f1"}


def add_original_keys(report, prefix=""):
    """Adds to `report` the keys the original scripts wrote, as copies of its own
    values, so scripts that parse their eval_results.txt keep working.

    prefix: where the fork's precision/recall/F1 come from: "" (binary scores of
    two labels), "macro_", "micro_" or "entity_". Keys whose source is missing
    are left out.
    """
    sources = dict(GOOGLE_KEYS, **{key: prefix + ours for key, ours in FORK_KEYS.items()})
    report.update({key: report[ours] for key, ours in sources.items() if ours in report})
    return report
