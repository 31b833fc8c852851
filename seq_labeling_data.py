"""Token labelling data: reading, WordPiece alignment, windows, conlleval's
entity scores and result files. No flags here: `run_seq_labeling.py` is the script.

Tasks
-----
ner    CoNLL-style files tagged BIO or BIOES (O, B-X, I-X, E-X, S-X); scored
       on entity spans exactly as conlleval counts them, plus token accuracy.
pos    CoNLL-style files with any tag set; token accuracy and per-tag P/R/F1.
punct  Plain text, one or more sentences per line. Each word is labelled with
       the punctuation that follows it (O, COMMA, PERIOD, QUESTION), so any
       text is training data; predictions also give the restored text.

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
files and plain text from .txt files. Without --labels, punct and
named_entity take the default labels of FORK_DEFAULT_LABELS, norm the
training file's. Prediction adds the fork's file, test_results.tsv: a line
of space-separated labels per test sentence.

Alignment
---------
Each word is WordPiece-tokenized on its own, so sub-tokens never straddle two
words; its label sits on its first sub-token. Later sub-tokens, [CLS], [SEP]
and padding have label_mask 0 and count in neither the loss nor the metrics.
A word the tokenizer drops entirely (a lone control character, say) becomes
[UNK], so that every word has a position and gets a prediction.

Windows
-------
A sentence whose sub-tokens do not fit in max_seq_length - 2 is cut into
windows of whole words. Each window starts about `stride` sub-tokens after the
previous one (never after its end), so consecutive windows overlap and cover
every word. Training uses every window's words. Each word is *scored* by one
window only: the one where it has the most context, i.e. where the smaller of
its left and right context within the window (a side that reaches the
sentence edge counts as complete) is largest, the earlier window on a tie.
That choice is made once, when features are built, and recorded in the
`word_ids` feature (the word's index at its first sub-token in the window
that scores it, else -1). Evaluation weights the streamed metrics by it, and
merging predictions takes each word's label from the position that carries
its index, so no word is dropped or counted twice.

Features of one window (int64 in TFRecord, int32 in the model), shapes
[max_seq_length] unless noted: input_ids, input_mask, segment_ids (all 0),
label_ids (label id at first sub-tokens of labelled words), label_mask (1
there), word_ids, and sentence_index [1] (the sentence's index in its split).

No TensorFlow here (serving_client.py reuses the word alignment and merging);
the head, feature spec and streamed report are in seq_labeling.py.
"""

import dataclasses
import hashlib
import json
import os
import random
import re
import unicodedata
from typing import Optional, Tuple

import numpy as np

import errors
import fileio
import scores

TASK_NAMES = ("ner", "pos", "punct", "named_entity", "norm")

# The multi-GPU fork's task names -> the task each runs as here.
FORK_TASKS = {"named_entity": "ner", "norm": "pos"}
# The fork's prediction file: one line of space-separated labels per test sentence.
FORK_RESULTS_FILE = "test_results.tsv"

# Punctuation restoration labels, and the marks each one stands for. After the
# IWSLT convention: "!" and ";" end a clause like a period, ":" pauses like a
# comma. When several marks follow a word the strongest wins (? > . > ,).
PUNCT_LABELS = ("O", "COMMA", "PERIOD", "QUESTION")
_MARK_LABELS = {",": "COMMA", ":": "COMMA", ".": "PERIOD", "!": "PERIOD", ";": "PERIOD",
                "\u2026": "PERIOD", "?": "QUESTION"}
_LABEL_MARKS = {"COMMA": ",", "PERIOD": ".", "QUESTION": "?"}
_LABEL_STRENGTH = {label: rank for rank, label in enumerate(PUNCT_LABELS)}
# Label lists used when --labels is not given, for the fork's tasks that had
# fixed ones: punctuation as above, entities as CoNLL-2003 tags them (BIO).
FORK_DEFAULT_LABELS = {
    "punct": PUNCT_LABELS,
    "named_entity": ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC",
                     "B-MISC", "I-MISC"),
}
# What else is stripped from the edges of a word: quotes and brackets.
_LEADING_STRIP = "\"'([{\u00ab\u201c\u2018\u00bf\u00a1"
_TRAILING_STRIP = "\"')]}\u00bb\u201d\u2019" + "".join(_MARK_LABELS)

_BIOES_PREFIXES = ("B", "I", "E", "S")
_DOCSTART = "-DOCSTART-"

