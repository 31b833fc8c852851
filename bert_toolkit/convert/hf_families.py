"""Each encoder family as Hugging Face spells it: config.json's fields and the tensor keys.

The converter (hf_checkpoint.py) and the exporter (hf_export.py) read the same
tables here, so a name is written once for both directions. Every family maps
onto Google's BERT variables (docs/architecture.md, bert_toolkit/families.py):

    ours                          BERT, RoBERTa, XLM-R, ELECTRA   DistilBERT          ALBERT
    bert/embeddings/...           embeddings.*                    embeddings.*        embeddings.*
    bert/embeddings_project       ELECTRA: embeddings_project     -                   (1)
    bert/encoder/layer_N/...      encoder.layer.N.*               transformer.layer.N.*   (2)
    bert/pooler/dense             pooler.dense (BERT, RoBERTa)    -                   pooler
    cls/predictions/...           cls.predictions, lm_head,       vocab_transform,    predictions
                                  generator_predictions           vocab_layer_norm
    cls/seq_relationship/...      cls.seq_relationship            -                   sop_classifier

    (1) encoder.embedding_hidden_mapping_in
    (2) encoder.albert_layer_groups.0.albert_layers.0.*, layer_0 (shared by all layers)

The base model sits under its attribute in the For* classes (`roberta.`,
`electra.`, `distilbert.`, `albert.`, `bert.`). A ...ForSequenceClassification
head maps onto our classifier: its dense layer (RoBERTa's and ELECTRA's
`classifier.dense`, DistilBERT's `pre_classifier`) is our pooler, whose
activation the family fixes (families.py), and its output layer is
`output_weights`/`output_bias`; BERT and ALBERT classify their pooler's output.
"""

import collections
import math

from bert_toolkit import families
from bert_toolkit.errors import InputError

MlmNames = collections.namedtuple("MlmNames", "dense norm biases decoder activation")
"""The masked-LM head: dense and norm are the transform's paths; biases the keys of the
output bias (the first is the one the family's classes save, the others are spellings
of the same tied parameter); decoder the key of the output matrix, tied to the word
embeddings; activation the transform's activation when the family's class fixes it
(our hidden_act name), None when it is the config's hidden_act."""

ClassifierNames = collections.namedtuple("ClassifierNames", "dense out")
"""A ...ForSequenceClassification head: `dense` (None: the class classifies the base
model's pooler) becomes bert/pooler/dense, `out` output_weights/output_bias."""

Naming = collections.namedtuple("Naming", [
    "family", "class_prefix", "prefix", "layer", "layer_parts", "projection", "pooler",
    "mlm", "nsp", "classifier", "owned", "masked_lm_class"])
"""family: families.Family; class_prefix: of its transformers classes ("Roberta");
prefix: the base model's attribute in the For* classes ("roberta."); layer: the path
of layer N ("encoder.layer.%d."); layer_parts: (our path, its path, "dense" or
"norm") inside a layer; projection: path of the embeddings' projection or None;
pooler: path of the base model's pooler dense or None; mlm: MlmNames or None; nsp:
path of the two-way sentence head (BERT's next sentence, ALBERT's sentence order) or
None; classifier: ClassifierNames or None; owned: key prefixes that belong to the
encoder and its heads (an unused tensor under one is an error, not a left-out head);
masked_lm_class: the role of a pre-trained model with an MLM head and no two-way
head ("ForMaskedLM"), or with both ("ForPreTraining")."""

_BERT_LAYER = (
    ("attention/self/query", "attention.self.query", "dense"),
    ("attention/self/key", "attention.self.key", "dense"),
    ("attention/self/value", "attention.self.value", "dense"),
    ("attention/output/dense", "attention.output.dense", "dense"),
    ("attention/output/LayerNorm", "attention.output.LayerNorm", "norm"),
    ("intermediate/dense", "intermediate.dense", "dense"),
    ("output/dense", "output.dense", "dense"),
    ("output/LayerNorm", "output.LayerNorm", "norm"),
)
_DISTILBERT_LAYER = (
    ("attention/self/query", "attention.q_lin", "dense"),
    ("attention/self/key", "attention.k_lin", "dense"),
    ("attention/self/value", "attention.v_lin", "dense"),
    ("attention/output/dense", "attention.out_lin", "dense"),
    ("attention/output/LayerNorm", "sa_layer_norm", "norm"),
    ("intermediate/dense", "ffn.lin1", "dense"),
    ("output/dense", "ffn.lin2", "dense"),
    ("output/LayerNorm", "output_layer_norm", "norm"),
)
_ALBERT_LAYER = (
    ("attention/self/query", "attention.query", "dense"),
    ("attention/self/key", "attention.key", "dense"),
    ("attention/self/value", "attention.value", "dense"),
    ("attention/output/dense", "attention.dense", "dense"),
    ("attention/output/LayerNorm", "attention.LayerNorm", "norm"),
    ("intermediate/dense", "ffn", "dense"),
    ("output/dense", "ffn_output", "dense"),
    ("output/LayerNorm", "full_layer_layer_norm", "norm"),
)
_DEBERTA_LAYER = (
    ("attention/self/query", "attention.self.query_proj", "dense"),
    ("attention/self/key", "attention.self.key_proj", "dense"),
    ("attention/self/value", "attention.self.value_proj", "dense"),
) + _BERT_LAYER[3:]

