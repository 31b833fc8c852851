"""Answers from a SQuAD model's start and end logits, as Google's run_squad.py
makes them; no TensorFlow here, so a serving client can make them too.

For each question: the n best starts and ends of each window's context pieces
(where that window is the piece's max-context window), spans of at most
max_answer_length pieces, ranked by start + end logit, each mapped back onto
the context's own characters (get_final_text's character alignment: casing,
accents and punctuation as in the context; for byte-level BPE and
SentencePiece tokens, the whole words the span covers). v2.0 adds the null answer
([CLS]) and predicts "" when its score beats the best span by more than the
null score threshold.
"""

import collections
import math

import numpy as np

from bert_toolkit.tasks.squad import features as squad_features
from bert_toolkit.text import tokenization

Candidate = collections.namedtuple("Candidate", ["window", "start", "end", "start_logit",
                                                 "end_logit"])
Answer = collections.namedtuple("Answer", ["qas_id", "text", "nbest", "null_odds",
                                           "offsets"])
"""qas_id; text: the prediction; nbest: [OrderedDict(text, probability,
start_logit, end_logit)]; null_odds: null score - best span score (v2.0),
else None; offsets: (start, end) of `text` in the context's characters,
context[start:end] (None for "")."""


def best_indexes(logits, n, limit):
    """The indexes of the `n` largest of logits[:limit], largest first (ties:
    the lower index first). Only real tokens compete, so the answer does not
    depend on how much padding a batch had."""
    order = sorted(range(min(limit, len(logits))), key=lambda i: logits[i], reverse=True)
    return order[:n]


def softmax(scores):
    """Probabilities of a list of floats (a list)."""
    top = max(scores)
    exps = [math.exp(score - top) for score in scores]
    total = sum(exps)
    return [value / total for value in exps]


def strip_spaces(text):
    """(text without spaces, index in it -> index in `text`)."""
    kept, where = [], []
    for index, char in enumerate(text):
        if char != " ":
            kept.append(char)
            where.append(index)
    return "".join(kept), where


def final_span(piece_text, original, do_lower_case):
    """(start, end): the slice of `original` (the context words a span covers,
    joined by spaces) that the detokenized pieces `piece_text` stand for.

    The words are run through the basic tokenizer; when that text without
    spaces has as many characters as `original` without spaces, the two are
    aligned character by character and piece_text's start and end are mapped
    back ("Steve Smith's" holds the prediction "steve smith" as "Steve
    Smith"). Otherwise (accents stripped, characters dropped) the whole of
    `original`, as Google's script does.
    """
    whole = (0, len(original))
    basic = " ".join(tokenization.BasicTokenizer(do_lower_case).tokenize(original))
    start = basic.find(piece_text)
    if start == -1:
        return whole
    end = start + len(piece_text) - 1
    original_chars, original_where = strip_spaces(original)
    basic_chars, basic_where = strip_spaces(basic)
    if len(original_chars) != len(basic_chars):
        return whole
    to_stripped = {index: stripped for stripped, index in enumerate(basic_where)}
    if start not in to_stripped or end not in to_stripped:
        return whole
    return original_where[to_stripped[start]], original_where[to_stripped[end]] + 1


def span_offsets(window, start, end, paragraph, do_lower_case):
    """(start, end) in paragraph.context of tokens start..end of `window`: the
    context's characters, with its own whitespace between words. Tokens other
    than WordPiece's (byte-level BPE, SentencePiece) give the whole words they
    cover: their text does not map back onto the context's characters."""
    first_word = window.token_to_word[start]
    words = paragraph.words[first_word:window.token_to_word[end] + 1]
    if not window.word_pieces:
        starts = paragraph.word_starts[first_word:]
        return starts[0], starts[len(words) - 1] + len(words[-1])
    pieces = " ".join(window.tokens[start:end + 1])
    pieces = " ".join(pieces.replace(" ##", "").replace("##", "").split())
    begin, finish = final_span(pieces, " ".join(words), do_lower_case)
    return (_context_offset(begin, words, paragraph.word_starts[first_word:]),
            _context_offset(finish - 1, words, paragraph.word_starts[first_word:]) + 1)


def _context_offset(index, words, starts):
    """Where character `index` of " ".join(words) is in the context, given each
    word's start there."""
    for word, start in zip(words, starts):
        if index < len(word):
            return start + index
        index -= len(word) + 1
    raise ValueError("offset past the words")


def span_text(window, start, end, paragraph, do_lower_case):
    """The context text of tokens start..end of `window` (see span_offsets)."""
    begin, finish = span_offsets(window, start, end, paragraph, do_lower_case)
    return paragraph.context[begin:finish]


