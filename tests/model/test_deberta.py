"""DeBERTa-v3's pieces of the one encoder (bert_toolkit/model/relative_attention.py and
the deberta-v2 family in modeling.py): the log buckets against the paper's definition,
the skewed products against a direct gather, the fused kernel against the plain ops,
and the graph's variables, limits and precisions. Parity with transformers on real
checkpoints is tests/convert/test_family_conversion.py's (the deberta-v3 fixtures)."""

import math

import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit.errors import InputError
from bert_toolkit.model import flops, fused, modeling, relative_attention

from tiny import tiny_config

tf1 = tf.compat.v1

DEBERTA = dict(model_family="deberta-v2", type_vocab_size=0, layer_norm_eps=1e-7,
               position_buckets=8, max_relative_positions=-1, initializer_range=0.2)


def paper_bucket(distance, buckets, max_position):
    """DeBERTa's log bucket of one distance (He et al., DeBERTa, and its code), in exact
    float64 arithmetic: distances up to half the buckets keep their value; farther ones
    take mid + ceil(log(|d| / mid) / log((max_position - 1) / mid) * (mid - 1)) with
    their sign."""
    mid = buckets // 2
    if abs(distance) <= mid:
        return distance
    log_position = math.ceil(math.log(abs(distance) / mid)
                             / math.log((max_position - 1) / mid) * (mid - 1)) + mid
    return int(math.copysign(log_position, distance))


@pytest.mark.parametrize("buckets, max_position", [(4, 64), (8, 64), (32, 128), (256, 512),
                                                   (256, 2048)])
def test_log_buckets_follow_the_paper(buckets, max_position):
    distances = np.arange(-(max_position - 1), max_position)
    ours = relative_attention.log_bucket(distances, buckets, max_position)
    expected = [paper_bucket(int(d), buckets, max_position) for d in distances]
    assert ours.tolist() == expected
    # Symmetric, non-decreasing, and the farthest distance in the last bucket.
    assert (ours == -ours[::-1]).all() and (np.diff(ours) >= 0).all()
    assert ours[-1] == buckets - 1


def test_distance_rows_without_buckets_clip_at_the_span():
    rows = relative_attention.distance_rows(-1, 16, 64)
    distances = np.arange(-64, 64)
    np.testing.assert_array_equal(rows, np.clip(distances + 16, 0, 31))
    assert relative_attention.attention_span(-1, -1, 64) == 64
    assert relative_attention.attention_span(256, -1, 512) == 256
    with_buckets = relative_attention.distance_rows(8, -1, 64)
    assert with_buckets.min() >= 0 and with_buckets.max() == 15  # rows of 2 * 8


def direct_position_scores(query, key, position_query, position_key, rows):
    """numpy: q_i . K[rows(i - j)] + k_j . Q[rows(i - j)], gathered per (i, j)."""
    s = query.shape[2]
    # rows[c] is the row of distance c - s (sequence_rows' layout).
    index = np.array([[rows[(i - j) + s] for j in range(s)] for i in range(s)])
    keys = position_key[:, index]        # [heads, s, s, d]
    queries = position_query[:, index]
    return (np.einsum("bhid,hijd->bhij", query, keys)
            + np.einsum("bhjd,hijd->bhij", key, queries))


@pytest.mark.parametrize("seq_length", [1, 2, 5, 17])
def test_skewed_products_equal_a_direct_gather(seq_length):
    rng = np.random.RandomState(seq_length)
    batch, heads, size, table = 3, 2, 4, 9
    query, key = (rng.standard_normal((batch, heads, seq_length, size)) for _ in range(2))
    table_query, table_key = (rng.standard_normal((heads, table, size)) for _ in range(2))
    rows = rng.randint(0, table, 2 * seq_length)
    with tf.Graph().as_default(), tf1.Session() as session:
        scores = session.run(relative_attention.position_scores(
            tf.constant(query), tf.constant(key), tf.constant(table_query[:, rows]),
            tf.constant(table_key[:, rows])))
    np.testing.assert_allclose(scores, direct_position_scores(
        query, key, table_query, table_key, rows), rtol=1e-10, atol=1e-10)
    with tf.Graph().as_default(), tf1.Session() as session:
        inputs = [tf.constant(x) for x in (query, key, table_query[:, rows],
                                           table_key[:, rows])]
        upstream = rng.standard_normal((batch, heads, seq_length, seq_length))
        ours = session.run(tf.gradients(relative_attention.position_scores(*inputs), inputs,
                                        upstream))
    # The direct form's gradient, by numpy's einsum on the same index.
    index = np.array([[(i - j) + seq_length for j in range(seq_length)]
                      for i in range(seq_length)])
    keys, queries = table_key[:, rows][:, index], table_query[:, rows][:, index]
    np.testing.assert_allclose(ours[0], np.einsum("bhij,hijd->bhid", upstream, keys),
                               atol=1e-10)
    np.testing.assert_allclose(ours[1], np.einsum("bhij,hijd->bhjd", upstream, queries),
                               atol=1e-10)