_ROBERTA_MLM = MlmNames("lm_head.dense", "lm_head.layer_norm",
                        ("lm_head.bias", "lm_head.decoder.bias"), "lm_head.decoder.weight",
                        "gelu_exact")
_ROBERTA_CLASSIFIER = ClassifierNames("classifier.dense", "classifier.out_proj")


def _roberta_like(name, class_prefix):
    return Naming(families.get(name), class_prefix, "roberta.", "encoder.layer.%d.",
                  _BERT_LAYER, None, "pooler.dense", _ROBERTA_MLM, None,
                  _ROBERTA_CLASSIFIER,
                  ("roberta.", "embeddings.", "encoder.", "pooler.", "lm_head."),
                  "ForMaskedLM")


NAMINGS = collections.OrderedDict((naming.family.name, naming) for naming in (
    Naming(families.get("bert"), "Bert", "bert.", "encoder.layer.%d.", _BERT_LAYER, None,
           "pooler.dense",
           MlmNames("cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
                    ("cls.predictions.bias", "cls.predictions.decoder.bias"),
                    "cls.predictions.decoder.weight", None),
           "cls.seq_relationship", None,
           ("embeddings.", "encoder.", "pooler.", "cls.", "bert."), "ForPreTraining"),
    _roberta_like("roberta", "Roberta"),
    _roberta_like("xlm-roberta", "XLMRoberta"),
    Naming(families.get("electra"), "Electra", "electra.", "encoder.layer.%d.", _BERT_LAYER,
           "embeddings_project", None,
           # ElectraForMaskedLM, the generator: its transform narrows to embedding_size.
           MlmNames("generator_predictions.dense", "generator_predictions.LayerNorm",
                    ("generator_lm_head.bias",), "generator_lm_head.weight", "gelu_exact"),
           None, ClassifierNames("classifier.dense", "classifier.out_proj"),
           ("electra.", "embeddings.", "embeddings_project.", "encoder.",
            "generator_predictions.", "generator_lm_head."), "ForMaskedLM"),
    Naming(families.get("distilbert"), "DistilBert", "distilbert.", "transformer.layer.%d.",
           _DISTILBERT_LAYER, None, None,
           MlmNames("vocab_transform", "vocab_layer_norm", ("vocab_projector.bias",),
                    "vocab_projector.weight", None),
           None, ClassifierNames("pre_classifier", "classifier"),
           ("distilbert.", "embeddings.", "transformer.", "vocab_"), "ForMaskedLM"),
    # One shared layer (num_hidden_groups = inner_group_num = 1): layer_0's names.
    Naming(families.get("albert"), "Albert", "albert.",
           "encoder.albert_layer_groups.0.albert_layers.%d.", _ALBERT_LAYER,
           "encoder.embedding_hidden_mapping_in", "pooler",
           MlmNames("predictions.dense", "predictions.LayerNorm",
                    ("predictions.bias", "predictions.decoder.bias"),
                    "predictions.decoder.weight", None),
           "sop_classifier.classifier", ClassifierNames(None, "classifier"),
           ("albert.", "embeddings.", "encoder.", "pooler.", "predictions.",
            "sop_classifier."), "ForPreTraining"),
    # ModernBERT (and mmBERT): no per-part layer table (its layer is its own: the
    # converter's _pre_norm_specs); `head` is the MLM transform of ModernBertForMaskedLM
    # and the pooler (dense + GELU + norm) of its classifiers.
    Naming(families.get("modernbert"), "ModernBert", "model.", "layers.%d.", (), None, None,
           MlmNames("head.dense", "head.norm", ("decoder.bias",), "decoder.weight",
                    "gelu_exact"),
           None, ClassifierNames("head.dense", "classifier"),
           ("model.", "embeddings.", "layers.", "final_norm.", "decoder."), "ForMaskedLM"),
    # DeBERTa-v3 and mDeBERTa-v3 (model_type deberta-v2): BERT's layer with *_proj
    # names; embeddings.embed_proj (no bias) and the relative-position table
    # (encoder.rel_embeddings, encoder.LayerNorm) are the converter's
    # _relative_embedding_specs; the masked-LM head is DebertaV2ForMaskedLM's legacy
    # one (cls.predictions, which it saves and loads), read from the newer spelling
    # too (MLM_SPELLINGS); the classifier's ContextPooler is pooler.dense.
    Naming(families.get("deberta-v2"), "DebertaV2", "deberta.", "encoder.layer.%d.",
           _DEBERTA_LAYER, None, None,
           MlmNames("cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
                    ("cls.predictions.bias", "cls.predictions.decoder.bias"),
                    "cls.predictions.decoder.weight", None),
           None, ClassifierNames("pooler.dense", "classifier"),
           ("deberta.", "embeddings.", "encoder.", "cls.", "lm_predictions."), "ForMaskedLM"),
))

