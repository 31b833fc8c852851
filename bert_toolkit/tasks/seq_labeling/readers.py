"""Token labelling data: the files of each task read into Sentences, and checked.

Tasks
-----
ner    CoNLL-style files tagged BIO, BIOES or BMES (O, B-X, I-X or M-X, E-X, S-X).
pos    CoNLL-style files with any tag set.
punct  Plain text, one or more sentences per line, labelled from its own
       punctuation (punctuation.py).

CoNLL files: one token per line, its label in the last column, columns
separated by tabs or by spaces (one or the other throughout a file), a blank
line between sentences, `-DOCSTART-` lines skipped. Test files may have the
token column only.

The multi-GPU fork's tasks
--------------------------
PUNCT, NAMED_ENTITY and NORM (task names are case-insensitive) read the fork's
layout, train.tsv, dev.tsv and test.tsv with one sentence a line: its words
separated by spaces, a tab, then one label per word separated by spaces
(test files: the words only). named_entity runs as ner (BIO tags, entity
scores) and norm as pos (any tag set); punct reads this layout from .tsv
files and plain text from .txt files. Without --labels, the three take the
fork's own label lists (FORK_LABELS) on files in its layout. Unlike the
fork, a label outside the list is refused with one line (the fork mapped it
to label 0), and every word is labelled (windows; the fork cut sentences at
max_seq_length - 2).

Every mistake in a file is one InputError naming the file and line. No
TensorFlow here.
"""

import dataclasses
import os
import re
from typing import Optional, Tuple

from bert_toolkit import fileio
from bert_toolkit.errors import check_labels, input_error
from bert_toolkit.tasks.seq_labeling import conlleval
from bert_toolkit.tasks.seq_labeling.punctuation import punctuation_labels

TASK_NAMES = ("ner", "pos", "punct", "named_entity", "norm")


# The multi-GPU fork's task names -> the task each runs as here.
FORK_TASKS = {"named_entity": "ner", "norm": "pos"}


# The fork's label lists, in its label-id order (its run_seq_labeling.py
# processors' get_labels): the default of its tasks on its train.tsv/dev.tsv
# layout when --labels is not given. PUNCT marks what follows a character;
# NAMED_ENTITY tags BMES; NORM's are its text-normalisation tags.
FORK_LABELS = {
    "punct": ("C", "P", "Q", "E", "D", "O"),
    "named_entity": ("B-o", "M-o", "E-o", "S-o"),
    "norm": ("O", "I-n", "B-n", "I-c", "I-inter_n", "I-inter_d", "I-d", "B-c", "B-inter_n",
             "I-s", "B-d", "I-t", "I-per", "B-sil", "I-tel", "I-temp", "I-alter", "I-frac",
             "I-form", "B-inter_d", "B-per", "B-s", "B-frac", "B-t", "B-temp", "I-inter_t",
             "I-inter_temp", "B-alter", "B-tel", "I-fraction", "B-form", "I-sil", "I-inter_c",
             "I-inter_per", "B-fraction", "I-inter_frac", "B-inter_t", "B-inter",
             "B-inter_temp", "I-inter_s", "B-inter_c", "I-inter_fraction", "I-block",
             "I-inter", "B-inter_frac", "B-inter_per", "B-block", "B-inter_s"),
}


_DOCSTART = "-DOCSTART-"


@dataclasses.dataclass(frozen=True)
class Sentence:
    """One sequence to label, as read from its file.

    words: the tokens; labels: one per word, or None for unlabelled data;
    columns: each word's fields as read (written back, with the prediction
    appended, in test_results.txt); line_numbers: each word's line in its file;
    delimiter: what separated the file's columns.
    """
    guid: str
    words: Tuple[str, ...]
    labels: Optional[Tuple[str, ...]]
    columns: Tuple[Tuple[str, ...], ...]
    line_numbers: Tuple[int, ...]
    delimiter: str = "\t"


def _layout(fields, delimiter, line_number):
    """How the file's columns look, from its first token line."""
    return {"delimiter": delimiter, "width": len(fields), "line": line_number}


