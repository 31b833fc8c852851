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

import numpy as np
import tensorflow as tf

import fine_tuning
import graph_tokenization
import input_pipeline
import metrics
import modeling
import scores
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


def feature_spec(max_seq_length, num_labels, multi_label):
    lengths = {"input_ids": max_seq_length, "input_mask": max_seq_length,
               "segment_ids": max_seq_length,
               "label_ids": num_labels if multi_label else 1}
    spec = input_pipeline.fixed_length_spec(
        lengths, float_names=("label_ids",) if multi_label else ())
    return spec


def make_head_fn(num_labels, dropout_prob, multi_label=False, threshold=0.5,
                 pooling="pooler", probabilities_only=False):
    """The classification head for training.build_model_fn.

    dropout_prob: dropout on the pooled output in training (Google's code fixes
    0.1, the hidden_dropout_prob of its configs; pass the config's value).
    pooling: one of modeling.POOLING_MODES.
    probabilities_only: the export returns the probabilities alone (SERVING_COMPAT).
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
                 serving_compat=None):
        super().__init__(examples, label_list, {"pooling": pooling})
        self.multi_label = multi_label
        self.threshold = threshold
        self.label_separator = label_separator
        self.task_name = task_name
        self.name = "classification" + ("-multi-label" if multi_label else "")
        self.serving_compat = serving_compat
        self.extra_serving_inputs = SERVING_COMPAT[serving_compat] if serving_compat else {}

    def examples_digest(self, examples):
        return examples_digest(examples)

    def feature_rows(self, examples, tokenizer, max_seq_length):
        return list(feature_rows(examples, tokenizer, max_seq_length, self.label_list,
                                 self.multi_label))

    def feature_spec(self, max_seq_length):
        return feature_spec(max_seq_length, len(self.label_list), self.multi_label)

    def head_fn(self, bert_config):
        return make_head_fn(len(self.label_list), bert_config.hidden_dropout_prob,
                            self.multi_label, self.threshold, self.head_settings["pooling"],
                            probabilities_only=self.serving_compat is not None)

    def eval_report(self, results):
        return eval_report(results, self.label_list, self.multi_label)

    def prediction_files(self, split, examples, predictions):
        predictions = list(predictions)  # read by both files
        return [(GOOGLE_RESULTS_FILE, google_result_lines(predictions)),
                (PREDICTIONS_FILE, prediction_lines(examples, predictions, self.label_list,
                                                    self.multi_label, self.label_separator))]

    @property
    def text_inputs(self):
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
                "sentence_pairs": self.sentence_pairs}