# Other spellings of a family's masked-LM head in the files it comes in: (ours, theirs)
# key prefixes. microsoft/deberta-v3-* hold DeBERTa's own lm_predictions.lm_head (the
# transform at the hidden width and the bias; its decoder is the word table).
MLM_SPELLINGS = {
    "deberta-v2": (("cls.predictions.transform.", "lm_predictions.lm_head."),
                   ("cls.predictions.bias", "lm_predictions.lm_head.bias")),
}

# Left out on purpose, and said so: heads with no place in Google's layout.
KNOWN_EXTRA_HEADS = {
    "electra": ("discriminator_predictions.",),
}


def naming(family_name):
    """The Naming of a family (bert_config.json's `model_family`)."""
    return NAMINGS[families.get(family_name).name]


# ---------------------------------------------------------------------------
# config.json -> bert_config.json
# ---------------------------------------------------------------------------

# Our bert_config field -> the family's config.json field, where they differ.
_FIELD_NAMES = {
    "distilbert": {"hidden_size": "dim", "num_hidden_layers": "n_layers",
                   "num_attention_heads": "n_heads", "intermediate_size": "hidden_dim",
                   "hidden_act": "activation", "hidden_dropout_prob": "dropout",
                   "attention_probs_dropout_prob": "attention_dropout"},
}

# Fields that shape the weights: a config.json without one is refused, not guessed.
_SHAPE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                 "intermediate_size", "max_position_embeddings")

# The family's config class defaults (transformers 5) for the fields that do not
# shape the weights: what transformers itself uses when config.json leaves one out.
_CLASS_DEFAULTS = {
    "roberta": dict(hidden_act="gelu", hidden_dropout_prob=0.1,
                    attention_probs_dropout_prob=0.1, initializer_range=0.02,
                    layer_norm_eps=1e-12),
    "electra": dict(hidden_act="gelu", hidden_dropout_prob=0.1,
                    attention_probs_dropout_prob=0.1, initializer_range=0.02,
                    layer_norm_eps=1e-12),
    "distilbert": dict(hidden_act="gelu", hidden_dropout_prob=0.1,
                       attention_probs_dropout_prob=0.1, initializer_range=0.02),
    "albert": dict(hidden_act="gelu_new", hidden_dropout_prob=0.0,
                   attention_probs_dropout_prob=0.0, initializer_range=0.02,
                   layer_norm_eps=1e-12),
    "deberta-v2": dict(hidden_act="gelu", hidden_dropout_prob=0.1,
                       attention_probs_dropout_prob=0.1, initializer_range=0.02,
                       layer_norm_eps=1e-7),
}
_CLASS_DEFAULTS["xlm-roberta"] = _CLASS_DEFAULTS["roberta"]

# DistilBERT's layer norms have a fixed epsilon (its config has no field for it).
_DISTILBERT_EPS = 1e-12
BERT_LAYER_NORM_EPS = 1e-12


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _field(family_name, ours):
    return _FIELD_NAMES.get(family_name, {}).get(ours, ours)


def _positive_int(hf_config, name, source):
    if name not in hf_config:
        raise InputError("%s: missing required field %r" % (source, name))
    value = hf_config[name]
    if not _is_int(value) or value < 1:
        raise InputError("%s: %r must be a positive integer, got %r" % (source, name, value))
    return value


def _check_encoder_only(hf_config, source):
    position_type = hf_config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise InputError("%s: 'position_embedding_type' is %r; only 'absolute' can be "
                         "converted" % (source, position_type))
    for flag in ("is_decoder", "add_cross_attention"):
        if hf_config.get(flag, False):
            raise InputError("%s: %r is true; only encoders can be converted" % (source, flag))


