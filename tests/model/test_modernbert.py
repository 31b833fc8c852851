"""ModernBERT's pieces of the one encoder (rotary positions, local windows, the pre-norm
bias-free layer, GeGLU, the final norm, its head as our pooler) on tiny random configs:
each piece against numpy, the padding skip and bf16/fp16 against fp32, and the config's
fields. Parity with transformers is tests/convert/test_family_conversion.py's."""

import math

import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit.errors import InputError
from bert_toolkit.model import modeling, modernbert, rotary

from tiny import tiny_config

tf1 = tf.compat.v1

MODERNBERT = dict(model_family="modernbert", type_vocab_size=0, layer_norm_eps=1e-5,
                  num_hidden_layers=3, local_attention=4, global_attn_every_n_layers=2,
                  global_rope_theta=160000.0, local_rope_theta=10000.0,
                  classifier_pooling="cls", initializer_range=0.2)
IDS = np.array([[5, 9, 13, 7, 11, 0, 0, 0], [3, 4, 5, 6, 7, 8, 9, 10]], np.int32)
MASK = np.array([[1, 1, 1, 1, 1, 0, 0, 0], [1] * 8], np.int32)


def config(**overrides):
    return tiny_config(**dict(MODERNBERT, **overrides))


def run(cfg, is_training=False, compute_dtype=tf.float32, skip_padding=False, seed=0,
        variables=None, fetch_token_heads=False):
    """(sequence [2, 8, 32], pooled [2, 32], {variable: value}[, token heads]) of `cfg`."""
    with tf.Graph().as_default():
        tf1.set_random_seed(seed)
        model = modeling.BertModel(cfg, is_training, tf.constant(IDS), tf.constant(MASK),
                                   compute_dtype=compute_dtype, skip_padding=skip_padding)
        fetches = [model.get_sequence_output(), model.get_pooled_output()]
        if fetch_token_heads:
            fetches.append(model.get_token_head_input())
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            by_name = {modeling.variable_name(v): v for v in tf1.global_variables()}
            for name, value in (variables or {}).items():
                by_name[name].load(value, session)
            outputs = session.run(fetches)
            values = session.run(by_name)
    return outputs[:2] + [values] + outputs[2:]


def _layer_norm(x, gamma, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps) * gamma


_GELU = np.vectorize(lambda x: 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0))))


# -- rotary positions and windows -----------------------------------------------------

def test_rotation_is_transformers_formula():
    x = np.random.RandomState(0).standard_normal((2, 3, 5, 8)).astype(np.float32)
    theta = 1000.0
    inverse = 1.0 / theta ** (np.arange(0, 8, 2) / 8.0)
    angles = np.arange(5)[:, None] * inverse[None]
    angles = np.concatenate([angles, angles], -1)
    half = np.concatenate([-x[..., 4:], x[..., :4]], -1)
    expected = x * np.cos(angles) + half * np.sin(angles)
    with tf.Graph().as_default(), tf1.Session() as session:
        got = session.run(rotary.rotate(tf.constant(x), rotary.rotary_tables(5, 8, theta)))
        bf16 = session.run(rotary.rotate(tf.constant(x, tf.bfloat16),
                                         rotary.rotary_tables(5, 8, theta)))
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert bf16.dtype == tf.bfloat16.as_numpy_dtype
    np.testing.assert_allclose(bf16.astype(np.float32), expected, atol=5e-2)


def test_rotated_scores_depend_on_the_distance_only():
    rng = np.random.RandomState(1)
    query, key = rng.standard_normal((2, 8)).astype(np.float32)
    at = np.zeros((1, 1, 12, 8), np.float32)
    with tf.Graph().as_default(), tf1.Session() as session:
        tables = rotary.rotary_tables(12, 8, 10000.0)
        placed_q, placed_k = at.copy(), at.copy()
        placed_q[0, 0, :] = query
        placed_k[0, 0, :] = key
        q, k = session.run([rotary.rotate(tf.constant(placed_q), tables),
                            rotary.rotate(tf.constant(placed_k), tables)])
    scores = q[0, 0] @ k[0, 0].T  # [12, 12]
    for shift in (1, 5):
        np.testing.assert_allclose(np.diagonal(scores, shift),
                                   np.full(12 - shift, scores[0, shift]), atol=1e-4)
    assert abs(scores[0, 1] - scores[0, 5]) > 1e-3


