"""Windowed and chunked attention (model/long_attention.py): the masked square's
values and gradients, in blocks and chunks, and no [seq, seq] tensor where the
point is not to have one."""

import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit.model import long_attention, modeling

tf1 = tf.compat.v1
BF16_STEP = 2.0 ** -7  # the spacing of bf16 numbers in [1, 2)


def inputs(seq, batch=2, heads=3, width=8, padding=5, seed=0):
    """query, key, value [batch, heads, seq, width] (query at transformers' scale,
    wide enough that attention is far from uniform), and an input mask whose last
    row ends in `padding` padding positions."""
    rng = np.random.RandomState(seed)
    query, key, value = (rng.normal(0, 1, [batch, heads, seq, width]).astype(np.float32)
                         for _ in range(3))
    mask = np.ones([batch, seq], np.int32)
    mask[-1, seq - padding:] = 0
    return query, key, value, mask


def numpy_reference(query, key, value, mask, window):
    """Softmax attention where query i sees key j iff |i - j| <= window // 2 (None:
    every j) and j is real: [batch, seq, heads, width]."""
    seq = query.shape[2]
    scores = query @ np.swapaxes(key, -1, -2)
    allowed = mask[:, None, None, :].astype(bool)
    if window is not None:
        distance = np.abs(np.arange(seq)[:, None] - np.arange(seq)[None, :])
        allowed = allowed & (distance <= window // 2)
    scores = np.where(allowed, scores, -1e30)  # finite: padding rows see no key
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    return np.transpose(probs @ value, [0, 2, 1, 3])


def square_reference(query, key, value, mask_bias, window):
    """The masked square in TensorFlow (modeling's probabilities), for gradients."""
    if window is not None:
        mask_bias = mask_bias + long_attention.window_mask_bias(tf.shape(query)[2], window)
    scores = tf.matmul(query, key, transpose_b=True)
    probs = modeling.attention_probabilities(scores, mask_bias, 0.0)
    return tf.transpose(tf.matmul(tf.cast(probs, value.dtype), value), [0, 2, 1, 3])


def values_and_gradients(attend, window, seq, dtype=tf.float32, **input_args):
    """(numpy reference, [context, d query, d key, d value] of `attend` and of the
    TensorFlow square), the loss a random projection of the real rows' contexts
    (padding rows' outputs are nobody's concern)."""
    query, key, value, mask = inputs(seq, **input_args)
    weights = np.random.RandomState(9).normal(size=np.transpose(query, [0, 2, 1, 3]).shape)
    weights *= mask[:, :, None, None]
    with tf.Graph().as_default():
        # Fed, not constants: grappler would fold a graph of constants with other
        # kernels than oneDNN's, and bf16 roundings would differ between the graphs.
        fed = [tf1.placeholder(tf.float32, query.shape) for _ in range(3)]
        tensors = [tf.cast(x, dtype) for x in fed]
        mask_bias = modeling.attention_mask_bias(tf.constant(mask))
        results = []
        for function in (attend, lambda *args: square_reference(*args, window)):
            context = function(*tensors, mask_bias)
            assert context.dtype == dtype
            loss = tf.reduce_sum(tf.cast(context, tf.float32) * weights)
            results.append([context] + tf.gradients(loss, tensors))
        with tf1.Session() as session:
            got, want = session.run([[tf.cast(t, tf.float32) for t in r] for r in results],
                                    dict(zip(fed, (query, key, value))))
    real = mask.astype(bool)
    return numpy_reference(query, key, value, mask, window)[real], got, want, real


def assert_matches(got, want, real, atol):
    """Context at the real rows and the three gradients equal."""
    np.testing.assert_allclose(got[0][real], want[0][real], atol=atol, rtol=atol)
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g, w, atol=atol, rtol=atol)


