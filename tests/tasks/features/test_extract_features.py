"""extract_features.py: Google's JSON Lines layout on a tiny model (byte for byte what
Google's formatting of BertModel's own values gives), the same bytes from two CPU
replicas as from one, sentence vectors of the real all-MiniLM-L6-v2 equal to what
sentence-transformers computes (mean pooling + L2 norm of Hugging Face's hidden
states in tests/fixtures/minilm_reference.npz), and failures that leave nothing.

The script runs as real command lines in forked children of one process that
imported TensorFlow once (tests/bad_input.py). The simpler bad inputs (missing,
empty or undecodable input file, --layers not integers or out of range, an output
under a file) are in the table of tests/test_bad_input.py.
"""

import collections
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit.model import modeling
from bert_toolkit.tasks.features import extraction as feature_extraction
from bert_toolkit.text import tokenization

import bad_input
from tiny import write_tiny_model

tf1 = tf.compat.v1
FIXTURES = os.path.join(bad_input.REPO, "tests", "fixtures")

# Singles, a pair, a blank line (Google's script gives it [CLS] [SEP]), a word
# the tiny vocab lacks ([UNK]), a line longer than max_seq_length.
LINES = ["the movie was good .", "a very dull plot ||| the acting was bad", "",
         "fine", "the zebra film", "the plot was dull and the acting bad and the music awful "
         "and the story not good and the film very dull ."]


def extract_command(model, input_file, output_file, *extra):
    return (["extract_features.py", "--input_file=%s" % input_file,
             "--output_file=%s" % output_file, "--vocab_file=%s" % model["vocab_file"],
             "--bert_config_file=%s" % model["bert_config_file"],
             "--init_checkpoint=%s" % model["init_checkpoint"]] + list(extra))


def write_lines(path, lines):
    with open(path, "wb") as f:
        f.write(b"".join((line if isinstance(line, bytes) else line.encode("utf-8")) + b"\n"
                         for line in lines))
    return path


GOOD_RUNS = {  # name -> (output file, flags)
    "google_batch_1": ("out1.jsonl", ["--max_seq_length=16", "--layers=-1,0",
                                      "--batch_size=1", "--use_tpu"]),
    "google_batch_2": ("out2.jsonl", ["--max_seq_length=16", "--layers=-1,0",
                                      "--batch_size=2"]),
    "google_batch_2_replicas_2": ("new/folder/out2r2.jsonl", [
        "--max_seq_length=16", "--layers=-1,0", "--batch_size=2", "--num_cpu_replicas=2"]),
    "mean_npy": ("mean.npy", ["--pooling=mean", "--normalize", "--batch_size=4",
                              "--max_seq_length=16"]),
    "mean_npy_replicas_2": ("mean_r2.npy", ["--pooling=mean", "--normalize", "--batch_size=4",
                                            "--max_seq_length=16", "--num_cpu_replicas=2"]),
    "cls_jsonl": ("cls.jsonl", ["--pooling=cls", "--batch_size=4", "--max_seq_length=16"]),
}


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """(model, root, runs) after running the GOOD_RUNS and the bad_cases on the tiny
    model in one forked runner. runs: name -> (bad_input.Result, the output path of
    a good run or the expected parts of a bad case's error line)."""
    root = str(tmp_path_factory.mktemp("extract"))
    model = write_tiny_model(os.path.join(root, "model"))
    lines = write_lines(os.path.join(root, "in.txt"), LINES)
    commands = {name: (extract_command(model, lines, os.path.join(root, output), *flags), [],
                       os.path.join(root, output))
                for name, (output, flags) in GOOD_RUNS.items()}
    commands.update(bad_cases(root, model))
    results = bad_input.run_commands([argv for argv, _, _ in commands.values()],
                                     [watched for _, watched, _ in commands.values()])
    runs = {name: (result, commands[name][2]) for name, result in zip(commands, results)}
    for name in GOOD_RUNS:
        assert runs[name][0].returncode == 0, runs[name][0].stderr[-3000:]
    return model, root, runs


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def bert_layers_per_line(model, lines, max_seq_length):
    """BertModel's encoder layers [layers, seq, hidden] for each line alone, fed its
    own ids trimmed to its length (as the script feeds a batch of one line)."""
    tokenizer = tokenization.FullTokenizer(model["vocab_file"], True)
    config = modeling.BertConfig.from_json_file(model["bert_config_file"])
    rows = []
    with tf.Graph().as_default():
        inputs = {name: tf1.placeholder(tf.int32, [None, None]) for name in
                  ("ids", "mask", "segments")}
        bert = modeling.BertModel(config, False, inputs["ids"], inputs["mask"],
                                  inputs["segments"])
        modeling.init_from_checkpoint(model["init_checkpoint"])
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            for line in lines:
                a, b = feature_extraction.split_line(line)
                arrays = tokenizer.encode_pairs([a], None if b is None else [b], max_seq_length)
                length = int(arrays[1].sum())
                feed = {inputs[name]: array[:, :length]
                        for name, array in zip(("ids", "mask", "segments"), arrays)}
                layers = session.run(bert.get_all_encoder_layers(), feed)
                tokens = tokenizer.convert_ids_to_tokens(arrays[0][0, :length].tolist())
                rows.append((tokens, [layer[0] for layer in layers]))
    return rows


