"""A model trained here handed back in Hugging Face's layout, loadable with no code of ours.

    python export_hf.py --model_dir=RUN_OUTPUT_DIR --hf_dir=NEW_FOLDER [--checkpoint=...]

The run's output_dir says what the model is (serving_config.json and
run_options.json, written when it trained: the task, labels, pooling,
tokenizer settings); a folder of Google's layout (bert_config.json,
vocab.txt, bert_model.ckpt) or a pre-training run is read from its
checkpoint's variables. The checkpoint is --checkpoint, else the best one
evaluation during training kept, else the newest. What is written:

    task                         Hugging Face class (config.json architectures)
    classifier, re-ranker        BertForSequenceClassification (id2label, label2id;
                                 multi-label: problem_type multi_label_classification)
    classifier with --pooling=mean  sentence-transformers: the encoder, a mean Pooling
                                 module and a Dense module holding the classifier
                                 (identity activation), so SentenceTransformer(path)
                                 .encode(texts) returns its logits; stock BertFor*
                                 classes pool with [CLS] and would compute something else
    token labelling              BertForTokenClassification
    SQuAD                        BertForQuestionAnswering
    pre-training                 BertForPreTraining (the MLM decoder tied to the word
                                 embeddings, as in Google's checkpoints)
    --encoder_only, or a model without a head   BertModel

with config.json (the activation named as transformers names it: our
gelu_exact is its "gelu", our tanh gelu its "gelu_new"), model.safetensors
(written with safetensors' numpy API: no torch here), vocab.txt,
tokenizer.json (the same Rust WordPiece tokenization.py runs: identical ids,
Google's 200-character word limit), tokenizer_config.json and
special_tokens_map.json (lower-casing and the max length recorded).

A classifier trained with --long_text=windows is refused: no stock layout
aggregates a long text's windows, and a folder that loads but answers per
window would silently compute something else. As in the converter, the
folder appears all at once (written next to --hf_dir, then renamed), and an
existing non-empty --hf_dir is refused without --overwrite.
"""

import collections
import json
import os
import shutil

import numpy as np

from bert_toolkit.convert import hf_checkpoint
from bert_toolkit.errors import InputError

SEQUENCE_CLASSIFICATION = "BertForSequenceClassification"
TOKEN_CLASSIFICATION = "BertForTokenClassification"
QUESTION_ANSWERING = "BertForQuestionAnswering"
PRETRAINING = "BertForPreTraining"
ENCODER = "BertModel"
SENTENCE_TRANSFORMERS = "sentence-transformers"

# Our hidden_act -> transformers' name of the same function (the first of its spellings).
_ACTIVATIONS = {}
for _hf_name, _ours in hf_checkpoint.HF_ACTIVATIONS.items():
    _ACTIVATIONS.setdefault(_ours, _hf_name)
_SPECIAL_TOKENS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                   "cls_token": "[CLS]", "mask_token": "[MASK]"}
_SQUAD_WEIGHTS = "cls/squad/output_weights"
_MLM_BIAS = "cls/predictions/output_bias"

Model = collections.namedtuple("Model", [
    "checkpoint", "bert_config", "vocab_file", "do_lower_case", "max_seq_length", "kind",
    "labels", "multi_label"])
"""What is exported: the checkpoint prefix, bert_config (dict), the vocabulary, the
tokenizer settings, the Hugging Face class (kind) and the labels of a head."""


def _records(model_dir):
    """(serving_config dict or {}, recorded options dict or {}) of a run's output_dir."""
    from bert_toolkit.engine import export_layout, run_folder
    serving_config = {}
    path = os.path.join(model_dir, export_layout.SERVING_CONFIG_FILE)
    if os.path.isfile(path):
        serving_config = hf_checkpoint.read_json(path)
    recorded = run_folder.read_options(model_dir)
    return serving_config, (recorded[1] if recorded else {})


def _checkpoint(model_dir, checkpoint):
    """The checkpoint to export: --checkpoint, the best one kept, else the newest."""
    from bert_toolkit.engine import model_selection
    from bert_toolkit.model import modeling
    if checkpoint:
        return modeling.resolve_checkpoint(checkpoint)
    if os.path.isdir(model_dir):
        best, _ = model_selection.best_checkpoint(model_dir)
        if best is not None:
            return best
    try:
        return modeling.resolve_checkpoint(model_dir)
    except InputError:
        raise InputError("--model_dir=%s: no checkpoint to export (expected a run's "
                         "output_dir that trained, or a folder with bert_model.ckpt)"
                         % model_dir)


