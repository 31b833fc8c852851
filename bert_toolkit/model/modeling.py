"""The BERT graph in tf.compat.v1, with the variable layout of Google's checkpoints.

Every variable has exactly the name and shape it has in Google's released
`bert_model.ckpt` files (`bert/embeddings/word_embeddings`,
`bert/encoder/layer_0/attention/self/query/kernel`, ...), so such a checkpoint
initialises this graph unchanged, and what we save loads back into the original
code.

Precision: variables are always float32. The computation runs in
`compute_dtype` (float32, float16 or bfloat16): each variable is cast where it
is used, while softmax, layer normalisation and everything handed back to the
caller (sequence and pooled outputs) stay float32, so losses are float32 too.

The graph is a handful of pure functions (`embedding_layer`, `self_attention`,
`encoder_layers`, `pooler`); `BertModel` is the thin object the original API
exposed, holding their outputs.

Code written against Google's modeling.py keeps working: `gelu`,
`get_activation`, `dropout`, `layer_norm`, `layer_norm_and_dropout`,
`create_initializer`, `embedding_lookup`, `embedding_postprocessor`,
`create_attention_mask_from_input_mask`, `attention_layer`,
`transformer_model`, `get_shape_list`, `reshape_to_matrix`,
`reshape_from_matrix`, `assert_rank` and `get_assignment_map_from_checkpoint`
take Google's arguments and create Google's variables (float32, as there);
they share their code with the graph above, so composing them as Google's
BertModel did gives BertModel's variables and outputs.

`hidden_act` names in a bert_config.json: "gelu" is the tanh approximation
(what Google's code computes for "gelu"), "gelu_exact" the erf form (what
Hugging Face calls "gelu"; the converter translates), plus "relu", "tanh",
"linear".
"""

import collections
import math
import os
import re

import tensorflow as tf

from bert_toolkit.errors import InputError
from bert_toolkit.model import POOLING_MODES, deberta, google_names, modernbert
from bert_toolkit.model.config import BertConfig  # noqa: F401 (modeling.BertConfig)

# The building blocks: the names Google's modeling.py had stay modeling.<name>.
from bert_toolkit.model.layers import (
    FUSED_PACKING_ROWS,
    PACKING_MIN_PADDING,  # noqa: F401 (modeling.PACKING_MIN_PADDING)
    _attend,
    _attention_heads,
    assert_rank,  # noqa: F401 (modeling.assert_rank)
    attention_mask_bias,
    attention_probabilities,  # noqa: F401 (modeling.attention_probabilities)
    computed_in_fp32,  # noqa: F401 (modeling.computed_in_fp32)
    create_initializer,
    dense,
    dense_dropout_add_layer_norm,
    dropout,
    dropout_threshold,  # noqa: F401 (modeling.dropout_threshold)
    embedding_lookup,
    gelu,
    get_activation,
    get_compute_dtype,
    get_shape_list,
    hashed_dropout,  # noqa: F401 (modeling.hashed_dropout)
    layer_norm,
    layer_norm_and_dropout,  # noqa: F401 (modeling.layer_norm_and_dropout)
    masked_mean,
    pack_tokens,
    pooler_activation,  # noqa: F401 (modeling.pooler_activation)
    reshape_from_matrix,  # noqa: F401 (modeling.reshape_from_matrix)
    reshape_to_matrix,
    token_packing,
    unpack_tokens,
)

tf1 = tf.compat.v1


