"""Token labelling (ner, pos, punct): the Task, and `run` from SeqLabelingOptions.

`run(options)` is what run_seq_labeling.py does: read and check the splits
and the label set, then fine-tune, evaluate, predict and export through the
shared flow. The files are read by readers.py (punct's labels: punctuation.py),
aligned and windowed by features.py, scored by conlleval.py and written by
outputs.py, none of which needs TensorFlow; the head is head.py.
"""

import os

from bert_toolkit.engine import base_task, fine_tuning, run_folder, scores
from bert_toolkit.errors import InputError
from bert_toolkit.tasks.seq_labeling import conlleval, features, head, outputs, punctuation, readers


class SeqLabelingTask(base_task.Task):
    """Token labelling (ner, pos or punct; see readers.py).

    examples: split -> [readers.Sentence]; window_stride: sub-tokens
    between the starts of a long sentence's windows. For ner the eval split
    is also predicted: entity scores need whole sentences (dev_results.txt).
    label_lines: also write the fork's prediction file (a line of labels per
    test sentence).
    """

    summary_keys = ("entity_f1", "accuracy", "macro_f1", "eval_loss")
    # Zero label_mask and word_ids -1 past the text: the loss, the metrics and
    # the merged predictions never read those positions.
    masked_token_features = ("label_ids", "label_mask", "word_ids")

    def __init__(self, examples, label_list, task_name, window_stride, label_lines=False,
                 serving_compat=None):
        super().__init__(examples, label_list)
        self.serving_compat = serving_compat
        self.extra_serving_inputs = head.FORK_SERVING_INPUTS if serving_compat else {}
        self.task_name = task_name
        self.window_stride = window_stride
        self.label_lines = label_lines
        self.name = "token_classification-" + task_name
        self.predicts_eval_split = task_name == "ner"

    def examples_digest(self, examples):
        return features.examples_digest(examples, self.window_stride)

    def feature_rows(self, examples, tokenizer, max_seq_length):
        return list(features.feature_rows(examples, tokenizer, max_seq_length,
                                          self.window_stride, self.label_list))

    def feature_spec(self, max_seq_length):
        return head.feature_spec(max_seq_length)

    def head_fn(self, bert_config):
        return head.make_head_fn(len(self.label_list), bert_config.hidden_dropout_prob,
                                 fork_serving=self.serving_compat is not None)

    def eval_report(self, results):
        return head.eval_report(results, self.label_list, self.task_name)

    def prediction_files(self, split, examples, predictions):
        return outputs.prediction_files(split, examples, predictions, self.label_list,
                                        self.task_name, self.label_lines)

    def report_from_predictions(self, written):
        return scores.add_original_keys(outputs.score_predictions_file(
            written[outputs.EVAL_RESULTS_FILE], conlleval.entity_types(self.label_list)),
            "entity_")

    def serving_config(self):
        return dict(outputs.serving_config(self.task_name, self.window_stride),
                    serving_compat=self.serving_compat)


# -- the run --------------------------------------------------------------------------

_FILE_SETTINGS = {"train": "train_file", "eval": "dev_file", "predict": "test_file"}
_FILE_STEMS = {"train": "train", "eval": "dev", "predict": "test"}


def run(options):
    """Fine-tunes, evaluates, predicts and exports as SeqLabelingOptions say; returns
    the launch.Report."""
    label_list, examples = read_examples(options)
    label_lines = "predict" in examples and readers.is_sentence_lines(
        options.task_name, split_path(options, "predict"))
    return fine_tuning.run(SeqLabelingTask(
        examples, label_list, readers.task_kind(options.task_name), options.stride,
        label_lines, options.serving_compat), options)


def split_path(options, split):
    """The file of one split: its setting (relative to data_dir), else the default."""
    name = getattr(options, _FILE_SETTINGS[split])
    if name:
        return os.path.join(options.data_dir or "", name)
    return readers.default_split_path(options.data_dir, options.task_name, _FILE_STEMS[split])


def fork_layout(options):
    """Whether the task's files are in the multi-GPU fork's layout (a sentence a line)."""
    return bool(options.data_dir) and readers.is_sentence_lines(
        options.task_name, split_path(options, "train"))


def labels_from_text(options):
    """Whether the labels come from the text itself (punct on plain text)."""
    return options.task_name == "punct" and not fork_layout(options)


def given_labels(options):
    """The --labels list (None if not given), checked."""
    if options.labels is None:
        return None
    if labels_from_text(options):
        raise InputError("--labels: the punct task's labels are fixed (%s)"
                         % ",".join(punctuation.PUNCT_LABELS))
    labels = [label.strip() for label in options.labels.split(",") if label.strip()]
    if not labels or len(set(labels)) != len(labels):
        raise InputError("--labels=%s: expected distinct comma-separated labels"
                         % options.labels)
    if readers.task_kind(options.task_name) == "ner":
        bad = [label for label in labels if not conlleval.is_bioes_tag(label)]
        if bad:
            raise InputError("--labels: %r is not a BIO/BIOES tag (O, or B-, I- or M-, E-, S- "
                             "and an entity type)" % bad[0])
    return labels


def read_split(options, split):
    """The sentences of one split, labels read for train and eval (ner: BIO/BIOES)."""
    path = split_path(options, split)
    sentences = readers.read_split(path, options.task_name, split, split != "predict",
                                options.encoding)
    if readers.task_kind(options.task_name) == "ner" and split != "predict":
        readers.check_ner_tags(sentences, path)
    return sentences


def read_examples(options):
    """(label list, every split the run needs), read and checked before any write."""
    wanted = {"train": options.do_train, "eval": options.do_eval,
              "predict": options.do_predict}
    if not options.data_dir and any(wanted.values()):
        raise InputError("--data_dir is required with --do_train/--do_eval/--do_predict")
    examples = {split: read_split(options, split) for split in wanted if wanted[split]}
    saved = run_folder.read_saved_labels(options.output_dir)
    given = given_labels(options)
    if saved is not None and not options.do_train:
        label_list, origin = saved, "of the model in --output_dir=%s" % options.output_dir
    elif labels_from_text(options):
        label_list, origin = list(punctuation.PUNCT_LABELS), "of the punct task"
    elif given is not None:
        label_list, origin = given, "given by --labels"
    elif options.task_name in readers.FORK_LABELS and fork_layout(options):
        label_list = list(readers.FORK_LABELS[options.task_name])
        origin = "the multi-GPU fork's %s has (give --labels for others)" % (
            options.task_name.upper())
    else:
        if "train" not in examples:
            examples["train"] = read_split(options, "train")
        label_list = readers.labels_of(examples["train"])
        origin = "found in %s (or give --labels)" % split_path(options, "train")
        if not options.do_train:
            del examples["train"]
    for split in ("train", "eval"):
        if split in examples:
            readers.check_sentence_labels(examples[split], label_list, origin,
                                       split_path(options, split))
    if "train" in examples:
        found = {label for sentence in examples["train"] for label in sentence.labels}
        if len(found) == 1:
            raise InputError("%s: every word is labelled %r; training needs words of at "
                             "least two labels" % (split_path(options, "train"), found.pop()))
    return label_list, examples
