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

The graph is a handful of pure functions (`embedding_layer`,
`attention_layer`, `transformer_model`, `pooler`); `BertModel` is the thin
object the original API exposed, holding their outputs.

`hidden_act` names in a bert_config.json: "gelu" is the tanh approximation
(what Google's code computes for "gelu"), "gelu_exact" the erf form (what
Hugging Face calls "gelu"; the converter translates), plus "relu", "tanh",
"linear".
"""

import collections
import copy
import json
import math
import re

import tensorflow as tf

from errors import InputError

tf1 = tf.compat.v1

_ACTIVATIONS = {
    "gelu": lambda x: tf.nn.gelu(x, approximate=True),
    "gelu_new": lambda x: tf.nn.gelu(x, approximate=True),
    "gelu_exact": lambda x: tf.nn.gelu(x, approximate=False),
    "relu": tf.nn.relu,
    "tanh": tf.tanh,
    "linear": tf.identity,
}

_COMPUTE_DTYPES = {"float32": tf.float32, "float16": tf.float16, "bfloat16": tf.bfloat16}


class BertConfig(object):
    """Hyper-parameters of a BERT model, as stored in bert_config.json."""

    _REQUIRED_INTS = ("vocab_size", "hidden_size", "num_hidden_layers",
                      "num_attention_heads", "intermediate_size")
    _DEFAULTS = collections.OrderedDict([
        ("hidden_act", "gelu"),
        ("hidden_dropout_prob", 0.1),
        ("attention_probs_dropout_prob", 0.1),
        ("max_position_embeddings", 512),
        ("type_vocab_size", 16),
        ("initializer_range", 0.02),
    ])

    def __init__(self, vocab_size, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 max_position_embeddings=512, type_vocab_size=16,
                 initializer_range=0.02):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range

    def validate(self, source="BertConfig"):
        """Raises InputError (naming `source`) for a field of the wrong type or value."""
        for name in self._REQUIRED_INTS + ("max_position_embeddings", "type_vocab_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError("%s: %r must be a positive integer, got %r"
                                 % (source, name, value))
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not 0.0 <= value < 1.0:
                raise InputError("%s: %r must be a number in [0, 1), got %r"
                                 % (source, name, value))
        if isinstance(self.initializer_range, bool) or \
                not isinstance(self.initializer_range, (int, float)) or self.initializer_range <= 0:
            raise InputError("%s: 'initializer_range' must be a positive number, got %r"
                             % (source, self.initializer_range))
        if self.hidden_act not in _ACTIVATIONS:
            raise InputError("%s: 'hidden_act' must be one of %s, got %r"
                             % (source, ", ".join(sorted(_ACTIVATIONS)), self.hidden_act))
        if self.hidden_size % self.num_attention_heads:
            raise InputError("%s: hidden_size %d is not a multiple of num_attention_heads %d"
                             % (source, self.hidden_size, self.num_attention_heads))

    @classmethod
    def from_dict(cls, json_object, source="BertConfig"):
        """Builds a config from a dict; unknown keys are ignored, missing ones named."""
        if not isinstance(json_object, dict):
            raise InputError("%s: expected a JSON object, got %s"
                             % (source, type(json_object).__name__))
        missing = [k for k in cls._REQUIRED_INTS if k not in json_object]
        if missing:
            raise InputError("%s: missing required field(s) %s"
                             % (source, ", ".join(repr(k) for k in missing)))
        fields = {k: json_object[k] for k in cls._REQUIRED_INTS}
        for key, default in cls._DEFAULTS.items():
            fields[key] = json_object.get(key, default)
        config = cls(**fields)
        config.validate(source)
        return config

    @classmethod
    def from_json_file(cls, json_file):
        """Reads bert_config.json; any problem is an InputError naming the file."""
        try:
            with tf.io.gfile.GFile(json_file, "r") as reader:
                text = reader.read()
        except (tf.errors.NotFoundError, tf.errors.PermissionDeniedError, OSError) as e:
            raise InputError("%s: cannot read the BERT config (%s)"
                             % (json_file, getattr(e, "message", e)))
        try:
            json_object = json.loads(text)
        except ValueError as e:
            raise InputError("%s: not valid JSON (%s)" % (json_file, e))
        return cls.from_dict(json_object, source=json_file)

    def to_dict(self):
        return copy.deepcopy(self.__dict__)

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, json_file):
        with tf.io.gfile.GFile(json_file, "w") as writer:
            writer.write(self.to_json_string())


def get_compute_dtype(precision):
    """Maps a precision name ("fp32", "fp16", "bf16" or a dtype name) to a tf.DType."""
    aliases = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
    name = aliases.get(precision, precision)
    if name not in _COMPUTE_DTYPES:
        raise InputError("precision must be one of fp32, fp16, bf16, got %r" % (precision,))
    return _COMPUTE_DTYPES[name]


def get_activation(name):
    """The activation function for a `hidden_act` name."""
    if name not in _ACTIVATIONS:
        raise InputError("unknown activation %r (expected one of %s)"
                         % (name, ", ".join(sorted(_ACTIVATIONS))))
    return _ACTIVATIONS[name]


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


def dropout(x, rate):
    """Dropout that is a no-op for rate 0 (so eval and inference graphs stay lean)."""
    if rate is None or rate == 0.0:
        return x
    return tf.nn.dropout(x, rate=rate)


def dense(x, units, name, initializer_range=0.02, activation=None):
    """A dense layer with float32 variables `name/kernel` [in, units], `name/bias` [units].

    Args:
      x: [rows, in] in the compute dtype; the result [rows, units] has the same dtype.
    """
    in_units = x.shape[-1]
    with tf1.variable_scope(name):
        kernel = tf1.get_variable("kernel", [in_units, units], dtype=tf.float32,
                                  initializer=create_initializer(initializer_range))
        bias = tf1.get_variable("bias", [units], dtype=tf.float32,
                                initializer=tf1.zeros_initializer())
    y = tf.matmul(x, tf.cast(kernel, x.dtype))
    y = tf.nn.bias_add(y, tf.cast(bias, x.dtype))
    return activation(y) if activation is not None else y


def layer_norm(x, name="LayerNorm", epsilon=1e-12, output_dtype=None):
    """Layer normalisation over the last axis, computed in float32.

    Variables `name/gamma`, `name/beta` [hidden] as in Google's checkpoints.
    Returns `output_dtype` (default: the dtype of `x`).
    """
    output_dtype = output_dtype or x.dtype
    hidden = x.shape[-1]
    with tf1.variable_scope(name):
        beta = tf1.get_variable("beta", [hidden], dtype=tf.float32,
                                initializer=tf1.zeros_initializer())
        gamma = tf1.get_variable("gamma", [hidden], dtype=tf.float32,
                                 initializer=tf1.ones_initializer())
    x32 = tf.cast(x, tf.float32)
    mean, variance = tf.nn.moments(x32, axes=[-1], keepdims=True)
    y = (x32 - mean) * tf.math.rsqrt(variance + epsilon) * gamma + beta
    return tf.cast(y, output_dtype)


def embedding_layer(config, input_ids, token_type_ids, is_training,
                    use_one_hot_embeddings=False, compute_dtype=tf.float32):
    """Word + token-type + position embeddings, layer-normalised.

    Args:
      input_ids, token_type_ids: int [batch, seq].
    Returns:
      (embeddings [batch, seq, hidden] in compute_dtype, word embedding table
      [vocab, hidden] float32).
    """
    batch_size, seq_length = get_shape_list(input_ids, expected_rank=2, name="input_ids")
    if isinstance(seq_length, int) and seq_length > config.max_position_embeddings:
        raise InputError("sequence length %d exceeds the model's max_position_embeddings %d"
                         % (seq_length, config.max_position_embeddings))
    init = create_initializer(config.initializer_range)
    with tf1.variable_scope("embeddings"):
        word_table = tf1.get_variable("word_embeddings",
                                      [config.vocab_size, config.hidden_size], initializer=init)
        if use_one_hot_embeddings:
            one_hot = tf.one_hot(input_ids, depth=config.vocab_size)
            words = tf.einsum("bsv,vh->bsh", one_hot, word_table)
        else:
            words = tf.gather(word_table, input_ids)
        type_table = tf1.get_variable("token_type_embeddings",
                                      [config.type_vocab_size, config.hidden_size],
                                      initializer=init)
        types = tf.gather(type_table, token_type_ids)
        position_table = tf1.get_variable("position_embeddings",
                                          [config.max_position_embeddings, config.hidden_size],
                                          initializer=init)
        positions = tf.slice(position_table, [0, 0], [seq_length, -1])
        summed = words + types + positions[tf.newaxis]
        output = layer_norm(summed, output_dtype=compute_dtype)
        if is_training:
            output = dropout(output, config.hidden_dropout_prob)
    return output, word_table


def attention_mask_bias(input_mask):
    """Additive float32 mask [batch, 1, 1, seq]: 0 where attended, -10000 where padded."""
    mask = tf.cast(input_mask, tf.float32)[:, tf.newaxis, tf.newaxis, :]
    return (1.0 - mask) * -10000.0


def attention_layer(flat_hidden, mask_bias, batch_size, seq_length, num_heads,
                    initializer_range=0.02, attention_dropout=0.0):
    """Multi-head self-attention (variables under query/, key/, value/).

    Args:
      flat_hidden: [batch * seq, hidden] in the compute dtype.
      mask_bias: float32 [batch, 1, 1, seq] from `attention_mask_bias`.
    Returns:
      Context [batch * seq, hidden] in the compute dtype, before the output projection.
    """
    width = flat_hidden.shape[-1]
    head_size = width // num_heads

    def heads(name, scale=None):
        projected = dense(flat_hidden, width, name, initializer_range)
        if scale is not None:
            projected *= tf.cast(scale, projected.dtype)
        # [batch, seq, heads, head] -> [batch, heads, seq, head]
        split = tf.reshape(projected, [batch_size, seq_length, num_heads, head_size])
        return tf.transpose(split, [0, 2, 1, 3])

    query = heads("query", 1.0 / math.sqrt(float(head_size)))
    key = heads("key")
    value = heads("value")
    scores = tf.matmul(query, key, transpose_b=True)  # [batch, heads, seq, seq]
    # Softmax in float32: fp16 logits overflow and bf16 loses the small probabilities.
    probs = tf.nn.softmax(tf.cast(scores, tf.float32) + mask_bias)
    probs = dropout(probs, attention_dropout)
    context = tf.matmul(tf.cast(probs, flat_hidden.dtype), value)  # [batch, heads, seq, head]
    context = tf.transpose(context, [0, 2, 1, 3])
    return tf.reshape(context, [-1, width])


def transformer_layer(flat_hidden, mask_bias, batch_size, seq_length, config, is_training):
    """One encoder block: attention, add & norm, feed-forward, add & norm.

    Args:
      flat_hidden: [batch * seq, hidden] in the compute dtype.
    Returns:
      [batch * seq, hidden] in the compute dtype.
    """
    hidden_dropout = config.hidden_dropout_prob if is_training else 0.0
    attention_dropout = config.attention_probs_dropout_prob if is_training else 0.0
    with tf1.variable_scope("attention"):
        with tf1.variable_scope("self"):
            context = attention_layer(flat_hidden, mask_bias, batch_size, seq_length,
                                      config.num_attention_heads, config.initializer_range,
                                      attention_dropout)
        with tf1.variable_scope("output"):
            projected = dense(context, config.hidden_size, "dense", config.initializer_range)
            attention_output = layer_norm(dropout(projected, hidden_dropout) + flat_hidden)
    with tf1.variable_scope("intermediate"):
        intermediate = dense(attention_output, config.intermediate_size, "dense",
                             config.initializer_range, get_activation(config.hidden_act))
    with tf1.variable_scope("output"):
        projected = dense(intermediate, config.hidden_size, "dense", config.initializer_range)
        return layer_norm(dropout(projected, hidden_dropout) + attention_output)


def transformer_model(embeddings, input_mask, config, is_training):
    """The encoder stack (variables under encoder/layer_N/).

    Args:
      embeddings: [batch, seq, hidden] in the compute dtype.
      input_mask: int [batch, seq], 1 for real tokens.
    Returns:
      A list of num_hidden_layers tensors [batch, seq, hidden] in the compute dtype.
    """
    batch_size, seq_length, width = get_shape_list(embeddings, expected_rank=3)
    mask_bias = attention_mask_bias(input_mask)
    # The residual stream stays 2-D between layers: every dense layer is then a
    # plain matmul, with no reshape around it.
    flat_hidden = tf.reshape(embeddings, [-1, width])
    layer_outputs = []
    with tf1.variable_scope("encoder"):
        for index in range(config.num_hidden_layers):
            with tf1.variable_scope("layer_%d" % index):
                flat_hidden = transformer_layer(flat_hidden, mask_bias, batch_size,
                                                seq_length, config, is_training)
                layer_outputs.append(tf.reshape(flat_hidden, [batch_size, seq_length, width]))
    return layer_outputs


# How a sentence (pair) becomes one vector for a classification head:
# "pooler" is Google's tanh(dense([CLS])); "mean" averages the real tokens'
# final states, as sentence-transformers models (e.g. all-MiniLM-L6-v2) were
# trained, whose pooler layer was never trained.
POOLING_MODES = ("pooler", "mean")


def sentence_vector(model, input_mask, pooling="pooler"):
    """float32 [batch, hidden] of a BertModel, as `pooling` (see POOLING_MODES) says.

    Args:
      input_mask: int [batch, seq], 1 for real tokens.
    """
    if pooling == "pooler":
        return model.get_pooled_output()
    if pooling != "mean":
        raise ValueError("pooling %r: expected one of %s" % (pooling, ", ".join(POOLING_MODES)))
    weights = tf.cast(input_mask, tf.float32)[:, :, None]  # [batch, seq, 1]
    total = tf.reduce_sum(model.get_sequence_output() * weights, axis=1)
    return total / tf.maximum(tf.reduce_sum(weights, axis=1), 1.0)


def pooler(sequence_output, config):
    """tanh(dense([CLS] state)) (variables under pooler/dense/).

    Args:
      sequence_output: [batch, seq, hidden] in the compute dtype.
    Returns:
      [batch, hidden] in the compute dtype.
    """
    with tf1.variable_scope("pooler"):
        first_token = sequence_output[:, 0, :]
        return dense(first_token, config.hidden_size, "dense", config.initializer_range,
                     activation=tf.tanh)


class BertModel(object):
    """The BERT encoder, with the constructor and getters of the original API.

    Example:
      model = BertModel(config, is_training=True, input_ids=ids, input_mask=mask,
                        token_type_ids=types, compute_dtype=tf.bfloat16)
      pooled = model.get_pooled_output()    # float32 [batch, hidden]
    """

    def __init__(self, config, is_training, input_ids, input_mask=None, token_type_ids=None,
                 use_one_hot_embeddings=False, scope=None, compute_dtype=tf.float32):
        if isinstance(compute_dtype, str):
            compute_dtype = get_compute_dtype(compute_dtype)
        if input_mask is None:
            input_mask = tf.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = tf.zeros_like(input_ids)
        config.validate()
        with tf1.variable_scope(scope, default_name="bert"):
            embeddings, self._embedding_table = embedding_layer(
                config, input_ids, token_type_ids, is_training,
                use_one_hot_embeddings, compute_dtype)
            layers = transformer_model(embeddings, input_mask, config, is_training)
            pooled = pooler(layers[-1], config)
        self._embedding_output = tf.cast(embeddings, tf.float32)
        self._all_encoder_layers = [tf.cast(layer, tf.float32) for layer in layers]
        self._sequence_output = self._all_encoder_layers[-1]
        self._pooled_output = tf.cast(pooled, tf.float32)

    def get_pooled_output(self):
        """float32 [batch, hidden]."""
        return self._pooled_output

    def get_sequence_output(self):
        """float32 [batch, seq, hidden]: the last encoder layer."""
        return self._sequence_output

    def get_all_encoder_layers(self):
        return self._all_encoder_layers

    def get_embedding_output(self):
        return self._embedding_output

    def get_embedding_table(self):
        """float32 [vocab, hidden]."""
        return self._embedding_table


def variable_name(variable):
    """A variable's name without the output suffix: "bert/x/kernel:0" -> "bert/x/kernel"."""
    return re.sub(r":\d+$", "", variable.name)


