"""Token labelling features: words aligned to sub-tokens, long sentences as windows.

Alignment
---------
Each word is tokenized on its own, as a word inside a text (the tokenizer's
encode_words: WordPiece's pieces; byte-level BPE's with the word's leading
space; SentencePiece's with its "▁"), so sub-tokens never straddle two
words; its label sits on its first sub-token. Later sub-tokens, the special
tokens and padding have label_mask 0 and count in neither the loss nor the
metrics. A word the tokenizer drops entirely (a lone control character, say)
becomes the unknown token, so that every word has a position and gets a
prediction. A window is one text in the tokenizer's layout ([CLS] words
[SEP], <s> words </s>), padded with its pad id.

Windows
-------
A sentence whose sub-tokens do not fit in max_seq_length - 2 is cut into
windows of whole words (text/windows.py, `word_windows`). Each window starts
about `stride` sub-tokens after the previous one (never after its end), so
consecutive windows overlap and cover every word. Training uses every
window's words. Each word is *scored* by one window only: the one where it
has the most context (`scoring_word_windows`). That choice is made once,
when features are built, and recorded in the `word_ids` feature (the word's
index at its first sub-token in the window that scores it, else -1).
Evaluation weights the streamed metrics by it, and merging predictions takes
each word's label from the position that carries its index, so no word is
dropped or counted twice.

Features of one window (int64 in TFRecord, int32 in the model), shapes
[max_seq_length] unless noted: input_ids, input_mask, segment_ids (all 0),
label_ids (label id at first sub-tokens of labelled words), label_mask (1
there), word_ids, and sentence_index [1] (the sentence's index in its split).

No TensorFlow here (serving_client.py reuses the alignment and merging).
"""

import hashlib
import json

import numpy as np

from bert_toolkit.text import windows as text_windows

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "label_ids", "label_mask",
                 "word_ids")


def sentence_pieces(tokenizer, word_lists, max_pieces):
    """Sub-token ids of every word: [sentence][word] -> list of int.

    All words go through the tokenizer in one batch (its Rust fast path), each
    as a word of a text (encode_words). A word keeps at most `max_pieces`
    sub-tokens (only the first carries the label) and a word with none becomes
    the unknown token.
    """
    unk_id = tokenizer.vocab[tokenizer.unk_token]
    flat = [word for words in word_lists for word in words]
    ids = tokenizer.encode_words(flat) if flat else []
    pieces = [list(word_ids[:max_pieces]) or [unk_id] for word_ids in ids]
    out, start = [], 0
    for words in word_lists:
        out.append(pieces[start:start + len(words)])
        start += len(words)
    return out


def window_features(pieces, label_ids, first, end, scored, max_seq_length, layout):
    """The features of one window of a sentence (see the module docstring).

    Args:
      pieces: the sentence's sub-token ids per word; label_ids: its label id per
        word, or None when unlabelled.
      first, end: the window's word range; scored: the words of the range this
        window scores; layout: the tokenizer's tokenization.Layout.
    Returns:
      name -> int32 array [max_seq_length] for FEATURE_NAMES.
    """
    features = {name: np.zeros(max_seq_length, np.int32) for name in FEATURE_NAMES}
    features["word_ids"][:] = -1
    features["input_ids"][:] = layout.pad_id
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
    features["input_ids"][0] = layout.cls_id
    features["input_ids"][position] = layout.sep_id
    features["input_mask"][:position + 1] = 1
    return features


def encode_sentences(pieces_per_sentence, max_seq_length, stride, layout,
                     label_ids_per_sentence=None):
    """Yields the feature dicts of every window of every sentence, in order
    (layout: the tokenizer's tokenization.Layout).

    Each dict also has sentence_index: int32 [1]. Sentences without words
    yield nothing.
    """
    budget = max_seq_length - layout.single_specials
    for index, pieces in enumerate(pieces_per_sentence):
        counts = [len(word_pieces) for word_pieces in pieces]
        windows = text_windows.word_windows(counts, budget, stride)
        owner = text_windows.scoring_word_windows(counts, windows)
        label_ids = None if label_ids_per_sentence is None else label_ids_per_sentence[index]
        for window_index, (first, end) in enumerate(windows):
            scored = {word for word in range(first, end) if owner[word] == window_index}
            features = window_features(pieces, label_ids, first, end, scored,
                                       max_seq_length, layout)
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
    return encode_sentences(pieces, max_seq_length, stride, tokenizer.layout, label_ids)


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
