"""DeBERTa's relative positions (Hugging Face's deberta-v2: DeBERTa-v3, mDeBERTa-v3).

DeBERTa has no position table in its embeddings. Each attention score of query
position i and key position j gets two terms besides q_i . k_j, read from one
table of relative-position embeddings that the whole encoder shares
(`bert/encoder/rel_embeddings`, layer-normed by `bert/encoder/rel_embeddings_LayerNorm`):

    content->position  q_i . key(R[row(i - j)])     (the layer's own key projection)
    position->content  k_j . query(R[row(i - j)])   (the layer's own query projection)

all three divided by sqrt(3 * head_size). row(d) is the table row of the distance
d = i - j: with `position_buckets` k > 0, distances within k / 2 keep their own
row and longer ones share rows on a log scale up to `max_relative_positions`
(`log_bucket`); the table has 2 k rows (2 * max_relative_positions without
buckets), distance 0 at row k.

How it is computed here (`skewed_products`, `combine`): the table rows of the 2 s
distances a sequence of s tokens spans are picked once ([2 s, hidden], the same
for every example and layer), projected by each layer, and multiplied with the
queries and the keys, one matmul per head over the batch's tokens ([heads, batch,
s, 2 s] each); a reshape and two slices then shift row i of each product by i
("skew", as Transformer-XL does it), which turns "query i, distance d" into
"query i, key j". No [batch, heads, seq, seq] index tensor and no gather over the
batch: the products cost 2 s columns where transformers' cost 2 k (fewer for
s < k), and the shift is a copy each way.
"""

import collections

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1

RelativePositions = collections.namedtuple("RelativePositions", [
    "table", "index", "rows", "dropout_prob"])
"""What every layer's attention reads: table [2 k, hidden], layer-normed (compute
dtype); index int32 [2 s], the table row of each distance c - s for c in [0, 2 s)
(`sequence_rows`); rows [2 s, hidden], those rows picked once for all layers when
there are fewer of them than table rows (2 s < 2 k), else None (each layer then
projects the table and picks from the projections: fewer rows to project at
s > k); dropout_prob, the dropout each layer applies to what it projects
(transformers' pos_dropout drops the table: with picked rows, two distances that
share a bucket get masks of their own)."""


def picks_rows_first(seq_length, span):
    """Whether a sequence of seq_length (an int, or None when unknown) projects its
    picked rows (2 s of them) rather than the table (2 k): where 2 s <= 2 k."""
    return seq_length is None or seq_length <= span


def attention_span(position_buckets, max_relative_positions, max_position_embeddings):
    """k: half the table's rows. The buckets when there are any, else
    max_relative_positions (max_position_embeddings when that is below 1)."""
    if position_buckets is not None and position_buckets > 0:
        return position_buckets
    if max_relative_positions is not None and max_relative_positions >= 1:
        return max_relative_positions
    return max_position_embeddings


def max_distance(max_relative_positions, max_position_embeddings):
    """The distance the log buckets reach their last row at."""
    if max_relative_positions is not None and max_relative_positions >= 1:
        return max_relative_positions
    return max_position_embeddings


def log_bucket(distance, position_buckets, max_position):
    """DeBERTa's log-bucketed relative positions (numpy, any int array of distances):
    |d| <= k / 2 (k = position_buckets) stays d; longer distances map to
    sign(d) * (k / 2 + ceil(log(|d| / (k / 2)) / log((max_position - 1) / (k / 2))
    * (k / 2 - 1))), computed in float32 as transformers does (the same rows
    wherever a product lands next to an integer)."""
    distance = np.asarray(distance, dtype=np.int64)
    mid = position_buckets // 2
    sign = np.sign(distance)
    near = (distance < mid) & (distance > -mid)
    magnitude = np.where(near, mid - 1, np.abs(distance)).astype(np.float32)
    with np.errstate(divide="ignore"):
        ratio = np.log(magnitude / np.float32(mid)) / np.log(
            np.float32((max_position - 1) / mid))
    far = np.ceil(ratio * np.float32(mid - 1)) + np.float32(mid)
    return np.where(np.abs(distance) <= mid, distance, (far * sign).astype(np.int64))


def distance_rows(position_buckets, max_relative_positions, max_position_embeddings):
    """int32 [2 L] (L = max_position_embeddings): the table row of each distance
    d = index - L, d in [-L, L - 1]: the (bucketed) distance plus the span k,
    clipped to the table's [0, 2 k - 1] as transformers clips it."""
    span = attention_span(position_buckets, max_relative_positions, max_position_embeddings)
    distance = np.arange(-max_position_embeddings, max_position_embeddings)
    if position_buckets is not None and position_buckets > 0:
        distance = log_bucket(distance, position_buckets,
                              max_distance(max_relative_positions, max_position_embeddings))
    return np.clip(distance + span, 0, 2 * span - 1).astype(np.int32)


def sequence_rows(all_rows, seq_length, max_position_embeddings):
    """int32 [2 s]: the table row of distance c - s for c in [0, 2 s) (s = seq_length,
    an int or a scalar tensor), sliced from distance_rows' constant."""
    start = max_position_embeddings - seq_length
    return tf.slice(tf.constant(all_rows), [start], [2 * seq_length])


