import json
import math

import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit.errors import InputError
from bert_toolkit.model import modeling

from tiny import tiny_config

tf1 = tf.compat.v1


def google_variable_shapes(config):
    """The variable layout of Google's bert_model.ckpt, written out independently."""
    h, i = config.hidden_size, config.intermediate_size
    shapes = {
        "bert/embeddings/word_embeddings": [config.vocab_size, h],
        "bert/embeddings/token_type_embeddings": [config.type_vocab_size, h],
        "bert/embeddings/position_embeddings": [config.max_position_embeddings, h],
        "bert/embeddings/LayerNorm/gamma": [h],
        "bert/embeddings/LayerNorm/beta": [h],
        "bert/pooler/dense/kernel": [h, h],
        "bert/pooler/dense/bias": [h],
    }
    for n in range(config.num_hidden_layers):
        prefix = "bert/encoder/layer_%d/" % n
        for part in ("query", "key", "value"):
            shapes[prefix + "attention/self/%s/kernel" % part] = [h, h]
            shapes[prefix + "attention/self/%s/bias" % part] = [h]
        shapes[prefix + "attention/output/dense/kernel"] = [h, h]
        shapes[prefix + "attention/output/dense/bias"] = [h]
        shapes[prefix + "intermediate/dense/kernel"] = [h, i]
        shapes[prefix + "intermediate/dense/bias"] = [i]
        shapes[prefix + "output/dense/kernel"] = [i, h]
        shapes[prefix + "output/dense/bias"] = [h]
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            shapes[prefix + norm + "/gamma"] = [h]
            shapes[prefix + norm + "/beta"] = [h]
    return shapes


def build(config, ids, mask=None, types=None, compute_dtype=tf.float32, is_training=False,
          skip_padding=False):
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(1)
        ids_t = tf.constant(ids, tf.int32)
        mask_t = None if mask is None else tf.constant(mask, tf.int32)
        types_t = None if types is None else tf.constant(types, tf.int32)
        model = modeling.BertModel(config, is_training, ids_t, mask_t, types_t,
                                   compute_dtype=compute_dtype, skip_padding=skip_padding)
    return graph, model


def run(graph, fetches, checkpoint=None):
    with tf1.Session(graph=graph) as sess:
        with graph.as_default():
            if checkpoint:
                modeling.init_from_checkpoint(checkpoint)
            sess.run(tf1.global_variables_initializer())
        return sess.run(fetches)


def random_ids(batch, seq, vocab=64, seed=0):
    return np.random.RandomState(seed).randint(1, vocab, size=(batch, seq))


def test_variables_have_google_names_shapes_and_float32():
    config = tiny_config(num_hidden_layers=3)
    graph, _ = build(config, random_ids(2, 8), compute_dtype=tf.bfloat16)
    with graph.as_default():
        found = {v.name[:-2]: (v.shape.as_list(), v.dtype) for v in tf1.global_variables()}
    expected = google_variable_shapes(config)
    assert {k: s for k, (s, _) in found.items()} == expected
    assert dict(modeling.bert_variable_shapes(config)) == expected
    assert {d for _, d in found.values()} == {tf.float32}


def test_outputs_are_float32_with_documented_shapes():
    config = tiny_config()
    graph, model = build(config, random_ids(3, 7), compute_dtype=tf.float16)
    assert model.get_sequence_output().dtype == tf.float32
    assert model.get_sequence_output().shape.as_list() == [3, 7, 32]
    assert model.get_pooled_output().shape.as_list() == [3, 32]
    assert len(model.get_all_encoder_layers()) == config.num_hidden_layers
    assert model.get_embedding_table().shape.as_list() == [64, 32]


@pytest.mark.parametrize("dtype,tolerance", [(tf.bfloat16, 0.1), (tf.float16, 0.02)])
def test_reduced_precision_tracks_float32(tmp_path, dtype, tolerance):
    config = tiny_config()
    ids = random_ids(2, 8)
    ckpt = save_tiny_checkpoint(config, tmp_path)
    graph32, model32 = build(config, ids)
    reference = run(graph32, model32.get_sequence_output(), checkpoint=ckpt)
    graph_low, model_low = build(config, ids, compute_dtype=dtype)
    low = run(graph_low, model_low.get_sequence_output(), checkpoint=ckpt)
    assert low.dtype == np.float32
    assert np.max(np.abs(low - reference)) < tolerance
    assert np.max(np.abs(low - reference)) > 0  # really computed in lower precision


