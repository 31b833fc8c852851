"""NVIDIA's hdf5 pre-training shards: checked, streamed into tf.data, and written.

DeepLearningExamples' PyTorch BERT pipeline (and the projects that train on
its data: Distributed_BERT, NVIDIA's BERT forks) keeps pre-training instances
in HDF5 files (`..._training_N.hdf5`, `..._test_N.hdf5`), one row per instance
in six gzip-compressed datasets:

    input_ids              int32 [n, max_seq_length]    0 after the sequence
    input_mask             int8  [n, max_seq_length]
    segment_ids            int8  [n, max_seq_length]
    masked_lm_positions    int32 [n, max_predictions]   0 in unused slots
    masked_lm_ids          int32 [n, max_predictions]   0 in unused slots
    next_sentence_labels   int8  [n]                    1: B is a random sentence

Its reader takes the slots before the first position 0 as the predictions
(position 0 is [CLS], never predicted); `masked_lm_weights`, which the
TFRecords of Google's create_pretraining_data.py carry, is derived here the
same way. Other integer dtypes and a [n, 1] label column are read too.

Reading streams: a shard is read in chunks of rows (h5py decompresses one
chunk at a time, in a tf.data map), never loaded whole as NVIDIA's reader
does, and each row travels through the pipeline as one int32 vector (all six
features end to end), so shuffling and batching move one tensor per example
instead of seven. A batch is cut back into the features after batching. The
examples come out exactly as the TFRecord pipeline's parse gives them (int32,
float32 weights, labels [batch, 1]), so the model cannot tell the two apart.

Writing (create_pretraining_data.py --output_format=hdf5) appends chunks of
rows to resizable, chunked, gzip-compressed datasets in NVIDIA's dtypes.
"""

import collections
import threading

import numpy as np

from bert_toolkit.errors import InputError

# The datasets of a shard, in the order a packed row holds them.
TOKEN_DATASETS = ("input_ids", "input_mask", "segment_ids")
PREDICTION_DATASETS = ("masked_lm_positions", "masked_lm_ids")
LABEL_DATASET = "next_sentence_labels"
DATASETS = TOKEN_DATASETS + PREDICTION_DATASETS + (LABEL_DATASET,)

# NVIDIA's writer's dtypes (create_pretraining_data.py's write_instance_to_example_file).
WRITTEN_DTYPES = {"input_ids": "i4", "input_mask": "i1", "segment_ids": "i1",
                  "masked_lm_positions": "i4", "masked_lm_ids": "i4",
                  "next_sentence_labels": "i1"}

EXTENSIONS = (".hdf5", ".h5", ".hdf")
# The format signature; HDF5 allows the superblock at 0, 512, 1024, 2048, ...
_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_SIGNATURE_OFFSETS = (0, 512, 1024, 2048, 4096)

# Rows read (and decompressed) at a time; ~0.5 MB of int32 at length 128.
ROWS_PER_CHUNK = 1024

ShardInfo = collections.namedtuple("ShardInfo", ["path", "num_examples", "max_seq_length",
                                                 "max_predictions_per_seq"])


def _h5py():
    """h5py, imported when a shard is first touched (TFRecord runs never load it)."""
    import h5py
    return h5py


def is_hdf5(path):
    """True for an HDF5 file: by its extension, or (any name) by its signature."""
    if path.lower().endswith(EXTENSIONS):
        return True
    try:
        with open(path, "rb") as f:
            for offset in _SIGNATURE_OFFSETS:
                f.seek(offset)
                if f.read(len(_SIGNATURE)) == _SIGNATURE:
                    return True
    except OSError:
        return False  # not a local file: its reader will say what is wrong
    return False


