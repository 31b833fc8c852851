"""The encoder's building blocks, the same for every family: activations, shapes,
dropout, dense layers, layer norms, the word-embedding lookup, the padding skip
(token packing) and scaled dot-product attention.

Variables are float32 and created under the caller's variable scope; the
computation runs in the input's dtype (the compute dtype), with softmax and
layer normalisation in float32. The names Google's modeling.py had (`gelu`,
`dropout`, `layer_norm`, `get_shape_list`, ...) keep its arguments, and
modeling.py re-exports them, so `modeling.dropout` is this module's.
"""

import collections

import tensorflow as tf

from bert_toolkit.errors import InputError
from bert_toolkit.model import fused, relative_attention

tf1 = tf.compat.v1


def computed_in_fp32(function):
    """`function` (an elementwise float32 op) for any float dtype: a bfloat16 input
    is cast to float32, the function and its gradient run there, and the result
    is cast back (fp16 inputs, a GPU's, stay as they are).

    TensorFlow's CPU kernels for elementwise bf16 ops are slow (no vectorised
    bf16 arithmetic): the GELU's backward pass (Erf, Exp and a handful of
    multiplies over [tokens, intermediate]) in bf16 took a quarter of a MiniLM
    bf16 training step; in float32 the step is 1.16x faster (docs/performance.md)."""
    @tf.custom_gradient
    def low_precision(x):
        x32 = tf.cast(x, tf.float32)
        y32 = function(x32)

        def gradient(dy):
            (dx,) = tf.gradients(y32, x32, grad_ys=tf.cast(dy, tf.float32))
            return tf.cast(dx, x.dtype)
        return tf.cast(y32, x.dtype), gradient

    def apply(x):
        return low_precision(x) if x.dtype == tf.bfloat16 else function(x)
    apply.fp32_function = function  # for fused.biased_activation
    return apply


@computed_in_fp32
def gelu(x):
    """Google's GELU, the tanh approximation:
    x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))."""
    return tf.nn.gelu(x, approximate=True)


@computed_in_fp32
def gelu_exact(x):
    """The erf GELU: x * 0.5 * (1 + erf(x / sqrt(2)))."""
    return tf.nn.gelu(x, approximate=False)


# hidden_act name -> function (None: no activation).
_ACTIVATIONS = {
    "gelu": gelu,
    "gelu_new": gelu,
    "gelu_exact": gelu_exact,
    "relu": tf.nn.relu,
    "tanh": tf.tanh,
    "linear": None,
}


_COMPUTE_DTYPES = {"float32": tf.float32, "float16": tf.float16, "bfloat16": tf.bfloat16}


def get_compute_dtype(precision):
    """Maps a precision name ("fp32", "fp16", "bf16" or a dtype name) to a tf.DType."""
    aliases = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
    name = aliases.get(precision, precision)
    if name not in _COMPUTE_DTYPES:
        raise InputError("precision must be one of fp32, fp16, bf16, got %r" % (precision,))
    return _COMPUTE_DTYPES[name]


def get_activation(activation_string):
    """The function for a `hidden_act` name, as Google's get_activation.

    A value that is not a string (a function) is returned as it is; None, ""
    and "linear" give None (no activation). Raises ValueError (an InputError)
    for an unknown name.
    """
    if not isinstance(activation_string, str):
        return activation_string
    name = activation_string.lower()
    if not name:
        return None
    if name not in _ACTIVATIONS:
        raise InputError("unknown activation %r (expected one of %s)"
                         % (activation_string, ", ".join(sorted(_ACTIVATIONS))))
    return _ACTIVATIONS[name]


def pooler_activation(config):
    """The pooler's activation function for the config's family (families.py)."""
    return get_activation(config.family.pooler_activation)


