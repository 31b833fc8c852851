"""Long texts as windows (text/windows.py): Google's sliding window and max-context rule,
whole-word windows for token labelling, one answer per text from its windows."""

import random

import numpy as np

from bert_toolkit.text import windows as text_windows


def test_window_spans_and_aggregation():
    assert text_windows.token_windows(5, 8, 4) == [(0, 5)]
    assert text_windows.token_windows(10, 6, 3) == [(0, 6), (3, 9), (6, 10)]
    assert text_windows.token_windows(12, 6, 6) == [(0, 6), (6, 12)]
    # A stride longer than a window leaves no gap (Google's rule).
    assert text_windows.token_windows(12, 4, 6) == [(0, 4), (4, 8), (8, 12)]
    spans = text_windows.token_windows(101, 14, 5)
    covered = set(i for start, end in spans for i in range(start, end))
    assert covered == set(range(101)) and spans[-1][1] == 101
    probabilities = [[0.9, 0.1], [0.4, 0.6], [0.2, 0.8], [0.5, 0.5]]
    mean = text_windows.aggregate(probabilities, [0, 0, 1, 0], 2, "mean")
    np.testing.assert_allclose(mean, [[0.6, 0.4], [0.2, 0.8]])
    top = text_windows.aggregate(probabilities, [0, 0, 1, 0], 2, "max")
    np.testing.assert_allclose(top, [[0.9 / 1.5, 0.6 / 1.5], [0.2, 0.8]])


def test_doc_spans_and_max_context_are_googles():
    windows = text_windows.token_windows
    assert windows(10, 4, 3) == [(0, 4), (3, 7), (6, 10)]
    assert windows(10, 4, 6) == [(0, 4), (4, 8), (8, 10)]  # no gap
    assert windows(3, 4, 2) == [(0, 3)]
    assert windows(0, 4, 2) == [(0, 0)]
    spans = [(0, 4), (3, 7), (6, 10)]
    # Pieces 3 and 6 end one span and start the next: a tie (no context on one
    # side in either), the first span wins; piece 4 has more context in span 1.
    assert [text_windows.max_context_window(spans, i) for i in range(10)] == [
        0, 0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_windows_cover_every_word_and_score_each_once():
    rng = random.Random(3)
    for _ in range(500):
        budget = rng.randint(1, 12)
        stride = rng.randint(1, budget)
        counts = [rng.randint(1, budget) for _ in range(rng.randint(0, 30))]
        windows = text_windows.word_windows(counts, budget, stride)
        owner = text_windows.scoring_word_windows(counts, windows)
        covered = set()
        for index, (first, end) in enumerate(windows):
            assert first < end and sum(counts[first:end]) <= budget
            if index:
                previous_first, previous_end = windows[index - 1]
                assert previous_first < first <= previous_end  # advances, skips nothing
            if end < len(counts):
                assert sum(counts[first:end + 1]) > budget  # as long as fits
            covered.update(range(first, end))
        assert covered == set(range(len(counts)))
        for word, index in enumerate(owner):
            first, end = windows[index]
            assert first <= word < end


def test_each_word_is_scored_where_it_has_most_context():
    # Ten one-piece words, windows of 6 starting 3 apart: [0, 6), [3, 9), [6, 10).
    counts = [1] * 10
    windows = text_windows.word_windows(counts, 6, 3)
    assert windows == [(0, 6), (3, 9), (6, 10)]
    # Context is the smaller side; a side reaching the sentence edge is complete.
    # Word 4: 1 word after it in window 0, 1 before it in window 1: a tie the
    # earlier window wins. Word 5: 0 after in window 0, min(2, 3) in window 1.
    # Word 7: min(4, 1) in window 1, 1 before and the sentence end in window 2:
    # a tie again. Word 8: 0 after in window 1, 2 before (and the end) in window 2.
    assert text_windows.scoring_word_windows(counts, windows) == [0, 0, 0, 0, 0, 1, 1, 1, 2, 2]
