"""Converts a Hugging Face encoder folder into Google's checkpoint layout.

    python convert_hf_checkpoint.py --hf_dir=path/to/hf_model \\
        --output_dir=path/to/google_model [--overwrite]

The input is a folder as the Hub has it, of any family of
bert_toolkit/families.py (config.json's `model_type`: bert, roberta,
xlm-roberta, electra, distilbert, albert, deberta-v2, ...): config.json, the weights as
model.safetensors or pytorch_model.bin (or sharded: *.index.json plus the
shards) and the family's tokenizer files (vocab.txt; tokenizer.json; vocab.json
+ merges.txt; sentencepiece.bpe.model; spiece.model; DeBERTa-v3's spm.model),
whichever are there.
--hf_dir may also be a Hub model id (hub.py) or a folder of Google's own
ELECTRA or ALBERT release (google_checkpoints.py). The output folder gets what
Google released for each BERT:

    bert_config.json  bert_model.ckpt.index  bert_model.ckpt.data-00000-of-00001
    and the tokenizer files, copied unchanged

so `--init_checkpoint=OUTPUT/bert_model.ckpt` works with every script here.
bert_config.json has Google's fields, and for the other families
`model_family` and, where not BERT's, `layer_norm_eps` and `embedding_size`
(modeling.BertConfig reads them); every family's variables get BERT's Google
names (hf_families.py has each family's map).

Untrusted files never run code: safetensors is read with the `safetensors`
package, and pytorch_model.bin (the zip format of torch >= 1.6) by a
restricted unpickler that knows only the handful of globals a state dict
needs (tensor rebuilders, storage types, OrderedDict), all mapped to numpy
builders written here; any other global is refused before it is looked up.
torch is never imported.

Variable mapping (Hugging Face -> Google), with the base model's prefix
(`bert.`, `roberta.`, ...) and old-style LayerNorm `gamma`/`beta` accepted on
the Hugging Face side: Linear `weight` [out, in] -> `kernel` [in, out]
(transposed), Linear `bias` -> `bias`, LayerNorm `weight`/`bias` ->
`gamma`/`beta`, Embedding `weight` -> the table itself; the pre-training heads
map to `cls/...` (`output_weights` [2, hidden] keeps the [out, in] layout, as
in Google's code), a ...ForSequenceClassification head (not BERT's) to our
classifier (`output_weights` [labels, hidden], its dense layer to
bert/pooler/dense). `embeddings.position_ids` and the MLM decoder weight (tied
to the word embeddings) are dropped; heads with no place in the layout
(ELECTRA's discriminator head, token and span heads) are left out and named.

The output appears all at once: everything is written into a temporary
folder next to --output_dir and renamed into place at the end, so a failure
never leaves a half-written model behind.
"""

import collections
import json
import math
import os
import shutil
import tempfile

import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy for BF16 safetensors)
import numpy as np

from bert_toolkit import families, fileio
from bert_toolkit.convert import google_checkpoints, hf_families, hub, safe_unpickle
from bert_toolkit.errors import InputError

CONFIG_NAME = "config.json"
VOCAB_NAME = "vocab.txt"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"
SAFETENSORS_NAME = "model.safetensors"
PYTORCH_BIN_NAME = "pytorch_model.bin"
BERT_CONFIG_NAME = "bert_config.json"
CHECKPOINT_NAME = "bert_model.ckpt"

# ---------------------------------------------------------------------------
# config.json -> bert_config.json
# ---------------------------------------------------------------------------

# Hugging Face activation name -> ours. HF's "gelu" is the exact erf form,
# which our configs call "gelu_exact"; our "gelu" is the tanh approximation
# that Google's original code computes (HF: gelu_new / gelu_pytorch_tanh /
# gelu_fast, three spellings of the same formula).
HF_ACTIVATIONS = {
    "gelu": "gelu_exact",
    "gelu_python": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_fast": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}

# Fields that shape the network: a config.json without one is refused rather
# than guessed.
_REQUIRED_INT_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers",
                        "num_attention_heads", "intermediate_size",
                        "max_position_embeddings", "type_vocab_size")

# Training-only hyper-parameters: they do not touch the weights, so a missing
# one takes Hugging Face's BertConfig default.
_OPTIONAL_FLOAT_FIELDS = (("hidden_dropout_prob", 0.1),
                          ("attention_probs_dropout_prob", 0.1),
                          ("initializer_range", 0.02))

# Our graph hard-codes this LayerNorm epsilon, as Google's code does.
_LAYER_NORM_EPS = 1e-12


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_supported_features(hf_config, source=CONFIG_NAME):
    """Raises InputError for config.json settings our BERT graph cannot express."""
    model_type = hf_config.get("model_type", "bert")
    if model_type != "bert":
        raise InputError("%s: 'model_type' is %r; only 'bert' can be converted"
                         % (source, model_type))
    position_type = hf_config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise InputError("%s: 'position_embedding_type' is %r; only 'absolute' can be converted"
                         % (source, position_type))
    for flag in ("is_decoder", "add_cross_attention"):
        if hf_config.get(flag, False):
            raise InputError("%s: %r is true; only encoder-only BERT can be converted"
                             % (source, flag))
    eps = hf_config.get("layer_norm_eps", _LAYER_NORM_EPS)
    if not _is_number(eps) or not math.isclose(eps, _LAYER_NORM_EPS, rel_tol=1e-6):
        raise InputError("%s: 'layer_norm_eps' is %r; only 1e-12 (Google's value) can be converted"
                         % (source, eps))


def convert_activation(hf_act, source=CONFIG_NAME):
    """Our `hidden_act` name for a Hugging Face one ("gelu" -> "gelu_exact")."""
    if not isinstance(hf_act, str) or hf_act not in HF_ACTIVATIONS:
        raise InputError("%s: 'hidden_act' %r is not supported; expected one of %s"
                         % (source, hf_act, ", ".join(sorted(HF_ACTIVATIONS))))
    return HF_ACTIVATIONS[hf_act]