def googles_line(unique_id, tokens, all_layers, layer_indexes):
    """The JSON line Google's extract_features.py writes, built its way: ordered
    dicts, round(float(x), 6) of each value, json.dumps' default separators."""
    features = []
    for position, token in enumerate(tokens):
        layers = []
        for layer_index in layer_indexes:
            values = all_layers[layer_index][position:position + 1].flat
            layers.append(collections.OrderedDict(
                [("index", layer_index), ("values", [round(float(x), 6) for x in values])]))
        features.append(collections.OrderedDict([("token", token), ("layers", layers)]))
    return json.dumps(collections.OrderedDict([("linex_index", unique_id),
                                               ("features", features)]))


def test_googles_layout_is_byte_for_byte_googles_formatting_of_bert_model(tiny_runs):
    model, _, runs = tiny_runs
    result, path = runs["google_batch_1"]
    assert "--use_tpu: TPU flags are ignored" in result.stderr
    written = read_text(path).splitlines()
    records = [json.loads(line) for line in written]
    assert [r["linex_index"] for r in records] == list(range(len(LINES)))
    assert all(list(r) == ["linex_index", "features"] for r in records)
    assert list(records[0]["features"][0]) == ["token", "layers"]
    assert list(records[0]["features"][0]["layers"][0]) == ["index", "values"]
    tokens = [[f["token"] for f in r["features"]] for r in records]
    assert tokens[0] == ["[CLS]", "the", "movie", "was", "good", ".", "[SEP]"]
    assert tokens[1] == ["[CLS]", "a", "very", "dull", "plot", "[SEP]", "the", "acting",
                         "was", "bad", "[SEP]"]
    assert tokens[2] == ["[CLS]", "[SEP]"]
    assert tokens[4] == ["[CLS]", "the", "[UNK]", "film", "[SEP]"]
    assert len(tokens[5]) == 16 and tokens[5][-1] == "[SEP]"
    assert [layer["index"] for layer in records[0]["features"][3]["layers"]] == [-1, 0]
    assert len(records[0]["features"][0]["layers"][0]["values"]) == 32  # hidden size

    expected = [googles_line(index, tokens, layers, [-1, 0]) for index, (tokens, layers)
                in enumerate(bert_layers_per_line(model, LINES, 16))]
    assert written == expected


def test_batches_change_no_token_and_values_only_by_float_rounding(tiny_runs):
    _, _, runs = tiny_runs
    one = [json.loads(line) for line in read_text(runs["google_batch_1"][1]).splitlines()]
    two = [json.loads(line) for line in read_text(runs["google_batch_2"][1]).splitlines()]
    assert [[f["token"] for f in r["features"]] for r in one] == \
        [[f["token"] for f in r["features"]] for r in two]
    for a, b in zip(one, two):
        for fa, fb in zip(a["features"], b["features"]):
            for la, lb in zip(fa["layers"], fb["layers"]):
                # Another batch shape may move a float32 sum by an ulp, and so a
                # value rounded to 6 decimals by 1e-6.
                np.testing.assert_allclose(la["values"], lb["values"], rtol=0, atol=1.01e-6)


@pytest.mark.parametrize("one, two", [
    # 6 lines in batches of 2: steps of (2, 2) lines, then (2, none): replica 1 idles.
    ("google_batch_2", "google_batch_2_replicas_2"),
    # In batches of 4: one step, 4 lines on replica 0 and 2 on replica 1.
    ("mean_npy", "mean_npy_replicas_2")])
def test_two_replicas_write_the_same_bytes_as_one(tiny_runs, one, two):
    _, _, runs = tiny_runs
    assert "on 2 replica(s) (/cpu:0, /cpu:1)" in runs[two][0].stderr
    assert "line 6/6 (100%)" in runs[two][0].stderr
    with open(runs[one][1], "rb") as f1, open(runs[two][1], "rb") as f2:
        assert f1.read() == f2.read()


