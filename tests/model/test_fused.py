"""The XLA-compiled element-wise chains of a bf16 training step (model/fused.py):
the same values and gradients as the unfused ops, and only in training graphs."""

import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit.model import fused, modeling

from tiny import tiny_config

tf1 = tf.compat.v1
BF16_STEP = 2.0 ** -7  # the spacing of bf16 numbers in [1, 2)


def bf16(values):
    return tf.cast(tf.constant(values, tf.float32), tf.bfloat16)


def run(fetches):
    with tf1.Session() as session:
        return session.run(fetches)


def as_float(tensors):
    return [tf.cast(t, tf.float32) for t in tensors]


@pytest.mark.parametrize("name", ["gelu", "gelu_exact"])
def test_a_fused_biased_activation_is_the_float32_one_rounded(name):
    """The fused GELU(x + bias) and its gradients are float32's from the same bf16
    inputs, rounded to bf16 (the unfused bf16 graph rounds x + bias first)."""
    fp32_function = modeling.get_activation(name).fp32_function
    x = np.linspace(-6.0, 6.0, 242).astype(np.float32).reshape(121, 2)
    bias, dy = np.array([0.25, -0.5], np.float32), np.full_like(x, 3.0)
    with tf.Graph().as_default():
        x16, bias32 = bf16(x), tf.constant(bias)
        y = fused.biased_activation(fp32_function)(x16, bias32)
        gradients = tf.gradients(y, [x16, bias32], grad_ys=bf16(dy))
        assert y.dtype == gradients[0].dtype == tf.bfloat16
        assert gradients[1].dtype == tf.float32
        x32 = tf.cast(x16, tf.float32)
        expected = fp32_function(x32 + bias32)
        expected_gradients = tf.gradients(expected, [x32, bias32],
                                          grad_ys=tf.cast(bf16(dy), tf.float32))
        values = run([as_float([y] + gradients), [expected] + expected_gradients])
    # bf16's rounding, and XLA's erf and tanh may differ from TensorFlow's in
    # float32's last bits.
    for got, want in zip(*values):
        np.testing.assert_allclose(got, want, rtol=BF16_STEP, atol=1e-5)


@pytest.mark.parametrize("rate,keep_probabilities", [(0.3, True), (0.0, True), (0.3, False)])
def test_fused_attention_probs_mask_softmax_and_dropout_as_float32(rate, keep_probabilities):
    """The kernels' probabilities and gradient are float32's; the backward one reads
    the forward's probabilities (CPUs) or recomputes them (GPUs) and draws the same
    mask (or none at rate 0)."""
    rng = np.random.RandomState(0)
    scores = rng.normal(0, 3, [2, 3, 5, 5]).astype(np.float32)
    mask = np.ones([2, 5], np.int32)
    mask[1, 3:] = 0
    d_probs = rng.normal(size=scores.shape).astype(np.float32)
    with tf.Graph().as_default():
        tf1.set_random_seed(1)
        scores16 = bf16(scores)
        mask_bias = modeling.attention_mask_bias(tf.constant(mask))
        dropout = modeling.hashed_dropout(rate)
        probs = fused.attention_probs(scores16, mask_bias, dropout, keep_probabilities)
        (d_scores,) = tf.gradients(probs, scores16, grad_ys=bf16(d_probs))
        assert probs.dtype == d_scores.dtype == tf.bfloat16
        # The same in float32 ops from the same bf16 inputs, with the mask that the
        # forward pass's zeros show: the backward pass must have used it too.
        scores32 = tf.cast(scores16, tf.float32)
        expected = tf.nn.softmax(scores32 + mask_bias)
        keep = tf.cast(tf.not_equal(probs, 0), tf.float32) * (dropout[2] if rate else 1.0)
        (expected_d,) = tf.gradients(expected * keep, scores32,
                                     grad_ys=tf.cast(bf16(d_probs), tf.float32))
        probs, d_scores, expected, keep, expected_d = run(
            as_float([probs, d_scores]) + [expected, keep, expected_d])
    np.testing.assert_allclose(probs, expected * keep, rtol=BF16_STEP, atol=1e-5)
    np.testing.assert_allclose(d_scores, expected_d, rtol=BF16_STEP, atol=1e-5)
    assert (probs[1, :, :, 3:] < 1e-6).all()
    dropped = (keep[:, :, :, :3] == 0).mean()
    assert 0.1 < dropped < 0.5 if rate else dropped == 0


