"""Long inputs (docs/long_inputs.md): a ModernBERT-shaped classifier reads texts of
more than 512 tokens whole, one row each, through windowed attention on its local
layers and chunked attention on its global ones; --long_text=windows still cuts
them; extract_features and sequence labelling take them whole too; the progress
line says the peak memory."""

import csv
import os
import random
import shutil

import numpy as np
import pytest
import tensorflow as tf

import bert_toolkit as bt
from bert_toolkit import families
from bert_toolkit.engine import training
from bert_toolkit.model import long_attention, modeling
from bert_toolkit.text import tokenization

import script_runs
from tiny import FIXTURES, NEGATIVE_WORDS, POSITIVE_WORDS, TINY_WORDS, tiny_config

tf1 = tf.compat.v1

TOKENIZER_DIR = os.path.join(FIXTURES, "families", "modernbert")
MAX_SEQ_LENGTH = 1536
# A local window of 32: rows from 96 tokens run in blocks (long_attention.uses_blocks).
WINDOW = 32


def write_model(directory):
    """A converted ModernBERT-shaped folder: the fixture's tokenizer.json, a 3-layer,
    32-wide config with 2,048 positions (layer 0 global, 1 and 2 local), a random
    checkpoint. Returns dict(vocab_file, bert_config_file, init_checkpoint)."""
    os.makedirs(directory, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if os.path.isfile(os.path.join(TOKENIZER_DIR, name)):
            shutil.copy(os.path.join(TOKENIZER_DIR, name), directory)
    vocab_file = os.path.join(directory, "tokenizer.json")
    tokenizer = tokenization.load_tokenizer(vocab_file, None, families.get("modernbert"))
    config = tiny_config(
        vocab_size=len(tokenizer.vocab), model_family="modernbert", type_vocab_size=0,
        num_hidden_layers=3, max_position_embeddings=2048, layer_norm_eps=1e-5,
        local_attention=WINDOW, global_attn_every_n_layers=3, global_rope_theta=160000.0,
        local_rope_theta=10000.0, classifier_pooling="cls", initializer_range=0.2)
    return dict(modeling.write_initial_checkpoint(config, directory, seed=7),
                vocab_file=vocab_file)


def long_text(rng, words, keyword):
    """`words` filler words, then the label's keyword near the end (past token 512)."""
    filler = [rng.choice(TINY_WORDS[:9]) for _ in range(words)]
    return " ".join(filler + [keyword] + filler[:5])


def write_split(path, texts_and_labels):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["label", "sentence"])
        writer.writerows((label, text) for text, label in texts_and_labels)


@pytest.fixture(scope="module")
def long_task(tmp_path_factory):
    """A model folder and a data folder of texts of 500 to 900 words (about 650 to
    1,200 tokens); test.csv's two texts share all but their last words."""
    root = tmp_path_factory.mktemp("long")
    model = write_model(str(root / "model"))
    rng = random.Random(0)
    data = str(root / "data")
    os.makedirs(data)
    for name, count in (("train.csv", 6), ("dev.csv", 2)):
        rows = []
        for _ in range(count):
            label = rng.choice("01")
            words = POSITIVE_WORDS if label == "1" else NEGATIVE_WORDS
            rows.append((long_text(rng, rng.randint(500, 900), rng.choice(words)), label))
        write_split(os.path.join(data, name), rows)
    shared = long_text(random.Random(1), 800, "good")
    write_split(os.path.join(data, "test.csv"),
                [(shared, "1"), (shared.rsplit(" ", 6)[0] + " awful the movie is a dull", "0")])
    return model, data


def tokens_of(model, text):
    tokenizer = tokenization.load_tokenizer(model["vocab_file"], None,
                                            families.get("modernbert"))
    return len(tokenizer.tokenize(text))


def classifier_options(model, data, output_dir, **settings):
    fields = dict(task_name="custom", data_dir=data, output_dir=output_dir,
                  max_seq_length=MAX_SEQ_LENGTH, train_batch_size=2, predict_batch_size=2,
                  num_train_epochs=1.0, learning_rate=1e-3, text_a_column="sentence",
                  label_column="label", **model)
    fields.update(settings)
    return bt.ClassifierOptions(**fields)


def probabilities(output_dir):
    """test_results.tsv's rows: float [texts, labels]."""
    with open(os.path.join(output_dir, "test_results.tsv")) as f:
        return np.array([[float(v) for v in line.split("\t")] for line in f if line.strip()])