def embedding_postprocessor(input_tensor, use_token_type=False, token_type_ids=None,
                            token_type_vocab_size=16,
                            token_type_embedding_name="token_type_embeddings",
                            use_position_embeddings=True,
                            position_embedding_name="position_embeddings",
                            initializer_range=0.02, max_position_embeddings=512,
                            dropout_prob=0.1, output_dtype=None, position_offset=0,
                            layer_norm_eps=1e-12):
    """Adds token-type and position embeddings, then layer norm and dropout (Google's
    signature and variables; ours: `output_dtype`, the compute dtype of the result,
    and the family pieces `position_offset`, the table row of the first position,
    and `layer_norm_eps`).

    Args:
      input_tensor: float32 [batch, seq, width] word embeddings.
      token_type_ids: int [batch, seq], required with use_token_type.
    """
    batch_size, seq_length, width = get_shape_list(input_tensor, expected_rank=3)
    del batch_size
    init = create_initializer(initializer_range)
    output = input_tensor
    if use_token_type:
        if token_type_ids is None:
            raise ValueError("`token_type_ids` must be specified if `use_token_type` is True.")
        type_table = tf1.get_variable(token_type_embedding_name, [token_type_vocab_size, width],
                                      initializer=init)
        output += tf.gather(type_table, token_type_ids)
    if use_position_embeddings:
        if isinstance(seq_length, int) and \
                seq_length > max_position_embeddings - position_offset:
            raise InputError("sequence length %d exceeds the model's max_position_embeddings "
                             "%d (%d positions from row %d)"
                             % (seq_length, max_position_embeddings,
                                max_position_embeddings - position_offset, position_offset))
        position_table = tf1.get_variable(position_embedding_name,
                                          [max_position_embeddings, width], initializer=init)
        output += tf.slice(position_table, [position_offset, 0],
                           [seq_length, -1])[tf.newaxis]
    return dropout(layer_norm(output, epsilon=layer_norm_eps, output_dtype=output_dtype),
                   dropout_prob)


def embedding_layer(config, input_ids, token_type_ids, is_training,
                    use_one_hot_embeddings=False, compute_dtype=tf.float32, input_mask=None):
    """Word + token-type + position embeddings, layer-normalised (under embeddings/),
    projected to hidden_size (under embeddings_project/) when the config has an
    embedding_size. The family pieces: no token types for type_vocab_size 0, the
    position rows from the family's offset, the config's layer-norm epsilon;
    ModernBERT's (pre_norm_embeddings) and DeBERTa's (relative_embeddings).

    Args:
      input_ids, token_type_ids: int [batch, seq]; input_mask: int [batch, seq] or
        None (all real), which DeBERTa's embeddings are multiplied by.
    Returns:
      (embeddings [batch, seq, hidden] in compute_dtype, word embedding table
      [vocab, embedding_width] float32).
    """
    if config.family.pre_norm:
        return modernbert.pre_norm_embeddings(config, input_ids, is_training,
                                              use_one_hot_embeddings, compute_dtype)
    if config.family.positions == "relative":
        return deberta.relative_embeddings(config, input_ids, input_mask, is_training,
                                           use_one_hot_embeddings, compute_dtype)
    width = config.embedding_width
    with tf1.variable_scope("embeddings"):
        words, word_table = embedding_lookup(
            input_ids, config.vocab_size, width, config.initializer_range,
            "word_embeddings", use_one_hot_embeddings)
        output = embedding_postprocessor(
            words, config.type_vocab_size > 0, token_type_ids, config.type_vocab_size,
            "token_type_embeddings", True, "position_embeddings", config.initializer_range,
            config.max_position_embeddings,
            config.hidden_dropout_prob if is_training else 0.0, output_dtype=compute_dtype,
            position_offset=config.family.position_offset,
            layer_norm_eps=config.layer_norm_eps)
    if config.embedding_size:
        shape = get_shape_list(output, expected_rank=3)
        projected = dense(tf.reshape(output, [-1, width]), config.hidden_size,
                          "embeddings_project", config.initializer_range)
        output = tf.reshape(projected, [shape[0], shape[1], config.hidden_size])
    return output, word_table


def create_attention_mask_from_input_mask(from_tensor, to_mask):
    """float32 [batch, from_seq, to_seq]: 1 where a `from_tensor` position may attend
    to a `to_mask` position (Google's signature).

    Args:
      from_tensor: [batch, from_seq] or [batch, from_seq, ...] (only its shape is used).
      to_mask: int [batch, to_seq], 1 for real tokens.
    """
    batch_size, from_seq_length = get_shape_list(from_tensor, expected_rank=[2, 3])[:2]
    to_seq_length = get_shape_list(to_mask, expected_rank=2)[1]
    to_mask = tf.cast(tf.reshape(to_mask, [batch_size, 1, to_seq_length]), tf.float32)
    return tf.ones([batch_size, from_seq_length, 1], tf.float32) * to_mask


