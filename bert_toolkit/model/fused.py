"""The element-wise chains of a bf16 training step, each compiled by XLA into one
pass over memory forward and one backward.

TensorFlow runs every element-wise op as its own kernel, one pass over memory
each, and its CPU kernels for bfloat16 element-wise ops are not vectorised, so
those chains are computed in float32 around casts. Between the matmuls of a
bf16 step that left a third of its time to element-wise work: GELU and its
gradient; the attention's mask, softmax, dropout and casts; dropout, the
residual add and layer norm. Here each chain is computed in float32 by two
`tf.function(jit_compile=True)` tied by `tf.custom_gradient`: the forward, and
the backward, which recomputes what is cheap to recompute (the dropout mask,
x + bias) and reads what is not (the attention's probabilities, the layer
norm's moments) from the forward. XLA fuses each into a few loops over the
bf16 tensors (docs/performance.md has the measurements). The pre-training
head's loss over the vocabulary (softmax_cross_entropy) is one more such pair.

Only training graphs use these: an exported SavedModel stays free of XLA, which
TensorFlow Serving refuses on a CPU unless started with
--xla_cpu_compilation_enabled. XLA compiles each
function once per input shape; the callers keep the shapes to a few (batches are
cut to multiples of 16 tokens, layers.token_packing rounds its token count).
"""

import functools

import tensorflow as tf

from bert_toolkit import tensorflow_env
from bert_toolkit.model import relative_attention, rotary


def _sum_over_rows(per_row, parameter):
    """per_row [rows..., units...] -> its sum over the rows, in the parameter's
    shape and dtype: a matmul with a row of ones, which oneDNN accumulates in
    float32. It runs outside the kernels, as oneDNN sums every weight gradient of
    a bf16 matmul: a bf16 reduction of TensorFlow's own is not vectorised, and
    inside XLA that sum is a strided scalar loop on TensorFlow 2.15 (9.5 ms for
    [1024, 3072], 1.5 ms on 2.21; taking it out made the 2.15 step 1.09-1.10x
    faster, docs/performance.md)."""
    flat = tf.reshape(per_row, [-1, tf.size(parameter)])
    ones = tf.ones([1, tf.shape(flat)[0]], per_row.dtype)
    return tf.reshape(tf.cast(tf.matmul(ones, flat), parameter.dtype), tf.shape(parameter))


def _mix(bits):
    """A bijective integer hash of uint32 `bits` (the "lowbias32" constants of Chris
    Wellons' hash-prospector): every input bit flips each output bit with
    probability close to 1/2."""
    def shifted(value, count):
        return tf.bitwise.right_shift(value, tf.constant(count, tf.uint32))
    bits = tf.bitwise.bitwise_xor(bits, shifted(bits, 16)) * tf.constant(0x7FEB352D, tf.uint32)
    bits = tf.bitwise.bitwise_xor(bits, shifted(bits, 15)) * tf.constant(0x846CA68B, tf.uint32)
    return tf.bitwise.bitwise_xor(bits, shifted(bits, 16))


def _keep_scale(like, seed, threshold, scale):
    """float32 in the shape of `like`: `scale` where an element survives dropout,
    else 0. Element i is dropped when the high 16 bits of a hash of (i, seed) are
    below `threshold` (a Python int: the drop probability in 1/65536ths); for a
    threshold of 0 the Python float `scale` itself, so no hash is computed.

    The mask is computed inside the kernel from the element's index, so it costs
    no memory traffic and the backward pass computes the same mask again instead
    of reading it (TensorFlow's Philox masks cost a tenth of a bf16 step)."""
    if not threshold:
        return scale
    index = tf.bitcast(tf.reshape(tf.range(tf.size(like)), tf.shape(like)), tf.uint32)
    seed = tf.bitcast(seed, tf.uint32)
    bits = _mix(_mix(tf.bitwise.bitwise_xor(index, seed[0])) + seed[1])
    keep = tf.bitwise.right_shift(bits, tf.constant(16, tf.uint32)) >= threshold
    return tf.where(keep, scale, 0.0)


