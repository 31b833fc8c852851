"""SQuAD v1.1 and v2.0: reading the JSON, and questions as windowed features.

No TensorFlow here.

Reading follows the file format of google-research/bert's run_squad.py: a
context is split into whitespace-separated words (space, tab, CR, LF and
U+202F count as whitespace, nothing else), an answer is located by its
`answer_start` character (in training), and a question becomes one window or more:

    [CLS] question (at most max_query_length pieces) [SEP] context piece ... [SEP]

The context pieces (WordPiece tokens of each word) slide `doc_stride` pieces
at a time; a piece seen by several windows is scored in the one where it has
the most context on both sides ("max context"). A training window that does
not hold the whole answer, and every window of a v2.0 unanswerable question,
points at [CLS] (start = end = 0).

Every mistake in a file is one InputError `<file>: <where in the JSON>: <what
was expected>`, where the place reads like `data[2].paragraphs[0].qas[5]`.
"""

import collections
import hashlib
import json

import numpy as np

import fileio
from errors import InputError, show

# Google's whitespace: the five characters its reader splits contexts on.
WHITESPACE = frozenset(" \t\r\n\u202f")

Paragraph = collections.namedtuple("Paragraph", ["context", "words", "word_starts"])
"""context: the text; words: its whitespace-separated words (a tuple of str);
word_starts: the character offset of each word in the context (a tuple of int)."""

Question = collections.namedtuple("Question", [
    "qas_id", "question", "paragraph", "answer_text", "start_word", "end_word",
    "is_impossible", "gold_answers"])
"""One question. paragraph: its Paragraph (shared by the paragraph's questions);
answer_text, start_word, end_word: the first answer and, in training, the words
it covers (None, -1, -1 when there is none or the question is unanswerable; the
words are -1 outside training);
is_impossible: v2.0's flag; gold_answers: every answer text, for scoring
(None when the file has no answers)."""

Window = collections.namedtuple("Window", [
    "tokens", "token_to_word", "is_max_context", "start_position", "end_position"])
"""One model input. tokens: [CLS] question [SEP] context pieces [SEP] (str);
token_to_word: position -> word index in the paragraph, for context pieces;
is_max_context: position -> whether this window is the piece's best;
start_position, end_position: the answer's positions in `tokens` (0 = [CLS]:
no answer here), or None outside training."""

SquadFile = collections.namedtuple("SquadFile", ["questions", "has_answers",
                                                 "skipped"])
"""questions: [Question]; has_answers: every question carries gold answers
(or is unanswerable), so predictions can be scored; skipped: (id, reason) of each
training question left out by Google's rules (see read_squad)."""


def split_words(context):
    """(words, char_to_word): the whitespace-separated words of `context`, and for
    every character the index of the word it is in (or, for whitespace, of the
    word before it; -1 before the first word)."""
    words = []
    char_to_word = []
    after_space = True
    for char in context:
        if char in WHITESPACE:
            after_space = True
        else:
            if after_space:
                words.append(char)
            else:
                words[-1] += char
            after_space = False
        char_to_word.append(len(words) - 1)
    return words, char_to_word


def make_paragraph(context):
    """(Paragraph, char_to_word) of a context (see split_words)."""
    words, char_to_word = split_words(context)
    starts = tuple(i for i, word in enumerate(char_to_word)
                   if word >= 0 and (i == 0 or char_to_word[i - 1] != word))
    return Paragraph(context, tuple(words), starts), char_to_word


def question_on(qas_id, question, context):
    """A Question to answer on a raw context (no answers known)."""
    return Question(qas_id, question, make_paragraph(context)[0], None, -1, -1, False, None)


def _where(path):
    """`data[0].paragraphs[1]` from ["data", 0, "paragraphs", 1]."""
    text = ""
    for part in path:
        text += "[%d]" % part if isinstance(part, int) else ("." if text else "") + part
    return text or "top level"


class _Checker(object):
    """Type checks that raise `<file>: <where>: <expected>`."""

    def __init__(self, path):
        self.path = path

    def fail(self, where, message):
        raise InputError("%s: %s: %s" % (self.path, _where(where), message))

    def get(self, container, key, where, kind, required=True, default=None):
        """container[key], checked to be a `kind` ("list", "object", "string",
        "integer", "boolean"); `default` when absent and not required."""
        if key not in container:
            if required:
                self.fail(where, 'no "%s"; expected %s' % (key, _KIND_TEXT[kind]))
            return default
        value = container[key]
        if not _KIND_TEST[kind](value):
            self.fail(where + [key], "expected %s, got %s" % (_KIND_TEXT[kind], show(value)))
        return value