def self_attention(flat_hidden, mask_bias, batch_size, seq_length, num_heads,
                   initializer_range=0.02, attention_dropout=0.0, packing=None, fuse=False,
                   relative=None):
    """Multi-head self-attention of the encoder (variables under query/, key/, value/).

    Args:
      flat_hidden: [batch * seq, hidden] in the compute dtype; with `packing`
        (pack_tokens), the real tokens only: [tokens, hidden].
      mask_bias: float32 from `attention_mask_bias`, or None.
      fuse: see _attend.
      relative: DeBERTa's relative_attention.RelativePositions (relative_settings):
        its content->position and position->content terms join the scores, all
        three scaled by 1 / sqrt(3 * head_size); None for the other families.
    Returns:
      Context in the compute dtype, before the output projection, with the rows
      of `flat_hidden`.
    """
    width = flat_hidden.shape[-1]
    head_size = width // num_heads
    scale = 1.0 / math.sqrt(float(head_size) * (1 if relative is None else 3))
    heads = [_attention_heads(flat_hidden, name, batch_size, seq_length, num_heads,
                              head_size, initializer_range, scale=head_scale, packing=packing)
             for name, head_scale in (("query", scale), ("key", None), ("value", None))]
    position_terms = None
    if relative is not None:
        position_terms = deberta.relative_position_terms(heads[0], heads[1], relative, num_heads,
                                                 scale)
    context = tf.reshape(_attend(*heads, mask_bias, attention_dropout, fuse,
                                 position_terms), [-1, width])
    return context if packing is None else pack_tokens(context, packing)


def attention_layer(from_tensor, to_tensor, attention_mask=None, num_attention_heads=1,
                    size_per_head=512, query_act=None, key_act=None, value_act=None,
                    attention_probs_dropout_prob=0.0, initializer_range=0.02,
                    do_return_2d_tensor=False, batch_size=None, from_seq_length=None,
                    to_seq_length=None):
    """Multi-head attention from `from_tensor` to `to_tensor`: Google's signature and
    variables (query/, key/, value/), float32.

    Args:
      from_tensor, to_tensor: [batch, seq, width], or [batch * seq, width] with
        batch_size, from_seq_length and to_seq_length given.
      attention_mask: [batch, from_seq, to_seq], 1 where attention is allowed.
    Returns:
      [batch, from_seq, heads * size_per_head], or [batch * from_seq, ...] with
      do_return_2d_tensor.
    """
    from_shape = get_shape_list(from_tensor, expected_rank=[2, 3])
    to_shape = get_shape_list(to_tensor, expected_rank=[2, 3])
    if len(from_shape) != len(to_shape):
        raise ValueError("The rank of `from_tensor` must match the rank of `to_tensor`.")
    if len(from_shape) == 3:
        batch_size, from_seq_length, to_seq_length = from_shape[0], from_shape[1], to_shape[1]
    elif batch_size is None or from_seq_length is None or to_seq_length is None:
        raise ValueError("When passing in rank 2 tensors to attention_layer, the values for "
                         "`batch_size`, `from_seq_length`, and `to_seq_length` must all be "
                         "specified.")
    from_2d, to_2d = reshape_to_matrix(from_tensor), reshape_to_matrix(to_tensor)
    query = _attention_heads(from_2d, "query", batch_size, from_seq_length,
                             num_attention_heads, size_per_head, initializer_range, query_act,
                             scale=1.0 / math.sqrt(float(size_per_head)))
    key, value = [_attention_heads(to_2d, name, batch_size, to_seq_length,
                                   num_attention_heads, size_per_head, initializer_range, act)
                  for name, act in (("key", key_act), ("value", value_act))]
    context = _attend(query, key, value, attention_mask_bias(attention_mask),
                      attention_probs_dropout_prob)
    width = num_attention_heads * size_per_head
    if do_return_2d_tensor:
        return tf.reshape(context, [batch_size * from_seq_length, width])
    return tf.reshape(context, [batch_size, from_seq_length, width])


