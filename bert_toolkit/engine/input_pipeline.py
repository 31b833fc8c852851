"""Features on disk as TFRecord, converted once, and the input_fn that reads them.

Converting text to features is paid once: `cached_tfrecord` names the file
after a fingerprint of everything the features depend on (input files, vocab,
lower-casing, sequence length, label list, ...), so a re-run with the same
inputs reuses it and any change makes a new one. Files are written to a
temporary name and renamed when complete, so an interrupted conversion never
leaves a file that looks finished.

The input_fn parses whole batches at once (`tf.io.parse_example` after
`batch`), which is several times faster than parsing record by record, and
prefetches so the devices never wait on it.
"""

import hashlib
import json
import os

import numpy as np
import tensorflow as tf

from bert_toolkit import fileio

# Files up to this size are hashed by content in `input_fingerprint`.
_HASH_CONTENT_LIMIT = 1 << 20


def input_fingerprint(paths):
    """A hex digest that changes when any of the files change.

    Covers each file's absolute path, size and modification time (ns), plus a
    SHA-1 of the contents for files up to 1 MiB, where a rewrite within one
    mtime tick is likeliest to go unseen. A missing or unreadable file is part
    of the fingerprint too, so its appearance also changes it. Meant as part
    of the key of cached TFRecords.
    """
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    digest = hashlib.sha1()
    for path in paths:
        path = os.path.abspath(os.fsdecode(path))
        digest.update(path.encode("utf-8", "surrogateescape") + b"\0")
        try:
            stat = os.stat(path)
        except OSError as e:
            digest.update(("absent:%s\n" % e.errno).encode("ascii"))
            continue
        digest.update(("%d:%d\n" % (stat.st_size, stat.st_mtime_ns)).encode("ascii"))
        if stat.st_size <= _HASH_CONTENT_LIMIT:
            try:
                with open(path, "rb") as handle:
                    digest.update(hashlib.sha1(handle.read()).digest())
            except OSError as e:
                digest.update(("unreadable:%s\n" % e.errno).encode("ascii"))
    return digest.hexdigest()


def fingerprint(key_parts):
    """A short stable hash of a JSON-serialisable description."""
    text = json.dumps(key_parts, sort_keys=True, default=str)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def _feature(values):
    values = np.asarray(values).reshape(-1)
    if values.dtype.kind == "f":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values.tolist()))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values.tolist()))


def write_tfrecord(path, feature_rows):
    """Writes dicts of name -> int or float array as tf.train.Examples, atomically.

    Returns the number of records written.
    """
    count = 0
    with fileio.atomic_path(path) as temporary:
        with tf.io.TFRecordWriter(temporary) as writer:
            for row in feature_rows:
                example = tf.train.Example(features=tf.train.Features(
                    feature={name: _feature(values) for name, values in row.items()}))
                writer.write(example.SerializeToString())
                count += 1
    return count


def find_cached_tfrecord(cache_dir, split, key_parts):
    """(path, num_records) of the finished TFRecord for `key_parts`, or (path, None).

    Only looks: nothing is written, so callers can convert (and find the
    mistakes in) their inputs before they write anything.
    """
    key = fingerprint(key_parts)
    path = os.path.join(cache_dir, "%s-%s.tf_record" % (split, key))
    meta_path = path + ".json"
    if tf.io.gfile.exists(path) and tf.io.gfile.exists(meta_path):
        try:
            with tf.io.gfile.GFile(meta_path) as f:
                return path, int(json.load(f)["num_records"])
        except (ValueError, KeyError, TypeError):
            pass  # a damaged description: convert again
    return path, None


def cached_tfrecord(cache_dir, split, key_parts, make_rows):
    """Returns (path, num_records) of the TFRecord for `key_parts`, writing it if new.

    Args:
      split: "train", "eval", "predict": part of the file name.
      key_parts: everything the records depend on (JSON-serialisable).
      make_rows: called only on a cache miss; returns an iterable of feature dicts.
    """
    path, count = find_cached_tfrecord(cache_dir, split, key_parts)
    if count is not None:
        return path, count
    meta_path = path + ".json"
    tf.io.gfile.makedirs(cache_dir)
    count = write_tfrecord(path, make_rows())
    fileio.write_text_atomically(meta_path, json.dumps(
        {"num_records": count, "key": key_parts}, indent=1, default=str))
    return path, count


