"""BertConfig: an encoder's hyper-parameters, as bert_config.json stores them.

Google's BERT fields, and the family fields of bert_toolkit/families.py, which a
BERT config leaves out (they are written only where they differ from BERT's).
modeling.py re-exports the class under Google's name `modeling.BertConfig`.
"""

import collections
import copy
import json

import tensorflow as tf

from bert_toolkit import families
from bert_toolkit.errors import InputError
from bert_toolkit.model import relative_attention
from bert_toolkit.model.layers import _ACTIVATIONS

tf1 = tf.compat.v1


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