def hf_config_to_bert_config(hf_config, source=CONFIG_NAME):
    """Maps a parsed config.json (dict) to the dict of a Google bert_config.json.

    Raises InputError (one line naming `source` and the field) for a missing or
    ill-typed field and for features the Google graph lacks.
    """
    if not isinstance(hf_config, dict):
        raise InputError("%s: expected a JSON object, got %s"
                         % (source, type(hf_config).__name__))
    check_supported_features(hf_config, source)
    bert_config = {}
    for field in _REQUIRED_INT_FIELDS:
        if field not in hf_config:
            raise InputError("%s: missing required field %r" % (source, field))
        value = hf_config[field]
        if not _is_int(value) or value < 1:
            raise InputError("%s: %r must be a positive integer, got %r" % (source, field, value))
        bert_config[field] = value
    if "hidden_act" not in hf_config:
        raise InputError("%s: missing required field 'hidden_act'" % source)
    bert_config["hidden_act"] = convert_activation(hf_config["hidden_act"], source)
    for field, default in _OPTIONAL_FLOAT_FIELDS:
        value = hf_config.get(field, default)
        if not _is_number(value) or value < 0:
            raise InputError("%s: %r must be a non-negative number, got %r"
                             % (source, field, value))
        bert_config[field] = value
    if bert_config["hidden_size"] % bert_config["num_attention_heads"]:
        raise InputError("%s: 'hidden_size' %d is not a multiple of 'num_attention_heads' %d"
                         % (source, bert_config["hidden_size"],
                            bert_config["num_attention_heads"]))
    return bert_config


def read_json(path):
    """Parses a JSON file; a missing or malformed file is an InputError."""
    try:
        with open(path, "r", encoding="utf-8") as reader:
            return json.load(reader)
    except FileNotFoundError:
        raise InputError("%s: file not found" % path)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InputError("%s: not a readable JSON file (%s)" % (path, _one_line(e)))


def count_vocab_tokens(path):
    """Number of tokens in vocab.txt: one per line, as Google's load_vocab reads it.

    Splits on newlines only (str.splitlines would also split on characters
    such as U+0085 that can be tokens), and a final newline ends the last line.
    """
    try:
        with open(path, "r", encoding="utf-8") as reader:
            text = reader.read()
    except FileNotFoundError:
        raise InputError("%s: file not found (the WordPiece vocabulary is required)" % path)
    except (OSError, UnicodeDecodeError) as e:
        raise InputError("%s: not a readable UTF-8 text file (%s)" % (path, _one_line(e)))
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return len(lines)


# ---------------------------------------------------------------------------
# Reading weights: safetensors and the torch zip format, without running code
# ---------------------------------------------------------------------------

def _one_line(error):
    return " ".join(str(error).split())


def _to_numpy_native(array):
    """bfloat16 (not a numpy type) widens exactly to float32; others stay as they are."""
    if array.dtype == ml_dtypes.bfloat16:
        return array.astype(np.float32)
    return array


def read_safetensors(path):
    """Reads a .safetensors file -> OrderedDict name -> np.ndarray (bf16 -> float32)."""
    import safetensors  # local: only this reader needs it

    state = collections.OrderedDict()
    try:
        with safetensors.safe_open(path, framework="numpy") as handle:
            for key in handle.keys():
                state[key] = _to_numpy_native(handle.get_tensor(key))
    except InputError:
        raise
    except (safetensors.SafetensorError, OSError, TypeError, ValueError) as e:
        raise InputError("%s: not a readable safetensors file (%s)" % (path, _one_line(e)))
    return state


def _read_sharded(index_path, read_shard):
    """Merges the shards listed in a *.index.json weight_map into one state dict."""
    index = read_json(index_path)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise InputError("%s: expected a non-empty 'weight_map' object" % index_path)
    folder = os.path.dirname(index_path)
    state = collections.OrderedDict()
    for shard in sorted(set(weight_map.values())):
        if not isinstance(shard, str) or os.path.basename(shard) != shard:
            raise InputError("%s: shard name %r must be a plain file name" % (index_path, shard))
        state.update(read_shard(os.path.join(folder, shard)))
    return state


def load_hf_state(hf_dir):
    """Reads the weights of a Hugging Face folder -> (path read, OrderedDict name -> array).

    Looks for model.safetensors, then its sharded index, then
    pytorch_model.bin and its sharded index.
    """
    readers = ((SAFETENSORS_NAME, read_safetensors),
               (PYTORCH_BIN_NAME, safe_unpickle.read_pytorch_bin))
    for name, reader in readers:
        path = os.path.join(hf_dir, name)
        if os.path.isfile(path):
            return path, reader(path)
        index_path = path + ".index.json"
        if os.path.isfile(index_path):
            return index_path, _read_sharded(index_path, reader)
    raise InputError("%s: no weights found; expected %s or %s (or a sharded *.index.json)"
                     % (hf_dir, SAFETENSORS_NAME, PYTORCH_BIN_NAME))


# ---------------------------------------------------------------------------
# Hugging Face tensors -> Google variables
# ---------------------------------------------------------------------------

# One variable of the Google layout: its name and shape, the canonical
# Hugging Face key it comes from (the family's base-model spelling, no
# `bert.`/`roberta.`... prefix, for the encoder and pooler; the top-level key for
# heads), and whether the array is transposed on the way (Linear weight
# [out, in] -> kernel [in, out]). `group` says which tensors stand or fall
# together.
TensorSpec = collections.namedtuple("TensorSpec", "name shape hf_key transpose group")