def transformer_layer(flat_hidden, mask_bias, batch_size, seq_length, num_attention_heads,
                      intermediate_size, intermediate_act_fn, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0, initializer_range=0.02,
                      packing=None, fuse=False, layer_norm_eps=1e-12, relative=None):
    """One encoder block: attention, add & norm, feed-forward, add & norm.

    Args:
      flat_hidden: [batch * seq, hidden] in the compute dtype, or [tokens, hidden]
        with `packing` (pack_tokens).
      fuse: the element-wise work in XLA kernels (_attend, dense,
        dense_dropout_add_layer_norm).
      relative: DeBERTa's relative positions (self_attention), or None.
    Returns:
      The same shape and dtype.
    """
    with tf1.variable_scope("attention"):
        with tf1.variable_scope("self"):
            context = self_attention(flat_hidden, mask_bias, batch_size, seq_length,
                                     num_attention_heads, initializer_range,
                                     attention_probs_dropout_prob, packing, fuse, relative)
        with tf1.variable_scope("output"):
            attention_output = dense_dropout_add_layer_norm(
                context, flat_hidden, hidden_dropout_prob, initializer_range, fuse,
                layer_norm_eps)
    with tf1.variable_scope("intermediate"):
        intermediate = dense(attention_output, intermediate_size, "dense", initializer_range,
                             intermediate_act_fn, fuse)
    with tf1.variable_scope("output"):
        return dense_dropout_add_layer_norm(intermediate, attention_output,
                                            hidden_dropout_prob, initializer_range, fuse,
                                            layer_norm_eps)


def encoder_layers(input_tensor, mask_bias, num_hidden_layers, packing=None,
                   shares_layers=False, layer_fn=None, layer_extras=None, final_norm=None,
                   **layer_settings):
    """The encoder stack (variables under layer_N/): a list of num_hidden_layers
    tensors [batch, seq, hidden] in the dtype of `input_tensor` [batch, seq, hidden].

    shares_layers: every layer runs layer_0's variables (ALBERT).
    packing: from token_packing(input_mask): every layer but the attention products
      runs on the rows it packs only, and the outputs' other positions are zeros
      (when packing.packed).
    layer_fn: the layer (default transformer_layer; ModernBERT's pre_norm_layer);
      layer_extras: a list of one dict per layer of further keyword arguments (its
      window, rotary tables), or None; final_norm: a function of the last layer's
      rows [rows, hidden] -> the same, its variables under the encoder (pre-norm
      stacks end with a norm), or None.
    layer_settings: the layer's keyword arguments after seq_length.
    """
    layer_fn = layer_fn or transformer_layer
    batch_size, seq_length, width = get_shape_list(input_tensor, expected_rank=3)
    # The residual stream stays 2-D between layers: every dense layer is then a
    # plain matmul, with no reshape around it.
    flat_hidden = tf.reshape(input_tensor, [-1, width])
    if packing is not None:
        flat_hidden = pack_tokens(flat_hidden, packing)
    layer_outputs = []
    for index in range(num_hidden_layers):
        scope = "layer_0" if shares_layers else "layer_%d" % index
        settings = dict(layer_settings, **(layer_extras[index] if layer_extras else {}))
        with tf1.variable_scope(scope, reuse=tf1.AUTO_REUSE if shares_layers else None):
            flat_hidden = layer_fn(flat_hidden, mask_bias, batch_size, seq_length,
                                   packing=packing, **settings)
        flat_output = flat_hidden
        if final_norm is not None and index == num_hidden_layers - 1:
            flat_output = final_norm(flat_hidden)
        # Unused layers' unpacking is pruned from the graph that runs.
        if packing is not None:
            flat_output = unpack_tokens(flat_output, packing)
        layer_outputs.append(tf.reshape(flat_output, [batch_size, seq_length, width]))
    return layer_outputs


