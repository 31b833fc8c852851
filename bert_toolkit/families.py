"""The encoder families the toolkit reads, as data: what differs from BERT, by name.

Every family runs on the one encoder graph of model/modeling.py and the one
set of task heads; a family only picks a few named pieces of it, recorded in
bert_config.json as `model_family` and read back from there:

    family        tokenizer   pair layout                 positions  pooler (classifier)
    bert          WordPiece   [CLS] a [SEP] b [SEP]        0..        dense + tanh
    roberta       byte BPE    <s> a </s></s> b </s>        2..        dense + tanh
    xlm-roberta   unigram     <s> a </s></s> b </s>        2..        dense + tanh
    electra       WordPiece   [CLS] a [SEP] b [SEP]        0..        dense + GELU (erf)
    distilbert    WordPiece   [CLS] a [SEP] b [SEP]        0..        dense + ReLU
    albert        unigram     [CLS] a [SEP] b [SEP]        0..        dense + tanh
    deberta-v2    unigram     [CLS] a [SEP] b [SEP]        relative   dense + GELU (erf)
    modernbert    byte BPE    [CLS] a [SEP] b [SEP]        rotary     dense + GELU + norm

(The pooler is what the family's stock ...ForSequenceClassification puts
between the first token's state and the output layer: RoBERTa's and ELECTRA's
`classifier.dense`, DistilBERT's `pre_classifier`, BERT's and ALBERT's pooler.)
Further pieces come from the config's numbers: `embedding_size` below
`hidden_size` (ALBERT, small ELECTRAs) adds a projection after the embeddings;
`type_vocab_size` 0 (DistilBERT) drops the token-type table; `layer_norm_eps`;
ALBERT shares one layer's weights across all layers. DeBERTa-v3 (Hugging Face's
model_type deberta-v2, also mDeBERTa-v3) has no position table: its attention
adds terms of log-bucketed relative positions. ModernBERT (and mmBERT) puts
the layer norms before attention and feed-forward, rotates queries and keys
(rotary positions) and attends in windows on most layers.

This module is the base layer (no TensorFlow): text/ and model/ both read it.
"""

import collections

from bert_toolkit.errors import InputError

Family = collections.namedtuple("Family", [
    "name", "hf_model_type", "tokenizer", "pair_layout", "position_offset",
    "pooler_activation", "shares_layers", "has_token_types", "positions", "pre_norm"])
"""name: bert_config.json's `model_family`; hf_model_type: config.json's `model_type`;
tokenizer: "wordpiece", "bpe" (byte-level) or "unigram" (SentencePiece);
pair_layout: "bert" ([CLS] a [SEP] b [SEP], b's segment 1) or "roberta"
(<s> a </s></s> b </s>, one segment); position_offset: the position table row
of the first token (RoBERTa's padding_idx + 1); pooler_activation: a
modeling.py hidden_act name (ELECTRA's head fixes the exact GELU whatever its
hidden_act);
shares_layers: one layer's weights for all layers; has_token_types: whether
segment ids reach the model (a bert_config may still set type_vocab_size 0);
positions: "absolute" (a position table), "relative" (DeBERTa's attention terms)
or "rotary" (ModernBERT's rotated queries and keys); pre_norm: layer norms before
each sub-layer instead of after its residual sum."""

FAMILIES = collections.OrderedDict((family.name, family) for family in (
    # name, hf_model_type, tokenizer, pair_layout, position_offset, pooler_activation,
    # shares_layers, has_token_types, positions, pre_norm
    Family("bert", "bert", "wordpiece", "bert", 0, "tanh", False, True, "absolute", False),
    Family("roberta", "roberta", "bpe", "roberta", 2, "tanh", False, True, "absolute",
           False),
    Family("xlm-roberta", "xlm-roberta", "unigram", "roberta", 2, "tanh", False, True,
           "absolute", False),
    Family("electra", "electra", "wordpiece", "bert", 0, "gelu_exact", False, True,
           "absolute", False),
    Family("distilbert", "distilbert", "wordpiece", "bert", 0, "relu", False, False,
           "absolute", False),
    Family("albert", "albert", "unigram", "bert", 0, "tanh", True, True, "absolute", False),
    Family("deberta-v2", "deberta-v2", "unigram", "bert", 0, "gelu_exact", False, False,
           "relative", False),
    Family("modernbert", "modernbert", "bpe", "bert", 0, "gelu_exact", False, False,
           "rotary", True),
))

DEFAULT = "bert"


def get(name, source="bert_config.json"):
    """The Family called `name`; InputError naming `source` and the families for another."""
    family = FAMILIES.get(name if name is not None else DEFAULT)
    if family is None:
        raise InputError("%s: 'model_family' %r is not one of %s"
                         % (source, name, ", ".join(FAMILIES)))
    return family


def by_hf_model_type(model_type, source="config.json"):
    """The Family of a Hugging Face config.json's `model_type`; InputError naming the
    ones that convert for any other."""
    for family in FAMILIES.values():
        if family.hf_model_type == model_type:
            return family
    raise InputError("%s: 'model_type' is %r; the families that convert are %s"
                     % (source, model_type,
                        ", ".join(f.hf_model_type for f in FAMILIES.values())))