def get_assignment_map_from_checkpoint(tvars, init_checkpoint):
    """Maps the checkpoint variables that `tvars` also has onto them (same name).

    Returns:
      (assignment_map: OrderedDict name -> name,
       initialized_variable_names: dict with each name and name + ":0").
    """
    by_name = collections.OrderedDict((variable_name(v), v) for v in tvars)
    assignment_map = collections.OrderedDict()
    initialized_variable_names = {}
    for name, _ in tf.train.list_variables(init_checkpoint):
        if name in by_name:
            assignment_map[name] = name
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
    h, i = config.hidden_size, config.intermediate_size
    shapes = collections.OrderedDict([
        ("bert/embeddings/word_embeddings", [config.vocab_size, h]),
        ("bert/embeddings/token_type_embeddings", [config.type_vocab_size, h]),
        ("bert/embeddings/position_embeddings", [config.max_position_embeddings, h]),
        ("bert/embeddings/LayerNorm/beta", [h]),
        ("bert/embeddings/LayerNorm/gamma", [h]),
    ])
    for n in range(config.num_hidden_layers):
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


def check_checkpoint_compatible(expected_shapes, init_checkpoint, required_prefix="bert/"):
    """Raises InputError unless the checkpoint fits the graph.

    Args:
      expected_shapes: name -> shape (list) of the graph's variables, e.g. from
        `bert_variable_shapes(config)` before any graph exists.

    Every variable under `required_prefix` must be in the checkpoint, and every
    variable the checkpoint shares with the graph must have the same shape: a
    checkpoint of another config or a truncated one is caught here, before
    training starts, with the variable named.
    """
    stored = dict(tf.train.list_variables(init_checkpoint))
    for name, shape in expected_shapes.items():
        if name not in stored:
            if name.startswith(required_prefix):
                raise InputError("%s: checkpoint has no variable %s %s (is it a BERT "
                                 "checkpoint of this bert_config?)"
                                 % (init_checkpoint, name, list(shape)))
            continue
        if list(stored[name]) != list(shape):
            raise InputError("%s: variable %s has shape %s in the checkpoint but %s in "
                             "the model (checkpoint from a different bert_config?)"
                             % (init_checkpoint, name, list(stored[name]), list(shape)))


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


def check_vocab_matches_config(config, vocab_size, vocab_file):
    """Raises InputError if vocab.txt has another size than the embedding table."""
    if vocab_size != config.vocab_size:
        raise InputError("%s: has %d tokens but bert_config vocab_size is %d (vocab and "
                         "model do not belong together)"
                         % (vocab_file, vocab_size, config.vocab_size))


def check_max_seq_length(config, max_seq_length, flag_name="max_seq_length"):
    """Raises InputError if sequences would be longer than the position table."""
    if max_seq_length > config.max_position_embeddings:
        raise InputError("--%s=%d is longer than the model's max_position_embeddings %d"
                         % (flag_name, max_seq_length, config.max_position_embeddings))