def test_hashed_dropout_rates_and_a_new_mask_each_step():
    """The in-kernel masks drop at the rate asked for (in 1/65536ths), differ
    between calls and between steps, and scale what they keep."""
    ones = np.ones([4, 12, 64, 64], np.float32)
    with tf.Graph().as_default():
        tf1.set_random_seed(3)
        x = bf16(ones)
        outputs = {rate: [fused.attention_probs(x, None, modeling.hashed_dropout(rate))
                          for _ in range(2)] for rate in (0.1, 0.5)}
        with tf1.Session() as session:
            steps = [session.run(as_float(sum(outputs.values(), []))) for _ in range(2)]
    (a, b, c, d), (a_next, _, _, _) = steps
    for (first, second), rate in (((a, b), 0.1), ((c, d), 0.5)):
        for probs in (first, second):
            dropped = probs == 0
            assert abs(dropped.mean() - rate) < 0.005, (rate, dropped.mean())
            kept = probs[~dropped] * 64  # softmax of equal scores over 64 keys
            np.testing.assert_allclose(kept, 1 / (1 - rate), rtol=BF16_STEP)
        # Two calls: masks as unrelated as two independent draws.
        assert abs(((first == 0) & (second == 0)).mean() - rate ** 2) < 0.005
    assert ((a == 0) != (a_next == 0)).mean() > 0.1  # the next step draws anew


@pytest.mark.parametrize("rate", [0.25, 0.0])
def test_fused_bias_dropout_add_layer_norm_and_its_five_gradients(rate):
    rng = np.random.RandomState(1)
    x, residual = (rng.normal(0, 2, [6, 64]).astype(np.float32) for _ in range(2))
    bias, gamma, beta = (rng.normal(m, 0.3, [64]).astype(np.float32) for m in (0, 1, 0))
    dy = rng.normal(size=x.shape).astype(np.float32)
    with tf.Graph().as_default():
        tf1.set_random_seed(2)
        inputs = [bf16(x), tf.constant(bias), bf16(residual), tf.constant(gamma),
                  tf.constant(beta)]
        dropout = modeling.hashed_dropout(rate)
        y = fused.bias_dropout_add_layer_norm(*inputs, dropout)
        gradients = tf.gradients(y, inputs, grad_ys=bf16(dy))
        assert y.dtype == tf.bfloat16
        assert [g.dtype for g in gradients] == [tf.bfloat16, tf.float32, tf.bfloat16,
                                                tf.float32, tf.float32]
        # The same seed on ones, with no bias, residual or affine: what the mask
        # keeps comes out above its row's mean, what it drops below.
        probe = fused.bias_dropout_add_layer_norm(
            bf16(np.ones_like(x)), tf.zeros([64]), bf16(np.zeros_like(x)), tf.ones([64]),
            tf.zeros([64]), dropout)
        keep = (tf.cast(probe > 0, tf.float32) * dropout[2] if rate
                else tf.ones_like(probe, tf.float32))
        # The same in float32 ops from the same bf16 inputs, with that mask.
        x32, bias32, residual32, gamma32, beta32 = as_float(inputs)
        hidden = (x32 + bias32) * keep + residual32
        mean, variance = tf.nn.moments(hidden, axes=[-1], keepdims=True)
        expected = (hidden - mean) * tf.math.rsqrt(variance + 1e-12) * gamma32 + beta32
        expected_gradients = tf.gradients(
            expected, [x32, bias32, residual32, gamma32, beta32],
            grad_ys=tf.cast(bf16(dy), tf.float32))
        values, expected_values, keep = run(
            [as_float([y] + gradients), [expected] + expected_gradients, keep])
    if rate:
        assert 0.15 < (keep == 0).mean() < 0.35
    for got, want in zip(values, expected_values):
        np.testing.assert_allclose(got, want, rtol=2 * BF16_STEP, atol=2e-2)


def compiled_calls(graph):
    return [op for op in graph.get_operations()
            if op.type in ("PartitionedCall", "StatefulPartitionedCall")]


def bert_graph(is_training, compute_dtype, skip_padding=False, **overrides):
    config = tiny_config(**overrides)
    with tf.Graph().as_default() as graph:
        ids = tf.constant(np.random.RandomState(0).randint(0, config.vocab_size, [2, 8]))
        mask = tf.constant([[1] * 8, [1] * 3 + [0] * 5])
        model = modeling.BertModel(config, is_training, ids, mask,
                                   compute_dtype=compute_dtype, skip_padding=skip_padding)
        if is_training:
            tf.gradients(tf.reduce_sum(model.get_pooled_output()), tf1.trainable_variables())
    return graph


