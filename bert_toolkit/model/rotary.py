"""Rotary position embeddings (RoPE), ModernBERT's positions: queries and keys rotated.

A family with rotary positions (families.py, `positions` "rotary") has no position
table. Each layer turns every pair of a head's dimensions (d, d + head/2) of a query
and a key at position p by the angle p * theta^(-2d / head), so the query-key product
depends on the two positions only through their distance. ModernBERT's global layers
use theta 160,000 and its local (windowed) layers 10,000 (mmBERT 160,000 for both).

The tables are float32 constants of the sequence length, computed once per model and
theta; the rotation runs in float32 (as transformers' apply_rotary_pos_emb does) and
returns the input's dtype.
"""

import tensorflow as tf


def inverse_frequencies(head_size, theta):
    """float32 [head_size / 2]: theta^(-2d / head_size) for d = 0 .. head_size / 2 - 1."""
    exponents = tf.range(0, head_size, 2, dtype=tf.float32) / float(head_size)
    return 1.0 / tf.pow(tf.constant(float(theta), tf.float32), exponents)


def rotary_tables(seq_length, head_size, theta):
    """(cos, sin), each float32 [seq, head_size]: the angles p * inverse frequency of
    position p, the half-width table repeated twice (the pairs are (d, d + head / 2))."""
    positions = tf.cast(tf.range(seq_length), tf.float32)
    angles = positions[:, tf.newaxis] * inverse_frequencies(head_size, theta)[tf.newaxis]
    angles = tf.concat([angles, angles], axis=-1)
    return tf.cos(angles), tf.sin(angles)


def rotate(x, tables):
    """x [batch, heads, seq, head] rotated by `tables` (rotary_tables of the same seq and
    head), computed in float32 (rotated_in_float32); returns x's dtype and shape."""
    return tf.cast(rotated_in_float32(x, tables), x.dtype)


def rotated_in_float32(x, tables):
    """x * cos + rotate_half(x) * sin in float32, rotate_half(x) = [-x2, x1] of x's two
    halves: x [..., seq, head] (any float dtype), tables (cos, sin) [seq, head]. Also
    the formula of fused.rotate_queries_and_keys' kernel."""
    cos, sin = tables
    x32 = tf.cast(x, tf.float32)
    first, second = tf.split(x32, 2, axis=-1)
    return x32 * cos + tf.concat([-second, first], axis=-1) * sin