def masked_mean(states, input_mask):
    """float32 [batch, hidden]: the mean of `states` [batch, seq, hidden] (any float
    dtype) over the real tokens of `input_mask` int [batch, seq] (a row without any:
    zeros)."""
    weights = tf.cast(input_mask, tf.float32)[:, :, tf.newaxis]  # [batch, seq, 1]
    total = tf.reduce_sum(tf.cast(states, tf.float32) * weights, axis=1)
    return total / tf.maximum(tf.reduce_sum(weights, axis=1), 1.0)


def create_initializer(initializer_range=0.02):
    return tf1.truncated_normal_initializer(stddev=initializer_range)


def assert_rank(tensor, expected_rank, name=None):
    """Raises ValueError if the static rank of `tensor` is not in `expected_rank`."""
    expected = {expected_rank} if isinstance(expected_rank, int) else set(expected_rank)
    actual = tensor.shape.ndims
    if actual not in expected:
        raise ValueError("tensor %s has rank %s, expected one of %s"
                         % (name or tensor.name, actual, sorted(expected)))


def get_shape_list(tensor, expected_rank=None, name=None):
    """Static dimensions where known, scalar tensors where dynamic."""
    if expected_rank is not None:
        assert_rank(tensor, expected_rank, name)
    shape = tensor.shape.as_list()
    dynamic = tf.shape(tensor)
    return [dim if dim is not None else dynamic[i] for i, dim in enumerate(shape)]


def reshape_to_matrix(input_tensor):
    """[..., width] -> [rows, width] (a rank-2 tensor is returned as it is)."""
    ndims = input_tensor.shape.ndims
    if ndims < 2:
        raise ValueError("Input tensor must have at least rank 2. Shape = %s"
                         % input_tensor.shape)
    if ndims == 2:
        return input_tensor
    return tf.reshape(input_tensor, [-1, input_tensor.shape[-1]])


def reshape_from_matrix(output_tensor, orig_shape_list):
    """[rows, width] back to orig_shape_list[:-1] + [width]."""
    if len(orig_shape_list) == 2:
        return output_tensor
    width = get_shape_list(output_tensor)[-1]
    return tf.reshape(output_tensor, list(orig_shape_list[0:-1]) + [width])


# Dropout draws 16 random bits per element instead of a float32 (tf.nn.dropout):
# half the random numbers, and no int-to-float conversion. The drop probability
# is then a multiple of 1/65536 (0.1 becomes 6554/65536 = 0.1000061).
_MASK_LEVELS = 1 << 16


def dropout_threshold(dropout_prob):
    """The 16-bit threshold below which an element is dropped, or None when
    `dropout_prob` is too close to 0 or 1 for 16 bits."""
    threshold = int(round(dropout_prob * _MASK_LEVELS))
    return threshold if 0 < threshold < _MASK_LEVELS else None


def _kept_scale(threshold):
    """The scale of the elements a 16-bit mask with `threshold` keeps: 1 / their share."""
    return float(_MASK_LEVELS) / (_MASK_LEVELS - threshold)


def _keep_mask(shape, size, dropout_prob):
    """(bool keep mask of `shape`, the scale of the kept elements)."""
    threshold = dropout_threshold(dropout_prob)
    if threshold is None:
        # float32 whatever the input's dtype: a bfloat16 uniform has 8 bits, so
        # tf.nn.dropout on bfloat16 drops 0.8% at rate 1e-6.
        return (tf1.random_uniform(shape, dtype=tf.float32) >= dropout_prob,
                1.0 / (1.0 - dropout_prob))
    # A stateful draw seeds the stateless full-range one, so masks change every
    # step and follow the graph seed, like tf.nn.dropout's.
    seed = tf1.random_uniform([2], maxval=tf.int32.max, dtype=tf.int32)
    words = tf.random.stateless_uniform([(size + 1) // 2], seed, minval=None, maxval=None,
                                        dtype=tf.uint32)
    halves = tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size]
    return tf.reshape(halves >= threshold, shape), _kept_scale(threshold)