def all_hdf5(paths, flag_name="input_file"):
    """True if every one of `paths` is an HDF5 shard, False if none is;
    InputError naming --flag_name for a mix (one input pipeline reads one format)."""
    kinds = [is_hdf5(p) for p in paths]
    if any(kinds) and not all(kinds):
        hdf5 = paths[kinds.index(True)]
        other = paths[kinds.index(False)]
        raise InputError("--%s mixes hdf5 shards (%s) with other files (%s): give one "
                         "format per flag" % (flag_name, hdf5, other))
    return bool(kinds) and all(kinds)


def _open(path):
    """The shard as an open h5py.File; InputError naming it if it cannot be read."""
    h5py = _h5py()
    try:
        return h5py.File(path, "r")
    except (OSError, ValueError) as e:
        raise InputError("%s: cannot read it as an hdf5 shard (%s)" % (path, e))


def describe_shard(path):
    """The ShardInfo of `path`; InputError (one line naming the file and the
    dataset) for a dataset that is missing, not integers, or mis-shaped."""
    with _open(path) as shard:
        shapes = {}
        for name in DATASETS:
            if name not in shard or not hasattr(shard[name], "shape"):
                raise InputError("%s: no dataset %r (expected NVIDIA's hdf5 layout: %s)"
                                 % (path, name, ", ".join(DATASETS)))
            dataset = shard[name]
            if dataset.dtype.kind not in "iu":
                raise InputError("%s: dataset %r holds %s, expected integers"
                                 % (path, name, dataset.dtype))
            shapes[name] = tuple(dataset.shape)
    return _check_shapes(path, shapes)


def _check_shapes(path, shapes):
    """ShardInfo from the datasets' shapes: every token dataset shaped as input_ids
    [examples, max_seq_length], masked_lm_positions [examples, predictions] and
    masked_lm_ids as it, the labels one per example."""
    tokens, predictions = shapes["input_ids"], shapes["masked_lm_positions"]
    if len(tokens) != 2:
        raise InputError("%s: dataset 'input_ids' has shape %s, expected (examples, "
                         "max_seq_length)" % (path, tokens))
    rows = tokens[0]
    if len(predictions) != 2 or predictions[0] != rows:
        raise InputError("%s: dataset 'masked_lm_positions' has shape %s, expected (%d, "
                         "max_predictions_per_seq): a row per row of input_ids"
                         % (path, predictions, rows))
    like = dict({name: ("input_ids", tokens) for name in TOKEN_DATASETS},
                masked_lm_ids=("masked_lm_positions", predictions))
    for name, (model, shape) in like.items():
        if shapes[name] != shape:
            raise InputError("%s: dataset %r has shape %s, expected %s as %s"
                             % (path, name, shapes[name], shape, model))
    labels = shapes[LABEL_DATASET]
    if labels not in ((rows,), (rows, 1)):
        raise InputError("%s: dataset %r has shape %s, expected (%d,): one label per row "
                         "of input_ids" % (path, LABEL_DATASET, labels, rows))
    return ShardInfo(path, rows, tokens[1], predictions[1])


def check_shard(path, max_seq_length, max_predictions_per_seq):
    """describe_shard, and InputError unless the shard fits the flags (the same
    lines as for TFRecords of another --max_seq_length / --max_predictions_per_seq)."""
    info = describe_shard(path)
    for name, flag, have, want in (
            ("input_ids", "max_seq_length", info.max_seq_length, max_seq_length),
            ("masked_lm_positions", "max_predictions_per_seq",
             info.max_predictions_per_seq, max_predictions_per_seq)):
        if have != want:
            raise InputError("%s: records have %s of length %d but --%s=%d (they were "
                             "written with --%s=%d; pass the value the data was made with)"
                             % (path, name, have, flag, want, flag, have))
    return info


def row_width(max_seq_length, max_predictions_per_seq):
    """int32 values of one packed row: three token features, two prediction ones,
    the label."""
    return 3 * max_seq_length + 2 * max_predictions_per_seq + 1


