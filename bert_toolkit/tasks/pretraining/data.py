"""Masked-LM and next-sentence training instances from plain text, streamed.

Input: text files with one sentence per line and a blank line between
documents (the format of Google's create_pretraining_data.py). Output: TFRecord
files of tf.train.Example records with the reference features

    input_ids, input_mask, segment_ids      int64 [max_seq_length]
    masked_lm_positions, masked_lm_ids      int64 [max_predictions_per_seq]
    masked_lm_weights                       float [max_predictions_per_seq]
    next_sentence_labels                    int64 [1]  (1 = B is a random document)

The recipe per document is the original one (for the families whose models
learn next sentences: BERT's pair layout; see `ShardWorker`): segment A is a run of
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

RoBERTa and XLM-R (the families of the `<s> a </s></s> b </s>` layout) learn
masked LM alone, on full sentences: an instance is `<s> A </s>`, A a run of
consecutive sentences of one document up to the target length (a sentence
longer than max_seq_length is cut at its end), next_sentence_labels 0. Every
family masks with its own mask token, never masks its special tokens, and
draws the 10% random replacements among its ids other than its special tokens
(BERT's, as the original, among the whole vocabulary).

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
turns one shard into framed TFRecord bytes (engine/tfrecord_codec.py encodes
them, without TensorFlow), and writer.py streams the shards through
worker processes into the output files.
"""

import bisect
import itertools
import random

import numpy as np

from bert_toolkit.engine import model_files, tfrecord_codec
from bert_toolkit.errors import InputError
from bert_toolkit.text import tokenization

_REQUIRED_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")
# What starts a word in a tokenizer's pieces (whole-word masking): a WordPiece
# piece that is not "##...", a byte-level BPE piece with the space mark "Ġ",
# a SentencePiece piece with "▁".
_WORD_START = {"bpe": "\u0120", "unigram": "\u2581"}

# Instances masked and encoded together: numpy temporaries of ~1 MB stay in cache.
_ENCODE_CHUNK = 1024


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


def _target_length(max_num_tokens, short_seq_prob, rng):
    """The tokens an instance aims for: max_num_tokens, or with probability
    short_seq_prob a shorter length drawn from 2 to max_num_tokens (the original's
    short sequences)."""
    if rng.random() < short_seq_prob:
        return 2 + _below(max_num_tokens - 1, rng)
    return max_num_tokens


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
    target_length = _target_length(max_num_tokens, short_seq_prob, rng)
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


def segment_singles(documents, document_index, max_num_tokens, short_seq_prob, rng):
    """The single segments of one document (masked LM alone: RoBERTa, XLM-R).

    Consecutive sentences join a segment while it stays within the target
    length (max_num_tokens, or with probability `short_seq_prob` a random
    shorter one, drawn once per document as the pairs' target is); a sentence
    longer than max_num_tokens is a segment of its own, cut to it at its end.

    Args:
      documents: as for segment_pairs; max_num_tokens: max_seq_length - 2.
    Returns:
      A list of (start, length, 0, 0, False): segment_pairs' rows without a B.
    """
    bounds = documents[document_index]
    num_sentences = len(bounds) - 1
    target_length = _target_length(max_num_tokens, short_seq_prob, rng)
    segments = []
    first = 0
    while first < num_sentences:
        # The last sentence boundary within the target, at least one sentence on.
        end = max(bisect.bisect_right(bounds, bounds[first] + target_length, first + 1) - 1,
                  first + 1)
        segments.append((bounds[first], min(bounds[end] - bounds[first], max_num_tokens),
                         0, 0, False))
        first = end
    return segments


def b_offsets(len_a, layout):
    """Where B starts in rows laid out by `layout`: after [CLS], A and the separators
    between (BERT 1, RoBERTa 2). `len_a`: an int or an int array."""
    return len_a + 1 + layout.seps_between


def gather_pairs(tokens, spans, max_seq_length, layout):
    """The rows of `spans` laid out by `layout` (tokenization.Layout): [CLS] A [SEP]
    B [SEP] (BERT's), or where len_b is 0, [CLS] A [SEP]; padded with its pad id.

    Args:
      tokens: int32 [shard tokens]; spans: int64 [n, 4] of (start_a, len_a,
        start_b, len_b), either all with a B or all without.
    Returns:
      (input_ids int32 [n, max_seq_length], lengths int64 [n]).
    """
    start_a, len_a, start_b, len_b = (spans[:, k:k + 1] for k in range(4))
    pairs = bool(len(spans)) and bool(len_b.all())
    column = np.arange(max_seq_length)[np.newaxis, :]
    begin_b = b_offsets(len_a, layout)
    in_a = (column >= 1) & (column <= len_a)
    in_b = (column >= begin_b) & (column < begin_b + len_b)
    source = np.where(in_a, start_a + column - 1, np.where(in_b, start_b + column - begin_b,
                                                           0))
    input_ids = np.where(in_a | in_b, tokens[source], layout.pad_id).astype(np.int32)
    rows = np.arange(len(spans))
    lengths = ((begin_b + len_b + 1) if pairs else (len_a + 2))[:, 0]
    input_ids[:, 0] = layout.cls_id
    if pairs:
        for separator in range(layout.seps_between):
            input_ids[rows, len_a[:, 0] + 1 + separator] = layout.sep_id
    input_ids[rows, lengths - 1] = layout.sep_id
    return input_ids, lengths


