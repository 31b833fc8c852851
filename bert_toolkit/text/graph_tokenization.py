"""WordPiece tokenization inside a TensorFlow graph, from core ops only.

`text_features(text_a, text_b, vocab_tokens, do_lower_case, max_seq_length)`
turns tf.string texts into the int32 `input_ids`, `input_mask` and
`segment_ids` that `tokenization.FullTokenizer.encode_pairs` gives for the
same texts, with the same ids on every text; `encode` gives the ids of
`FullTokenizer.encode_batch` and `basic_words` the words of
`BasicTokenizer.tokenize`. It is meant for a SavedModel that takes raw text
and must run on stock TensorFlow Serving, so it uses no tensorflow-text op,
no py_func and no custom kernel: only tf.strings and tf.ragged ops, gathers,
cumulative sums, conditionals, a while loop and two
tf.lookup.StaticHashTable (the vocabulary). It works in a TF1 graph (an
Estimator's serving_input_receiver_fn under tf.compat.v1), in tf.function
and eagerly.

How the steps of tokenization.py's Python path are reproduced:

- decoding: UTF-8 with invalid bytes dropped, as `convert_to_unicode` does;
- cleaning and CJK spacing: a table read with every code point says whether
  cleaning drops it and whether it is an ideograph (then a word of its own);
- lower-casing and accent stripping: Python's str.lower() and NFD act one
  character at a time, except for two context rules that are done in the
  graph: the final sigma of str.lower() (a capital sigma becomes "ς" when a
  cased character comes before it and none after it, skipping
  case-ignorable characters) and NFD's canonical reordering (combining
  characters between two starters are sorted by combining class; once the Mn
  marks are gone this only moves a few Mc marks, such as U+1D16D and
  U+1D165). Every other code point goes through a table code point -> code
  points, made at build time from this Python's unicodedata for exactly the
  code points that str.lower() plus NFD change;
- punctuation and whitespace splitting: a second table, read with the code
  points after lower-casing, gives whitespace (what `\\s` matches in
  Python's regular expressions), punctuation, Mn and the combining class;
- WordPiece: one piece of every distinct word per step, all words at once:
  the word's substrings at its position, up to the longest vocabulary entry,
  are looked up together and the longest found is taken. The first step
  looks in the tokens, the next ones (a while loop) in the "##" tokens
  without their "##". A word longer than `max_input_chars_per_word`, or with
  a position no piece covers, becomes [UNK];
- truncation and packing: `tokenization.truncated_pair_lengths` on vectors.
  As encode_pairs does, long texts are first cut to a head (right before a
  space or newline, since no step looks across whitespace) that holds
  enough words; the few whose head comes up short are split again whole.

The per-code-point tables are two-level (blocks of 256 code points, equal
blocks stored once), about 400 KB of constants in all. They are Python data
computed once per process from the Unicode database of the Python that
builds the graph (the one the Python path uses there); the TF constants and
the hash tables are created when a function here is called, inside the graph
being built, never at import time.
"""

import collections
import functools
import re
import unicodedata

import numpy as np
import tensorflow as tf

from bert_toolkit import errors
from bert_toolkit.text import tokenization

_NUM_CODE_POINTS = 0x110000
_BLOCK_BITS = 8
_BLOCK = 1 << _BLOCK_BITS

# Bits of the table read with each decoded code point.
_DROP = 1             # removed by cleaning
_CJK = 2              # ideograph: a word of its own
_CASED = 4            # final-sigma context: cased and not case-ignorable
_CASE_IGNORABLE = 8   # final-sigma context: skipped
# Bits of the table read with each code point after lower-casing and NFD.
_SPACE = 1
_PUNCT = 2
_MARK = 4             # Mn: dropped when lower-casing
_CCC_SHIFT = 8        # canonical combining class, bits 8 to 15

_CAPITAL_SIGMA, _FINAL_SIGMA = 0x3A3, 0x3C2
_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")
# Long texts are first cut to this many bytes per word needed (plus 64):
# English averages under 5 bytes per word (punctuation marks are words); on
# the real corpora no head of 6 bytes a word came up short, of 5 bytes 3%.
_HEAD_BYTES_PER_WORD = 6