@pytest.mark.parametrize("seq_length, offset", [(1, 0), (1, 1), (4, 3), (4, 4), (9, 8)])
def test_the_skew_s_gradient_puts_each_value_back_where_it_was_read(seq_length, offset):
    rng = np.random.RandomState(seq_length)
    upstream = rng.standard_normal((2, 3, seq_length, seq_length))
    with tf.Graph().as_default(), tf1.Session() as session:
        products = tf.constant(np.zeros((2, 3, seq_length, 2 * seq_length)))
        gradient = session.run(tf.gradients(relative_attention.skew(products, offset),
                                            products, upstream)[0])
    expected = np.zeros((2, 3, seq_length, 2 * seq_length))
    for a in range(seq_length):
        for b in range(seq_length):
            expected[..., a, b + offset - a] += upstream[..., a, b]
    np.testing.assert_array_equal(gradient, expected)


def test_the_fused_kernel_equals_the_plain_ops_forward_and_backward():
    rng = np.random.RandomState(0)
    batch, heads, s = 2, 3, 6
    scores = rng.standard_normal((batch, heads, s, s)).astype(np.float32)
    to_position, from_position = (rng.standard_normal((heads, batch, s, s))
                                  .astype(np.float32) for _ in range(2))
    mask = np.array([[1] * s, [1] * 4 + [0] * 2])
    upstream = rng.standard_normal((batch, heads, s, s)).astype(np.float32)
    with tf.Graph().as_default(), tf1.Session() as session:
        inputs = [tf.constant(x) for x in (scores, to_position, from_position)]
        bias = modeling.attention_mask_bias(tf.constant(mask))
        plain = tf.nn.softmax(inputs[0] + relative_attention.combine(*inputs[1:]) + bias)
        kernel = fused.relative_attention_probs(*inputs, bias)
        results = session.run([plain, kernel] + tf.gradients(plain, inputs, upstream)
                              + tf.gradients(kernel, inputs, upstream))
    np.testing.assert_allclose(results[1], results[0], atol=1e-6)
    for ours, expected in zip(results[5:], results[2:5]):
        np.testing.assert_allclose(ours, expected, atol=1e-5)


# -- the graph ------------------------------------------------------------------------

IDS = np.array([[1, 9, 13, 7, 2, 0, 0], [1, 4, 5, 6, 7, 8, 2]], np.int32)
MASK = (IDS != 0).astype(np.int32)


def run(config, dtype=tf.float32, skip_padding=False, variables=None, is_training=False):
    """(sequence output, {name: value}) of a fresh seeded graph of `config`."""
    with tf.Graph().as_default():
        tf1.set_random_seed(1)
        model = modeling.BertModel(config, is_training, tf.constant(IDS), tf.constant(MASK),
                                   compute_dtype=dtype, skip_padding=skip_padding)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            by_name = {modeling.variable_name(v): v for v in tf1.global_variables()}
            for name, value in (variables or {}).items():
                by_name[name].load(value, session)
            return session.run(model.get_sequence_output()), session.run(by_name)


@pytest.mark.parametrize("settings", [
    dict(), dict(position_buckets=-1, max_relative_positions=16, embedding_size=16),
    dict(position_buckets=256, max_position_embeddings=512), dict(position_buckets=0)])
def test_the_variables_are_those_bert_variable_shapes_lists(settings):
    config = tiny_config(**dict(DEBERTA, **settings))
    _, values = run(config)
    shapes = {name: list(value.shape) for name, value in values.items()}
    assert shapes == {n: list(s) for n, s in modeling.bert_variable_shapes(config).items()}
    assert "bert/embeddings/position_embeddings" not in shapes
    assert shapes["bert/encoder/rel_embeddings"][0] == 2 * config.relative_span
    assert ("bert/embeddings_project/bias" in shapes) is False
    assert shapes["bert/embeddings/LayerNorm/gamma"] == [32]


def test_only_deberta_configs_write_the_position_fields():
    written = tiny_config(**DEBERTA).to_dict()
    assert (written["position_buckets"], written["max_relative_positions"]) == (8, -1)
    assert "position_buckets" not in tiny_config().to_dict()
    assert modeling.BertConfig.from_dict(written).to_dict() == written
    assert tiny_config(**DEBERTA).max_sequence_length == 64


@pytest.mark.parametrize("changes, fragment", [
    (dict(position_buckets=None), "'position_buckets' must be an integer"),
    (dict(max_relative_positions=1.5), "'max_relative_positions' must be an integer"),
    (dict(type_vocab_size=2), "'type_vocab_size' must be 0"),
    (dict(position_buckets=2), "log buckets need at least 4")])
