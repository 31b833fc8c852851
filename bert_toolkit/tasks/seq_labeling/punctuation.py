"""Punctuation restoration as token labelling: each word labelled with the mark after it.

Plain text, one or more sentences per line, is training data: every word gets
O, COMMA, PERIOD or QUESTION from the punctuation that follows it (after the
IWSLT convention: "!" and ";" end a clause like a period, ":" pauses like a
comma; when several marks follow a word the strongest wins, ? > . > ,), and
predictions give the text back with its punctuation restored. No TensorFlow.
"""

import unicodedata

# The labels, and the marks each one stands for.
PUNCT_LABELS = ("O", "COMMA", "PERIOD", "QUESTION")


_MARK_LABELS = {",": "COMMA", ":": "COMMA", ".": "PERIOD", "!": "PERIOD", ";": "PERIOD",
                "\u2026": "PERIOD", "?": "QUESTION"}


_LABEL_MARKS = {"COMMA": ",", "PERIOD": ".", "QUESTION": "?"}


_LABEL_STRENGTH = {label: rank for rank, label in enumerate(PUNCT_LABELS)}


# What else is stripped from the edges of a word: quotes and brackets.
_LEADING_STRIP = "\"'([{\u00ab\u201c\u2018\u00bf\u00a1"


_TRAILING_STRIP = "\"')]}\u00bb\u201d\u2019" + "".join(_MARK_LABELS)


def _is_punctuation(char):
    return unicodedata.category(char).startswith("P")


def _stronger(label_a, label_b):
    return label_a if _LABEL_STRENGTH[label_a] >= _LABEL_STRENGTH[label_b] else label_b


def _mark_label(marks):
    """The strongest punctuation label of the characters `marks` ("O" if none)."""
    label = "O"
    for char in marks:
        label = _stronger(label, _MARK_LABELS.get(char, "O"))
    return label


def punctuation_labels(text):
    """(words, labels) of a line of running text, for punctuation restoration.

    Words are the whitespace-separated tokens without the quotes, brackets and
    marks at their edges (inner ones stay: "don't", "3.5"); each is labelled
    with the mark that follows it. A token made only of punctuation (" , " in
    pre-tokenized text) is no word: its mark goes to the word before.
    Example: 'Well, "is it?" he said.' -> (Well is it he said),
    (COMMA O QUESTION O PERIOD).
    """
    words, labels = [], []
    for token in text.split():
        if all(_is_punctuation(char) for char in token):
            if words:
                labels[-1] = _stronger(labels[-1], _mark_label(token))
            continue
        core = token.lstrip(_LEADING_STRIP)
        stripped = core.rstrip(_TRAILING_STRIP)
        if not stripped:
            continue
        words.append(stripped)
        labels.append(_mark_label(core[len(stripped):]))
    return tuple(words), tuple(labels)


def restore_text(words, labels):
    """The words joined by spaces, each followed by the mark its label stands for."""
    return " ".join(word + _LABEL_MARKS.get(label, "") for word, label in zip(words, labels))
