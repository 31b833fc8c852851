"""NVIDIA's hdf5 shards: written by create_pretraining_data.py, read by run_pretraining.py.

The same instances as the TFRecords of the same seed; a shard in NVIDIA's own
layout (written here as its writer does: whole arrays, its dtypes, gzip) reads
with its rule for unused prediction slots; training and evaluation on hdf5 give
what they give on the TFRecords of the same examples.
"""

import json
import os
import random
import re
import shutil

import h5py
import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit.engine import hdf5_shards
from bert_toolkit.errors import InputError

import script_runs
from tiny import TINY_WORDS, write_tiny_model

SEQ, PRED = 32, 5


def run_script(script, *args, check=True):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TF_CONFIG", None)
    result = script_runs.run([script] + list(args), env=env)
    if check and result.returncode != 0:
        raise AssertionError("%s exit %d:\n%s" % (script, result.returncode,
                                                  result.stderr[-3000:]))
    return result


def assert_one_line_error(result, *fragments):
    assert result.returncode == 1, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("error: "), result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[-1], lines[-1]


def write_corpus(path, documents, seed):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(documents):
            for _ in range(rng.randint(2, 8)):
                f.write(" ".join(rng.choice(TINY_WORDS) for _ in range(rng.randint(3, 12)))
                        + "\n")
            f.write("\n")


def make_data(text, outputs, vocab_file, *extra):
    return run_script("create_pretraining_data.py", "--input_file=%s" % text,
                      "--output_file=%s" % ",".join(outputs), "--vocab_file=%s" % vocab_file,
                      "--max_seq_length=%d" % SEQ, "--max_predictions_per_seq=%d" % PRED,
                      "--dupe_factor=2", *extra)


def read_tfrecords(paths):
    spec = {name: tf.io.FixedLenFeature(
        [length], tf.float32 if name == "masked_lm_weights" else tf.int64)
        for name, length in dict(input_ids=SEQ, input_mask=SEQ, segment_ids=SEQ,
                                 masked_lm_positions=PRED, masked_lm_ids=PRED,
                                 masked_lm_weights=PRED, next_sentence_labels=1).items()}
    serialized = [r.numpy() for r in tf.data.TFRecordDataset(paths)]
    return {name: value.numpy() for name, value in tf.io.parse_example(serialized,
                                                                        spec).items()}


def read_hdf5(paths):
    """Every row of the shards as the training pipeline decodes them."""
    rows = hdf5_shards.packed_rows_dataset(paths, SEQ, PRED).batch(1 << 20)
    return {name: value.numpy() for name, value in hdf5_shards.unpack_batch(
        next(iter(rows)), SEQ, PRED).items()}


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """A tiny model, and the same instances as TFRecords and as hdf5 shards."""
    root = tmp_path_factory.mktemp("hdf5")
    model = write_tiny_model(str(root / "model"), max_position_embeddings=64)
    write_corpus(str(root / "train.txt"), 80, seed=0)
    write_corpus(str(root / "test.txt"), 20, seed=1)
    files = {}
    for split in ("train", "test"):
        text = str(root / ("%s.txt" % split))
        files[split, "tfrecord"] = [str(root / ("%s.tfrecord" % split))]
        files[split, "hdf5"] = [str(root / "shards" / ("tiny_%s_%s_0.hdf5" % (
            "training" if split == "train" else "test", SEQ)))]
        make_data(text, files[split, "tfrecord"], model["vocab_file"])
        make_data(text, files[split, "hdf5"], model["vocab_file"])
    return model, files, root


def test_hdf5_shards_hold_the_instances_of_the_tfrecords_in_nvidias_dtypes(shards):
    model, files, root = shards
    records = read_tfrecords(files["train", "tfrecord"])
    rows = read_hdf5(files["train", "hdf5"])
    assert set(rows) == set(records)
    for name in records:
        np.testing.assert_array_equal(rows[name], records[name], err_msg=name)
    with h5py.File(files["train", "hdf5"][0], "r") as shard:
        assert {name: (shard[name].dtype, shard[name].compression) for name in shard} == {
            name: (np.dtype(dtype), "gzip")
            for name, dtype in hdf5_shards.WRITTEN_DTYPES.items()}
        assert shard["next_sentence_labels"].shape == (len(records["input_ids"]),)


def test_several_output_shards_share_the_rows_round_robin(shards):
    model, files, root = shards
    outputs = [str(root / "rr" / ("part_%d.h5" % i)) for i in range(3)]
    make_data(str(root / "train.txt"), outputs, model["vocab_file"], "--num_workers=2")
    one = read_hdf5(files["train", "hdf5"])
    for index, path in enumerate(outputs):
        part = read_hdf5([path])
        np.testing.assert_array_equal(part["input_ids"], one["input_ids"][index::3])