EVAL_RESULTS_FILE = "dev_results.txt"

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "label_ids", "label_mask",
                 "word_ids")


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


# ---------------------------------------------------------------------------
# Reading CoNLL files


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
            raise errors.input_error(path, line_number, "a tab, but the columns of this file are "
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
        raise errors.input_error(path, line_number, "expected %d %s-separated columns (as on line "
                             "%d), got %d%s" % (layout["width"], _delimiter_name(delimiter),
                                                layout["line"], len(fields), hint))
    if not fields[0]:
        raise errors.input_error(path, line_number, "the token (first column) is empty")
    if not fields[-1]:
        raise errors.input_error(path, line_number, "the label (last column) is empty")
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
                raise errors.input_error(path, line_number, "no label: expected the token, then "
                                     "its label in the last column, separated by a tab or "
                                     "spaces")
        rows.append((line_number, _split_columns(line, layout, path, line_number)))
    finish_sentence()
    if not sentences:
        raise errors.input_error(path, None, "no sentences: the file is empty or holds only "
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


# ---------------------------------------------------------------------------
# Punctuation restoration data


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
        raise errors.input_error(path, None, "no sentences: the file has no words")
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
            raise errors.input_error(path, line_number, "no words before the tab")
        labels = None
        if labelled:
            if len(fields) != 2:
                raise errors.input_error(path, line_number, "expected the words, a tab, then "
                                         "one label per word; got %d tabs" % (len(fields) - 1))
            labels = tuple(fields[1].split())
            if len(labels) != len(words):
                raise errors.input_error(path, line_number, "%d words but %d labels"
                                         % (len(words), len(labels)))
        sentences.append(Sentence(
            guid="%s-%d" % (split, len(sentences)), words=words, labels=labels,
            columns=tuple(zip(words, labels)) if labels else tuple((w,) for w in words),
            line_numbers=(line_number,) * len(words), delimiter="\t"))
    if not sentences:
        raise errors.input_error(path, None, "no sentences: the file has no words")
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


# ---------------------------------------------------------------------------
# Labels


def split_tag(label):
    """(prefix, type) of a chunk tag as conlleval splits it: "B-geo-loc" -> ("B",
    "geo-loc"), "O" -> ("O", "")."""
    prefix, _, entity_type = label.partition("-")
    return prefix, entity_type


def is_bioes_tag(label):
    """Whether `label` is O or one of B-, I-, E-, S- followed by an entity type."""
    prefix, entity_type = split_tag(label)
    return label == "O" or (prefix in _BIOES_PREFIXES and bool(entity_type))


def check_ner_tags(sentences, path):
    """InputError at the first label of `sentences` (read from `path`) that is no
    BIO/BIOES tag."""
    for sentence in sentences:
        for label, line_number in zip(sentence.labels or (), sentence.line_numbers):
            if not is_bioes_tag(label):
                raise errors.input_error(path, line_number, "label %r is not a BIO/BIOES tag "
                                     "(O, or B-, I-, E-, S- and an entity type)" % label)


def check_sentence_labels(sentences, label_list, origin, path):
    """InputError at the first word of `sentences` whose label is not in label_list."""
    allowed = set(label_list)
    for sentence in sentences:
        for label, line_number in zip(sentence.labels or (), sentence.line_numbers):
            if label not in allowed:
                errors.check_labels((label,), list(label_list), origin, path, line_number)


def labels_of(sentences):
    """The label list a training set defines: "O" first (if present), then sorted."""
    found = {label for sentence in sentences for label in sentence.labels}
    return (["O"] if "O" in found else []) + sorted(found - {"O"})


# ---------------------------------------------------------------------------
# WordPiece alignment and windows


def sentence_pieces(tokenizer, word_lists, max_pieces):
    """WordPiece ids of every word: [sentence][word] -> list of int.

    All words go through the tokenizer in one batch (its Rust fast path). A word
    keeps at most `max_pieces` sub-tokens (only the first carries the label) and
    a word with none becomes [UNK].
    """
    unk_id = tokenizer.vocab[tokenizer.wordpiece_tokenizer.unk_token]
    flat = [word for words in word_lists for word in words]
    ids = tokenizer.encode_batch(flat) if flat else []
    pieces = [list(word_ids[:max_pieces]) or [unk_id] for word_ids in ids]
    out, start = [], 0
    for words in word_lists:
        out.append(pieces[start:start + len(words)])
        start += len(words)
    return out


def _offsets(piece_counts):
    """Cumulative sub-token offsets: [0, c0, c0 + c1, ...] (len(piece_counts) + 1)."""
    offsets = [0]
    for count in piece_counts:
        offsets.append(offsets[-1] + count)
    return offsets


def plan_windows(piece_counts, budget, stride):
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


def scoring_windows(piece_counts, windows):
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


def window_features(pieces, label_ids, first, end, scored, max_seq_length, cls_id, sep_id):
    """The features of one window of a sentence (see the module docstring).

    Args:
      pieces: the sentence's sub-token ids per word; label_ids: its label id per
        word, or None when unlabelled.
      first, end: the window's word range; scored: the words of the range this
        window scores.
    Returns:
      name -> int32 array [max_seq_length] for FEATURE_NAMES.
    """
    features = {name: np.zeros(max_seq_length, np.int32) for name in FEATURE_NAMES}
    features["word_ids"][:] = -1
    position = 1
    for word in range(first, end):
        if label_ids is not None:
            features["label_ids"][position] = label_ids[word]
            features["label_mask"][position] = 1
        if word in scored:
            features["word_ids"][position] = word
        word_pieces = pieces[word]
        features["input_ids"][position:position + len(word_pieces)] = word_pieces
        position += len(word_pieces)
    features["input_ids"][0] = cls_id
    features["input_ids"][position] = sep_id
    features["input_mask"][:position + 1] = 1
    return features


def encode_sentences(pieces_per_sentence, max_seq_length, stride, cls_id, sep_id,
                     label_ids_per_sentence=None):
    """Yields the feature dicts of every window of every sentence, in order.

    Each dict also has sentence_index: int32 [1]. Sentences without words
    yield nothing.
    """
    budget = max_seq_length - 2
    for index, pieces in enumerate(pieces_per_sentence):
        counts = [len(word_pieces) for word_pieces in pieces]
        windows = plan_windows(counts, budget, stride)
        owner = scoring_windows(counts, windows)
        label_ids = None if label_ids_per_sentence is None else label_ids_per_sentence[index]
        for window_index, (first, end) in enumerate(windows):
            scored = {word for word in range(first, end) if owner[word] == window_index}
            features = window_features(pieces, label_ids, first, end, scored,
                                       max_seq_length, cls_id, sep_id)
            features["sentence_index"] = np.array([index], np.int32)
            yield features


def stack_features(rows, max_seq_length):
    """name -> int32 array [len(rows), ...] of feature dicts (zero rows allowed)."""
    stacked = {name: np.zeros([0, max_seq_length], np.int32) for name in FEATURE_NAMES}
    stacked["sentence_index"] = np.zeros([0, 1], np.int32)
    if rows:
        stacked = {name: np.stack([row[name] for row in rows]) for name in stacked}
    return stacked


def feature_rows(sentences, tokenizer, max_seq_length, stride, label_list):
    """Yields the TFRecord feature dicts of every window of `sentences`."""
    pieces = sentence_pieces(tokenizer, [s.words for s in sentences], max_seq_length - 2)
    index = {label: i for i, label in enumerate(label_list)}
    label_ids = [None if s.labels is None else [index[label] for label in s.labels]
                 for s in sentences]
    if all(ids is None for ids in label_ids):
        label_ids = None
    return encode_sentences(pieces, max_seq_length, stride, tokenizer.vocab["[CLS]"],
                            tokenizer.vocab["[SEP]"], label_ids)


def examples_digest(sentences, stride):
    """A hash of the sentences and the window stride (the cache key of the features)."""
    digest = hashlib.sha1(json.dumps({"window_stride": stride}).encode("utf-8"))
    for sentence in sentences:
        digest.update(json.dumps([sentence.guid, sentence.words, sentence.labels])
                      .encode("utf-8"))
    return digest.hexdigest()


def merge_windows(predictions, sentence_lengths):
    """Yields each sentence's predicted label ids (a list, one per word), in order.

    Args:
      predictions: the windows' predictions in the order of their features:
        dicts with sentence_index (an int or [1]), word_ids [seq] and label_ids
        [seq] (int arrays or lists).
      sentence_lengths: the number of words of each sentence.
    Each word takes the label at the one position that carries its index (see
    the module docstring). A word without one, or with two, is a bug: RuntimeError.
    """
    rows = iter(predictions)
    pending = next(rows, None)
    for index, length in enumerate(sentence_lengths):
        labels = [None] * length
        while pending is not None and int(np.reshape(pending["sentence_index"], -1)[0]) == index:
            word_ids = np.asarray(pending["word_ids"])
            label_ids = np.asarray(pending["label_ids"])
            for position in np.flatnonzero(word_ids >= 0):
                word = int(word_ids[position])
                if labels[word] is not None:
                    raise RuntimeError("sentence %d: word %d is scored by two windows"
                                       % (index, word))
                labels[word] = int(label_ids[position])
            pending = next(rows, None)
        missing = [word for word, label in enumerate(labels) if label is None]
        if missing:
            raise RuntimeError("sentence %d: no prediction for word(s) %s" % (index, missing))
        yield labels
    if pending is not None:
        raise RuntimeError("a window of sentence %s follows the last sentence"
                           % pending["sentence_index"])


def merged_labels(sentences, predictions, label_list):
    """Each sentence's predicted labels (strings), merged from its windows."""
    merged = merge_windows(predictions, [len(sentence.words) for sentence in sentences])
    return [[label_list[i] for i in ids] for ids in merged]


# ---------------------------------------------------------------------------
# Entity spans, counted as conlleval counts them


def chunk_ends(prev_tag, tag, prev_type, entity_type):
    """Whether a chunk ends between a word tagged (prev_tag, prev_type) and the
    next (tag, entity_type): conlleval's endOfChunk with the common BIOES
    extension (the original script has no S, and would join S-X S-X)."""
    if prev_tag in ("E", "S"):
        return True
    if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev_tag != "O" and prev_type != entity_type


def chunk_starts(prev_tag, tag, prev_type, entity_type):
    """Whether a chunk starts at a word tagged (tag, entity_type) after one tagged
    (prev_tag, prev_type): conlleval's startOfChunk with the BIOES extension. An
    I- or E- after O, E- or S- starts a chunk; so does a change of type."""
    if tag in ("B", "S"):
        return True
    if tag in ("I", "E") and prev_tag in ("O", "E", "S"):
        return True
    return tag != "O" and prev_type != entity_type


def entity_spans(labels):
    """The chunks of one sentence's tags: [(first word, end word, type)].

    A sentence starts and ends as if next to an O, as conlleval treats the
    blank line between sentences.
    """
    spans = []
    start = None
    prev_tag, prev_type = "O", ""
    for position, label in enumerate(list(labels) + ["O"]):
        tag, entity_type = split_tag(label)
        if start is not None and chunk_ends(prev_tag, tag, prev_type, entity_type):
            spans.append((start, position, prev_type))
            start = None
        if chunk_starts(prev_tag, tag, prev_type, entity_type):
            start = position
        prev_tag, prev_type = tag, entity_type
    return spans


def entity_counts(true_sentences, predicted_sentences):
    """type -> [correct, true, predicted] chunk counts over sentences of tags.

    A predicted chunk is correct when a true chunk has the same first word,
    end and type (conlleval's exact match).
    """
    counts = {}
    for true_labels, predicted_labels in zip(true_sentences, predicted_sentences):
        if len(true_labels) != len(predicted_labels):
            raise ValueError("%d true but %d predicted labels"
                             % (len(true_labels), len(predicted_labels)))
        true_spans = entity_spans(true_labels)
        predicted_spans = entity_spans(predicted_labels)
        for _, _, entity_type in true_spans:
            counts.setdefault(entity_type, [0, 0, 0])[1] += 1
        for _, _, entity_type in predicted_spans:
            counts.setdefault(entity_type, [0, 0, 0])[2] += 1
        for _, _, entity_type in set(true_spans) & set(predicted_spans):
            counts[entity_type][0] += 1
    return counts


def entity_report(counts, entity_types=()):
    """Overall and per-type entity precision, recall, F1 and counts (a flat dict).

    counts: type -> [correct, true, predicted]; entity_types: types reported
    even when they occur nowhere (e.g. every type of the label set).
    """
    totals = [sum(c[i] for c in counts.values()) for i in range(3)]
    precision, recall, f1 = scores.precision_recall_f1(*totals)
    report = {"entity_precision": precision, "entity_recall": recall, "entity_f1": f1,
              "num_entities": totals[1], "num_predicted_entities": totals[2],
              "num_correct_entities": totals[0]}
    for entity_type in sorted(set(entity_types) | set(counts)):
        correct, true, predicted = counts.get(entity_type, (0, 0, 0))
        precision, recall, f1 = scores.precision_recall_f1(correct, true, predicted)
        report["entity_precision[%s]" % entity_type] = precision
        report["entity_recall[%s]" % entity_type] = recall
        report["entity_f1[%s]" % entity_type] = f1
        report["num_entities[%s]" % entity_type] = true
    return report


def entity_types(label_list):
    """The entity types of a BIO/BIOES label list."""
    return sorted({split_tag(label)[1] for label in label_list if label != "O"})


# ---------------------------------------------------------------------------
# Reports and result files


def score_predictions_file(path, entity_types=(), encoding="utf-8"):
    """entity_report of a predictions file (test_results.txt of a test file with a
    gold label column, or dev_results.txt): the gold tags are its next-to-last
    column, the predictions its last. entity_types: as in entity_report."""
    sentences = read_conll(path, "predict", labelled=True, encoding=encoding)
    if len(sentences[0].columns[0]) < 3:
        raise errors.input_error(path, sentences[0].line_numbers[0], "expected token, gold "
                             "label and predicted label columns")
    return entity_report(entity_counts([[c[-2] for c in s.columns] for s in sentences],
                                       [s.labels for s in sentences]), entity_types)


def conll_lines(sentences, predicted):
    """test_results.txt: every word's line as read, with the predicted label appended
    in one more column; a blank line after each sentence."""
    for sentence, labels in zip(sentences, predicted):
        for columns, label in zip(sentence.columns, labels):
            yield sentence.delimiter.join(columns + (label,))
        yield ""


def prediction_files(split, sentences, predictions, label_list, task_name,
                     label_lines=False):
    """[(file name, lines)] of one split's predictions: every word's line with the
    predicted label appended (test_results.txt, or dev_results.txt for the eval
    split: conlleval's input), for punct's test split test_restored.txt (one
    line of restored text per input line), and with `label_lines` the fork's
    FORK_RESULTS_FILE (a line of labels per test sentence)."""
    predicted = merged_labels(sentences, predictions, label_list)
    if split == "eval":
        return [(EVAL_RESULTS_FILE, list(conll_lines(sentences, predicted)))]
    files = [("test_results.txt", list(conll_lines(sentences, predicted)))]
    if label_lines:
        files.append((FORK_RESULTS_FILE, [" ".join(labels) for labels in predicted]))
    if task_name == "punct":
        files.append(("test_restored.txt", [restore_text(sentence.words, labels)
                                            for sentence, labels in zip(sentences, predicted)]))
    return files


def serving_config(task_name, stride):
    """What a client needs, beyond the labels and tokenizer settings, to align words."""
    return {"task": "token_classification", "task_name": task_name,
            "words": "punctuation_stripped" if task_name == "punct" else "whitespace",
            "label_position": "first_sub_token", "window_stride": stride}


def words_of_text(text, config):
    """The words of a raw text as the export's task splits them."""
    if config.get("words") == "punctuation_stripped":
        return list(punctuation_labels(text)[0])
    return text.split()


# ---------------------------------------------------------------------------
# Making splits


def write_split(source, dest_dir, dev_fraction=0.1, test_fraction=0.1, seed=0,
                encoding="utf-8"):
    """Splits a CoNLL file's sentences into dest_dir/train.txt, dev.txt, test.txt.

    The sentences (blocks of lines between blank lines, copied unchanged) are
    shuffled with `seed`, so the split is the same on every machine; the test
    file keeps its labels, so test_results.txt can be scored with conlleval.
    Returns {"train": path, "dev": path, "test": path}.
    """
    blocks, block = [], []
    for _, text in fileio.decoded_lines(source, encoding):
        if text.strip():
            block.append(text.rstrip("\r\n"))
        elif block:
            blocks.append(block)
            block = []
    if block:
        blocks.append(block)
    if not blocks:
        raise errors.InputError("%s: no sentences to split" % source)
    random.Random(seed).shuffle(blocks)
    num_dev = int(round(len(blocks) * dev_fraction))
    num_test = int(round(len(blocks) * test_fraction))
    parts = {"dev": blocks[:num_dev], "test": blocks[num_dev:num_dev + num_test],
             "train": blocks[num_dev + num_test:]}
    os.makedirs(dest_dir, exist_ok=True)
    paths = {}
    for name, part in parts.items():
        path = os.path.join(dest_dir, name + ".txt")
        fileio.write_text_atomically(path, "".join("\n".join(block) + "\n\n"
                                                   for block in part))
        paths[name] = path
    return paths
