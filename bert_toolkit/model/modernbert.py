"""ModernBERT's pieces of the encoder (families.py: positions "rotary", pre_norm).

Its embeddings (a bias-free norm, no position table), its layer (pre-norm,
bias-free, one qkv projection, rotary queries and keys, a GeGLU feed-forward),
local layers attending in windows and global ones in full
(long_attention.py), the final norm, and its head (dense, GELU, norm) as our
pooler. modeling.BertModel runs them through `pre_norm_settings` and
`encoder_layers`, so packing, precisions and the task heads are BERT's.
"""

import collections
import math

import tensorflow as tf

from bert_toolkit.model import fused, long_attention, rotary
from bert_toolkit.model.layers import (
    bias_free_layer_norm,
    dropout,
    embedding_lookup,
    fuses_dropout,
    gamma_variable,
    hashed_dropout,
    kernel_dense,
    masked_mean,
    pack_tokens,
    pooler_activation,
    pre_norm,
    unpack_tokens,
)

tf1 = tf.compat.v1


def pre_norm_embeddings(config, input_ids, is_training, use_one_hot_embeddings=False,
                        compute_dtype=tf.float32):
    """ModernBERT's embeddings: the word table alone (no position or token-type table:
    positions are rotary), a bias-free layer norm, dropout (under embeddings/).

    Args:
      input_ids: int [batch, seq].
    Returns:
      (embeddings [batch, seq, hidden] in compute_dtype, word table [vocab, hidden]).
    """
    with tf1.variable_scope("embeddings"):
        words, word_table = embedding_lookup(
            input_ids, config.vocab_size, config.hidden_size, config.initializer_range,
            "word_embeddings", use_one_hot_embeddings)
        normed = bias_free_layer_norm(words, epsilon=config.layer_norm_eps,
                                      output_dtype=compute_dtype)
    return dropout(normed, config.hidden_dropout_prob if is_training else 0.0), word_table


def rotary_self_attention(flat_hidden, mask_bias, batch_size, seq_length, num_heads,
                          tables, initializer_range=0.02, attention_dropout=0.0,
                          packing=None, fuse=False, window=None, max_length=None):
    """ModernBERT's self-attention: one bias-free projection to queries, keys and values
    (variable qkv/kernel [hidden, 3 * hidden], columns q | k | v), queries and keys
    rotated (rotary.rotate with `tables`), then long_attention's windows (a local
    layer: keys within window // 2 positions, cost linear in the length) or full
    attention (the square, in chunks from long_attention.CHUNKED_MIN_SEQ rows).

    Args:
      flat_hidden: [batch * seq, hidden] in the compute dtype, or [tokens, hidden]
        with `packing` (pack_tokens).
      mask_bias: float32 [batch, 1, 1, seq] (attention_mask_bias), or None.
      window: a local layer's local_attention; None on a global layer.
      max_length: the longest a row can be when seq_length is unknown while
        building (long_attention picks squares, blocks or chunks by it).
    Returns:
      Context [rows of flat_hidden, hidden], before the output projection.
    """
    width = flat_hidden.shape[-1]
    head_size = width // num_heads
    qkv = kernel_dense(flat_hidden, 3 * width, "qkv", initializer_range)
    if packing is not None:
        qkv = unpack_tokens(qkv, packing)
    split = tf.reshape(qkv, [batch_size, seq_length, 3, num_heads, head_size])
    query, key, value = tf.unstack(tf.transpose(split, [2, 0, 3, 1, 4]))
    if fuse:
        query, key = fused.rotate_queries_and_keys(query, key, tables,
                                                   1.0 / math.sqrt(head_size))
    else:
        query = rotary.rotate(query, tables) * tf.cast(1.0 / math.sqrt(head_size),
                                                       query.dtype)
        key = rotary.rotate(key, tables)
    if window:
        context = long_attention.windowed_attention(query, key, value, mask_bias, window,
                                                    attention_dropout, fuse,
                                                    max_length=max_length)
    else:
        context = long_attention.full_attention(query, key, value, mask_bias,
                                                attention_dropout, fuse, max_length=max_length)
    context = tf.reshape(context, [-1, width])
    return context if packing is None else pack_tokens(context, packing)


