"""The whole fine-tuning flow in-process: RunOptions + a Task -> fine_tuning.run.

No flags and no subprocess: train -> evaluate -> predict -> export on a tiny
random model, then the exported SavedModel answers like Estimator.predict, and
a second run on the same output_dir resumes (nothing left to train) and
refuses another label set.
"""

import csv
import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit.engine import (
    checkpoints,
    export_layout,
    fine_tuning,
    model_files,
    run_folder,
    tfrecord_codec,
)
from bert_toolkit.engine.options import FineTuningOptions
from bert_toolkit.errors import InputError
from bert_toolkit.tasks.classification import data as classifier_data
from bert_toolkit.tasks.classification import features as classifier_features
from bert_toolkit.tasks.classification import task as classifier

from tiny import write_sentiment_csv, write_tiny_model


def _examples(path, split):
    processor = classifier_data.get_processor(
        "custom", text_a_column="sentence", label_column="label")
    return {"train": processor.get_train_examples, "eval": processor.get_dev_examples,
            "predict": processor.get_test_examples}[split](os.path.dirname(path))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("flow")
    model = write_tiny_model(str(root / "model"))
    data_dir = root / "data"
    data_dir.mkdir()
    write_sentiment_csv(str(data_dir / "train.csv"), 64, seed=1)
    write_sentiment_csv(str(data_dir / "dev.csv"), 24, seed=2)
    write_sentiment_csv(str(data_dir / "test.csv"), 10, seed=3)
    examples = {split: _examples(str(data_dir / "train.csv"), split)
                for split in fine_tuning.SPLITS}
    task = classifier.ClassifierTask(examples, ["0", "1"], pooling="mean")
    options = FineTuningOptions(
        output_dir=str(root / "out"), max_seq_length=16, do_train=True, do_eval=True,
        do_predict=True, save_for_serving=True, train_batch_size=8, eval_batch_size=5,
        predict_batch_size=4, learning_rate=1e-3, num_train_epochs=4.0,
        log_every_n_steps=4, **model)
    fine_tuning.run(task, options)
    return options, task, examples


def test_run_trains_evaluates_predicts_and_exports(trained):
    options, _, examples = trained
    out = options.output_dir
    assert checkpoints.latest_checkpoint(out).endswith("model.ckpt-32")  # 64 x 4 / 8
    # No graph.pbtxt (training.CheckpointSaverWithoutTextGraph); the checkpoints
    # saved during training keep their .meta, TensorBoard its graph.
    assert not os.path.exists(os.path.join(out, "graph.pbtxt"))
    assert os.path.exists(os.path.join(out, "model.ckpt-32.meta"))
    with open(glob.glob(os.path.join(out, "events.out.tfevents.*"))[0], "rb") as f:
        assert any(tf.compat.v1.Event.FromString(record).graph_def
                   for record in tfrecord_codec.read_records(f))
    with open(os.path.join(out, "eval_results.json")) as f:
        report = json.load(f)
    assert report["global_step"] == 32 and report["num_examples"] == 24
    assert report["accuracy"] > 0.7
    with open(os.path.join(out, "test_predictions.tsv")) as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["id", "prediction", "probability[0]", "probability[1]"]
    assert len(rows) == 1 + len(examples["predict"])
    assert run_folder.read_saved_labels(out) == ["0", "1"]
    _, version_dir = export_layout.resolve_version_dir(os.path.join(out, "serving"))
    with open(os.path.join(version_dir, "assets.extra", "serving_config.json")) as f:
        config = json.load(f)
    assert config["labels"] == ["0", "1"] and config["pooling"] == "mean"
    assert config["max_seq_length"] == 16 and config["task"] == "classification"

    # The export, loaded as any TensorFlow 2 user would, answers as the Estimator's
    # predictions did.
    exported = tf.saved_model.load(version_dir)
    signature = exported.signatures["serving_default"]
    encoded = list(classifier_features.feature_rows(examples["predict"], _tokenizer(options), 16,
                                           ["0", "1"], False))
    inputs = {name: tf.constant(np.stack([row[name] for row in encoded]))
              for name in export_layout.SERVING_INPUTS}
    served = signature(**{k: tf.cast(v, tf.int32) for k, v in inputs.items()})
    predicted = np.array([[float(p) for p in row[2:]] for row in rows[1:]])
    np.testing.assert_allclose(served["probabilities"].numpy(), predicted, atol=1e-5)

    # The raw-text signature tokenizes in the graph and answers the same.
    assert config["text_signature"] == "text" and config["text_inputs"] == ["text_a"]
    text = exported.signatures["text"]
    from_text = text(text_a=tf.constant([e.text_a for e in examples["predict"]]))
    np.testing.assert_allclose(from_text["probabilities"].numpy(), predicted, atol=1e-5)
    assert from_text["labels"].numpy().tolist() == [[b"0", b"1"]] * len(examples["predict"])