# Required: the encoder. Optional, but all-or-nothing within a group: the
# pooler (BertForMaskedLM has none), the two pre-training heads and a
# ...ForSequenceClassification head.
BACKBONE, POOLER, MLM_HEAD, NSP_HEAD, CLASSIFIER = (
    "backbone", "pooler", "mlm_head", "nsp_head", "classifier")
_BASE_GROUPS = (BACKBONE, POOLER)  # keys relative to the base model


def _dense_specs(google_path, hf_path, in_size, out_size, group):
    return [TensorSpec(google_path + "/kernel", (in_size, out_size), hf_path + ".weight",
                       True, group),
            TensorSpec(google_path + "/bias", (out_size,), hf_path + ".bias", False, group)]


def _layer_norm_specs(google_path, hf_path, size, group):
    return [TensorSpec(google_path + "/gamma", (size,), hf_path + ".weight", False, group),
            TensorSpec(google_path + "/beta", (size,), hf_path + ".bias", False, group)]


def _relative_embedding_specs(bert_config, width):
    """DeBERTa's embeddings (model/deberta.py relative_embedding_shapes): the word table,
    embed_proj (no bias) where embedding_size narrows it, the layer norm at the hidden
    width, and the encoder's relative-position table with its layer norm."""
    from bert_toolkit.model import relative_attention  # TensorFlow: as check_fits_graph
    hidden = bert_config["hidden_size"]
    span = relative_attention.attention_span(bert_config["position_buckets"],
                                             bert_config["max_relative_positions"],
                                             bert_config["max_position_embeddings"])
    specs = [TensorSpec("bert/embeddings/word_embeddings", (bert_config["vocab_size"], width),
                        "embeddings.word_embeddings.weight", False, BACKBONE)]
    if bert_config.get("embedding_size"):
        specs.append(TensorSpec("bert/embeddings_project/kernel", (width, hidden),
                                "embeddings.embed_proj.weight", True, BACKBONE))
    specs += _layer_norm_specs("bert/embeddings/LayerNorm", "embeddings.LayerNorm", hidden,
                               BACKBONE)
    specs.append(TensorSpec("bert/encoder/rel_embeddings", (2 * span, hidden),
                            "encoder.rel_embeddings.weight", False, BACKBONE))
    return specs + _layer_norm_specs("bert/encoder/rel_embeddings_LayerNorm",
                                     "encoder.LayerNorm", hidden, BACKBONE)


def _embedding_specs(bert_config, naming, width):
    if naming.family.positions == "relative":
        return _relative_embedding_specs(bert_config, width)
    hidden = bert_config["hidden_size"]
    specs = [TensorSpec("bert/embeddings/word_embeddings", (bert_config["vocab_size"], width),
                        "embeddings.word_embeddings.weight", False, BACKBONE)]
    if bert_config["type_vocab_size"]:
        specs.append(TensorSpec("bert/embeddings/token_type_embeddings",
                                (bert_config["type_vocab_size"], width),
                                "embeddings.token_type_embeddings.weight", False, BACKBONE))
    specs.append(TensorSpec("bert/embeddings/position_embeddings",
                            (bert_config["max_position_embeddings"], width),
                            "embeddings.position_embeddings.weight", False, BACKBONE))
    specs += _layer_norm_specs("bert/embeddings/LayerNorm", "embeddings.LayerNorm", width,
                               BACKBONE)
    if bert_config.get("embedding_size") and naming.projection:
        specs += _dense_specs("bert/embeddings_project", naming.projection, width, hidden,
                              BACKBONE)
    return specs


def _layer_specs(bert_config, naming, index):
    hidden, inner = bert_config["hidden_size"], bert_config["intermediate_size"]
    sizes = {"intermediate/dense": (hidden, inner), "output/dense": (inner, hidden)}
    google, hf = "bert/encoder/layer_%d/" % index, naming.layer % index
    specs = []
    for ours, theirs, kind in naming.layer_parts:
        if kind == "norm":
            specs += _layer_norm_specs(google + ours, hf + theirs, hidden, BACKBONE)
        else:
            in_size, out_size = sizes.get(ours, (hidden, hidden))
            specs += _dense_specs(google + ours, hf + theirs, in_size, out_size, BACKBONE)
    return specs


def _head_specs(bert_config, naming, width, num_labels):
    hidden, vocab_size = bert_config["hidden_size"], bert_config["vocab_size"]
    specs = []
    if naming.pooler:
        specs += _dense_specs("bert/pooler/dense", naming.pooler, hidden, hidden, POOLER)
    if naming.mlm:
        # The transform narrows to the embedding width (ALBERT, ELECTRA's generator):
        # its output meets the [vocab, width] word table.
        specs += _dense_specs("cls/predictions/transform/dense", naming.mlm.dense, hidden,
                              width, MLM_HEAD)
        specs += _layer_norm_specs("cls/predictions/transform/LayerNorm", naming.mlm.norm,
                                   width, MLM_HEAD)
        specs.append(TensorSpec("cls/predictions/output_bias", (vocab_size,),
                                naming.mlm.biases[0], False, MLM_HEAD))
    if naming.nsp:
        # Linear(hidden, 2).weight is [2, hidden]: the layout Google's code keeps.
        specs.append(TensorSpec("cls/seq_relationship/output_weights", (2, hidden),
                                naming.nsp + ".weight", False, NSP_HEAD))
        specs.append(TensorSpec("cls/seq_relationship/output_bias", (2,),
                                naming.nsp + ".bias", False, NSP_HEAD))
    if num_labels and naming.classifier:
        if naming.classifier.dense:
            specs += _dense_specs("bert/pooler/dense", naming.classifier.dense, hidden, hidden,
                                  CLASSIFIER)
        # Our [num_labels, hidden] is the output Linear's [out, in] as it stands.
        specs.append(TensorSpec("output_weights", (num_labels, hidden),
                                naming.classifier.out + ".weight", False, CLASSIFIER))
        specs.append(TensorSpec("output_bias", (num_labels,), naming.classifier.out + ".bias",
                                False, CLASSIFIER))
    return specs