def test_only_a_bf16_training_graph_is_fused():
    """Per layer: the GELU, the attention's softmax and two layer norms, each
    forward and backward, except a dropout-free softmax's forward (TensorFlow's
    kernel); an inference graph (what is exported) has none."""
    layers = tiny_config().num_hidden_layers
    assert len(compiled_calls(bert_graph(True, tf.bfloat16,
                                         attention_probs_dropout_prob=0.1))) == 2 * 4 * layers
    assert len(compiled_calls(bert_graph(True, tf.bfloat16))) == (2 * 4 - 1) * layers
    assert not compiled_calls(bert_graph(True, tf.float32))
    assert not compiled_calls(bert_graph(False, tf.bfloat16))


def test_fused_packing_rounds_the_token_count_with_padding_positions():
    mask = np.zeros([4, 200], np.int32)
    mask[0, :70], mask[1, :5], mask[2, :90], mask[3, :100] = 1, 1, 1, 1  # 265 real
    with tf.Graph().as_default():
        exact = modeling.token_packing(tf.constant(mask))
        rounded = modeling.token_packing(tf.constant(mask), row_multiple=256)
        everything = modeling.token_packing(tf.constant(mask[:, :60]), row_multiple=256)
        exact, rounded, everything = run([exact, rounded, everything])
    real = np.flatnonzero(mask.reshape(-1))
    np.testing.assert_array_equal(exact.rows, real)
    assert len(rounded.rows) == 512 and rounded.packed
    np.testing.assert_array_equal(rounded.rows[:265], real)
    assert not mask.reshape(-1)[rounded.rows[265:]].any()  # padding positions, once each
    assert len(set(rounded.rows)) == 512
    assert sorted(everything.rows) == list(range(240))  # capped at batch * seq


@pytest.mark.parametrize("real_tokens", [8, 2])
def test_packing_passes_a_dense_gradient_back(real_tokens):
    """The gradient through pack_tokens is a dense tensor equal to tf.gather's, with a
    row of padding (packed) and with none (passed through): IndexedSlices there made
    every layer densify its gradient in a pass of its own."""
    mask = np.array([[1] * 8, [1] * real_tokens + [0] * (8 - real_tokens)], np.int32)
    rng = np.random.RandomState(0)
    with tf.Graph().as_default():
        x = tf.constant(rng.normal(size=[16, 4]).astype(np.float32))
        weights = tf.constant(rng.normal(size=[4, 4]).astype(np.float32))
        packing = modeling.token_packing(tf.constant(mask))

        def loss(rows):
            return tf.reduce_sum(tf.square(tf.matmul(rows, weights)))
        (packed_gradient,) = tf.gradients(loss(modeling.pack_tokens(x, packing)), x)
        (gather_gradient,) = tf.gradients(loss(tf.gather(x, packing.rows)), x)
        assert isinstance(packed_gradient, tf.Tensor)
        packed, ours, expected = run([packing.packed, packed_gradient,
                                      tf.convert_to_tensor(gather_gradient)])
    assert packed == (real_tokens < 8)
    np.testing.assert_allclose(ours, expected, rtol=1e-6)


def test_fused_softmax_cross_entropy_and_its_gradients_are_float32s():
    """The masked-LM loss kernel: -log softmax(logits + bias) at the labels and its
    gradients to the bf16 logits and the float32 bias, as TensorFlow's float32 ops
    compute them from the same bf16 logits."""
    rng = np.random.RandomState(3)
    logits = rng.normal(0, 4, [7, 300]).astype(np.float32)
    bias = rng.normal(0, 1, [300]).astype(np.float32)
    labels = np.array([0, 299, 5, 5, 120, 7, 64], np.int32)
    d_loss = rng.uniform(0.5, 2, [7]).astype(np.float32)
    with tf.Graph().as_default():
        logits16, bias32 = bf16(logits), tf.constant(bias)
        loss = fused.softmax_cross_entropy(logits16, bias32, tf.constant(labels))
        gradients = tf.gradients(loss, [logits16, bias32], grad_ys=tf.constant(d_loss))
        assert loss.dtype == tf.float32 and gradients[0].dtype == tf.bfloat16
        logits32 = tf.cast(logits16, tf.float32)
        expected = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.constant(labels), logits=logits32 + bias32)
        expected_gradients = tf.gradients(expected, [logits32, bias32],
                                          grad_ys=tf.constant(d_loss))
        values = run([as_float([loss] + gradients), [expected] + expected_gradients])
    for got, want in zip(*values):
        np.testing.assert_allclose(got, want, rtol=BF16_STEP, atol=1e-3)
