"""The speed-ups of docs/performance.md change speed only, never results or layout.

- batches cut to their longest sequence give the same model outputs as
  full-length padding, keep every example, and are never cut for tasks with
  other per-token features, except token labelling's, which are cut with the
  text and keep every labelled word;
- length bucketing keeps every example of a pool;
- the graph keeps Google's variables, names and shapes;
- with oneDNN on (the toolkit's default) the layer norm does not trip TensorFlow
  2.15.1's grappler into aborting the process.
"""

import json
import os
import subprocess
import sys
import types

import numpy as np
import tensorflow as tf

from bert_toolkit.engine import fine_tuning, input_pipeline
from bert_toolkit.estimator_compat import tf_estimator
from bert_toolkit.model import modeling
from bert_toolkit.tasks.seq_labeling import features as seq_labeling_features
from bert_toolkit.tasks.seq_labeling import readers as seq_labeling_readers
from bert_toolkit.tasks.seq_labeling import task as seq_labeling
from bert_toolkit.text import tokenization

from tiny import REPO, TINY_WORDS, tiny_config, write_tiny_model

tf1 = tf.compat.v1


def write_records(path, lengths, max_len=32, extra=None):
    rows = []
    for i, length in enumerate(lengths):
        ids = np.zeros(max_len, np.int64)
        ids[:length] = 5 + (np.arange(length) + i) % 50
        row = {"input_ids": ids, "input_mask": (ids > 0).astype(np.int64),
               "segment_ids": np.zeros(max_len, np.int64), "label_ids": [i]}
        if extra:
            row.update(extra(i))
        rows.append(row)
    input_pipeline.write_tfrecord(path, rows)


def spec(max_len=32, **extra_lengths):
    lengths = {"input_ids": max_len, "input_mask": max_len, "segment_ids": max_len,
               "label_ids": 1}
    lengths.update(extra_lengths)
    return input_pipeline.fixed_length_spec(lengths)


def batches_of(input_fn, count=None):
    dataset = input_fn()
    if count is not None:
        dataset = dataset.take(count)
    return [{k: v.numpy() for k, v in batch.items()} for batch in dataset]


def test_trimmable_token_features_refuses_per_token_labels():
    assert set(input_pipeline.trimmable_token_features(spec())) == {
        "input_ids", "input_mask", "segment_ids"}
    assert input_pipeline.trimmable_token_features(spec(label_ids=32)) == ()


def test_token_labelling_batches_cut_the_labels_with_the_text(tmp_path):
    """label_ids, label_mask and word_ids are cut with input_ids in training and
    evaluation batches, and every labelled word of the records is still there."""
    model = write_tiny_model(str(tmp_path / "model"))
    tokenizer = tokenization.FullTokenizer(model["vocab_file"], do_lower_case=True)
    rng = np.random.RandomState(0)
    sentences = []
    for index in range(24):
        words = tuple(rng.choice(TINY_WORDS, rng.randint(2, 40)))
        labels = tuple("B-X" if word in ("good", "great") else "O" for word in words)
        sentences.append(seq_labeling_readers.Sentence(
            "s%d" % index, words, labels, tuple((w, t) for w, t in zip(words, labels)),
            tuple(range(len(words)))))
    label_list = ["O", "B-X"]
    rows = list(seq_labeling_features.feature_rows(sentences, tokenizer, 64, 32, label_list))
    path = str(tmp_path / "train.tf_record")
    input_pipeline.write_tfrecord(path, rows)
    task = seq_labeling.SeqLabelingTask({}, label_list, "ner", 32)
    options = types.SimpleNamespace(max_seq_length=64, train_batch_size=4, eval_batch_size=4,
                                    seed=3, bucket_by_length=False)
    prepared = types.SimpleNamespace(records={"train": (path, len(rows)),
                                              "eval": (path, len(rows))})
    per_token = ("input_ids", "input_mask", "segment_ids", "label_ids", "label_mask",
                 "word_ids")
    epoch = len(rows) // 4
    for batches in (batches_of(fine_tuning.train_input_fn(task, options, prepared), epoch),
                    batches_of(fine_tuning.eval_input_fn(task, options, prepared, 1))):
        widths = [b["input_ids"].shape[1] for b in batches]
        assert min(widths) < 64
        for batch in batches:
            assert {batch[name].shape[1] for name in per_token} == {batch["input_ids"].shape[1]}
    # Evaluation reads every record once, in order: the same labelled words.
    labelled = [np.flatnonzero(row["label_mask"]).tolist() for row in rows]
    evaluated = [np.flatnonzero(mask).tolist() for b in batches for mask in b["label_mask"]]
    assert evaluated[:len(rows)] == labelled
    assert sum(map(len, labelled)) == sum(len(w) for w in (s.words for s in sentences))