def candidate_positions(len_a, len_b, seps_between=1):
    """Positions of A and B in [CLS] A [SEP] B [SEP] (`seps_between` separators
    between A and B): all but the special tokens."""
    begin_b = len_a + 1 + seps_between
    return list(range(1, len_a + 1)) + list(range(begin_b, begin_b + len_b))


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


# -- masking and encoding a whole shard at once ---------------------------------------
#
# Per instance, the choice of segments (and of whole words) runs in Python.
# The random positions, the 80/10/10 corruption, the varints of the id
# matrices and the CRCs of the framing work on [instances, ...] numpy arrays;
# each record is then one join of ready-made pieces, and a shard's records
# come out as one byte buffer.

def num_predictions(lengths, max_predictions_per_seq, masked_lm_prob):
    """int64 [n]: min(max_predictions, max(1, round(length * prob))) per instance.

    np.rint rounds half to even, as Python 3's round() in the original does.
    """
    wanted = np.rint(lengths * masked_lm_prob).astype(np.int64)
    return np.minimum(max_predictions_per_seq, np.maximum(1, wanted))


def choose_random_positions(lengths, lengths_a, counts, max_predictions_per_seq, np_rng,
                            seps_between=1):
    """int64 [n, max_predictions]: sorted random distinct candidate positions per row.

    Row i gets counts[i] positions (at most its number of candidates) chosen
    uniformly among the non-special positions of [CLS] A [SEP] B [SEP] (with
    `seps_between` separators between A and B; a row without B, [CLS] A [SEP],
    has A's alone); unused slots are 0. A random key per position, sorted,
    gives a uniform subset.
    """
    n, width = len(lengths), max(int(lengths.max()), max_predictions_per_seq)
    column = np.arange(width)[np.newaxis, :]
    len_a = lengths_a[:, np.newaxis]
    candidate = (((column >= 1) & (column <= len_a))
                 | ((column >= len_a + 1 + seps_between)
                    & (column < lengths[:, np.newaxis] - 1)))
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