def hashed_dropout(dropout_prob):
    """The dropout of a fused kernel (fused.attention_probs): None for no dropout,
    else (a fresh seed: int32 [2], the 16-bit threshold, the kept elements' scale).
    The seed is drawn by a stateful op, so the masks change every step and follow
    the graph seed. None also for a rate outside 16 bits: see fuses_dropout."""
    threshold = dropout_threshold(dropout_prob) if dropout_prob else None
    if threshold is None:
        return None
    seed = tf1.random_uniform([2], maxval=tf.int32.max, dtype=tf.int32)
    return seed, threshold, _kept_scale(threshold)


def fuses_dropout(dropout_prob):
    """Whether a fused kernel can drop at `dropout_prob`: 0, or a rate 16 bits hold."""
    return not dropout_prob or dropout_threshold(dropout_prob) is not None


def dropout(input_tensor, dropout_prob):
    """Dropout with drop probability `dropout_prob`; a no-op for None or 0 (so eval
    and inference graphs stay lean).

    Kept elements are scaled by 1 / (the mask's keep probability), so the
    expectation is the input's exactly. Any shape and float dtype.
    """
    if dropout_prob is None or dropout_prob == 0.0:
        return input_tensor
    keep, scale = _keep_mask(tf.shape(input_tensor), tf.size(input_tensor), dropout_prob)
    # The mask with its scale in one select of two scalars, applied by one multiply;
    # the gradient is then one multiply by the same mask (a select between the
    # input and a tensor of zeros took three passes each way).
    dtype = input_tensor.dtype
    mask = tf.where(keep, tf.constant(scale, dtype), tf.constant(0, dtype))
    return input_tensor * mask


def unbiased_dense(x, units, name, initializer_range=0.02):
    """(x @ kernel [rows, units] in x's dtype, the float32 bias [units]) of a dense
    layer with float32 variables `name/kernel` [in, units] and `name/bias` [units].

    Args:
      x: [rows, in] in the compute dtype.
    """
    with tf1.variable_scope(name):
        kernel = tf1.get_variable("kernel", [x.shape[-1], units], dtype=tf.float32,
                                  initializer=create_initializer(initializer_range))
        bias = tf1.get_variable("bias", [units], dtype=tf.float32,
                                initializer=tf1.zeros_initializer())
    return tf.matmul(x, tf.cast(kernel, x.dtype)), bias


def dense(x, units, name, initializer_range=0.02, activation=None, fuse=False):
    """A dense layer with float32 variables `name/kernel` [in, units], `name/bias` [units].

    Args:
      x: [rows, in] in the compute dtype; the result [rows, units] has the same dtype.
      fuse: the bias and an activation of computed_in_fp32 as one XLA kernel each
        way (fused.biased_activation).
    """
    y, bias = unbiased_dense(x, units, name, initializer_range)
    if fuse and hasattr(activation, "fp32_function"):
        return fused.biased_activation(activation.fp32_function)(y, bias)
    y = tf.nn.bias_add(y, tf.cast(bias, x.dtype))
    return activation(y) if activation is not None else y


def _layer_norm_variables(hidden, name=None):
    """(gamma, beta), float32 [hidden], of the layer norm `name` (None: "LayerNorm")."""
    with tf1.variable_scope(name or "LayerNorm"):
        beta = tf1.get_variable("beta", [hidden], dtype=tf.float32,
                                initializer=tf1.zeros_initializer())
        gamma = tf1.get_variable("gamma", [hidden], dtype=tf.float32,
                                 initializer=tf1.ones_initializer())
    return gamma, beta


def dense_dropout_add_layer_norm(x, residual, dropout_prob, initializer_range=0.02,
                                 fuse=False, epsilon=1e-12):
    """layer_norm(dropout(dense(x)) + residual), the variables under dense/ and
    LayerNorm/: x [rows, in] and residual [rows, hidden] in the compute dtype, the
    result [rows, hidden] too. `fuse`: all but the matmul as one XLA kernel each
    way (fused.bias_dropout_add_layer_norm)."""
    hidden_size = residual.shape[-1]
    if not (fuse and fuses_dropout(dropout_prob)):
        projected = dense(x, hidden_size, "dense", initializer_range)
        return layer_norm(dropout(projected, dropout_prob) + residual, epsilon=epsilon)
    projected, bias = unbiased_dense(x, hidden_size, "dense", initializer_range)
    gamma, beta = _layer_norm_variables(hidden_size)
    return fused.bias_dropout_add_layer_norm(projected, bias, residual, gamma, beta,
                                             hashed_dropout(dropout_prob), epsilon)


