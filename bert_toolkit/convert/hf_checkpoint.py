"""Converts a Hugging Face BERT folder into Google's checkpoint layout.

    python convert_hf_checkpoint.py --hf_dir=path/to/hf_model \\
        --output_dir=path/to/google_model [--overwrite]

The input folder holds config.json, vocab.txt and the weights as
model.safetensors or pytorch_model.bin (or sharded: *.index.json plus the
shards). The output folder gets what Google released for each BERT:

    bert_config.json  vocab.txt  bert_model.ckpt.index
    bert_model.ckpt.data-00000-of-00001

so `--init_checkpoint=OUTPUT/bert_model.ckpt` works with every script here.

Untrusted files never run code: safetensors is read with the `safetensors`
package, and pytorch_model.bin (the zip format of torch >= 1.6) by a
restricted unpickler that knows only the handful of globals a state dict
needs (tensor rebuilders, storage types, OrderedDict), all mapped to numpy
builders written here; any other global is refused before it is looked up.
torch is never imported.

Variable mapping (Hugging Face -> Google), with `bert.` prefixes and
old-style LayerNorm `gamma`/`beta` accepted on the Hugging Face side:
Linear `weight` [out, in] -> `kernel` [in, out] (transposed), Linear `bias`
-> `bias`, LayerNorm `weight`/`bias` -> `gamma`/`beta`, Embedding `weight`
-> the table itself; pre-training heads `cls.predictions.*` and
`cls.seq_relationship.*` map to `cls/...` (`output_weights` [2, hidden] keeps
the [out, in] layout, as in Google's code). `embeddings.position_ids` and the
MLM decoder weight (tied to the word embeddings) are dropped.

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

from bert_toolkit import fileio
from bert_toolkit.convert import safe_unpickle
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
# Hugging Face key it comes from (BertModel spelling, no `bert.` prefix), and
# whether the array is transposed on the way (Linear weight [out, in] ->
# kernel [in, out]). `group` says which tensors stand or fall together.
TensorSpec = collections.namedtuple("TensorSpec", "name shape hf_key transpose group")

# Required: the encoder. Optional, but all-or-nothing within a group: the
# pooler (BertForMaskedLM has none) and the two pre-training heads.
BACKBONE, POOLER, MLM_HEAD, NSP_HEAD = "backbone", "pooler", "mlm_head", "nsp_head"


def _dense_specs(google_path, hf_path, in_size, out_size, group):
    return [TensorSpec(google_path + "/kernel", (in_size, out_size), hf_path + ".weight",
                       True, group),
            TensorSpec(google_path + "/bias", (out_size,), hf_path + ".bias", False, group)]


def _layer_norm_specs(google_path, hf_path, size, group):
    return [TensorSpec(google_path + "/gamma", (size,), hf_path + ".weight", False, group),
            TensorSpec(google_path + "/beta", (size,), hf_path + ".bias", False, group)]


def tensor_specs(bert_config):
    """Every variable a Google checkpoint of `bert_config` (dict) may hold, in order."""
    hidden = bert_config["hidden_size"]
    inner = bert_config["intermediate_size"]
    specs = [
        TensorSpec("bert/embeddings/word_embeddings", (bert_config["vocab_size"], hidden),
                   "embeddings.word_embeddings.weight", False, BACKBONE),
        TensorSpec("bert/embeddings/token_type_embeddings",
                   (bert_config["type_vocab_size"], hidden),
                   "embeddings.token_type_embeddings.weight", False, BACKBONE),
        TensorSpec("bert/embeddings/position_embeddings",
                   (bert_config["max_position_embeddings"], hidden),
                   "embeddings.position_embeddings.weight", False, BACKBONE),
    ]
    specs += _layer_norm_specs("bert/embeddings/LayerNorm", "embeddings.LayerNorm", hidden,
                               BACKBONE)
    for index in range(bert_config["num_hidden_layers"]):
        google = "bert/encoder/layer_%d/" % index
        hf = "encoder.layer.%d." % index
        for part in ("query", "key", "value"):
            specs += _dense_specs(google + "attention/self/" + part,
                                  hf + "attention.self." + part, hidden, hidden, BACKBONE)
        specs += _dense_specs(google + "attention/output/dense", hf + "attention.output.dense",
                              hidden, hidden, BACKBONE)
        specs += _layer_norm_specs(google + "attention/output/LayerNorm",
                                   hf + "attention.output.LayerNorm", hidden, BACKBONE)
        specs += _dense_specs(google + "intermediate/dense", hf + "intermediate.dense",
                              hidden, inner, BACKBONE)
        specs += _dense_specs(google + "output/dense", hf + "output.dense", inner, hidden,
                              BACKBONE)
        specs += _layer_norm_specs(google + "output/LayerNorm", hf + "output.LayerNorm",
                                   hidden, BACKBONE)
    specs += _dense_specs("bert/pooler/dense", "pooler.dense", hidden, hidden, POOLER)
    specs += _dense_specs("cls/predictions/transform/dense", "cls.predictions.transform.dense",
                          hidden, hidden, MLM_HEAD)
    specs += _layer_norm_specs("cls/predictions/transform/LayerNorm",
                               "cls.predictions.transform.LayerNorm", hidden, MLM_HEAD)
    specs.append(TensorSpec("cls/predictions/output_bias", (bert_config["vocab_size"],),
                            "cls.predictions.bias", False, MLM_HEAD))
    # Linear(hidden, 2).weight is [2, hidden]: the layout Google's code keeps.
    specs.append(TensorSpec("cls/seq_relationship/output_weights", (2, hidden),
                            "cls.seq_relationship.weight", False, NSP_HEAD))
    specs.append(TensorSpec("cls/seq_relationship/output_bias", (2,),
                            "cls.seq_relationship.bias", False, NSP_HEAD))
    return specs


def candidate_hf_keys(hf_key):
    """Spellings a canonical Hugging Face key may have in a file, preferred first.

    'embeddings.LayerNorm.weight' -> [it, 'embeddings.LayerNorm.gamma',
    'bert.embeddings.LayerNorm.weight', 'bert.embeddings.LayerNorm.gamma'].
    """
    keys = [hf_key]
    if ".LayerNorm." in hf_key:
        # Checkpoints converted by early pytorch-pretrained-bert kept TF names.
        keys.append(hf_key.replace(".LayerNorm.weight", ".LayerNorm.gamma")
                    .replace(".LayerNorm.bias", ".LayerNorm.beta"))
    if hf_key == "cls.predictions.bias":
        keys.append("cls.predictions.decoder.bias")  # the same tied parameter
    if not hf_key.startswith("cls."):
        keys += ["bert." + key for key in keys]  # BertFor* models nest BertModel
    return list(collections.OrderedDict.fromkeys(keys))


# Present in many files, absent from Google's layout on purpose.
_DROPPED_KEYS = ("embeddings.position_ids", "bert.embeddings.position_ids")
_DECODER_WEIGHT = "cls.predictions.decoder.weight"
# Unused keys under these prefixes belong to BERT itself, so leaving them out
# would silently drop weights (e.g. a layer beyond num_hidden_layers).
_BERT_PREFIXES = ("embeddings.", "encoder.", "pooler.", "cls.", "bert.")


def _as_float32(array, key, source):
    if not np.issubdtype(array.dtype, np.floating):
        raise InputError("%s: tensor %s has dtype %s; expected floating point"
                         % (source, key, array.dtype))
    return np.asarray(array, dtype=np.float32)


def _lookup(state, spec, source):
    """(key found, float32 array in Google layout) for `spec`, or None if absent."""
    found = [key for key in candidate_hf_keys(spec.hf_key) if key in state]
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


def _check_tied_decoder(state, word_embeddings, source):
    """The MLM decoder weight is dropped: make sure it really is the word embeddings."""
    if _DECODER_WEIGHT not in state or word_embeddings is None:
        return
    decoder = _as_float32(state[_DECODER_WEIGHT], _DECODER_WEIGHT, source)
    if decoder.shape != word_embeddings.shape or not np.array_equal(decoder, word_embeddings):
        raise InputError("%s: %s differs from the word embeddings; Google's layout ties "
                         "them, so this model cannot be converted" % (source, _DECODER_WEIGHT))


def hf_state_to_google_variables(state, bert_config, source="the weights file"):
    """Maps a Hugging Face state dict onto Google's variable names.

    state: name -> np.ndarray (any float dtype); bert_config: the dict from
    hf_config_to_bert_config. Returns (variables, ignored_keys): an
    OrderedDict Google name -> float32 array of the shape in tensor_specs, and
    the sorted keys outside BERT (e.g. a task head) that were left out.
    Missing or misshapen tensors, and unused ones that belong to BERT, raise
    InputError naming `source` and the tensor.
    """
    specs = tensor_specs(bert_config)
    found = collections.OrderedDict()
    used_keys = set(_DROPPED_KEYS)
    for spec in specs:
        hit = _lookup(state, spec, source)
        if hit is not None:
            found[spec.name] = hit[1]
            used_keys.update(k for k in candidate_hf_keys(spec.hf_key) if k in state)
    for group in (BACKBONE, POOLER, MLM_HEAD, NSP_HEAD):
        members = [s for s in specs if s.group == group]
        present = [s for s in members if s.name in found]
        if group != BACKBONE and not present:
            continue
        for spec in members:
            if spec.name not in found:
                raise InputError("%s: missing tensor %s (for %s, shape %s per %s)"
                                 % (source, spec.hf_key, spec.name,
                                    list(spec.shape[::-1] if spec.transpose else spec.shape),
                                    CONFIG_NAME))
    _check_tied_decoder(state, found.get("bert/embeddings/word_embeddings"), source)
    used_keys.add(_DECODER_WEIGHT)
    unused = sorted(k for k in state if k not in used_keys)
    stray = [k for k in unused if k.startswith(_BERT_PREFIXES)]
    if stray:
        raise InputError("%s: tensor %s does not fit a BERT with %s's sizes (%s unused "
                         "BERT tensors; check num_hidden_layers)"
                         % (source, stray[0], CONFIG_NAME, len(stray)))
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
    "ConversionResult", "output_dir weights_path num_variables num_parameters ignored_keys notes")


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


def _write_output(staging_dir, hf_dir, bert_config, variables):
    with open(os.path.join(staging_dir, BERT_CONFIG_NAME), "w", encoding="utf-8") as writer:
        writer.write(json.dumps(bert_config, indent=2, sort_keys=True) + "\n")
    shutil.copyfile(os.path.join(hf_dir, VOCAB_NAME), os.path.join(staging_dir, VOCAB_NAME))
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
    """Converts the Hugging Face BERT folder `hf_dir` into Google's layout at `output_dir`.

    Returns a ConversionResult. Raises InputError for any problem with the
    input or with output_dir (existing and non-empty without `overwrite`);
    output_dir is then left as it was.
    """
    hf_dir = os.path.abspath(hf_dir)
    output_dir = os.path.abspath(output_dir)
    if not os.path.isdir(hf_dir):
        raise InputError("--hf_dir %s: no such folder" % hf_dir)
    if output_dir == hf_dir or hf_dir.startswith(output_dir + os.sep):
        raise InputError("--output_dir %s: must not be --hf_dir or contain it" % output_dir)
    check_output_dir(output_dir, overwrite)

    config_path = os.path.join(hf_dir, CONFIG_NAME)
    bert_config = hf_config_to_bert_config(read_json(config_path), source=config_path)
    vocab_path = os.path.join(hf_dir, VOCAB_NAME)
    num_tokens = count_vocab_tokens(vocab_path)
    if num_tokens != bert_config["vocab_size"]:
        raise InputError("%s: %d tokens (lines), but %s has vocab_size %d"
                         % (vocab_path, num_tokens, CONFIG_NAME, bert_config["vocab_size"]))
    weights_path, state = load_hf_state(hf_dir)
    variables, ignored = hf_state_to_google_variables(state, bert_config, source=weights_path)
    del state

    write_folder_atomically(output_dir, overwrite, lambda staging_dir: _write_output(
        staging_dir, hf_dir, bert_config, variables))

    notes = []
    if "bert/pooler/dense/kernel" not in variables:
        notes.append("no pooler in the source: bert/pooler/dense starts from random "
                     "initialisation when fine-tuning")
    notes += [note for note in (_lowercase_note(hf_dir), _pooling_note(hf_dir)) if note]
    return ConversionResult(
        output_dir=output_dir, weights_path=weights_path, num_variables=len(variables),
        num_parameters=int(sum(v.size for v in variables.values())),
        ignored_keys=ignored, notes=notes)


def format_summary(result):
    """The lines printed after a successful conversion."""
    lines = ["converted %s" % result.weights_path,
             "wrote %d variables (%s parameters) to %s"
             % (result.num_variables, "{:,}".format(result.num_parameters), result.output_dir),
             "use --init_checkpoint=%s" % os.path.join(result.output_dir, CHECKPOINT_NAME)]
    if result.ignored_keys:
        shown = ", ".join(result.ignored_keys[:5])
        hidden = len(result.ignored_keys) - 5
        more = " and %d more" % hidden if hidden > 0 else ""
        lines.append("left out (not part of BERT): %s%s" % (shown, more))
    lines += ["note: " + note for note in result.notes]
    return "\n".join(lines)


def run(options):
    """convert_hf_checkpoint.py: converts as ConvertOptions say and prints the summary;
    InputError on a user mistake."""
    result = convert(options.hf_dir, options.output_dir, overwrite=options.overwrite)
    print(format_summary(result))
    return result