def test_sentence_vectors_as_npy_and_json_lines(tiny_runs):
    model, _, runs = tiny_runs
    vectors = np.load(runs["mean_npy"][1])
    assert vectors.shape == (len(LINES), 32) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    layers = bert_layers_per_line(model, LINES, 16)
    mean = np.stack([layer[-1].mean(axis=0) for _, layer in layers])
    np.testing.assert_allclose(vectors, mean / np.linalg.norm(mean, axis=1, keepdims=True),
                               atol=1e-6)

    records = [json.loads(line) for line in read_text(runs["cls_jsonl"][1]).splitlines()]
    assert [list(r) for r in records] == [["linex_index", "embedding"]] * len(LINES)
    assert [r["linex_index"] for r in records] == list(range(len(LINES)))
    cls = np.array([layer[-1][0] for _, layer in layers])
    np.testing.assert_allclose([r["embedding"] for r in records], cls, atol=1.01e-6)


# -- pieces -----------------------------------------------------------------------------

def googles_rows(tokenizer, line, seq_length):
    """(tokens, type ids) of one line as Google's convert_examples_to_features makes them."""
    text_a, text_b = feature_extraction.split_line(line)
    tokens_a = tokenizer.tokenize(text_a)
    tokens_b = tokenizer.tokenize(text_b) if text_b else None
    if tokens_b:
        while len(tokens_a) + len(tokens_b) > seq_length - 3:
            (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()
    else:
        tokens_a = tokens_a[:seq_length - 2]
    tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
    types = [0] * len(tokens)
    if tokens_b:
        tokens += tokens_b + ["[SEP]"]
        types += [1] * (len(tokens_b) + 1)
    return tokens, types


def test_rows_are_googles_for_every_length_and_empty_second_texts(tmp_path):
    model = write_tiny_model(str(tmp_path / "model"))
    tokenizer = tokenization.FullTokenizer(model["vocab_file"], True)
    lines = LINES + [
        "good ||| \u200b",             # b has no tokens (a format character): one text
        "good film ||| \u0301",        # b is an accent that lower-casing strips
        "the plot ||| the film ||| good",   # the last ' ||| ' splits
        "the plot is good ||| bad",    # b truncated away at max_seq_length 4
        "  padded line with spaces  ", " ||| dull"]
    for seq_length in range(3, 14):
        feed = feature_extraction.encode_lines(
            tokenizer, [feature_extraction.split_line(line) for line in lines], seq_length)
        for row, line in enumerate(lines):
            tokens, types = googles_rows(tokenizer, line, seq_length)
            length = int(feed["input_mask"][row].sum())
            context = "line %r, max_seq_length %d" % (line, seq_length)
            assert tokenizer.convert_ids_to_tokens(
                feed["input_ids"][row, :length].tolist()) == tokens, context
            assert feed["segment_ids"][row, :length].tolist() == types, context
            assert not feed["input_ids"][row, length:].any(), context
        assert feed["input_ids"].shape[1] == feed["input_mask"].sum(axis=1).max()


def test_lines_are_read_lazily_a_batch_at_a_time(tmp_path):
    path = write_lines(str(tmp_path / "in.txt"), ["a", "b ||| c", "d", b"caf\xe9", "e"])
    batches = feature_extraction.read_batches(path, 2)
    assert next(batches) == (0, [("a", None), ("b", "c")])
    with pytest.raises(feature_extraction.InputError, match=r"in.txt:4: not valid utf-8"):
        next(batches)


def test_layers_flag():
    assert feature_extraction.parse_layers("-1,-2,0,5", 6) == [-1, -2, 0, 5]
    for text, message in (("-1,,-2", "expected comma-separated integers"),
                          ("last", "expected comma-separated integers"),
                          ("-7", "the model has 6 layers, so an index is from -6 to 5"),
                          ("6", "the model has 6 layers")):
        with pytest.raises(feature_extraction.InputError, match=message):
            feature_extraction.parse_layers(text, 6)


# -- bad input that the table of test_bad_input.py does not cover -------------------------

def bad_cases(root, model):
    """name -> (argv, watched paths, expected parts of the error line); each case
    must leave its watched paths as they were."""
    good = write_lines(os.path.join(root, "good.txt"), LINES)
    late_bad = write_lines(os.path.join(root, "late_bad.txt"),
                           LINES * 3 + [b"the caf\xe9 film"] + LINES)
    late_nul = write_lines(os.path.join(root, "late_nul.txt"), LINES * 2 + [b"\x00\x01"])
    out = os.path.join(root, "absent", "out")
    jsonl, npy = os.path.join(out, "x.jsonl"), os.path.join(out, "x.npy")
    # The cases run two at a time: the two that make folders make their own, so
    # neither sees the other's temporary file (nor the rest its folders).
    late_jsonl = os.path.join(root, "absent_late_jsonl", "out", "x.jsonl")
    late_npy = os.path.join(root, "absent_late_npy", "out", "x.npy")
    small = ["--max_seq_length=16", "--layers=-1,-2"]
    return {
        # After some batches were written: nothing left, not even the folder made.
        "undecodable_line_after_output_began": (
            extract_command(model, late_bad, late_jsonl, "--batch_size=2",
                            "--num_cpu_replicas=2", *small),
            [os.path.join(root, "absent_late_jsonl")],
            ["late_bad.txt:19: not valid utf-8"]),
        "binary_line_after_output_began_npy": (
            extract_command(model, late_nul, late_npy, "--batch_size=2", "--pooling=mean",
                            "--max_seq_length=16"),
            [os.path.join(root, "absent_late_npy")], ["late_nul.txt:13: a NUL byte"]),
        "replicas_zero": (extract_command(model, good, jsonl, "--num_cpu_replicas=0", *small),
                          [out], ["--num_cpu_replicas must be a whole number >= 1, got 0"]),
        "gpus_not_there": (extract_command(model, good, jsonl, "--use_gpu",
                                           "--num_gpu_cores=2", *small),
                           [out], ["--num_gpu_cores=2 but 0 GPU(s) are visible"]),
        "layers_with_pooling": (extract_command(model, good, npy, "--pooling=mean",
                                                "--layers=-2"),
                                [out], ["--layers=-2 applies to Google's token layout"]),
        "max_seq_length_one": (extract_command(model, good, jsonl, "--max_seq_length=1",
                                               "--layers=-1"),
                               [out], ["--max_seq_length must be >= 2 (it holds [CLS] and "
                                       "[SEP]), got 1"]),
        "output_is_a_folder": (extract_command(model, good, root, *small), [root + "/absent"],
                               ["--output_file=%s is a folder, expected a file name" % root]),
        "output_cannot_be_written": (extract_command(model, good, "/proc/x/y.jsonl", *small),
                                     [], ["--output_file=/proc/x/y.jsonl cannot be written"]),
        "input_is_a_folder": (extract_command(model, root, jsonl, *small), [out],
                              [root + ": is a directory"]),
    }


def test_bad_input_is_one_error_line_and_leaves_nothing(tiny_runs):
    _, root, runs = tiny_runs
    for name, (result, expected) in runs.items():
        if name not in GOOD_RUNS:
            bad_input.check_one_error_line(result, expected,
                                           preamble=r"extracting |line \d+")
    for folder in ("absent", "absent_late_jsonl", "absent_late_npy"):
        assert not os.path.exists(os.path.join(root, folder))


# -- the real model ---------------------------------------------------------------------

@pytest.mark.slow
def test_minilm_mean_pooled_normalized_vectors_equal_sentence_transformers(
        minilm_checkpoint, tmp_path):
    reference = np.load(os.path.join(FIXTURES, "minilm_reference.npz"))
    texts = [str(text) for text in reference["texts"]]
    lines = write_lines(str(tmp_path / "in.txt"), texts)
    outputs = [str(tmp_path / "vectors.npy"), str(tmp_path / "vectors.jsonl")]
    results = bad_input.run_commands(
        [extract_command(minilm_checkpoint, lines, outputs[0], "--pooling=mean", "--normalize",
                         "--max_seq_length=32", "--batch_size=2"),
         extract_command(minilm_checkpoint, lines, outputs[1], "--pooling=mean", "--normalize",
                         "--max_seq_length=32", "--batch_size=3", "--num_cpu_replicas=2")],
        [[], []])
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
    mask = reference["input_mask"][:, :, None].astype(np.float64)
    mean = (reference["last_hidden_state"] * mask).sum(axis=1) / mask.sum(axis=1)
    expected = mean / np.linalg.norm(mean, axis=1, keepdims=True)
    vectors = np.load(outputs[0])
    assert vectors.shape == expected.shape == (5, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-5)
    records = [json.loads(line) for line in read_text(outputs[1]).splitlines()]
    np.testing.assert_allclose([r["embedding"] for r in records], expected, rtol=0, atol=1e-5)
