"""SQuAD questions as windowed features, as Google's run_squad.py makes them.

A question becomes one window or more:

    [CLS] question (at most max_query_length pieces) [SEP] context piece ... [SEP]

(in the tokenizer's layout: RoBERTa's <s> question </s></s> context </s>).
The context pieces (the sub-tokens of each word, tokenized alone as a word of
a text: the tokenizer's encode_words) slide `doc_stride` pieces at a time
(text/windows.py, Google's sliding window); a piece seen by several windows is
scored in the one where it has the most context on both sides ("max
context"). A training window that does not hold the whole answer, and every
window of a v2.0 unanswerable question, points at the first token (start =
end = 0). No TensorFlow here.
"""

import collections
import hashlib
import json

import numpy as np

from bert_toolkit import fileio
from bert_toolkit.errors import InputError
from bert_toolkit.text import windows as text_windows

Window = collections.namedtuple("Window", [
    "tokens", "token_to_word", "is_max_context", "start_position", "end_position",
    "input_ids", "segment_ids", "word_pieces"])
"""One model input. tokens: [CLS] question [SEP] context pieces [SEP] (str);
token_to_word: position -> word index in the paragraph, for context pieces;
is_max_context: position -> whether this window is the piece's best;
start_position, end_position: the answer's positions in `tokens` (0 = [CLS]:
no answer here), or None outside training; input_ids, segment_ids: the
tokens' ids and segments (lists); word_pieces: whether the tokens are
WordPiece's, whose text maps back onto the context's characters (otherwise an
answer is the context's words its pieces cover)."""


def examples_digest(questions, settings):
    """A hash of the questions (ids, texts, contexts, answers) and of `settings`
    (the window settings their features depend on)."""
    digest = hashlib.sha1(json.dumps(settings, sort_keys=True).encode("utf-8"))
    last_paragraph = None
    for q in questions:
        if q.paragraph is not last_paragraph:
            digest.update(q.paragraph.context.encode("utf-8") + b"\0")
            last_paragraph = q.paragraph
        digest.update(json.dumps([q.qas_id, q.question, q.answer_text, q.start_word,
                                  q.end_word, q.is_impossible]).encode("utf-8"))
    return digest.hexdigest()


TokenizedQuestion = collections.namedtuple("TokenizedQuestion", [
    "question", "query_tokens", "pieces", "piece_to_word", "word_to_piece", "query_ids",
    "piece_ids", "rows"])
"""A question's tokens: query_tokens (cut to max_query_length); pieces: the
context's tokens, word by word; piece_to_word[i]: the word of piece i;
word_to_piece[w]: the first piece of word w (len(pieces) for a word with no
piece); query_ids, piece_ids: the ids of query_tokens and pieces; rows: the
tokenizer's RowScheme."""

RowScheme = collections.namedtuple("RowScheme", ["layout", "cls_token", "sep_token",
                                                 "word_pieces"])
"""How a tokenizer lays out a window: its tokenization.Layout, the token strings
of its first and separator ids, and whether its tokens are WordPiece's."""


def row_scheme(tokenizer):
    """The RowScheme of `tokenizer`."""
    layout = tokenizer.layout
    cls_token, sep_token = tokenizer.convert_ids_to_tokens([layout.cls_id, layout.sep_id])
    return RowScheme(layout, cls_token, sep_token, tokenizer.family_tokenizer == "wordpiece")


def tokenize_questions(questions, tokenizer, max_query_length, batch=256):
    """Yields a TokenizedQuestion per question, in order.

    A paragraph's words are tokenized once for all its questions (they are
    consecutive in a SQuAD file), each word on its own as Google does (as a
    word of a text: encode_words), in batches through the tokenizer's fast path.
    """
    rows = row_scheme(tokenizer)
    cached = (None, None)
    for chunk in fileio.chunks(questions, batch):
        query_ids = tokenizer.encode_batch([q.question for q in chunk])
        for question, query in zip(chunk, query_ids):
            if question.paragraph is not cached[0]:
                cached = (question.paragraph, _tokenize_words(question.paragraph.words,
                                                              tokenizer))
            pieces, piece_to_word, word_to_piece, piece_ids = cached[1]
            query = list(query[:max_query_length])
            yield TokenizedQuestion(question, tokenizer.convert_ids_to_tokens(query), pieces,
                                    piece_to_word, word_to_piece, query, piece_ids, rows)


def _tokenize_words(words, tokenizer):
    """(pieces, piece_to_word, word_to_piece, piece_ids) of a paragraph's words."""
    piece_ids, piece_to_word, word_to_piece = [], [], []
    for index, word_ids in enumerate(tokenizer.encode_words(list(words))):
        word_to_piece.append(len(piece_ids))
        piece_ids.extend(word_ids)
        piece_to_word.extend([index] * len(word_ids))
    return tokenizer.convert_ids_to_tokens(piece_ids), piece_to_word, word_to_piece, piece_ids


def answer_tokens(tokenizer, text):
    """The tokens of an answer's text as they stand in a context: WordPiece's of the
    text (each word is tokenized alone there anyway); the others' word by word,
    as the context's words are (tokenize_words)."""
    if tokenizer.family_tokenizer == "wordpiece":
        return tokenizer.tokenize(text)
    words = text.split()
    return [token for word in tokenizer.tokenize_words(words) for token in word] \
        if words else []


