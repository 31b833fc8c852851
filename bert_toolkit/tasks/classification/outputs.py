"""A classifier's prediction files, and the per-text answer of long texts' windows.

Google's test_results.tsv (its name and layout, for the scripts that parse
it), ours with ids, predicted labels and a header, and for long texts the dev
predictions whose per-document scores are the evaluation. No TensorFlow.
"""

import math

import numpy as np

from bert_toolkit.engine import scores
from bert_toolkit.text import windows as text_windows

# Prediction files: Google's (its name and layout, for the scripts that parse it),
# and ours with ids, predicted labels and a header.
GOOGLE_RESULTS_FILE = "test_results.tsv"


PREDICTIONS_FILE = "test_predictions.tsv"


def google_result_lines(predictions):
    """test_results.tsv as Google's run_classifier.py writes it: per example, its
    probabilities (str of each float32), tab-separated; no header, no id."""
    for prediction in predictions:
        yield "\t".join(str(p) for p in prediction["probabilities"])


def prediction_lines(examples, predictions, label_list, multi_label, label_separator="|"):
    """test_predictions.tsv lines (header first): id, predicted label(s), one
    probability per label."""
    yield "\t".join(["id", "prediction"] + ["probability[%s]" % label for label in label_list])
    for example, prediction in zip(examples, predictions):
        if multi_label:
            chosen = label_separator.join(
                label_list[i] for i, on in enumerate(prediction["predicted"]) if on)
        else:
            chosen = label_list[int(prediction["predicted"])]
        probabilities = ["%.6f" % p for p in prediction["probabilities"]]
        yield "\t".join([str(example.guid), chosen] + probabilities)


def per_document(predictions, num_documents, label_list, multi_label, threshold, how):
    """The predictions of windows (dicts with probabilities and doc_index, in record
    order) as one per document: aggregated probabilities and the prediction."""
    predictions = list(predictions)
    probabilities = text_windows.aggregate(
        [p["probabilities"] for p in predictions], [int(p["doc_index"]) for p in predictions],
        num_documents, how)
    for row in probabilities:
        predicted = ((row >= threshold).astype(np.int32) if multi_label
                     else int(np.argmax(row)))
        yield {"probabilities": row.astype(np.float32), "predicted": predicted}


DEV_PREDICTIONS_FILE = "dev_predictions.tsv"


def dev_prediction_lines(examples, predictions, label_list):
    """dev_predictions.tsv (long texts): id, gold label, predicted label, one
    probability per label; a line per document (its windows aggregated)."""
    yield "\t".join(["id", "label", "prediction"]
                    + ["probability[%s]" % label for label in label_list])
    for example, prediction in zip(examples, predictions):
        yield "\t".join([str(example.guid), example.label,
                         label_list[int(prediction["predicted"])]]
                        + ["%.6f" % p for p in prediction["probabilities"]])


def document_report(path, label_list):
    """The eval report of dev_predictions.tsv: every metric counts documents;
    eval_loss is the documents' mean cross-entropy of the aggregated probabilities."""
    index = {label: i for i, label in enumerate(label_list)}
    confusion = np.zeros([len(label_list)] * 2)
    losses = []
    with open(path, encoding="utf-8") as f:
        next(f)
        for line in f:
            fields = line.rstrip("\n").split("\t")
            gold, predicted = index[fields[1]], index[fields[2]]
            confusion[gold, predicted] += 1
            losses.append(-math.log(max(float(fields[3 + gold]), 1e-12)))
    report = scores.classification_report(confusion, label_list)
    report["eval_loss"] = float(np.mean(losses))
    prefix = "" if len(label_list) == 2 else "macro_"
    return scores.add_original_keys(report, prefix)
