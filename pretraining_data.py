"""Masked-LM and next-sentence training instances from plain text, streamed.

Input: text files with one sentence per line and a blank line between
documents (the format of Google's create_pretraining_data.py). Output: TFRecord
files of tf.train.Example records with the reference features

    input_ids, input_mask, segment_ids      int64 [max_seq_length]
    masked_lm_positions, masked_lm_ids      int64 [max_predictions_per_seq]
    masked_lm_weights                       float [max_predictions_per_seq]
    next_sentence_labels                    int64 [1]  (1 = B is a random document)

The recipe per document is the original one: segment A is a run of
consecutive sentences up to a target length (the full length, or with
probability `short_seq_prob` a random shorter one); B is the actual
continuation, or (half of the time, and always when A took the whole chunk)
sentences from another document, in which case the unused sentences are put
back. The longer side is truncated one token at a time from the front or the
back at random. Of the non-special tokens, min(max_predictions_per_seq,
max(1, round(len(tokens) * masked_lm_prob))) are predicted; each is replaced
by [MASK] 80% of the time, kept 10% and replaced by a random vocabulary entry
10%. Whole-word masking picks words ("##" pieces stay with their word) instead
of single pieces.

What differs from the original, and why:

- Memory does not grow with the corpus. The original held every document in
  memory so that a "random next" sentence could come from anywhere in the
  corpus, and shuffled all instances at the end. Here the documents are cut,
  as they are read, into shards of `documents_per_shard` documents (fewer when
  they exceed `max_shard_chars` characters). The random other document is
  drawn from the same shard, and instances are shuffled within their shard.
  The shards are written in input order, so the output is only locally
  shuffled: run_pretraining.py shuffles again when it reads.
- The end of an input file also ends a document (the original ran the last
  document of one file into the first of the next when no blank line
  separated them).
- Each shard has its own random generator seeded from (random_seed, shard
  index), so the output depends on the seed and the input only: the same
  bytes come out for any number of worker processes.
- The random other document is drawn among the shard's other documents
  directly, rather than by up to ten draws that may hit the same document.
- The random choices are drawn in another order and partly by numpy (the
  masked positions and their replacements, a whole shard at a time), so the
  files are not the original's byte for byte for the same seed; every
  distribution is the same.

The functions below are pure given their random generators; `ShardWorker`
turns one shard into framed TFRecord bytes, and `write_pretraining_data`
streams shards through worker processes into the output files. No TensorFlow
is needed: the Example protocol buffers and the TFRecord framing (with its
CRC-32C) are written directly, which keeps worker processes light and fast
to start.
"""

import bisect
import collections
import glob
import itertools
import os
import random
import struct
import sys

import numpy as np

import tokenization
from errors import InputError

PretrainingDataConfig = collections.namedtuple("PretrainingDataConfig", [
    "vocab_file", "do_lower_case", "do_whole_word_mask", "max_seq_length",
    "max_predictions_per_seq", "random_seed", "dupe_factor", "masked_lm_prob",
    "short_seq_prob"])
"""Everything that decides the instances of a shard (the flags of the script)."""

_REQUIRED_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")

# Instances masked and encoded together: numpy temporaries of ~1 MB stay in cache.
_ENCODE_CHUNK = 1024
# Bounds the cache of input_mask/segment_ids entries (one per pair of lengths:
# 8,000 pairs of max_seq_length 128 are ~2 MB; longer sequences stop sooner).
_MAX_CACHED_ROWS = 20000


# -- reading documents ---------------------------------------------------------

def expand_input_patterns(input_file):
    """Paths of the comma-separated globs in `input_file`, in the order given.

    Each pattern must match at least one file; matches of one pattern are
    sorted so the order (and so the output) does not depend on the file system.
    Raises InputError naming the pattern otherwise.
    """
    paths = []
    for pattern in [p.strip() for p in input_file.split(",") if p.strip()]:
        if "://" in pattern:
            import tensorflow as tf  # remote file systems only
            matches = sorted(tf.io.gfile.glob(pattern))
        else:
            matches = sorted(p for p in glob.glob(pattern) if os.path.isfile(p))
        if not matches:
            what = "no such file" if not any(c in pattern for c in "*?[") \
                else "matches no file"
            raise InputError("--input_file: %s: %s" % (pattern, what))
        paths.extend(matches)
    if not paths:
        raise InputError("--input_file is empty; expected comma-separated files or globs")
    return paths


def _open_text(path):
    """A text stream of `path` (UTF-8; bad bytes dropped, as the original did)."""
    if "://" in path:
        import io
        import tensorflow as tf
        return io.TextIOWrapper(tf.io.gfile.GFile(path, "rb"), encoding="utf-8-sig",
                                errors="ignore")
    return open(path, encoding="utf-8-sig", errors="ignore")


def check_has_text(path):
    """Raises InputError unless `path` has at least one non-blank line.

    Reads only up to the first such line, so checking a large corpus is cheap.
    """
    try:
        with _open_text(path) as f:
            for line in f:
                if line.strip():
                    return
    except OSError as e:
        raise InputError("--input_file: %s: cannot read it (%s)" % (path, e.strerror or e))
    raise InputError("--input_file: %s holds no documents (expected one sentence per "
                     "line, a blank line between documents)" % path)