def _delimiter_name(delimiter):
    return "tab" if delimiter == "\t" else "space"


def _split_columns(line, layout, path, line_number):
    """The stripped fields of one token line, checked against the file's layout."""
    delimiter = layout["delimiter"]
    if delimiter == " ":
        if "\t" in line:
            raise input_error(path, line_number, "a tab, but the columns of this file are "
                                 "separated by spaces (as on line %d); use one separator "
                                 "throughout" % layout["line"])
        fields = re.split(r" +", line.strip(" "))
    else:
        fields = [field.strip(" ") for field in line.split("\t")]
    if len(fields) != layout["width"]:
        hint = ""
        if delimiter == "\t" and " " in line.strip(" "):
            hint = "; this line separates columns with spaces, the file with tabs"
        elif len(fields) == 1 and layout["width"] > 1:
            hint = "; a token without its label?"
        raise input_error(path, line_number, "expected %d %s-separated columns (as on line "
                             "%d), got %d%s" % (layout["width"], _delimiter_name(delimiter),
                                                layout["line"], len(fields), hint))
    if not fields[0]:
        raise input_error(path, line_number, "the token (first column) is empty")
    if not fields[-1]:
        raise input_error(path, line_number, "the label (last column) is empty")
    return tuple(fields)


def read_conll(path, split, labelled, encoding="utf-8"):
    """The sentences of a CoNLL-style file.

    Args:
      split: names the sentences' guids ("train-0", ...).
      labelled: the last column is the label (train and dev); otherwise labels
        are not read and a file may have the token column only.
    Returns:
      A non-empty list of Sentence.
    Raises:
      errors.InputError naming the file and line: a line without a label, a
      line whose columns differ from the file's first token line (count, or
      tabs against spaces), an empty token or label, bad bytes, no sentences.
    """
    sentences = []
    layout = None
    rows = []  # (line_number, fields) of the sentence being read

    def finish_sentence():
        if rows:
            sentences.append(_sentence(split, len(sentences), rows, layout, labelled))
            del rows[:]

    for line_number, text in fileio.decoded_lines(path, encoding):
        line = text.rstrip("\r\n")
        if not line.strip():
            finish_sentence()
            continue
        if line.split()[0] == _DOCSTART:
            finish_sentence()
            continue
        if layout is None:
            delimiter = "\t" if "\t" in line else " "
            layout = _layout(_split_first(line, delimiter), delimiter, line_number)
            if labelled and layout["width"] < 2:
                raise input_error(path, line_number, "no label: expected the token, then "
                                     "its label in the last column, separated by a tab or "
                                     "spaces")
        rows.append((line_number, _split_columns(line, layout, path, line_number)))
    finish_sentence()
    if not sentences:
        raise input_error(path, None, "no sentences: the file is empty or holds only "
                             "blank and -DOCSTART- lines")
    return sentences


def _split_first(line, delimiter):
    if delimiter == " ":
        return re.split(r" +", line.strip(" "))
    return line.split("\t")


def _sentence(split, index, rows, layout, labelled):
    columns = tuple(fields for _, fields in rows)
    return Sentence(guid="%s-%d" % (split, index),
                    words=tuple(fields[0] for fields in columns),
                    labels=tuple(fields[-1] for fields in columns) if labelled else None,
                    columns=columns,
                    line_numbers=tuple(line_number for line_number, _ in rows),
                    delimiter=layout["delimiter"])


def read_punctuated_text(path, split, labelled, encoding="utf-8"):
    """Sentences of a plain text file, one per non-blank line (see punctuation_labels).

    Labels come from the text's own punctuation; with `labelled` false they
    are dropped (a test file's punctuation, if any, is not read as an answer).
    Raises errors.InputError naming the file (and line) for bad bytes or a
    file without a word.
    """
    sentences = []
    for line_number, text in fileio.decoded_lines(path, encoding):
        words, labels = punctuation_labels(text)
        if not words:
            continue
        sentences.append(Sentence(
            guid="%s-%d" % (split, len(sentences)), words=words,
            labels=labels if labelled else None, columns=tuple((word,) for word in words),
            line_numbers=(line_number,) * len(words), delimiter="\t"))
    if not sentences:
        raise input_error(path, None, "no sentences: the file has no words")
    return sentences