def read_packed_rows(path, start, stop, shard=None):
    """int32 [stop - start, row_width]: rows start..stop of the shard, each its
    datasets end to end (in DATASETS order); `shard`: the file already open."""
    if shard is None:
        with _open(path) as opened:
            return read_packed_rows(path, start, stop, opened)
    columns = [np.asarray(shard[name][start:stop], dtype=np.int32).reshape(stop - start, -1)
               for name in DATASETS]
    return np.concatenate(columns, axis=1)


class _OpenShards(object):
    """The shards a pipeline reads, kept open (a few at a time: the chunks come
    shard after shard), so a chunk costs its read and not a file's opening."""

    def __init__(self, keep=4):
        self._keep = keep
        self._files = collections.OrderedDict()
        self._lock = threading.Lock()

    def read(self, path, start, stop):
        with self._lock:  # h5py serialises its calls anyway
            shard = self._files.pop(path, None) or _open(path)
            self._files[path] = shard
            while len(self._files) > self._keep:
                self._files.popitem(last=False)[1].close()
            return read_packed_rows(path, start, stop, shard)


def chunk_table(infos, rows_per_chunk=ROWS_PER_CHUNK):
    """(paths, starts, stops) of the chunks of every shard, in order: the shards
    one after another, each in runs of `rows_per_chunk` rows."""
    paths, starts, stops = [], [], []
    for info in infos:
        for start in range(0, info.num_examples, rows_per_chunk):
            paths.append(info.path)
            starts.append(start)
            stops.append(min(start + rows_per_chunk, info.num_examples))
    return paths, np.array(starts, dtype=np.int64), np.array(stops, dtype=np.int64)


def packed_rows_dataset(files, max_seq_length, max_predictions_per_seq,
                        rows_per_chunk=ROWS_PER_CHUNK):
    """A tf.data.Dataset of packed rows (int32 [row_width]), every shard's rows in
    order; each shard is checked against the flags first (InputError)."""
    return packed_chunks_dataset(files, max_seq_length, max_predictions_per_seq,
                                 rows_per_chunk).unbatch()


def packed_chunks_dataset(files, max_seq_length, max_predictions_per_seq,
                          rows_per_chunk=ROWS_PER_CHUNK):
    """packed_rows_dataset's rows as they are read: int32 [rows, row_width], up to
    `rows_per_chunk` rows of one shard each."""
    import tensorflow as tf
    infos = [check_shard(path, max_seq_length, max_predictions_per_seq) for path in files]
    width = row_width(max_seq_length, max_predictions_per_seq)
    paths, starts, stops = chunk_table(infos, rows_per_chunk)
    shards = _OpenShards()

    def read(path, start, stop):
        return shards.read(path.decode("utf-8"), int(start), int(stop))

    def read_chunk(path, start, stop):
        rows = tf.numpy_function(read, [path, start, stop], tf.int32, stateful=False)
        return tf.reshape(rows, [-1, width])

    chunks = tf.data.Dataset.from_tensor_slices((paths, starts, stops))
    # The next chunks are read while the rows of this one move on.
    return chunks.map(read_chunk).prefetch(2)


def unpack_batch(rows, max_seq_length, max_predictions_per_seq):
    """The features of packed rows int32 [batch, row_width], as the TFRecord
    pipeline's parse gives them: int32 [batch, length] (next_sentence_labels
    [batch, 1]) and masked_lm_weights float32 [batch, max_predictions], 1.0 for
    the slots before the first position 0 (NVIDIA's rule)."""
    import tensorflow as tf
    sizes = [max_seq_length] * 3 + [max_predictions_per_seq] * 2 + [1]
    features = dict(zip(DATASETS, tf.split(rows, sizes, axis=-1)))
    used = tf.math.cumprod(tf.cast(tf.not_equal(features["masked_lm_positions"], 0),
                                   tf.float32), axis=-1)
    features["masked_lm_weights"] = used
    return features