@pytest.mark.parametrize("seq,window,block_rows", [
    (200, 16, None),   # blocks of 16 rows, one neighbour each side
    (203, 16, 5),      # odd length, blocks narrower than the half window: 2 neighbours
    (150, 9, None),    # an odd window (half 4) in MIN_BLOCK_ROWS-row blocks
    (37, 8, None),     # too short for blocks: the square with a band
    (40, 300, None),   # a window longer than the row: plain attention
    (120, 1, None),    # window // 2 == 0: each position sees itself only
])
def test_windowed_attention_is_the_masked_square(seq, window, block_rows):
    def attend(query, key, value, mask_bias):
        return long_attention.windowed_attention(query, key, value, mask_bias, window,
                                                 block_rows=block_rows)
    reference, got, want, real = values_and_gradients(attend, window, seq)
    np.testing.assert_allclose(want[0][real], reference, atol=1e-5)  # the reference's rule
    assert_matches(got, want, real, atol=2e-5)


def test_the_window_rule_is_transformers_sliding_window():
    """ModernBERT's local_attention 128: query i sees keys i - 64 .. i + 64."""
    with tf.Graph().as_default(), tf1.Session() as session:
        band = session.run(long_attention.window_mask_bias(300, 128))
    row = band[150]
    assert (row[86:215] == 0).all() and (row[:86] < -1000).all() and (row[215:] < -1000).all()


def test_windowed_blocks_without_a_mask_and_with_a_block_per_row():
    """key_mask_bias None, and rows padded up to whole blocks of 64."""
    seq, window = 130, 128
    query, key, value, _ = inputs(seq, padding=0)
    with tf.Graph().as_default(), tf1.Session() as session:
        context = long_attention.windowed_attention(
            *[tf.constant(x) for x in (query, key, value)], None, window, block_rows=64)
        got = session.run(context)
    np.testing.assert_allclose(got, numpy_reference(query, key, value, np.ones([2, seq]),
                                                    window), atol=1e-5)


@pytest.mark.parametrize("seq,chunk_rows", [(64, 16), (101, 32), (50, 64)])
def test_chunked_attention_is_the_square(seq, chunk_rows):
    def attend(query, key, value, mask_bias):
        return long_attention.chunked_attention(query, key, value, mask_bias, chunk_rows)
    reference, got, want, real = values_and_gradients(attend, None, seq)
    np.testing.assert_allclose(got[0][real], reference, atol=1e-5)
    assert_matches(got, want, real, atol=2e-5)


@pytest.mark.parametrize("fuse", [False, True])
@pytest.mark.parametrize("kind", ["windowed", "chunked"])
def test_bf16_inputs_within_bf16_rounding(kind, fuse):
    """bf16 query, key and value (fuse: the XLA kernels of a bf16 training graph)
    against float32 from the same rounded inputs."""
    seq = 160

    def attend(query, key, value, mask_bias):
        if kind == "windowed":
            return long_attention.windowed_attention(query, key, value, mask_bias, 32,
                                                     fuse=fuse)
        return long_attention.chunked_attention(query, key, value, mask_bias, 48, fuse=fuse)
    window = 32 if kind == "windowed" else None
    _, got, want, real = values_and_gradients(attend, window, seq, tf.bfloat16)
    # Chunks add the key and value gradients of their rows in float32, the square
    # in one matmul: a bf16 step of the largest gradient.
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=BF16_STEP * np.abs(w).max())


@pytest.mark.parametrize("kind", ["chunked", "windowed"])
def test_dropout_is_recomputed_with_the_forward_mask(kind):
    """With dropout, the backward pass recomputes the probabilities (each chunk's, or
    the blocks'): it must draw the forward's mask again. value = the identity makes
    the context the dropped probabilities P, and d value = P^T @ d context: both
    from one run."""
    seq, rate, chunk_rows = 96, 0.3, 16  # 96: the windows run in blocks
    rng = np.random.RandomState(4)
    query = rng.normal(0, 1, [1, 2, seq, seq]).astype(np.float32)
    key = rng.normal(0, 1, [1, 2, seq, seq]).astype(np.float32)
    value = np.broadcast_to(np.eye(seq, dtype=np.float32), [1, 2, seq, seq])
    d_context = rng.normal(size=[1, seq, 2, seq]).astype(np.float32)
    with tf.Graph().as_default():
        tf1.set_random_seed(5)
        tensors = [tf.constant(x) for x in (query, key, value)]
        if kind == "chunked":
            context = long_attention.chunked_attention(*tensors, None, chunk_rows, rate)
        else:  # blocks of 16 rows, each position seeing 16 either side
            context = long_attention.windowed_attention(*tensors, None, 32, rate)
        (d_value,) = tf.gradients(context, tensors[2], grad_ys=tf.constant(d_context))
        with tf1.Session() as session:
            context, d_value = session.run([context, d_value])
    probs = np.transpose(context, [0, 2, 1, 3])  # [1, heads, seq, seq]
    expected = np.swapaxes(probs, -1, -2) @ np.transpose(d_context, [0, 2, 1, 3])
    np.testing.assert_allclose(d_value, expected, rtol=1e-4, atol=1e-5)
    window = np.abs(np.arange(seq)[:, None] - np.arange(seq)[None, :]) <= (
        seq if kind == "chunked" else 16)
    dropped = (probs == 0)[..., window]
    assert abs(dropped.mean() - rate) < 0.05
    dropped = probs == 0
    # Each chunk (block) draws its own mask.
    first, second = dropped[..., :chunk_rows, :], dropped[..., chunk_rows:2 * chunk_rows, :]
    assert (first != second).mean() > 0.2


