"""run_seq_labeling.py's settings: the task, its files and labels, and its windows."""

import dataclasses
from typing import Optional

from bert_toolkit.engine.options import FineTuningOptions, ServingCompatOptions
from bert_toolkit.errors import InputError
from bert_toolkit.options import option
from bert_toolkit.tasks.seq_labeling import readers


@dataclasses.dataclass(frozen=True)
class SeqLabelingOptions(FineTuningOptions, ServingCompatOptions):
    task_name: Optional[str] = option(
        None, "ner (BIO/BIOES entities), pos (per-word tags) or punct (punctuation "
        "restoration from plain text); the multi-GPU fork's named_entity and norm (any "
        "case).", choices=readers.TASK_NAMES, case_sensitive=False, required=True)
    train_file: Optional[str] = option(
        None, "Training file (relative to --data_dir unless absolute; default train.txt, or "
        "train.tsv in the fork's layout).")
    dev_file: Optional[str] = option(
        None, "Evaluation file (relative to --data_dir; default dev.txt or dev.tsv).")
    test_file: Optional[str] = option(
        None, "Prediction file (relative to --data_dir; default test.txt or test.tsv); its "
        "labels may be missing.")
    labels: Optional[str] = option(
        None, "Comma-separated label list (default: the labels of the training file, O "
        "first; plain-text punct's are fixed; the fork's PUNCT and NAMED_ENTITY have "
        "default lists).")
    encoding: str = option("utf-8", "Encoding of the data files.")
    window_stride: Optional[int] = option(
        None, "Sentences longer than max_seq_length - 2 sub-tokens are cut into windows "
        "starting this many sub-tokens apart (default: half a window).")

    def check(self):
        budget = self.max_seq_length - 2
        if self.window_stride is not None and not 1 <= self.window_stride <= budget:
            raise InputError("--window_stride=%d: expected 1 to %d (max_seq_length - 2, the "
                             "sub-tokens of one window)" % (self.window_stride, budget))

    @property
    def stride(self):
        """--window_stride, or half of the sub-tokens a window holds."""
        if self.window_stride is not None:
            return self.window_stride
        return max(1, (self.max_seq_length - 2) // 2)