_UnicodeTables = collections.namedtuple(
    "_UnicodeTables", ["source", "target", "lower", "lower_splits", "lower_values"])

Vocab = collections.namedtuple(
    "Vocab", ["tokens", "unk_id", "cls_id", "sep_id", "longest", "longest_suffix"])


# --------------------------------------------------------------------------
# Python side: the tables, computed once per process.
# --------------------------------------------------------------------------

def _two_level(dense):
    """Splits a [0x110000] array into (index, blocks) with equal blocks stored once.

    dense[cp] == blocks[index[cp >> 8] * 256 + (cp & 255)]; index is int32
    [0x1100], blocks a multiple of 256 entries of uint8, uint16 or int32,
    the smallest that holds the (non-negative) values: the SavedModel carries
    them.
    """
    for dtype in (np.uint8, np.uint16, np.int32):
        if dense.min() >= np.iinfo(dtype).min and dense.max() <= np.iinfo(dtype).max:
            dense = dense.astype(dtype)
            break
    first_use, index, blocks = {}, [], []
    for block in dense.reshape(-1, _BLOCK):
        key = block.tobytes()
        if key not in first_use:
            first_use[key] = len(blocks)
            blocks.append(block)
        index.append(first_use[key])
    return np.array(index, np.int32), np.concatenate(blocks)


def _assigned(sets):
    """Code points that are not unassigned, private-use or surrogates, as an array.

    The others are never changed by str.lower() or NFD, have combining class
    0 and are neither cased nor case-ignorable.
    """
    assigned = np.ones(_NUM_CODE_POINTS, bool)
    for lo, hi in sets.unassigned:
        assigned[lo:hi + 1] = False
    return np.flatnonzero(assigned)


def _source_bits(sets, assigned):
    """int32 [0x110000]: _DROP, _CJK and the final-sigma context class of each code point.

    The context class is read off str.lower() itself: "cΣ" lower-cases to
    "...ς" exactly when c is cased and not case-ignorable, and "AcΣ" does
    when c is either. Ideographs get no class: the spaces put around them
    stop the context anyway.
    """
    bits = np.zeros(_NUM_CODE_POINTS, np.int32)
    bits[sets.drop] |= _DROP
    for cp in assigned.tolist():
        char = chr(cp)
        if (char + "\u03a3").lower()[-1] == "\u03c2":
            bits[cp] |= _CASED
        elif ("A" + char + "\u03a3").lower()[-1] == "\u03c2":
            bits[cp] |= _CASE_IGNORABLE
    for lo, hi in sets.cjk:
        bits[lo:hi + 1] = (bits[lo:hi + 1] & _DROP) | _CJK
    return bits


def _target_bits(sets, assigned):
    """int32 [0x110000]: _SPACE, _PUNCT, _MARK and the combining class << 8.

    Whitespace is what `\\s` matches in tokenization's word pattern.
    """
    bits = np.zeros(_NUM_CODE_POINTS, np.int32)
    everything = "".join(map(chr, range(_NUM_CODE_POINTS)))
    bits[[match.start() for match in re.finditer(r"\s", everything)]] |= _SPACE
    bits[sets.punct] &= ~_SPACE  # the word pattern tries punctuation first
    bits[sets.punct] |= _PUNCT
    bits[sets.mark] |= _MARK
    classes = np.fromiter(map(unicodedata.combining, map(chr, assigned.tolist())),
                          np.int32, len(assigned))
    bits[assigned] |= classes << _CCC_SHIFT
    return bits


def _lower_map(assigned):
    """(index, splits, values): code point -> NFD(str.lower(c)), marks kept.

    index[cp] is 0 for a code point that this leaves alone, else k >= 1 with
    the replacement values[splits[k]:splits[k + 1]] (row 0 is empty).
    """
    index = np.zeros(_NUM_CODE_POINTS, np.int32)
    splits, values = [0, 0], []
    for cp in assigned.tolist():
        char = chr(cp)
        replaced = unicodedata.normalize("NFD", char.lower())
        if replaced != char:
            index[cp] = len(splits) - 1
            values.extend(map(ord, replaced))
            splits.append(len(values))
    return index, np.array(splits, np.int32), np.array(values, np.int32)