def read_documents(paths):
    """Yields each document as a list of its stripped, non-empty lines.

    A blank line or the end of a file ends a document. One document at a time
    is held in memory.
    """
    for path in paths:
        document = []
        with _open_text(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    document.append(line)
                elif document:
                    yield document
                    document = []
        if document:
            yield document


def shard_documents(documents, documents_per_shard, max_shard_chars):
    """Groups a stream of documents into lists of at most `documents_per_shard`.

    A shard also closes once it holds `max_shard_chars` characters, which
    bounds the memory a worker needs whatever the document lengths. A final
    shard with fewer than half of `documents_per_shard` documents joins the
    one before it, so that its documents still have others to draw random
    next sentences from.
    """
    pending = None
    shard, chars = [], 0
    for document in documents:
        shard.append(document)
        chars += sum(len(line) for line in document)
        if len(shard) >= documents_per_shard or chars >= max_shard_chars:
            if pending is not None:
                yield pending
            pending, shard, chars = shard, [], 0
    if shard and pending is not None and len(shard) < documents_per_shard / 2.0:
        pending = pending + shard
        shard = []
    if pending is not None:
        yield pending
    if shard:
        yield shard


# -- building instances ----------------------------------------------------------
#
# A shard's tokens are one flat int32 array; a document is the list of its
# sentence boundaries in it (sentence j spans bounds[j]:bounds[j + 1]). Segments
# A and B are runs of consecutive sentences, so each is a span (start, length)
# of that array, and truncation moves the span's ends: no token is copied in
# Python.

def _below(n, rng):
    """A random int in [0, n): random.randrange's distribution (up to 2**-53) at a
    fifth of its cost, which shows at several draws per instance."""
    return int(rng.random() * n)


def split_random_next(document_index, num_documents, rng):
    """Index of another document, uniformly among the others (itself if alone)."""
    if num_documents < 2:
        return document_index
    other = _below(num_documents - 1, rng)
    return other + 1 if other >= document_index else other


def truncate_spans(start_a, len_a, start_b, len_b, max_num_tokens, rng):
    """Truncates the pair of spans as the original does, without its loop.

    The original removes one token at a time from the longer segment (B on a
    tie), from the front or the back with equal probability. How many tokens
    each segment loses does not depend on the coin flips, and given that count
    n the number taken from the front is Binomial(n, 1/2): one draw of n
    random bits gives it.

    Returns:
      (start_a, len_a, start_b, len_b) after truncation.
    """
    new_a, new_b = tokenization.truncated_pair_lengths(len_a, len_b, max_num_tokens)
    cut_a, cut_b = len_a - new_a, len_b - new_b
    if cut_a:
        start_a += bin(rng.getrandbits(cut_a)).count("1")
    if cut_b:
        start_b += bin(rng.getrandbits(cut_b)).count("1")
    return start_a, new_a, start_b, new_b


def segment_pairs(documents, document_index, max_num_tokens, short_seq_prob, rng):
    """The segment pairs of one document, as spans of the shard's token array.

    Args:
      documents: list of documents, each a list of sentence boundaries
        (ascending offsets; sentence j is bounds[j]:bounds[j + 1], non-empty).
      max_num_tokens: max_seq_length - 3 ([CLS], [SEP], [SEP]).
    Returns:
      A list of (start_a, len_a, start_b, len_b, is_random_next), truncated to
      max_num_tokens together, both sides non-empty.
    """
    bounds = documents[document_index]
    num_sentences = len(bounds) - 1
    target_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_length = 2 + _below(max_num_tokens - 1, rng)
    pairs = []
    first = 0
    while first < num_sentences:
        # The chunk grows a sentence at a time until it holds target_length
        # tokens or the document ends: its last sentence, found by bisection.
        last = min(bisect.bisect_left(bounds, bounds[first] + target_length, first + 1),
                   num_sentences) - 1
        chunk_size = last + 1 - first
        a_end = first + (1 + _below(chunk_size - 1, rng) if chunk_size >= 2 else 1)
        start_a, len_a = bounds[first], bounds[a_end] - bounds[first]
        if chunk_size == 1 or rng.random() < 0.5:
            is_random_next = True
            other = documents[split_random_next(document_index, len(documents), rng)]
            begin = _below(len(other) - 1, rng)
            # Sentences from `begin` until B reaches the rest of the target length.
            end = min(bisect.bisect_left(other, other[begin] + target_length - len_a,
                                         begin + 1), len(other) - 1)
            start_b, len_b = other[begin], other[end] - other[begin]
            # The sentences of the chunk that B did not use start the next one.
            next_first = a_end
        else:
            is_random_next = False
            start_b, len_b = bounds[a_end], bounds[last + 1] - bounds[a_end]
            next_first = last + 1
        pairs.append(truncate_spans(start_a, len_a, start_b, len_b, max_num_tokens, rng)
                     + (is_random_next,))
        first = next_first
    return pairs


def gather_pairs(tokens, spans, max_seq_length, cls_id, sep_id):
    """The [CLS] A [SEP] B [SEP] rows of `spans`, zero-padded.

    Args:
      tokens: int32 [shard tokens]; spans: int64 [n, 4] of (start_a, len_a,
        start_b, len_b).
    Returns:
      (input_ids int32 [n, max_seq_length], lengths int64 [n]).
    """
    start_a, len_a, start_b, len_b = (spans[:, k:k + 1] for k in range(4))
    column = np.arange(max_seq_length)[np.newaxis, :]
    in_a = (column >= 1) & (column <= len_a)
    in_b = (column >= len_a + 2) & (column < len_a + 2 + len_b)
    source = np.where(in_a, start_a + column - 1, np.where(in_b, start_b + column - len_a - 2,
                                                           0))
    input_ids = np.where(in_a | in_b, tokens[source], 0).astype(np.int32)
    rows = np.arange(len(spans))
    lengths = (len_a + len_b + 3)[:, 0]
    input_ids[:, 0] = cls_id
    input_ids[rows, len_a[:, 0] + 1] = sep_id
    input_ids[rows, lengths - 1] = sep_id
    return input_ids, lengths


def candidate_positions(len_a, len_b):
    """Positions of A and B in [CLS] A [SEP] B [SEP]: all but the special tokens."""
    return list(range(1, len_a + 1)) + list(range(len_a + 2, len_a + 2 + len_b))


def whole_word_groups(tokens, positions, is_continuation):
    """`positions` grouped by word: a "##" piece joins the piece just before it.

    Args:
      tokens: list of ids; is_continuation: indexable by id, true for "##" pieces.
    Returns:
      A list of lists of consecutive positions, in sequence order.
    """
    groups = []
    for p in positions:
        if groups and is_continuation[tokens[p]] and groups[-1][-1] == p - 1:
            groups[-1].append(p)
        else:
            groups.append([p])
    return groups


def choose_whole_words(groups, num_to_predict, rng):
    """Positions of randomly chosen whole words, at most `num_to_predict` in all.

    Words are visited in random order; one that would exceed the budget is
    skipped and the next tried, as in the original whole-word masking.
    """
    order = list(groups)
    rng.shuffle(order)
    chosen = []
    for group in order:
        if len(chosen) >= num_to_predict:
            break
        if len(chosen) + len(group) <= num_to_predict:
            chosen.extend(group)
    return chosen


# -- TFRecord framing -------------------------------------------------------------

class Crc32c(object):
    """CRC-32C (Castagnoli) of many byte strings at once, in numpy.

    The CRC register update is linear over GF(2), so the CRC of a message of
    length L is a constant of L xor-ed with one table entry per byte, chosen by
    the byte's value and its distance from the end of the message. With those
    tables (256 entries per distance) a batch of messages is one gather and
    one segmented xor-reduction, with no per-byte Python.
    """

    _POLY = 0x82F63B78  # reflected Castagnoli polynomial

    def __init__(self):
        table = np.arange(256, dtype=np.uint32)
        for _ in range(8):
            table = np.where(table & 1, (table >> 1) ^ np.uint32(self._POLY), table >> 1)
        self._byte_table = table.astype(np.uint32)
        self._by_distance = self._byte_table.copy()       # [distances * 256]
        self._constants = np.array([0], dtype=np.uint32)  # [lengths + 1]

    def _advance(self, values):
        """The register after one more zero byte, for uint32 `values`."""
        return self._byte_table[values & 0xFF] ^ (values >> 8)

    def _grow(self, max_length):
        """Extends the per-distance tables and per-length constants to max_length."""
        have = len(self._by_distance) // 256
        if have < max_length:
            rows = [self._by_distance]
            last = self._by_distance[-256:]
            for _ in range(have, max_length):
                last = self._advance(last)
                rows.append(last)
            self._by_distance = np.concatenate(rows)
        if len(self._constants) <= max_length:
            constants = list(self._constants)
            register = np.uint32(0xFFFFFFFF)
            for _ in range(len(constants) - 1):
                register = self._advance(register)
            while len(constants) <= max_length:
                register = self._advance(register)
                constants.append(register ^ np.uint32(0xFFFFFFFF))
            self._constants = np.array(constants, dtype=np.uint32)

    def of_concatenated(self, data, lengths):
        """uint32 [n]: the CRC-32C of each of n messages laid end to end.

        Args:
          data: uint8 [sum(lengths)]; lengths: int64 [n], each >= 1.
        """
        ends = np.cumsum(lengths)
        longest = int(lengths.max())
        self._grow(longest)
        # int32 arithmetic halves the memory traffic; bytes * 256 must fit.
        dtype = np.int32 if max(len(data), longest * 256) < 2 ** 31 else np.int64
        # Each byte's table entry: 256 * (distance to its message's end) + value.
        index = np.repeat((ends - 1).astype(dtype), lengths)
        index -= np.arange(len(data), dtype=dtype)
        index <<= 8
        index |= data
        contributions = self._by_distance[index]
        return (np.bitwise_xor.reduceat(contributions, ends - lengths)
                ^ self._constants[lengths])

    def batch(self, messages):
        """uint32 [len(messages)]: the CRC-32C of each non-empty bytes object."""
        lengths = np.fromiter(map(len, messages), dtype=np.int64, count=len(messages))
        return self.of_concatenated(np.frombuffer(b"".join(messages), dtype=np.uint8),
                                    lengths)


def _masked(crc):
    """TFRecord's masking of uint32 CRCs: rotate right by 15, add a constant."""
    crc = crc.astype(np.uint64)
    return ((((crc >> np.uint64(15)) | (crc << np.uint64(17))) + np.uint64(0xA282EAD8))
            & np.uint64(0xFFFFFFFF)).astype("<u4")


# -- masking and encoding a whole shard at once ---------------------------------------
#
# Per instance, the choice of segments (and of whole words) runs in Python.
# The random positions, the 80/10/10 corruption, the varints of the id
# matrices and the CRCs of the framing work on [instances, ...] numpy arrays;
# each record is then one join of ready-made pieces, and a shard's records
# come out as one byte buffer.

def _ranks(lengths):
    """For ragged rows of `lengths`, each element's index within its row (flat)."""
    return np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def num_predictions(lengths, max_predictions_per_seq, masked_lm_prob):
    """int64 [n]: min(max_predictions, max(1, round(length * prob))) per instance.

    np.rint rounds half to even, as Python 3's round() in the original does.
    """
    wanted = np.rint(lengths * masked_lm_prob).astype(np.int64)
    return np.minimum(max_predictions_per_seq, np.maximum(1, wanted))


def choose_random_positions(lengths, lengths_a, counts, max_predictions_per_seq, np_rng):
    """int64 [n, max_predictions]: sorted random distinct candidate positions per row.

    Row i gets counts[i] positions (at most its number of candidates) chosen
    uniformly among the non-special positions of [CLS] A [SEP] B [SEP]; unused
    slots are 0. A random key per position, sorted, gives a uniform subset.
    """
    n, width = len(lengths), max(int(lengths.max()), max_predictions_per_seq)
    column = np.arange(width)[np.newaxis, :]
    len_a = lengths_a[:, np.newaxis]
    candidate = (((column >= 1) & (column <= len_a))
                 | ((column >= len_a + 2) & (column < lengths[:, np.newaxis] - 1)))
    keys = np.where(candidate, np_rng.random([n, width]), 2.0)
    # The max_predictions smallest keys of each row, in key order (a partition
    # first: only those few need sorting).
    smallest = np.argpartition(keys, max_predictions_per_seq - 1, axis=1)[
        :, :max_predictions_per_seq]
    picked = np.take_along_axis(smallest, np.argsort(
        np.take_along_axis(keys, smallest, axis=1), axis=1), axis=1)
    counts = np.minimum(counts, candidate.sum(axis=1))
    used = np.arange(max_predictions_per_seq)[np.newaxis, :] < counts[:, np.newaxis]
    # Unused slots sort last, then become 0 like the original's padding.
    positions = np.sort(np.where(used, picked, width + 1), axis=1)
    return np.where(used, positions, 0)


def corrupt_batch(input_ids, positions, used, vocab_size, mask_id, np_rng):
    """The 80/10/10 rule at `positions` (where `used`), in place on input_ids.

    80%: [MASK]; 10%: unchanged (still predicted); 10%: a random vocabulary id.
    Returns the labels: int32 [n, max_predictions], the original ids (0 unused).
    """
    rows = np.arange(len(input_ids))[:, np.newaxis]
    labels = np.where(used, input_ids[rows, positions], 0)
    draw, keep_or_random = np_rng.random(positions.shape), np_rng.random(positions.shape)
    replacement = np.where(draw < 0.8, mask_id,
                           np.where(keep_or_random < 0.5, labels,
                                    np_rng.integers(0, vocab_size, positions.shape)))
    rows, slots = np.nonzero(used)
    input_ids[rows, positions[rows, slots]] = replacement[rows, slots]
    return labels.astype(np.int32)


def varint_bytes(values):
    """Protocol-buffer varints of a non-negative int matrix, row by row.

    Args:
      values: int [n, m], each < 2**35.
    Returns:
      (uint8 [total]: every row's varints laid end to end; int64 [n]: bytes per row).
    """
    if values.size and int(values.max()) < 128:  # one byte each (e.g. positions)
        return (values.astype(np.uint8).ravel(),
                np.full(len(values), values.shape[1], dtype=np.int64))
    values = values.astype(np.int64)
    sizes = np.ones(values.shape, dtype=np.int64)
    for bits in (7, 14, 21, 28):
        sizes += values >= (1 << bits)
    flat_values = np.repeat(values.ravel(), sizes.ravel())
    index = _ranks(sizes.ravel())  # which 7-bit group of its value each byte holds
    last = index == np.repeat(sizes.ravel(), sizes.ravel()) - 1
    data = ((flat_values >> (7 * index)) & 0x7F) | np.where(last, 0, 0x80)
    return data.astype(np.uint8), sizes.sum(axis=1)


def _varint(value):
    """Protocol-buffer base-128 encoding of one non-negative int."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _entry_prefix(name, payload_length, is_float):
    """Bytes that, followed by a packed payload of that length, make a map entry.

    The entry of Features.feature is {key=1: name, value=2: Feature}; the
    Feature holds float_list=2 or int64_list=3, whose packed `value=1` is the
    payload.
    """
    list_header = b"\x0a" + _varint(payload_length)
    feature_length = len(list_header) + payload_length
    feature_header = (b"\x12" if is_float else b"\x1a") + _varint(feature_length)
    value_length = len(feature_header) + feature_length
    name_field = b"\x0a" + _varint(len(name)) + name.encode("ascii")
    value_header = b"\x12" + _varint(value_length)
    entry_length = len(name_field) + len(value_header) + value_length
    return (b"\x0a" + _varint(entry_length) + name_field + value_header + feature_header
            + list_header)


class ExampleEncoder(object):
    """Serialises batches of instances as tf.train.Example records, framed.

    The entry framing of a feature depends only on its name and payload
    length, so it is built once per length. The varints of the id matrices
    are computed for the whole batch in numpy; each record is then one join
    of ready-made pieces.
    """

    def __init__(self, max_seq_length, max_predictions_per_seq):
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self._prefixes = {}
        self._mask_entries = [
            self._entry("input_mask", b"\x01" * n + b"\x00" * (max_seq_length - n))
            for n in range(max_seq_length + 1)]
        self._segment_prefix = self.prefix("segment_ids", max_seq_length)
        self._weight_entries = [
            self._entry("masked_lm_weights", struct.pack(
                "<%df" % max_predictions_per_seq,
                *([1.0] * n + [0.0] * (max_predictions_per_seq - n))))
            for n in range(max_predictions_per_seq + 1)]
        self._next_sentence_entries = [self._entry("next_sentence_labels", b"\x00"),
                                       self._entry("next_sentence_labels", b"\x01")]
        # masked_lm_weights + next_sentence_labels, by [count][is_random_next].
        self._end = [[weights + label for label in self._next_sentence_entries]
                     for weights in self._weight_entries]
        self._middle = {}  # input_mask + segment_ids, by (length, length of A)
        # Example{features=1: Features}: tag and length of Features, by length.
        self._header_varints = [b"\x0a" + _varint(n) for n in range(1 << 14)]
        self.crc = Crc32c()

    def prefix(self, name, payload_length):
        key = (name, payload_length)
        prefix = self._prefixes.get(key)
        if prefix is None:
            prefix = self._prefixes[key] = _entry_prefix(
                name, payload_length, name == "masked_lm_weights")
        return prefix

    def _entry(self, name, payload):
        return self.prefix(name, len(payload)) + payload

    def examples(self, input_ids, lengths, lengths_a, positions, labels, counts,
                 is_random_next):
        """The serialised Example of each instance: a list of bytes.

        Args:
          input_ids: int32 [n, max_seq_length] after masking; lengths,
            lengths_a: int64 [n], the length of [CLS] A [SEP] B [SEP] and of A.
          positions, labels: int [n, max_predictions_per_seq], 0 where unused;
            counts: int64 [n] used slots. is_random_next: bool [n].
        """
        prefixes, out = self._prefixes, []
        header, fixed_middle, fixed_end = self._header_varints, self._middle, self._end
        payloads = []
        for name, matrix in (("input_ids", input_ids), ("masked_lm_positions", positions),
                             ("masked_lm_ids", labels)):
            data, sizes = varint_bytes(matrix)
            data, ends = data.tobytes(), np.cumsum(sizes).tolist()
            payloads.append([data[start:end] for start, end in zip([0] + ends[:-1], ends)])
        for ids_payload, pos_payload, lab_payload, length, length_a, count, random_next in zip(
                payloads[0], payloads[1], payloads[2], lengths.tolist(), lengths_a.tolist(),
                counts.tolist(), is_random_next.tolist()):
            # The entries that depend only on the lengths and counts are cached.
            middle = fixed_middle.get((length, length_a))
            if middle is None:
                middle = self._middle_entries(length, length_a)
                if len(fixed_middle) < _MAX_CACHED_ROWS:
                    fixed_middle[(length, length_a)] = middle
            ids_key = ("input_ids", len(ids_payload))
            pos_key = ("masked_lm_positions", len(pos_payload))
            lab_key = ("masked_lm_ids", len(lab_payload))
            features = b"".join((
                prefixes.get(ids_key) or self.prefix(*ids_key), ids_payload, middle,
                prefixes.get(pos_key) or self.prefix(*pos_key), pos_payload,
                prefixes.get(lab_key) or self.prefix(*lab_key), lab_payload,
                fixed_end[count][random_next]))
            size = len(features)
            out.append((header[size] if size < len(header) else b"\x0a" + _varint(size))
                       + features)
        return out

    def _middle_entries(self, length, length_a):
        """The input_mask and segment_ids entries of a [CLS] A [SEP] B [SEP] row."""
        pad = self.max_seq_length - length
        return (self._mask_entries[length] + self._segment_prefix + b"\x00" * (length_a + 2)
                + b"\x01" * (length - length_a - 2) + b"\x00" * pad)

    def records(self, payloads):
        """TFRecord framing: length (uint64), its masked CRC, payload, masked CRC.

        Returns (all records as one bytes object, int64 [n] bytes per record).
        """
        n = len(payloads)
        lengths = np.fromiter(map(len, payloads), dtype=np.int64, count=n)
        length_bytes = lengths.astype("<u8").view(np.uint8)
        headers = np.empty([n, 12], dtype=np.uint8)
        headers[:, :8] = length_bytes.reshape(n, 8)
        headers[:, 8:] = _masked(self.crc.of_concatenated(length_bytes, np.full(n, 8))) \
            .view(np.uint8).reshape(n, 4)
        trailers = _masked(self.crc.of_concatenated(
            np.frombuffer(b"".join(payloads), dtype=np.uint8), lengths)).tobytes()
        headers, n_range = headers.tobytes(), range(n)
        data = b"".join(itertools.chain.from_iterable(zip(
            [headers[12 * i:12 * i + 12] for i in n_range], payloads,
            [trailers[4 * i:4 * i + 4] for i in n_range])))
        return data, lengths + 16


# -- one shard ---------------------------------------------------------------

# Joins a document's sentences into one text for the tokenizer (see
# ShardWorker.tokenize_documents): an ASCII punctuation mark is always a token
# of its own, and the spaces keep it from touching the words around it.
_SEPARATOR = "|"
_JOINER = " | "


def _split_at(ids, separator_id):
    """Splits a list of ids at each `separator_id` (dropped) into lists."""
    pieces, start = [], 0
    while True:
        try:
            end = ids.index(separator_id, start)
        except ValueError:
            pieces.append(ids[start:])
            return pieces
        pieces.append(ids[start:end])
        start = end + 1


class ShardWorker(object):
    """Turns shards of documents into framed TFRecord records (one per instance).

    Holds what is the same for every shard: the tokenizer, the "##" table, the
    CRC tables. Build one per process.
    """

    def __init__(self, config):
        self.config = config
        self.tokenizer = tokenization.FullTokenizer(config.vocab_file, config.do_lower_case)
        vocab = self.tokenizer.vocab
        missing = [t for t in _REQUIRED_TOKENS if t not in vocab]
        if missing:
            raise InputError("vocab file %s: missing %s; pretraining data needs %s"
                             % (config.vocab_file, " ".join(missing),
                                " ".join(_REQUIRED_TOKENS)))
        self.vocab_size = len(vocab)
        self.separator_id = vocab.get(_SEPARATOR)
        self.cls_id, self.sep_id, self.mask_id = (vocab["[CLS]"], vocab["[SEP]"],
                                                  vocab["[MASK]"])
        inverse = self.tokenizer.inv_vocab
        self.is_continuation = [inverse[i].startswith("##") for i in range(self.vocab_size)]
        self.encoder = ExampleEncoder(config.max_seq_length,
                                      config.max_predictions_per_seq)

    def tokenize_documents(self, documents):
        """Ids of every sentence, in one batch; empty sentences and documents dropped.

        A document's sentences are tokenized as one text, joined by " | ",
        and its ids split again at the id of "|": no step of WordPiece
        tokenization looks across whitespace (see tokenization._text_head), so
        the pieces are exactly the ids of the sentences tokenized one by one,
        and one text per document costs a third less than one per sentence. A
        document that itself contains "|" is tokenized sentence by sentence.

        Returns (tokens: int32 [all the shard's tokens], documents: for each
        document with any tokens, the boundaries of its sentences in `tokens`).
        """
        texts, owners = [], []  # owners[i]: (document index, None) or (document, line)
        for index, document in enumerate(documents):
            if self.separator_id is not None and not any(_SEPARATOR in line
                                                         for line in document):
                texts.append(_JOINER.join(document))
                owners.append((index, None))
            else:
                texts.extend(document)
                owners.extend((index, line) for line in range(len(document)))
        sentences = [[] for _ in documents]
        for (index, line), ids in zip(owners, self.tokenizer.encode_batch(texts)):
            if line is None:
                sentences[index].extend(_split_at(ids, self.separator_id))
            else:
                sentences[index].append(ids)
        flat, bounds, offset = [], [], 0
        for document in sentences:
            document_bounds = [offset]
            for sentence in document:
                if sentence:
                    flat.append(sentence)
                    offset += len(sentence)
                    document_bounds.append(offset)
            if len(document_bounds) > 1:
                bounds.append(document_bounds)
        tokens = np.fromiter(itertools.chain.from_iterable(flat), dtype=np.int32, count=offset)
        return tokens, bounds

    def instance_spans(self, documents, rng):
        """Every instance of `documents`, dupe_factor times: int64 [n, 4] spans
        (start_a, len_a, start_b, len_b) and bool [n] is-random-next."""
        config = self.config
        spans = []
        for _ in range(config.dupe_factor):
            for index in range(len(documents)):
                spans.extend(segment_pairs(documents, index, config.max_seq_length - 3,
                                           config.short_seq_prob, rng))
        table = np.array(spans, dtype=np.int64).reshape(-1, 5)
        return table[:, :4], table[:, 4].astype(bool)

    def whole_word_positions(self, input_ids, lengths_a, lengths, rng):
        """Whole-word masking: the chosen positions of each row, int64 [n, max_pred]."""
        config = self.config
        counts = num_predictions(lengths, config.max_predictions_per_seq,
                                 config.masked_lm_prob)
        chosen = []
        for row, len_a, length, count in zip(input_ids.tolist(), lengths_a.tolist(),
                                             lengths.tolist(), counts.tolist()):
            groups = whole_word_groups(row, candidate_positions(len_a, length - len_a - 3),
                                       self.is_continuation)
            chosen.append(sorted(choose_whole_words(groups, count, rng)))
        positions = np.zeros([len(chosen), config.max_predictions_per_seq], dtype=np.int64)
        for i, row in enumerate(chosen):
            positions[i, :len(row)] = row
        return positions

    def encode_rows(self, tokens, spans, random_next, rng, np_rng):
        """Masks and encodes instances; returns (framed records as bytes, int64 [n])."""
        config = self.config
        input_ids, lengths = gather_pairs(tokens, spans, config.max_seq_length, self.cls_id,
                                          self.sep_id)
        lengths_a = spans[:, 1]
        if config.do_whole_word_mask:
            positions = self.whole_word_positions(input_ids, lengths_a, lengths, rng)
        else:
            counts = num_predictions(lengths, config.max_predictions_per_seq,
                                     config.masked_lm_prob)
            positions = choose_random_positions(lengths, lengths_a, counts,
                                                config.max_predictions_per_seq, np_rng)
        counts = np.count_nonzero(positions, axis=1)
        used = np.arange(config.max_predictions_per_seq)[np.newaxis, :] < counts[:, np.newaxis]
        labels = corrupt_batch(input_ids, positions, used, self.vocab_size, self.mask_id,
                               np_rng)
        return self.encoder.records(self.encoder.examples(
            input_ids, lengths, lengths_a, positions, labels, counts, random_next))

    def process(self, shard_index, documents):
        """(documents kept, framed records as a list of bytes, int64 [n] bytes per record).

        The shard's instances are shuffled, then masked and encoded in chunks
        of `_ENCODE_CHUNK` (numpy temporaries stay small).
        """
        rng = random.Random("%d:%d" % (self.config.random_seed, shard_index))
        tokens, documents = self.tokenize_documents(documents)
        spans, random_next = self.instance_spans(documents, rng)
        np_rng = np.random.default_rng(rng.getrandbits(64))
        order = np_rng.permutation(len(spans))
        blobs, record_lengths = [], []
        for start in range(0, len(order), _ENCODE_CHUNK):
            chunk = order[start:start + _ENCODE_CHUNK]
            data, sizes = self.encode_rows(tokens, spans[chunk], random_next[chunk], rng,
                                           np_rng)
            blobs.append(data)
            record_lengths.append(sizes)
        lengths = (np.concatenate(record_lengths) if record_lengths
                   else np.zeros([0], dtype=np.int64))
        return len(documents), blobs, lengths


def feature_lengths(max_seq_length, max_predictions_per_seq):
    """name -> length of every feature in a record."""
    return {"input_ids": max_seq_length, "input_mask": max_seq_length,
            "segment_ids": max_seq_length, "masked_lm_positions": max_predictions_per_seq,
            "masked_lm_ids": max_predictions_per_seq,
            "masked_lm_weights": max_predictions_per_seq, "next_sentence_labels": 1}


def check_config(config):
    """Raises InputError naming the flag whose value cannot work."""
    checks = (
        ("max_seq_length", config.max_seq_length >= 5,
         "must be >= 5 ([CLS], [SEP], [SEP] and a token on each side)"),
        ("max_predictions_per_seq", config.max_predictions_per_seq >= 1, "must be >= 1"),
        ("dupe_factor", config.dupe_factor >= 1, "must be >= 1"),
        ("masked_lm_prob", 0.0 < config.masked_lm_prob <= 1.0, "must be in (0, 1]"),
        ("short_seq_prob", 0.0 <= config.short_seq_prob <= 1.0, "must be in [0, 1]"),
    )
    for name, ok, expected in checks:
        if not ok:
            raise InputError("--%s=%s %s" % (name, getattr(config, name), expected))


# -- the parallel, streaming driver -------------------------------------------------

_PROCESS_WORKER = None  # the ShardWorker of a worker process


def _init_process(config):
    global _PROCESS_WORKER
    # Each process tokenizes on its own core: the Rust tokenizer's thread pool
    # would otherwise compete with the other workers.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _PROCESS_WORKER = ShardWorker(config)


def _process_in_worker(task):
    shard_index, documents = task
    return _PROCESS_WORKER.process(shard_index, documents)


class Progress(object):
    """Documents and instances per second on stderr, at most every `interval` s."""

    def __init__(self, stream, interval=None, clock=None):
        import time
        self._clock = clock or time.time
        self._stream = stream
        self._is_tty = hasattr(stream, "isatty") and stream.isatty()
        self._interval = interval if interval is not None else (0.5 if self._is_tty else 10.0)
        self._start = self._last = self._clock()
        self.documents = self.instances = 0

    def add(self, documents, instances):
        self.documents += documents
        self.instances += instances
        now = self._clock()
        if now - self._last >= self._interval:
            self._last = now
            self._show(now, final=False)

    def line(self, now=None):
        elapsed = max((now or self._clock()) - self._start, 1e-9)
        return ("%d documents (%.0f documents/s), %d instances (%.0f instances/s), %.1f s"
                % (self.documents, self.documents / elapsed, self.instances,
                   self.instances / elapsed, elapsed))

    def _show(self, now, final):
        if self._stream is None:
            return
        end = "\n" if final or not self._is_tty else ""
        self._stream.write(("\r" if self._is_tty else "") + self.line(now) + end)
        self._stream.flush()

    def finish(self):
        self._show(self._clock(), final=True)


class _OutputFiles(object):
    """Output files written under temporary names, renamed only when complete.

    Records go round-robin over the files, as in the original. On any failure
    the temporary files are removed, so a failed run leaves no output behind.
    """

    def __init__(self, paths):
        self.paths = list(paths)
        self._temporary = ["%s.partial-%d" % (p, os.getpid()) for p in self.paths]
        self._files = []
        self.count = 0

    def __enter__(self):
        for path in self._temporary:
            if "://" in path:
                import tensorflow as tf
                self._files.append(tf.io.gfile.GFile(path, "wb"))
            else:
                directory = os.path.dirname(os.path.abspath(path))
                os.makedirs(directory, exist_ok=True)
                self._files.append(open(path, "wb"))
        return self

    def write(self, blobs, record_lengths):
        """Appends framed records (`blobs`: bytes objects of whole records, laid
        end to end, `record_lengths` bytes each) to the files, round-robin."""
        if len(self._files) == 1:
            for blob in blobs:
                self._files[0].write(blob)
        else:
            view, ends = memoryview(b"".join(blobs)), np.cumsum(record_lengths)
            starts = ends - record_lengths
            n = len(self._files)
            for offset in range(n):
                first = (offset - self.count) % n
                self._files[offset].write(b"".join(
                    view[s:e] for s, e in zip(starts[first::n], ends[first::n])))
        self.count += len(record_lengths)

    def __exit__(self, exc_type, exc, tb):
        for f in self._files:
            f.close()
        if exc_type is None:
            for temporary, path in zip(self._temporary, self.paths):
                _rename(temporary, path)
        else:
            for temporary in self._temporary:
                _remove_quietly(temporary)
        return False


def _rename(source, target):
    if "://" in target:
        import tensorflow as tf
        tf.io.gfile.rename(source, target, overwrite=True)
    else:
        os.replace(source, target)


def _remove_quietly(path):
    try:
        if "://" in path:
            import tensorflow as tf
            tf.io.gfile.remove(path)
        else:
            os.remove(path)
    except Exception:  # noqa: BLE001 - best effort cleanup after another failure
        pass


def _bounded(iterable, semaphore):
    """Yields from `iterable`, taking `semaphore` before each item.

    multiprocessing.Pool reads its task iterator in a thread as fast as it
    can; the semaphore (released when a result is consumed) keeps only a few
    shards in flight, so memory stays bounded on any corpus size.
    """
    for item in iterable:
        semaphore.acquire()
        yield item


def write_pretraining_data(input_paths, output_paths, config, num_workers=1,
                           documents_per_shard=256, max_shard_chars=4_000_000,
                           progress_stream=None):
    """Streams the documents of `input_paths` into TFRecord files `output_paths`.

    With num_workers > 1, shards are processed by that many processes; the
    records are written in shard order, so the output is the same for any
    num_workers. Returns the final `Progress` (documents and instances).
    Raises InputError for a missing or empty input, a bad vocabulary or
    flag value, before any output file exists.
    """
    check_config(config)
    if num_workers < 1:
        raise InputError("--num_workers must be >= 1, got %d" % num_workers)
    if documents_per_shard < 2:
        raise InputError("--documents_per_shard must be >= 2, got %d" % documents_per_shard)
    for path in input_paths:
        check_has_text(path)
    local = ShardWorker(config) if num_workers == 1 else None
    if local is None:
        ShardWorker(config)  # the vocabulary's mistakes, raised here and not in a worker
    shards = enumerate(shard_documents(read_documents(input_paths), documents_per_shard,
                                       max_shard_chars))
    progress = Progress(progress_stream)
    with _OutputFiles(output_paths) as out:
        if local is not None:
            for index, documents in shards:
                kept, blobs, record_lengths = local.process(index, documents)
                out.write(blobs, record_lengths)
                progress.add(kept, len(record_lengths))
        else:
            import multiprocessing
            import threading
            # fork is the cheapest start, but unsafe once TensorFlow's threads
            # exist in this process (e.g. when called from a test or a notebook).
            method = "fork" if "tensorflow" not in sys.modules else "spawn"
            context = multiprocessing.get_context(method)
            in_flight = threading.BoundedSemaphore(2 * num_workers + 2)
            with context.Pool(num_workers, initializer=_init_process,
                              initargs=(config,)) as pool:
                for kept, blobs, record_lengths in pool.imap(_process_in_worker,
                                                             _bounded(shards, in_flight)):
                    in_flight.release()
                    out.write(blobs, record_lengths)
                    progress.add(kept, len(record_lengths))
        if progress.documents == 0:
            raise InputError("--input_file: %s hold(s) no documents (expected one sentence "
                             "per line, a blank line between documents)"
                             % ", ".join(input_paths))
    progress.finish()
    return progress
