"""Attention for long rows: sliding windows in blocks, and full attention in chunks.

BERT's attention (layers._attend) multiplies every query by every key: a
[batch, heads, seq, seq] tensor of scores, and in training its probabilities
kept for the backward pass. At 512 tokens that is cheap; at 8,192 (ModernBERT's
positions) one layer's probabilities take 3.2 GB in float32 for 12 heads.

- windowed_attention: each position attends to the keys within window // 2
  positions of it (ModernBERT's local layers). The rows are cut into blocks and
  each block multiplies only its own and its neighbour blocks' keys, so work and
  memory grow as seq * window, not seq^2.
- chunked_attention: every position attends to every key (ModernBERT's global
  layers), the queries in chunks; the backward pass recomputes each chunk's
  probabilities instead of keeping them, so no more than one chunk's [heads,
  chunk_rows, seq] probabilities exist at a time, forward or backward.
- full_attention: the plain square below CHUNKED_MIN_SEQ, chunks from there.

A length unknown while the graph is built (training and prediction batches are
cut to their longest text) is judged by its bound, the run's max_seq_length
(`max_length`); with no bound it runs blocks and chunks, whatever it turns out to be.

All three take and return what layers._attend does: query, key, value
[batch, heads, seq, head] in the compute dtype (the query already scaled), an
additive float32 key mask [batch, 1, 1, seq] (layers.attention_mask_bias:
0 where attended, -10000 where not) or None; context [batch, seq, heads, head]
in the compute dtype. Softmax and masks in float32; `fuse` runs the mask,
softmax and dropout as fused.attention_probs' XLA kernels (bf16 training).
"""

import tensorflow as tf

from bert_toolkit.model import fused, layers

# The additive bias of a key a query may not see, as layers.attention_mask_bias's.
MASKED = -10000.0

# A length known while building from which chunks run (exports; training batches,
# of unknown length, always run them). In training the square is faster at every
# length (chunks recompute the scores: 1.2-1.4x its time, docs/long_inputs.md) but
# keeps its probabilities: 12 heads, float32, 50 MB a global layer at 1,024 rows,
# 800 MB at 4,096. Forward only, as in an export, chunks do the square's products
# once (not timed separately) and bound its memory.
CHUNKED_MIN_SEQ = 1024

# Query rows per chunk of chunked_attention: [heads, 512, 8192] float32 scores
# are 200 MB for 12 heads, the square 3.2 GB.
DEFAULT_CHUNK_ROWS = 512

# The smallest block of windowed_attention: narrower windows run in blocks of this
# many rows (more keys masked per block, but fewer, larger matmuls).
MIN_BLOCK_ROWS = 16