def _dropout_inputs(dropout):
    """A kernel's dropout arguments (seed tensor, Python threshold and scale); for None,
    a threshold of 0, which keeps everything.

    The threshold and scale go in as Python numbers, so each rate traces its own
    kernel and a kernel without dropout computes no hash: with them as tensors
    every kernel of a dropout-free model (ModernBERT's published configs, any
    config with its dropout at 0) hashed each element for a mask that kept them
    all, which made GeGLU's forward kernel 1.4x slower."""
    seed, threshold, scale = dropout or (tf.zeros([2], tf.int32), 0, 1.0)
    return [seed, int(threshold), float(scale)]


def _masked_softmax(scores, mask_bias):
    return tf.nn.softmax(tf.cast(scores, tf.float32) + mask_bias)


def _d_scores(probs, d_dropped, seed, threshold, scale):
    d_probs = tf.cast(d_dropped, tf.float32) * _keep_scale(probs, seed, threshold, scale)
    d_scores = probs * (d_probs - tf.reduce_sum(d_probs * probs, axis=-1, keepdims=True))
    return tf.cast(d_scores, d_dropped.dtype)


def _dropped_and_probs(scores, mask_bias, seed, threshold, scale):
    """(dropout(softmax) in the scores' dtype, the float32 softmax)."""
    probs = _masked_softmax(scores, mask_bias)
    return tf.cast(probs * _keep_scale(probs, seed, threshold, scale), scores.dtype), probs


@tensorflow_env.xla_kernel
def _attention_probs_forward(scores, mask_bias, seed, threshold, scale):
    return _dropped_and_probs(scores, mask_bias, seed, threshold, scale)


@tensorflow_env.xla_kernel
def _attention_probs_backward(probs, d_dropped, seed, threshold, scale):
    return _d_scores(probs, d_dropped, seed, threshold, scale)


@tensorflow_env.xla_kernel
def _attention_probs_forward_only(scores, mask_bias, seed, threshold, scale):
    return _dropped_and_probs(scores, mask_bias, seed, threshold, scale)[0]


@tensorflow_env.xla_kernel
def _attention_probs_backward_recomputed(scores, mask_bias, d_dropped, seed, threshold, scale):
    return _d_scores(_masked_softmax(scores, mask_bias), d_dropped, seed, threshold, scale)


def keeps_attention_probabilities():
    """Whether attention_probs keeps its probabilities for the backward pass:
    on CPUs, not where GPUs are visible (there the exponentials cost less than
    the memory traffic; docs/performance.md, On GPUs)."""
    return not tf.config.list_physical_devices("GPU")