def nvidia_style_shard(path, rows, seq=SEQ, pred=PRED):
    """A shard written as NVIDIA's create_pretraining_data.py writes one: whole
    arrays, its dtypes, gzip, labels [n]; masked_lm_positions of row i use i % 4
    slots then 0."""
    rng = np.random.default_rng(rows)
    lengths = rng.integers(6, seq, rows)
    column = np.arange(seq)[np.newaxis, :]
    input_ids = np.where(column < lengths[:, None], rng.integers(5, 20, (rows, seq)), 0)
    used = np.arange(pred)[np.newaxis, :] < (np.arange(rows) % 4)[:, None]
    positions = np.where(used, np.arange(1, pred + 1)[np.newaxis, :], 0)
    features = {"input_ids": input_ids, "input_mask": column < lengths[:, None],
                "segment_ids": (column > 3) & (column < lengths[:, None]),
                "masked_lm_positions": positions,
                "masked_lm_ids": np.where(used, 7, 0),
                "next_sentence_labels": np.arange(rows) % 2}
    with h5py.File(path, "w") as f:
        for name, dtype in hdf5_shards.WRITTEN_DTYPES.items():
            f.create_dataset(name, data=np.asarray(features[name]).astype(dtype),
                             dtype=dtype, compression="gzip")
    return features


def test_a_shard_in_nvidias_own_layout_reads_with_its_rule_for_unused_slots(tmp_path):
    path = str(tmp_path / "wiki_test_0.hdf5")
    features = nvidia_style_shard(path, 2500)  # more than one chunk of rows
    rows = hdf5_shards.packed_rows_dataset([path], SEQ, PRED, rows_per_chunk=1000).batch(4000)
    got = {k: v.numpy() for k, v in hdf5_shards.unpack_batch(next(iter(rows)), SEQ,
                                                               PRED).items()}
    for name in hdf5_shards.DATASETS:
        np.testing.assert_array_equal(got[name].reshape(2500, -1),
                                      np.asarray(features[name]).astype(np.int32)
                                      .reshape(2500, -1), err_msg=name)
    np.testing.assert_array_equal(got["masked_lm_weights"].sum(axis=1), np.arange(2500) % 4)
    assert got["next_sentence_labels"].shape == (2500, 1)
    # Only the slots before the first 0 count, as NVIDIA's reader takes them.
    assert list(hdf5_shards.unpack_batch(tf.constant([[0] * (3 * SEQ) + [3, 0, 5, 0, 0]
                                                      + [1] * PRED + [0]]), SEQ, PRED)
                ["masked_lm_weights"].numpy()[0]) == [1, 0, 0, 0, 0]


def test_a_shard_is_told_by_its_content_too(tmp_path):
    path = str(tmp_path / "part-00000")
    nvidia_style_shard(path, 10)
    assert hdf5_shards.is_hdf5(path)
    other = tmp_path / "records"
    other.write_bytes(b"\x00" * 64)
    assert not hdf5_shards.is_hdf5(str(other))


@pytest.mark.parametrize("damage, fragment", [
    (lambda f: f.__delitem__("masked_lm_ids"),
     "no dataset 'masked_lm_ids' (expected NVIDIA's hdf5 layout: input_ids, input_mask, "
     "segment_ids, masked_lm_positions, masked_lm_ids, next_sentence_labels)"),
    (lambda f: (f.__delitem__("segment_ids"),
                f.create_dataset("segment_ids", data=np.zeros([10, SEQ - 1], "i1"))),
     "dataset 'segment_ids' has shape (10, 31), expected (10, 32) as input_ids"),
    (lambda f: (f.__delitem__("next_sentence_labels"),
                f.create_dataset("next_sentence_labels", data=np.zeros([9], "i1"))),
     "dataset 'next_sentence_labels' has shape (9,), expected (10,)"),
    (lambda f: (f.__delitem__("masked_lm_ids"),
                f.create_dataset("masked_lm_ids", data=np.zeros([10, PRED], "f4"))),
     "dataset 'masked_lm_ids' holds float32, expected integers"),
])
def test_a_missing_or_misshaped_dataset_is_one_line_naming_both(tmp_path, damage, fragment):
    path = str(tmp_path / "bad_training_0.hdf5")
    nvidia_style_shard(path, 10)
    with h5py.File(path, "a") as f:
        damage(f)
    with pytest.raises(InputError) as raised:
        hdf5_shards.describe_shard(path)
    assert str(raised.value) == "%s: %s" % (path, fragment) or fragment in str(raised.value)
    assert str(raised.value).startswith(path + ": ")