def transformer_model(input_tensor, attention_mask=None, hidden_size=768,
                      num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                      intermediate_act_fn=gelu, hidden_dropout_prob=0.1,
                      attention_probs_dropout_prob=0.1, initializer_range=0.02,
                      do_return_all_layers=False):
    """Google's transformer_model: the encoder stack (variables layer_N/...), float32.

    Args:
      input_tensor: [batch, seq, hidden_size].
      attention_mask: [batch, seq, seq] (create_attention_mask_from_input_mask), or None.
    Returns:
      The last layer [batch, seq, hidden_size], or the list of every layer's output.
    """
    if hidden_size % num_attention_heads != 0:
        raise ValueError("The hidden size (%d) is not a multiple of the number of attention "
                         "heads (%d)" % (hidden_size, num_attention_heads))
    width = get_shape_list(input_tensor, expected_rank=3)[2]
    if width != hidden_size:
        raise ValueError("The width of the input tensor (%d) != hidden size (%d)"
                         % (width, hidden_size))
    layers = encoder_layers(
        input_tensor, attention_mask_bias(attention_mask), num_hidden_layers,
        num_attention_heads=num_attention_heads, intermediate_size=intermediate_size,
        intermediate_act_fn=intermediate_act_fn, hidden_dropout_prob=hidden_dropout_prob,
        attention_probs_dropout_prob=attention_probs_dropout_prob,
        initializer_range=initializer_range)
    return layers if do_return_all_layers else layers[-1]


def sentence_vector(model, input_mask, pooling="pooler"):
    """float32 [batch, hidden] of a BertModel, as `pooling` (see POOLING_MODES) says.

    Args:
      input_mask: int [batch, seq], 1 for real tokens.
    """
    if pooling == "pooler":
        return model.get_pooled_output()
    if pooling != "mean":
        raise ValueError("pooling %r: expected one of %s" % (pooling, ", ".join(POOLING_MODES)))
    return masked_mean(model.get_sequence_output(), input_mask)


def pooler(sequence_output, config):
    """activation(dense(first token's state)) (variables under pooler/dense/): tanh
    for BERT, the family's classifier activation for the others (families.py).

    Args:
      sequence_output: [batch, seq, hidden] in the compute dtype.
    Returns:
      [batch, hidden] in the compute dtype.
    """
    with tf1.variable_scope("pooler"):
        first_token = sequence_output[:, 0, :]
        return dense(first_token, config.hidden_size, "dense", config.initializer_range,
                     activation=pooler_activation(config))


def fuses_elementwise(is_training, compute_dtype):
    """Whether a BertModel runs its element-wise chains as XLA kernels (fused.py):
    in bf16 training graphs, where TensorFlow's bf16 element-wise kernels are slow
    and nothing is exported."""
    return is_training and compute_dtype == tf.bfloat16