@functools.lru_cache(maxsize=None)
def _unicode_tables():
    """The tables of this Python's Unicode database (about 1 s, once per process)."""
    sets = tokenization.code_point_sets()
    assigned = _assigned(sets)
    lower, splits, values = _lower_map(assigned)
    return _UnicodeTables(source=_two_level(_source_bits(sets, assigned)),
                          target=_two_level(_target_bits(sets, assigned)),
                          lower=_two_level(lower), lower_splits=splits, lower_values=values)


def make_vocab(vocab_tokens, required=_SPECIAL_TOKENS):
    """Checks a vocabulary and returns it as a `Vocab`.

    vocab_tokens: the tokens in id order (token i has id i), e.g.
    `tokenization.load_vocab(path)` (an OrderedDict, iterated in id order).
    Raises errors.InputError for a repeated token or a missing `required`
    one. `longest` is the longest token and `longest_suffix` the longest
    "##" token without its "##", in code points: no longer piece is worth
    looking up at the start of a word, or after it.
    """
    tokens = list(vocab_tokens)
    ids = {}
    for index, token in enumerate(tokens):
        if token in ids:
            raise errors.InputError("vocabulary: token %r at ids %d and %d; expected each "
                                    "token once" % (token, ids[token], index))
        ids[token] = index
    missing = [token for token in required if token not in ids]
    if missing:
        raise errors.InputError("vocabulary: missing %s; in-graph tokenization needs %s"
                                % (" ".join(missing), " ".join(required)))
    suffixes = [len(token) - 2 for token in tokens if token.startswith("##")]
    return Vocab(tokens=tokens, unk_id=ids.get("[UNK]"), cls_id=ids.get("[CLS]"),
                 sep_id=ids.get("[SEP]"), longest=max(len(token) for token in tokens),
                 longest_suffix=max(suffixes, default=0))


# --------------------------------------------------------------------------
# Graph side. Texts are handled as flat characters: code points [n] with the
# row (text) of each, rows [n] int64, non-decreasing.
# --------------------------------------------------------------------------

def _constant(two_level):
    """The (index, blocks) pair of a two-level table as graph constants."""
    return tuple(tf.constant(part) for part in two_level)


def _lookup(table, code_points):
    """table[code_points] for a two-level (index, blocks) table: int32, same shape."""
    index, blocks = table
    block = tf.gather(index, tf.bitwise.right_shift(code_points, _BLOCK_BITS))
    return tf.cast(tf.gather(blocks, block * _BLOCK
                             + tf.bitwise.bitwise_and(code_points, _BLOCK - 1)), tf.int32)


def _previous(values, fill):
    """values shifted by one to the right, `fill` first: [n] -> [n]."""
    return tf.concat([tf.constant([fill], values.dtype), values], 0)[:-1]


def _row_starts(rows):
    """bool [n]: the character is the first of its text."""
    return tf.not_equal(rows, _previous(rows, -1))


def _has(bits, flag):
    """bool, same shape as bits: the flag bit is set."""
    return tf.not_equal(tf.bitwise.bitwise_and(bits, flag), 0)


def _row_ids(splits):
    """The row of each value of a ragged partition: splits [r + 1] -> [splits[-1]].

    The same as RaggedTensor.value_rowids(), whose implementation builds an
    [r, longest row] mask: too big for a few long texts among short ones.
    """
    total = tf.cast(splits[-1], tf.int32)
    ends = tf.math.bincount(tf.cast(splits[1:-1], tf.int32), minlength=total,
                            maxlength=total, dtype=splits.dtype)
    return tf.cumsum(ends)


def _expand(counts):
    """Numbers the values of rows of the given sizes.

    counts: int32 [r], >= 0. Returns (owner, rank), int32 [sum(counts)]: the
    j-th value is number rank[j] (from 0) of row owner[j].
    """
    splits = tf.concat([[0], tf.cumsum(counts)], 0)
    owner = _row_ids(splits)
    return owner, tf.range(splits[-1]) - tf.gather(splits, owner)