def attention_probs(scores, mask_bias, dropout=None, keep_probabilities=None):
    """The attention's probabilities after dropout, in the scores' dtype.

    Args:
      scores: [batch, heads, from, to], the query-key products (bfloat16).
      mask_bias: float32 [batch, 1, 1 or from, to] (attention_mask_bias) or None.
      dropout: None, or (seed int32 [2], threshold, scale): each element is dropped
        with probability threshold / 65536 (see _keep_scale), the others scaled.
      keep_probabilities: whether the backward kernel reads float32 probabilities
        the forward kept, or recomputes them from the scores; None:
        keeps_attention_probabilities().
    Returns:
      dropout(softmax(scores + mask_bias)), computed in float32, [batch, heads,
      from, to] in the scores' dtype; the gradient reaches `scores` only.

    Kept probabilities cost four bytes a score until the backward pass, where the
    bf16 scores take two (BERT-base at batch 8 and length 512 holds 0.6 GB
    more), and on a CPU they cost less than the exponentials and the two sums
    over each row they save: forward and backward of MiniLM's [32, 12, 128, 128]
    took 17 ms instead of 25 (docs/performance.md).
    """
    dropout_inputs = _dropout_inputs(dropout)
    mask_bias = tf.zeros([], tf.float32) if mask_bias is None else mask_bias
    if keep_probabilities is None:
        keep_probabilities = keeps_attention_probabilities()

    @tf.custom_gradient
    def apply(scores):
        if dropout is None:
            # No mask to draw: TensorFlow's softmax kernel (oneDNN's on CPUs) runs
            # the forward in 0.45-0.7 of the XLA kernel's time, whose row
            # reductions run on one core ([8, 12, 128, 128]: 0.58 against 1.23 ms
            # on TensorFlow 2.15, 0.45 against 0.66 on 2.21).
            probs = _masked_softmax(scores, mask_bias)
            dropped = tf.cast(probs, scores.dtype)
        elif keep_probabilities:
            dropped, probs = _attention_probs_forward(scores, mask_bias, *dropout_inputs)
        else:
            dropped = _attention_probs_forward_only(scores, mask_bias, *dropout_inputs)

        def gradient(d_dropped):
            if keep_probabilities:
                return _attention_probs_backward(probs, d_dropped, *dropout_inputs)
            return _attention_probs_backward_recomputed(scores, mask_bias, d_dropped,
                                                        *dropout_inputs)
        return dropped, gradient
    return apply(scores)


# DeBERTa: its two relative-position terms join the scores inside the attention's
# kernel, so their transposes and sum are index arithmetic of the same loops, not
# passes of their own over [batch, heads, seq, seq] bf16 tensors. (Their skews stay
# outside, in relative_attention.skew: XLA's CPU loops over a reshaped slice took three
# times the kernel's own time, forward and backward, where TensorFlow copies rows.)

@tensorflow_env.xla_kernel
def _relative_probs_forward(scores, to_position, from_position, mask_bias, seed, threshold,
                            scale):
    full = scores + relative_attention.combine(to_position, from_position)
    return _dropped_and_probs(full, mask_bias, seed, threshold, scale)


@tensorflow_env.xla_kernel
def _relative_probs_backward(probs, d_dropped, seed, threshold, scale):
    d_scores = _d_scores(probs, d_dropped, seed, threshold, scale)
    # combine's transpose: [batch, heads] back to [heads, batch], and [j, i] for
    # the position->content term.
    d_to_position = tf.transpose(d_scores, [1, 0, 2, 3])
    return d_scores, d_to_position, tf.linalg.matrix_transpose(d_to_position)


def relative_attention_probs(scores, to_position, from_position, mask_bias, dropout=None):
    """attention_probs of DeBERTa's scores: dropout(softmax(scores + the relative terms
    + mask_bias)), one XLA kernel forward and one backward (which reads the float32
    probabilities the forward kept).

    Args:
      scores: [batch, heads, s, s] query-key products (bfloat16).
      to_position, from_position: [heads, batch, s, s], relative_attention.
        skewed_products' (the same dtype).
      mask_bias, dropout: as attention_probs'.
    Returns:
      [batch, heads, s, s] in the scores' dtype; gradients reach the three inputs.
    """
    dropout_inputs = _dropout_inputs(dropout)
    mask_bias = tf.zeros([], tf.float32) if mask_bias is None else mask_bias

    @tf.custom_gradient
    def apply(scores, to_position, from_position):
        dropped, probs = _relative_probs_forward(scores, to_position, from_position, mask_bias,
                                                 *dropout_inputs)

        def gradient(d_dropped):
            return _relative_probs_backward(probs, d_dropped, *dropout_inputs)
        return dropped, gradient
    return apply(scores, to_position, from_position)


def _dropped_hidden(x, bias, residual, seed, threshold, scale):
    """float32 (dropout(x + bias) + residual, the dropout's keep scale)."""
    x = tf.cast(x, tf.float32) + bias
    keep_scale = _keep_scale(x, seed, threshold, scale)
    return x * keep_scale + tf.cast(residual, tf.float32), keep_scale