def layer_norm(input_tensor, name=None, epsilon=1e-12, output_dtype=None):
    """Layer normalisation over the last axis, computed in float32.

    Variables `<name>/gamma`, `<name>/beta` [hidden] (name None: "LayerNorm"),
    as in Google's checkpoints. Returns `output_dtype` (default: the input's).
    """
    gamma, beta = _layer_norm_variables(input_tensor.shape[-1], name)
    return tf.cast(_scaled_standardization(input_tensor, gamma, epsilon) + beta,
                   output_dtype or input_tensor.dtype)


def _scaled_standardization(input_tensor, gamma, epsilon):
    """float32 (x - mean) / std * gamma over the last axis of input_tensor [..., hidden]
    (any float dtype), gamma float32 [hidden]: both layer norms' arithmetic."""
    x32 = tf.cast(input_tensor, tf.float32)
    mean, variance = tf.nn.moments(x32, axes=[-1], keepdims=True)
    # rsqrt * gamma bracketed: written left to right, with oneDNN on, grappler's
    # layer-norm matcher takes this graph for its own pattern and aborts the process
    # when the input comes straight from a fed tensor (TensorFlow 2.15.1).
    return (x32 - mean) * (tf.math.rsqrt(variance + epsilon) * gamma)


def layer_norm_and_dropout(input_tensor, dropout_prob, name=None):
    """layer_norm, then dropout."""
    return dropout(layer_norm(input_tensor, name), dropout_prob)


def kernel_dense(x, units, name, initializer_range=0.02):
    """x @ kernel of a dense layer without bias (variable `name/kernel` [in, units],
    float32): x [rows, in] in the compute dtype -> [rows, units] in the same dtype.
    ModernBERT's layers have no biases."""
    with tf1.variable_scope(name):
        kernel = tf1.get_variable("kernel", [x.shape[-1], units], dtype=tf.float32,
                                  initializer=create_initializer(initializer_range))
    return tf.matmul(x, tf.cast(kernel, x.dtype))


def gamma_variable(hidden, name=None):
    """The float32 [hidden] gamma of the bias-free layer norm `name` ("LayerNorm")."""
    with tf1.variable_scope(name or "LayerNorm"):
        return tf1.get_variable("gamma", [hidden], dtype=tf.float32,
                                initializer=tf1.ones_initializer())


def pre_norm(x, epsilon=1e-5, fuse=False, name=None):
    """bias_free_layer_norm of x [rows, hidden] in its dtype; `fuse`: as one XLA kernel
    each way (fused.bias_free_layer_norm)."""
    if not fuse:
        return bias_free_layer_norm(x, name, epsilon)
    return fused.bias_free_layer_norm(x, gamma_variable(x.shape[-1], name), epsilon)


def bias_free_layer_norm(input_tensor, name=None, epsilon=1e-5, output_dtype=None):
    """Layer normalisation without beta (ModernBERT's norm_bias false): variable
    `<name>/gamma` [hidden] (name None: "LayerNorm"); computed in float32 over the last
    axis of input_tensor [..., hidden]; returns `output_dtype` (default: the input's)."""
    gamma = gamma_variable(input_tensor.shape[-1], name)
    return tf.cast(_scaled_standardization(input_tensor, gamma, epsilon),
                   output_dtype or input_tensor.dtype)