_KIND_TEST = {
    "list": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}
_KIND_TEXT = {"list": "a list", "object": "an object", "string": "a string",
              "integer": "a whole number", "boolean": "true or false"}


def load_json(path):
    """The parsed JSON of `path`; InputError naming the file (and the line and
    column of a syntax error) otherwise."""
    try:
        with fileio.open_file(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise InputError("%s: file not found" % path)
    except IsADirectoryError:
        raise InputError("%s: is a directory, expected a SQuAD JSON file" % path)
    except OSError as e:
        raise InputError("%s: cannot read the file: %s" % (path, e.strerror or e))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError("%s: not valid UTF-8: byte 0x%02x at byte offset %d"
                         % (path, raw[e.start], e.start))
    if not text.strip():
        raise InputError('%s: the file is empty; expected SQuAD JSON ({"data": [...]})'
                         % path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError("%s: line %d column %d: not valid JSON (%s)"
                         % (path, e.lineno, e.colno, e.msg))


def read_squad(path, is_training, version_2_with_negative):
    """The questions of a SQuAD JSON file, checked (see the module docstring).

    is_training: every answerable question needs an answer; its first one is
    located in the words, and a question Google's reader leaves out (see
    _left_out_because) is left out here too: (id, reason) in `skipped`, reason
    a key of LEFT_OUT. Outside training answers are optional, but a file that
    has some must have them for every question (they are scored).
    Returns a SquadFile.
    """
    check = _Checker(path)
    data = load_json(path)
    if not isinstance(data, dict):
        check.fail([], 'expected an object with a "data" list (SQuAD JSON), got %s'
                   % show(data))
    articles = check.get(data, "data", [], "list")
    questions = []
    seen_ids = {}
    skipped = []
    with_answers = without_answers = None  # the first question of each kind
    for a, article in enumerate(articles):
        where = ["data", a]
        if not isinstance(article, dict):
            check.fail(where, "expected an object with \"paragraphs\", got %s" % show(article))
        for p, paragraph in enumerate(check.get(article, "paragraphs", where, "list")):
            where = ["data", a, "paragraphs", p]
            if not isinstance(paragraph, dict):
                check.fail(where, 'expected an object with "context" and "qas", got %s'
                           % show(paragraph))
            context = check.get(paragraph, "context", where, "string")
            shared, char_to_word = make_paragraph(context)
            if not shared.words:
                check.fail(where + ["context"], "the context is empty; expected text")
            for q, qa in enumerate(check.get(paragraph, "qas", where, "list")):
                where = ["data", a, "paragraphs", p, "qas", q]
                question = _read_question(check, qa, where, shared, char_to_word,
                                          is_training, version_2_with_negative)
                if question.qas_id in seen_ids:
                    check.fail(where + ["id"], "id %s is also the id of %s; expected unique "
                               "ids" % (show(question.qas_id), seen_ids[question.qas_id]))
                seen_ids[question.qas_id] = _where(where)
                if question.gold_answers is None:
                    without_answers = without_answers or where
                else:
                    with_answers = with_answers or where
                if with_answers and without_answers:
                    check.fail(without_answers + ["answers"],
                               "no answers, but %s has some; expected answers for every "
                               "question (to score them) or for none" % _where(with_answers))
                reason = _left_out_because(question) if is_training else None
                if reason:
                    skipped.append((question.qas_id, reason))
                    continue
                questions.append(question)
    if not questions and skipped:
        raise InputError("%s: every question is left out of training: %s; expected at "
                         "least one to train on" % (path, _reasons(skipped)))
    if not questions:
        check.fail(["data"], "no questions; expected articles with paragraphs and qas")
    return SquadFile(questions, with_answers is not None, skipped)


def _read_question(check, qa, where, paragraph, char_to_word, is_training, version_2):
    """One Question from the `qas` entry `qa`, checked. In training the first
    answer is located in the words (start_word = end_word = None when its text
    is not at its `answer_start`); outside training only the texts matter (the
    official evaluation reads no offsets)."""
    if not isinstance(qa, dict):
        check.fail(where, 'expected an object with "id" and "question", got %s' % show(qa))
    qas_id = check.get(qa, "id", where, "string")
    text = check.get(qa, "question", where, "string")
    is_impossible = check.get(qa, "is_impossible", where, "boolean", required=False,
                              default=False)
    if is_impossible and not version_2:
        check.fail(where + ["is_impossible"], "true: unanswerable questions are SQuAD "
                   "2.0 data; expected --version_2_with_negative")
    answers = check.get(qa, "answers", where, "list", required=False)
    if answers is None and is_training:
        check.fail(where, 'no "answers"; expected a list of {"text", "answer_start"} '
                   'to train on')
    texts = [_answer_text(check, answer, where + ["answers", n])
             for n, answer in enumerate(answers or [])]
    if not texts and not is_impossible and (is_training or answers is not None):
        check.fail(where + ["answers"], "empty; expected at least one answer (or "
                   '"is_impossible": true with --version_2_with_negative)')
    gold = None
    if answers is not None:
        gold = [] if is_impossible else texts
    if is_impossible or not texts:
        return Question(qas_id, text, paragraph, None, -1, -1, is_impossible, gold)
    start_word = end_word = -1
    if is_training:
        start_word, end_word = _answer_words(texts[0], answers[0]["answer_start"],
                                             paragraph.context, char_to_word)
    return Question(qas_id, text, paragraph, texts[0], start_word, end_word, is_impossible,
                    gold)


def _answer_text(check, answer, where):
    """The text of one answer, its keys and their types checked."""
    if not isinstance(answer, dict):
        check.fail(where, 'expected an object with "text" and "answer_start", got %s'
                   % show(answer))
    text = check.get(answer, "text", where, "string")
    check.get(answer, "answer_start", where, "integer")
    if not text.strip():
        check.fail(where + ["text"], "blank; expected the answer's text")
    return text


def _answer_words(text, start, context, char_to_word):
    """(first word, last word) of an answer, or (None, None) when `text` is not at
    character `start` of the context."""
    if not 0 <= start < len(context) or context[start:start + len(text)] != text:
        return None, None
    # The words holding the answer's first and last non-blank characters (an
    # answer may begin or end with a space).
    first = start + len(text) - len(text.lstrip())
    last = start + len(text.rstrip()) - 1
    return char_to_word[first], char_to_word[last]


def _left_out_because(question):
    """Why a training question cannot be trained on (a key of LEFT_OUT), or None.
    Google's reader leaves out both kinds: an answer whose offset does not hold
    its text, and one whose text (whitespace normalised) is not found in the
    words it spans (odd Unicode spaces, say)."""
    if question.is_impossible:
        return None
    if question.start_word is None:
        return "misplaced"
    span = " ".join(question.paragraph.words[question.start_word:question.end_word + 1])
    if span.find(" ".join(question.answer_text.split())) == -1:
        return "unrecoverable"
    return None


LEFT_OUT = {"misplaced": "the answer text is not at its answer_start",
            "unrecoverable": "the answer text is not in the words it covers once "
                             "whitespace is normalised"}


def left_out_line(path, skipped):
    """One line for the training questions left out (SquadFile.skipped): how
    many, why, and the first ids of each kind."""
    return ("%s: %d question(s) left out of training, as Google's reader leaves them "
            "out: %s" % (path, len(skipped), _reasons(skipped)))


def _reasons(skipped):
    """"2 where <why> (id1, id2); 1 where <why> (id3)" for (id, reason) pairs."""
    parts = []
    for reason, why in LEFT_OUT.items():
        ids = [qas_id for qas_id, kind in skipped if kind == reason]
        if ids:
            parts.append("%d where %s (%s%s)" % (len(ids), why, ", ".join(ids[:3]),
                                                ", ..." if len(ids) > 3 else ""))
    return "; ".join(parts)


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


# -- windows -------------------------------------------------------------------------

TokenizedQuestion = collections.namedtuple("TokenizedQuestion", [
    "question", "query_tokens", "pieces", "piece_to_word", "word_to_piece"])
"""A question's WordPiece tokens: query_tokens (cut to max_query_length);
pieces: the context's tokens, word by word; piece_to_word[i]: the word of
piece i; word_to_piece[w]: the first piece of word w (len(pieces) for a word
with no piece)."""


def tokenize_questions(questions, tokenizer, max_query_length, batch=256):
    """Yields a TokenizedQuestion per question, in order.

    A paragraph's words are tokenized once for all its questions (they are
    consecutive in a SQuAD file), each word on its own as Google does, in
    batches through the tokenizer's fast path.
    """
    cached = (None, None)
    for chunk in fileio.chunks(questions, batch):
        query_tokens = tokenizer.tokenize_batch([q.question for q in chunk])
        for question, query in zip(chunk, query_tokens):
            if question.paragraph is not cached[0]:
                cached = (question.paragraph, _tokenize_words(question.paragraph.words,
                                                              tokenizer))
            pieces, piece_to_word, word_to_piece = cached[1]
            yield TokenizedQuestion(question, list(query[:max_query_length]), pieces,
                                    piece_to_word, word_to_piece)


def _tokenize_words(words, tokenizer):
    """(pieces, piece_to_word, word_to_piece) of a paragraph's words."""
    pieces, piece_to_word, word_to_piece = [], [], []
    for index, word_pieces in enumerate(tokenizer.tokenize_batch(list(words))):
        word_to_piece.append(len(pieces))
        pieces.extend(word_pieces)
        piece_to_word.extend([index] * len(word_pieces))
    return pieces, piece_to_word, word_to_piece


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
    wanted = " ".join(tokenizer.tokenize(question.answer_text))
    pieces = tokenized.pieces
    for start in range(first, last + 1):
        for end in range(last, start - 1, -1):
            if " ".join(pieces[start:end + 1]) == wanted:
                return start, end
    return first, last


def doc_spans(num_pieces, budget, stride):
    """[(start, length)] of the windows over `num_pieces` context pieces, at most
    `budget` pieces each, starting `stride` apart (never leaving a gap), the
    last reaching the end: Google's sliding window. One empty span for a
    context without pieces, so every question has a window."""
    spans = []
    start = 0
    while start < num_pieces:
        length = min(num_pieces - start, budget)
        spans.append((start, length))
        if start + length == num_pieces:
            break
        start += min(length, stride)
    return spans or [(0, 0)]


def max_context_span(spans, position):
    """Index of the span where piece `position` has the most context: the
    largest min(left, right) neighbours, plus 0.01 x the span's length (ties
    go to the first)."""
    best, best_score = None, None
    for index, (start, length) in enumerate(spans):
        end = start + length - 1
        if start <= position <= end:
            score = min(position - start, end - position) + 0.01 * length
            if best_score is None or score > best_score:
                best, best_score = index, score
    return best


def question_windows(tokenized, max_seq_length, doc_stride, answer=None):
    """The Windows of one TokenizedQuestion.

    answer: (first, last) context pieces of the answer to place (training),
    (-1, -1) for no answer (points at [CLS]), or None (prediction: no
    positions).
    """
    query = tokenized.query_tokens
    budget = max_seq_length - len(query) - 3
    spans = doc_spans(len(tokenized.pieces), budget, doc_stride)
    offset = len(query) + 2
    windows = []
    for index, (start, length) in enumerate(spans):
        tokens = ["[CLS]"] + query + ["[SEP]"] + tokenized.pieces[start:start + length]
        tokens.append("[SEP]")
        token_to_word = {offset + i: tokenized.piece_to_word[start + i] for i in range(length)}
        is_max_context = {offset + i: max_context_span(spans, start + i) == index
                          for i in range(length)}
        start_position = end_position = None
        if answer is not None:
            start_position = end_position = 0
            first, last = answer
            if first >= 0 and start <= first and last <= start + length - 1:
                start_position = first - start + offset
                end_position = last - start + offset
        windows.append(Window(tokens, token_to_word, is_max_context, start_position,
                              end_position))
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
    ids = tokenizer.convert_tokens_to_ids(window.tokens)
    input_ids = np.zeros(max_seq_length, dtype=np.int32)
    input_mask = np.zeros(max_seq_length, dtype=np.int32)
    segment_ids = np.zeros(max_seq_length, dtype=np.int32)
    input_ids[:len(ids)] = ids
    input_mask[:len(ids)] = 1
    segment_ids[window.tokens.index("[SEP]") + 1:len(ids)] = 1
    row = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
    if is_training:
        row["start_positions"] = np.array([window.start_position], dtype=np.int32)
        row["end_positions"] = np.array([window.end_position], dtype=np.int32)
    else:
        row["example_index"] = np.array([index], dtype=np.int32)
    return row