def test_padding_does_not_change_real_positions():
    config = tiny_config()
    ids = random_ids(1, 10)
    mask = np.array([[1] * 6 + [0] * 4])
    other_padding = ids.copy()
    other_padding[0, 6:] = [3, 4, 5, 6]
    graph, model = build(config, np.concatenate([ids, other_padding]),
                         np.concatenate([mask, mask]))
    out = run(graph, model.get_sequence_output())
    np.testing.assert_allclose(out[0, :6], out[1, :6], atol=1e-5)


@pytest.mark.parametrize("dtype,tolerance", [(tf.float32, 1e-5), (tf.bfloat16, 0.05)])
def test_skip_padding_gives_the_real_positions_outputs_and_gradients(tmp_path, dtype,
                                                                      tolerance):
    config = tiny_config(num_hidden_layers=2)
    ids = random_ids(3, 9)
    # A full row, a short one, and a mask with a hole (allowed: any 0/1 mask).
    mask = np.array([[1] * 9, [1] * 3 + [0] * 6, [1, 1, 0, 1, 1, 1, 0, 0, 0]])
    ckpt = save_tiny_checkpoint(config, tmp_path)

    def outputs(skip_padding):
        graph, model = build(config, ids, mask, compute_dtype=dtype, skip_padding=skip_padding)
        with graph.as_default():
            layers = model.get_all_encoder_layers()
            loss = tf.reduce_sum(model.get_pooled_output() ** 2) + tf.reduce_sum(
                layers[-1] * tf.cast(mask, tf.float32)[:, :, None])
            kernel = [v for v in tf1.trainable_variables()
                      if "layer_0/intermediate/dense/kernel" in v.name][0]
            gradient = tf.gradients(loss, kernel)[0]
        return run(graph, [layers, model.get_pooled_output(), gradient], checkpoint=ckpt)

    (full_layers, full_pooled, full_gradient) = outputs(False)
    (packed_layers, packed_pooled, packed_gradient) = outputs(True)
    real = mask.astype(bool)
    for full, packed in zip(full_layers, packed_layers):
        np.testing.assert_allclose(packed[real], full[real], atol=tolerance)
        assert not packed[~real].any()  # padding positions come out as zeros
    np.testing.assert_allclose(packed_pooled, full_pooled, atol=tolerance)
    np.testing.assert_allclose(packed_gradient, full_gradient, atol=tolerance * 10,
                               rtol=tolerance)


def test_skip_padding_leaves_a_batch_with_little_padding_as_it_is():
    config = tiny_config(num_hidden_layers=1)
    ids = random_ids(2, 10)
    mask = np.array([[1] * 10, [1] * 9 + [0]])  # 5% padding: not worth packing
    graph, model = build(config, ids, mask, skip_padding=True)
    with graph.as_default():
        rows_run = tf.shape(graph.get_tensor_by_name(
            "bert/encoder/layer_0/intermediate/MatMul:0"))[0]
    sequence, rows_run = run(graph, [model.get_sequence_output(), rows_run])
    assert rows_run == 20
    assert sequence[1, 9].any()  # the padding position computed, not zeroed


def test_mean_pooling_averages_only_the_real_tokens():
    config = tiny_config()
    ids = random_ids(2, 10)
    mask = np.array([[1] * 6 + [0] * 4, [1] * 10])
    graph, model = build(config, ids, mask)
    with graph.as_default():
        mean = modeling.sentence_vector(model, tf.constant(mask), "mean")
        pooled = modeling.sentence_vector(model, tf.constant(mask), "pooler")
    sequence, mean, pooled, google = run(
        graph, [model.get_sequence_output(), mean, pooled, model.get_pooled_output()])
    np.testing.assert_allclose(mean[0], sequence[0, :6].mean(axis=0), atol=1e-5)
    np.testing.assert_allclose(mean[1], sequence[1].mean(axis=0), atol=1e-5)
    np.testing.assert_array_equal(pooled, google)
    with pytest.raises(ValueError, match="pooling 'max'"):
        modeling.sentence_vector(model, mask, "max")


def test_gelu_forms_follow_their_formulas():
    x = np.linspace(-4, 4, 41).astype(np.float32)
    exact = 0.5 * x * (1 + np.array([math.erf(v / math.sqrt(2)) for v in x]))
    approx = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    with tf.Graph().as_default(), tf1.Session() as sess:
        got_exact, got_tanh = sess.run([modeling.get_activation("gelu_exact")(x),
                                        modeling.get_activation("gelu")(x)])
    np.testing.assert_allclose(got_exact, exact, atol=1e-6)
    np.testing.assert_allclose(got_tanh, approx, atol=1e-6)
    assert np.max(np.abs(exact - approx)) > 1e-4


def test_hidden_act_changes_the_output():
    ids = random_ids(1, 6)
    results = {}
    for act in ("gelu", "gelu_exact"):
        graph, model = build(tiny_config(hidden_act=act, initializer_range=1.0), ids)
        results[act] = run(graph, model.get_sequence_output())
    assert np.max(np.abs(results["gelu"] - results["gelu_exact"])) > 1e-4