def test_a_config_the_graph_cannot_run_is_one_line(changes, fragment):
    with pytest.raises(InputError, match=fragment) as error:
        modeling.BertConfig.from_dict(tiny_config(**dict(DEBERTA, **changes)).to_dict(),
                                      "bert_config.json")
    assert "\n" not in str(error.value) and "bert_config.json" in str(error.value)


def test_sequences_stop_at_max_position_embeddings():
    config = tiny_config(**dict(DEBERTA, max_position_embeddings=6))
    with pytest.raises(InputError, match="--max_seq_length=7 is longer than the model's 6"):
        modeling.check_max_seq_length(config, 7)
    with tf.Graph().as_default(), pytest.raises(InputError, match="sequence length 7 exceeds"):
        modeling.BertModel(config, False, tf.constant(IDS))


def test_padding_is_masked_and_skipping_it_changes_nothing():
    config = tiny_config(**DEBERTA)
    full, values = run(config)
    packed, _ = run(config, skip_padding=True, variables=values)
    real = MASK.astype(bool)
    np.testing.assert_allclose(packed[real], full[real], atol=1e-5)
    # The padding's embeddings are zeros and its keys masked: other padding, same rows.
    other = IDS.copy()
    other[0, 5:] = [17, 23]
    with tf.Graph().as_default():
        model = modeling.BertModel(config, False, tf.constant(other), tf.constant(MASK))
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            for variable in tf1.global_variables():
                variable.load(values[modeling.variable_name(variable)], session)
            again = session.run(model.get_sequence_output())
    np.testing.assert_allclose(again[real], full[real], atol=1e-6)


def test_every_position_rule_moves_the_outputs():
    """Distances measured the other way (i.e. the table rows reversed) or a table of
    another span change the outputs by far more than any rounding."""
    config = tiny_config(**DEBERTA)
    full, values = run(config)
    flipped = dict(values)
    flipped["bert/encoder/rel_embeddings"] = values["bert/encoder/rel_embeddings"][::-1]
    moved, _ = run(config, variables=flipped)
    assert np.abs(moved - full)[MASK.astype(bool)].max() > 1e-2


@pytest.mark.parametrize("dtype", [tf.bfloat16, tf.float16])
def test_low_precision_follows_float32(dtype):
    config = tiny_config(**dict(DEBERTA, initializer_range=0.02))
    full, values = run(config)
    low, _ = run(config, dtype=dtype, variables=values)
    real = MASK.astype(bool)
    assert np.abs(low - full)[real].max() < (0.1 if dtype == tf.bfloat16 else 0.02)


def test_a_bf16_training_graph_runs_the_fused_kernel_and_has_every_gradient():
    config = tiny_config(**dict(DEBERTA, hidden_dropout_prob=0.1,
                                attention_probs_dropout_prob=0.1))
    with tf.Graph().as_default():
        model = modeling.BertModel(config, True, tf.constant(IDS), tf.constant(MASK),
                                   compute_dtype=tf.bfloat16, skip_padding=True)
        loss = tf.reduce_sum(tf.square(model.get_sequence_output())) + tf.reduce_sum(
            model.get_pooled_output())
        variables = tf1.trainable_variables()
        gradients = tf.gradients(loss, variables)
        ops = {op.type for op in tf1.get_default_graph().get_operations()}
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            values = session.run([tf.convert_to_tensor(g) for g in gradients])
    assert all(np.isfinite(v).all() for v in values)
    assert any(np.abs(v).max() > 0 for name, v in zip(variables, values)
               if "rel_embeddings" in name.name)
    assert "StatefulPartitionedCall" in ops or "PartitionedCall" in ops


def test_flops_count_the_relative_products():
    bert = tiny_config(type_vocab_size=0)
    deberta = tiny_config(**DEBERTA)
    extra = (flops.forward_flops_per_example(deberta, 16)
             - flops.forward_flops_per_example(bert, 16))
    # Two products of [16, head] with [head, 32] rows per head, in each of the 2 layers.
    assert extra == 2 * 2 * (2 * 16 * 32 * 32)


def test_projecting_the_table_or_the_picked_rows_gives_the_same_outputs():
    """A sequence longer than the table's span projects the table and picks from the
    projections; one of unknown length projects its picked rows: the same states."""
    config = tiny_config(**dict(DEBERTA, position_buckets=4))  # span 4 < 7 tokens
    static, values = run(config)
    with tf.Graph().as_default():
        ids = tf1.placeholder(tf.int32, [None, None])
        mask = tf1.placeholder(tf.int32, [None, None])
        model = modeling.BertModel(config, False, ids, mask)
        with tf1.Session() as session:
            for variable in tf1.global_variables():
                variable.load(values[modeling.variable_name(variable)], session)
            dynamic = session.run(model.get_sequence_output(), {ids: IDS, mask: MASK})
    real = MASK.astype(bool)
    np.testing.assert_allclose(dynamic[real], static[real], atol=1e-5)
    assert not relative_attention.picks_rows_first(7, 4)
    assert relative_attention.picks_rows_first(None, 4)