def read_sentence_lines(path, split, labelled, encoding="utf-8"):
    """The sentences of a file in the multi-GPU fork's layout (see the module doc).

    Raises errors.InputError naming the file and line: a labelled line without
    its tab and labels, with more than one tab, or with another number of
    labels than words; bad bytes; a file without a sentence.
    """
    sentences = []
    for line_number, text in fileio.decoded_lines(path, encoding):
        text = text.rstrip("\r\n")
        if not text.strip():
            continue
        fields = text.split("\t")
        words = tuple(fields[0].split())
        if not words:
            raise input_error(path, line_number, "no words before the tab")
        labels = None
        if labelled:
            if len(fields) != 2:
                raise input_error(path, line_number, "expected the words, a tab, then "
                                         "one label per word; got %d tabs" % (len(fields) - 1))
            labels = tuple(fields[1].split())
            if len(labels) != len(words):
                raise input_error(path, line_number, "%d words but %d labels"
                                         % (len(words), len(labels)))
        sentences.append(Sentence(
            guid="%s-%d" % (split, len(sentences)), words=words, labels=labels,
            columns=tuple(zip(words, labels)) if labels else tuple((w,) for w in words),
            line_numbers=(line_number,) * len(words), delimiter="\t"))
    if not sentences:
        raise input_error(path, None, "no sentences: the file has no words")
    return sentences


def task_kind(task_name):
    """The task a name runs as: ner, pos or punct (the fork's names map onto them)."""
    return FORK_TASKS.get(task_name, task_name)


def is_sentence_lines(task_name, path):
    """Whether `path` of `task_name` is in the fork's one-sentence-a-line layout."""
    return task_name in FORK_TASKS or (task_name == "punct" and path.endswith(".tsv"))


def default_split_path(data_dir, task_name, stem):
    """data_dir/<stem>.txt or <stem>.tsv, whichever exists (the fork's tasks look for
    .tsv first); the first choice if neither does."""
    extensions = (".tsv", ".txt") if task_name in FORK_TASKS else (".txt", ".tsv")
    paths = [os.path.join(data_dir, stem + extension) for extension in extensions]
    return next((path for path in paths if os.path.exists(path)), paths[0])


def read_split(path, task_name, split, labelled, encoding="utf-8"):
    """The sentences of one file of `task_name`: the fork's layout (is_sentence_lines),
    plain text for punct, else CoNLL."""
    if is_sentence_lines(task_name, path):
        return read_sentence_lines(path, split, labelled, encoding)
    if task_name == "punct":
        return read_punctuated_text(path, split, labelled, encoding)
    return read_conll(path, split, labelled, encoding)


def check_ner_tags(sentences, path):
    """InputError at the first label of `sentences` (read from `path`) that is no
    BIO/BIOES tag."""
    for sentence in sentences:
        for label, line_number in zip(sentence.labels or (), sentence.line_numbers):
            if not conlleval.is_bioes_tag(label):
                raise input_error(path, line_number, "label %r is not a BIO/BIOES tag "
                                  "(O, or B-, I- or M-, E-, S- and an entity type)" % label)


def check_sentence_labels(sentences, label_list, origin, path):
    """InputError at the first word of `sentences` whose label is not in label_list."""
    allowed = set(label_list)
    for sentence in sentences:
        for label, line_number in zip(sentence.labels or (), sentence.line_numbers):
            if label not in allowed:
                check_labels((label,), list(label_list), origin, path, line_number)


def labels_of(sentences):
    """The label list a training set defines: "O" first (if present), then sorted."""
    found = {label for sentence in sentences for label in sentence.labels}
    return (["O"] if "O" in found else []) + sorted(found - {"O"})