def _kernel_spec(google_path, hf_path, in_size, out_size, group):
    """A bias-free Linear: weight [out, in] -> kernel [in, out]."""
    return TensorSpec(google_path + "/kernel", (in_size, out_size), hf_path + ".weight", True,
                      group)


def _gamma_spec(google_path, hf_path, size, group):
    """A LayerNorm without bias: weight -> gamma."""
    return TensorSpec(google_path + "/gamma", (size,), hf_path + ".weight", False, group)


def _pre_norm_specs(bert_config, num_labels):
    """tensor_specs of ModernBERT (model/modernbert.py pre_norm_variable_shapes): its `head` is the
    masked-LM transform, or with num_labels the classifier's pooler."""
    h, i, vocab = (bert_config["hidden_size"], bert_config["intermediate_size"],
                   bert_config["vocab_size"])
    specs = [TensorSpec("bert/embeddings/word_embeddings", (vocab, h),
                        "embeddings.tok_embeddings.weight", False, BACKBONE),
             _gamma_spec("bert/embeddings/LayerNorm", "embeddings.norm", h, BACKBONE)]
    for n in range(bert_config["num_hidden_layers"]):
        ours, theirs = "bert/encoder/layer_%d/" % n, "layers.%d." % n
        if n:  # layer 0's attn_norm is an Identity
            specs.append(_gamma_spec(ours + "attention/LayerNorm", theirs + "attn_norm", h,
                                     BACKBONE))
        specs += [_kernel_spec(ours + "attention/self/qkv", theirs + "attn.Wqkv", h, 3 * h,
                               BACKBONE),
                  _kernel_spec(ours + "attention/output/dense", theirs + "attn.Wo", h, h,
                               BACKBONE),
                  _gamma_spec(ours + "intermediate/LayerNorm", theirs + "mlp_norm", h,
                              BACKBONE),
                  _kernel_spec(ours + "intermediate/dense", theirs + "mlp.Wi", h, 2 * i,
                               BACKBONE),
                  _kernel_spec(ours + "output/dense", theirs + "mlp.Wo", i, h, BACKBONE)]
    specs.append(_gamma_spec("bert/encoder/final_LayerNorm", "final_norm", h, BACKBONE))
    if num_labels:
        return specs + [
            _kernel_spec("bert/pooler/dense", "head.dense", h, h, CLASSIFIER),
            _gamma_spec("bert/pooler/LayerNorm", "head.norm", h, CLASSIFIER),
            TensorSpec("output_weights", (num_labels, h), "classifier.weight", False,
                       CLASSIFIER),
            TensorSpec("output_bias", (num_labels,), "classifier.bias", False, CLASSIFIER)]
    return specs + [
        _kernel_spec("cls/predictions/transform/dense", "head.dense", h, h, MLM_HEAD),
        _gamma_spec("cls/predictions/transform/LayerNorm", "head.norm", h, MLM_HEAD),
        TensorSpec("cls/predictions/output_bias", (vocab,), "decoder.bias", False, MLM_HEAD)]


def tensor_specs(bert_config, num_labels=None):
    """Every variable a Google checkpoint of `bert_config` (dict) may hold, in order, with
    the Hugging Face keys of its family (`model_family`, BERT when absent).

    num_labels: the labels of a ...ForSequenceClassification head to map as well.
    """
    naming = hf_families.naming(bert_config.get("model_family"))
    if naming.family.pre_norm:
        return _pre_norm_specs(bert_config, num_labels)
    width = bert_config.get("embedding_size") or bert_config["hidden_size"]
    specs = _embedding_specs(bert_config, naming, width)
    layers = 1 if naming.family.shares_layers else bert_config["num_hidden_layers"]
    for index in range(layers):
        specs += _layer_specs(bert_config, naming, index)
    return specs + _head_specs(bert_config, naming, width, num_labels)


def candidate_hf_keys(spec, naming=hf_families.NAMINGS["bert"]):
    """Spellings a spec's Hugging Face key may have in a file, preferred first.

    'embeddings.LayerNorm.weight' -> [it, 'embeddings.LayerNorm.gamma',
    'bert.embeddings.LayerNorm.weight', 'bert.embeddings.LayerNorm.gamma'].
    """
    keys = [spec.hf_key]
    if ".LayerNorm." in spec.hf_key:
        # Checkpoints converted by early pytorch-pretrained-bert kept TF names.
        keys.append(spec.hf_key.replace(".LayerNorm.weight", ".LayerNorm.gamma")
                    .replace(".LayerNorm.bias", ".LayerNorm.beta"))
    if spec.name == "cls/predictions/output_bias":
        keys += list(naming.mlm.biases[1:])  # the same tied parameter
    if spec.group == MLM_HEAD:
        for ours, theirs in hf_families.MLM_SPELLINGS.get(naming.family.name, ()):
            if spec.hf_key.startswith(ours):
                keys.append(theirs + spec.hf_key[len(ours):])
    if spec.group in _BASE_GROUPS:
        keys += [naming.prefix + key for key in keys]  # the For* models nest the base model
    return list(collections.OrderedDict.fromkeys(keys))


# Buffers present in many files, absent from Google's layout on purpose.
_DROPPED_SUFFIXES = ("embeddings.position_ids", "embeddings.token_type_ids")


def _dropped_keys(naming):
    return set(_DROPPED_SUFFIXES) | {naming.prefix + key for key in _DROPPED_SUFFIXES}


def _as_float32(array, key, source):
    if not np.issubdtype(array.dtype, np.floating):
        raise InputError("%s: tensor %s has dtype %s; expected floating point"
                         % (source, key, array.dtype))
    return np.asarray(array, dtype=np.float32)