class BertModel(object):
    """The BERT encoder, with the constructor and getters of the original API.

    Example:
      model = BertModel(config, is_training=True, input_ids=ids, input_mask=mask,
                        token_type_ids=types, compute_dtype=tf.bfloat16)
      pooled = model.get_pooled_output()    # float32 [batch, hidden]

    skip_padding=True runs the encoder's token-wise layers on the real tokens of
    `input_mask` only (token_packing): the same outputs at the real positions for
    a fraction of the work on padded text; padding positions then come out as
    zeros (a batch with less than PACKING_MIN_PADDING of padding runs as usual),
    but for those that round the token count of a bf16 training graph
    (FUSED_PACKING_ROWS).

    max_seq_length: the longest `input_ids` can be when its length is unknown while
    the graph is built (batches cut to their longest text): ModernBERT's attention
    then runs squares where every possible length is short (long_attention).
    """

    def __init__(self, config, is_training, input_ids, input_mask=None, token_type_ids=None,
                 use_one_hot_embeddings=False, scope=None, compute_dtype=tf.float32,
                 skip_padding=False, max_seq_length=None):
        if isinstance(compute_dtype, str):
            compute_dtype = get_compute_dtype(compute_dtype)
        if input_mask is None:
            input_mask = tf.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = tf.zeros_like(input_ids)
        config.validate()
        fuse = fuses_elementwise(is_training, compute_dtype)
        packing = token_packing(input_mask, FUSED_PACKING_ROWS if fuse else 1) \
            if skip_padding else None
        with tf1.variable_scope(scope, default_name="bert"):
            seq_length = get_shape_list(input_ids, expected_rank=2)[1]
            embeddings, self._embedding_table = embedding_layer(
                config, input_ids, token_type_ids, is_training,
                use_one_hot_embeddings, compute_dtype, input_mask)
            with tf1.variable_scope("encoder"):
                layers = encoder_layers(
                    embeddings, attention_mask_bias(input_mask), config.num_hidden_layers,
                    num_attention_heads=config.num_attention_heads,
                    intermediate_size=config.intermediate_size,
                    intermediate_act_fn=get_activation(config.hidden_act),
                    hidden_dropout_prob=config.hidden_dropout_prob if is_training else 0.0,
                    attention_probs_dropout_prob=(config.attention_probs_dropout_prob
                                                  if is_training else 0.0),
                    initializer_range=config.initializer_range,
                    packing=packing, fuse=fuse, layer_norm_eps=config.layer_norm_eps,
                    shares_layers=config.family.shares_layers,
                    **modernbert.pre_norm_settings(config, seq_length, fuse, max_seq_length),
                    **deberta.relative_settings(config, seq_length, compute_dtype,
                                                is_training))
            if config.family.pre_norm:
                pooled = modernbert.pre_norm_pooler(layers[-1], input_mask, config)
            else:
                pooled = pooler(layers[-1], config)
            self._scope = tf1.get_variable_scope()
        self._config = config
        self._last_layer = layers[-1]  # in the compute dtype, for the token heads
        self._token_head_output = None
        self._dense_rows = tf.size(input_mask) if not skip_padding else tf.where(
            packing.packed, tf.size(packing.rows), tf.size(input_mask))
        self._embedding_output = tf.cast(embeddings, tf.float32)
        self._all_encoder_layers = [tf.cast(layer, tf.float32) for layer in layers]
        self._sequence_output = self._all_encoder_layers[-1]
        self._pooled_output = tf.cast(pooled, tf.float32)

    def get_pooled_output(self):
        """float32 [batch, hidden]."""
        return self._pooled_output

    def get_token_head_input(self):
        """float32 [batch, seq, hidden]: what the family's token-level heads (token
        classification, SQuAD) classify: the sequence output, or for ModernBERT, whose
        stock ...ForTokenClassification and ...ForQuestionAnswering put their head on
        every token, the pooler's dense + GELU + norm (pre_norm_head, the pooler's
        variables) of every token's state."""
        if not self._config.family.pre_norm:
            return self._sequence_output
        if self._token_head_output is None:
            sequence = self._last_layer
            batch_size, seq_length, width = get_shape_list(sequence, expected_rank=3)
            with tf1.variable_scope(self._scope, reuse=True):
                with tf1.variable_scope("pooler"):
                    heads = modernbert.pre_norm_head(tf.reshape(sequence, [-1, width]),
                                                     self._config)
            self._token_head_output = tf.cast(
                tf.reshape(heads, [batch_size, seq_length, width]), tf.float32)
        return self._token_head_output

    def get_sequence_output(self):
        """float32 [batch, seq, hidden]: the last encoder layer."""
        return self._sequence_output

    def get_all_encoder_layers(self):
        return self._all_encoder_layers

    def get_embedding_output(self):
        return self._embedding_output

    def get_dense_rows(self):
        """int32 scalar: the rows each dense layer of the encoder ran on (batch *
        seq, or the real tokens when it skipped the padding)."""
        return self._dense_rows

    def get_embedding_table(self):
        """float32 [vocab, hidden]."""
        return self._embedding_table


def variable_name(variable):
    """A variable's name without the output suffix: "bert/x/kernel:0" -> "bert/x/kernel"."""
    return re.sub(r":\d+$", "", variable.name)