def window_mask_bias(seq_length, window):
    """float32 [seq, seq]: 0 where |i - j| <= window // 2 (query i may see key j),
    MASKED elsewhere. ModernBERT's local rule: transformers' sliding window mask
    with sliding_window = local_attention // 2, inclusive."""
    positions = tf.range(seq_length)
    distance = tf.abs(positions[:, tf.newaxis] - positions[tf.newaxis, :])
    return tf.where(distance <= window // 2, 0.0, MASKED)


def _context(probs, value):
    """probs [..., rows, keys] @ value [..., keys, head] in the value's dtype."""
    return tf.matmul(tf.cast(probs, value.dtype), value)


def square_attention(query, key, value, mask_bias, dropout_prob=0.0, fuse=False):
    """The plain square, layers._attend, with any float32 mask_bias broadcasting to
    [batch, heads, seq, seq] (a key mask, a band): context [batch, seq, heads, head]."""
    scores = tf.matmul(query, key, transpose_b=True)
    probs = layers.attention_probabilities(scores, mask_bias, dropout_prob, fuse)
    return tf.transpose(_context(probs, value), [0, 2, 1, 3])


def _static_length(tensor):
    """The static length (axis 2) of a [batch, heads, seq, head] tensor, or None."""
    return tf.compat.dimension_value(tensor.shape[2])


def _key_bias(key_mask_bias, batch_size, seq_length):
    """float32 [batch, seq] key bias from [batch, 1, 1, seq] (zeros for None)."""
    if key_mask_bias is None:
        return tf.zeros([batch_size, seq_length], tf.float32)
    return tf.reshape(key_mask_bias, [batch_size, seq_length])


def block_layout(window, block_rows=None):
    """(rows, neighbours): windowed_attention's block height and the blocks each
    side a block reads, so that rows * neighbours >= window // 2. Each query row
    then scores (2 * neighbours + 1) * rows keys, the wider of which are masked."""
    half = window // 2
    rows = block_rows or max(half, MIN_BLOCK_ROWS)
    return rows, -(-half // rows)


def scored_keys(seq_length, window, block_rows=None):
    """The keys each query row multiplies in windowed_attention at `seq_length`
    (for FLOP counts): the whole row when it runs as a square, else its blocks'
    span."""
    if not uses_blocks(seq_length, window, block_rows):
        return seq_length
    rows, neighbours = block_layout(window, block_rows)
    return (2 * neighbours + 1) * rows


def blocks_min_length(window, block_rows=None):
    """The shortest row windowed_attention runs in blocks: twice the keys a block
    scores (below, the square with a band mask costs less: docs/long_inputs.md)."""
    rows, neighbours = block_layout(window, block_rows)
    return 2 * (2 * neighbours + 1) * rows


def uses_blocks(seq_length, window, block_rows=None):
    """Whether windowed_attention runs in blocks at a row of `seq_length`."""
    return seq_length >= blocks_min_length(window, block_rows)


def _rows(x, start, size):
    """x[:, :, start:start + size] as tf.slice, whose gradient is a pad: the
    gradient of the strided slice the subscript makes (StridedSliceGrad) took
    four fifths of a windowed layer's time."""
    rank = x.shape.ndims
    return tf.slice(x, [0, 0, start] + [0] * (rank - 3), [-1, -1, size] + [-1] * (rank - 3))


def _neighbourhoods(x, rows, neighbours, blocks, batch_size, heads, width):
    """x [batch, heads, (blocks + 2 * neighbours) * rows, width] -> each block's
    keys [batch, heads, blocks, (2 * neighbours + 1) * rows, width]: its own rows
    with `neighbours` blocks either side (consecutive, in position order)."""
    split = tf.reshape(x, [batch_size, heads, blocks + 2 * neighbours, rows, width])
    shifted = [_rows(split, shift, blocks) for shift in range(2 * neighbours + 1)]
    return tf.concat(shifted, axis=3)


def _band_bias(rows, neighbours, window):
    """float32 [rows, span]: row r of a block may see span column c (the key at
    c - neighbours * rows - r positions from it) within window // 2."""
    span = (2 * neighbours + 1) * rows
    offset = tf.range(span)[tf.newaxis, :] - neighbours * rows - tf.range(rows)[:, tf.newaxis]
    return tf.where(tf.abs(offset) <= window // 2, 0.0, MASKED)


def windowed_attention(query, key, value, key_mask_bias, window, dropout_prob=0.0,
                       fuse=False, block_rows=None, max_length=None):
    """Sliding-window attention: position i attends to keys j with |i - j| <=
    window // 2 (and key_mask_bias 0), as ModernBERT's local layers.

    Args:
      query, key, value: [batch, heads, seq, head] in the compute dtype, the query
        already scaled.
      key_mask_bias: float32 [batch, 1, 1, seq] (layers.attention_mask_bias of an
        input mask), or None.
      window: ModernBERT's local_attention (the whole window; 128 in the base model).
      dropout_prob: attention dropout on the probabilities (0 outside training); in
        blocks drawn by fused.attention_probs' hashed masks (an XLA kernel even
        without `fuse`), which the gradient's recomputation draws again.
      fuse: the mask, softmax and dropout as XLA kernels (modeling.fuses_elementwise).
      block_rows: rows per block (default window // 2, at least MIN_BLOCK_ROWS).
      max_length: the longest the rows can be when their length is unknown while
        building (batches cut to their longest text: the run's max_seq_length).
    Returns:
      context [batch, seq, heads, head] in the value's dtype.

    A window covering the row is plain attention, a row shorter than twice the
    blocks' key span (uses_blocks) a square with a band mask; longer rows, and rows
    of a length unknown while building, run in blocks: [blocks, rows] queries each
    against (2 * neighbours + 1) * rows keys, the rows padded up to whole blocks
    (the padding masked).
    """
    seq_length = _static_length(query)
    longest = _longest(query, max_length)
    if longest is not None and longest - 1 <= window // 2:
        return square_attention(query, key, value, key_mask_bias, dropout_prob, fuse)

    def band():
        length = seq_length if seq_length is not None else tf.shape(query)[2]
        bias = window_mask_bias(length, window)
        bias = bias if key_mask_bias is None else key_mask_bias + bias
        return square_attention(query, key, value, bias, dropout_prob, fuse)

    def blocks():
        return _blocked(query, key, value, key_mask_bias, window, dropout_prob, fuse,
                        block_rows)
    return _by_length(query, blocks_min_length(window, block_rows), band, blocks, max_length)


def _longest(query, max_length):
    """The longest the rows of `query` [batch, heads, seq, head] can be: their static
    length, else `max_length` (None: unbounded)."""
    seq_length = _static_length(query)
    return seq_length if seq_length is not None else max_length


def _by_length(query, min_length, short, long, max_length=None):
    """short() for rows of `query` [batch, heads, seq, head] shorter than min_length,
    else long(). A length unknown while the graph is built (batches cut to their
    longest text, input_pipeline.trim_to_longest) is judged by its bound
    `max_length` (the run's max_seq_length); with none it takes long(), right at
    every length (docs/long_inputs.md): a tf.cond choosing at run time put a
    "PredictCost" warning per layer from grappler on the console of bf16 runs, and
    the fused kernels' gradients cannot cross it."""
    longest = _longest(query, max_length)
    return short() if longest is not None and longest < min_length else long()


def _probabilities(scores, mask_bias, dropout, fuse):
    """layers.attention_probabilities with a dropout drawn before (hashed_dropout's
    (seed, threshold, scale), or None), so that a recomputation draws the same mask:
    fused.attention_probs' hashed masks (an XLA kernel even without `fuse`)."""
    # Inside the chunks' loops grappler's shape inference loses the scores' rank,
    # and its cost model then logged a warning per loop for TensorFlow's Softmax
    # (fused.attention_probs' forward without dropout): EnsureShape restates it.
    scores = tf.ensure_shape(scores, [None] * scores.shape.rank)
    if dropout is None:
        return layers.attention_probabilities(scores, mask_bias, 0.0, fuse)
    return fused.attention_probs(scores, mask_bias, dropout)


def _recomputed(function, *tensors):
    """function(*tensors), a tensor, whose gradient recomputes it from `tensors`
    instead of keeping its intermediates for the backward pass. Every tensor the
    function reads is one of `tensors`, so that it also works under control flow:
    inside a tf.cond, a gradient reading a tensor by closure got it as a
    placeholder nothing feeds (TensorFlow 2.15 and 2.21)."""
    @tf.custom_gradient
    def apply(*tensors):
        def gradient(d_result):
            inputs = [tf.identity(t) for t in tensors]
            return tf.gradients(function(*inputs), inputs, grad_ys=d_result)  # None for ints
        return function(*tensors), gradient
    # Identities: tensors made here (see above).
    return apply(*(tf.identity(t) for t in tensors))


def _blocked(query, key, value, key_mask_bias, window, dropout_prob, fuse, block_rows):
    """windowed_attention in blocks (see there): [batch, seq, heads, head]. The
    gradient recomputes the blocks' keys, scores and probabilities: kept, the three
    copies of the keys and values and the probabilities are about 7,000 floats a
    token at ModernBERT-base's shape, a sixth of what a whole layer keeps."""
    batch_size, heads, seq_length, width = layers.get_shape_list(query, expected_rank=4)
    rows, neighbours = block_layout(window, block_rows)
    blocks = (seq_length + rows - 1) // rows
    tail = blocks * rows - seq_length  # padding rows after the last position
    edge = neighbours * rows  # keys before the first block and after the last
    span = (2 * neighbours + 1) * rows
    key_bias = tf.pad(_key_bias(key_mask_bias, batch_size, seq_length),
                      [[0, 0], [edge, edge + tail]], constant_values=MASKED)
    key_bias = _neighbourhoods(key_bias[:, tf.newaxis, :, tf.newaxis], rows, neighbours,
                               blocks, batch_size, 1, 1)  # [batch, 1, blocks, span, 1]
    bias = tf.reshape(key_bias, [batch_size, 1, blocks, 1, span]) \
        + _band_bias(rows, neighbours, window)
    # Scores and bias as [batch, heads or 1, blocks * rows, span]: the fused kernels' layout.
    bias = tf.reshape(bias, [batch_size, 1, blocks * rows, span])
    dropout = layers.hashed_dropout(dropout_prob) if dropout_prob else None
    seed = dropout[0] if dropout else tf.zeros([2], tf.int32)

    def attend(query, key, value, bias, seed):
        # The blocks as one batch of [rows, head] @ [head, span] products.
        queries = tf.reshape(tf.pad(query, [[0, 0], [0, 0], [0, tail], [0, 0]]),
                             [-1, rows, width])
        keys, values = [tf.reshape(_neighbourhoods(
            tf.pad(x, [[0, 0], [0, 0], [edge, edge + tail], [0, 0]]), rows, neighbours,
            blocks, batch_size, heads, width), [-1, span, width]) for x in (key, value)]
        scores = tf.reshape(tf.matmul(queries, keys, transpose_b=True),
                            [batch_size, heads, blocks * rows, span])
        probs = _probabilities(scores, tf.stop_gradient(bias),
                               (seed,) + dropout[1:] if dropout else None, fuse)
        context = _context(tf.reshape(probs, [-1, rows, span]), values)
        return _rows(tf.reshape(context, [batch_size, heads, blocks * rows, width]), 0,
                     seq_length)
    return tf.transpose(_recomputed(attend, query, key, value, bias, seed), [0, 2, 1, 3])


def full_attention(query, key, value, key_mask_bias, dropout_prob=0.0, fuse=False,
                   chunk_rows=DEFAULT_CHUNK_ROWS, max_length=None):
    """Attention to every key (ModernBERT's global layers): layers._attend's square
    for rows shorter than CHUNKED_MIN_SEQ, chunked_attention from there and for a
    length unknown while building with no `max_length` (windowed_attention's) below
    it. Arguments and result as chunked_attention's."""
    def square():
        return square_attention(query, key, value, key_mask_bias, dropout_prob, fuse)

    def chunked():
        return chunked_attention(query, key, value, key_mask_bias, chunk_rows, dropout_prob,
                                 fuse)
    return _by_length(query, CHUNKED_MIN_SEQ, square, chunked, max_length)


def _chunk_dropout(dropout, index):
    """The hashed dropout of chunk `index`: the step's seed moved by the index, so
    chunks draw different masks and a chunk's recomputation draws its own again."""
    seed, threshold, scale = dropout
    return seed + tf.stack([0, index]), threshold, scale


def _to_chunks(x, chunk_rows, chunks):
    """[batch, heads, seq, head] -> [chunks, batch, heads, chunk_rows, head], the
    rows padded with zeros up to whole chunks."""
    batch_size, heads, seq_length, width = layers.get_shape_list(x, expected_rank=4)
    padded = tf.pad(x, [[0, 0], [0, 0], [0, chunks * chunk_rows - seq_length], [0, 0]])
    split = tf.reshape(padded, [batch_size, heads, chunks, chunk_rows, width])
    return tf.transpose(split, [2, 0, 1, 3, 4])


def _from_chunks(chunked, seq_length):
    """_to_chunks' inverse: [chunks, batch, heads, rows, head] -> [batch, heads, seq,
    head]."""
    chunks, batch_size, heads, rows, width = layers.get_shape_list(chunked, expected_rank=5)
    merged = tf.reshape(tf.transpose(chunked, [1, 2, 0, 3, 4]),
                        [batch_size, heads, chunks * rows, width])
    return _rows(merged, 0, seq_length)


def chunked_attention(query, key, value, key_mask_bias, chunk_rows=DEFAULT_CHUNK_ROWS,
                      dropout_prob=0.0, fuse=False):
    """Full attention with the queries in chunks of `chunk_rows` rows, whose gradient
    recomputes each chunk's probabilities instead of keeping them.

    Args:
      query, key, value: [batch, heads, seq, head] in the compute dtype, the query
        already scaled; seq static or not.
      key_mask_bias: float32 [batch, 1, 1, seq], or None.
      dropout_prob: attention dropout, drawn by fused.attention_probs' hashed
        masks (an XLA kernel even without `fuse`), which the recomputation draws
        again; a rate 16 bits do not hold (layers.hashed_dropout) drops nothing.
      fuse: the mask and softmax as fused.attention_probs' kernels.
    Returns:
      context [batch, seq, heads, head] in the value's dtype.

    Forward and backward are loops over the chunks, one iteration at a time, so
    at most one chunk's [batch, heads, chunk_rows, seq] scores and probabilities
    exist at once: peak memory O(chunk_rows * seq * heads). The backward pass
    repeats the forward's score matmul and softmax: 4/3 of a square's attention
    matmul FLOPs over a training step.
    """
    dropout = layers.hashed_dropout(dropout_prob) if dropout_prob else None
    mask_bias = tf.zeros([1, 1, 1, 1]) if key_mask_bias is None else key_mask_bias
    seed = dropout[0] if dropout else tf.zeros([2], tf.int32)

    def chunk_context(query_rows, key, value, mask_bias, seed, index):
        """query_rows [batch, heads, chunk_rows, head] -> their context, same shape."""
        scores = tf.matmul(query_rows, key, transpose_b=True)
        chunk_dropout = _chunk_dropout((seed,) + dropout[1:], index) if dropout else None
        return _context(_probabilities(scores, mask_bias, chunk_dropout, fuse), value)

    seq_length = layers.get_shape_list(query, expected_rank=4)[2]
    # A row shorter than a chunk is one chunk of its length (a length unknown while
    # building: batches trimmed to their longest text).
    rows = min(chunk_rows, seq_length) if isinstance(seq_length, int) else \
        tf.minimum(chunk_rows, seq_length)
    chunks = (seq_length + rows - 1) // rows

    @tf.custom_gradient
    def attend(query, key, value, mask_bias, seed):
        contexts = tf.map_fn(
            lambda args: chunk_context(args[0], key, value, mask_bias, seed, args[1]),
            (_to_chunks(query, rows, chunks), tf.range(chunks)),
            fn_output_signature=value.dtype, parallel_iterations=1)

        def gradient(d_context):
            queries = _to_chunks(query, rows, chunks)
            d_contexts = _to_chunks(d_context, rows, chunks)

            def step(index, d_key, d_value, d_queries):
                # The loop body's own copies of the tensors it differentiates by.
                query_rows, key_rows, value_rows = (tf.identity(x) for x in (
                    tf.gather(queries, index), key, value))
                recomputed = chunk_context(query_rows, key_rows, value_rows, mask_bias, seed,
                                           index)
                d_rows = tf.gradients(recomputed, [query_rows, key_rows, value_rows],
                                      grad_ys=tf.gather(d_contexts, index))
                # Summed in float32: bf16 partial sums of many chunks lose bits.
                return (index + 1, d_key + tf.cast(d_rows[1], tf.float32),
                        d_value + tf.cast(d_rows[2], tf.float32),
                        d_queries.write(index, d_rows[0]))

            zeros = tf.zeros(tf.shape(key), tf.float32)
            _, d_key, d_value, d_queries = tf.while_loop(
                lambda index, *_: index < chunks, step,
                [tf.constant(0), zeros, zeros, tf.TensorArray(query.dtype, size=chunks)],
                parallel_iterations=1)
            d_query = _from_chunks(d_queries.stack(), seq_length)
            return (d_query, tf.cast(d_key, key.dtype), tf.cast(d_value, value.dtype), None,
                    None)
        return _from_chunks(contexts, seq_length), gradient

    # Identities: see _recomputed.
    context = attend(*(tf.identity(x) for x in (query, key, value, mask_bias, seed)))
    return tf.transpose(context, [0, 2, 1, 3])


def attention_flops(seq_length, hidden_size, window=None, block_rows=None):
    """Forward matmul FLOPs of one layer's two attention products on one example:
    2 * 2 * seq * keys * hidden, keys the row (full attention) or what
    windowed_attention scores (scored_keys, `window` given)."""
    keys = seq_length if window is None else scored_keys(seq_length, window, block_rows)
    return 2 * 2 * seq_length * keys * hidden_size