def embedding_lookup(input_ids, vocab_size, embedding_size=128, initializer_range=0.02,
                     word_embedding_name="word_embeddings", use_one_hot_embeddings=False):
    """Looks up word embeddings (Google's signature and variable).

    Args:
      input_ids: int [batch, seq], or [batch, seq, k] (the k embeddings of a
        position are concatenated).
    Returns:
      (float32 [batch, seq, k * embedding_size], the table [vocab_size, embedding_size]).
    """
    table = tf1.get_variable(word_embedding_name, [vocab_size, embedding_size],
                             initializer=create_initializer(initializer_range))
    if input_ids.shape.ndims == 2:
        input_ids = input_ids[:, :, tf.newaxis]
    flat_ids = tf.reshape(input_ids, [-1])
    if use_one_hot_embeddings:
        looked_up = tf.matmul(tf.one_hot(flat_ids, depth=vocab_size), table)
    else:
        looked_up = tf.gather(table, flat_ids)
    shape = get_shape_list(input_ids)
    return tf.reshape(looked_up, shape[0:-1] + [shape[-1] * embedding_size]), table


def attention_mask_bias(mask):
    """Additive float32 mask: 0 where attended, -10000 where not.

    mask: an input_mask [batch, to_seq] -> [batch, 1, 1, to_seq]; or a mask from
    create_attention_mask_from_input_mask [batch, from_seq, to_seq] ->
    [batch, 1, from_seq, to_seq]. None -> None (attend everywhere).
    """
    if mask is None:
        return None
    mask = tf.cast(mask, tf.float32)
    mask = mask[:, tf.newaxis, tf.newaxis, :] if mask.shape.ndims == 2 else mask[:, tf.newaxis]
    return (1.0 - mask) * -10000.0


TokenPacking = collections.namedtuple("TokenPacking", ["rows", "padded_rows", "packed"])
"""Where a batch's real tokens sit among its [batch * seq] positions (token_packing)."""


# Packing and unpacking cost about what 8% of the tokens cost in a bf16 training
# step (MiniLM, measured on a batch without padding): below a tenth of padding the
# encoder runs on the padded batch.
PACKING_MIN_PADDING = 0.1


# A bf16 training graph's fused element-wise functions are compiled by XLA once per
# shape, so there the packed token count is rounded up to a multiple of this
# (with padding positions): at most batch * seq / 256 shapes instead of one per batch.
FUSED_PACKING_ROWS = 256


def token_packing(input_mask, row_multiple=1):
    """The packing of a batch's real tokens, for the encoder to skip its padding.

    Only the attention products need the [batch, seq] layout; every other op of a
    layer works token by token, so it can run on the real tokens alone: on real
    text, half of a batch padded to its longest sentence is padding.

    Args:
      input_mask: int [batch, seq], nonzero for real tokens.
    Returns:
      TokenPacking(rows: int64 [tokens], the real tokens' positions in the
      flattened [batch * seq] order; padded_rows: int64 scalar, batch * seq;
      packed: bool scalar, whether at least
      PACKING_MIN_PADDING of the positions are padding, so that packing pays).
      With `row_multiple` > 1, `rows` also holds the first padding positions that
      round its length up to a multiple of it (or to batch * seq).
    """
    flat_mask = tf.reshape(input_mask, [-1])
    positions = tf.size(flat_mask, out_type=tf.int64)
    if row_multiple == 1:
        rows = tf.reshape(tf.where(tf.not_equal(flat_mask, 0)), [-1])
    else:
        padding = tf.cast(tf.equal(flat_mask, 0), tf.int32)
        real = positions - tf.reduce_sum(tf.cast(padding, tf.int64))
        rounded = tf.minimum((real + row_multiple - 1) // row_multiple * row_multiple,
                             positions)
        # The real positions in order, then the padding's.
        rows = tf.cast(tf.argsort(padding, stable=True), tf.int64)[:rounded]
    packed = tf.cast(tf.size(rows, out_type=tf.int64), tf.float32) <= \
        (1.0 - PACKING_MIN_PADDING) * tf.cast(positions, tf.float32)
    return TokenPacking(rows, positions, packed)