def _lookup(state, spec, naming, source):
    """(key found, float32 array in Google layout) for `spec`, or None if absent."""
    found = [key for key in candidate_hf_keys(spec, naming) if key in state]
    if not found:
        return None
    key = found[0]
    array = _as_float32(state[key], key, source)
    for other in found[1:]:
        if not np.array_equal(array, _as_float32(state[other], other, source)):
            raise InputError("%s: tensors %s and %s both give %s but differ"
                             % (source, key, other, spec.name))
    expected = spec.shape[::-1] if spec.transpose else spec.shape
    if array.shape != tuple(expected):
        raise InputError("%s: tensor %s has shape %s; %s implies %s"
                         % (source, key, list(array.shape), CONFIG_NAME, list(expected)))
    if spec.transpose:
        array = np.ascontiguousarray(array.T)
    return key, array


def _check_tied_decoder(state, word_embeddings, naming, source):
    """The MLM decoder weight is dropped: make sure it really is the word embeddings."""
    decoder_key = naming.mlm.decoder
    if decoder_key not in state or word_embeddings is None:
        return
    decoder = _as_float32(state[decoder_key], decoder_key, source)
    if decoder.shape != word_embeddings.shape or not np.array_equal(decoder, word_embeddings):
        raise InputError("%s: %s differs from the word embeddings; Google's layout ties "
                         "them, so this model cannot be converted" % (source, decoder_key))


def _check_groups(specs, hit_indices, source):
    """Every spec of the backbone, and of each head present in part, must be there."""
    for group in (BACKBONE, POOLER, MLM_HEAD, NSP_HEAD, CLASSIFIER):
        members = [(i, s) for i, s in enumerate(specs) if s.group == group]
        if group != BACKBONE and not any(i in hit_indices for i, _ in members):
            continue
        for index, spec in members:
            if index not in hit_indices:
                raise InputError("%s: missing tensor %s (for %s, shape %s per %s)"
                                 % (source, spec.hf_key, spec.name,
                                    list(spec.shape[::-1] if spec.transpose else spec.shape),
                                    CONFIG_NAME))


def hf_state_to_google_variables(state, bert_config, source="the weights file",
                                 num_labels=None):
    """Maps a Hugging Face state dict onto Google's variable names.

    state: name -> np.ndarray (any float dtype); bert_config: the dict from
    hf_config_to_bert_config (or hf_families.bert_config_from_hf: its
    `model_family` picks the names); num_labels: map a ...ForSequenceClassification
    head of that many labels too. Returns (variables, ignored_keys): an
    OrderedDict Google name -> float32 array of the shape in tensor_specs, and
    the sorted keys outside the encoder and its heads (e.g. a task head) that were
    left out. Missing or misshapen tensors, and unused ones that belong to the
    encoder, raise InputError naming `source` and the tensor.
    """
    naming = hf_families.naming(bert_config.get("model_family"))
    specs = tensor_specs(bert_config, num_labels)
    if naming.family.pre_norm and naming.mlm.biases[0] not in state:
        # ModernBERT's token and span classes have a `head` too, but no decoder: their
        # head is left out with them, not taken for a masked-LM head.
        specs = [spec for spec in specs if spec.group != MLM_HEAD]
    found, origin, hit_indices = collections.OrderedDict(), {}, set()
    used_keys = _dropped_keys(naming)
    for index, spec in enumerate(specs):
        hit = _lookup(state, spec, naming, source)
        if hit is None:
            continue
        key, array = hit
        hit_indices.add(index)
        used_keys.update(k for k in candidate_hf_keys(spec, naming) if k in state)
        if spec.name not in found:
            found[spec.name], origin[spec.name] = array, key
        elif not np.array_equal(found[spec.name], array):
            # RoBERTa's pooler and its classifier's dense layer both become ours.
            raise InputError("%s: tensors %s and %s both give %s but differ"
                             % (source, origin[spec.name], key, spec.name))
    _check_groups(specs, hit_indices, source)
    if naming.mlm:
        _check_tied_decoder(state, found.get("bert/embeddings/word_embeddings"), naming,
                            source)
        used_keys.add(naming.mlm.decoder)
    unused = sorted(k for k in state if k not in used_keys)
    stray = [k for k in unused if k.startswith(naming.owned)]
    if stray:
        what = "BERT" if naming.family.name == "bert" else naming.family.name
        raise InputError("%s: tensor %s does not fit a %s with %s's sizes (%s unused "
                         "%s tensors; check num_hidden_layers)"
                         % (source, stray[0], what, CONFIG_NAME, len(stray), what))
    return found, unused


# ---------------------------------------------------------------------------
# Writing the Google folder
# ---------------------------------------------------------------------------

def _tensorflow():
    """Imports TensorFlow only when a checkpoint is written or read (it is slow to load)."""
    import tensorflow as tf
    return tf


def write_checkpoint(variables, checkpoint_prefix):
    """Saves name -> float32 array as a TF1 name-based checkpoint at `checkpoint_prefix`.

    Writes <prefix>.index and <prefix>.data-00000-of-00001 with one SaveV2 op,
    the op tf.compat.v1.train.Saver runs. The arrays are fed through
    placeholders, not baked into the graph as constants, so large models stay
    clear of the 2 GB GraphDef limit. Works in eager and graph mode alike.
    """
    tf = _tensorflow()
    names = list(variables)
    with tf.Graph().as_default() as graph:
        placeholders = [tf.compat.v1.placeholder(tf.float32, shape=variables[n].shape)
                        for n in names]
        save_op = tf.raw_ops.SaveV2(prefix=checkpoint_prefix, tensor_names=names,
                                    shape_and_slices=[""] * len(names), tensors=placeholders)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(save_op, feed_dict={p: variables[n] for p, n in zip(placeholders, names)})


def checkpoint_shapes(checkpoint_prefix):
    """Name -> (shape tuple, dtype name) of every variable in a checkpoint."""
    tf = _tensorflow()
    reader = tf.train.load_checkpoint(checkpoint_prefix)
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    return {name: (tuple(shapes[name]), dtypes[name].name) for name in shapes}


