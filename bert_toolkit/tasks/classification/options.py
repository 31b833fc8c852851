"""The classifier scripts' settings (run_classifier.py, run_custom_classifier.py)."""

import dataclasses
from typing import Optional, Union

from bert_toolkit.engine.options import FineTuningOptions, PoolingOptions, ServingCompatOptions
from bert_toolkit.errors import InputError
from bert_toolkit.options import option
from bert_toolkit.tasks.classification import data
from bert_toolkit.text import windows

# --serving_compat=bert_multi_gpu: the export also takes the fork's label_ids
# input (ignored; its README's request sends "label_ids": [0] per instance, so
# any [batch, n] is accepted) and returns the probabilities alone, so
# TensorFlow Serving answers {"predictions": [[p0, p1], ...]}.
FORK_SERVING_INPUTS = {"label_ids": [None, None]}
LONG_TEXT = ("truncate", "windows")

# The custom task's settings: None means "the processor's default" (data.py).
CUSTOM_TASK_SETTINGS = ("text_a_column", "text_b_column", "label_column", "id_column",
                        "train_file", "dev_file", "test_file", "file_format", "labels",
                        "label_separator", "encoding", "has_header", "multi_label",
                        "language")


@dataclasses.dataclass(frozen=True)
class ClassifierOptions(FineTuningOptions, PoolingOptions, ServingCompatOptions):
    task_name: Optional[str] = option(
        None, "Task: %s." % ", ".join(sorted(data.PROCESSORS)), required=True)
    processor_module: Optional[str] = option(
        None, "Python module to import first (it registers your own DataProcessor with "
        "bert_toolkit.tasks.classification.data.register_processor).")
    class_weights: Optional[str] = option(
        None, "Training loss weight per label: 'balanced' (inverse frequency in the training "
        "file) or one number per label in label-list order, comma-separated. Single-label "
        "tasks.")
    long_text: str = option(
        "truncate", "Texts longer than max_seq_length: truncate (Google's; a model with "
        "8,192 positions, ModernBERT's, reads a long text whole with --max_seq_length=8192), "
        "or windows: overlapping windows, each trained with the text's label, answered per "
        "text by aggregating its windows (metrics count texts; docs/long_inputs.md).",
        choices=LONG_TEXT)
    doc_stride: Optional[int] = option(
        None, "--long_text=windows: tokens between the starts of a text's windows "
        "(default: half a window).")
    window_aggregation: str = option(
        "mean", "--long_text=windows: mean or max of the windows' probabilities.",
        choices=windows.AGGREGATIONS)
    multi_label_threshold: float = option(
        0.5, "Multi-label: a label is predicted when its probability reaches this.")
    text_a_column: Optional[Union[str, int]] = option(
        None, "custom task: Column (header name or 0-based index; JSON key) of the text.")
    text_b_column: Optional[Union[str, int]] = option(
        None, "custom task: Column of the second text of a sentence pair (optional).")
    label_column: Optional[Union[str, int]] = option(None, "custom task: Column of the label(s).")
    id_column: Optional[Union[str, int]] = option(
        None, "custom task: Column of an example id, copied to test_predictions.tsv "
        "(optional).")
    train_file: Optional[str] = option(
        None, "custom task: Training file in data_dir (default train.<format>).")
    dev_file: Optional[str] = option(
        None, "custom task: Dev file in data_dir (default dev.<format>).")
    test_file: Optional[str] = option(
        None, "custom task: Test file in data_dir (default test.<format>).")
    file_format: Optional[str] = option(
        None, "custom task: tsv, csv or jsonl (default: from the file extension).")
    labels: Optional[str] = option(
        None, "custom task: Comma-separated label list (default: the labels of the "
        "training file).")
    label_separator: Optional[str] = option(
        None, "custom task: Multi-label: separator of the labels in one field (default |).")
    encoding: Optional[str] = option(
        None, "custom task: Encoding of the data files (default utf-8).")
    has_header: Optional[bool] = option(
        None, "custom task: the tsv/csv files have a header row (default true).")
    multi_label: Optional[bool] = option(
        None, "custom task: several labels per example.")
    language: Optional[str] = option(
        None, "xnli task: the language of the translated training file and of the dev/test "
        "rows (default zh, as Google's code).")

    def check(self):
        if self.long_text != "windows":
            if self.doc_stride is not None:
                raise InputError("--doc_stride applies to --long_text=windows")
        elif self.doc_stride is not None:
            windows.check_stride(self.doc_stride, self.max_seq_length)

    @property
    def window_stride(self):
        """--doc_stride, or half of a window of one text (None: no windows)."""
        if self.long_text != "windows":
            return None
        if self.doc_stride is not None:
            return self.doc_stride
        return max(1, (self.max_seq_length - 2) // 2)

    def processor_settings(self):
        """The custom task's settings given (those None are the processor's defaults)."""
        return {name: getattr(self, name) for name in CUSTOM_TASK_SETTINGS}


@dataclasses.dataclass(frozen=True)
class MlabelOptions(ClassifierOptions):
    """run_custom_classifier_mlabel.py: the multi-GPU fork's multi-label script, its flags
    (--num_labels besides the classifier's) on the same classifier."""
    num_labels: int = option(
        10, "Number of labels in dataset for multi-label classification (the mlabel task: "
        "the label columns after id and text).", minimum=1)

    def processor_settings(self):
        return dict(super().processor_settings(), num_labels=self.num_labels)