def relative_table(hidden_size, span, initializer_range):
    """The variable rel_embeddings [2 span, hidden] (float32), in the current scope."""
    return tf1.get_variable("rel_embeddings", [2 * span, hidden_size], dtype=tf.float32,
                            initializer=tf1.truncated_normal_initializer(
                                stddev=initializer_range))


def _zeros(leading, last, dtype):
    return tf.zeros(tf.concat([leading, [last]], 0), dtype)


def skew(products, offset):
    """[..., s, 2 s] -> [..., s, s]: out[..., a, b] = products[..., a, b + offset - a].

    Row a shifted left by a - offset, by reading the flattened rows with a stride
    of 2 s - 1 instead of 2 s: a reshape and two slices, no index tensor. Its gradient
    (_unskew) puts the rows back with concatenations: TensorFlow's own, a Pad, took
    14 ms for one [12, 8, 128, 256] bf16 tensor on two cores, the concatenations
    0.5 ms."""
    shape = tf.shape(products)
    seq_length = shape[-2]
    leading = shape[:-2]

    @tf.custom_gradient
    def apply(products):
        flat = tf.reshape(products, tf.concat([leading, [-1]], 0))
        window = tf.slice(flat, tf.concat([tf.zeros_like(leading), [offset]], 0),
                          tf.concat([leading, [seq_length * (2 * seq_length - 1)]], 0))
        rows = tf.reshape(window, tf.concat([leading, [seq_length, 2 * seq_length - 1]], 0))
        return rows[..., :seq_length], lambda d_skewed: _unskew(d_skewed, offset)
    return apply(products)


def _unskew(skewed, offset):
    """skew's transpose: [..., s, s] -> [..., s, 2 s], each value back where skew read
    it, zeros elsewhere."""
    shape = tf.shape(skewed)
    seq_length, leading = shape[-1], shape[:-2]
    rows = tf.concat([skewed, tf.zeros(tf.concat([leading, [seq_length, seq_length - 1]], 0),
                                       skewed.dtype)], -1)
    flat = tf.reshape(rows, tf.concat([leading, [-1]], 0))
    after = 2 * seq_length * seq_length - offset - seq_length * (2 * seq_length - 1)
    flat = tf.concat([_zeros(leading, offset, skewed.dtype), flat,
                      _zeros(leading, after, skewed.dtype)], -1)
    return tf.reshape(flat, tf.concat([leading, [seq_length, 2 * seq_length]], 0))


def skewed_products(query, key, position_query, position_key):
    """The content->position and position->content terms, each [heads, batch, s, s].

    Args:
      query, key: [batch, heads, s, head_size] (the query already scaled).
      position_query, position_key: [heads, 2 s, head_size]: the query and key
        projections of the table rows of distances c - s, c in [0, 2 s)
        (position_query scaled as the query is).
    Returns:
      (to_position, from_position) in the inputs' dtype: to_position[h, b, i, j] =
      query_i . position_key[distance i - j], from_position[h, b, j, i] = key_j .
      position_query[distance i - j] (`combine` adds them to the scores). Heads lead:
      each product is one matmul per head over every token of the batch, [heads,
      batch * s, 2 s] (no broadcast over the batch, whose gradient would be a sum
      over it), which the skew then shifts into place.
    """
    heads, head_size = tf.shape(position_key)[0], tf.shape(position_key)[2]
    shape = tf.shape(query)
    seq_length = shape[2]

    def by_head(states):  # [batch, heads, s, d] -> [heads, batch * s, d]
        return tf.reshape(tf.transpose(states, [1, 0, 2, 3]), [heads, -1, head_size])

    def products(states, positions):
        flat = tf.matmul(by_head(states), positions, transpose_b=True)
        return tf.reshape(flat, [heads, shape[0], seq_length, -1])

    # Content->position: column c of row i must be distance i - j for j = c + i - (s - 1)
    # after the skew, so the columns run from distance s - 1 down to -s.
    to_position = skew(products(query, tf.reverse(position_key, [1])), seq_length - 1)
    # Position->content: row j, column c is distance c - s; skewed by s it is key j's
    # score for query i = c + j - s.
    from_position = skew(products(key, position_query), seq_length)
    return to_position, from_position


def combine(to_position, from_position):
    """skewed_products' two terms as scores [batch, heads, s, s]: scores[b, h, i, j] =
    query_i . position_key[d] + key_j . position_query[d], d the distance i - j. Two
    transposes and a sum, which XLA fuses into the attention's kernel
    (fused.relative_attention_probs)."""
    terms = to_position + tf.linalg.matrix_transpose(from_position)
    return tf.transpose(terms, [1, 0, 2, 3])


def position_scores(query, key, position_query, position_key):
    """The content->position plus position->content terms [batch, heads, s, s] in the
    inputs' dtype (skewed_products' arguments)."""
    return combine(*skewed_products(query, key, position_query, position_key))