def check_output_dir(output_dir, overwrite, flag_name="output_dir"):
    """InputError unless `output_dir` can become a new folder (absent, empty, or
    replaced with `overwrite`)."""
    if os.path.lexists(output_dir):
        if not os.path.isdir(output_dir):
            raise InputError("--%s %s: exists and is not a folder" % (flag_name, output_dir))
        if os.listdir(output_dir) and not overwrite:
            raise InputError("--%s %s: exists and is not empty; pass --overwrite "
                             "to replace it" % (flag_name, output_dir))
    fileio.check_folder(output_dir, flag_name)


def write_folder_atomically(output_dir, overwrite, write, flag_name="output_dir"):
    """Calls write(folder) on a new folder beside `output_dir`, then renames it to
    `output_dir`: the folder appears whole or not at all. On failure nothing is
    left, not even the parent folders made for it."""
    parent = os.path.dirname(output_dir)
    with fileio.new_folders_removed_on_failure(parent):
        staging_dir = tempfile.mkdtemp(prefix="." + os.path.basename(output_dir) + ".tmp-",
                                       dir=parent)
        try:
            # mkdtemp makes the folder private (0700); the result should be an
            # ordinary folder, as mkdir under the user's umask would make it.
            os.chmod(staging_dir, 0o777 & ~_current_umask())
            write(staging_dir)
            _publish(staging_dir, output_dir, overwrite, flag_name)
        except BaseException:
            shutil.rmtree(staging_dir, ignore_errors=True)
            raise


def _publish(staging_dir, output_dir, overwrite, flag_name):
    """Renames the finished staging folder to output_dir, replacing an old one last."""
    check_output_dir(output_dir, overwrite, flag_name)  # again: it may have changed
    if not os.path.lexists(output_dir):
        os.rename(staging_dir, output_dir)
        return
    # Move the old folder aside (same parent, so renames are atomic), put the
    # new one in place, then delete the old: at no point is output_dir partial.
    old_dir = staging_dir + ".old"
    os.rename(output_dir, old_dir)
    try:
        os.rename(staging_dir, output_dir)
    except BaseException:
        os.rename(old_dir, output_dir)
        raise
    shutil.rmtree(old_dir, ignore_errors=True)


ConversionResult = collections.namedtuple(
    "ConversionResult", "output_dir weights_path num_variables num_parameters ignored_keys notes "
    "family vocab_file")

Source = collections.namedtuple("Source", [
    "family", "bert_config", "variables", "ignored", "weights_path", "tokenizer_files",
    "notes"])
"""What an input folder converts to, before anything is written: the families.Family,
bert_config (dict), our variables, the source's names left out, the file the weights
came from, the tokenizer files to copy, the notes for the summary."""


def _lowercase_note(hf_dir):
    """A hint on casing from tokenizer_config.json, which the Google layout lacks."""
    path = os.path.join(hf_dir, TOKENIZER_CONFIG_NAME)
    try:
        with open(path, "r", encoding="utf-8") as reader:
            lower = json.load(reader).get("do_lower_case")
    except (OSError, ValueError, AttributeError):
        return None  # only a hint: a missing or odd file is no error
    if isinstance(lower, bool):
        return "%s has do_lower_case=%s: tokenize with the same setting" % (
            TOKENIZER_CONFIG_NAME, str(lower).lower())
    return None


def _pooling_note(hf_dir):
    """A hint from a sentence-transformers folder that pools the mean of its tokens."""
    path = os.path.join(hf_dir, "1_Pooling", "config.json")
    try:
        with open(path, "r", encoding="utf-8") as reader:
            mean = json.load(reader).get("pooling_mode_mean_tokens")
    except (OSError, ValueError, AttributeError):
        return None  # only a hint
    if mean is True:
        return ("%s: a sentence-transformers model trained with mean pooling (its pooler "
                "layer was not trained): fine-tune with --pooling=mean" % path)
    return None


# ---------------------------------------------------------------------------
# The tokenizer files
# ---------------------------------------------------------------------------

def tokenizer_file_names(folder):
    """The tokenizer files `folder` holds (hf_families.TOKENIZER_FILES and any
    SentencePiece *.model, e.g. ALBERT's 30k-clean.model), copied unchanged."""
    names = [n for n in hf_families.TOKENIZER_FILES if os.path.isfile(os.path.join(folder, n))]
    names += sorted(n for n in os.listdir(folder)
                    if n.endswith(".model") and n not in names
                    and os.path.isfile(os.path.join(folder, n)))
    return names


def _check_tokenizer(folder, names, family, vocab_size, config_source):
    """InputError unless the folder has the family's tokenizer, of vocab_size tokens."""
    if family.tokenizer == "wordpiece":
        vocab_path = os.path.join(folder, VOCAB_NAME)
        num_tokens = count_vocab_tokens(vocab_path)
        if num_tokens != vocab_size:
            raise InputError("%s: %d tokens (lines), but %s has vocab_size %d"
                             % (vocab_path, num_tokens, config_source, vocab_size))
        return
    vocab_file = hf_families.preferred_vocab_file(names)
    if vocab_file is None:
        raise InputError("%s: no tokenizer file; a %s model comes with tokenizer.json or "
                         "its own (vocab.json + merges.txt, sentencepiece.bpe.model, "
                         "spiece.model)" % (folder, family.name))
    from bert_toolkit.text import tokenization
    try:
        tokenizer = tokenization.load_tokenizer(os.path.join(folder, vocab_file), None, family)
    except ImportError:
        return  # a version without the subword tokenizers: the tasks will say so
    if family.positions == "relative" and len(tokenizer.vocab) <= vocab_size:
        return  # DeBERTa-v3's table has rows no id reaches (128100 for 128001 ids)
    if len(tokenizer.vocab) != vocab_size:
        raise InputError("%s: %d tokens, but %s has vocab_size %d"
                         % (os.path.join(folder, vocab_file), len(tokenizer.vocab),
                            config_source, vocab_size))