def test_trimmed_batches_keep_every_token_and_round_up_to_16(tmp_path):
    path = str(tmp_path / "r.tf_record")
    lengths = [3, 17, 5, 9, 2, 30, 4, 6]
    write_records(path, lengths)
    names = input_pipeline.trimmable_token_features(spec())
    batches = batches_of(input_pipeline.make_input_fn(path, spec(), 4, False,
                                                      trim_to_longest_of=names))
    assert [b["input_ids"].shape[1] for b in batches] == [32, 32]
    batches = batches_of(input_pipeline.make_input_fn(path, spec(), 2, False,
                                                      trim_to_longest_of=names))
    assert [b["input_ids"].shape[1] for b in batches] == [32, 16, 32, 16]
    full = batches_of(input_pipeline.make_input_fn(path, spec(), 2, False))
    for cut, whole in zip(batches, full):
        width = cut["input_ids"].shape[1]
        np.testing.assert_array_equal(cut["input_ids"], whole["input_ids"][:, :width])
        assert whole["input_mask"][:, width:].sum() == 0
        np.testing.assert_array_equal(cut["label_ids"], whole["label_ids"])
    evaluated = batches_of(input_pipeline.make_eval_input_fn(
        path, spec(), 3, len(lengths), trim_to_longest_of=names))
    assert sum(b["is_real_example"].sum() for b in evaluated) == len(lengths)
    assert [b["input_ids"].shape[1] for b in evaluated] == [32, 32, 16]


