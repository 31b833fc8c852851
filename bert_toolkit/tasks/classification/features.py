"""A classifier's features: token ids of one text or a pair, and its label(s) as targets.

Truncated as Google's run_classifier.py truncates (one row per example), or,
with --long_text=windows, one row per window of a long text carrying the
index of its text (doc_index). No TensorFlow here but the feature spec.
"""

import hashlib
import json

import numpy as np

from bert_toolkit.engine import input_pipeline
from bert_toolkit.text import windows as text_windows


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
    """Yields the feature dicts of every window of `examples` (text/windows.py),
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