def geglu(x, activation):
    """ModernBERT's gated unit: x [rows, 2 * inner] split into (input, gate) halves ->
    activation(input) * gate [rows, inner], in x's dtype."""
    inputs, gate = tf.split(x, 2, axis=-1)
    return activation(inputs) * gate


def pre_norm_layer(flat_hidden, mask_bias, batch_size, seq_length, num_attention_heads,
                   intermediate_size, intermediate_act_fn, hidden_dropout_prob=0.0,
                   attention_probs_dropout_prob=0.0, initializer_range=0.02, packing=None,
                   fuse=False, layer_norm_eps=1e-5, tables=None, normalizes_input=True,
                   window=None, max_length=None):
    """One ModernBERT block, pre-norm and bias-free: x + attention(norm(x)), then
    h + feed-forward(norm(h)) with a GeGLU feed-forward.

    Variables (layer_N/...): attention/LayerNorm/gamma (not on layer 0, whose input
    is the embeddings' norm: `normalizes_input` False), attention/self/qkv/kernel,
    attention/output/dense/kernel, intermediate/LayerNorm/gamma,
    intermediate/dense/kernel [hidden, 2 * inner], output/dense/kernel [inner, hidden].
    Dropout as transformers places it: the attention's on its probabilities and its
    output projection, hidden_dropout_prob (mlp_dropout) before the last projection.

    Args:
      flat_hidden: [batch * seq, hidden] in the compute dtype, or [tokens, hidden]
        with `packing`; tables: the layer's rotary (cos, sin) [seq, head]; window: a
        local layer's local_attention, None on a global layer; max_length: see
        rotary_self_attention.
    Returns:
      The same shape and dtype.
    """
    width = flat_hidden.shape[-1]
    with tf1.variable_scope("attention"):
        normed = flat_hidden
        if normalizes_input:
            normed = pre_norm(flat_hidden, layer_norm_eps, fuse)
        with tf1.variable_scope("self"):
            context = rotary_self_attention(normed, mask_bias, batch_size, seq_length,
                                            num_attention_heads, tables, initializer_range,
                                            attention_probs_dropout_prob, packing, fuse,
                                            window, max_length)
        with tf1.variable_scope("output"):
            attended = kernel_dense(context, width, "dense", initializer_range)
    with tf1.variable_scope("intermediate"):
        hidden, normed = _residual_and_norm(attended, flat_hidden,
                                            attention_probs_dropout_prob, layer_norm_eps,
                                            fuse)
        projected = kernel_dense(normed, 2 * intermediate_size, "dense", initializer_range)
        if fuse and fuses_dropout(hidden_dropout_prob) and hasattr(intermediate_act_fn,
                                                                   "fp32_function"):
            gated = fused.gated_activation(intermediate_act_fn.fp32_function)(
                projected, hashed_dropout(hidden_dropout_prob))
        else:
            gated = dropout(geglu(projected, intermediate_act_fn), hidden_dropout_prob)
    with tf1.variable_scope("output"):
        output = kernel_dense(gated, width, "dense", initializer_range)
        return fused.add(output, hidden) if fuse else hidden + output


def _residual_and_norm(attended, residual, dropout_prob, epsilon, fuse):
    """(hidden = residual + dropout(attended), its bias-free norm under LayerNorm/) of
    [rows, hidden] tensors; `fuse`: one XLA kernel each way
    (fused.dropout_add_bias_free_layer_norm)."""
    if fuse and fuses_dropout(dropout_prob):
        return fused.dropout_add_bias_free_layer_norm(
            attended, residual, gamma_variable(residual.shape[-1]),
            hashed_dropout(dropout_prob), epsilon)
    hidden = residual + dropout(attended, dropout_prob)
    return hidden, bias_free_layer_norm(hidden, epsilon=epsilon)