def graph_outputs(graph, top=None):
    """Every op output of `graph` and of the functions its ops run (loop bodies and
    conditions, cond branches): the chunks' loops keep their work there."""
    top = top or graph
    for op in graph.get_operations():
        yield from op.outputs
        for attr in op.node_def.attr.values():
            if attr.HasField("func"):
                function = graph._get_function(attr.func.name) or \
                    top._get_function(attr.func.name)
                if getattr(function, "graph", None) is not None:
                    yield from graph_outputs(function.graph, top)


def square_shaped_outputs(graph, seq):
    """The op outputs whose last two dimensions are both `seq`."""
    return [output.name for output in graph_outputs(graph)
            if output.shape.rank is not None and output.shape.rank >= 2
            and output.shape[-1] == seq and output.shape[-2] == seq]


def attention_graph(attend, seq, dtype=tf.float32):
    """A graph holding `attend`'s forward and gradient at batch 1, 12 heads, width 64."""
    graph = tf.Graph()
    with graph.as_default():
        tensors = [tf1.placeholder(dtype, [1, 12, seq, 64]) for _ in range(3)]
        mask_bias = modeling.attention_mask_bias(tf1.placeholder(tf.int32, [1, seq]))
        context = attend(*tensors, mask_bias)
        tf.gradients(tf.reduce_sum(tf.cast(context, tf.float32)), tensors)
    return graph


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_no_seq_by_seq_tensor_at_4096_tokens(dtype):
    """Memory, as a property of the graph: forward and backward of the chunked and
    the windowed attention at 4,096 tokens hold no [.., 4096, 4096] tensor (the
    plain square's graph does: the check sees one)."""
    seq, fuse = 4096, dtype == tf.bfloat16
    square = attention_graph(lambda q, k, v, b: square_reference(q, k, v, b, None), seq)
    assert square_shaped_outputs(square, seq)
    # One chunk of every row: the square inside the loops, which the walk sees too.
    one_chunk = attention_graph(
        lambda q, k, v, b: long_attention.chunked_attention(q, k, v, b, seq), seq)
    assert square_shaped_outputs(one_chunk, seq)
    for attend in (
            lambda q, k, v, b: long_attention.chunked_attention(q, k, v, b, fuse=fuse),
            lambda q, k, v, b: long_attention.full_attention(q, k, v, b, fuse=fuse),
            lambda q, k, v, b: long_attention.windowed_attention(q, k, v, b, 128, fuse=fuse)):
        assert square_shaped_outputs(attention_graph(attend, seq, dtype), seq) == []


