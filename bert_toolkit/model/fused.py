"""The element-wise chains of a bf16 training step, each compiled by XLA into one
pass over memory forward and one backward.

TensorFlow runs every element-wise op as its own kernel, one pass over memory
each, and its CPU kernels for bfloat16 element-wise ops are not vectorised, so
those chains are computed in float32 around casts. Between the matmuls of a
bf16 step that left a third of its time to element-wise work: GELU and its
gradient; the attention's mask, softmax, dropout and casts; dropout, the
residual add and layer norm. Here each chain is a float32 function that
`compiled` turns into two `tf.function(jit_compile=True)`: the forward, and a
backward that recomputes the forward and differentiates it. XLA fuses each
into one loop over the bf16 tensors (docs/performance.md has the measurements).

Only training graphs use these: an exported SavedModel stays free of XLA, which
TensorFlow Serving refuses on a CPU unless started with
--xla_cpu_compilation_enabled. XLA compiles each
function once per input shape; the callers keep the shapes to a few (batches are
cut to multiples of 16 tokens, modeling.token_packing rounds its token count).
"""

import functools

import tensorflow as tf

from bert_toolkit import tensorflow_env


def _xla(function):
    return tf.function(function, jit_compile=True, autograph=False)


def _in_fp32(tensor):
    return tf.cast(tensor, tf.float32) if tensor.dtype.is_floating else tensor


def _broadcast_over_rows(tensor, like):
    """Whether `tensor` (a bias, a layer norm's scale: one value per unit of the
    last axes) is broadcast over the leading axes of `like`."""
    return tensor.shape.rank < like.shape.rank


def _sum_over_rows(per_row, parameter):
    """per_row [rows..., units...] -> its sum over the rows, in the parameter's
    shape and dtype: a matmul with a row of ones, which oneDNN accumulates in
    float32 (a bf16 reduction of TensorFlow's own is not vectorised)."""
    flat = tf.reshape(per_row, [-1, tf.size(parameter)])
    ones = tf.ones([1, tf.shape(flat)[0]], per_row.dtype)
    return tf.reshape(tf.cast(tf.matmul(ones, flat), parameter.dtype), tf.shape(parameter))