def _moments(hidden, epsilon):
    """(mean, 1 / std), float32 [rows, 1], of hidden [rows, width] (float32)."""
    mean, variance = tf.nn.moments(hidden, axes=[-1], keepdims=True)
    return mean, tf.math.rsqrt(variance + epsilon)


def _d_normalized_input(hidden, mean, inverse_std, gamma, dy):
    """(d hidden, d gamma per row), float32, of (hidden - mean) * inverse_std * gamma
    (+ beta): every layer norm kernel's backward."""
    standardized = (hidden - mean) * inverse_std
    d_standardized = tf.cast(dy, tf.float32) * gamma
    d_hidden = inverse_std * (
        d_standardized - tf.reduce_mean(d_standardized, axis=-1, keepdims=True)
        - standardized * tf.reduce_mean(d_standardized * standardized, axis=-1,
                                        keepdims=True))
    return d_hidden, tf.cast(dy, tf.float32) * standardized


@tensorflow_env.xla_kernel
def _layer_norm_forward(x, bias, residual, gamma, beta, epsilon, seed, threshold, scale):
    hidden, _ = _dropped_hidden(x, bias, residual, seed, threshold, scale)
    mean, inverse_std = _moments(hidden, epsilon)
    normalized = (hidden - mean) * (inverse_std * gamma) + beta
    return tf.cast(normalized, x.dtype), mean, inverse_std


@tensorflow_env.xla_kernel
def _layer_norm_backward(x, bias, residual, gamma, mean, inverse_std, dy, seed, threshold,
                         scale):
    hidden, keep_scale = _dropped_hidden(x, bias, residual, seed, threshold, scale)
    d_hidden, d_gamma = _d_normalized_input(hidden, mean, inverse_std, gamma, dy)
    return (tf.cast(d_hidden * keep_scale, x.dtype), tf.cast(d_hidden, x.dtype),
            tf.cast(d_gamma, x.dtype))


def bias_dropout_add_layer_norm(x, bias, residual, gamma, beta, dropout=None, epsilon=1e-12):
    """layer_norm(dropout(x + bias) + residual) over the last axis, in float32.

    Args:
      x, residual: [rows, hidden] (bfloat16); the result has their shape and dtype.
      bias, gamma, beta: float32 [hidden].
      dropout: None, or (seed int32 [2], threshold, scale) as in attention_probs.

    The forward kernel keeps each row's mean and inverse standard deviation
    (float32 [rows, 1]) for the backward one, which returns only the three
    gradients that differ per row (x's, which is also the bias's per row; the
    residual's; gamma's per row); beta's is the sum of dy. Letting XLA
    differentiate the forward instead recomputed the moments and wrote five
    [rows, hidden] gradients, two of them copies (MiniLM's [4096, 384]: 7.9 ms
    forward and backward instead of 8.9).
    """
    dropout_inputs = _dropout_inputs(dropout)
    epsilon = tf.constant(epsilon, tf.float32)

    @tf.custom_gradient
    def apply(x, bias, residual, gamma, beta):
        normalized, mean, inverse_std = _layer_norm_forward(
            x, bias, residual, gamma, beta, epsilon, *dropout_inputs)

        def gradient(dy):
            d_x, d_residual, d_gamma_per_row = _layer_norm_backward(
                x, bias, residual, gamma, mean, inverse_std, dy, *dropout_inputs)
            return (d_x, _sum_over_rows(d_x, bias), d_residual,
                    _sum_over_rows(d_gamma_per_row, gamma), _sum_over_rows(dy, beta))
        return normalized, gradient
    return apply(x, bias, residual, gamma, beta)