def _kind(serving_config, variable_names, encoder_only, model_dir):
    """The Hugging Face class of the model (see the module docstring)."""
    if encoder_only:
        return ENCODER
    task = serving_config.get("task")
    if task in ("classification", "reranking"):
        if serving_config.get("long_text") == "windows":
            raise InputError("--model_dir=%s: trained with --long_text=windows, which answers "
                             "a long text from its windows' probabilities; no stock Hugging "
                             "Face layout aggregates windows: serve its SavedModel "
                             "(--save_for_serving; serving_client.py cuts and aggregates the "
                             "windows), or export the encoder alone with --encoder_only"
                             % model_dir)
        if serving_config.get("pooling", "pooler") == "mean":
            return SENTENCE_TRANSFORMERS
        return SEQUENCE_CLASSIFICATION
    if task == "token_classification":
        return TOKEN_CLASSIFICATION
    if task == "squad" or _SQUAD_WEIGHTS in variable_names:
        return QUESTION_ANSWERING
    if _MLM_BIAS in variable_names:
        return PRETRAINING
    if "output_weights" in variable_names:
        raise InputError("--model_dir=%s: its checkpoint has a task head but no record of "
                         "the task (serving_config.json, written by a training run of this "
                         "version); export the encoder alone with --encoder_only" % model_dir)
    return ENCODER


def describe(options):
    """The Model that ExportHfOptions name, every file checked."""
    import tensorflow as tf

    from bert_toolkit.model import modeling

    model_dir = options.model_dir
    if not os.path.exists(model_dir) and not os.path.exists(model_dir + ".index"):
        raise InputError("--model_dir=%s: no such folder or checkpoint" % model_dir)
    folder = model_dir if os.path.isdir(model_dir) else os.path.dirname(model_dir)
    serving_config, recorded = _records(folder)
    checkpoint = _checkpoint(model_dir, options.checkpoint)
    variables = dict(tf.train.list_variables(checkpoint))

    def setting(name, default_file):
        value = getattr(options, name) or recorded.get(name)
        if not value and os.path.isfile(os.path.join(folder, default_file)):
            value = os.path.join(folder, default_file)
        if not value:
            raise InputError("--%s is required: %s records no %s" % (name, model_dir,
                                                                      default_file))
        return value

    config_file = setting("bert_config_file", hf_checkpoint.BERT_CONFIG_NAME)
    bert_config = modeling.BertConfig.from_json_file(config_file)
    vocab_file = setting("vocab_file", hf_checkpoint.VOCAB_NAME)
    modeling.check_vocab_matches_config(bert_config, hf_checkpoint.count_vocab_tokens(
        vocab_file), vocab_file)
    modeling.check_checkpoint_compatible(modeling.bert_variable_shapes(bert_config),
                                         checkpoint)
    do_lower_case = options.do_lower_case
    if do_lower_case is None:
        do_lower_case = serving_config.get("do_lower_case", recorded.get("do_lower_case", True))
    return Model(checkpoint, bert_config.to_dict(), vocab_file, bool(do_lower_case),
                 serving_config.get("max_seq_length", recorded.get(
                     "max_seq_length", bert_config.max_position_embeddings)),
                 _kind(serving_config, variables, options.encoder_only, model_dir),
                 list(serving_config.get("labels") or []),
                 bool(serving_config.get("multi_label")))


# -- tensors ----------------------------------------------------------------------------

def hf_tensors(model, read):
    """Hugging Face name -> float32 array of the model's tensors (the encoder's names
    prefixed with "bert." for the BertFor* classes); read(name) reads a variable."""
    prefix = "" if model.kind in (ENCODER, SENTENCE_TRANSFORMERS) else "bert."
    tensors = collections.OrderedDict()
    for spec in hf_checkpoint.tensor_specs(model.bert_config):
        if spec.group in (hf_checkpoint.MLM_HEAD, hf_checkpoint.NSP_HEAD):
            if model.kind == PRETRAINING:
                tensors[spec.hf_key] = _hf_layout(read(spec.name), spec.transpose)
            continue
        if spec.group == hf_checkpoint.POOLER and model.kind in (
                TOKEN_CLASSIFICATION, QUESTION_ANSWERING):
            continue  # these classes have no pooler (add_pooling_layer=False)
        tensors[prefix + spec.hf_key] = _hf_layout(read(spec.name), spec.transpose)
    if model.kind in (SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION):
        # Our [num_labels, hidden] is a Linear's [out, in] as it stands.
        tensors["classifier.weight"] = read("output_weights")
        tensors["classifier.bias"] = read("output_bias")
    elif model.kind == QUESTION_ANSWERING:
        tensors["qa_outputs.weight"] = read(_SQUAD_WEIGHTS)
        tensors["qa_outputs.bias"] = read("cls/squad/output_bias")
    return tensors


def _hf_layout(array, transpose):
    array = np.asarray(array, dtype=np.float32)
    return np.ascontiguousarray(array.T) if transpose else array


# -- files -------------------------------------------------------------------------------