def make_eval_input_fn(files, max_seq_length, max_predictions_per_seq, batch_size):
    """An Estimator input_fn over the shards' rows in order, once, in batches of
    `batch_size` (the last one partial), as input_pipeline.make_input_fn reads
    TFRecords for evaluation (a worker of several pipelines keeps its share).
    The chunks read are cut into batches whole (rebatch), never row by row."""
    def input_fn(params=None, input_context=None):
        del params
        import tensorflow as tf
        dataset = packed_chunks_dataset(files, max_seq_length, max_predictions_per_seq)
        if input_context is not None and input_context.num_input_pipelines > 1:
            dataset = dataset.unbatch().shard(input_context.num_input_pipelines,
                                              input_context.input_pipeline_id)
            dataset = dataset.batch(batch_size)
        else:
            dataset = dataset.rebatch(batch_size)
        dataset = dataset.map(
            lambda rows: unpack_batch(rows, max_seq_length, max_predictions_per_seq),
            num_parallel_calls=tf.data.AUTOTUNE)
        return dataset.prefetch(tf.data.AUTOTUNE)
    return input_fn


# -- writing -------------------------------------------------------------------------

class ShardWriter(object):
    """One hdf5 shard in NVIDIA's layout, written chunk by chunk.

    The datasets are resizable and chunked (`rows_per_chunk` rows), compressed
    with gzip as NVIDIA's are; `append` adds rows. Use as a context manager:
    the file is complete when it exits.
    """

    def __init__(self, path, max_seq_length, max_predictions_per_seq,
                 rows_per_chunk=ROWS_PER_CHUNK, compression_level=4):
        self.path = path
        self.num_examples = 0
        self._file = _h5py().File(path, "w")
        widths = dict({name: max_seq_length for name in TOKEN_DATASETS},
                      **{name: max_predictions_per_seq for name in PREDICTION_DATASETS})
        for name in DATASETS:
            shape = (0, widths[name]) if name in widths else (0,)
            self._file.create_dataset(
                name, shape=shape, maxshape=(None,) + shape[1:], dtype=WRITTEN_DTYPES[name],
                chunks=(rows_per_chunk,) + shape[1:], compression="gzip",
                compression_opts=compression_level)

    def append(self, features):
        """Adds rows: `features` maps each of DATASETS to an integer array of
        [rows, width] ([rows] or [rows, 1] for the labels)."""
        rows = len(features["input_ids"])
        if not rows:
            return
        end = self.num_examples + rows
        for name in DATASETS:
            dataset = self._file[name]
            dataset.resize(end, axis=0)
            values = np.asarray(features[name])
            dataset[self.num_examples:end] = values.reshape((rows,) + dataset.shape[1:])
        self.num_examples = end

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False


def instance_features(input_ids, lengths, lengths_a, positions, labels, is_random_next):
    """NVIDIA's datasets of masked instances (the arrays of data.py's encoder):
    input_mask 1 over the sequence, segment_ids 1 from B's first token (after
    [CLS] A [SEP]) to the end of the sequence.

    Args:
      input_ids: int [n, max_seq_length] after masking; lengths, lengths_a:
        int [n], the length of the sequence and of A; positions, labels: int
        [n, max_predictions], 0 where unused; is_random_next: bool [n].
    Returns:
      dict name -> numpy array, the dtypes NVIDIA writes.
    """
    column = np.arange(input_ids.shape[1])[np.newaxis, :]
    lengths = np.asarray(lengths)[:, np.newaxis]
    lengths_a = np.asarray(lengths_a)[:, np.newaxis]
    return {
        "input_ids": np.asarray(input_ids, dtype=np.int32),
        "input_mask": (column < lengths).astype(np.int8),
        "segment_ids": ((column >= lengths_a + 2) & (column < lengths)).astype(np.int8),
        "masked_lm_positions": np.asarray(positions, dtype=np.int32),
        "masked_lm_ids": np.asarray(labels, dtype=np.int32),
        "next_sentence_labels": np.asarray(is_random_next, dtype=np.int8),
    }