def _check_family_specifics(hf_config, family, source):
    """One line for what a family's config may say but our graph cannot express."""
    if family.position_offset and hf_config.get("pad_token_id", 1) != family.position_offset - 1:
        # RoBERTa numbers positions from padding_idx + 1: our graph starts at row 2.
        raise InputError("%s: 'pad_token_id' is %r; %s positions start at pad_token_id + 1 "
                         "and only %d (positions from row %d) can be converted"
                         % (source, hf_config.get("pad_token_id"), family.name,
                            family.position_offset - 1, family.position_offset))
    if family.shares_layers:
        for key in ("num_hidden_groups", "inner_group_num"):
            if hf_config.get(key, 1) != 1:
                raise InputError("%s: %r is %r; only ALBERT's one shared layer (1) can be "
                                 "converted" % (source, key, hf_config[key]))
    if family.positions == "relative":
        _check_deberta(hf_config, source)


# DeBERTa-v3's settings (config.json key, what it must be, its class default, the
# words for "what it must be"): the one graph has these and no others.
_DEBERTA_SETTINGS = (
    ("relative_attention", True, False, "true (relative positions)"),
    ("position_biased_input", False, True, "false (no position table)"),
    ("share_att_key", True, False, "true (positions through the layer's query and key)"),
    ("conv_kernel_size", 0, 0, "0 (no convolution layer, as DeBERTa-v2's)"),
    ("type_vocab_size", 0, 0, "0 (no token types)"),
)