def hf_config(model):
    """config.json for transformers' BertConfig and the model's class."""
    bert = model.bert_config
    act = bert["hidden_act"]
    if act not in _ACTIVATIONS:
        raise InputError("hidden_act %r has no Hugging Face name" % act)
    config = {"model_type": "bert",
              "architectures": [ENCODER if model.kind == SENTENCE_TRANSFORMERS
                                else model.kind],
              "vocab_size": bert["vocab_size"], "hidden_size": bert["hidden_size"],
              "num_hidden_layers": bert["num_hidden_layers"],
              "num_attention_heads": bert["num_attention_heads"],
              "intermediate_size": bert["intermediate_size"],
              "hidden_act": _ACTIVATIONS[act],
              "hidden_dropout_prob": bert["hidden_dropout_prob"],
              "attention_probs_dropout_prob": bert["attention_probs_dropout_prob"],
              "max_position_embeddings": bert["max_position_embeddings"],
              "type_vocab_size": bert["type_vocab_size"],
              "initializer_range": bert["initializer_range"], "layer_norm_eps": 1e-12,
              "pad_token_id": 0, "position_embedding_type": "absolute",
              "torch_dtype": "float32"}
    if model.kind in (SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION):
        config["id2label"] = {str(i): label for i, label in enumerate(model.labels)}
        config["label2id"] = {label: i for i, label in enumerate(model.labels)}
    if model.kind == SEQUENCE_CLASSIFICATION:
        config["problem_type"] = ("multi_label_classification" if model.multi_label
                                  else "single_label_classification")
    return config


def tokenizer_files(model):
    """name -> text of the tokenizer's files: tokenizer.json (the Rust tokenizer
    tokenization.py runs, with [CLS]/[SEP] added as BERT adds them),
    tokenizer_config.json and special_tokens_map.json."""
    from tokenizers import processors

    from bert_toolkit.text import tokenization
    tokenizer = tokenization.FullTokenizer(model.vocab_file, model.do_lower_case,
                                           backend="rust")
    rust = tokenizer.rust_tokenizer()
    cls_id, sep_id = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    rust.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    # split_special_tokens: "[CLS]" typed in a text is split as any word, as
    # tokenization.py does, not read as the special token.
    config = dict(_SPECIAL_TOKENS, tokenizer_class="BertTokenizer",
                  do_lower_case=model.do_lower_case, strip_accents=None,
                  split_special_tokens=True,
                  tokenize_chinese_chars=True, model_max_length=model.max_seq_length,
                  clean_up_tokenization_spaces=True)
    return {"tokenizer.json": rust.to_str(),
            "tokenizer_config.json": json.dumps(config, indent=2, sort_keys=True) + "\n",
            "special_tokens_map.json": json.dumps(_SPECIAL_TOKENS, indent=2) + "\n"}


def sentence_transformers_files(model, read, hidden_size):
    """name -> text or arrays of the sentence-transformers modules: mean Pooling, then a
    Dense layer with the classifier's weights and the identity activation."""
    labels = len(model.labels)
    modules = [{"idx": 0, "name": "0", "path": "", "type":
                "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type":
                "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Dense", "type":
                "sentence_transformers.models.Dense"}]
    pooling = {"word_embedding_dimension": hidden_size, "pooling_mode_cls_token": False,
               "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
               "pooling_mode_mean_sqrt_len_tokens": False}
    dense = {"in_features": hidden_size, "out_features": labels, "bias": True,
             "activation_function": "torch.nn.modules.linear.Identity"}
    return {"modules.json": json.dumps(modules, indent=2) + "\n",
            "sentence_bert_config.json": json.dumps(
                {"max_seq_length": model.max_seq_length, "do_lower_case": False}) + "\n",
            "1_Pooling/config.json": json.dumps(pooling, indent=2) + "\n",
            "2_Dense/config.json": json.dumps(dense, indent=2) + "\n",
            "2_Dense/model.safetensors": {"linear.weight": read("output_weights"),
                                          "linear.bias": read("output_bias")},
            "labels.json": json.dumps(model.labels) + "\n"}


def write_folder(model, folder):
    """Writes the Hugging Face folder of `model` into the existing empty `folder`."""
    import tensorflow as tf
    from safetensors.numpy import save_file

    reader = tf.train.load_checkpoint(model.checkpoint)

    def read(name):
        if not reader.has_tensor(name):
            raise InputError("%s: no variable %s, which the %s head needs"
                             % (model.checkpoint, name, model.kind))
        return np.asarray(reader.get_tensor(name), dtype=np.float32)

    save_file(dict(hf_tensors(model, read)), os.path.join(folder, "model.safetensors"))
    files = {"config.json": json.dumps(hf_config(model), indent=2, sort_keys=True) + "\n"}
    files.update(tokenizer_files(model))
    if model.kind == SENTENCE_TRANSFORMERS:
        files.update(sentence_transformers_files(model, read,
                                                 model.bert_config["hidden_size"]))
    for name, content in files.items():
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(content, dict):
            save_file(content, path)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(content)
    shutil.copyfile(model.vocab_file, os.path.join(folder, hf_checkpoint.VOCAB_NAME))


def export(options):
    """export_hf.py: writes options.hf_dir from options.model_dir; returns the Model."""
    target = os.path.abspath(options.hf_dir)
    hf_checkpoint.check_output_dir(target, options.overwrite, "hf_dir")
    model = describe(options)
    hf_checkpoint.write_folder_atomically(target, options.overwrite,
                                          lambda folder: write_folder(model, folder), "hf_dir")
    return model


def run(options):
    model = export(options)
    print("wrote %s (%s%s) from %s" % (options.hf_dir, model.kind, ", %d labels" % len(
        model.labels) if model.labels else "", model.checkpoint))
    return model
