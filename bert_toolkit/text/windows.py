"""Long texts as overlapping windows: the one place every task cuts them.

- `token_windows` and `max_context_window`: Google's sliding window and its
  max-context rule, exactly as run_squad.py has them. SQuAD cuts a context
  into these windows; a classifier with --long_text=windows cuts a long text
  the same way (every window trained with the text's label, answered per
  text by the mean or max of its windows' probabilities: `encode_windows`,
  `aggregate`).
- `word_windows` and `scoring_word_windows`: the same sliding window, but
  made of whole words (a word's pieces never straddle two windows), and the
  one window that scores each word, for token labelling.

Training, evaluation, prediction and serving_client.py all cut windows here,
so they agree. No TensorFlow here.

Sentence pairs (classifier): the windows run over text_a; text_b (at most
half the budget, cut as Google truncates) goes whole into every window.
"""

import numpy as np

from bert_toolkit.errors import InputError
from bert_toolkit.text import tokenization

AGGREGATIONS = ("mean", "max")


# -- windows over tokens ----------------------------------------------------------

def token_windows(num_tokens, size, stride):
    """[(start, end)] token ranges of at most `size` tokens that cover `num_tokens`:
    Google's sliding window (run_squad.py's doc spans). Window k+1 starts
    min(its length, `stride`) tokens after window k, so no token is skipped
    even when `stride` exceeds `size`; the last one ends at `num_tokens`.
    [(0, 0)] for no tokens, so that every text has a window."""
    windows = []
    start = 0
    while start < num_tokens:
        end = min(start + size, num_tokens)
        windows.append((start, end))
        if end == num_tokens:
            break
        start += min(end - start, stride)
    return windows or [(0, 0)]


def max_context_window(windows, position):
    """Index of the window of `windows` ([(start, end)]) where token `position` has
    the most context: the largest min(tokens left, tokens right) plus 0.01 x the
    window's length, the first on a tie (Google's _check_is_max_context; SQuAD
    scores a token in that window only)."""
    best, best_score = None, None
    for index, (start, end) in enumerate(windows):
        if start <= position < end:
            score = min(position - start, end - 1 - position) + 0.01 * (end - start)
            if best_score is None or score > best_score:
                best, best_score = index, score
    return best


# -- windows of whole words (token labelling) ----------------------------------------

def _offsets(piece_counts):
    """Cumulative sub-token offsets: [0, c0, c0 + c1, ...] (len(piece_counts) + 1)."""
    offsets = [0]
    for count in piece_counts:
        offsets.append(offsets[-1] + count)
    return offsets


def word_windows(piece_counts, budget, stride):
    """Word ranges [(first, end)] of the windows that cover a sentence.

    Args:
      piece_counts: sub-tokens of each word, each between 1 and `budget`.
      budget: sub-tokens a window holds (max_seq_length - 2).
      stride: sub-tokens from one window's start to the next one's (>= 1).
    Returns:
      Windows of whole words, each as long as fits; window k+1 starts at the
      first word at least `stride` sub-tokens after window k's start, but no
      later than window k's end (so nothing is skipped) and at least one word
      later (so the windows advance). [] for a sentence without words.
    """
    num_words = len(piece_counts)
    offsets = _offsets(piece_counts)
    windows = []
    first = 0
    while first < num_words:
        end = first
        while end < num_words and offsets[end + 1] - offsets[first] <= budget:
            end += 1
        windows.append((first, end))
        if end == num_words:
            break
        following = first + 1
        while following < end and offsets[following] < offsets[first] + stride:
            following += 1
        first = following
    return windows


def scoring_word_windows(piece_counts, windows):
    """For each word, the index of the window that scores it (most context).

    A word's context in a window is the smaller of its sub-tokens before it and
    after it inside the window, where a side on which the window reaches the
    sentence's edge counts as complete. The earliest window wins a tie.
    """
    num_words = len(piece_counts)
    offsets = _offsets(piece_counts)
    complete = offsets[-1] + 1
    owner = [None] * num_words
    best = [-1] * num_words
    for index, (first, end) in enumerate(windows):
        for word in range(first, end):
            left = offsets[word] - offsets[first] if first > 0 else complete
            right = offsets[end] - offsets[word + 1] if end < num_words else complete
            context = min(left, right)
            if context > best[word]:
                best[word], owner[word] = context, index
    return owner


# -- long texts for a classifier ---------------------------------------------------

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
        layout = tokenizer.layout
        budget = max_seq_length - (layout.single_specials if b is None else layout.pair_specials)
        if b is not None:
            b = b[:max(budget // 2, budget - len(a))]
        for start, end in token_windows(len(a), budget - (len(b) if b else 0), stride):
            rows_a.append(a[start:end])
            rows_b.append(b)
            text_index.append(index)
    arrays = tokenization.pack_rows(rows_a, rows_b, max_seq_length, tokenizer.layout)
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