@functools.lru_cache(maxsize=None)
def biased_activation(fp32_function):
    """`fp32_function` (element-wise, float32) of a dense layer's output as
    function(x [rows, units] bfloat16, bias float32 [units]) -> fp32_function(x +
    bias) [rows, units] in bfloat16, computed in float32; forward and backward
    each one XLA kernel. The backward recomputes x + bias and differentiates the
    function there; x's gradient is also the bias's per row."""
    @tensorflow_env.xla_kernel
    def forward(x, bias):
        return tf.cast(fp32_function(tf.cast(x, tf.float32) + bias), x.dtype)

    @tensorflow_env.xla_kernel
    def backward(x, bias, dy):
        biased = tf.cast(x, tf.float32) + bias
        (d_biased,) = tf.gradients(fp32_function(biased), biased,
                                   grad_ys=tf.cast(dy, tf.float32))
        return tf.cast(d_biased, x.dtype)

    @tf.custom_gradient
    def apply(x, bias):
        def gradient(dy):
            d_x = backward(x, bias, dy)
            return d_x, _sum_over_rows(d_x, bias)
        return forward(x, bias), gradient
    return apply


@tensorflow_env.xla_kernel
def _softmax_cross_entropy_forward(logits, bias, label_ids):
    logits = tf.cast(logits, tf.float32) + bias
    log_normalizer = tf.reduce_logsumexp(logits, axis=-1)
    picked = tf.gather(logits, label_ids, axis=1, batch_dims=1)
    return log_normalizer - picked, log_normalizer


@tensorflow_env.xla_kernel
def _softmax_cross_entropy_backward(logits, bias, label_ids, log_normalizer, d_loss):
    biased = tf.cast(logits, tf.float32) + bias
    probs = tf.exp(biased - log_normalizer[:, tf.newaxis])
    labels = tf.one_hot(label_ids, tf.shape(biased)[-1], dtype=tf.float32)
    return tf.cast((probs - labels) * d_loss[:, tf.newaxis], logits.dtype)


def softmax_cross_entropy(logits, bias, label_ids):
    """-log softmax(logits + bias) at each row's label, computed in float32.

    Args:
      logits: [rows, classes] (bfloat16), a projection without its bias;
      bias: float32 [classes]; label_ids: int32 [rows], each in [0, classes).
    Returns:
      float32 [rows]. The gradient reaches logits (in their dtype) and bias.

    The masked-LM head's loss over the vocabulary: TensorFlow's ops cast the
    [rows, vocab] logits to float32, add the bias, run the fused cross-entropy,
    scale its [rows, vocab] gradient, sum it for the bias and cast it back,
    each a pass over float32 memory; here the forward reads the bf16 logits and
    keeps each row's log-normaliser, and the backward writes the bf16 gradient.
    """
    label_ids = tf.cast(label_ids, tf.int32)

    @tf.custom_gradient
    def apply(logits, bias):
        loss, log_normalizer = _softmax_cross_entropy_forward(logits, bias, label_ids)

        def gradient(d_loss):
            d_logits = _softmax_cross_entropy_backward(logits, bias, label_ids,
                                                       log_normalizer, d_loss)
            return d_logits, _sum_over_rows(d_logits, bias)
        return loss, gradient
    return apply(logits, bias)


# -- ModernBERT's chains (pre-norm, bias-free: modernbert.pre_norm_layer) -------------------

@tensorflow_env.xla_kernel
def _bias_free_norm_forward(x, gamma, epsilon):
    hidden = tf.cast(x, tf.float32)
    mean, inverse_std = _moments(hidden, epsilon)
    return tf.cast((hidden - mean) * (inverse_std * gamma), x.dtype), mean, inverse_std


@tensorflow_env.xla_kernel
def _bias_free_norm_backward(x, gamma, mean, inverse_std, dy):
    d_hidden, d_gamma = _d_normalized_input(tf.cast(x, tf.float32), mean, inverse_std,
                                            gamma, dy)
    return tf.cast(d_hidden, x.dtype), tf.cast(d_gamma, x.dtype)


