"""DeBERTa-v3's pieces of the encoder (families.py: positions "relative").

Its embeddings (the word table alone, normalised and masked), the relative-
position table every layer reads (`relative_settings`) and each layer's two
position terms (`relative_position_terms`), which modeling.self_attention adds to
its scores; the rest of a DeBERTa layer is BERT's. The arithmetic of the
relative positions (log buckets, the skew) is relative_attention.py's.
"""

import collections

import tensorflow as tf

from bert_toolkit.errors import InputError
from bert_toolkit.model import relative_attention
from bert_toolkit.model.layers import (
    dropout,
    embedding_lookup,
    get_shape_list,
    kernel_dense,
    layer_norm,
)

tf1 = tf.compat.v1


def relative_embeddings(config, input_ids, input_mask, is_training,
                        use_one_hot_embeddings=False, compute_dtype=tf.float32):
    """DeBERTa's embeddings: the word table alone (positions are relative, in the
    attention; no token types), projected to hidden_size without a bias when
    embedding_size is set (embeddings_project/kernel), then layer-normalised at the
    hidden width (embeddings/LayerNorm), multiplied by the input mask, dropout.

    Args:
      input_ids: int [batch, seq]; input_mask: int [batch, seq] or None.
    Returns:
      (embeddings [batch, seq, hidden] in compute_dtype, word table [vocab, width]).
    """
    batch_size, seq_length = get_shape_list(input_ids, expected_rank=2)
    if isinstance(seq_length, int) and seq_length > config.max_position_embeddings:
        raise InputError("sequence length %d exceeds the %s model's max_position_embeddings "
                         "%d (its relative positions reach that far)"
                         % (seq_length, config.model_family, config.max_position_embeddings))
    width = config.embedding_width
    with tf1.variable_scope("embeddings"):
        words, word_table = embedding_lookup(
            input_ids, config.vocab_size, width, config.initializer_range,
            "word_embeddings", use_one_hot_embeddings)
    words = tf.cast(words, compute_dtype)
    if config.embedding_size:
        projected = kernel_dense(tf.reshape(words, [-1, width]), config.hidden_size,
                                 "embeddings_project", config.initializer_range)
        words = tf.reshape(projected, [batch_size, seq_length, config.hidden_size])
    with tf1.variable_scope("embeddings"):
        output = layer_norm(words, epsilon=config.layer_norm_eps)
    if input_mask is not None:
        output *= tf.cast(input_mask, compute_dtype)[:, :, tf.newaxis]
    return dropout(output, config.hidden_dropout_prob if is_training else 0.0), word_table


def relative_settings(config, seq_length, compute_dtype, is_training):
    """encoder_layers' keyword arguments for DeBERTa's relative positions ({} for
    the other families): `relative`, the RelativePositions every layer reads: the
    table (variables rel_embeddings and rel_embeddings_LayerNorm/ under the current
    scope, the encoder's) layer-normalised once, in compute_dtype, and its rows of
    the distances a sequence of seq_length (int or scalar tensor) spans, picked once."""
    if config.family.positions != "relative":
        return {}
    table = relative_attention.relative_table(config.hidden_size, config.relative_span,
                                              config.initializer_range)
    normed = layer_norm(table, "rel_embeddings_LayerNorm", config.layer_norm_eps,
                        output_dtype=compute_dtype)
    rows = relative_attention.sequence_rows(
        relative_attention.distance_rows(config.position_buckets, config.max_relative_positions,
                                         config.max_position_embeddings),
        seq_length, config.max_position_embeddings)
    picked = None
    if relative_attention.picks_rows_first(
            seq_length if isinstance(seq_length, int) else None, config.relative_span):
        picked = tf.gather(normed, rows)
    return {"relative": relative_attention.RelativePositions(
        normed, rows, picked, config.hidden_dropout_prob if is_training else 0.0)}


def relative_position_terms(query, key, relative, num_heads, scale):
    """DeBERTa's content->position and position->content terms
    (relative_attention.skewed_products: [heads, batch, seq, seq] each, which
    relative_attention.combine adds to the scores).

    The table rows of the sequence's distances go through this layer's own key and
    query projections (the variables key/ and query/ of the current scope: DeBERTa-v3
    shares them, share_att_key), the query side scaled as the queries are: the rows
    picked once (relative.rows), or for sequences longer than the table's span the
    table, whose projections are then picked (relative.index).

    Args:
      query, key: [batch, heads, seq, head_size] in the compute dtype (query scaled).
    """
    if relative.rows is not None:
        source, index = relative.rows, None
    else:
        source, index = relative.table, relative.index
    source = dropout(source, relative.dropout_prob)  # transformers' pos_dropout
    head_size = query.shape[-1]

    def project(name, factor=None):
        with tf1.variable_scope(name, reuse=True):
            kernel = tf1.get_variable("kernel", dtype=tf.float32)
            bias = tf1.get_variable("bias", dtype=tf.float32)
        projected = tf.nn.bias_add(tf.matmul(source, tf.cast(kernel, source.dtype)),
                                   tf.cast(bias, source.dtype))
        if factor is not None:
            projected *= tf.cast(factor, projected.dtype)
        if index is not None:
            projected = tf.gather(projected, index)  # [2 seq, hidden]
        return tf.transpose(tf.reshape(projected, [-1, num_heads, head_size]), [1, 0, 2])

    return relative_attention.skewed_products(query, key, project("query", scale),
                                              project("key"))


def relative_embedding_shapes(config):
    """DeBERTa's variables besides the word table and the layers: the projection (no
    bias) when embedding_size is set, the embeddings' layer norm at the hidden width,
    the relative-position table and its layer norm."""
    h, e = config.hidden_size, config.embedding_width
    shapes = collections.OrderedDict()
    if config.embedding_size:
        shapes["bert/embeddings_project/kernel"] = [e, h]
    shapes["bert/embeddings/LayerNorm/beta"] = [h]
    shapes["bert/embeddings/LayerNorm/gamma"] = [h]
    shapes["bert/encoder/rel_embeddings"] = [2 * config.relative_span, h]
    shapes["bert/encoder/rel_embeddings_LayerNorm/beta"] = [h]
    shapes["bert/encoder/rel_embeddings_LayerNorm/gamma"] = [h]
    return shapes