def pre_norm_layer_extras(config, seq_length, max_length=None):
    """ModernBERT's per-layer settings for encoder_layers' layer_extras: each layer's
    window (local layers: local_attention; global ones: None), rotary tables (its
    kind's theta; made once per kind), whether it normalises its input (not layer 0)
    and the rows' bound `max_length` (rotary_self_attention).
    """
    head_size = config.hidden_size // config.num_attention_heads
    kinds = {
        True: (None, rotary.rotary_tables(seq_length, head_size, config.global_rope_theta)),
        False: (config.local_attention,
                rotary.rotary_tables(seq_length, head_size, config.local_rope_theta)),
    }
    extras = []
    for index in range(config.num_hidden_layers):
        window, tables = kinds[config.is_global_layer(index)]
        extras.append(dict(window=window, tables=tables, normalizes_input=index > 0,
                           max_length=max_length))
    return extras


def pre_norm_head(x, config):
    """ModernBERT's prediction head on x [rows, hidden] (compute dtype): bias-free
    layer norm of activation(x @ dense/kernel), variables dense/kernel [hidden, hidden]
    and LayerNorm/gamma in the current scope; [rows, hidden] in x's dtype."""
    projected = kernel_dense(x, config.hidden_size, "dense", config.initializer_range)
    return bias_free_layer_norm(pooler_activation(config)(projected),
                                epsilon=config.layer_norm_eps)


def pre_norm_pooler(sequence_output, input_mask, config):
    """ModernBERT's classifier head as our pooler (variables under pooler/): the first
    token's state or the masked mean of the states (config.classifier_pooling), then
    pre_norm_head.

    Args:
      sequence_output: [batch, seq, hidden] in the compute dtype; input_mask: int
        [batch, seq].
    Returns:
      [batch, hidden] in the compute dtype.
    """
    if config.classifier_pooling == "mean":
        pooled = tf.cast(masked_mean(sequence_output, input_mask), sequence_output.dtype)
    else:
        pooled = sequence_output[:, 0, :]
    with tf1.variable_scope("pooler"):
        return pre_norm_head(pooled, config)


def pre_norm_settings(config, seq_length, fuse=False, max_length=None):
    """encoder_layers' keyword arguments for a pre-norm family (ModernBERT): its layer,
    the layers' windows, rotary tables and rows' bound (pre_norm_layer_extras) and the final
    bias-free norm (variables encoder/final_LayerNorm/gamma; `fuse`: an XLA kernel);
    {} for the others."""
    if not config.family.pre_norm:
        return {}

    def final_norm(flat_hidden):
        return pre_norm(flat_hidden, config.layer_norm_eps, fuse, "final_LayerNorm")
    return dict(layer_fn=pre_norm_layer, final_norm=final_norm,
                layer_extras=pre_norm_layer_extras(config, seq_length, max_length))


def pre_norm_variable_shapes(config):
    """bert_variable_shapes of ModernBERT: no position or token-type table, no biases,
    norms without beta, layer 0 without its attention norm, a final norm, the pooler's
    head (dense kernel and norm)."""
    h, i = config.hidden_size, config.intermediate_size
    shapes = collections.OrderedDict([("bert/embeddings/word_embeddings", [config.vocab_size, h]),
                                      ("bert/embeddings/LayerNorm/gamma", [h])])
    for n in range(config.num_hidden_layers):
        layer = "bert/encoder/layer_%d/" % n
        if n:
            shapes[layer + "attention/LayerNorm/gamma"] = [h]
        shapes[layer + "attention/self/qkv/kernel"] = [h, 3 * h]
        shapes[layer + "attention/output/dense/kernel"] = [h, h]
        shapes[layer + "intermediate/LayerNorm/gamma"] = [h]
        shapes[layer + "intermediate/dense/kernel"] = [h, 2 * i]
        shapes[layer + "output/dense/kernel"] = [i, h]
    shapes["bert/encoder/final_LayerNorm/gamma"] = [h]
    shapes["bert/pooler/dense/kernel"] = [h, h]
    shapes["bert/pooler/LayerNorm/gamma"] = [h]
    return shapes