def bias_free_layer_norm(x, gamma, epsilon=1e-5):
    """(x - mean) / std * gamma over the last axis, computed in float32 (ModernBERT's
    norm_bias false): x [rows, hidden] (bfloat16) -> the same shape and dtype; gamma
    float32 [hidden]. One XLA kernel each way, the backward reading the forward's
    moments (float32 [rows, 1])."""
    epsilon = tf.constant(epsilon, tf.float32)

    @tf.custom_gradient
    def apply(x, gamma):
        normalized, mean, inverse_std = _bias_free_norm_forward(x, gamma, epsilon)

        def gradient(dy):
            d_x, d_gamma_per_row = _bias_free_norm_backward(x, gamma, mean, inverse_std, dy)
            return d_x, _sum_over_rows(d_gamma_per_row, gamma)
        return normalized, gradient
    return apply(x, gamma)


def _dropped_sum(x, residual, seed, threshold, scale):
    """float32 (dropout(x) + residual, the dropout's keep scale)."""
    keep_scale = _keep_scale(x, seed, threshold, scale)
    return tf.cast(x, tf.float32) * keep_scale + tf.cast(residual, tf.float32), keep_scale


@tensorflow_env.xla_kernel
def _add_norm_forward(x, residual, gamma, epsilon, seed, threshold, scale):
    hidden, _ = _dropped_sum(x, residual, seed, threshold, scale)
    mean, inverse_std = _moments(hidden, epsilon)
    normalized = (hidden - mean) * (inverse_std * gamma)
    return (tf.cast(hidden, residual.dtype), tf.cast(normalized, x.dtype), mean,
            inverse_std)


@tensorflow_env.xla_kernel
def _add_norm_backward(x, residual, gamma, mean, inverse_std, d_hidden, d_normalized, seed,
                       threshold, scale):
    hidden, keep_scale = _dropped_sum(x, residual, seed, threshold, scale)
    d_sum, d_gamma = _d_normalized_input(hidden, mean, inverse_std, gamma, d_normalized)
    d_sum += tf.cast(d_hidden, tf.float32)
    return (tf.cast(d_sum * keep_scale, x.dtype), tf.cast(d_sum, residual.dtype),
            tf.cast(d_gamma, x.dtype))


def dropout_add_bias_free_layer_norm(x, residual, gamma, dropout=None, epsilon=1e-5):
    """(hidden = dropout(x) + residual, hidden's bias-free layer norm): the residual
    sum of a pre-norm layer and the norm of the next sub-layer's input, one XLA kernel
    each way (ModernBERT's attention output joining the stream before mlp_norm).

    Args:
      x, residual: [rows, hidden] (bfloat16); hidden has residual's dtype, the norm
        x's. gamma: float32 [hidden]. dropout: None, or (seed, threshold, scale) as in
        attention_probs.
    """
    dropout_inputs = _dropout_inputs(dropout)
    epsilon = tf.constant(epsilon, tf.float32)

    @tf.custom_gradient
    def apply(x, residual, gamma):
        hidden, normalized, mean, inverse_std = _add_norm_forward(
            x, residual, gamma, epsilon, *dropout_inputs)

        def gradient(d_hidden, d_normalized):
            # An output nothing reads has no gradient (the stream's sum is always read).
            d_hidden = tf.zeros_like(hidden) if d_hidden is None else d_hidden
            d_normalized = tf.zeros_like(normalized) if d_normalized is None else d_normalized
            d_x, d_residual, d_gamma_per_row = _add_norm_backward(
                x, residual, gamma, mean, inverse_std, d_hidden, d_normalized,
                *dropout_inputs)
            return d_x, d_residual, _sum_over_rows(d_gamma_per_row, gamma)
        return (hidden, normalized), gradient
    return apply(x, residual, gamma)


@tensorflow_env.xla_kernel
def _add_forward(x, residual):
    return tf.cast(tf.cast(x, tf.float32) + tf.cast(residual, tf.float32), residual.dtype)


