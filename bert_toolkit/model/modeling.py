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
import copy
import json
import math
import re

import tensorflow as tf

from bert_toolkit import families
from bert_toolkit.errors import InputError
from bert_toolkit.model import POOLING_MODES, fused, google_names, relative_attention, rotary

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


class BertConfig(object):
    """Hyper-parameters of an encoder, as stored in bert_config.json.

    Google's BERT fields, plus the family pieces (bert_toolkit/families.py), which a
    BERT config leaves out and which then take BERT's values: `model_family`,
    `layer_norm_eps`, `embedding_size` (the width of the embedding tables when it
    differs from hidden_size: a projection to hidden_size follows them) and
    `type_vocab_size` 0 (no token-type table).
    """

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
    # The family pieces: written to bert_config.json only where they differ from these.
    _FAMILY_DEFAULTS = collections.OrderedDict([
        ("model_family", families.DEFAULT),
        ("layer_norm_eps", 1e-12),
        ("embedding_size", None),
        # ModernBERT (rotary positions, pre-norm): a local layer attends to keys within
        # local_attention // 2 positions; every global_attn_every_n_layers-th layer
        # (from layer 0) attends everywhere; the rotary theta of each kind; the
        # classifier's pooling ("cls" or "mean") before its dense + GELU + norm head.
        ("local_attention", None),
        ("global_attn_every_n_layers", None),
        ("global_rope_theta", None),
        ("local_rope_theta", None),
        ("classifier_pooling", None),
        # DeBERTa (relative positions): the log buckets of its relative-position table
        # (<= 0: none, a row per distance) and the distance they reach (< 1:
        # max_position_embeddings); relative_attention.py.
        ("position_buckets", None),
        ("max_relative_positions", None),
    ])

    def __init__(self, vocab_size, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 max_position_embeddings=512, type_vocab_size=16,
                 initializer_range=0.02, model_family=families.DEFAULT,
                 layer_norm_eps=1e-12, embedding_size=None, local_attention=None,
                 global_attn_every_n_layers=None, global_rope_theta=None,
                 local_rope_theta=None, classifier_pooling=None, position_buckets=None,
                 max_relative_positions=None):
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
        self.model_family = model_family
        self.layer_norm_eps = layer_norm_eps
        self.embedding_size = embedding_size
        self.local_attention = local_attention
        self.global_attn_every_n_layers = global_attn_every_n_layers
        self.global_rope_theta = global_rope_theta
        self.local_rope_theta = local_rope_theta
        self.classifier_pooling = classifier_pooling
        self.position_buckets = position_buckets
        self.max_relative_positions = max_relative_positions

    @property
    def family(self):
        """The families.Family of `model_family`."""
        return families.get(self.model_family)

    @property
    def embedding_width(self):
        """The width of the embedding tables: embedding_size, else hidden_size."""
        return self.embedding_size or self.hidden_size

    @property
    def max_sequence_length(self):
        """The longest sequence the position table holds (RoBERTa's starts at row 2)."""
        return self.max_position_embeddings - self.family.position_offset

    def validate(self, source="BertConfig"):
        """Raises InputError (naming `source`) for a field of the wrong type or value."""
        for name in self._REQUIRED_INTS + ("max_position_embeddings",):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError("%s: %r must be a positive integer, got %r"
                                 % (source, name, value))
        for name, value in (("type_vocab_size", self.type_vocab_size),
                            ("embedding_size", self.embedding_size or 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError("%s: %r must be a non-negative integer, got %r"
                                 % (source, name, value))
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not 0.0 <= value < 1.0:
                raise InputError("%s: %r must be a number in [0, 1), got %r"
                                 % (source, name, value))
        for name in ("initializer_range", "layer_norm_eps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise InputError("%s: %r must be a positive number, got %r"
                                 % (source, name, value))
        if self.hidden_act not in _ACTIVATIONS:
            raise InputError("%s: 'hidden_act' must be one of %s, got %r"
                             % (source, ", ".join(sorted(_ACTIVATIONS)), self.hidden_act))
        if self.hidden_size % self.num_attention_heads:
            raise InputError("%s: hidden_size %d is not a multiple of num_attention_heads %d"
                             % (source, self.hidden_size, self.num_attention_heads))
        family = families.get(self.model_family, source)
        if family.positions == "rotary":
            self._validate_rotary(source)
        if family.positions == "relative":
            self._validate_relative(source)
        if self.max_position_embeddings <= family.position_offset:
            raise InputError("%s: max_position_embeddings %d leaves no position after the "
                             "%s family's offset %d" % (source, self.max_position_embeddings,
                                                         family.name, family.position_offset))

    def _validate_rotary(self, source):
        """InputError naming `source` for a ModernBERT field missing or of the wrong value."""
        for name in ("local_attention", "global_attn_every_n_layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError("%s: %r must be a positive integer for the %s family, got %r"
                                 % (source, name, self.model_family, value))
        for name in ("global_rope_theta", "local_rope_theta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise InputError("%s: %r must be a positive number for the %s family, got %r"
                                 % (source, name, self.model_family, value))
        if self.classifier_pooling not in ("cls", "mean"):
            raise InputError("%s: 'classifier_pooling' must be 'cls' or 'mean' for the %s "
                             "family, got %r" % (source, self.model_family,
                                                 self.classifier_pooling))
        if (self.hidden_size // self.num_attention_heads) % 2:
            raise InputError("%s: the head size %d (hidden_size / num_attention_heads) must "
                             "be even for rotary positions"
                             % (source, self.hidden_size // self.num_attention_heads))

    def _validate_relative(self, source):
        """InputError naming `source` for a DeBERTa field missing or of the wrong value."""
        for name in ("position_buckets", "max_relative_positions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InputError("%s: %r must be an integer for the %s family (<= 0: none), "
                                 "got %r" % (source, name, self.model_family, value))
        if self.type_vocab_size:
            raise InputError("%s: 'type_vocab_size' must be 0 for the %s family (no "
                             "token types), got %r" % (source, self.model_family,
                                                       self.type_vocab_size))
        if 0 < self.position_buckets < 4:
            raise InputError("%s: 'position_buckets' %d: log buckets need at least 4 (or <= "
                             "0 for none)" % (source, self.position_buckets))

    @property
    def relative_span(self):
        """Half the rows of a relative (DeBERTa) config's position table."""
        return relative_attention.attention_span(
            self.position_buckets, self.max_relative_positions, self.max_position_embeddings)

    def is_global_layer(self, index):
        """Whether layer `index` of a rotary (ModernBERT) config attends everywhere: every
        global_attn_every_n_layers-th layer from layer 0; the others are local."""
        return index % self.global_attn_every_n_layers == 0

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
        for key, default in list(cls._DEFAULTS.items()) + list(cls._FAMILY_DEFAULTS.items()):
            fields[key] = json_object.get(key, default)
        if "model_family" not in json_object and "num_hidden_groups" in json_object:
            # Google's albert_config.json, which names no family.
            fields["model_family"] = "albert"
        for key in ("num_hidden_groups", "inner_group_num"):
            if json_object.get(key, 1) != 1:
                raise InputError("%s: %r is %r; only ALBERT's shared single layer (1) is "
                                 "supported" % (source, key, json_object[key]))
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
        """The fields of bert_config.json: a BERT config's are Google's alone."""
        fields = copy.deepcopy(self.__dict__)
        for key, default in self._FAMILY_DEFAULTS.items():
            if fields[key] == default:
                del fields[key]
        return fields

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
    output_dtype = output_dtype or input_tensor.dtype
    gamma, beta = _layer_norm_variables(input_tensor.shape[-1], name)
    x32 = tf.cast(input_tensor, tf.float32)
    mean, variance = tf.nn.moments(x32, axes=[-1], keepdims=True)
    # rsqrt * gamma bracketed: written left to right, with oneDNN on, grappler's
    # layer-norm matcher takes this graph for its own pattern and aborts the process
    # when the input comes straight from a fed tensor (TensorFlow 2.15.1).
    y = (x32 - mean) * (tf.math.rsqrt(variance + epsilon) * gamma) + beta
    return tf.cast(y, output_dtype)


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


def _gamma_variable(hidden, name=None):
    """The float32 [hidden] gamma of the bias-free layer norm `name` ("LayerNorm")."""
    with tf1.variable_scope(name or "LayerNorm"):
        return tf1.get_variable("gamma", [hidden], dtype=tf.float32,
                                initializer=tf1.ones_initializer())


def pre_norm(x, epsilon=1e-5, fuse=False, name=None):
    """bias_free_layer_norm of x [rows, hidden] in its dtype; `fuse`: as one XLA kernel
    each way (fused.bias_free_layer_norm)."""
    if not fuse:
        return bias_free_layer_norm(x, name, epsilon)
    return fused.bias_free_layer_norm(x, _gamma_variable(x.shape[-1], name), epsilon)


def bias_free_layer_norm(input_tensor, name=None, epsilon=1e-5, output_dtype=None):
    """Layer normalisation without beta (ModernBERT's norm_bias false): variable
    `<name>/gamma` [hidden] (name None: "LayerNorm"); computed in float32 over the last
    axis of input_tensor [..., hidden]; returns `output_dtype` (default: the input's)."""
    output_dtype = output_dtype or input_tensor.dtype
    gamma = _gamma_variable(input_tensor.shape[-1], name)
    x32 = tf.cast(input_tensor, tf.float32)
    mean, variance = tf.nn.moments(x32, axes=[-1], keepdims=True)
    # Bracketed as in layer_norm (grappler's layer-norm matcher).
    return tf.cast((x32 - mean) * (tf.math.rsqrt(variance + epsilon) * gamma), output_dtype)


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
        return pre_norm_embeddings(config, input_ids, is_training, use_one_hot_embeddings,
                                   compute_dtype)
    if config.family.positions == "relative":
        return relative_embeddings(config, input_ids, input_mask, is_training,
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
    return tf.cond(packing.packed, lambda: tf.gather(flat, packing.rows), lambda: flat)


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
        position_terms = relative_position_terms(heads[0], heads[1], relative, num_heads,
                                                 scale)
    context = tf.reshape(_attend(*heads, mask_bias, attention_dropout, fuse,
                                 position_terms), [-1, width])
    return context if packing is None else pack_tokens(context, packing)


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


def rotary_self_attention(flat_hidden, mask_bias, batch_size, seq_length, num_heads,
                          tables, initializer_range=0.02, attention_dropout=0.0,
                          packing=None, fuse=False, window=None):
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
    Returns:
      Context [rows of flat_hidden, hidden], before the output projection.
    """
    # Imported here: long_attention imports this module.
    from bert_toolkit.model import long_attention
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
                                                    attention_dropout, fuse)
    else:
        context = long_attention.full_attention(query, key, value, mask_bias,
                                                attention_dropout, fuse)
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
                   window=None):
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
        local layer's local_attention, None on a global layer.
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
                                            window)
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
            attended, residual, _gamma_variable(residual.shape[-1]),
            hashed_dropout(dropout_prob), epsilon)
    hidden = residual + dropout(attended, dropout_prob)
    return hidden, bias_free_layer_norm(hidden, epsilon=epsilon)


def pre_norm_layer_extras(config, seq_length):
    """ModernBERT's per-layer settings for encoder_layers' layer_extras: each layer's
    window (local layers: local_attention; global ones: None), rotary tables (its
    kind's theta; made once per kind) and whether it normalises its input (not layer 0).
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
        extras.append(dict(window=window, tables=tables, normalizes_input=index > 0))
    return extras


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
    weights = tf.cast(input_mask, tf.float32)[:, :, None]  # [batch, seq, 1]
    total = tf.reduce_sum(model.get_sequence_output() * weights, axis=1)
    return total / tf.maximum(tf.reduce_sum(weights, axis=1), 1.0)


def pooler_activation(config):
    """The pooler's activation function for the config's family (families.py)."""
    return get_activation(config.family.pooler_activation)


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
        weights = tf.cast(input_mask, tf.float32)[:, :, tf.newaxis]
        total = tf.reduce_sum(tf.cast(sequence_output, tf.float32) * weights, axis=1)
        pooled = tf.cast(total / tf.maximum(tf.reduce_sum(weights, axis=1), 1.0),
                         sequence_output.dtype)
    else:
        pooled = sequence_output[:, 0, :]
    with tf1.variable_scope("pooler"):
        return pre_norm_head(pooled, config)


def pre_norm_settings(config, seq_length, fuse=False):
    """encoder_layers' keyword arguments for a pre-norm family (ModernBERT): its layer,
    the layers' windows and rotary tables (pre_norm_layer_extras) and the final
    bias-free norm (variables encoder/final_LayerNorm/gamma; `fuse`: an XLA kernel);
    {} for the others."""
    if not config.family.pre_norm:
        return {}

    def final_norm(flat_hidden):
        return pre_norm(flat_hidden, config.layer_norm_eps, fuse, "final_LayerNorm")
    return dict(layer_fn=pre_norm_layer, final_norm=final_norm,
                layer_extras=pre_norm_layer_extras(config, seq_length))


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
    """

    def __init__(self, config, is_training, input_ids, input_mask=None, token_type_ids=None,
                 use_one_hot_embeddings=False, scope=None, compute_dtype=tf.float32,
                 skip_padding=False):
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
                    **pre_norm_settings(config, get_shape_list(embeddings)[1], fuse),
                    **relative_settings(config, get_shape_list(embeddings)[1], compute_dtype,
                                        is_training))
            if config.family.pre_norm:
                pooled = pre_norm_pooler(layers[-1], input_mask, config)
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
                    heads = pre_norm_head(tf.reshape(sequence, [-1, width]), self._config)
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
        return pre_norm_variable_shapes(config)
    h, i, e = config.hidden_size, config.intermediate_size, config.embedding_width
    shapes = collections.OrderedDict([("bert/embeddings/word_embeddings", [config.vocab_size, e])])
    if config.type_vocab_size:
        shapes["bert/embeddings/token_type_embeddings"] = [config.type_vocab_size, e]
    if config.family.positions == "relative":
        shapes.update(relative_embedding_shapes(config))
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
