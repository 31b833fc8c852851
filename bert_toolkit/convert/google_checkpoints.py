"""Google's own TensorFlow releases of ELECTRA and ALBERT -> our variable names.

google-research/electra released checkpoints (`model.ckpt-*` and vocab.txt, no
config file) whose discriminator lives under `electra/` with BERT's names below it,
beside the generator (`generator/`, `generator_predictions/`) and the
discriminator's head (`discriminator_predictions/`), which our layout has no place
for. Its sizes are read from the shapes; the heads are hidden // 64, as ELECTRA's
configure_pretraining sets them, and the activation its `gelu` (erf, our
`gelu_exact`).

google-research/albert released checkpoints with albert_config.json and a
SentencePiece model (`30k-clean.model`): the embeddings under `bert/embeddings`,
the projection as `bert/encoder/embedding_hidden_mapping_in`, and the one shared
layer as `bert/encoder/transformer/group_0/inner_group_0/...` with its own names
(`attention_1`, `ffn_1`, `LayerNorm`, `LayerNorm_1`): model/google_names.py has the
table, which also lets such checkpoints initialise the graph directly. ALBERT's config spells the
activation as Google's code does (`gelu`: the tanh form, our `gelu` too).

Both write the same head names as BERT (`bert/pooler/dense`, `cls/predictions`,
`cls/seq_relationship`); optimizer slots and the step counter are left out.
"""

import collections
import glob
import json
import os
import re

from bert_toolkit.errors import InputError
from bert_toolkit.model import google_names

ALBERT_CONFIG_NAME = "albert_config.json"

# Training state, never weights of the model.
_TRAINING_STATE = re.compile(r"(^global_step$|/adam_[mv]$|/lamb_[mv]$|^beta[12]_power)")
_HEADS = ("bert/pooler/", "cls/predictions/", "cls/seq_relationship/")

GoogleModel = collections.namedtuple("GoogleModel", [
    "family", "bert_config", "variables", "ignored", "checkpoint"])
"""family: "electra" or "albert"; bert_config: dict; variables: our name -> float32
array; ignored: the checkpoint's names left out; checkpoint: the prefix read."""


def family_of(names):
    """"electra" or "albert" from a checkpoint's variable names, or None."""
    if any(name.startswith("electra/encoder/") for name in names):
        return "electra"
    if any(name.startswith("bert/encoder/transformer/") for name in names):
        return "albert"
    return None


def google_name_to_ours(name, family):
    """Our variable name for one of Google's ELECTRA or ALBERT checkpoint names, or None
    for what our layout has no place for (the generator, ELECTRA's discriminator head,
    optimizer state). InputError for ALBERT groups beyond the one shared layer."""
    if _TRAINING_STATE.search(name):
        return None
    if family == "electra":
        return google_names.our_name(name) if name.startswith("electra/") else None
    if name.startswith(google_names.ALBERT_LAYER):
        return google_names.our_name(name)
    if name.startswith("bert/encoder/transformer/"):
        raise InputError("checkpoint variable %s: only ALBERT's one shared layer "
                         "(group_0/inner_group_0: num_hidden_groups = inner_group_num = 1) "
                         "can be converted" % name)
    if name.startswith("bert/embeddings/") or name.startswith(_HEADS):
        return name
    return google_names.our_name(name)  # the projection, or None


def find_checkpoint(folder):
    """The checkpoint prefix in `folder` (its `checkpoint` file's, else its one *.index),
    or None when it has none."""
    if not glob.glob(os.path.join(glob.escape(folder), "*.index")):
        return None
    from bert_toolkit.model import modeling  # TensorFlow: only for a checkpoint
    return modeling.resolve_checkpoint(folder)


def _layer_count(names):
    layers = {int(m.group(1)) for m in (re.match(r"bert/encoder/layer_(\d+)/", n)
                                        for n in names) if m}
    return max(layers) + 1 if layers else 0