def fixed_length_spec(lengths, float_names=()):
    """name -> FixedLenFeature for int64 (or float32 for `float_names`) features."""
    return {name: tf.io.FixedLenFeature([length], tf.float32 if name in float_names
                                        else tf.int64)
            for name, length in lengths.items()}


# The token features a batch can be cut down to its longest sequence.
TOKEN_FEATURES = ("input_ids", "input_mask", "segment_ids")


def trimmable_token_features(feature_spec, token_features=TOKEN_FEATURES):
    """The names `trim_to_longest` may cut, or () when cutting would be unsafe.

    Safe when every feature of the sequence length (the length of
    `input_ids`) is one of `token_features`: a task with other per-token
    features (e.g. per-token labels) keeps full-length batches.
    """
    if "input_ids" not in feature_spec or "input_mask" not in feature_spec:
        return ()
    length = list(feature_spec["input_ids"].shape)
    per_token = [name for name, spec in feature_spec.items() if list(spec.shape) == length]
    return tuple(per_token) if set(per_token) <= set(token_features) else ()


def trim_to_longest(batch, names, length_multiple=16):
    """Cuts the features `names` [batch, max_len] to the batch's longest sequence.

    The length (from `input_mask`) is rounded up to `length_multiple` (at most
    max_len), so the model sees a handful of shapes and its matmuls stay
    aligned. Padding is masked out in BERT, so the model's outputs for every
    example are the same as with full-length padding; only the work shrinks.
    """
    max_len = tf.shape(batch["input_mask"])[1]
    longest = tf.reduce_max(tf.reduce_sum(tf.cast(batch["input_mask"], tf.int32), axis=1))
    length = tf.minimum((longest + length_multiple - 1) // length_multiple * length_multiple,
                        max_len)
    length = tf.maximum(length, 1)
    return {name: t[:, :length] if name in names else t for name, t in batch.items()}


def _sorted_by_length(pool):
    """The examples of a parsed pool [n, ...] ordered by their number of tokens."""
    order = tf.argsort(tf.reduce_sum(tf.cast(pool["input_mask"], tf.int32), axis=1),
                       stable=True)
    return {name: tf.gather(t, order) for name, t in pool.items()}


def make_input_fn(path, feature_spec, batch_size, is_training, drop_remainder=None,
                  shuffle_buffer=100000, seed=None, skip_batches=0, keep_int64=(),
                  trim_to_longest_of=None, length_multiple=16, bucket_by_length=False,
                  bucket_pool_batches=64):
    """An Estimator input_fn over a TFRecord file of fixed-length features.

    Args:
      feature_spec: name -> tf.io.FixedLenFeature.
      batch_size: examples per replica (the Estimator calls this per replica).
      is_training: shuffle and repeat forever; batches are always full.
      skip_batches: start this many batches into the stream (which, shuffled
        with a `seed` under a graph seed, is the same in every run): a resumed
        training run passes the batches it already trained on. On a cluster
        the stream is every worker's (see this_workers_batches), so this counts
        the batches of every replica.
      keep_int64: names of int64 features left int64 (e.g. ids that are
        carried through prediction and must not wrap at 2**31).
      trim_to_longest_of: feature names (see `trimmable_token_features`) cut
        in every batch to its longest sequence, rounded up to
        `length_multiple`; None or () keeps full-length batches. The model
        then gets a dynamic sequence dimension.
      bucket_by_length: training only, with trim_to_longest_of: the shuffled
        stream is taken in pools of `bucket_pool_batches` batches, each pool
        sorted by length and cut into batches, and the batches shuffled
        again, so a batch holds examples of similar length and carries little
        padding.
    Returns:
      input_fn() -> tf.data.Dataset of dicts name -> [batch, length] tensors
      (int64 features come out as int32, the dtype the model takes, except
      those in `keep_int64`).

    One function on purpose: the two pipelines (bucketed or not) share the
    parse, shard and shuffle steps and differ only in their order; most of
    its length is this docstring.
    """
    if drop_remainder is None:
        drop_remainder = is_training
    trim_names = tuple(trim_to_longest_of or ())
    bucket = bool(bucket_by_length and is_training and trim_names)

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, feature_spec)
        return {name: tf.cast(t, tf.int32)
                if t.dtype == tf.int64 and name not in keep_int64 else t
                for name, t in parsed.items()}

    def input_fn(params=None, input_context=None):
        del params
        dataset = tf.data.TFRecordDataset(path)
        workers = input_context is not None and input_context.num_input_pipelines > 1
        if workers and not is_training:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        if is_training:
            dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
            dataset = dataset.repeat()
        if bucket:
            # Whole pools are parsed and sorted at once; the batches are then
            # shuffled among their neighbours (seeded: a resumed run sees the
            # same stream).
            dataset = dataset.batch(batch_size * bucket_pool_batches, drop_remainder=True)
            dataset = dataset.map(lambda pool: _sorted_by_length(parse(pool)),
                                  num_parallel_calls=tf.data.AUTOTUNE)
            dataset = dataset.unbatch().batch(batch_size, drop_remainder=True)
            dataset = dataset.map(lambda b: trim_to_longest(b, trim_names, length_multiple),
                                  num_parallel_calls=tf.data.AUTOTUNE)
            dataset = dataset.shuffle(2 * bucket_pool_batches, seed=seed,
                                      reshuffle_each_iteration=True)
            if skip_batches:
                dataset = dataset.skip(skip_batches)
            if workers:
                dataset = this_workers_batches(dataset, input_context)
            return dataset.prefetch(tf.data.AUTOTUNE)
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
        if skip_batches:
            dataset = dataset.skip(skip_batches)  # before parsing: cheap
        if workers and is_training:
            dataset = this_workers_batches(dataset, input_context)
        dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        if trim_names:
            dataset = dataset.map(lambda b: trim_to_longest(b, trim_names, length_multiple),
                                  num_parallel_calls=tf.data.AUTOTUNE)
        return dataset.prefetch(tf.data.AUTOTUNE)

    return input_fn


