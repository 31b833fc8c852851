"""Sentence (pair) classification on BERT: features, the head, and result files.

Single-label: softmax over `num_labels`, cross-entropy, label ids [batch].
Multi-label: one sigmoid per label, binary cross-entropy, labels as a multi-hot
float vector [batch, num_labels]; a label is predicted when its probability
reaches `threshold`.

The head's variables are `output_weights` [num_labels, hidden] and
`output_bias` [num_labels], as in Google's run_classifier.py.
"""

import hashlib
import json
import math

import numpy as np
import tensorflow as tf

import fine_tuning
import graph_tokenization
import input_pipeline
import metrics
import modeling
import scores
import text_windows
from errors import InputError
from training import Head

tf1 = tf.compat.v1


def examples_digest(examples):
    """A hash of every example's id, texts and label (the cache key of its features)."""
    digest = hashlib.sha1()
    for example in examples:
        digest.update(json.dumps([example.guid, example.text_a, example.text_b,
                                  example.label]).encode("utf-8"))
    return digest.hexdigest()


def label_targets(examples, label_list, multi_label):
    """int32 ids [n] (single-label) or float32 multi-hot [n, num_labels]; unlabeled -> 0."""
    index = {label: i for i, label in enumerate(label_list)}
    if not multi_label:
        return np.array([index[e.label] if e.label is not None else 0 for e in examples],
                        dtype=np.int32)
    targets = np.zeros([len(examples), len(label_list)], dtype=np.float32)
    for row, example in enumerate(examples):
        for label in example.label or ():
            targets[row, index[label]] = 1.0
    return targets


def feature_rows(examples, tokenizer, max_seq_length, label_list, multi_label):
    """Yields the TFRecord feature dicts of `examples` (tokenized in one batch)."""
    texts_b = [e.text_b for e in examples]
    input_ids, input_mask, segment_ids = tokenizer.encode_pairs(
        [e.text_a for e in examples],
        texts_b if any(t is not None for t in texts_b) else None, max_seq_length)
    targets = label_targets(examples, label_list, multi_label)
    for i in range(len(examples)):
        yield {"input_ids": input_ids[i], "input_mask": input_mask[i],
               "segment_ids": segment_ids[i], "label_ids": targets[i]}


def window_feature_rows(examples, tokenizer, max_seq_length, stride, label_list,
                        multi_label):
    """Yields the feature dicts of every window of `examples` (text_windows.py),
    each with its document's label and `doc_index`, the example's position."""
    texts_b = [e.text_b for e in examples]
    input_ids, input_mask, segment_ids, doc_index = text_windows.encode_windows(
        tokenizer, [e.text_a for e in examples],
        texts_b if any(t is not None for t in texts_b) else None, max_seq_length, stride)
    targets = label_targets(examples, label_list, multi_label)
    for i in range(len(doc_index)):
        yield {"input_ids": input_ids[i], "input_mask": input_mask[i],
               "segment_ids": segment_ids[i], "label_ids": targets[doc_index[i]],
               "doc_index": doc_index[i:i + 1]}


def feature_spec(max_seq_length, num_labels, multi_label, windows=False):
    lengths = {"input_ids": max_seq_length, "input_mask": max_seq_length,
               "segment_ids": max_seq_length,
               "label_ids": num_labels if multi_label else 1}
    if windows:
        lengths["doc_index"] = 1
    spec = input_pipeline.fixed_length_spec(
        lengths, float_names=("label_ids",) if multi_label else ())
    return spec


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


def make_head_fn(num_labels, dropout_prob, multi_label=False, threshold=0.5,
                 pooling="pooler", probabilities_only=False, label_weights=None):
    """The classification head for training.build_model_fn.

    dropout_prob: dropout on the pooled output in training (Google's code fixes
    0.1, the hidden_dropout_prob of its configs; pass the config's value).
    pooling: one of modeling.POOLING_MODES.
    probabilities_only: the export returns the probabilities alone (SERVING_COMPAT).
    label_weights: single-label only, a loss weight per label (class_weights);
    the training loss is the mean of weight[label] x cross-entropy, the eval
    loss stays the plain mean (comparable across runs).
    """
    def head_fn(model, features, mode):
        is_training = mode == tf.estimator.ModeKeys.TRAIN
        # float32 [batch, hidden]
        pooled = modeling.sentence_vector(model, features["input_mask"], pooling)
        if is_training:
            pooled = modeling.dropout(pooled, dropout_prob)
        hidden_size = pooled.shape[-1]
        output_weights = tf1.get_variable(
            "output_weights", [num_labels, hidden_size],
            initializer=tf1.truncated_normal_initializer(stddev=0.02))
        output_bias = tf1.get_variable("output_bias", [num_labels],
                                       initializer=tf1.zeros_initializer())
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
        if mode == tf.estimator.ModeKeys.PREDICT:
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
        if mode == tf.estimator.ModeKeys.EVAL:
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