def test_bucketing_keeps_every_example_of_a_pool(tmp_path):
    path = str(tmp_path / "r.tf_record")
    rng = np.random.RandomState(0)
    lengths = list(rng.randint(1, 33, size=64))
    write_records(path, lengths)
    names = input_pipeline.trimmable_token_features(spec())
    # Unshuffled records: every pool of 16 batches of 4 holds each example once.
    batches = batches_of(input_pipeline.make_input_fn(
        path, spec(), 4, True, seed=1, trim_to_longest_of=names, bucket_by_length=True,
        bucket_pool_batches=16, shuffle_buffer=1), count=160)
    counts = np.bincount([int(label) for b in batches for label in b["label_ids"].reshape(-1)],
                         minlength=64)
    # Batches move at most a pool or two through the final shuffle (buffer of two pools).
    assert counts.min() >= 8 and counts.max() <= 12 and counts.sum() == 640
    for batch in batches:
        real = batch["input_mask"].sum(axis=1)
        assert batch["input_ids"].shape[1] == min(32, -(-real.max() // 16) * 16)
    # Sorted pools: far less padding than random batches of 4 would carry.
    padded = sum(b["input_ids"].size for b in batches)
    assert padded < 0.8 * 640 * 32


def build_outputs(config, ids, mask, **model_kwargs):
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(7)
        model = modeling.BertModel(config, False, tf.constant(ids), tf.constant(mask),
                                   **model_kwargs)
        names = {v.name: v.shape.as_list() for v in tf1.global_variables()}
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            pooled, sequence = session.run([model.get_pooled_output(),
                                            model.get_sequence_output()])
    return pooled, sequence, names


def test_trimmed_inputs_give_the_same_outputs():
    config = tiny_config()
    ids = np.zeros([3, 32], np.int32)
    for row, length in enumerate([5, 9, 12]):
        ids[row, :length] = 5 + np.arange(length) % 40
    mask = (ids > 0).astype(np.int32)
    pooled_full, sequence_full, _ = build_outputs(config, ids, mask)
    pooled_cut, sequence_cut, _ = build_outputs(config, ids[:, :16], mask[:, :16])
    np.testing.assert_allclose(pooled_cut, pooled_full, atol=1e-5)
    np.testing.assert_allclose(sequence_cut, sequence_full[:, :16], atol=1e-5)


def test_graph_keeps_google_variable_layout():
    config = tiny_config()
    ids = np.ones([2, 8], np.int32)
    _, _, names = build_outputs(config, ids, ids)
    expected = {name + ":0": shape
                for name, shape in modeling.bert_variable_shapes(config).items()}
    assert names == expected


ONEDNN_LAYER_NORM_PROBE = r"""
import json

import numpy as np
import tensorflow as tf

from bert_toolkit.model import modeling

tf1 = tf.compat.v1
graph = tf.Graph()
with graph.as_default():
    fed = tf1.placeholder(tf.float32, [None, 8])
    outputs = [modeling.layer_norm(fed, "straight"), modeling.layer_norm(tf.tanh(fed), "tanh")]
    init = tf1.global_variables_initializer()
x = np.random.RandomState(0).normal(size=(3, 8))
with tf1.Session(graph=graph) as session:
    session.run(init)
    values = session.run(outputs, {fed: x})
print(json.dumps([v.tolist() for v in values]))
"""


def test_layer_norm_of_a_fed_tensor_runs_with_onednn_on():
    """With oneDNN on (the toolkit's default), TensorFlow 2.15.1's grappler aborted
    the whole process on the left-to-right layer-norm formula applied straight to a
    fed tensor; ours runs and still normalises."""
    repo = REPO
    result = subprocess.run(
        [sys.executable, "-c", ONEDNN_LAYER_NORM_PROBE], cwd=repo,
        env=dict(os.environ, TF_ENABLE_ONEDNN_OPTS="1", TF_CPP_MIN_LOG_LEVEL="3",
                 PYTHONPATH=repo),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    straight, tanh = [np.array(v) for v in json.loads(result.stdout.strip().splitlines()[-1])]
    x = np.random.RandomState(0).normal(size=(3, 8))
    for out, source in ((straight, x), (tanh, np.tanh(x))):
        expected = (source - source.mean(-1, keepdims=True)) / np.sqrt(
            source.var(-1, keepdims=True) + 1e-12)
        np.testing.assert_allclose(out, expected, atol=1e-5)


def test_prediction_cuts_padding_for_per_example_heads_with_the_same_outputs(tmp_path):
    """The classifier's model_fn in PREDICT mode (Estimator.predict and the export)
    with skip_padding: requests padded to 64 run at their longest text
    rounded up to 8, the dense layers on the real tokens only, and give the
    probabilities of the uncut graph."""
    from bert_toolkit.engine import model_fn_builder, training_plan
    from bert_toolkit.tasks.classification import head as classifier_head
    plan = training_plan.plan_steps(10, 1, 2, 1, 1)
    ids = np.zeros([3, 64], np.int32)
    for row, length in enumerate([5, 9, 20]):
        ids[row, :length] = 5 + np.arange(length) % 40
    feed = {"input_ids": ids, "input_mask": (ids > 0).astype(np.int32),
            "segment_ids": np.zeros_like(ids)}
    checkpoint = str(tmp_path / "model.ckpt")
    probabilities, tokens_run, dense_rows = {}, {}, {}
    for cut in (False, True):
        model_fn = model_fn_builder.build_model_fn(
            tiny_config(), classifier_head.make_head_fn(2, 0.0), plan,
            skip_padding=cut)
        with tf.Graph().as_default() as graph:
            spec = model_fn({name: tf.constant(value) for name, value in feed.items()}, None,
                            tf_estimator.ModeKeys.PREDICT)
            # The word ids BERT embeds, flattened: batch x the length it runs at.
            embedded_ids = graph.get_tensor_by_name("bert/embeddings/Reshape:0")
            feed_forward = graph.get_tensor_by_name(
                "bert/encoder/layer_0/intermediate/MatMul:0")
            saver = tf1.train.Saver()
            with tf1.Session() as session:
                if cut:
                    saver.restore(session, checkpoint)
                else:
                    session.run(tf1.global_variables_initializer())
                    saver.save(session, checkpoint)
                probabilities[cut], flat, hidden = session.run(
                    [spec.predictions["probabilities"], embedded_ids, feed_forward])
                tokens_run[cut], dense_rows[cut] = flat.size, len(hidden)
    np.testing.assert_allclose(probabilities[True], probabilities[False], atol=1e-5)
    assert tokens_run == {False: 3 * 64, True: 3 * 24}  # 20 rounded up to 8
    assert dense_rows == {False: 3 * 64, True: 5 + 9 + 20}


def test_replicas_build_the_graph_from_the_code_as_written():
    """MirroredStrategy calls each replica's model_fn through AutoGraph, which would
    run every function the graph is built from through its converter (the head's
    frame would be AutoGraph's, not this file's); model_fn_builder turns that off,
    so the head (and BERT) run as written."""
    from bert_toolkit.engine import model_fn_builder, training_plan
    from bert_toolkit.tasks.classification import head as classifier_head
    head_fn = classifier_head.make_head_fn(2, 0.0)
    files_run = []

    def recording_head_fn(model, features, mode):
        files_run.append(sys._getframe(0).f_code.co_filename)
        return head_fn(model, features, mode)

    model_fn = model_fn_builder.build_model_fn(
        tiny_config(), recording_head_fn, training_plan.plan_steps(10, 1, 2, 1, 1))
    with tf.Graph().as_default():
        ids = tf.ones([2, 8], tf.int32)
        strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
        with strategy.scope():
            strategy.extended.call_for_each_replica(model_fn, args=(
                {"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids}, None,
                tf_estimator.ModeKeys.PREDICT))
    assert files_run == [__file__]
