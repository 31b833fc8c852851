"""run_custom_classifier.py end to end, as a user runs it (a process per command)."""

import csv
import glob
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit.engine import model_selection
from bert_toolkit.errors import InputError
from bert_toolkit.estimator_compat import tf_estimator
from bert_toolkit.tasks.classification import head as classifier_head
from bert_toolkit.text import tokenization

import script_runs
from tiny import REPO, free_port, write_sentiment_csv, write_tiny_model


def run_classifier(*args, check=True):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = script_runs.run(["run_custom_classifier.py"] + list(args), env=env)
    if check and result.returncode != 0:
        raise AssertionError("exit %d:\n%s" % (result.returncode, result.stderr[-3000:]))
    return result


def tiny_args(model, data_dir, output_dir, *extra):
    return ["--task_name=custom", "--data_dir=%s" % data_dir,
            "--text_a_column=sentence", "--label_column=label",
            "--vocab_file=%s" % model["vocab_file"],
            "--bert_config_file=%s" % model["bert_config_file"],
            "--init_checkpoint=%s" % model["init_checkpoint"],
            "--output_dir=%s" % output_dir, "--max_seq_length=16",
            "--learning_rate=1e-3", "--log_every_n_steps=4"] + list(extra)


@pytest.fixture(scope="module")
def tiny_task(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_task")
    model = write_tiny_model(str(root / "model"), with_classifier_labels=2)
    data_dir = root / "data"
    data_dir.mkdir()
    write_sentiment_csv(str(data_dir / "train.csv"), 64, seed=1)
    write_sentiment_csv(str(data_dir / "dev.csv"), 24, seed=2)
    write_sentiment_csv(str(data_dir / "test.csv"), 10, seed=3)
    return model, str(data_dir), root


def final_step(output_dir):
    checkpoint = tf.train.latest_checkpoint(output_dir)
    return int(tf.train.load_checkpoint(checkpoint).get_tensor("global_step"))


def test_one_and_two_cpu_replicas_train_alike_at_the_same_global_batch(tiny_task):
    model, data_dir, root = tiny_task
    results = {}
    for replicas, per_replica_batch in ((1, 8), (2, 4)):
        output_dir = str(root / ("replicas%d" % replicas))
        result = run_classifier(*tiny_args(
            model, data_dir, output_dir, "--do_train", "--do_eval",
            "--num_train_epochs=8", "--learning_rate=3e-3",
            "--train_batch_size=%d" % per_replica_batch, "--num_cpu_replicas=%d" % replicas))
        assert "= global batch 8; 64 examples x 8 epochs = 64 optimizer steps" in result.stderr
        with open(os.path.join(output_dir, "eval_results.json")) as f:
            results[replicas] = json.load(f)
        assert final_step(output_dir) == 64
    assert results[1]["num_examples"] == results[2]["num_examples"] == 24
    assert results[1]["accuracy"] > 0.8  # it learned, so the comparison means something
    # Same start (the checkpoint holds the head too), same batches, no dropout:
    # only the order of float additions differs.
    np.testing.assert_allclose(results[2]["eval_loss"], results[1]["eval_loss"], rtol=2e-3)


def test_exported_saved_model_matches_estimator_predict(tiny_task):
    model, data_dir, root = tiny_task
    output_dir = str(root / "export")
    # Length buckets in training too: the flag is wired through fine_tuning.run.
    run_classifier(*tiny_args(model, data_dir, output_dir, "--do_train", "--do_predict",
                              "--save_for_serving", "--num_train_epochs=1",
                              "--train_batch_size=8", "--bucket_by_length"))
    with open(os.path.join(output_dir, "test_predictions.tsv")) as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["id", "prediction", "probability[0]", "probability[1]"]
    estimator_probabilities = np.array([[float(p) for p in row[2:]] for row in rows[1:]])
    assert estimator_probabilities.shape == (10, 2)

    (export_dir,) = glob.glob(os.path.join(output_dir, "serving", "*"))
    assert os.path.basename(export_dir).isdigit()  # TF Serving needs an integer version
    extra = os.path.join(export_dir, "assets.extra")
    with open(os.path.join(extra, "serving_config.json")) as f:
        serving_config = json.load(f)
    assert serving_config["labels"] == ["0", "1"] and serving_config["max_seq_length"] == 16

    with open(os.path.join(data_dir, "test.csv")) as f:
        sentences = [row["sentence"] for row in csv.DictReader(f)]
    tokenizer = tokenization.FullTokenizer(os.path.join(extra, "vocab.txt"),
                                           serving_config["do_lower_case"])
    ids, mask, segments = tokenizer.encode_pairs(sentences, None, 16)
    loaded = tf.saved_model.load(export_dir)
    outputs = loaded.signatures["serving_default"](
        input_ids=tf.constant(ids), input_mask=tf.constant(mask),
        segment_ids=tf.constant(segments))
    np.testing.assert_allclose(outputs["probabilities"].numpy(), estimator_probabilities,
                               atol=2e-6)
    assert [row[1] for row in rows[1:]] == [
        serving_config["labels"][i] for i in outputs["label_ids"].numpy()]


def test_multi_label_jsonl_trains_and_reports_micro_f1(tmp_path):
    model = write_tiny_model(str(tmp_path / "model"))
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    rng = np.random.RandomState(0)
    for split, count in (("train", 48), ("dev", 16), ("test", 4)):
        with open(str(data_dir / ("%s.jsonl" % split)), "w") as f:
            for i in range(count):
                words = list(rng.choice(["good", "bad", "music", "plot", "the", "a"], 4))
                tags = sorted({"praise" if "good" in words else None,
                               "music" if "music" in words else None} - {None})
                f.write(json.dumps({"text": " ".join(words), "tags": "|".join(tags)}) + "\n")
    output_dir = str(tmp_path / "out")
    run_classifier("--task_name=custom", "--data_dir=%s" % data_dir, "--text_a_column=text",
                   "--label_column=tags", "--multi_label", "--labels=music,praise",
                   "--vocab_file=%s" % model["vocab_file"],
                   "--bert_config_file=%s" % model["bert_config_file"],
                   "--init_checkpoint=%s" % model["init_checkpoint"],
                   "--output_dir=%s" % output_dir, "--max_seq_length=12",
                   "--learning_rate=3e-3", "--num_train_epochs=6", "--train_batch_size=8",
                   "--do_train", "--do_eval", "--do_predict")
    with open(os.path.join(output_dir, "eval_results.json")) as f:
        report = json.load(f)
    assert set(report) >= {"micro_f1", "macro_f1", "f1[music]", "f1[praise]", "eval_loss"}
    assert report["micro_f1"] > 0.5
    with open(os.path.join(output_dir, "test_predictions.tsv")) as f:
        header = f.readline().rstrip("\n").split("\t")
        assert header == ["id", "prediction", "probability[music]", "probability[praise]"]
        assert len(f.readlines()) == 4


@pytest.mark.slow
def test_quickstart_pipeline_on_real_sentences_beats_chance(tmp_path, minilm_checkpoint):
    """scripts/quickstart.sh itself, on 1,000 of the real sentences for one epoch
    (25 updates: accuracy 0.795 on the 200 held out when measured); the model is
    the one converted once for all tests (tests/convert checks the conversion)."""
    env = dict(os.environ, SKIP_SETUP="1", PYTHON=sys.executable, LIMIT="1000", EPOCHS="1",
               RUN_DIR=str(tmp_path / "run"),
               MODEL_DIR=os.path.dirname(minilm_checkpoint["init_checkpoint"]))
    result = subprocess.run(["bash", "scripts/quickstart.sh"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True)
    assert result.returncode == 0, result.stdout[-3000:]
    with open(str(tmp_path / "run" / "classifier" / "eval_results.json")) as f:
        report = json.load(f)
    assert report["num_examples"] == 200
    assert report["accuracy"] > 0.65, report
    # The raw sentences got a prediction each, and the export is where it says.
    assert "predictions for raw sentences" in result.stdout
    assert glob.glob(str(tmp_path / "run" / "classifier" / "serving" / "*" / "saved_model.pb"))


def history_without_times(output_dir):
    with open(os.path.join(output_dir, "eval_history.jsonl")) as f:
        entries = [json.loads(line) for line in f]
    for entry in entries:
        for key in [k for k in entry if "time" in k or "seconds" in k]:
            del entry[key]
    return entries


@pytest.mark.long
def test_two_workers_evaluate_stop_early_and_export_like_one_process(tmp_path):
    """Two local CPU workers (TF_CONFIG) train one classifier synchronously,
    evaluating every 8 steps with early stopping: the chief evaluates while the
    other waits for its record, both stop at the same step, and the evaluation
    record, best step, best checkpoint and export equal those of one process
    with 2 CPU replicas on the same data."""
    model = write_tiny_model(str(tmp_path / "model"), with_classifier_labels=2)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_sentiment_csv(str(data_dir / "train.csv"), 64, seed=1)
    write_sentiment_csv(str(data_dir / "dev.csv"), 24, seed=2)
    command = ["run_custom_classifier.py", "--task_name=custom",
               "--data_dir=%s" % data_dir, "--text_a_column=sentence", "--label_column=label",
               "--vocab_file=%s" % model["vocab_file"],
               "--bert_config_file=%s" % model["bert_config_file"],
               "--init_checkpoint=%s" % model["init_checkpoint"],
               "--max_seq_length=16", "--train_batch_size=4", "--learning_rate=3e-3",
               "--num_train_epochs=8", "--do_train", "--do_eval", "--save_for_serving",
               "--eval_every_n_steps=8", "--early_stopping_patience=1",
               "--use_best_checkpoint"]
    two = str(tmp_path / "two")
    ports = [free_port(), free_port()]
    procs, log_paths = [], [str(tmp_path / ("worker%d.log" % index)) for index in range(2)]
    for index, log_path in enumerate(log_paths):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_CONFIG=json.dumps({
            "cluster": {"worker": ["localhost:%d" % p for p in ports]},
            "task": {"type": "worker", "index": index}}))
        procs.append(script_runs.start(command + ["--output_dir=%s" % two], env=env,
                                       stderr=log_path))
    try:
        codes = [p.wait(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    logs = []
    for log_path in log_paths:
        with open(log_path) as f:
            logs.append(f.read())
    assert codes == [0, 0], logs[0][-3000:] + logs[1][-3000:]
    assert "worker 0 of 2 (chief)" in logs[0] and "worker 1 of 2 (not chief)" in logs[1]
    # 64 examples x 8 epochs / (4 per replica x 2 workers) = 64 optimizer steps.
    assert "2 replicas x 4 examples per replica" in logs[0] and "= 64 optimizer steps" in logs[0]
    assert "examples/s" not in logs[1] and "eval at step" not in logs[1]
    # The progress line's MFU, against the peak measured at start-up.
    assert re.search(r"matmul peak [0-9.]+ TFLOP/s", logs[0])
    assert re.search(r"step 8/64 .*, MFU [0-9]+\.[0-9]%\n", logs[0])
    assert "early stopping: accuracy did not improve in 1 evaluations" in logs[0]
    assert glob.glob(os.path.join(two, "serving", "*", "saved_model.pb"))
    assert not os.path.exists(os.path.join(two, "tmp_worker_1"))
    assert not os.path.exists(os.path.join(two, model_selection.EVALUATING_FILE))

    one = str(tmp_path / "one")
    result = script_runs.run(command + ["--output_dir=%s" % one, "--num_cpu_replicas=2"],
                             env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    history = history_without_times(two)
    assert [e["step"] for e in history] == [8, 16] and history[-1]["stop"]
    assert history == history_without_times(one)
    for name in ("best_checkpoint.json", "eval_results.json"):
        with open(os.path.join(two, name)) as f, open(os.path.join(one, name)) as g:
            assert json.load(f) == json.load(g), name
    exports = [glob.glob(os.path.join(d, "serving", "*", "variables", "variables.index"))[0]
               for d in (two, one)]
    for prefixes in ([os.path.join(d, "best", "model.ckpt-8") for d in (two, one)],
                     [e[:-len(".index")] for e in exports]):
        readers = [tf.train.load_checkpoint(p) for p in prefixes]
        names = [n for n, _ in tf.train.list_variables(prefixes[1])]
        assert len(names) > 10
        for name in names:
            np.testing.assert_array_equal(readers[0].get_tensor(name),
                                          readers[1].get_tensor(name), err_msg=name)


def test_class_weights_balanced_and_explicit():
    weights = classifier_head.class_weights("balanced", ["a"] * 9 + ["b"], ["a", "b"])
    assert weights == pytest.approx([10 / 18.0, 10 / 2.0])  # n / (labels x count)
    assert classifier_head.class_weights("1,2.5", [], ["a", "b"]) == [1.0, 2.5]
    for spec in ("1", "1,2,3", "1,-2", "1,nan", "x,y"):
        with pytest.raises(InputError, match="--class_weights=" + spec.replace("+", r"\+")):
            classifier_head.class_weights(spec, [], ["a", "b"])
    with pytest.raises(InputError, match="'c' have no training example"):
        classifier_head.class_weights("balanced", ["a", "b"], ["a", "b", "c"])


def test_weighted_training_loss_is_the_mean_of_weight_times_cross_entropy():
    """The head's loss on a hand-made batch: logits from a known pooled vector."""
    weights = [0.25, 4.0]
    head_fn = classifier_head.make_head_fn(2, 0.0, pooling="mean", label_weights=weights)
    graph = tf.Graph()
    with graph.as_default():
        class Model:  # what the head reads of BertModel: the token states
            def get_sequence_output(self):
                return tf.constant([[[1.0, 0.0]], [[0.0, 1.0]], [[1.0, 1.0]]])
        features = {"input_mask": tf.ones([3, 1], tf.int32),
                    "label_ids": tf.constant([[0], [1], [1]], tf.int32)}
        head = head_fn(Model(), features, tf_estimator.ModeKeys.TRAIN)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run([v.assign(value) for v, value in zip(
                tf.compat.v1.global_variables(),
                [np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([0.0, 0.5])])])
            loss = session.run(head.loss)
    logits = np.array([[1.0, 0.5], [0.0, 2.5], [1.0, 2.5]])
    log_softmax = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    cross_entropy = -log_softmax[[0, 1, 2], [0, 1, 1]]
    expected = np.mean(np.array([0.25, 4.0, 4.0]) * cross_entropy)
    assert loss == pytest.approx(expected, rel=1e-5)