def test_a_long_text_is_read_whole_in_one_row(long_task, tmp_path, monkeypatch):
    """Trained and answered at 1,536 tokens: texts of 650 to 1,200 tokens are one row
    each, and two texts that differ only in their last words (past token 512) get
    different answers. The batches' length is unknown while the graph is built (each
    is cut to its longest text), so the global layer runs in chunks and the local
    ones in blocks; a second prediction from the same checkpoint with the masked
    square on every layer gives the same probabilities."""
    model, data = long_task
    with open(os.path.join(data, "test.csv")) as f:
        texts = [row["sentence"] for row in csv.DictReader(f)]
    assert all(600 < tokens_of(model, text) < MAX_SEQ_LENGTH - 2 for text in texts)
    lines = []
    monkeypatch.setattr(training.console, "info",
                        lambda message, *a: lines.append(message % a if a else message))
    chunked_dir = str(tmp_path / "chunked")
    report = bt.run(classifier_options(model, data, chunked_dir, do_train=True,
                                       do_predict=True))
    progress = [line for line in lines if line.startswith("step ")]
    assert progress and all(" peak memory " in line for line in progress), progress
    chunked = probabilities(chunked_dir)
    assert chunked.shape == (2, 2)  # one answer per text, from one row each
    # The ends were read: truncated at 512 the two rows would be equal to the last digit
    # (the first token gathers the end through one global layer: a small difference).
    assert abs(chunked[0, 0] - chunked[1, 0]) > 1e-6

    # The reference: every layer's attention as the masked square.
    monkeypatch.setattr(long_attention, "_by_length",
                        lambda query, length, short, long, *bound: short())
    square_dir = str(tmp_path / "square")
    bt.run(classifier_options(model, data, square_dir, do_predict=True,
                              init_checkpoint=report.checkpoint))
    np.testing.assert_allclose(probabilities(square_dir), chunked, atol=1e-5)


def test_a_bf16_run_of_long_texts_prints_no_framework_warnings(long_task, tmp_path):
    """run_custom_classifier.py in bf16 at 1,536 tokens, as a user runs it: the chunks'
    and blocks' loops put no line of grappler's on the console (its cost model
    warned once per loop where their scores' rank was lost, long_attention._probabilities)."""
    model, data = long_task
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    result = script_runs.run(
        ["run_custom_classifier.py", "--task_name=custom", "--data_dir=%s" % data,
         "--text_a_column=sentence", "--label_column=label",
         "--vocab_file=%s" % model["vocab_file"],
         "--bert_config_file=%s" % model["bert_config_file"],
         "--init_checkpoint=%s" % model["init_checkpoint"],
         "--output_dir=%s" % (tmp_path / "bf16"), "--max_seq_length=%d" % MAX_SEQ_LENGTH,
         "--train_batch_size=2", "--num_train_epochs=1", "--precision=bf16", "--do_train",
         "--do_predict"], env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "PredictCost" not in result.stdout + result.stderr, result.stderr[-3000:]
    assert probabilities(str(tmp_path / "bf16")).shape == (2, 2)


def test_windows_stay_available_for_long_texts(long_task, tmp_path):
    """--long_text=windows at 256 tokens: each text is several windows, answered once."""
    model, data = long_task
    output_dir = str(tmp_path / "windows")
    bt.run(classifier_options(model, data, output_dir, max_seq_length=256, do_train=True,
                              do_predict=True, long_text="windows"))
    assert probabilities(output_dir).shape == (2, 2)


def test_extract_features_reads_a_long_text_whole(long_task, tmp_path):
    """Mean-pooled vectors at 1,536 tokens: two texts equal in their first 512 tokens
    get different vectors."""
    model, data = long_task
    with open(os.path.join(data, "test.csv")) as f:
        texts = [row["sentence"] for row in csv.DictReader(f)]
    input_file = tmp_path / "texts.txt"
    input_file.write_text("\n".join(texts) + "\n")
    output_file = str(tmp_path / "vectors.npy")
    bt.run(bt.FeatureExtractionOptions(
        input_file=str(input_file), output_file=output_file, pooling="mean",
        max_seq_length=MAX_SEQ_LENGTH, batch_size=2, **model))
    vectors = np.load(output_file)
    assert vectors.shape == (2, 32)
    assert np.abs(vectors[0] - vectors[1]).max() > 1e-4


def test_sequence_labelling_tags_a_long_sentence_in_one_row(long_task, tmp_path, monkeypatch):
    """A sentence of 700 words (about 900 tokens) at 1,536 tokens is one record, not
    windows, and every word gets a tag."""
    from bert_toolkit.engine import fine_tuning
    model, _ = long_task
    rng = random.Random(3)
    data = tmp_path / "ner"
    data.mkdir()
    for name in ("train.txt", "dev.txt", "test.txt"):
        words = [rng.choice(TINY_WORDS) for _ in range(700)]
        (data / name).write_text("".join("%s %s\n" % (word, "B-X" if word == "movie" else "O")
                                         for word in words) + "\n")
    lines = []
    monkeypatch.setattr(fine_tuning.console, "info",
                        lambda message, *a: lines.append(message % a if a else message))
    report = bt.run(bt.SeqLabelingOptions(
        task_name="ner", data_dir=str(data), output_dir=str(tmp_path / "run"), do_train=True,
        do_eval=True, max_seq_length=MAX_SEQ_LENGTH, train_batch_size=1, num_train_epochs=1.0,
        **model))
    assert [line for line in lines if line.startswith("eval: ") and "records" in line][0] \
        .startswith("eval: 1 records")
    assert report.eval["num_words"] == 700