def _dropout_runs(rate, shape, seed, runs=2, dtype=tf.float32):
    """`runs` session runs of modeling.dropout on ones, in a graph seeded `seed`."""
    with tf.Graph().as_default():
        tf1.set_random_seed(seed)
        ones = tf.ones(shape, dtype)
        dropped = modeling.dropout(ones, rate)
        gradient = tf1.gradients(tf.reduce_sum(tf.cast(dropped, tf.float32) * 3.0), ones)[0]
        with tf1.Session() as session:
            return [[v.astype(np.float32) for v in session.run([dropped, gradient])]
                    for _ in range(runs)]


def test_dropout_16_bit_mask_drops_at_the_rate_and_keeps_the_expectation():
    shape = [64, 4, 128, 128]  # 4.2M elements: the drop rate to about 0.0005 (3 sigma)
    (first, first_gradient), (second, _) = _dropout_runs(0.1, shape, seed=5)
    threshold = modeling.dropout_threshold(0.1)
    assert threshold == 6554
    kept_value = 65536.0 / (65536 - threshold)
    assert set(np.unique(first)) == {0.0, np.float32(kept_value)}
    assert abs((first == 0).mean() - threshold / 65536) < 0.0005
    assert abs(first.mean() - 1.0) < 0.001
    # The gradient goes through the kept elements only, scaled as they were.
    np.testing.assert_allclose(first_gradient, 3.0 * first, rtol=1e-6)
    # A new mask each step, and the same masks again from the same graph seed.
    assert 0.15 < (first != second).mean() < 0.21  # 2 * 0.1 * 0.9 of the elements
    again = _dropout_runs(0.1, shape, seed=5, runs=1)[0][0]
    np.testing.assert_array_equal(first, again)
    assert (first != _dropout_runs(0.1, shape, seed=6, runs=1)[0][0]).any()


@pytest.mark.parametrize("rate", [0.3, 0.5, 1e-6, 1 - 1e-6])
def test_dropout_rates_in_bf16_and_outside_16_bits(rate):
    shape = [333, 1001]  # odd sizes: the 16-bit halves of the last word are cut off
    dropped = _dropout_runs(rate, shape, seed=1, runs=1, dtype=tf.bfloat16)[0][0]
    assert dropped.shape == tuple(shape)
    # (tf.nn.dropout on bfloat16 drops 0.8% at 1e-6: its uniform has 8 bits.)
    assert abs((dropped == 0).mean() - rate) < 0.003
    assert (modeling.dropout_threshold(rate) is None) == (rate in (1e-6, 1 - 1e-6))


def test_config_json_round_trip(tmp_path):
    config = tiny_config(hidden_act="gelu")
    path = str(tmp_path / "bert_config.json")
    config.to_json_file(path)
    again = modeling.BertConfig.from_json_file(path)
    assert again.to_dict() == config.to_dict()


def test_config_defaults_and_unknown_keys(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps({"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
                                "num_attention_heads": 2, "intermediate_size": 16,
                                "architectures": ["BertModel"]}))
    config = modeling.BertConfig.from_json_file(str(path))
    assert config.hidden_act == "gelu" and config.type_vocab_size == 16
    assert not hasattr(config, "architectures")


@pytest.mark.parametrize("content,expected", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"vocab_size": 10}', "missing required field(s) 'hidden_size'"),
    ('{"vocab_size": "10", "hidden_size": 8, "num_hidden_layers": 1, '
     '"num_attention_heads": 2, "intermediate_size": 16}', "'vocab_size' must be a positive"),
    ('{"vocab_size": 10, "hidden_size": 9, "num_hidden_layers": 1, '
     '"num_attention_heads": 2, "intermediate_size": 16}', "not a multiple"),
    ('{"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "hidden_act": "swish", '
     '"num_attention_heads": 2, "intermediate_size": 16}', "'hidden_act' must be one of"),
    ('{"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "hidden_dropout_prob": 1.5,'
     '"num_attention_heads": 2, "intermediate_size": 16}', "'hidden_dropout_prob'"),
])
def test_bad_config_is_one_line_naming_the_file(tmp_path, content, expected):
    path = tmp_path / "bert_config.json"
    path.write_text(content)
    with pytest.raises(InputError) as info:
        modeling.BertConfig.from_json_file(str(path))
    message = str(info.value)
    assert str(path) in message and expected in message and "\n" not in message


def test_missing_config_file(tmp_path):
    with pytest.raises(InputError, match="cannot read the BERT config"):
        modeling.BertConfig.from_json_file(str(tmp_path / "nope.json"))


