"""SQuAD v1.1 and v2.0 files read into Questions, as Google's run_squad.py reads them.

A context is split into whitespace-separated words (space, tab, CR, LF and
U+202F count as whitespace, nothing else) and an answer is located by its
`answer_start` character (in training); features.py makes the windows. No
TensorFlow here.

Every mistake in a file is one InputError `<file>: <where in the JSON>: <what
was expected>`, where the place reads like `data[2].paragraphs[0].qas[5]`.
"""

import collections
import json

from bert_toolkit import fileio
from bert_toolkit.errors import InputError, show

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


# -- windows -------------------------------------------------------------------------