def test_run_pretraining_refuses_a_bad_shard_and_a_mix_in_one_line(shards, tmp_path):
    model, files, _ = shards
    bad = str(tmp_path / "bad_training_0.hdf5")
    nvidia_style_shard(bad, 10)
    with h5py.File(bad, "a") as f:
        del f["input_mask"]
    base = ["--bert_config_file=%s" % model["bert_config_file"], "--do_train",
            "--output_dir=%s" % (tmp_path / "out"), "--max_seq_length=%d" % SEQ,
            "--max_predictions_per_seq=%d" % PRED, "--num_train_steps=2"]
    result = run_script("run_pretraining.py", "--input_file=%s" % bad, *base, check=False)
    assert_one_line_error(result, bad, "no dataset 'input_mask'")
    result = run_script("run_pretraining.py", "--input_file=%s,%s" % (
        files["train", "hdf5"][0], files["train", "tfrecord"][0]), *base, check=False)
    assert_one_line_error(result, "--input_file mixes hdf5 shards")
    result = run_script("run_pretraining.py", "--input_file=%s" % files["train", "hdf5"][0],
                        *(base[:-3] + ["--max_seq_length=64", "--max_predictions_per_seq=5"]),
                        check=False)
    assert_one_line_error(result, "records have input_ids of length 32 but "
                                  "--max_seq_length=64")
    assert not os.path.exists(str(tmp_path / "out"))


def test_training_and_evaluation_on_hdf5_equal_those_on_the_tfrecords(shards):
    """The same examples in the same order: the same weights after training, and
    the same evaluation of them (every metric within 1e-4); the shards are
    streamed in chunks, the TFRecords parsed in batches."""
    model, files, root = shards
    reports, checkpoints = {}, {}
    for kind in ("tfrecord", "hdf5"):
        out = str(root / ("run_" + kind))
        shutil.rmtree(out, ignore_errors=True)
        run_script("run_pretraining.py", "--input_file=%s" % files["train", kind][0],
                   "--eval_input_file=%s" % files["test", kind][0],
                   "--bert_config_file=%s" % model["bert_config_file"],
                   "--init_checkpoint=%s" % model["init_checkpoint"],
                   "--max_seq_length=%d" % SEQ, "--max_predictions_per_seq=%d" % PRED,
                   "--do_train", "--do_eval", "--train_batch_size=8", "--eval_batch_size=16",
                   "--num_train_steps=12", "--num_warmup_steps=2", "--learning_rate=1e-3",
                   "--shuffle_buffer_size=100", "--max_eval_steps=1000",
                   "--output_dir=%s" % out)
        with open(os.path.join(out, "eval_results.json")) as f:
            reports[kind] = json.load(f)
        checkpoints[kind] = tf.train.load_checkpoint(tf.train.latest_checkpoint(out))
    assert reports["hdf5"]["num_sequences"] == reports["tfrecord"]["num_sequences"] > 16
    for key, value in reports["tfrecord"].items():
        assert reports["hdf5"][key] == pytest.approx(value, abs=1e-4), key
    for name, _ in tf.train.list_variables(tf.train.latest_checkpoint(str(root /
                                                                          "run_hdf5"))):
        np.testing.assert_allclose(checkpoints["hdf5"].get_tensor(name),
                                   checkpoints["tfrecord"].get_tensor(name), atol=1e-6,
                                   err_msg=name)


def test_the_input_bench_times_both_formats(shards):
    """bench/pretraining_input_bench.py end to end on the tiny corpus (the numbers
    mean nothing here: that it runs and prints its rows)."""
    model, _, root = shards
    result = script_runs.run([os.path.join("bench", "pretraining_input_bench.py"),
                              "--text_file=%s" % (root / "train.txt"),
                              "--vocab_file=%s" % model["vocab_file"], "--max_seq_length=32",
                              "--max_predictions_per_seq=5", "--dupe_factor=2",
                              "--batch=8", "--batches=20", "--warmup_batches=2",
                              "--rounds=1"], env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    for kind in ("tfrecord", "hdf5"):
        assert re.search(r"^%s +training +\d+ examples/s  evaluation +\d+ examples/s" % kind,
                         result.stdout, re.M), result.stdout
    assert "ratio hdf5/tfrecord: training" in result.stdout