# ---------------------------------------------------------------------------
# Reading a Hugging Face folder, or one of Google's ELECTRA / ALBERT releases
# ---------------------------------------------------------------------------

def _sequence_labels(state, hf_config, naming):
    """The labels of a ...ForSequenceClassification head in `state`, else None.

    Only where config.json's architectures (if any) say the model is one: other
    classes reuse the name `classifier` for other heads (token labelling).
    """
    if naming.classifier is None:
        return None
    architectures = hf_config.get("architectures") or []
    if architectures and not any(str(a).endswith("ForSequenceClassification")
                                 for a in architectures):
        return None
    weight = state.get(naming.classifier.out + ".weight")
    if weight is None or weight.ndim != 2:
        return None
    return int(weight.shape[0])


def _classifier_note(hf_config, num_labels, pooler="its dense layer as bert/pooler/dense"):
    labels = hf_config.get("id2label")
    named = ""
    if isinstance(labels, dict) and len(labels) == num_labels:
        try:
            named = ": " + ", ".join(str(labels[k]) for k in sorted(labels, key=int))
        except (TypeError, ValueError):
            named = ""
    return ("kept the sequence classifier (%d labels%s) as output_weights/output_bias and "
            "%s: fine-tuning with the same labels in this order continues from it, and a "
            "prediction run uses it as it is" % (num_labels, named, pooler))


def _family_notes(hf_config, family, naming, bert_config, variables, ignored):
    """The summary's notes on what a non-BERT conversion kept, left out or changed."""
    notes = hf_families.config_notes(hf_config, family)
    if "output_weights" in variables:
        pooler = {} if not family.pre_norm else {  # ModernBERT's `head`
            "pooler": "its head (dense and norm) as bert/pooler/"}
        notes.append(_classifier_note(hf_config, variables["output_weights"].shape[0],
                                      **pooler))
    for prefix in hf_families.KNOWN_EXTRA_HEADS.get(family.name, ()):
        if any(key.startswith(prefix) for key in ignored):
            notes.append("%s*: the replaced-token detection head of ElectraForPreTraining "
                         "has no place in Google's layout and is left out; the encoder "
                         "converts whole" % prefix)
    mlm_activation = naming.mlm.activation if naming.mlm else None
    if ("cls/predictions/output_bias" in variables and mlm_activation
            and mlm_activation != bert_config["hidden_act"]):
        notes.append("the masked-LM head of %s applies %s, but pre-training here applies "
                     "hidden_act %s" % (naming.class_prefix, mlm_activation,
                                        bert_config["hidden_act"]))
    return notes


def read_hf_folder(folder):
    """The Source of a Hugging Face folder (config.json, weights, tokenizer files)."""
    config_path = os.path.join(folder, CONFIG_NAME)
    hf_config = read_json(config_path)
    if not isinstance(hf_config, dict):
        raise InputError("%s: expected a JSON object, got %s"
                         % (config_path, type(hf_config).__name__))
    family = families.by_hf_model_type(hf_config.get("model_type", "bert"), source=config_path)
    naming = hf_families.naming(family.name)
    if family.name == "bert":
        bert_config = hf_config_to_bert_config(hf_config, source=config_path)
    else:
        hf_families.check_hf_config(hf_config, family, config_path)
        bert_config = hf_families.bert_config_from_hf(hf_config, family, HF_ACTIVATIONS,
                                                      config_path)
    names = tokenizer_file_names(folder)
    _check_tokenizer(folder, names, family, bert_config["vocab_size"], CONFIG_NAME)
    weights_path, state = load_hf_state(folder)
    num_labels = _sequence_labels(state, hf_config, naming)
    variables, ignored = hf_state_to_google_variables(state, bert_config, weights_path,
                                                      num_labels)
    del state
    notes = []
    if "bert/pooler/dense/kernel" not in variables:
        notes.append("no pooler in the source: bert/pooler/dense starts from random "
                     "initialisation when fine-tuning")
    if family.tokenizer == "wordpiece":
        notes.append(_lowercase_note(folder))
    notes.append(_pooling_note(folder))
    if family.name != "bert":
        notes += _family_notes(hf_config, family, naming, bert_config, variables, ignored)
    return Source(family, bert_config, variables, ignored, weights_path, names,
                  [note for note in notes if note])


def _check_google_heads(bert_config, variables, source):
    """A head of a Google checkpoint is whole and of the config's shapes, or absent."""
    specs = tensor_specs(bert_config)
    for spec in specs:
        if spec.name in variables and variables[spec.name].shape != tuple(spec.shape):
            raise InputError("%s: variable %s has shape %s; the config implies %s"
                             % (source, spec.name, list(variables[spec.name].shape),
                                list(spec.shape)))
    hits = {i for i, spec in enumerate(specs) if spec.name in variables}
    _check_groups([spec._replace(hf_key=spec.name) for spec in specs], hits, source)


def read_google_folder(folder, prefix):
    """The Source of a folder of Google's ELECTRA or ALBERT release (checkpoint `prefix`)."""
    model = google_checkpoints.read(folder, prefix)
    family = families.get(model.family)
    config_source = (google_checkpoints.ALBERT_CONFIG_NAME if family.name == "albert"
                     else "the checkpoint's shapes")
    names = tokenizer_file_names(folder)
    _check_tokenizer(folder, names, family, model.bert_config["vocab_size"], config_source)
    _check_google_heads(model.bert_config, model.variables, prefix)
    notes = []
    if "bert/pooler/dense/kernel" not in model.variables:
        notes.append("no pooler in the source: bert/pooler/dense starts from random "
                     "initialisation when fine-tuning")
    if family.name == "electra":
        notes.append("Google's ELECTRA: the discriminator (electra/...) is converted; its "
                     "sizes come from the shapes, %d heads (hidden // 64) and exact GELU, as "
                     "ELECTRA's configure_pretraining sets them"
                     % model.bert_config["num_attention_heads"])
    return Source(family, model.bert_config, model.variables, model.ignored, prefix,
                  names, notes)