@pytest.mark.parametrize("fed_seq", [40, 200])
@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_a_length_unknown_while_building_runs_blocks_and_chunks(fed_seq, dtype):
    """Batches trimmed to their longest text reach the model with an unknown length:
    blocks and chunks then, at any length fed, the square's values and gradients
    (bf16: the fused kernels of a bf16 training graph, whose gradients a tf.cond
    would break)."""
    query, key, value, mask = inputs(fed_seq)
    weights = np.random.RandomState(2).normal(size=[2, fed_seq, 3, 8])
    fuse = dtype == tf.bfloat16
    with tf.Graph().as_default():
        fed = [tf1.placeholder(tf.float32, [2, 3, None, 8]) for _ in range(3)]
        tensors = [tf.cast(x, dtype) for x in fed]
        input_mask = tf1.placeholder(tf.int32, [2, None])
        mask_bias = modeling.attention_mask_bias(input_mask)
        window = 16  # blocks of 16 rows, each scoring 48 keys
        results = []
        for attend in (
                lambda *a: long_attention.windowed_attention(*a, window, fuse=fuse),
                lambda *a: square_reference(*a, window),
                lambda *a: long_attention.full_attention(*a, fuse=fuse, chunk_rows=48),
                lambda *a: square_reference(*a, None)):
            context = tf.cast(attend(*tensors, mask_bias), tf.float32)
            loss = tf.reduce_sum(context * weights * tf.cast(input_mask, tf.float32)[
                :, :, None, None])
            results.append([context] + [tf.cast(g, tf.float32)
                                        for g in tf.gradients(loss, tensors)])
        with tf1.Session() as session:
            feed = dict(zip(fed, (query, key, value)))
            feed[input_mask] = mask
            windowed, windowed_square, full, full_square = session.run(results, feed)
    real = mask.astype(bool)
    for got, want in ((windowed, windowed_square), (full, full_square)):
        if dtype == tf.float32:
            assert_matches(got, want, real, atol=2e-5)
        else:
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, atol=2 * BF16_STEP * np.abs(w).max())


def test_full_attention_is_the_square_below_the_chunking_length():
    short = long_attention.CHUNKED_MIN_SEQ // 2
    graph = attention_graph(lambda q, k, v, b: long_attention.full_attention(q, k, v, b),
                            short)
    assert square_shaped_outputs(graph, short)


def test_block_rule_and_the_keys_each_row_scores():
    assert long_attention.block_layout(128) == (64, 1)
    assert long_attention.block_layout(128, 16) == (16, 4)
    assert long_attention.block_layout(1) == (long_attention.MIN_BLOCK_ROWS, 0)
    # ModernBERT's 128 window: blocks from twice their 192-key span.
    assert not long_attention.uses_blocks(256, 128)
    assert long_attention.uses_blocks(384, 128)
    assert long_attention.scored_keys(256, 128) == 256
    assert long_attention.scored_keys(8192, 128) == 192
    assert long_attention.attention_flops(8192, 768, 128) == 4 * 8192 * 192 * 768


def test_chunked_attention_trains_in_a_tf1_graph():
    """An optimizer's minimize through the custom gradient moves a variable the loss
    depends on, as under the Estimator."""
    seq = 40
    query, key, value, mask = inputs(seq, padding=3)
    with tf.Graph().as_default():
        projection = tf1.get_variable("projection", initializer=np.eye(8, dtype=np.float32))
        heads = [tf.einsum("bhsw,wv->bhsv", tf.constant(x), projection)
                 for x in (query, key, value)]
        context = long_attention.chunked_attention(
            *heads, modeling.attention_mask_bias(tf.constant(mask)), 16)
        loss = tf.reduce_sum(tf.square(context))
        step = tf1.train.GradientDescentOptimizer(1e-3).minimize(loss)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            before = session.run(loss)
            session.run(step)
            after = session.run(loss)
    assert after < before


@pytest.mark.parametrize("max_length, blocks, chunks", [
    (None, True, True), (256, False, False), (512, True, False),
    (long_attention.CHUNKED_MIN_SEQ, True, True)])
def test_an_unknown_length_is_judged_by_its_bound(monkeypatch, max_length, blocks, chunks):
    """A batch cut to its longest text has no static length; the run's max_seq_length
    bounds it, and below the blocks' and chunks' thresholds the squares run."""
    ran = []
    monkeypatch.setattr(long_attention, "_blocked", lambda *a: ran.append("blocks") or a[0])
    monkeypatch.setattr(long_attention, "chunked_attention",
                        lambda *a, **k: ran.append("chunks") or a[0])
    with tf.Graph().as_default():
        query, key, value = [tf1.placeholder(tf.float32, [2, 3, None, 8]) for _ in range(3)]
        long_attention.windowed_attention(query, key, value, None, 128,
                                          max_length=max_length)
        long_attention.full_attention(query, key, value, None, max_length=max_length)
    assert ("blocks" in ran, "chunks" in ran) == (blocks, chunks)
