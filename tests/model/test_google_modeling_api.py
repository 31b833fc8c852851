"""Google's modeling.py functions, called as code written against the original calls them.

`google_bert` composes BERT exactly as the original BertModel.__init__ does
(embedding_lookup, embedding_postprocessor, create_attention_mask_from_input_mask,
transformer_model, a tf.layers.dense pooler), every argument by its keyword.
"""

import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit.model import modeling

from tiny import tiny_config

tf1 = tf.compat.v1

# The original's pooler is tf.layers.dense, deprecated in TensorFlow 2 but still there.
pytestmark = pytest.mark.filterwarnings("ignore:`tf.layers.dense` is deprecated")


def google_bert(config, input_ids, input_mask, token_type_ids):
    """(embedding output, all layers, pooled output) built the original's way."""
    with tf1.variable_scope("bert"):
        with tf1.variable_scope("embeddings"):
            embedding_output, _ = modeling.embedding_lookup(
                input_ids=input_ids, vocab_size=config.vocab_size,
                embedding_size=config.hidden_size, initializer_range=config.initializer_range,
                word_embedding_name="word_embeddings", use_one_hot_embeddings=False)
            embedding_output = modeling.embedding_postprocessor(
                input_tensor=embedding_output, use_token_type=True,
                token_type_ids=token_type_ids, token_type_vocab_size=config.type_vocab_size,
                token_type_embedding_name="token_type_embeddings",
                use_position_embeddings=True, position_embedding_name="position_embeddings",
                initializer_range=config.initializer_range,
                max_position_embeddings=config.max_position_embeddings,
                dropout_prob=config.hidden_dropout_prob)
        with tf1.variable_scope("encoder"):
            attention_mask = modeling.create_attention_mask_from_input_mask(
                input_ids, input_mask)
            all_layers = modeling.transformer_model(
                input_tensor=embedding_output, attention_mask=attention_mask,
                hidden_size=config.hidden_size, num_hidden_layers=config.num_hidden_layers,
                num_attention_heads=config.num_attention_heads,
                intermediate_size=config.intermediate_size,
                intermediate_act_fn=modeling.get_activation(config.hidden_act),
                hidden_dropout_prob=config.hidden_dropout_prob,
                attention_probs_dropout_prob=config.attention_probs_dropout_prob,
                initializer_range=config.initializer_range, do_return_all_layers=True)
        with tf1.variable_scope("pooler"):
            first_token = tf.squeeze(all_layers[-1][:, 0:1, :], axis=1)
            pooled = tf1.layers.dense(
                first_token, config.hidden_size, activation=tf.tanh,
                kernel_initializer=modeling.create_initializer(config.initializer_range))
    return embedding_output, all_layers, pooled


def inputs(batch=3, seq=10, vocab=64, seed=0):
    rng = np.random.RandomState(seed)
    ids = rng.randint(5, vocab, size=[batch, seq]).astype(np.int32)
    mask = np.ones([batch, seq], np.int32)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    types = np.zeros([batch, seq], np.int32)
    types[:, 5:] = 1
    return [tf.constant(a) for a in (ids, mask, types)]


def variables_of(build):
    graph = tf.Graph()
    with graph.as_default():
        build()
        return [(modeling.variable_name(v), v.shape.as_list())
                for v in tf1.global_variables()]


def test_google_functions_create_bert_models_variables_in_its_order():
    config = tiny_config(hidden_act="gelu")
    ours = variables_of(lambda: modeling.BertModel(config, False, *inputs()))
    google = variables_of(lambda: google_bert(config, *inputs()))
    assert google == ours
    assert ("bert/encoder/layer_1/attention/self/query/kernel", [32, 32]) in google


def test_google_functions_compute_bert_models_outputs_with_its_variables():
    config = tiny_config(hidden_act="gelu")
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(1)
        ids, mask, types = inputs()
        model = modeling.BertModel(config, False, ids, mask, types)
        count = len(tf1.global_variables())
        with tf1.variable_scope(tf1.get_variable_scope(), reuse=True):
            embedding_output, layers, pooled = google_bert(config, ids, mask, types)
        assert len(tf1.global_variables()) == count  # every variable shared, none new
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            ours, google = sess.run([
                [model.get_embedding_output(), model.get_all_encoder_layers(),
                 model.get_pooled_output()],
                [embedding_output, layers, pooled]])
    np.testing.assert_allclose(google[0], ours[0], atol=1e-6)
    for got, expected in zip(google[1], ours[1]):
        np.testing.assert_allclose(got, expected, atol=2e-5)
    np.testing.assert_allclose(google[2], ours[2], atol=2e-5)


def test_the_smaller_pieces_keep_googles_contracts():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant(np.linspace(-3, 3, 7, dtype=np.float32))
        gelu_tanh = 0.5 * x * (1 + tf.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
        assert modeling.get_activation("linear") is None
        assert modeling.get_activation("") is None
        assert modeling.get_activation(tf.nn.relu) is tf.nn.relu
        assert modeling.get_activation("GELU") is modeling.gelu
        # Cross-attention from 2 to 5 positions, in the rank-2 form.
        from_2d = tf.ones([2 * 2, 8])
        to_2d = tf.ones([2 * 5, 8])
        context = modeling.attention_layer(
            from_2d, to_2d, num_attention_heads=2, size_per_head=3,
            do_return_2d_tensor=True, batch_size=2, from_seq_length=2, to_seq_length=5)
        three_d = tf.zeros([2, 5, 8])
        matrix = modeling.reshape_to_matrix(three_d)
        back = modeling.reshape_from_matrix(matrix, modeling.get_shape_list(three_d))
        normed = modeling.layer_norm_and_dropout(tf.ones([2, 8]), 0.0, name="ln")
        names = sorted(modeling.variable_name(v) for v in tf1.global_variables())
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            got, expected = sess.run([modeling.gelu(x), gelu_tanh])
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert context.shape.as_list() == [4, 6]
    assert matrix.shape.as_list() == [10, 8] and back.shape.as_list() == [2, 5, 8]
    assert normed.shape.as_list() == [2, 8]
    assert names == ["key/bias", "key/kernel", "ln/beta", "ln/gamma", "query/bias",
                     "query/kernel", "value/bias", "value/kernel"]