def _final_sigmas(code_points, rows, source_bits):
    """Code points [n] with every capital sigma that str.lower() makes final set to ς.

    Python's rule: the nearest character before it that is not
    case-ignorable is cased, and the nearest one after it is not (or there
    is none); neither search leaves the text.
    """
    counted = tf.logical_not(_has(source_bits, _CASE_IGNORABLE))
    counted_int = tf.cast(counted, tf.int32)
    # Positions of the counted characters, then a sentinel that is in no text.
    where = tf.concat([tf.cast(tf.where(counted)[:, 0], tf.int32), [tf.size(code_points)]], 0)
    cased = tf.concat([_has(source_bits, _CASED), tf.constant([False])], 0)
    row_of = tf.concat([rows, tf.constant([-1], rows.dtype)], 0)
    through = tf.cumsum(counted_int)          # counted characters up to i
    before = through - counted_int            # counted characters before i
    previous = tf.gather(where, tf.maximum(before - 1, 0))
    following = tf.gather(where, through)
    cased_before = ((before > 0) & tf.equal(tf.gather(row_of, previous), rows)
                    & tf.gather(cased, previous))
    cased_after = tf.equal(tf.gather(row_of, following), rows) & tf.gather(cased, following)
    final = tf.equal(code_points, _CAPITAL_SIGMA) & cased_before & ~cased_after
    return tf.where(final, _FINAL_SIGMA, code_points)


def _lower_and_decompose(code_points, rows, cjk, lower, splits, values):
    """Replaces each code point by NFD(str.lower(c)), marks kept: [n] -> [m].

    Returns (code_points, rows, cjk) of the result; every output character
    keeps the row and the ideograph flag of the character it came from.
    """
    index = _lookup(lower, code_points)
    changed = index > 0
    start = tf.where(changed, tf.gather(splits, index),
                     tf.size(values) + tf.range(tf.size(code_points)))
    length = tf.where(changed, tf.gather(splits, index + 1) - tf.gather(splits, index), 1)
    source, rank = _expand(length)
    out = tf.gather(tf.concat([values, code_points], 0), tf.gather(start, source) + rank)
    return out, tf.gather(rows, source), tf.gather(cjk, source)


def _reorder_and_strip_marks(code_points, rows, cjk, target_bits):
    """NFD's canonical reordering, then drops the Mn marks: [n] -> [m] each.

    A run is a character of combining class 0 (or a text's first character)
    and the non-zero-class characters after it; NFD sorts each run stably by
    class. Sorting the kept characters by (run, class) gives the same order.
    """
    ccc = tf.cast(tf.bitwise.right_shift(target_bits, _CCC_SHIFT), tf.int64)
    run = tf.cumsum(tf.cast(tf.equal(ccc, 0) | _row_starts(rows), tf.int64))
    keep = tf.logical_not(_has(target_bits, _MARK))
    key = tf.boolean_mask(run * _BLOCK + ccc, keep)
    kept = [tf.boolean_mask(t, keep) for t in (code_points, rows, cjk, target_bits)]
    # Once the Mn marks are gone only a few rare Mc marks can be out of order:
    # sort only when some are.
    return tf.cond(tf.reduce_any(key[1:] < key[:-1]),
                   lambda: [tf.gather(t, tf.argsort(key, stable=True)) for t in kept],
                   lambda: kept)


def _graph_tables(do_lower_case):
    """The Unicode tables as constants of the current graph (a _UnicodeTables of tensors)."""
    tables = _unicode_tables()
    lower = (_constant(tables.lower), tf.constant(tables.lower_splits),
             tf.constant(tables.lower_values)) if do_lower_case else (None,) * 3
    return _UnicodeTables(_constant(tables.source), _constant(tables.target), *lower)


