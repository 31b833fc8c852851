"""tf.train.Example records and TFRecord framing, written without TensorFlow.

What create_pretraining_data.py writes, encoded directly: the protocol-buffer
bytes of each Example (int64 lists as packed varints, float lists as packed
little-endian floats) and TFRecord's framing (length, masked CRC-32C of the
length, data, masked CRC-32C of the data). Worker processes that write
records then need neither TensorFlow nor its start-up time, and a whole
batch of records is encoded by numpy at once. tests/test_pretraining.py
checks the bytes against tf.train.Example + tf.io.TFRecordWriter, and that
tf.data reads them back; `read_first_record` and `read_records` read the framing
back.
"""

import itertools
import struct

import numpy as np

from bert_toolkit.errors import InputError

# Bounds the cache of input_mask/segment_ids entries (one per pair of lengths:
# 8,000 pairs of max_seq_length 128 are ~2 MB; longer sequences stop sooner).
_MAX_CACHED_ROWS = 20000


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


def masked_crc(crc):
    """TFRecord's masking of uint32 CRCs: rotate right by 15, add a constant."""
    crc = crc.astype(np.uint64)
    return ((((crc >> np.uint64(15)) | (crc << np.uint64(17))) + np.uint64(0xA282EAD8))
            & np.uint64(0xFFFFFFFF)).astype("<u4")


def read_first_record(path, open_binary=open):
    """The payload of the first TFRecord in `path` (bytes); InputError if there is none.

    open_binary: how to open the path for reading bytes (e.g. tf.io.gfile.GFile
    for remote paths). The length's CRC is not checked: this only tells a
    TFRecord file from another file before training starts.
    """
    with open_binary(path, "rb") as f:
        header = f.read(12)
        if len(header) == 0:
            raise InputError("%s: holds no records" % path)
        length = struct.unpack("<Q", header[:8])[0] if len(header) == 12 else -1
        payload = f.read(length) if 0 < length < (1 << 30) else b""
    if length <= 0 or len(payload) != length:
        raise InputError("%s: not a TFRecord file (truncated or not TFRecord framing)" % path)
    return payload


def read_records(f):
    """Yields the payload (bytes) of each TFRecord in the binary file object `f`,
    stopping at the end or at a record cut short (the tail of a file a killed
    process was writing). CRCs are not checked."""
    while True:
        header = f.read(12)
        if len(header) < 12:
            return
        length = struct.unpack("<Q", header[:8])[0]
        payload = f.read(length)
        if len(payload) < length or len(f.read(4)) < 4:
            return
        yield payload


def _ranks(lengths):
    """For ragged rows of `lengths`, each element's index within its row (flat)."""
    return np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)


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
            lengths_a: int64 [n], the length of [CLS] A [SEP] B [SEP] (or of
            [CLS] A [SEP]) and of A.
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
        """The input_mask and segment_ids entries of a [CLS] A [SEP] B [SEP] row (B's
        segment 1); a row without B, [CLS] A [SEP] (RoBERTa's masked-LM instances),
        is length_a + 2 long, all segment 0."""
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
        headers[:, 8:] = masked_crc(self.crc.of_concatenated(length_bytes, np.full(n, 8))) \
            .view(np.uint8).reshape(n, 4)
        trailers = masked_crc(self.crc.of_concatenated(
            np.frombuffer(b"".join(payloads), dtype=np.uint8), lengths)).tobytes()
        headers, n_range = headers.tobytes(), range(n)
        data = b"".join(itertools.chain.from_iterable(zip(
            [headers[12 * i:12 * i + 12] for i in n_range], payloads,
            [trailers[4 * i:4 * i + 4] for i in n_range])))
        return data, lengths + 16
