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
TensorFlow Serving's CPU builds do not compile by default. XLA compiles each
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


@functools.lru_cache(maxsize=None)
def compiled(fp32_function, num_differentiable=1):
    """`fp32_function(*inputs)` (element-wise work in float32, one output) as a
    function of tensors of any float dtype: its inputs are cast to float32 and
    its output to the first input's dtype, inside one XLA kernel; the gradient
    reaches the first `num_differentiable` inputs (in their own dtypes) through
    a second kernel."""
    @_xla
    def forward(*inputs):
        return tf.cast(fp32_function(*map(_in_fp32, inputs)), inputs[0].dtype)

    @_xla
    def backward(*inputs_and_dy):
        inputs, dy = inputs_and_dy[:-1], inputs_and_dy[-1]
        inputs32 = list(map(_in_fp32, inputs))
        gradients = tf.gradients(fp32_function(*inputs32), inputs32[:num_differentiable],
                                 grad_ys=tf.cast(dy, tf.float32))
        return [tf.cast(g, x.dtype) for g, x in zip(gradients, inputs)]

    @tf.custom_gradient
    def apply(*inputs):
        def gradient(dy):
            differentiable = backward(*inputs, dy)
            return list(differentiable) + [None] * (len(inputs) - num_differentiable)
        return forward(*inputs), gradient

    def call(*inputs):
        tensorflow_env.quiet_first_xla_compile()
        return apply(*inputs)
    return call


def _masked_softmax_dropout(scores, mask_bias, keep, keep_scale):
    return tf.nn.softmax(scores + mask_bias) * tf.where(keep, keep_scale, 0.0)


def attention_probs(scores, mask_bias, keep=None, keep_scale=1.0):
    """The attention's probabilities after dropout, in the scores' dtype.

    Args:
      scores: [batch, heads, from, to], the query-key products (bfloat16).
      mask_bias: float32 [batch, 1, 1 or from, to] (attention_mask_bias) or None.
      keep: bool [batch, heads, from, to], dropout's mask, or None (no dropout).
      keep_scale: the kept elements' scale (a Python float).
    Returns:
      softmax(scores + mask_bias) * where(keep, keep_scale, 0), computed in
      float32, [batch, heads, from, to] in the scores' dtype; the gradient
      reaches `scores` only.
    """
    return compiled(_masked_softmax_dropout)(
        scores, tf.zeros([], tf.float32) if mask_bias is None else mask_bias,
        tf.constant(True) if keep is None else keep, tf.constant(keep_scale, tf.float32))


def _bias_dropout_add_layer_norm(x, bias, residual, gamma, beta, keep, keep_scale, epsilon):
    hidden = (x + bias) * tf.where(keep, keep_scale, 0.0) + residual
    mean, variance = tf.nn.moments(hidden, axes=[-1], keepdims=True)
    return (hidden - mean) * (tf.math.rsqrt(variance + epsilon) * gamma) + beta


def bias_dropout_add_layer_norm(x, bias, residual, gamma, beta, keep=None, keep_scale=1.0,
                                epsilon=1e-12):
    """layer_norm(dropout(x + bias) + residual) over the last axis, in float32.

    Args:
      x, residual: [rows, hidden] (bfloat16); the result has their shape and dtype.
      bias, gamma, beta: float32 [hidden].
      keep: bool [rows, hidden], dropout's mask, or None (no dropout).
      keep_scale: the kept elements' scale (a Python float).
    """
    return compiled(_bias_dropout_add_layer_norm, 5)(
        x, bias, residual, gamma, beta, tf.constant(True) if keep is None else keep,
        tf.constant(keep_scale, tf.float32), tf.constant(epsilon, tf.float32))


@functools.lru_cache(maxsize=None)
def biased_activation(fp32_function):
    """`fp32_function` (element-wise, float32) of a dense layer's output as
    function(x [rows, units] bfloat16, bias float32 [units]) -> fp32_function(x +
    bias) [rows, units] in bfloat16, computed in float32; forward and gradient
    (to x and bias) each run as one XLA kernel."""
    def biased(x, bias):
        return fp32_function(x + bias)
    return compiled(biased, 2)