def get_assignment_map_from_checkpoint(tvars, init_checkpoint):
    """Maps the checkpoint variables that `tvars` also has onto them: by the same name,
    or where the checkpoint lacks it, by its name in Google's ELECTRA or ALBERT
    checkpoints (google_names.py).

    Returns:
      (assignment_map: OrderedDict checkpoint name -> variable name,
       initialized_variable_names: dict with each variable name and name + ":0").
    """
    stored = collections.OrderedDict(tf.train.list_variables(init_checkpoint))
    assignment_map = collections.OrderedDict()
    initialized_variable_names = {}
    for name in (variable_name(v) for v in tvars):
        source = google_names.stored_name(name, stored)
        if source is not None:
            assignment_map[source] = name
            initialized_variable_names[name] = 1
            initialized_variable_names[name + ":0"] = 1
    return assignment_map, initialized_variable_names


def resolve_checkpoint(path):
    """Accepts a checkpoint prefix or a folder holding one; returns the prefix."""
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            candidates = tf.io.gfile.glob(path.rstrip("/") + "/*.index")
            if len(candidates) != 1:
                raise InputError("%s: expected one checkpoint in this folder, found %d"
                                 % (path, len(candidates)))
            latest = candidates[0][:-len(".index")]
        return latest
    if not tf.io.gfile.exists(path + ".index"):
        raise InputError("%s: no such checkpoint (expected %s.index)" % (path, path))
    return path


def bert_variable_shapes(config):
    """name -> shape of every variable BertModel creates under the default "bert" scope."""
    if config.family.pre_norm:
        return modernbert.pre_norm_variable_shapes(config)
    h, i, e = config.hidden_size, config.intermediate_size, config.embedding_width
    shapes = collections.OrderedDict([("bert/embeddings/word_embeddings", [config.vocab_size, e])])
    if config.type_vocab_size:
        shapes["bert/embeddings/token_type_embeddings"] = [config.type_vocab_size, e]
    if config.family.positions == "relative":
        shapes.update(deberta.relative_embedding_shapes(config))
    else:
        shapes["bert/embeddings/position_embeddings"] = [config.max_position_embeddings, e]
        shapes["bert/embeddings/LayerNorm/beta"] = [e]
        shapes["bert/embeddings/LayerNorm/gamma"] = [e]
    if config.embedding_size and config.family.positions != "relative":
        shapes["bert/embeddings_project/kernel"] = [e, h]
        shapes["bert/embeddings_project/bias"] = [h]
    for n in range(1 if config.family.shares_layers else config.num_hidden_layers):
        layer = "bert/encoder/layer_%d/" % n
        for dense_name, in_size, out_size in (
                ("attention/self/query", h, h), ("attention/self/key", h, h),
                ("attention/self/value", h, h), ("attention/output/dense", h, h),
                ("intermediate/dense", h, i), ("output/dense", i, h)):
            shapes[layer + dense_name + "/kernel"] = [in_size, out_size]
            shapes[layer + dense_name + "/bias"] = [out_size]
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            shapes[layer + norm + "/beta"] = [h]
            shapes[layer + norm + "/gamma"] = [h]
    shapes["bert/pooler/dense/kernel"] = [h, h]
    shapes["bert/pooler/dense/bias"] = [h]
    return shapes


# Variables of the graph a pre-trained checkpoint may lack, which then start from
# random initialisation: the pooler, which ELECTRA, DistilBERT and the masked-LM
# releases of RoBERTa and XLM-R (and of BERT) do not have; their stock classifiers
# start that layer (classifier.dense, pre_classifier) from random values too.
OPTIONAL_VARIABLES = ("bert/pooler/",)