def check_fits_graph(bert_config, variables, source):
    """InputError unless the variables under bert/ are those modeling.BertModel makes for
    this config (bert_variable_shapes; the pooler may be absent) with their shapes."""
    from bert_toolkit.model import modeling  # TensorFlow: loaded only to convert
    config = modeling.BertConfig.from_dict(bert_config, source=BERT_CONFIG_NAME)
    expected = modeling.bert_variable_shapes(config)
    for name, shape in expected.items():
        if name not in variables:
            if name.startswith("bert/pooler/"):
                continue
            raise InputError("%s: no tensor for %s %s" % (source, name, list(shape)))
        if list(variables[name].shape) != list(shape):
            raise InputError("%s: %s has shape %s; the config implies %s"
                             % (source, name, list(variables[name].shape), list(shape)))
    extra = [name for name in variables if name.startswith("bert/") and name not in expected]
    if extra:
        raise InputError("%s: %s has no place in the encoder this config describes"
                         % (source, extra[0]))


def _read_source(folder):
    """The Source of --hf_dir's folder: Hugging Face's layout or one of Google's."""
    if os.path.isfile(os.path.join(folder, CONFIG_NAME)):
        return read_hf_folder(folder)
    prefix = google_checkpoints.find_checkpoint(folder)
    if prefix is None:
        raise InputError("%s: file not found (a Hugging Face folder has config.json; Google's "
                         "ELECTRA or ALBERT releases have a TensorFlow checkpoint *.index)"
                         % os.path.join(folder, CONFIG_NAME))
    return read_google_folder(folder, prefix)


# ---------------------------------------------------------------------------
# Writing the output folder
# ---------------------------------------------------------------------------

def _write_output(staging_dir, source_dir, bert_config, variables, tokenizer_files):
    with open(os.path.join(staging_dir, BERT_CONFIG_NAME), "w", encoding="utf-8") as writer:
        writer.write(json.dumps(bert_config, indent=2, sort_keys=True) + "\n")
    for name in tokenizer_files:
        shutil.copyfile(os.path.join(source_dir, name), os.path.join(staging_dir, name))
    prefix = os.path.join(staging_dir, CHECKPOINT_NAME)
    write_checkpoint(variables, prefix)
    written = checkpoint_shapes(prefix)
    wanted = {name: (array.shape, "float32") for name, array in variables.items()}
    if written != wanted:
        raise RuntimeError("checkpoint %s does not hold what was written" % prefix)


def _current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def convert(hf_dir, output_dir, overwrite=False):
    """Converts `hf_dir` into Google's layout at `output_dir`.

    hf_dir: a Hugging Face folder of any family of bert_toolkit/families.py, a
    folder of Google's ELECTRA or ALBERT release, or a Hub model id (hub.py).
    Returns a ConversionResult. Raises InputError for any problem with the
    input or with output_dir (existing and non-empty without `overwrite`);
    output_dir is then left as it was.
    """
    output_dir = os.path.abspath(output_dir)
    folder, model_id = hub.resolve(hf_dir)
    folder = os.path.abspath(folder)
    if output_dir == folder or folder.startswith(output_dir + os.sep):
        raise InputError("--output_dir %s: must not be --hf_dir or contain it" % output_dir)
    check_output_dir(output_dir, overwrite)

    source = _read_source(folder)
    check_fits_graph(source.bert_config, source.variables, source.weights_path)
    write_folder_atomically(output_dir, overwrite, lambda staging_dir: _write_output(
        staging_dir, folder, source.bert_config, source.variables, source.tokenizer_files))

    notes = list(source.notes)
    if model_id:
        notes.insert(0, "%s from the Hugging Face Hub (cached in %s)" % (model_id, folder))
    vocab_file = hf_families.preferred_vocab_file(source.tokenizer_files)
    variables = source.variables
    return ConversionResult(
        output_dir=output_dir, weights_path=source.weights_path,
        num_variables=len(variables),
        num_parameters=int(sum(v.size for v in variables.values())),
        ignored_keys=source.ignored, notes=notes, family=source.family.name,
        vocab_file=os.path.join(output_dir, vocab_file) if vocab_file else None)


def format_summary(result):
    """The lines printed after a successful conversion."""
    lines = ["converted %s" % result.weights_path,
             "wrote %d variables (%s parameters) to %s"
             % (result.num_variables, "{:,}".format(result.num_parameters), result.output_dir),
             "use --init_checkpoint=%s" % os.path.join(result.output_dir, CHECKPOINT_NAME)]
    if result.family != "bert":
        lines.append("model_family %s: use --bert_config_file=%s --vocab_file=%s"
                     % (result.family, os.path.join(result.output_dir, BERT_CONFIG_NAME),
                        result.vocab_file))
    if result.ignored_keys:
        shown = ", ".join(result.ignored_keys[:5])
        hidden = len(result.ignored_keys) - 5
        more = " and %d more" % hidden if hidden > 0 else ""
        what = "not part of BERT" if result.family == "bert" else "no place in Google's layout"
        lines.append("left out (%s): %s%s" % (what, shown, more))
    lines += ["note: " + note for note in result.notes]
    return "\n".join(lines)


def run(options):
    """convert_hf_checkpoint.py: converts as ConvertOptions say and prints the summary;
    InputError on a user mistake."""
    result = convert(options.hf_dir, options.output_dir, overwrite=options.overwrite)
    print(format_summary(result))
    return result