def test_each_layer_gets_its_kinds_window_and_theta():
    cfg = config()
    assert [cfg.is_global_layer(i) for i in range(3)] == [True, False, True]
    with tf.Graph().as_default(), tf1.Session() as session:
        extras = modernbert.pre_norm_layer_extras(cfg, 8)
        tables = session.run([e["tables"] for e in extras])
        expected = session.run([rotary.rotary_tables(8, 8, 160000.0),
                                rotary.rotary_tables(8, 8, 10000.0)])
    assert [e["window"] for e in extras] == [None, 4, None]
    for index, layer_tables in enumerate(tables):
        np.testing.assert_array_equal(layer_tables, expected[0 if index != 1 else 1])
    assert [e["normalizes_input"] for e in extras] == [False, True, True]


# -- the graph -------------------------------------------------------------------------

def test_the_variables_are_modernberts_in_googles_style():
    shapes = modeling.bert_variable_shapes(config())
    assert "bert/embeddings/position_embeddings" not in shapes
    assert not any(name.endswith(("/bias", "/beta")) for name in shapes)
    assert "bert/encoder/layer_0/attention/LayerNorm/gamma" not in shapes  # an Identity
    assert shapes["bert/encoder/layer_1/attention/LayerNorm/gamma"] == [32]
    assert shapes["bert/encoder/layer_0/attention/self/qkv/kernel"] == [32, 96]
    assert shapes["bert/encoder/layer_0/intermediate/dense/kernel"] == [32, 128]
    assert shapes["bert/encoder/layer_0/output/dense/kernel"] == [64, 32]
    assert shapes["bert/encoder/final_LayerNorm/gamma"] == [32]
    assert shapes["bert/pooler/LayerNorm/gamma"] == [32]


