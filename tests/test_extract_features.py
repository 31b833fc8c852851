"""extract_features.py: Google's JSON Lines layout on a tiny model (values equal to
BertModel's own), and sentence vectors of the real all-MiniLM-L6-v2 equal to what
sentence-transformers computes (mean pooling + L2 norm of Hugging Face's hidden
states in tests/fixtures/minilm_reference.npz)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import modeling
import tokenization
from tiny import write_tiny_model

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "tests", "fixtures")


def run_extract(model, input_file, output_file, *extra):
    return subprocess.run(
        [sys.executable, "extract_features.py", "--input_file=%s" % input_file,
         "--output_file=%s" % output_file, "--vocab_file=%s" % model["vocab_file"],
         "--bert_config_file=%s" % model["bert_config_file"],
         "--init_checkpoint=%s" % model["init_checkpoint"]] + list(extra),
        cwd=REPO, capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


def test_googles_layout_and_bert_models_values(tmp_path):
    model = write_tiny_model(str(tmp_path / "model"))
    lines = ["the movie was good .", "a very dull plot ||| the acting was bad", "", "fine"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    result = run_extract(model, tmp_path / "in.txt", out, "--layers=-1,0",
                         "--max_seq_length=16", "--batch_size=3", "--use_tpu")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "TPU flags are ignored" in result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["linex_index"] for r in records] == [0, 1, 2, 3]
    assert list(records[1]) == ["linex_index", "features"]
    tokens = [[f["token"] for f in r["features"]] for r in records]
    assert tokens[0] == ["[CLS]", "the", "movie", "was", "good", ".", "[SEP]"]
    assert tokens[1] == ["[CLS]", "a", "very", "dull", "plot", "[SEP]", "the", "acting",
                         "was", "bad", "[SEP]"]
    assert tokens[2] == ["[CLS]", "[SEP]"]
    assert [layer["index"] for layer in records[1]["features"][0]["layers"]] == [-1, 0]

    tokenizer = tokenization.FullTokenizer(model["vocab_file"], True)
    ids, mask, segments = tokenizer.encode_pairs(["a very dull plot"], ["the acting was bad"],
                                                 16)
    config = modeling.BertConfig.from_json_file(model["bert_config_file"])
    with tf.Graph().as_default():
        bert = modeling.BertModel(config, False, tf.constant(ids), tf.constant(mask),
                                  tf.constant(segments))
        modeling.init_from_checkpoint(model["init_checkpoint"])
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            layers = session.run(bert.get_all_encoder_layers())
    for position, feature in enumerate(records[1]["features"]):
        for layer in feature["layers"]:
            np.testing.assert_allclose(layer["values"], layers[layer["index"]][0, position],
                                       atol=1e-6)


@pytest.mark.slow
def test_minilm_mean_pooled_normalized_vectors_equal_sentence_transformers(
        minilm_checkpoint, tmp_path):
    reference = np.load(os.path.join(FIXTURES, "minilm_reference.npz"))
    texts = [str(text) for text in reference["texts"]]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    out = tmp_path / "vectors.npy"
    result = run_extract(minilm_checkpoint, tmp_path / "in.txt", out, "--pooling=mean",
                         "--normalize", "--max_seq_length=32", "--batch_size=2")
    assert result.returncode == 0, result.stderr[-3000:]
    vectors = np.load(out)
    mask = reference["input_mask"][:, :, None].astype(np.float64)
    mean = (reference["last_hidden_state"] * mask).sum(axis=1) / mask.sum(axis=1)
    expected = mean / np.linalg.norm(mean, axis=1, keepdims=True)
    assert vectors.shape == expected.shape and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