def _tokenizer(options):
    return model_files.load_model_inputs(options).tokenizer


def test_rerun_has_nothing_to_train_and_other_labels_are_refused(trained):
    options, task, examples = trained
    fine_tuning.run(task, options.replace(do_eval=False, do_predict=False,
                                          save_for_serving=False))
    assert checkpoints.latest_checkpoint(options.output_dir).endswith("model.ckpt-32")
    other = classifier.ClassifierTask(examples, ["1", "0"])
    with pytest.raises(InputError, match="trained with labels"):
        fine_tuning.run(other, options)


def test_options_are_validated_once():
    with pytest.raises(InputError, match="--output_dir is required"):
        FineTuningOptions(bert_config_file="c.json")
    with pytest.raises(InputError, match="--learning_rate must be a finite number"):
        FineTuningOptions(output_dir="o", bert_config_file="c", learning_rate=float("nan"))
    with pytest.raises(InputError, match="--num_train_epochs must be a finite number"):
        FineTuningOptions(output_dir="o", bert_config_file="c",
                               num_train_epochs=float("inf"))
    with pytest.raises(InputError, match="--train_batch_size must be a whole number >= 1"):
        FineTuningOptions(output_dir="o", bert_config_file="c", train_batch_size=0)


def test_an_epoch_of_sequence_labelling_counts_windows_not_sentences(tmp_path):
    """Long sentences become several windows; the step plan must count those
    records, or "1 epoch" would train on a fraction of the windows."""
    from bert_toolkit.engine import training_plan
    from bert_toolkit.tasks.seq_labeling import readers as seq_labeling_readers
    from bert_toolkit.tasks.seq_labeling import task as seq_labeling
    from bert_toolkit.text import tokenization
    model = write_tiny_model(str(tmp_path / "model"))
    words = ["the", "movie", "was", "good", "and", "the", "music", "great"] * 4  # 32 words
    labels = ["O", "O", "O", "B-POS", "O", "O", "O", "B-POS"] * 4
    sentences = [seq_labeling_readers.Sentence(
        "train-%d" % i, tuple(words), tuple(labels), tuple((w, t) for w, t in zip(words, labels)),
        tuple(range(1, 33))) for i in range(6)]
    task = seq_labeling.SeqLabelingTask({"train": sentences}, ["O", "B-POS"], "ner",
                                        window_stride=4)
    options = FineTuningOptions(output_dir=str(tmp_path / "out"), max_seq_length=16,
                                     do_train=True, train_batch_size=4, num_train_epochs=1.0,
                                     **model)
    tokenizer = tokenization.FullTokenizer(model["vocab_file"], True)
    _, rows, count = fine_tuning.convert_examples(task, options, tokenizer)["train"]
    windows_per_sentence = len(rows) // len(sentences)
    assert windows_per_sentence > 1 and count == len(rows)
    plan = training_plan.plan_training(count, 1.0, 4, 1, 1, 0.1)
    assert plan.num_train_steps == int(len(rows) / 4)  # 1 epoch of windows