def electra_config(shapes):
    """bert_config (dict) of an ELECTRA discriminator from its variables' shapes
    (our names -> shape), with ELECTRA's defaults for what shapes do not show."""
    def shape(name):
        if name not in shapes:
            raise InputError("ELECTRA checkpoint: no variable %s" % name.replace(
                "bert/", "electra/", 1))
        return shapes[name]
    vocab_size, width = shape("bert/embeddings/word_embeddings")
    hidden = shape("bert/encoder/layer_0/attention/self/query/kernel")[1]
    config = {"vocab_size": vocab_size, "hidden_size": hidden,
              "num_hidden_layers": _layer_count(shapes),
              "num_attention_heads": max(1, hidden // 64),
              "intermediate_size": shape("bert/encoder/layer_0/intermediate/dense/kernel")[1],
              "hidden_act": "gelu_exact", "hidden_dropout_prob": 0.1,
              "attention_probs_dropout_prob": 0.1,
              "max_position_embeddings": shape("bert/embeddings/position_embeddings")[0],
              "type_vocab_size": shape("bert/embeddings/token_type_embeddings")[0],
              "initializer_range": 0.02, "model_family": "electra"}
    if width != hidden:
        config["embedding_size"] = width
    return config


def albert_config(path):
    """bert_config (dict) of Google's albert_config.json (Google's activation names are
    ours; `model_family` albert, `embedding_size` kept)."""
    try:
        with open(path, encoding="utf-8") as reader:
            albert = json.load(reader)
    except FileNotFoundError:
        raise InputError("%s: file not found (an ALBERT checkpoint's sizes, the number of "
                         "layers above all, are not in its shared weights)" % path)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InputError("%s: not a readable JSON file (%s)" % (path, " ".join(str(e).split())))
    if not isinstance(albert, dict):
        raise InputError("%s: expected a JSON object" % path)
    for key in ("num_hidden_groups", "inner_group_num"):
        if albert.get(key, 1) != 1:
            raise InputError("%s: %r is %r; only ALBERT's one shared layer (1) can be "
                             "converted" % (path, key, albert[key]))
    fields = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
              "intermediate_size", "hidden_act", "hidden_dropout_prob",
              "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
              "initializer_range", "embedding_size")
    missing = [f for f in fields[:5] + ("embedding_size",) if f not in albert]
    if missing:
        raise InputError("%s: missing required field %r" % (path, missing[0]))
    defaults = {"hidden_act": "gelu", "hidden_dropout_prob": 0.0,
                "attention_probs_dropout_prob": 0.0, "max_position_embeddings": 512,
                "type_vocab_size": 2, "initializer_range": 0.02}
    config = {field: albert.get(field, defaults.get(field)) for field in fields}
    config["model_family"] = "albert"
    return config


def read(folder, prefix):
    """The GoogleModel of the ELECTRA or ALBERT checkpoint `prefix` in `folder`."""
    import numpy as np
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    stored = reader.get_variable_to_shape_map()
    family = family_of(stored)
    if family is None:
        raise InputError("%s: neither Google's ELECTRA (electra/encoder/...) nor ALBERT "
                         "(bert/encoder/transformer/...) checkpoint; a Hugging Face folder "
                         "needs config.json" % prefix)
    renamed, ignored = collections.OrderedDict(), []
    for name in sorted(stored):
        ours = google_name_to_ours(name, family)
        if ours is None:
            ignored.append(name)
        else:
            renamed[ours] = name
    shapes = {ours: list(stored[name]) for ours, name in renamed.items()}
    if family == "electra":
        bert_config = electra_config(shapes)
    else:
        bert_config = albert_config(os.path.join(folder, ALBERT_CONFIG_NAME))
        if "bert/embeddings_project/kernel" not in shapes:
            if bert_config["embedding_size"] != bert_config["hidden_size"]:
                raise InputError("%s: no bert/encoder/embedding_hidden_mapping_in, but %s "
                                 "has embedding_size %d != hidden_size %d"
                                 % (prefix, ALBERT_CONFIG_NAME, bert_config["embedding_size"],
                                    bert_config["hidden_size"]))
            del bert_config["embedding_size"]  # no projection: our graph adds none either
    variables = collections.OrderedDict(
        (ours, np.asarray(reader.get_tensor(name), dtype=np.float32))
        for ours, name in renamed.items())
    return GoogleModel(family, bert_config, variables, ignored, prefix)