def add(x, residual):
    """x + residual, [rows, hidden] (bfloat16), added in float32 by one XLA kernel (the
    end of a pre-norm layer: TensorFlow's bf16 add is a scalar loop); the gradient is
    the incoming one for both."""
    @tf.custom_gradient
    def apply(x, residual):
        def gradient(dy):
            return tf.cast(dy, x.dtype), tf.cast(dy, residual.dtype)
        return _add_forward(x, residual), gradient
    return apply(x, residual)


def _gated(x, fp32_function, seed, threshold, scale):
    inputs, gate = tf.split(tf.cast(x, tf.float32), 2, axis=-1)
    activated = fp32_function(inputs)
    return activated, gate, _keep_scale(gate, seed, threshold, scale)


@functools.lru_cache(maxsize=None)
def gated_activation(fp32_function):
    """ModernBERT's GeGLU with its dropout as function(x [rows, 2 * inner] bfloat16,
    dropout) -> dropout(fp32_function(x's first half) * x's second half) [rows, inner]
    in x's dtype, computed in float32; forward and backward each one XLA kernel, the
    backward recomputing the activation and the dropout mask."""
    @tensorflow_env.xla_kernel
    def forward(x, seed, threshold, scale):
        activated, gate, keep_scale = _gated(x, fp32_function, seed, threshold, scale)
        return tf.cast(activated * gate * keep_scale, x.dtype)

    @tensorflow_env.xla_kernel
    def backward(x, dy, seed, threshold, scale):
        inputs, gate = tf.split(tf.cast(x, tf.float32), 2, axis=-1)
        d_product = tf.cast(dy, tf.float32) * _keep_scale(gate, seed, threshold, scale)
        activated = fp32_function(inputs)
        (d_inputs,) = tf.gradients(activated, inputs, grad_ys=d_product * gate)
        return tf.cast(tf.concat([d_inputs, d_product * activated], axis=-1), x.dtype)

    def apply_with(x, dropout=None):
        dropout_inputs = _dropout_inputs(dropout)

        @tf.custom_gradient
        def apply(x):
            def gradient(dy):
                return backward(x, dy, *dropout_inputs)
            return forward(x, *dropout_inputs), gradient
        return apply(x)
    return apply_with


def _unrotated(dy, cos, sin):
    """The transpose of rotary.rotated_in_float32: dy * cos + rotate_half^T(dy * sin),
    rotate_half^T(z) = [z2, -z1]."""
    dy = tf.cast(dy, tf.float32)
    first, second = tf.split(dy * sin, 2, axis=-1)
    return dy * cos + tf.concat([second, -first], axis=-1)


@tensorflow_env.xla_kernel
def _rotate_forward(query, key, cos, sin, query_scale):
    return (tf.cast(rotary.rotated_in_float32(query, (cos, sin)) * query_scale, query.dtype),
            tf.cast(rotary.rotated_in_float32(key, (cos, sin)), key.dtype))


@tensorflow_env.xla_kernel
def _rotate_backward(d_query, d_key, cos, sin, query_scale):
    return (tf.cast(_unrotated(d_query, cos, sin) * query_scale, d_query.dtype),
            tf.cast(_unrotated(d_key, cos, sin), d_key.dtype))


def rotate_queries_and_keys(query, key, tables, query_scale):
    """(rotated query * query_scale, rotated key) of query, key [batch, heads, seq, head]
    (bfloat16) by rotary tables (cos, sin) float32 [seq, head], computed in float32:
    one XLA kernel each way (the backward rotates the gradients back)."""
    cos, sin = tables
    query_scale = tf.constant(query_scale, tf.float32)

    @tf.custom_gradient
    def apply(query, key):
        def gradient(d_query, d_key):
            d_query = tf.zeros_like(query) if d_query is None else d_query
            d_key = tf.zeros_like(key) if d_key is None else d_key
            return _rotate_backward(d_query, d_key, cos, sin, query_scale)
        return _rotate_forward(query, key, cos, sin, query_scale), gradient
    return apply(query, key)