def answer_question(question, windows, results, n_best_size, max_answer_length,
                    do_lower_case, version_2=False, null_score_diff_threshold=0.0):
    """The Answer of one question from its windows (squad_features.Window) and their
    results (dicts of start_logits and end_logits, sequences of floats)."""
    candidates = []
    null = None  # (score, start logit, end logit, window) of the lowest null score
    for index, (window, result) in enumerate(zip(windows, results)):
        starts, ends = result["start_logits"], result["end_logits"]
        if version_2:
            score = float(starts[0]) + float(ends[0])
            if null is None or score < null[0]:
                null = (score, float(starts[0]), float(ends[0]), index)
        limit = len(window.tokens)
        for start in best_indexes(starts, n_best_size, limit):
            if start not in window.token_to_word or not window.is_max_context[start]:
                continue
            for end in best_indexes(ends, n_best_size, limit):
                if end not in window.token_to_word or end < start:
                    continue
                if end - start + 1 > max_answer_length:
                    continue
                candidates.append(Candidate(index, start, end, float(starts[start]),
                                            float(ends[end])))
    if null is not None:
        candidates.append(Candidate(null[3], 0, 0, null[1], null[2]))
    candidates.sort(key=lambda c: c.start_logit + c.end_logit, reverse=True)

    paragraph = question.paragraph
    nbest, offsets = [], {}  # offsets: text -> its (start, end) in the context
    for candidate in candidates:
        if len(nbest) >= n_best_size:
            break
        text, where = "", None
        if candidate.start > 0:
            where = span_offsets(windows[candidate.window], candidate.start, candidate.end,
                                 paragraph, do_lower_case)
            text = paragraph.context[where[0]:where[1]]
        if text in offsets:
            continue
        offsets[text] = where
        nbest.append((text, candidate.start_logit, candidate.end_logit))
    if null is not None and "" not in offsets:
        nbest.append(("", null[1], null[2]))
    if not nbest:  # no valid span at all (Google's placeholder)
        nbest.append(("empty", 0.0, 0.0))
    probabilities = softmax([start + end for _, start, end in nbest])
    entries = [collections.OrderedDict([("text", text), ("probability", probability),
                                        ("start_logit", start), ("end_logit", end)])
               for (text, start, end), probability in zip(nbest, probabilities)]
    if not version_2:
        return Answer(question.qas_id, nbest[0][0], entries, None, offsets.get(nbest[0][0]))
    best_span = next(((text, start, end) for text, start, end in nbest if text), None)
    if best_span is None:
        # Only the null answer (Google's script fails here): "" for any threshold.
        return Answer(question.qas_id, "", entries, 1e6, None)
    odds = null[0] - best_span[1] - best_span[2]
    if odds > null_score_diff_threshold:
        return Answer(question.qas_id, "", entries, odds, None)
    return Answer(question.qas_id, best_span[0], entries, odds, offsets[best_span[0]])


def answers(questions, predictions, tokenizer, settings):
    """Yields the Answer of every question, reading `predictions` (per-window
    dicts with start_logits, end_logits and example_index, in window order)
    once. The windows are cut again here exactly as for the records.

    settings: dict of max_seq_length, doc_stride, max_query_length,
    n_best_size, max_answer_length, do_lower_case, version_2_with_negative,
    null_score_diff_threshold.
    """
    windows = squad_features.windows_of(questions, tokenizer, settings["max_seq_length"],
                                    settings["doc_stride"], settings["max_query_length"],
                                    False)
    return answers_of_windows(questions, windows, predictions, settings)


def answers_of_windows(questions, windows, predictions, settings):
    """Yields the Answer of every question from (question index, Window) pairs
    and their predictions, both in window order (see answers)."""
    current, its_windows, its_results = None, [], []
    for (index, window), result in zip(windows, predictions):
        # A scalar or an array of one ([1], as the records hold it): numpy 2 turns
        # only a scalar into an int.
        read_index = int(np.ravel(result["example_index"])[0])
        if read_index != index:
            raise ValueError("prediction of question %d read for question %d: the records "
                             "do not match the file" % (read_index, index))
        if index != current and current is not None:
            yield _answer(questions[current], its_windows, its_results, settings)
            its_windows, its_results = [], []
        current = index
        its_windows.append(window)
        its_results.append(result)
    if current is not None:
        yield _answer(questions[current], its_windows, its_results, settings)


def _answer(question, windows, results, settings):
    return answer_question(question, windows, results, settings["n_best_size"],
                           settings["max_answer_length"], settings["do_lower_case"],
                           settings["version_2_with_negative"],
                           settings["null_score_diff_threshold"])