@pytest.mark.long
def test_early_stopping_keeps_and_exports_the_best_checkpoint(tmp_path):
    """Dev labels are the training labels inverted: the better the model learns,
    the worse its dev loss. Evaluating every 4 steps with patience 2, training
    stops at the third evaluation; the best is the first, and the final
    evaluation and the export are that checkpoint's."""
    from bert_toolkit.engine import model_selection
    model = write_tiny_model(str(tmp_path / "model"))
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    write_sentiment_csv(str(data_dir / "train.csv"), 64, seed=1)
    with open(data_dir / "train.csv") as f:
        rows = list(csv.reader(f))
    with open(data_dir / "dev.csv", "w", newline="") as f:
        csv.writer(f).writerows([rows[0]] + [["1" if label == "0" else "0", text]
                                             for label, text in rows[1:25]])
    examples = {split: _examples(str(data_dir / "train.csv"), split)
                for split in ("train", "eval")}
    task = classifier.ClassifierTask(examples, ["0", "1"])
    out = str(tmp_path / "out")
    options = FineTuningOptions(
        output_dir=out, max_seq_length=16, do_train=True, do_eval=True,
        save_for_serving=True, train_batch_size=8, eval_batch_size=8, learning_rate=3e-3,
        num_train_epochs=8.0, eval_every_n_steps=4, best_metric="eval_loss",
        early_stopping_patience=2, log_every_n_steps=4, **model)
    fine_tuning.run(task, options)

    history = model_selection.read_history(out)
    assert [e["step"] for e in history] == [4, 8, 12]
    assert [e["evaluations_without_improvement"] for e in history] == [0, 1, 2]
    assert [e["stop"] for e in history] == [False, False, True]
    assert history[0]["report"]["eval_loss"] < history[2]["report"]["eval_loss"]
    assert checkpoints.latest_checkpoint(out).endswith("model.ckpt-12")  # not the 64 planned
    # The evaluations ran inside one training session: each step was saved once
    # (a session per segment saves its starting step again: 0, 4, 4, 8, 8, 12).
    assert _checkpoint_saves(out) == [0, 4, 8, 12]
    best, record = model_selection.best_checkpoint(out)
    assert record["step"] == 4 and best.endswith(os.path.join("best", "model.ckpt-4"))
    with open(os.path.join(out, "eval_results.json")) as f:
        final = json.load(f)
    assert final["global_step"] == 4
    assert final["eval_loss"] == pytest.approx(record["value"], rel=1e-6)
    _, version_dir = export_layout.resolve_version_dir(os.path.join(out, "serving"))
    export_variables = tf.train.load_checkpoint(
        os.path.join(version_dir, "variables", "variables"))
    np.testing.assert_array_equal(export_variables.get_tensor("output_bias"),
                                  tf.train.load_checkpoint(best).get_tensor("output_bias"))
    assert os.path.getsize(os.path.join(out, model_selection.PLOT_FILE)) > 1000

    # The same command again: early stopping is remembered, nothing trains.
    fine_tuning.run(task, options)
    assert len(model_selection.read_history(out)) == 3
    assert checkpoints.latest_checkpoint(out).endswith("model.ckpt-12")


def _checkpoint_saves(output_dir):
    """The steps of the checkpoint saves output_dir's TensorBoard events record
    (the saver logs each save, including the one as a training session starts)."""
    from bert_toolkit.engine import tfrecord_codec
    steps = []
    for path in sorted(tf.io.gfile.glob(os.path.join(output_dir, "events.out.tfevents.*"))):
        with open(path, "rb") as f:
            events = [tf.compat.v1.Event.FromString(r) for r in tfrecord_codec.read_records(f)]
        steps += [e.step for e in events if e.HasField("session_log")
                  and e.session_log.status == tf.compat.v1.SessionLog.CHECKPOINT]
    return steps


def test_evaluation_steps_and_the_best_so_far():
    from bert_toolkit.engine import model_selection
    assert model_selection.evaluation_steps(10, 4) == [4, 8, 10]
    assert model_selection.evaluation_steps(8, 4) == [4, 8]
    assert model_selection.evaluation_steps(3, 4) == [3]
    history = []
    for step, accuracy in ((2, 0.6), (4, 0.7), (6, 0.65), (8, 0.7), (10, 0.8)):
        history.append(model_selection.next_entry(history, step, {"accuracy": accuracy},
                                                  "accuracy", patience=3))
    assert [e["best_step"] for e in history] == [2, 4, 4, 4, 10]
    assert [e["evaluations_without_improvement"] for e in history] == [0, 0, 1, 2, 0]
    assert not any(e["stop"] for e in history)
    losses = []
    for step, loss in ((1, 0.5), (2, 0.6), (3, 0.55)):
        losses.append(model_selection.next_entry(losses, step, {"eval_loss": loss},
                                                 "eval_loss", patience=2))
    assert [e["stop"] for e in losses] == [False, False, True]
    with pytest.raises(InputError, match="--best_metric=f1: the evaluation reports accuracy"):
        model_selection.next_entry([], 1, {"accuracy": 0.5}, "f1", patience=0)