def _normalized_characters(text, do_lower_case, tables):
    """BasicTokenizer up to the split: text tf.string [batch] -> flat characters.

    Returns (code_points int32 [n], rows int64 [n], cjk bool [n],
    target_bits int32 [n]) after cleaning and, when do_lower_case,
    lower-casing, NFD and mark stripping.
    """
    chars = tf.strings.unicode_decode(text, "UTF-8", errors="ignore")
    code_points, rows = chars.flat_values, _row_ids(chars.row_splits)
    source_bits = _lookup(tables.source, code_points)
    keep = tf.logical_not(_has(source_bits, _DROP))
    code_points, rows, source_bits = [tf.boolean_mask(t, keep)
                                      for t in (code_points, rows, source_bits)]
    cjk = _has(source_bits, _CJK)
    if not do_lower_case:
        return code_points, rows, cjk, _lookup(tables.target, code_points)
    code_points = tf.cond(tf.reduce_any(tf.equal(code_points, _CAPITAL_SIGMA)),
                          lambda: _final_sigmas(code_points, rows, source_bits),
                          lambda: code_points)
    code_points, rows, cjk = _lower_and_decompose(
        code_points, rows, cjk, tables.lower, tables.lower_splits, tables.lower_values)
    return _reorder_and_strip_marks(code_points, rows, cjk,
                                    _lookup(tables.target, code_points))


def _split_words(text, do_lower_case, tables):
    """basic_words with the given _graph_tables."""
    code_points, rows, cjk, bits = _normalized_characters(text, do_lower_case, tables)
    space = _has(bits, _SPACE)
    alone = cjk | _has(bits, _PUNCT)
    inside = ~space & ~alone
    continues = inside & _previous(inside, False) & ~_row_starts(rows)
    keep = ~space
    starts = tf.boolean_mask(~continues, keep)
    code_points, rows = tf.boolean_mask(code_points, keep), tf.boolean_mask(rows, keep)
    word_of_char = tf.cumsum(tf.cast(starts, tf.int64)) - 1
    chars = tf.RaggedTensor.from_value_rowids(
        code_points, word_of_char, nrows=tf.reduce_sum(tf.cast(starts, tf.int64)),
        validate=False)
    words = tf.strings.unicode_encode(chars, "UTF-8")
    return tf.RaggedTensor.from_value_rowids(
        words, tf.boolean_mask(rows, starts), nrows=tf.size(text, out_type=tf.int64),
        validate=False)


def _texts(text):
    """text as a tf.string vector [batch]; a ValueError for another rank.

    A tensor of unknown rank is checked when the graph runs.
    """
    text = tf.convert_to_tensor(text, tf.string)
    if text.shape.rank is None:
        return tf.ensure_shape(text, [None])
    if text.shape.rank != 1:
        raise ValueError("texts: expected a tf.string vector [batch], got shape %s"
                         % text.shape)
    return text


def basic_words(text, do_lower_case):
    """`tokenization.BasicTokenizer(do_lower_case).tokenize` on each text.

    text: tf.string [batch], UTF-8 (invalid bytes are dropped).
    Returns a tf.RaggedTensor of tf.string, [batch, (words)].
    """
    return _split_words(_texts(text), do_lower_case, _graph_tables(do_lower_case))


def _text_heads(text, limit):
    """Cuts texts longer than `limit` bytes right before a space or newline.

    text: tf.string [batch]. Returns (heads tf.string [batch], cut bool
    [batch]): a long text is cut before the last ASCII space or newline of
    its first `limit` bytes (not at byte 0); one without such is kept whole.
    No step of the tokenizer looks across whitespace (see
    tokenization._text_head), so the words of a head are the first words of
    its text. Such a byte is never part of a multi-byte UTF-8 sequence.
    """
    prefix = tf.io.decode_raw(text, tf.uint8, fixed_length=limit)  # zero-padded
    position = tf.range(limit)[None, :]
    blank = (tf.equal(prefix, ord(" ")) | tf.equal(prefix, ord("\n"))) & (position > 0)
    last = tf.reduce_max(tf.where(blank, position, 0), axis=1)
    cut = (tf.strings.length(text) > limit) & (last > 0)
    return tf.where(cut, tf.strings.substr(text, tf.zeros_like(last), last), text), cut