def answer_pieces(tokenized, tokenizer):
    """(first, last) context pieces of the question's answer, or (-1, -1).

    The answer's words, narrowed to the pieces whose text equals the answer's
    own tokens when some do (Google's rule: "(1895-1943)." holds the answer
    1895 as a piece of its own)."""
    question = tokenized.question
    if question.is_impossible or question.answer_text is None:
        return -1, -1
    first = tokenized.word_to_piece[question.start_word]
    if question.end_word + 1 < len(tokenized.word_to_piece):
        last = tokenized.word_to_piece[question.end_word + 1] - 1
    else:
        last = len(tokenized.pieces) - 1
    wanted = " ".join(answer_tokens(tokenizer, question.answer_text))
    pieces = tokenized.pieces
    for start in range(first, last + 1):
        for end in range(last, start - 1, -1):
            if " ".join(pieces[start:end + 1]) == wanted:
                return start, end
    return first, last


def question_windows(tokenized, max_seq_length, doc_stride, answer=None):
    """The Windows of one TokenizedQuestion.

    answer: (first, last) context pieces of the answer to place (training),
    (-1, -1) for no answer (points at [CLS]), or None (prediction: no
    positions).
    """
    query, rows = tokenized.query_tokens, tokenized.rows
    layout = rows.layout
    budget = max_seq_length - len(query) - layout.pair_specials
    if budget < 1:
        raise InputError("--max_seq_length=%d leaves no room for the context after a "
                         "question of %d tokens and the %d special tokens of this model's "
                         "pairs; raise it or lower --max_query_length"
                         % (max_seq_length, len(query), layout.pair_specials))
    spans = text_windows.token_windows(len(tokenized.pieces), budget, doc_stride)
    offset = len(query) + 1 + layout.seps_between
    windows = []
    for index, (start, end) in enumerate(spans):
        length = end - start
        input_ids, segment_ids = layout.row(tokenized.query_ids, tokenized.piece_ids[start:end])
        tokens = ([rows.cls_token] + query + [rows.sep_token] * layout.seps_between
                  + tokenized.pieces[start:end] + [rows.sep_token])
        token_to_word = {offset + i: tokenized.piece_to_word[start + i] for i in range(length)}
        is_max_context = {offset + i: text_windows.max_context_window(spans, start + i) == index
                          for i in range(length)}
        start_position = end_position = None
        if answer is not None:
            start_position = end_position = 0
            first, last = answer
            if first >= 0 and start <= first and last <= start + length - 1:
                start_position = first - start + offset
                end_position = last - start + offset
        windows.append(Window(tokens, token_to_word, is_max_context, start_position,
                              end_position, input_ids, segment_ids, rows.word_pieces))
    return windows


def check_window_settings(max_seq_length, doc_stride, max_query_length):
    """InputError unless a window has room for the question and some context."""
    if max_query_length < 1:
        raise InputError("--max_query_length=%d: expected at least 1" % max_query_length)
    if doc_stride < 1:
        raise InputError("--doc_stride=%d: expected at least 1 (context pieces between "
                         "the starts of a question's windows)" % doc_stride)
    if max_seq_length <= max_query_length + 3:
        raise InputError("--max_seq_length=%d: expected more than --max_query_length + 3 "
                         "= %d ([CLS], the question, two [SEP] and some context)"
                         % (max_seq_length, max_query_length + 3))


def windows_of(questions, tokenizer, max_seq_length, doc_stride, max_query_length,
               is_training):
    """Yields (question index, Window) of every window of every question, in order."""
    for index, tokenized in enumerate(tokenize_questions(questions, tokenizer,
                                                         max_query_length)):
        answer = answer_pieces(tokenized, tokenizer) if is_training else None
        for window in question_windows(tokenized, max_seq_length, doc_stride, answer):
            yield index, window


def feature_rows(questions, tokenizer, max_seq_length, doc_stride, max_query_length,
                 is_training):
    """The TFRecord feature dicts of every window, in order (see window_row)."""
    return [window_row(window, index, tokenizer, max_seq_length, is_training)
            for index, window in windows_of(questions, tokenizer, max_seq_length,
                                            doc_stride, max_query_length, is_training)]


def window_row(window, index, tokenizer, max_seq_length, is_training):
    """The feature dict of one window of question `index`: input_ids, input_mask,
    segment_ids (int32 [max_seq_length]) and start_positions, end_positions
    (training) or example_index (the question's index), int32 [1]."""
    ids = window.input_ids
    input_ids = np.full(max_seq_length, tokenizer.layout.pad_id, dtype=np.int32)
    input_mask = np.zeros(max_seq_length, dtype=np.int32)
    segment_ids = np.zeros(max_seq_length, dtype=np.int32)
    input_ids[:len(ids)] = ids
    input_mask[:len(ids)] = 1
    segment_ids[:len(ids)] = window.segment_ids
    row = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
    if is_training:
        row["start_positions"] = np.array([window.start_position], dtype=np.int32)
        row["end_positions"] = np.array([window.end_position], dtype=np.int32)
    else:
        row["example_index"] = np.array([index], dtype=np.int32)
    return row