# --serving_compat: exports whose serving_default answers another project's
# clients unchanged. bert_multi_gpu, the multi-GPU fork's: it also takes the
# fork's label_ids input (ignored; its README's request sends "label_ids": [0]
# per instance, so any [batch, n] is accepted) and returns the probabilities
# alone, so TensorFlow Serving answers {"predictions": [[p0, p1], ...]}.
SERVING_COMPAT = {"bert_multi_gpu": {"label_ids": [None, None]}}


class ClassifierTask(fine_tuning.Task):
    """Sentence (pair) classification, single- or multi-label (see the module docstring).

    examples: split -> [classifier_data.InputExample]; pooling: one of
    modeling.POOLING_MODES; task_name: recorded for clients; serving_compat:
    None (our export) or a key of SERVING_COMPAT.
    """

    summary_keys = ("accuracy", "micro_f1", "eval_loss")

    def __init__(self, examples, label_list, multi_label=False, threshold=0.5,
                 pooling="pooler", label_separator="|", task_name="custom",
                 serving_compat=None, label_weights=None, long_text="truncate",
                 doc_stride=None, window_aggregation="mean"):
        settings = {"pooling": pooling}
        if "train" in examples:
            # Recorded when training, so a resume with other weights is refused.
            settings["class_weights"] = label_weights
        super().__init__(examples, label_list, settings)
        self.label_weights = label_weights
        self.windows = long_text == "windows"
        if self.windows and multi_label:
            raise InputError("--long_text=windows: single-label tasks only")
        self.doc_stride = doc_stride
        self.window_aggregation = window_aggregation
        # Metrics count documents: computed from the aggregated predictions.
        self.streamed_eval = not self.windows
        self.predicts_eval_split = self.windows
        self.multi_label = multi_label
        self.threshold = threshold
        self.label_separator = label_separator
        self.task_name = task_name
        self.name = "classification" + ("-multi-label" if multi_label else "")
        self.serving_compat = serving_compat
        self.extra_serving_inputs = SERVING_COMPAT[serving_compat] if serving_compat else {}

    def examples_digest(self, examples):
        digest = examples_digest(examples)
        return digest + ("-windows-%d" % self.doc_stride if self.windows else "")

    def feature_rows(self, examples, tokenizer, max_seq_length):
        if self.windows:
            return list(window_feature_rows(examples, tokenizer, max_seq_length,
                                            self.doc_stride, self.label_list,
                                            self.multi_label))
        return list(feature_rows(examples, tokenizer, max_seq_length, self.label_list,
                                 self.multi_label))

    def feature_spec(self, max_seq_length):
        return feature_spec(max_seq_length, len(self.label_list), self.multi_label,
                            self.windows)

    def head_fn(self, bert_config):
        return make_head_fn(len(self.label_list), bert_config.hidden_dropout_prob,
                            self.multi_label, self.threshold, self.head_settings["pooling"],
                            probabilities_only=self.serving_compat is not None,
                            label_weights=self.label_weights)

    def eval_report(self, results):
        return eval_report(results, self.label_list, self.multi_label)

    def prediction_files(self, split, examples, predictions):
        if self.windows:
            predictions = per_document(predictions, len(examples), self.label_list,
                                       self.multi_label, self.threshold,
                                       self.window_aggregation)
        predictions = list(predictions)  # read by both files
        if split == "eval":
            return [(DEV_PREDICTIONS_FILE,
                     dev_prediction_lines(examples, predictions, self.label_list))]
        return [(GOOGLE_RESULTS_FILE, google_result_lines(predictions)),
                (PREDICTIONS_FILE, prediction_lines(examples, predictions, self.label_list,
                                                    self.multi_label, self.label_separator))]

    def report_from_predictions(self, written):
        return document_report(written[DEV_PREDICTIONS_FILE], self.label_list)

    @property
    def text_inputs(self):
        if self.windows:
            return ()  # one text is several rows: serving_client cuts and aggregates
        return ("text_a", "text_b") if self.sentence_pairs else ("text_a",)

    @property
    def sentence_pairs(self):
        return any(e.text_b is not None for split in self.examples.values() for e in split)

    def text_features(self, texts, vocab_tokens, do_lower_case, max_seq_length):
        return graph_tokenization.text_features(texts["text_a"], texts.get("text_b"),
                                                vocab_tokens, do_lower_case, max_seq_length)

    def serving_config(self):
        return {"task": "classification", "task_name": self.task_name,
                "serving_compat": self.serving_compat,
                "multi_label": self.multi_label,
                "multi_label_threshold": self.threshold,
                "sentence_pairs": self.sentence_pairs,
                "long_text": "windows" if self.windows else "truncate",
                "doc_stride": self.doc_stride, "window_aggregation": self.window_aggregation}