def _first_words(text, do_lower_case, max_words):
    """The first max_words words of each text (all when None): [batch, (words)].

    Long texts are cut to a head of _HEAD_BYTES_PER_WORD bytes a word first;
    the texts whose head has fewer words are split again whole.
    """
    tables = _graph_tables(do_lower_case)
    if max_words is None:
        return _split_words(text, do_lower_case, tables)
    heads, cut = _text_heads(text, _HEAD_BYTES_PER_WORD * max_words + 64)
    words = _split_words(heads, do_lower_case, tables)
    redo = cut & (words.row_lengths() < max_words)
    redone = tf.cond(
        tf.reduce_any(redo),
        lambda: _split_words(tf.boolean_mask(text, redo), do_lower_case, tables),
        lambda: tf.RaggedTensor.from_row_splits(tf.constant([], tf.string),
                                                tf.zeros([1], tf.int64), validate=False))
    batch = tf.size(text, out_type=tf.int64)
    pick = tf.where(redo, batch + tf.cumsum(tf.cast(redo, tf.int64)) - 1, tf.range(batch))
    words = tf.gather(tf.concat([words, redone], axis=0), pick)
    return first_values(words, tf.fill([batch], tf.cast(max_words, tf.int64)))


def vocab_tables(vocab):
    """Two tf.lookup.StaticHashTable, tf.string -> int64 id, -1 if absent.

    The first maps every token; the second maps each "##" token without its
    "##", for the pieces after a word's first. Created in the current graph;
    in a TF1 graph their initializers join the table initializers
    collection, which an Estimator's export runs.
    """
    suffixes = [(token[2:], index) for index, token in enumerate(vocab.tokens)
                if token.startswith("##")]
    tables = []
    for keys, ids in ((vocab.tokens, range(len(vocab.tokens))),
                      ([key for key, _ in suffixes], [index for _, index in suffixes])):
        initializer = tf.lookup.KeyValueTensorInitializer(
            tf.constant(keys, tf.string, shape=[len(keys)]),
            tf.constant(list(ids), tf.int64, shape=[len(keys)]))
        tables.append(tf.lookup.StaticHashTable(initializer, default_value=-1))
    return tuple(tables)


def _longest_pieces(words, position, count, table):
    """The longest piece of each word at `position` that `table` has.

    words: tf.string [u]; position, count: int32 [u], where the piece starts
    and its most characters (0 to skip a word). Returns (length, id): int32
    [u], the piece's length in characters (0 if there is none) and its id.
    """
    owner, rank = _expand(count)
    length = rank + 1
    piece = tf.strings.substr(tf.gather(words, owner), tf.gather(position, owner), length,
                              unit="UTF8_CHAR")
    ids = tf.cast(table.lookup(piece), tf.int32)
    best = tf.math.unsorted_segment_max(tf.where(ids >= 0, length, 0), owner, tf.size(words))
    best = tf.maximum(best, 0)  # a word without candidates gets the lowest int32
    # A word's candidates come in order of length, so the best is at first + best - 1.
    first = tf.cumsum(count, exclusive=True)
    best_id = tf.gather(tf.concat([ids, [-1]], 0),
                        tf.where(best > 0, first + best - 1, tf.size(ids)))
    return best, best_id