def _check_deberta(hf_config, source):
    """One line for a DeBERTa config.json setting the graph does not have (DeBERTa-v2's
    convolution, absolute positions, separate position projections, other attention
    terms, another norm of the position table, another pooler)."""
    for key, wanted, default, words in _DEBERTA_SETTINGS:
        value = hf_config.get(key, default)
        if value != wanted and not (wanted == 0 and value in (None, False)):
            raise InputError("%s: %r is %r; only %s can be converted (DeBERTa-v3's)"
                             % (source, key, value, words))
    terms = hf_config.get("pos_att_type") or []
    if isinstance(terms, str):
        terms = [term.strip() for term in terms.lower().split("|")]
    if sorted(terms) != ["c2p", "p2c"]:
        raise InputError("%s: 'pos_att_type' is %r; only both terms, [\"p2c\", \"c2p\"], can "
                         "be converted (DeBERTa-v3's)" % (source, hf_config.get("pos_att_type")))
    norms = [x.strip() for x in str(hf_config.get("norm_rel_ebd", "none")).lower().split("|")]
    if norms != ["layer_norm"]:
        raise InputError("%s: 'norm_rel_ebd' is %r; only 'layer_norm' can be converted "
                         "(DeBERTa-v3's)" % (source, hf_config.get("norm_rel_ebd", "none")))
    for key in ("position_buckets", "max_relative_positions"):
        if not _is_int(hf_config.get(key, -1)):
            raise InputError("%s: %r must be an integer, got %r" % (source, key, hf_config[key]))
    if hf_config.get("pooler_hidden_act", "gelu") not in ("gelu", "gelu_python"):
        raise InputError("%s: 'pooler_hidden_act' is %r; only 'gelu' (the exact GELU, "
                         "DeBERTa-v3's) can be converted"
                         % (source, hf_config["pooler_hidden_act"]))
    for key in ("pooler_hidden_size", "attention_head_size"):
        expected = hf_config.get("hidden_size") if key == "pooler_hidden_size" else (
            hf_config.get("hidden_size", 0) // max(hf_config.get("num_attention_heads", 1), 1))
        if hf_config.get(key, expected) != expected:
            raise InputError("%s: %r is %r; only %r (hidden_size%s) can be converted"
                             % (source, key, hf_config[key], expected,
                                "" if key == "pooler_hidden_size"
                                else " / num_attention_heads"))


def bert_config_from_hf(hf_config, family, activations, source="config.json"):
    """bert_config.json (dict) of a non-BERT family's config.json (dict).

    activations: Hugging Face activation name -> ours (hf_checkpoint.HF_ACTIVATIONS).
    Google's fields, then `model_family`, and `layer_norm_eps` / `embedding_size`
    where they are not BERT's defaults (as modeling.BertConfig.to_dict writes them).
    """
    name = family.name
    if name == "modernbert":
        return modernbert_config_from_hf(hf_config, activations, source)
    fields = {}
    for ours in _SHAPE_FIELDS:
        fields[ours] = _positive_int(hf_config, _field(name, ours), source)
    if family.has_token_types:
        fields["type_vocab_size"] = _positive_int(hf_config, "type_vocab_size", source)
    else:
        fields["type_vocab_size"] = 0
    defaults = _CLASS_DEFAULTS[name]
    act_field = _field(name, "hidden_act")
    hf_act = hf_config.get(act_field, defaults["hidden_act"])
    if not isinstance(hf_act, str) or hf_act not in activations:
        raise InputError("%s: %r %r is not supported; expected one of %s"
                         % (source, act_field, hf_act, ", ".join(sorted(activations))))
    fields["hidden_act"] = activations[hf_act]
    for ours in ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range"):
        theirs = _field(name, ours)
        value = hf_config.get(theirs, defaults[ours])
        if not _is_number(value) or value < 0:
            raise InputError("%s: %r must be a non-negative number, got %r"
                             % (source, theirs, value))
        fields[ours] = value
    # DistilBERT's classes fix the epsilon whatever its config says.
    eps = (_DISTILBERT_EPS if name == "distilbert"
           else hf_config.get("layer_norm_eps", defaults["layer_norm_eps"]))
    if not _is_number(eps) or eps <= 0:
        raise InputError("%s: 'layer_norm_eps' must be a positive number, got %r"
                         % (source, eps))
    if fields["hidden_size"] % fields["num_attention_heads"]:
        raise InputError("%s: %r %d is not a multiple of %r %d"
                         % (source, _field(name, "hidden_size"),
                            fields["hidden_size"],
                            _field(name, "num_attention_heads"),
                            fields["num_attention_heads"]))
    fields["model_family"] = name
    if not math.isclose(eps, BERT_LAYER_NORM_EPS, rel_tol=1e-6):
        fields["layer_norm_eps"] = eps
    if name in ("electra", "albert"):
        embedding_size = _positive_int(hf_config, "embedding_size", source)
        # ALBERT always projects (embedding_hidden_mapping_in), ELECTRA only when narrower.
        if name == "albert" or embedding_size != fields["hidden_size"]:
            fields["embedding_size"] = embedding_size
    if family.positions == "relative":
        fields.update(_deberta_fields(hf_config, fields["hidden_size"], source))
    return fields


def _deberta_fields(hf_config, hidden_size, source):
    """DeBERTa's bert_config fields: the table's position_buckets and
    max_relative_positions (DebertaV2Config's -1 when left out: none, and
    max_position_embeddings), embedding_size where embed_proj narrows it."""
    fields = {key: hf_config.get(key, -1)
              for key in ("position_buckets", "max_relative_positions")}
    embedding_size = hf_config.get("embedding_size", hidden_size)
    if embedding_size is not None and embedding_size != hidden_size:
        fields["embedding_size"] = _positive_int(hf_config, "embedding_size", source)
    return fields


def check_hf_config(hf_config, family, source="config.json"):
    """InputError for a config.json of `family` our graph cannot express."""
    if family.name == "modernbert":
        return  # modernbert_config_from_hf checks its own fields
    _check_encoder_only(hf_config, source)
    _check_family_specifics(hf_config, family, source)


def config_notes(hf_config, family):
    """Lines for the summary about settings that convert but behave slightly apart."""
    notes = []
    if family.name == "distilbert" and hf_config.get("sinusoidal_pos_embds"):
        notes.append("config.json has sinusoidal_pos_embds: the fixed sinusoid table is "
                     "converted as a position table, which fine-tuning here trains")
    return notes


# ---------------------------------------------------------------------------
# bert_config.json -> config.json
# ---------------------------------------------------------------------------

def _dropouts_and_sizes(bert_config, activation):
    return {"vocab_size": bert_config["vocab_size"],
            "hidden_size": bert_config["hidden_size"],
            "num_hidden_layers": bert_config["num_hidden_layers"],
            "num_attention_heads": bert_config["num_attention_heads"],
            "intermediate_size": bert_config["intermediate_size"],
            "hidden_act": activation,
            "hidden_dropout_prob": bert_config["hidden_dropout_prob"],
            "attention_probs_dropout_prob": bert_config["attention_probs_dropout_prob"],
            "max_position_embeddings": bert_config["max_position_embeddings"],
            "initializer_range": bert_config["initializer_range"]}


def _refuse(bert_config, family, what):
    raise InputError("bert_config.json: a %s model with %s has no stock Hugging Face "
                     "layout" % (family.name, what))


def hf_config_fields(bert_config, family, activation):
    """The family's config.json fields (no architectures or labels) for our bert_config
    (dict); activation: the transformers name of its hidden_act."""
    if family.name == "modernbert":
        return modernbert_config_fields(bert_config, activation)
    eps = bert_config.get("layer_norm_eps", BERT_LAYER_NORM_EPS)
    embedding_size = bert_config.get("embedding_size")
    name = family.name
    if name == "distilbert":
        if bert_config["type_vocab_size"]:
            _refuse(bert_config, family, "type_vocab_size %d" % bert_config["type_vocab_size"])
        if embedding_size or not math.isclose(eps, _DISTILBERT_EPS, rel_tol=1e-6):
            _refuse(bert_config, family, "embedding_size or layer_norm_eps set")
        return {"model_type": "distilbert", "vocab_size": bert_config["vocab_size"],
                "dim": bert_config["hidden_size"], "n_layers": bert_config["num_hidden_layers"],
                "n_heads": bert_config["num_attention_heads"],
                "hidden_dim": bert_config["intermediate_size"], "activation": activation,
                "dropout": bert_config["hidden_dropout_prob"],
                "attention_dropout": bert_config["attention_probs_dropout_prob"],
                "max_position_embeddings": bert_config["max_position_embeddings"],
                "initializer_range": bert_config["initializer_range"],
                "sinusoidal_pos_embds": False, "pad_token_id": 0, "torch_dtype": "float32"}
    config = dict(_dropouts_and_sizes(bert_config, activation), model_type=family.hf_model_type,
                  type_vocab_size=bert_config["type_vocab_size"], layer_norm_eps=eps,
                  torch_dtype="float32")
    if name in ("roberta", "xlm-roberta"):
        if embedding_size:
            _refuse(bert_config, family, "embedding_size %d" % embedding_size)
        config.update(pad_token_id=1, bos_token_id=0, eos_token_id=2,
                      position_embedding_type="absolute")
    elif name == "electra":
        config.update(embedding_size=embedding_size or bert_config["hidden_size"],
                      pad_token_id=0, position_embedding_type="absolute")
    elif name == "albert":
        if not embedding_size:
            _refuse(bert_config, family, "no embedding_size (ALBERT always projects)")
        config.update(embedding_size=embedding_size, num_hidden_groups=1, inner_group_num=1,
                      pad_token_id=0, bos_token_id=2, eos_token_id=3)
    elif family.positions == "relative":
        config.update(_deberta_config_fields(bert_config))
    return config


def _deberta_config_fields(bert_config):
    """DebertaV2Config's fields for DeBERTa-v3's graph (the checks of _check_deberta
    pass on them); legacy: DebertaV2ForMaskedLM's cls.predictions head."""
    fields = dict(relative_attention=True, position_biased_input=False,
                  pos_att_type=["p2c", "c2p"], share_att_key=True, norm_rel_ebd="layer_norm",
                  position_buckets=bert_config["position_buckets"],
                  max_relative_positions=bert_config["max_relative_positions"],
                  pooler_hidden_act="gelu", pooler_dropout=0,
                  pooler_hidden_size=bert_config["hidden_size"], pad_token_id=0, legacy=True)
    if bert_config.get("embedding_size"):
        fields["embedding_size"] = bert_config["embedding_size"]
    return fields


# ---------------------------------------------------------------------------
# ModernBERT's config.json, both ways
# ---------------------------------------------------------------------------

# ModernBertConfig's defaults (transformers 5) for the fields a config.json may leave out.
_MODERNBERT_DEFAULTS = dict(hidden_activation="gelu", norm_eps=1e-5, local_attention=128,
                            global_attn_every_n_layers=3, global_rope_theta=160000.0,
                            local_rope_theta=10000.0, classifier_pooling="cls",
                            classifier_activation="gelu", initializer_range=0.02,
                            attention_dropout=0.0, mlp_dropout=0.0, embedding_dropout=0.0)

# The biases ModernBERT's classes can add, and the only setting our graph has for each
# (none but the masked-LM decoder's, as every published ModernBERT and mmBERT has them).
_MODERNBERT_BIASES = (("norm_bias", False), ("attention_bias", False), ("mlp_bias", False),
                      ("classifier_bias", False), ("decoder_bias", True))
_FULL, _SLIDING = "full_attention", "sliding_attention"


def _global_every(hf_config, layers, source):
    """global_attn_every_n_layers from config.json: transformers 5's `layer_types` (which
    must follow that pattern: layer i global when i % n == 0) or 4.x's own field."""
    layer_types = hf_config.get("layer_types")
    if layer_types is None:
        every = hf_config.get("global_attn_every_n_layers",
                              _MODERNBERT_DEFAULTS["global_attn_every_n_layers"])
        if not _is_int(every) or every < 1:
            raise InputError("%s: 'global_attn_every_n_layers' must be a positive integer, "
                             "got %r" % (source, every))
        return every
    if (not isinstance(layer_types, list) or len(layer_types) != layers
            or any(kind not in (_FULL, _SLIDING) for kind in layer_types)):
        raise InputError("%s: 'layer_types' must list %r or %r for each of the %d layers"
                         % (source, _FULL, _SLIDING, layers))
    full = [i for i, kind in enumerate(layer_types) if kind == _FULL]
    every = full[1] if len(full) > 1 else layers
    if [_FULL if i % every == 0 else _SLIDING for i in range(layers)] != layer_types:
        raise InputError("%s: 'layer_types' is not a global layer every n layers from layer "
                         "0 followed by sliding ones; only that pattern can be converted"
                         % source)
    return every


def _rope_theta(hf_config, kind, old_name, source):
    """A layer kind's rotary theta: rope_parameters[kind]["rope_theta"] (transformers 5),
    else the 4.x field `old_name`, else the class default; only the default rope type."""
    if hf_config.get("rope_scaling") is not None:
        raise InputError("%s: 'rope_scaling' is set; only plain rotary positions can be "
                         "converted" % source)
    params = (hf_config.get("rope_parameters") or {}).get(kind) or {}
    if params.get("rope_type", "default") != "default":
        raise InputError("%s: rope_parameters[%r] has rope_type %r; only 'default' can be "
                         "converted" % (source, kind, params["rope_type"]))
    theta = params.get("rope_theta", hf_config.get(old_name, _MODERNBERT_DEFAULTS[old_name]))
    if not _is_number(theta) or theta <= 0:
        raise InputError("%s: the %s rope theta must be a positive number, got %r"
                         % (source, kind, theta))
    return float(theta)


def _modernbert_setting(hf_config, name, source, check, expected):
    value = hf_config.get(name, _MODERNBERT_DEFAULTS[name])
    if not check(value):
        raise InputError("%s: %r must be %s, got %r" % (source, name, expected, value))
    return value


def modernbert_config_from_hf(hf_config, activations, source="config.json"):
    """bert_config.json (dict) of a ModernBERT or mmBERT config.json in either spelling
    (layer_types + rope_parameters, or global_attn_every_n_layers + global_rope_theta
    / local_rope_theta); InputError for a setting our graph cannot express."""
    fields = {ours: _positive_int(hf_config, ours, source) for ours in _SHAPE_FIELDS}
    for name, supported in _MODERNBERT_BIASES:
        if hf_config.get(name, supported) != supported:
            raise InputError("%s: %r is %r; only %s (as the published ModernBERT and mmBERT "
                             "models have it) can be converted"
                             % (source, name, hf_config[name], str(supported).lower()))
    for name in ("hidden_activation", "classifier_activation"):
        value = hf_config.get(name, _MODERNBERT_DEFAULTS[name])
        if not isinstance(value, str) or value not in activations:
            raise InputError("%s: %r %r is not supported; expected one of %s"
                             % (source, name, value, ", ".join(sorted(activations))))
    if activations[hf_config.get("classifier_activation", "gelu")] != "gelu_exact":
        raise InputError("%s: 'classifier_activation' is %r; only 'gelu' can be converted"
                         % (source, hf_config["classifier_activation"]))
    positive = (lambda v: _is_number(v) and v > 0, "a positive number")
    fraction = (lambda v: _is_number(v) and 0 <= v < 1, "a number in [0, 1)")
    fields.update(
        type_vocab_size=0,
        hidden_act=activations[hf_config.get("hidden_activation", "gelu")],
        hidden_dropout_prob=_modernbert_setting(hf_config, "mlp_dropout", source, *fraction),
        attention_probs_dropout_prob=_modernbert_setting(hf_config, "attention_dropout",
                                                         source, *fraction),
        initializer_range=_modernbert_setting(hf_config, "initializer_range", source,
                                              *positive),
        model_family="modernbert",
        layer_norm_eps=_modernbert_setting(hf_config, "norm_eps", source, *positive),
        local_attention=_modernbert_setting(hf_config, "local_attention", source,
                                            lambda v: _is_int(v) and v > 0,
                                            "a positive integer"),
        global_attn_every_n_layers=_global_every(hf_config, fields["num_hidden_layers"],
                                                 source),
        global_rope_theta=_rope_theta(hf_config, _FULL, "global_rope_theta", source),
        local_rope_theta=_rope_theta(hf_config, _SLIDING, "local_rope_theta", source),
        classifier_pooling=_modernbert_setting(hf_config, "classifier_pooling", source,
                                               lambda v: v in ("cls", "mean"),
                                               "'cls' or 'mean'"))
    head_size, remainder = divmod(fields["hidden_size"], fields["num_attention_heads"])
    if remainder or head_size % 2:
        raise InputError("%s: 'hidden_size' %d over 'num_attention_heads' %d must give an "
                         "even head size (rotary positions)"
                         % (source, fields["hidden_size"], fields["num_attention_heads"]))
    return fields


def modernbert_config_fields(bert_config, activation):
    """ModernBertConfig's config.json fields (transformers 5's spelling, which 4.48+ also
    reads) of our bert_config (dict); activation: transformers' name of hidden_act. The
    special token ids are the exporter's (from the tokenizer)."""
    layers = bert_config["num_hidden_layers"]
    every = bert_config["global_attn_every_n_layers"]
    config = {"model_type": "modernbert", "vocab_size": bert_config["vocab_size"],
              "hidden_size": bert_config["hidden_size"], "num_hidden_layers": layers,
              "num_attention_heads": bert_config["num_attention_heads"],
              "intermediate_size": bert_config["intermediate_size"],
              "hidden_activation": activation,
              "max_position_embeddings": bert_config["max_position_embeddings"],
              "initializer_range": bert_config["initializer_range"],
              "norm_eps": bert_config["layer_norm_eps"],
              "attention_dropout": bert_config["attention_probs_dropout_prob"],
              "mlp_dropout": bert_config["hidden_dropout_prob"],
              "embedding_dropout": bert_config["hidden_dropout_prob"],
              "classifier_dropout": 0.0, "classifier_activation": "gelu",
              "classifier_pooling": bert_config["classifier_pooling"],
              "local_attention": bert_config["local_attention"],
              "global_attn_every_n_layers": every,
              "layer_types": [_FULL if i % every == 0 else _SLIDING for i in range(layers)],
              "rope_parameters": {
                  _FULL: {"rope_type": "default",
                          "rope_theta": bert_config["global_rope_theta"]},
                  _SLIDING: {"rope_type": "default",
                             "rope_theta": bert_config["local_rope_theta"]}},
              "tie_word_embeddings": True, "torch_dtype": "float32"}
    config.update(_MODERNBERT_BIASES)
    return config


# ---------------------------------------------------------------------------
# Tokenizers
# ---------------------------------------------------------------------------

# The tokenizer files a Hub folder of any family may hold; conversion copies the ones
# present unchanged, and so does export for the BPE and SentencePiece families.
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "vocab.json", "merges.txt",
                   "sentencepiece.bpe.model", "spiece.model", "tokenizer_config.json",
                   "special_tokens_map.json", "added_tokens.json")

