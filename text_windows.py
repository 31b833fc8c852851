"""Long texts as overlapping windows, and one answer per text from its windows'.

A classifier with `--long_text=windows` reads a text longer than
max_seq_length as several windows (every `stride` tokens, the last one ending
at the text's end), trains on every window with the text's label, and answers
per text with the mean (or max) of its windows' probabilities. Training,
evaluation, prediction and serving_client.py all cut windows here, so they
agree. No TensorFlow here.

Sentence pairs: the windows run over text_a; text_b (at most half the
budget, cut as Google truncates) goes whole into every window.
"""

import numpy as np

import tokenization
from errors import InputError

AGGREGATIONS = ("mean", "max")


def window_spans(num_tokens, size, stride):
    """[(start, end)] token spans of at most `size` tokens, starting every `stride`
    tokens, the last ending at `num_tokens`; [(0, num_tokens)] when it fits."""
    if num_tokens <= size:
        return [(0, num_tokens)]
    spans = []
    start = 0
    while True:
        end = min(start + size, num_tokens)
        spans.append((start, end))
        if end == num_tokens:
            return spans
        start += stride


def encode_windows(tokenizer, texts_a, texts_b, max_seq_length, stride):
    """The classifier's features of every window of every text.

    Returns (input_ids, input_mask, segment_ids, text_index): int32 arrays
    [num_windows, max_seq_length] x 3 and int32 [num_windows], the index of
    each window's text in `texts_a`, in text order.
    """
    texts_b = list(texts_b) if texts_b is not None else [None] * len(texts_a)
    ids_a = tokenizer.encode_batch(list(texts_a))
    present_b = [text for text in texts_b if text is not None]
    encoded_b = iter(tokenizer.encode_batch(present_b) if present_b else [])
    ids_b = [None if text is None else next(encoded_b) for text in texts_b]
    rows_a, rows_b, text_index = [], [], []
    for index, (a, b) in enumerate(zip(ids_a, ids_b)):
        budget = max_seq_length - (2 if b is None else 3)
        if b is not None:
            b = b[:max(budget // 2, budget - len(a))]
        for start, end in window_spans(len(a), budget - (len(b) if b else 0), stride):
            rows_a.append(a[start:end])
            rows_b.append(b)
            text_index.append(index)
    arrays = tokenization.pack_rows(rows_a, rows_b, max_seq_length, tokenizer.vocab["[CLS]"],
                                    tokenizer.vocab["[SEP]"])
    return arrays + (np.array(text_index, dtype=np.int32),)


def aggregate(probabilities, text_index, num_texts, how="mean"):
    """float [num_texts, num_labels]: the mean or max over each text's windows of
    `probabilities` [num_windows, num_labels]; a max is renormalised to sum 1."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    text_index = np.asarray(text_index)
    result = np.zeros((num_texts, probabilities.shape[1]))
    for index in range(num_texts):
        rows = probabilities[text_index == index]
        result[index] = rows.mean(axis=0) if how == "mean" else rows.max(axis=0)
    if how == "max":
        result /= result.sum(axis=1, keepdims=True)
    return result


def check_stride(stride, max_seq_length):
    """InputError unless 1 <= stride <= the tokens a window of one text holds."""
    if not 1 <= stride <= max_seq_length - 2:
        raise InputError("--doc_stride=%d: expected 1 to %d (tokens between the starts of "
                         "a long text's windows, at most a window)" % (stride,
                                                                     max_seq_length - 2))