def pack_tokens(flat, packing):
    """[batch * seq, width] -> the real tokens' rows [tokens, width] (unchanged when
    packing.packed is false). Between pack_tokens and unpack_tokens an encoder
    layer runs on packed rows; see token_packing."""
    @tf.custom_gradient
    def gather(flat):
        # A dense gradient (the scatter unpack_tokens does): tf.gather's is
        # IndexedSlices, which made the gradient of the whole cond IndexedSlices,
        # densified by a pass of its own in every layer even when nothing was packed.
        def gradient(d_rows):
            return tf.scatter_nd(packing.rows[:, tf.newaxis], d_rows,
                                 tf.shape(flat, out_type=tf.int64))
        return tf.gather(flat, packing.rows), gradient
    return tf.cond(packing.packed, lambda: gather(flat), lambda: flat)


def unpack_tokens(packed, packing):
    """pack_tokens' inverse: [tokens, width] -> [batch * seq, width], zeros at the
    positions not packed."""
    def scatter():
        shape = tf.stack([packing.padded_rows, tf.shape(packed, out_type=tf.int64)[1]])
        return tf.scatter_nd(packing.rows[:, tf.newaxis], packed, shape)
    return tf.cond(packing.packed, scatter, lambda: packed)


def _attention_heads(flat, name, batch_size, seq_length, num_heads, head_size,
                     initializer_range, activation=None, scale=None, packing=None):
    """A dense projection of `flat` [batch * seq, in] (or [tokens, in] with
    `packing`, see pack_tokens) split into heads: [batch, heads, seq, head_size]."""
    projected = dense(flat, num_heads * head_size, name, initializer_range, activation)
    if scale is not None:
        projected *= tf.cast(scale, projected.dtype)
    if packing is not None:
        projected = unpack_tokens(projected, packing)
    split = tf.reshape(projected, [batch_size, seq_length, num_heads, head_size])
    return tf.transpose(split, [0, 2, 1, 3])


def _attend(query, key, value, mask_bias, dropout_prob, fuse=False, position_terms=None):
    """Scaled dot-product attention over heads: [batch, heads, seq, head] inputs (the
    query already scaled) -> context [batch, from_seq, heads, head]. `fuse`: the
    mask, softmax and dropout as one XLA kernel each way (fused.attention_probs).
    position_terms: DeBERTa's relative terms (relative_attention.skewed_products)
    added to the scores, inside that kernel with `fuse`; or None."""
    scores = tf.matmul(query, key, transpose_b=True)  # [batch, heads, from, to]
    if position_terms is not None and fuse and fuses_dropout(dropout_prob):
        probs = fused.relative_attention_probs(scores, *position_terms, mask_bias,
                                               hashed_dropout(dropout_prob))
        context = tf.matmul(probs, value)
        return tf.transpose(context, [0, 2, 1, 3])
    if position_terms is not None:
        scores += relative_attention.combine(*position_terms)
    probs = attention_probabilities(scores, mask_bias, dropout_prob, fuse)
    context = tf.matmul(tf.cast(probs, value.dtype), value)
    return tf.transpose(context, [0, 2, 1, 3])


def attention_probabilities(scores, mask_bias, dropout_prob, fuse=False):
    """dropout(softmax(scores + mask_bias)), the softmax in float32: scores [batch,
    heads, from, to] in the compute dtype, mask_bias float32 broadcasting to them
    (or None); float32 probabilities of the scores' shape, or with `fuse`
    (fused.attention_probs) in the scores' dtype. long_attention.py's windows and
    chunks call it too."""
    if fuse and fuses_dropout(dropout_prob):
        return fused.attention_probs(scores, mask_bias, hashed_dropout(dropout_prob))
    # Softmax in float32: fp16 logits overflow and bf16 loses the small probabilities.
    scores = tf.cast(scores, tf.float32)
    if mask_bias is not None:
        scores += mask_bias
    return dropout(tf.nn.softmax(scores), dropout_prob)