def test_long_texts_as_windows_train_evaluate_and_serve_per_document(tmp_path):
    """Documents of 20-40 words at max_seq_length 16: training counts windows,
    evaluation and prediction count documents, and serving_client's windows and
    mean aggregation over the export give the Estimator's per-document answer."""
    import random

    from bert_toolkit.serving import client as serving_client
    from bert_toolkit.serving import server

    import tiny
    model = write_tiny_model(str(tmp_path / "model"))
    rng = random.Random(3)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    for name, count in (("train.csv", 40), ("dev.csv", 12), ("test.csv", 6)):
        with open(data_dir / name, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["label", "sentence"])
            for _ in range(count):
                label = rng.choice(["0", "1"])
                words = [rng.choice(tiny.TINY_WORDS[:9]) for _ in range(rng.randint(20, 40))]
                words[rng.randrange(len(words))] = rng.choice(
                    tiny.POSITIVE_WORDS if label == "1" else tiny.NEGATIVE_WORDS)
                writer.writerow([label, " ".join(words)])
    examples = {split: _examples(str(data_dir / "train.csv"), split)
                for split in fine_tuning.SPLITS}
    task = classifier.ClassifierTask(examples, ["0", "1"], long_text="windows", doc_stride=7)
    options = FineTuningOptions(
        output_dir=str(tmp_path / "out"), max_seq_length=16, do_train=True, do_eval=True,
        do_predict=True, save_for_serving=True, train_batch_size=8, eval_batch_size=8,
        predict_batch_size=8, learning_rate=3e-3, num_train_epochs=2.0, **model)
    tokenizer = _tokenizer(options)
    _, rows, num_windows = fine_tuning.convert_examples(task, options, tokenizer)["train"]
    assert num_windows == len(rows) > 2 * len(examples["train"])
    fine_tuning.run(task, options)
    out = options.output_dir
    steps = int(num_windows / 8 * 2)  # Google's arithmetic, over windows
    assert checkpoints.latest_checkpoint(out).endswith("model.ckpt-%d" % steps)
    with open(os.path.join(out, "eval_results.json")) as f:
        assert json.load(f)["num_examples"] == 12  # documents, not windows
    assert len(np.loadtxt(os.path.join(out, "test_results.tsv"), ndmin=2)) == 6
    with open(os.path.join(out, "test_predictions.tsv")) as f:
        estimator_rows = [line.rstrip("\n").split("\t") for line in f][1:]

    _, version_dir = export_layout.resolve_version_dir(os.path.join(out, "serving"))
    with open(os.path.join(version_dir, "assets.extra", "serving_config.json")) as f:
        config = json.load(f)
    assert (config["long_text"], config["doc_stride"]) == ("windows", 7)
    pairs = [(e.text_a, None) for e in examples["predict"]]
    features, layout = serving_client.encode_classification(tokenizer, pairs, config)
    assert len(layout[0]) > len(pairs)
    outputs = server.load_servable(version_dir).run(features)
    served = serving_client.classification_text_results(
        {"probabilities": outputs["probabilities"].tolist()}, config, layout)
    for (record, fields), row in zip(served, estimator_rows):
        assert fields[0] == row[1]
        np.testing.assert_allclose([float(p) for p in fields[1:]],
                                   [float(p) for p in row[2:]], atol=2e-6)


def test_sequence_labelling_evaluates_during_training_by_entity_f1(tmp_path):
    """Token labelling's report comes from written predictions (entity scores):
    evaluation during training records entity_f1 and keeps a best checkpoint."""
    from bert_toolkit.engine import model_selection
    from bert_toolkit.tasks.seq_labeling import readers as seq_labeling_readers
    from bert_toolkit.tasks.seq_labeling import task as seq_labeling
    model = write_tiny_model(str(tmp_path / "model"))
    words = ("the", "movie", "was", "good", "and", "the", "music", "great")
    labels = ("O", "O", "O", "B-POS", "O", "O", "O", "B-POS")
    sentences = [seq_labeling_readers.Sentence("s-%d" % i, words, labels,
                                            tuple(zip(words, labels)), tuple(range(1, 9)))
                 for i in range(16)]
    task = seq_labeling.SeqLabelingTask({"train": sentences, "eval": sentences[:4]},
                                        ["O", "B-POS"], "ner", window_stride=8)
    options = FineTuningOptions(
        output_dir=str(tmp_path / "out"), max_seq_length=16, do_train=True, do_eval=True,
        train_batch_size=4, eval_batch_size=4, learning_rate=3e-3, num_train_epochs=2.0,
        eval_every_epoch=True, plot=False, **model)
    fine_tuning.run(task, options)
    history = model_selection.read_history(options.output_dir)
    assert [e["step"] for e in history] == [4, 8]
    assert history[0]["metric"] == "entity_f1" and "entity_f1" in history[1]["report"]
    assert model_selection.best_checkpoint(options.output_dir)[1]["metric"] == "entity_f1"