@functools.lru_cache(maxsize=None)
def compiled(fp32_function, num_differentiable=1):
    """`fp32_function(*inputs)` (element-wise work in float32, one output) as a
    function of tensors of any float dtype: its float inputs are cast to float32
    (the others, such as seeds, pass as they are) and its output to the first
    input's dtype, inside one XLA kernel; the gradient reaches the first
    `num_differentiable` inputs (in their own dtypes) through a second kernel.

    A differentiable input of lower rank than the first (a bias, a layer norm's
    scale: one value per unit, broadcast over the rows) gets its gradient per
    row from the kernel, in the first input's dtype, summed over the rows
    outside XLA (_sum_over_rows), as oneDNN sums every weight gradient of a bf16
    matmul. Inside XLA that sum is a strided scalar loop on TensorFlow 2.15
    (9.5 ms for [1024, 3072], 1.5 ms on 2.21): taking it out made the 2.15 step
    1.09-1.10x faster and left 2.21's as it was (docs/performance.md)."""
    @_xla
    def forward(*inputs):
        return tf.cast(fp32_function(*map(_in_fp32, inputs)), inputs[0].dtype)

    @_xla
    def backward(*inputs_and_dy):
        inputs, dy = inputs_and_dy[:-1], inputs_and_dy[-1]
        inputs32 = list(map(_in_fp32, inputs))
        per_row = [_broadcast_over_rows(x, inputs[0]) for x in inputs[:num_differentiable]]
        for i, broadcast in enumerate(per_row):
            if broadcast:
                inputs32[i] = tf.broadcast_to(inputs32[i], tf.shape(inputs32[0]))
        gradients = tf.gradients(fp32_function(*inputs32), inputs32[:num_differentiable],
                                 grad_ys=tf.cast(dy, tf.float32))
        return [tf.cast(g, inputs[0].dtype if broadcast else x.dtype)
                for g, x, broadcast in zip(gradients, inputs, per_row)]

    @tf.custom_gradient
    def apply(*inputs):
        def gradient(dy):
            differentiable = [
                _sum_over_rows(g, x) if _broadcast_over_rows(x, inputs[0]) else g
                for g, x in zip(backward(*inputs, dy), inputs)]
            return differentiable + [None] * (len(inputs) - num_differentiable)
        return forward(*inputs), gradient

    def call(*inputs):
        tensorflow_env.quiet_first_xla_compile()
        return apply(*inputs)
    return call


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
    below `threshold` (uint32: the drop probability in 1/65536ths).

    The mask is computed inside the kernel from the element's index, so it costs
    no memory traffic and the backward pass computes the same mask again instead
    of reading it (TensorFlow's Philox masks cost a tenth of a bf16 step)."""
    index = tf.bitcast(tf.reshape(tf.range(tf.size(like)), tf.shape(like)), tf.uint32)
    seed = tf.bitcast(seed, tf.uint32)
    bits = _mix(_mix(tf.bitwise.bitwise_xor(index, seed[0])) + seed[1])
    keep = tf.bitwise.right_shift(bits, tf.constant(16, tf.uint32)) >= threshold
    return tf.where(keep, scale, 0.0)


def _dropout_inputs(dropout):
    seed, threshold, scale = dropout
    return [seed, tf.constant(threshold, tf.uint32), tf.constant(scale, tf.float32)]


def _masked_softmax(scores, mask_bias):
    return tf.nn.softmax(scores + mask_bias)


def _masked_softmax_dropout(scores, mask_bias, seed, threshold, scale):
    return _masked_softmax(scores, mask_bias) * _keep_scale(scores, seed, threshold, scale)


def attention_probs(scores, mask_bias, dropout=None):
    """The attention's probabilities after dropout, in the scores' dtype.

    Args:
      scores: [batch, heads, from, to], the query-key products (bfloat16).
      mask_bias: float32 [batch, 1, 1 or from, to] (attention_mask_bias) or None.
      dropout: None, or (seed int32 [2], threshold, scale): each element is dropped
        with probability threshold / 65536 (see _keep_scale), the others scaled.
    Returns:
      dropout(softmax(scores + mask_bias)), computed in float32, [batch, heads,
      from, to] in the scores' dtype; the gradient reaches `scores` only.
    """
    inputs = [scores, tf.zeros([], tf.float32) if mask_bias is None else mask_bias]
    if dropout is None:
        return compiled(_masked_softmax)(*inputs)
    return compiled(_masked_softmax_dropout)(*inputs, *_dropout_inputs(dropout))


def _bias_add_layer_norm(x, bias, residual, gamma, beta, epsilon, keep_scale=1.0):
    hidden = (x + bias) * keep_scale + residual
    mean, variance = tf.nn.moments(hidden, axes=[-1], keepdims=True)
    return (hidden - mean) * (tf.math.rsqrt(variance + epsilon) * gamma) + beta


def _bias_dropout_add_layer_norm(x, bias, residual, gamma, beta, epsilon, seed, threshold,
                                 scale):
    return _bias_add_layer_norm(x, bias, residual, gamma, beta, epsilon,
                                _keep_scale(x, seed, threshold, scale))


def bias_dropout_add_layer_norm(x, bias, residual, gamma, beta, dropout=None, epsilon=1e-12):
    """layer_norm(dropout(x + bias) + residual) over the last axis, in float32.

    Args:
      x, residual: [rows, hidden] (bfloat16); the result has their shape and dtype.
      bias, gamma, beta: float32 [hidden].
      dropout: None, or (seed int32 [2], threshold, scale) as in attention_probs.
    """
    inputs = [x, bias, residual, gamma, beta, tf.constant(epsilon, tf.float32)]
    if dropout is None:
        return compiled(_bias_add_layer_norm, 5)(*inputs)
    return compiled(_bias_dropout_add_layer_norm, 5)(*inputs, *_dropout_inputs(dropout))


@functools.lru_cache(maxsize=None)
def biased_activation(fp32_function):
    """`fp32_function` (element-wise, float32) of a dense layer's output as
    function(x [rows, units] bfloat16, bias float32 [units]) -> fp32_function(x +
    bias) [rows, units] in bfloat16, computed in float32; forward and gradient
    (to x and bias) each run as one XLA kernel."""
    def biased(x, bias):
        return fp32_function(x + bias)
    return compiled(biased, 2)
