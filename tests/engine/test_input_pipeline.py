"""The TFRecord feature cache and the input_fns."""

import os

import numpy as np
import tensorflow as tf

from bert_toolkit.engine import input_pipeline

tf1 = tf.compat.v1


def test_tfrecord_cache_reuses_until_the_key_changes(tmp_path):
    calls = []

    def rows():
        calls.append(1)
        for i in range(5):
            yield {"input_ids": [i, i + 1, 0], "label_ids": i % 2}

    key = {"examples": "abc", "max_seq_length": 3}
    path, count = input_pipeline.cached_tfrecord(str(tmp_path), "train", key, rows)
    again, count_again = input_pipeline.cached_tfrecord(str(tmp_path), "train", key, rows)
    assert (again, count_again, count, len(calls)) == (path, 5, 5, 1)
    other, _ = input_pipeline.cached_tfrecord(str(tmp_path), "train",
                                              dict(key, max_seq_length=4), rows)
    assert other != path and len(calls) == 2
    assert not [n for n in os.listdir(str(tmp_path)) if n.endswith(".partial")]

    spec = input_pipeline.fixed_length_spec({"input_ids": 3, "label_ids": 1})
    dataset = input_pipeline.make_input_fn(path, spec, batch_size=2, is_training=False)()
    batches = list(dataset.as_numpy_iterator())
    assert [b["input_ids"].shape for b in batches] == [(2, 3), (2, 3), (1, 3)]
    assert batches[0]["input_ids"].dtype == np.int32
    np.testing.assert_array_equal(batches[2]["input_ids"], [[4, 5, 0]])


def test_eval_input_is_padded_to_full_batches_on_every_replica(tmp_path):
    rows = ({"input_ids": [i, i], "label_ids": 1} for i in range(1, 6))
    path, count = input_pipeline.cached_tfrecord(str(tmp_path), "eval", {"k": 2},
                                                 lambda: rows)
    spec = input_pipeline.fixed_length_spec({"input_ids": 2, "label_ids": 1})
    batches = list(input_pipeline.make_eval_input_fn(
        path, spec, batch_size=2, num_records=count, num_replicas=2)().as_numpy_iterator())
    # 5 records + 3 padding = 2 steps of 2 replicas x 2 examples.
    assert [len(b["is_real_example"]) for b in batches] == [2, 2, 2, 2]
    weights = np.concatenate([b["is_real_example"] for b in batches])
    np.testing.assert_array_equal(weights, [1, 1, 1, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(batches[-1]["input_ids"], [[0, 0], [0, 0]])


def test_input_fingerprint(tmp_path):
    def write(directory, name, text):
        path = os.path.join(str(directory), name)
        with open(path, "w") as f:
            f.write(text)
        return path

    first = write(tmp_path, "a.tsv", "one\n")
    second = write(tmp_path, "b.tsv", "two\n")
    missing = os.path.join(str(tmp_path), "c.tsv")
    base = input_pipeline.input_fingerprint([first, second, missing])
    assert base == input_pipeline.input_fingerprint([first, second, missing])
    assert base != input_pipeline.input_fingerprint([second, first, missing])
    assert input_pipeline.input_fingerprint(first) == input_pipeline.input_fingerprint([first])

    stat = os.stat(first)
    write(tmp_path, "a.tsv", "won\n")  # same size; mtime put back below
    os.utime(first, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    changed = input_pipeline.input_fingerprint([first, second, missing])
    assert changed != base
    os.utime(first, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10 ** 9))
    assert input_pipeline.input_fingerprint([first, second, missing]) != changed
    write(tmp_path, "c.tsv", "")
    assert input_pipeline.input_fingerprint([first, second, missing]) not in (base, changed)


def test_each_worker_keeps_the_batches_one_process_gives_its_replicas():
    """Worker w of P with L replicas each keeps per-replica batches i with
    (i // L) % P == w; together, in step order, they are the whole stream."""
    from bert_toolkit.engine.input_pipeline import this_workers_batches
    for workers, local_replicas in ((2, 1), (2, 2), (3, 2)):
        kept = []
        for worker in range(workers):
            context = tf.distribute.InputContext(
                num_input_pipelines=workers, input_pipeline_id=worker,
                num_replicas_in_sync=workers * local_replicas)
            stream = tf.data.Dataset.range(100).repeat()
            kept.append([int(x) for x in this_workers_batches(stream, context).take(6)])
        for worker, batches in enumerate(kept):
            assert all((i // local_replicas) % workers == worker for i in batches), kept
        steps = [sum((kept[w][s * local_replicas:(s + 1) * local_replicas]
                      for w in range(workers)), []) for s in range(6 // local_replicas)]
        assert sum(steps, []) == list(range(6 // local_replicas * workers * local_replicas))