def save_tiny_checkpoint(config, directory):
    graph, _ = build(config, random_ids(1, 4))
    with graph.as_default():
        saver = tf1.train.Saver()
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            return saver.save(sess, str(directory / "bert_model.ckpt"))


def test_init_from_checkpoint_restores_every_bert_variable(tmp_path):
    config = tiny_config()
    ckpt = save_tiny_checkpoint(config, tmp_path)
    ids = random_ids(2, 5)
    graph, model = build(config, ids)
    with graph.as_default():
        initialized = modeling.init_from_checkpoint(ckpt)
        head = tf1.get_variable("output_weights", [2, 32])
    assert initialized == set(google_variable_shapes(config))
    assert "output_weights" not in initialized and head is not None
    with tf1.Session(graph=graph) as sess:
        sess.run(tf1.global_variables_initializer())
        table = sess.run(model.get_embedding_table())
    np.testing.assert_array_equal(table, tf.train.load_checkpoint(ckpt).get_tensor(
        "bert/embeddings/word_embeddings"))
    # A folder holding the checkpoint works as well as its prefix.
    assert modeling.resolve_checkpoint(str(tmp_path)) == ckpt


def test_checkpoint_of_another_config_is_rejected(tmp_path):
    ckpt = save_tiny_checkpoint(tiny_config(intermediate_size=48), tmp_path)
    graph, _ = build(tiny_config(), random_ids(1, 4))
    with graph.as_default(), pytest.raises(InputError) as info:
        modeling.init_from_checkpoint(ckpt)
    assert "intermediate/dense/kernel" in str(info.value)
    assert "different bert_config" in str(info.value)


def test_checkpoint_checked_against_a_config_without_a_graph(tmp_path):
    ckpt = save_tiny_checkpoint(tiny_config(), tmp_path)
    modeling.check_checkpoint_compatible(modeling.bert_variable_shapes(tiny_config()), ckpt)
    with pytest.raises(InputError, match="word_embeddings has shape"):
        modeling.check_checkpoint_compatible(
            modeling.bert_variable_shapes(tiny_config(vocab_size=65)), ckpt)


def test_checkpoint_missing_variables_is_rejected(tmp_path):
    ckpt = save_tiny_checkpoint(tiny_config(num_hidden_layers=1), tmp_path)
    graph, _ = build(tiny_config(num_hidden_layers=2), random_ids(1, 4))
    with graph.as_default(), pytest.raises(InputError, match="no variable bert/encoder/layer_1"):
        modeling.init_from_checkpoint(ckpt)


def test_missing_checkpoint_is_named(tmp_path):
    with pytest.raises(InputError, match="no such checkpoint"):
        modeling.resolve_checkpoint(str(tmp_path / "bert_model.ckpt"))


def test_vocab_and_sequence_length_checks():
    config = tiny_config()
    with pytest.raises(InputError, match="vocab.txt: has 30522 tokens but bert_config"):
        modeling.check_vocab_matches_config(config, 30522, "vocab.txt")
    with pytest.raises(InputError, match="--max_seq_length=128 is longer"):
        modeling.check_max_seq_length(config, 128)
    modeling.check_max_seq_length(config, 64)
    with pytest.raises(InputError, match="exceeds the model's max_position_embeddings"):
        build(config, random_ids(1, 65))


@pytest.mark.parametrize("name", ["gelu", "gelu_exact"])
def test_bf16_gelu_runs_in_fp32_forward_and_backward(name):
    """A bfloat16 input's GELU and its gradient equal float32's, rounded to bf16
    (modeling.computed_in_fp32); the graph's GELU ops are float32."""
    activation = modeling.get_activation(name)
    x = np.linspace(-5.0, 5.0, 101).astype(np.float32)
    with tf.Graph().as_default() as graph:
        x32 = tf.constant(x)
        x16 = tf.cast(x32, tf.bfloat16)
        y32, y16 = activation(x32), activation(x16)
        (g32,) = tf.gradients(y32 * 3.0, x32)
        (g16,) = tf.gradients(tf.cast(y16, tf.float32) * 3.0, x16)
        erf_types = {op.get_attr("T") for op in graph.get_operations()
                     if op.type in ("Erf", "Erfc", "Tanh")}
        with tf.compat.v1.Session() as session:
            values = session.run([y32, tf.cast(y16, tf.float32), g32,
                                  tf.cast(g16, tf.float32)])
    assert y16.dtype == tf.bfloat16 and g16.dtype == tf.bfloat16
    assert erf_types == {tf.float32}
    np.testing.assert_allclose(values[1], values[0], rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(values[3], values[2], rtol=1e-2, atol=2e-2)