def _greedy_walk(words, span, vocab, tables):
    """Covers each word from the left by the longest pieces the vocabulary has.

    words: tf.string [u]; span: int32 [u], each word's length (0 to skip it).
    One piece per word and step: the first step looks words up in the token
    table, the next ones (a while loop, as many steps as the word with the
    most pieces has) in the "##" table. Returns (grid, failed): grid int32
    [u, 1 + k] with -1 in column 0, then each word's piece ids and -1 after
    its last; failed bool [u]: the word has a position no piece covers.
    """
    def step(k, position, alive, failed, pieces, table, longest):
        count = tf.where(alive, tf.minimum(longest, span - position), 0)
        length, piece = _longest_pieces(words, position, count, table)
        found = alive & (length > 0)
        pieces = pieces.write(k, tf.where(found, piece, -1))
        position += length
        return k + 1, position, found & (position < span), failed | (alive & ~found), pieces

    # Column 0, written first, keeps the list from being empty when stacked.
    pieces = tf.TensorArray(tf.int32, size=0, dynamic_size=True).write(
        0, tf.fill(tf.shape(span), -1))
    state = step(1, tf.zeros_like(span), span > 0, tf.zeros_like(span, tf.bool), pieces,
                 tables[0], vocab.longest)
    _, _, _, failed, pieces = tf.while_loop(
        lambda k, position, alive, failed, pieces: tf.reduce_any(alive),
        lambda *state: step(*state, tables[1], vocab.longest_suffix), state)
    return tf.transpose(pieces.stack()), failed


def _wordpiece(words, vocab, max_input_chars_per_word):
    """WordPiece ids of each word: tf.string [n] -> tf.RaggedTensor int32 [n, (pieces)].

    Each distinct word is worked out once; a word longer than
    max_input_chars_per_word or that the vocabulary cannot cover is [UNK].
    """
    unique, index = tf.unique(words)
    length = tf.strings.length(unique, unit="UTF8_CHAR")
    too_long = length > max_input_chars_per_word
    grid, failed = _greedy_walk(unique, tf.where(too_long, 0, length), vocab,
                                vocab_tables(vocab))
    unknown = (failed | too_long)[:, None]
    column = tf.range(tf.shape(grid)[1])[None, :]
    grid = tf.where(unknown, tf.where(tf.equal(column, 0), vocab.unk_id, -1), grid)
    return tf.gather(tf.ragged.boolean_mask(grid, grid >= 0), index)


def _encode(text, vocab, do_lower_case, max_input_chars_per_word, max_words):
    """Ids of each text's first max_words words (all when None): [batch, (ids)]."""
    words = _first_words(text, do_lower_case, max_words)
    pieces = _wordpiece(words.flat_values, vocab, max_input_chars_per_word)
    return words.with_flat_values(pieces).merge_dims(1, 2)


def encode(text, vocab_tokens, do_lower_case,
           max_input_chars_per_word=tokenization.MAX_INPUT_CHARS_PER_WORD):
    """`FullTokenizer.encode_batch` in the graph: the WordPiece ids of each text.

    text: tf.string [batch]; vocab_tokens: tokens in id order (see
    `make_vocab`; it needs "[UNK]"). Returns a tf.RaggedTensor of int32,
    [batch, (ids)], without special tokens.
    """
    vocab = make_vocab(vocab_tokens, required=("[UNK]",))
    return _encode(_texts(text), vocab, do_lower_case, max_input_chars_per_word, None)


def truncated_pair_lengths(len_a, len_b, budget):
    """`tokenization.truncated_pair_lengths` elementwise on int tensors [batch]."""
    excess = tf.maximum(len_a + len_b - budget, 0)
    cut_a = tf.minimum(tf.maximum(len_a - len_b, 0), excess)
    cut_b = tf.minimum(tf.maximum(len_b - len_a, 0), excess)
    rest = excess - cut_a - cut_b  # the lengths are equal when rest > 0
    return len_a - cut_a - rest // 2, len_b - cut_b - (rest + 1) // 2


def first_values(values, lengths):
    """The first lengths[i] values of each row i (all if fewer): [batch, (n)] -> same.

    values: a 2-D tf.RaggedTensor; lengths: int64 [batch].
    """
    splits = values.row_splits
    row = _row_ids(splits)
    keep = tf.range(splits[-1]) - tf.gather(splits, row) < tf.gather(lengths, row)
    return tf.RaggedTensor.from_row_lengths(tf.boolean_mask(values.values, keep),
                                            tf.minimum(values.row_lengths(), lengths),
                                            validate=False)


def _columns(ids, column, max_seq_length):
    """ids[row, column[row, j]] for a ragged [batch, (n)]: [batch, max_seq_length].

    0 past a row's end; column is clipped to [0, max_seq_length).
    """
    dense = ids.to_tensor(0, shape=[None, max_seq_length])
    return tf.gather(dense, tf.clip_by_value(column, 0, max_seq_length - 1), batch_dims=1)