def _numpy_layer(x, values, layer, cfg, mask_bias, tables, first):
    """One pre-norm layer in numpy (x [batch, seq, hidden])."""
    prefix = "bert/encoder/layer_%d/" % layer
    heads, size = cfg.num_attention_heads, cfg.hidden_size // cfg.num_attention_heads
    normed = x if first else _layer_norm(x, values[prefix + "attention/LayerNorm/gamma"])
    qkv = normed @ values[prefix + "attention/self/qkv/kernel"]
    split = qkv.reshape(x.shape[0], x.shape[1], 3, heads, size).transpose(2, 0, 3, 1, 4)
    cos, sin = tables

    def rotate(t):
        return t * cos + np.concatenate([-t[..., size // 2:], t[..., :size // 2]], -1) * sin
    query, key, value = rotate(split[0]) / math.sqrt(size), rotate(split[1]), split[2]
    scores = query @ key.transpose(0, 1, 3, 2) + mask_bias
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    context = (probs @ value).transpose(0, 2, 1, 3).reshape(x.shape)
    hidden = x + context @ values[prefix + "attention/output/dense/kernel"]
    both = _layer_norm(hidden, values[prefix + "intermediate/LayerNorm/gamma"]) @ values[
        prefix + "intermediate/dense/kernel"]
    inner = both.shape[-1] // 2
    return hidden + (_GELU(both[..., :inner]) * both[..., inner:]) @ values[
        prefix + "output/dense/kernel"]


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_the_encoder_and_its_head_are_modernberts_in_numpy(pooling):
    cfg = config(classifier_pooling=pooling)
    sequence, pooled, values, token_heads = run(cfg, fetch_token_heads=True)
    x = _layer_norm(values["bert/embeddings/word_embeddings"][IDS],
                    values["bert/embeddings/LayerNorm/gamma"])
    padding = np.where(MASK == 0, -10000.0, 0.0)[:, None, None, :]
    window = np.where(np.abs(np.arange(8)[:, None] - np.arange(8)[None]) <= 2, 0.0, -10000.0)
    with tf.Graph().as_default(), tf1.Session() as session:
        tables = {True: session.run(rotary.rotary_tables(8, 8, 160000.0)),
                  False: session.run(rotary.rotary_tables(8, 8, 10000.0))}
    for layer in range(3):
        is_global = cfg.is_global_layer(layer)
        x = _numpy_layer(x, values, layer, cfg, padding if is_global else padding + window,
                         tables[is_global], layer == 0)
    x = _layer_norm(x, values["bert/encoder/final_LayerNorm/gamma"])
    real = MASK == 1
    np.testing.assert_allclose(sequence[real], x[real], atol=1e-4)

    def head(states):
        return _layer_norm(_GELU(states @ values["bert/pooler/dense/kernel"]),
                           values["bert/pooler/LayerNorm/gamma"])
    if pooling == "mean":
        first = (x * MASK[:, :, None]).sum(1) / MASK.sum(1, keepdims=True)
    else:
        first = x[:, 0]
    np.testing.assert_allclose(pooled, head(first), atol=1e-4)
    np.testing.assert_allclose(token_heads[real], head(x)[real], atol=1e-4)


def test_other_families_token_heads_read_the_sequence_output():
    with tf.Graph().as_default():
        model = modeling.BertModel(tiny_config(), False, tf.constant(IDS), tf.constant(MASK))
        assert model.get_token_head_input() is model.get_sequence_output()


def test_skipping_the_padding_changes_nothing_at_real_tokens():
    cfg = config(classifier_pooling="mean")
    sequence, pooled, values = run(cfg)
    # Packing pays from a tenth of padding: this batch has 3 of 16 positions.
    packed, packed_pooled, _ = run(cfg, skip_padding=True, variables=values)
    real = MASK == 1
    np.testing.assert_allclose(packed[real], sequence[real], atol=1e-5)
    np.testing.assert_allclose(packed_pooled, pooled, atol=1e-5)


@pytest.mark.parametrize("dtype, tolerance", [(tf.bfloat16, 0.15), (tf.float16, 0.02)])
def test_half_precision_follows_fp32(dtype, tolerance):
    cfg = config()
    sequence, pooled, values = run(cfg)
    half, half_pooled, _ = run(cfg, compute_dtype=dtype, variables=values)
    real = MASK == 1
    assert np.abs(half[real] - sequence[real]).max() < tolerance
    assert np.abs(half_pooled - pooled).max() < tolerance


def test_a_bf16_training_step_with_dropout_and_the_padding_skip_has_gradients():
    cfg = config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    with tf.Graph().as_default():
        model = modeling.BertModel(cfg, True, tf.constant(IDS), tf.constant(MASK),
                                   compute_dtype=tf.bfloat16, skip_padding=True)
        loss = tf.reduce_sum(tf.square(model.get_pooled_output())) + tf.reduce_sum(
            tf.square(model.get_token_head_input()))
        variables = tf1.trainable_variables()
        gradients = tf.gradients(loss, variables)
        assert all(g is not None for g in gradients), [
            v.name for v, g in zip(variables, gradients) if g is None]
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            values = session.run(gradients)
    # (The word table's gradient is IndexedSlices: its values.)
    assert all(np.isfinite(getattr(v, "values", v)).all() for v in values)


# -- the config ------------------------------------------------------------------------

def test_the_fields_are_written_for_modernbert_alone():
    fields = config().to_dict()
    assert (fields["local_attention"], fields["global_attn_every_n_layers"],
            fields["global_rope_theta"], fields["local_rope_theta"],
            fields["classifier_pooling"]) == (4, 2, 160000.0, 10000.0, "cls")
    assert modeling.BertConfig.from_dict(fields).to_dict() == fields
    bert = tiny_config().to_dict()
    assert not set(bert) & {"local_attention", "global_attn_every_n_layers",
                            "global_rope_theta", "local_rope_theta", "classifier_pooling"}
    long = config(max_position_embeddings=8192)
    assert long.max_sequence_length == 8192
    modeling.check_max_seq_length(long, 8192)


@pytest.mark.parametrize("change, fragment", [
    (dict(local_attention=None), "'local_attention' must be a positive integer"),
    (dict(global_attn_every_n_layers=0), "'global_attn_every_n_layers' must be a positive"),
    (dict(local_rope_theta=-1.0), "'local_rope_theta' must be a positive number"),
    (dict(classifier_pooling="max"), "'classifier_pooling' must be 'cls' or 'mean'"),
    (dict(num_attention_heads=32), "head size 1"),
])
def test_a_modernbert_config_it_cannot_run_is_one_line(change, fragment):
    fields = dict(config().to_dict(), **change)
    with pytest.raises(InputError) as info:
        modeling.BertConfig.from_dict(fields, "bert_config.json")
    assert fragment in str(info.value) and "\n" not in str(info.value)
    assert str(info.value).startswith("bert_config.json: ")


# -- long rows: windows in blocks, global layers in chunks --------------------------------

def _long_run(cfg, ids, mask, squares):
    """(sequence output, pooled, d pooled / d every variable) of a fresh graph, fp32; with
    `squares`, long_attention's blocks and chunks switched off (the masked square)."""
    from bert_toolkit.model import long_attention
    saved = long_attention.CHUNKED_MIN_SEQ, long_attention.blocks_min_length
    if squares:
        long_attention.CHUNKED_MIN_SEQ = 10 ** 9
        long_attention.blocks_min_length = lambda *args, **kwargs: 10 ** 9
    try:
        with tf.Graph().as_default():
            tf1.set_random_seed(3)
            model = modeling.BertModel(cfg, False, tf.constant(ids), tf.constant(mask))
            variables = sorted(tf1.trainable_variables(), key=lambda v: v.name)
            gradients = tf.gradients(tf.reduce_sum(model.get_pooled_output() ** 2),
                                     variables)
            with tf1.Session() as session:
                session.run(tf1.global_variables_initializer())
                sequence, pooled, grads = session.run(
                    [model.get_sequence_output(), model.get_pooled_output(),
                     [tf.convert_to_tensor(g) for g in gradients]])
    finally:
        long_attention.CHUNKED_MIN_SEQ, long_attention.blocks_min_length = saved
    return sequence, pooled, grads


def test_a_long_row_in_windows_and_chunks_equals_the_masked_square():
    """At 1,100 tokens the local layers run in blocks and the global ones in chunks
    (long_attention): the same outputs and gradients as the plain masked square."""
    from bert_toolkit.model import long_attention
    seq_length = 1100
    cfg = config(max_position_embeddings=2048, local_attention=32, classifier_pooling="mean",
                 num_attention_heads=2)
    assert seq_length >= long_attention.CHUNKED_MIN_SEQ
    assert long_attention.uses_blocks(seq_length, cfg.local_attention)
    rng = np.random.RandomState(0)
    ids = rng.randint(1, cfg.vocab_size, (1, seq_length)).astype(np.int32)
    mask = (np.arange(seq_length) < 1037).astype(np.int32)[np.newaxis]
    sequence, pooled, grads = _long_run(cfg, ids, mask, squares=False)
    square, square_pooled, square_grads = _long_run(cfg, ids, mask, squares=True)
    real = mask == 1
    np.testing.assert_allclose(sequence[real], square[real], atol=1e-4)
    np.testing.assert_allclose(pooled, square_pooled, atol=1e-4)
    for got, expected in zip(grads, square_grads):
        np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-3)


# -- bf16 training's fused kernels ---------------------------------------------------------

def _training_graph(cfg, compute_dtype, fuse):
    """(pooled, token heads, their loss's gradients by variable name) of a training graph
    without dropout, its fused kernels on or off (modeling.fuses_elementwise)."""
    saved = modeling.fuses_elementwise
    modeling.fuses_elementwise = lambda is_training, dtype: fuse
    try:
        tf1.set_random_seed(0)
        model = modeling.BertModel(cfg, True, tf.constant(IDS), tf.constant(MASK),
                                   compute_dtype=compute_dtype)
    finally:
        modeling.fuses_elementwise = saved
    loss = tf.reduce_sum(model.get_pooled_output() ** 2) + tf.reduce_sum(
        model.get_token_head_input() ** 2)
    variables = sorted(tf1.trainable_variables(), key=lambda v: v.name)
    gradients = tf.gradients(loss, variables)
    return model.get_pooled_output(), {modeling.variable_name(v): tf.convert_to_tensor(g)
                                       for v, g in zip(variables, gradients)}


def _outputs_and_gradients(cfg, dtype, fuse):
    with tf.Graph().as_default():
        pooled, gradients = _training_graph(cfg, dtype, fuse)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            return session.run([pooled, gradients])


def test_the_fused_kernels_compute_what_the_plain_graph_does():
    """Bias-free norms, the residual sum with the next norm, GeGLU, the rotation and the
    last residual add as XLA kernels: in float32 the plain graph's outputs and gradients
    to 1e-4; in bfloat16 as close to float32's as the plain bfloat16 graph is."""
    cfg = config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    reference, reference_gradients = _outputs_and_gradients(cfg, tf.float32, False)
    pooled, gradients = _outputs_and_gradients(cfg, tf.float32, True)
    np.testing.assert_allclose(pooled, reference, atol=1e-4)
    assert sorted(gradients) == sorted(reference_gradients)
    for name, expected in reference_gradients.items():
        np.testing.assert_allclose(gradients[name], expected, atol=1e-4, err_msg=name)

    # bfloat16 (weights at BERT's usual scale): every gradient as one vector.
    cfg = config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                 initializer_range=0.02)
    reference, reference_gradients = _outputs_and_gradients(cfg, tf.float32, False)

    def error(got, expected):
        if isinstance(got, dict):
            got, expected = (np.concatenate([d[n].ravel() for n in sorted(expected)])
                             for d in (got, expected))
        return np.linalg.norm(got - expected) / np.linalg.norm(expected)
    plain = _outputs_and_gradients(cfg, tf.bfloat16, False)
    fused_ = _outputs_and_gradients(cfg, tf.bfloat16, True)
    for index, expected in enumerate((reference, reference_gradients)):
        assert error(fused_[index], expected) <= max(2 * error(plain[index], expected), 0.02)


def test_fused_dropout_keeps_the_expected_share():
    """GeGLU's and the residual's hashed dropout in the fused layer drop about their
    rate: a training step's gradients differ from one without dropout, and run."""
    cfg = config(hidden_dropout_prob=0.5, attention_probs_dropout_prob=0.5)
    with tf.Graph().as_default():
        pooled, gradients = _training_graph(cfg, tf.bfloat16, True)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            first, second = session.run(pooled), session.run(pooled)
            values = session.run(gradients)
    assert np.abs(first - second).max() > 1e-3  # fresh masks every step
    assert all(np.isfinite(getattr(v, "values", v)).all() for v in values.values())


def test_flops_count_the_gated_feed_forward_and_the_windows():
    from bert_toolkit.model import flops
    base = dict(model_family="modernbert", hidden_size=768, intermediate_size=1152,
                num_hidden_layers=22, local_attention=128, global_attn_every_n_layers=3)
    h, i = 768, 1152
    dense = 2 * (4 * h * h + 3 * h * i) * 22
    # 8 global layers (0, 3, ..., 21) over every key, 14 local over 129 keys.
    for seq in (128, 1024):
        attention = 4 * seq * h * (8 * seq + 14 * min(seq, 129))
        assert flops.forward_flops_per_example(base, seq) == \
            dense * seq + attention + 2 * h * h
    assert flops.forward_flops_per_example(base, 1024, dense_tokens=512) == \
        dense * 512 + 4 * 1024 * h * (8 * 1024 + 14 * 129) + 2 * h * h