def this_workers_batches(batches, input_context):
    """The per-replica batches of this worker's replicas, out of the whole stream.

    Every worker of a cluster reads the same records in the same (seeded) order;
    worker w of P, with L replicas, keeps batches i with (i // L) % P == w: the
    batches one process with P x L replicas gives those replicas (it hands
    consecutive batches to consecutive replicas). So a cluster trains on the
    same global batches, in the same order, as one process with as many
    replicas, and ends with the same weights.
    """
    workers = input_context.num_input_pipelines
    local_replicas = max(1, input_context.num_replicas_in_sync // workers)
    first = input_context.input_pipeline_id * local_replicas
    # Shards, not enumerate + filter: under the multi-worker strategy's
    # Estimator a filtered infinite stream never yields (measured, TF 2.15).
    if local_replicas == 1:
        return batches.shard(workers, first)
    return tf.data.Dataset.range(local_replicas).interleave(
        lambda replica: batches.shard(workers * local_replicas, first + replica),
        cycle_length=local_replicas, block_length=1)


def make_eval_input_fn(path, feature_spec, batch_size, num_records, num_replicas=1,
                       trim_to_longest_of=None, length_multiple=16):
    """Like make_input_fn for evaluation, padded so every replica gets full batches.

    Under a distribution strategy a last step with data for only some
    replicas may be dropped, losing examples from the metrics. So the records
    are followed by all-zero examples up to a multiple of
    batch_size * num_replicas, and every example carries `is_real_example`
    (float32 [batch]: 1 for a record, 0 for padding) to weight the metrics.
    `trim_to_longest_of`: as in make_input_fn (the order is kept).
    """
    trim_names = tuple(trim_to_longest_of or ())
    num_padding = -num_records % (batch_size * num_replicas)

    def parse_one(serialized):
        parsed = tf.io.parse_single_example(serialized, feature_spec)
        parsed = {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t
                  for name, t in parsed.items()}
        parsed["is_real_example"] = tf.constant(1.0)
        return parsed

    def padding_example():
        example = {name: tf.zeros(spec.shape, tf.int32 if spec.dtype == tf.int64
                                  else spec.dtype)
                   for name, spec in feature_spec.items()}
        example["is_real_example"] = tf.constant(0.0)
        return example

    def input_fn(params=None, input_context=None):
        del params, input_context
        dataset = tf.data.TFRecordDataset(path).map(parse_one,
                                                    num_parallel_calls=tf.data.AUTOTUNE)
        if num_padding:
            dataset = dataset.concatenate(
                tf.data.Dataset.from_tensors(padding_example()).repeat(num_padding))
        dataset = dataset.batch(batch_size)
        if trim_names:
            dataset = dataset.map(lambda b: trim_to_longest(b, trim_names, length_multiple),
                                  num_parallel_calls=tf.data.AUTOTUNE)
        return dataset.prefetch(tf.data.AUTOTUNE)

    return input_fn