def check_checkpoint_compatible(expected_shapes, init_checkpoint, required_prefix="bert/"):
    """Raises InputError unless the checkpoint fits the graph.

    Args:
      expected_shapes: name -> shape (list) of the graph's variables, e.g. from
        `bert_variable_shapes(config)` before any graph exists.

    Every variable under `required_prefix` must be in the checkpoint but the
    pooler's (OPTIONAL_VARIABLES), and every variable the checkpoint shares with the
    graph must have the same shape: a checkpoint of another config or a truncated
    one is caught here, before training starts, with the variable named.
    """
    stored = dict(tf.train.list_variables(init_checkpoint))
    for name, shape in expected_shapes.items():
        source = google_names.stored_name(name, stored)
        if source is None:
            if name.startswith(required_prefix) and not name.startswith(OPTIONAL_VARIABLES):
                raise InputError("%s: checkpoint has no variable %s %s (is it a BERT "
                                 "checkpoint of this bert_config?)"
                                 % (init_checkpoint, name, list(shape)))
            continue
        if list(stored[source]) != list(shape):
            raise InputError("%s: variable %s has shape %s in the checkpoint but %s in "
                             "the model (checkpoint from a different bert_config?)"
                             % (init_checkpoint, source, list(stored[source]), list(shape)))


def init_from_checkpoint(init_checkpoint, tvars=None):
    """Checks and initialises the graph's variables from `init_checkpoint`.

    Call inside a model_fn; under a distribution strategy the variables of every
    replica are initialised. Returns the set of initialised variable names.
    """
    tvars = tf1.trainable_variables() if tvars is None else tvars
    init_checkpoint = resolve_checkpoint(init_checkpoint)
    check_checkpoint_compatible(
        {variable_name(v): v.shape.as_list() for v in tvars}, init_checkpoint)
    assignment_map, initialized = get_assignment_map_from_checkpoint(tvars, init_checkpoint)
    tf1.train.init_from_checkpoint(init_checkpoint, assignment_map)
    return {name for name in initialized if not name.endswith(":0")}


def write_initial_checkpoint(config, directory, extra_variables=None, seed=None):
    """Writes `config` as directory/bert_config.json and its freshly initialised encoder
    as directory/bert_model.ckpt (a model to train from its start: benches, tests).

    Args:
      extra_variables: {name: shape} of further float32 variables the checkpoint holds
        (a head's), drawn from a normal of stddev 0.02 (truncated) as Google's heads are.
      seed: the graph's random seed (None: a fresh draw).
    Returns:
      dict(bert_config_file, init_checkpoint), as the tasks' options name them.
    """
    tf.io.gfile.makedirs(directory)
    config_file = os.path.join(directory, "bert_config.json")
    config.to_json_file(config_file)
    graph = tf.Graph()
    with graph.as_default():
        if seed is not None:
            tf1.set_random_seed(seed)
        BertModel(config, False, tf1.placeholder(tf.int32, [None, 8]))
        for name, shape in (extra_variables or {}).items():
            tf1.get_variable(name, shape,
                             initializer=tf1.truncated_normal_initializer(stddev=0.02))
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            checkpoint = tf1.train.Saver().save(
                session, os.path.join(directory, "bert_model.ckpt"), write_meta_graph=False)
    return dict(bert_config_file=config_file, init_checkpoint=checkpoint)


def check_vocab_matches_config(config, vocab_size, vocab_file):
    """Raises InputError if vocab.txt has another size than the embedding table (for
    DeBERTa: more ids than the table has rows; microsoft/deberta-v3-base's table has
    128100 rows for its tokenizer's 128001 ids)."""
    if config.family.positions == "relative" and vocab_size <= config.vocab_size:
        return
    if vocab_size != config.vocab_size:
        raise InputError("%s: has %d tokens but bert_config vocab_size is %d (vocab and "
                         "model do not belong together)"
                         % (vocab_file, vocab_size, config.vocab_size))


def check_max_seq_length(config, max_seq_length, flag_name="max_seq_length"):
    """Raises InputError if sequences would be longer than the position table."""
    if max_seq_length > config.max_sequence_length:
        raise InputError("--%s=%d is longer than the model's %d positions "
                         "(max_position_embeddings %d)"
                         % (flag_name, max_seq_length, config.max_sequence_length,
                            config.max_position_embeddings))