def corrupt_batch(input_ids, positions, used, vocab_size, mask_id, np_rng,
                  replacement_ids=None):
    """The 80/10/10 rule at `positions` (where `used`), in place on input_ids.

    80%: [MASK]; 10%: unchanged (still predicted); 10%: a random vocabulary id,
    or a random one of `replacement_ids` (int array) when given.
    Returns the labels: int32 [n, max_predictions], the original ids (0 unused).
    """
    rows = np.arange(len(input_ids))[:, np.newaxis]
    labels = np.where(used, input_ids[rows, positions], 0)
    draw, keep_or_random = np_rng.random(positions.shape), np_rng.random(positions.shape)
    if replacement_ids is None:
        random_ids = np_rng.integers(0, vocab_size, positions.shape)
    else:
        random_ids = replacement_ids[np_rng.integers(0, len(replacement_ids), positions.shape)]
    replacement = np.where(draw < 0.8, mask_id,
                           np.where(keep_or_random < 0.5, labels, random_ids))
    rows, slots = np.nonzero(used)
    input_ids[rows, positions[rows, slots]] = replacement[rows, slots]
    return labels.astype(np.int32)


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

    Holds what is the same for every shard: the tokenizer (the model family's:
    model_files.family_of_tokenizer_file), its layout and special tokens, the
    word-start table, the CRC tables. Build one per process. The families whose
    layout is BERT's get sentence pairs with next-sentence labels (a model
    without a next-sentence head ignores them); RoBERTa's layout single
    segments (see the module docstring).
    """

    def __init__(self, config):
        self.config = config
        family = model_files.family_of_tokenizer_file(config.vocab_file, config.model_family)
        self.tokenizer = tokenization.load_tokenizer(
            config.vocab_file, model_files.requested_casing(config, family), family)
        vocab = self.tokenizer.vocab
        wordpiece = family.tokenizer == "wordpiece"
        required = _REQUIRED_TOKENS if wordpiece else (self.tokenizer.mask_token,)
        missing = [t for t in required if t not in vocab]
        if missing:
            raise InputError("vocab file %s: missing %s; pretraining data needs %s"
                             % (config.vocab_file, " ".join(missing), " ".join(required)))
        self.vocab_size = len(vocab)
        self.layout = self.tokenizer.layout
        self.pairs = family.pair_layout == "bert"
        # Joining a document's sentences (tokenize_documents) is exact for WordPiece only.
        self.separator_id = vocab.get(_SEPARATOR) if wordpiece else None
        self.mask_id = vocab[self.tokenizer.mask_token]
        special_ids = self._special_ids()
        # BERT draws random replacements among all ids, as the original does.
        self.replacement_ids = None if family.name == "bert" else np.array(
            sorted(set(range(self.vocab_size)) - special_ids), dtype=np.int64)
        inverse = self.tokenizer.inv_vocab
        self.is_continuation = continuation_table(
            [inverse.get(i, "") for i in range(self.vocab_size)], family.tokenizer, special_ids)
        self.encoder = tfrecord_codec.ExampleEncoder(config.max_seq_length,
                                                     config.max_predictions_per_seq)

    def _special_ids(self):
        """The ids of the tokenizer's special tokens: its layout's, mask and unknown."""
        ids = {self.layout.cls_id, self.layout.sep_id, self.layout.pad_id, self.mask_id}
        unknown = self.tokenizer.vocab.get(self.tokenizer.unk_token)
        return ids if unknown is None else ids | {unknown}

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
        (start_a, len_a, start_b, len_b; len_b 0 for single segments) and bool
        [n] is-random-next."""
        config = self.config
        if self.pairs:
            segments, budget = segment_pairs, config.max_seq_length - self.layout.pair_specials
        else:
            segments, budget = segment_singles, (config.max_seq_length
                                                 - self.layout.single_specials)
        spans = []
        for _ in range(config.dupe_factor):
            for index in range(len(documents)):
                spans.extend(segments(documents, index, budget, config.short_seq_prob, rng))
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
            len_b = length - b_offsets(len_a, self.layout) - 1 if self.pairs else 0
            groups = whole_word_groups(row, candidate_positions(
                len_a, len_b, self.layout.seps_between), self.is_continuation)
            chosen.append(sorted(choose_whole_words(groups, count, rng)))
        positions = np.zeros([len(chosen), config.max_predictions_per_seq], dtype=np.int64)
        for i, row in enumerate(chosen):
            positions[i, :len(row)] = row
        return positions

    def encode_rows(self, tokens, spans, random_next, rng, np_rng):
        """Masks and encodes instances; returns (framed records as bytes, int64 [n])."""
        config = self.config
        input_ids, lengths = gather_pairs(tokens, spans, config.max_seq_length, self.layout)
        lengths_a = spans[:, 1]
        if config.do_whole_word_mask:
            positions = self.whole_word_positions(input_ids, lengths_a, lengths, rng)
        else:
            counts = num_predictions(lengths, config.max_predictions_per_seq,
                                     config.masked_lm_prob)
            positions = choose_random_positions(lengths, lengths_a, counts,
                                                config.max_predictions_per_seq, np_rng,
                                                self.layout.seps_between)
        counts = np.count_nonzero(positions, axis=1)
        used = np.arange(config.max_predictions_per_seq)[np.newaxis, :] < counts[:, np.newaxis]
        labels = corrupt_batch(input_ids, positions, used, self.vocab_size, self.mask_id,
                               np_rng, self.replacement_ids)
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


def continuation_table(tokens, kind, special_ids=()):
    """bool per id: whether the token continues the word before it (whole-word
    masking). WordPiece: a "##" piece; byte-level BPE and SentencePiece: a piece
    without the word-start mark ("Ġ", "▁") that is not a special token.

    tokens: the token of each id, in id order; kind: families.Family.tokenizer.
    """
    if kind == "wordpiece":
        return [token.startswith("##") for token in tokens]
    mark = _WORD_START[kind]
    return [not token.startswith(mark) and index not in special_ids
            for index, token in enumerate(tokens)]


def feature_lengths(max_seq_length, max_predictions_per_seq):
    """name -> length of every feature in a record."""
    return {"input_ids": max_seq_length, "input_mask": max_seq_length,
            "segment_ids": max_seq_length, "masked_lm_positions": max_predictions_per_seq,
            "masked_lm_ids": max_predictions_per_seq,
            "masked_lm_weights": max_predictions_per_seq, "next_sentence_labels": 1}