def pack_features(ids_a, ids_b, cls_id, sep_id, max_seq_length):
    """[CLS] a [SEP] (b [SEP]) rows as `FullTokenizer.encode_pairs` builds them.

    ids_a, ids_b: tf.RaggedTensor int32 [batch, (ids)], ids_b None for
    single texts. Pairs are truncated like tokenization.truncated_pair_lengths,
    single texts to max_seq_length - 2 ids. Returns {"input_ids",
    "input_mask", "segment_ids"}: int32 [batch, max_seq_length], zero-padded;
    segment ids are 1 from the first id of b to the last [SEP].
    """
    len_a = ids_a.row_lengths()
    if ids_b is None:
        keep_a, keep_b = tf.minimum(len_a, max_seq_length - 2), tf.zeros_like(len_a)
    else:
        keep_a, keep_b = truncated_pair_lengths(len_a, ids_b.row_lengths(), max_seq_length - 3)
    column = tf.range(max_seq_length, dtype=tf.int64)[None, :] + tf.zeros_like(len_a)[:, None]
    a_end = keep_a[:, None] + 1          # [CLS] and a fill the columns before
    b_start = a_end + 1                  # after the first [SEP]
    b_end = b_start + keep_b[:, None]
    used = b_end if ids_b is None else b_end + 1
    ids = tf.where(column < a_end, _columns(ids_a, column - 1, max_seq_length), sep_id)
    ids = tf.where(tf.equal(column, 0), cls_id, ids)
    if ids_b is not None:
        in_b = (column >= b_start) & (column < b_end)
        ids = tf.where(in_b, _columns(ids_b, column - b_start, max_seq_length), ids)
    inside = column < used
    return {"input_ids": tf.where(inside, ids, 0),
            "input_mask": tf.cast(inside, tf.int32),
            "segment_ids": tf.cast(inside & (column >= b_start), tf.int32)}


def text_features(text_a, text_b, vocab_tokens, do_lower_case, max_seq_length,
                  max_input_chars_per_word=tokenization.MAX_INPUT_CHARS_PER_WORD):
    """Classifier features of raw texts, equal to `FullTokenizer.encode_pairs`.

    text_a: tf.string [batch]; text_b: tf.string [batch], or None for single
    texts (an empty text_b is an empty second text, as in encode_pairs).
    vocab_tokens: the tokens in id order, e.g. `tokenization.load_vocab(path)`;
    it needs [PAD], [UNK], [CLS] and [SEP]. do_lower_case and
    max_seq_length (a Python bool and int) are fixed in the graph.
    Returns {"input_ids", "input_mask", "segment_ids"}: int32
    [batch, max_seq_length]. Raises errors.InputError for a bad vocabulary
    or a max_seq_length too small for the special tokens.
    """
    vocab = make_vocab(vocab_tokens)
    smallest = 2 if text_b is None else 3
    if max_seq_length < smallest:
        raise errors.InputError("max_seq_length=%d: expected at least %d to hold the "
                                "special tokens" % (max_seq_length, smallest))
    text_a = _texts(text_a)
    if text_b is None:
        texts = text_a
    else:
        text_b = _texts(text_b)
        same_size = tf.debugging.assert_equal(
            tf.size(text_a), tf.size(text_b), message="text_features: text_a and text_b sizes")
        with tf.control_dependencies([same_size]):
            texts = tf.concat([text_a, text_b], 0)
    # Every word gives at least one id, so the first max_seq_length - 2 words
    # of a text hold all the ids that can be kept.
    ids = _encode(texts, vocab, do_lower_case, max_input_chars_per_word, max_seq_length - 2)
    if text_b is None:
        return pack_features(ids, None, vocab.cls_id, vocab.sep_id, max_seq_length)
    size = tf.size(text_a, out_type=tf.int64)
    return pack_features(ids[:size], ids[size:], vocab.cls_id, vocab.sep_id, max_seq_length)