# The transformers tokenizer class of each family and its special tokens (as the
# family's Hub folders name them).
TOKENIZER_CLASSES = {"bert": "BertTokenizer", "roberta": "RobertaTokenizer",
                     "xlm-roberta": "XLMRobertaTokenizer", "electra": "ElectraTokenizer",
                     "distilbert": "DistilBertTokenizer", "albert": "AlbertTokenizer"}
_BERT_SPECIALS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                  "cls_token": "[CLS]", "mask_token": "[MASK]"}
_ROBERTA_SPECIALS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                     "sep_token": "</s>", "pad_token": "<pad>", "cls_token": "<s>",
                     "mask_token": "<mask>"}
SPECIAL_TOKENS = {"bert": _BERT_SPECIALS, "electra": _BERT_SPECIALS,
                  "distilbert": _BERT_SPECIALS, "roberta": _ROBERTA_SPECIALS,
                  "xlm-roberta": _ROBERTA_SPECIALS,
                  "albert": {"bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "<unk>",
                             "sep_token": "[SEP]", "pad_token": "<pad>", "cls_token": "[CLS]",
                             "mask_token": "[MASK]"}}
# ModernBERT's Hub folders have tokenizer.json read by the generic fast tokenizer, with
# BERT's special tokens (mmBERT's Gemma tokenizer renames them in its own config).
TOKENIZER_CLASSES["modernbert"] = "PreTrainedTokenizerFast"
SPECIAL_TOKENS["modernbert"] = _BERT_SPECIALS
# DeBERTa-v3's spm.model: [PAD] [CLS] [SEP] [UNK] its first pieces, [MASK] after them.
TOKENIZER_FILES += ("spm.model",)
TOKENIZER_CLASSES["deberta-v2"] = "DebertaV2Tokenizer"
SPECIAL_TOKENS["deberta-v2"] = dict(_BERT_SPECIALS, bos_token="[CLS]", eos_token="[SEP]")


def preferred_vocab_file(names):
    """Of the tokenizer file names a folder holds, the one to pass as --vocab_file:
    vocab.txt (WordPiece), else tokenizer.json, else the family's own file."""
    for name in ("vocab.txt", "tokenizer.json", "sentencepiece.bpe.model", "spiece.model",
                 "spm.model", "vocab.json"):
        if name in names:
            return name
    models = sorted(n for n in names if n.endswith(".model"))
    return models[0] if models else None
