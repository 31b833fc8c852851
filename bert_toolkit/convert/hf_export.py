"""A model trained here handed back in Hugging Face's layout, loadable with no code of ours.

    python export_hf.py --model_dir=RUN_OUTPUT_DIR --hf_dir=NEW_FOLDER [--checkpoint=...]

The run's output_dir says what the model is (serving_config.json and
run_options.json, written when it trained: the task, labels, pooling,
tokenizer settings); a folder of Google's layout (bert_config.json, the
tokenizer files, bert_model.ckpt) or a pre-training run is read from its
checkpoint's variables. The checkpoint is --checkpoint, else the best one
evaluation during training kept, else the newest. bert_config.json's
`model_family` picks the family's stock classes (Bert*, Roberta*, XLMRoberta*,
Electra*, DistilBert*, Albert*; hf_families.py has their names). What is written:

    task                         Hugging Face class (config.json architectures)
    classifier, re-ranker        <Family>ForSequenceClassification (id2label, label2id;
                                 multi-label: problem_type multi_label_classification);
                                 our pooler is RoBERTa's and ELECTRA's classifier.dense,
                                 DistilBERT's pre_classifier, BERT's and ALBERT's pooler
    classifier with --pooling=mean  sentence-transformers: the encoder, a mean Pooling
                                 module and a Dense module holding the classifier
                                 (identity activation), so SentenceTransformer(path)
                                 .encode(texts) returns its logits; the stock classes
                                 pool the first token and would compute something else
    token labelling              <Family>ForTokenClassification
    SQuAD                        <Family>ForQuestionAnswering
    pre-training                 BertForPreTraining, AlbertForPreTraining (masked LM and
                                 the two-way sentence head), <Family>ForMaskedLM for
                                 the others and an ALBERT without its sentence head (the
                                 MLM decoder tied to the word embeddings)
    --encoder_only, or a model without a head   <Family>Model

with config.json (the family's fields and names: DistilBERT's dim, n_layers...;
the activation named as transformers names it: our gelu_exact is its "gelu",
our tanh gelu its "gelu_new"), model.safetensors (written with safetensors'
numpy API: no torch here) and the tokenizer. WordPiece families (BERT, ELECTRA,
DistilBERT) get vocab.txt and tokenizer.json (the same Rust WordPiece
tokenization.py runs: identical ids, Google's 200-character word limit); the
others get the run's tokenizer files copied unchanged (tokenizer.json, vocab.json
+ merges.txt, the SentencePiece model under the name the family's class looks
for). Both with tokenizer_config.json (the class, the max length, casing) and
special_tokens_map.json.

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

from bert_toolkit import families
from bert_toolkit.convert import hf_checkpoint, hf_families
from bert_toolkit.errors import InputError

# What the model is (its class is the family's prefix and this: "RobertaForMaskedLM").
ENCODER = "Model"
SEQUENCE_CLASSIFICATION = "ForSequenceClassification"
TOKEN_CLASSIFICATION = "ForTokenClassification"
QUESTION_ANSWERING = "ForQuestionAnswering"
PRETRAINING = "ForPreTraining"  # masked LM + the two-way sentence head (BERT, ALBERT)
MASKED_LM = "ForMaskedLM"
SENTENCE_TRANSFORMERS = "sentence-transformers"

# Our hidden_act -> transformers' name of the same function (the first of its spellings).
_ACTIVATIONS = {}
for _hf_name, _ours in hf_checkpoint.HF_ACTIVATIONS.items():
    _ACTIVATIONS.setdefault(_ours, _hf_name)
_SPECIAL_TOKENS = hf_families.SPECIAL_TOKENS["bert"]
_SQUAD_WEIGHTS = "cls/squad/output_weights"
_MLM_BIAS = "cls/predictions/output_bias"
_NSP_WEIGHTS = "cls/seq_relationship/output_weights"
_POOLER = ("bert/pooler/dense/kernel", "bert/pooler/dense/bias")

Model = collections.namedtuple("Model", [
    "checkpoint", "bert_config", "vocab_file", "do_lower_case", "max_seq_length", "kind",
    "labels", "multi_label", "role", "family", "variables"])
"""What is exported: the checkpoint prefix, bert_config (dict), the vocabulary (any
tokenizer file of the family), the tokenizer settings, the Hugging Face class
(kind: "RobertaForSequenceClassification", or "sentence-transformers"), the labels
of a head, the role (ENCODER, SEQUENCE_CLASSIFICATION, ...), the family's name and
the checkpoint's variable names."""


def class_name(family_name, role):
    """The transformers class of `role` for a family: ("roberta", MASKED_LM) ->
    "RobertaForMaskedLM"; the encoder of a sentence-transformers folder is the Model."""
    prefix = hf_families.naming(family_name).class_prefix
    return prefix + (ENCODER if role == SENTENCE_TRANSFORMERS else role)


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


def _role(serving_config, variable_names, encoder_only, model_dir, naming):
    """What the model is (see the module docstring)."""
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
        if naming.masked_lm_class == PRETRAINING and (
                _NSP_WEIGHTS in variable_names or naming.family.name == "bert"):
            return PRETRAINING
        return MASKED_LM
    if "output_weights" in variable_names:
        raise InputError("--model_dir=%s: its checkpoint has a task head but no record of "
                         "the task (serving_config.json, written by a training run of this "
                         "version); export the encoder alone with --encoder_only" % model_dir)
    return ENCODER


def _default_vocab_file(folder, family):
    """The tokenizer file of a Google-layout folder: vocab.txt, or for the BPE and
    SentencePiece families the one hf_families.preferred_vocab_file picks."""
    if family.tokenizer == "wordpiece":
        return hf_checkpoint.VOCAB_NAME
    if not os.path.isdir(folder):
        return None
    return hf_families.preferred_vocab_file(hf_checkpoint.tokenizer_file_names(folder))


def _vocab_size(vocab_file, family):
    """Tokens of the run's vocabulary: vocab.txt's lines, or the subword tokenizer's."""
    if family.tokenizer == "wordpiece":
        return hf_checkpoint.count_vocab_tokens(vocab_file)
    from bert_toolkit.text import tokenization
    return len(tokenization.load_tokenizer(vocab_file, None, family).vocab)


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
        if not value and default_file and os.path.isfile(os.path.join(folder, default_file)):
            value = os.path.join(folder, default_file)
        if not value:
            raise InputError("--%s is required: %s records no %s" % (
                name, model_dir, default_file or "tokenizer file"))
        return value

    config_file = setting("bert_config_file", hf_checkpoint.BERT_CONFIG_NAME)
    bert_config = modeling.BertConfig.from_json_file(config_file)
    family = bert_config.family
    vocab_file = setting("vocab_file", _default_vocab_file(folder, family))
    modeling.check_vocab_matches_config(bert_config, _vocab_size(vocab_file, family),
                                        vocab_file)
    expected = modeling.bert_variable_shapes(bert_config)
    if not any(name in variables for name in _POOLER):
        # A converted model whose source had no pooler: the classes that have one
        # initialise it, as transformers does for a checkpoint without it.
        expected = {n: s for n, s in expected.items() if n not in _POOLER}
    modeling.check_checkpoint_compatible(expected, checkpoint)
    do_lower_case = options.do_lower_case
    if do_lower_case is None:
        do_lower_case = serving_config.get("do_lower_case", recorded.get("do_lower_case", True))
    naming = hf_families.naming(family.name)
    role = _role(serving_config, variables, options.encoder_only, model_dir, naming)
    kind = SENTENCE_TRANSFORMERS if role == SENTENCE_TRANSFORMERS else class_name(
        family.name, role)
    return Model(checkpoint, bert_config.to_dict(), vocab_file, bool(do_lower_case),
                 serving_config.get("max_seq_length", recorded.get(
                     "max_seq_length", bert_config.max_sequence_length)),
                 kind, list(serving_config.get("labels") or []),
                 bool(serving_config.get("multi_label")), role, family.name,
                 frozenset(variables))


# -- tensors ----------------------------------------------------------------------------

def _has_base_pooler(naming, role):
    """Whether the role's class holds the base model's pooler (RobertaForMaskedLM, the
    token and span classes have none; RoBERTa's and ELECTRA's classifiers have their
    own dense layer instead)."""
    if naming.pooler is None:
        return False
    if role == SEQUENCE_CLASSIFICATION:
        return naming.classifier is None or naming.classifier.dense is None
    return role in (ENCODER, SENTENCE_TRANSFORMERS, PRETRAINING)


def hf_tensors(model, read):
    """Hugging Face name -> float32 array of the model's tensors (the encoder's names
    prefixed with the base model's attribute, "bert." etc., for the For* classes);
    read(name) reads a variable."""
    naming = hf_families.naming(model.bert_config.get("model_family"))
    role = model.role
    prefix = "" if role in (ENCODER, SENTENCE_TRANSFORMERS) else naming.prefix
    has_pooler = all(name in model.variables for name in _POOLER)
    tensors = collections.OrderedDict()
    for spec in hf_checkpoint.tensor_specs(model.bert_config):
        if spec.group in (hf_checkpoint.MLM_HEAD, hf_checkpoint.NSP_HEAD):
            if role == PRETRAINING or (role == MASKED_LM
                                       and spec.group == hf_checkpoint.MLM_HEAD):
                tensors[spec.hf_key] = _hf_layout(read(spec.name), spec.transpose)
            continue
        if spec.group == hf_checkpoint.POOLER and not (
                _has_base_pooler(naming, role) and has_pooler):
            continue  # the class has none, or the checkpoint (a converted one) none
        tensors[prefix + spec.hf_key] = _hf_layout(read(spec.name), spec.transpose)
    if naming.family.pre_norm:
        tensors.update(_pre_norm_head_tensors(role, read))
    elif role == SEQUENCE_CLASSIFICATION:
        classifier = naming.classifier or hf_families.ClassifierNames(None, "classifier")
        if classifier.dense:
            tensors[classifier.dense + ".weight"] = _hf_layout(read(_POOLER[0]), True)
            tensors[classifier.dense + ".bias"] = read(_POOLER[1])
        # Our [num_labels, hidden] is a Linear's [out, in] as it stands.
        tensors[classifier.out + ".weight"] = read("output_weights")
        tensors[classifier.out + ".bias"] = read("output_bias")
    elif role == TOKEN_CLASSIFICATION:
        tensors["classifier.weight"] = read("output_weights")
        tensors["classifier.bias"] = read("output_bias")
    elif role == QUESTION_ANSWERING:
        tensors["qa_outputs.weight"] = read(_SQUAD_WEIGHTS)
        tensors["qa_outputs.bias"] = read("cls/squad/output_bias")
    return tensors


def _pre_norm_head_tensors(role, read):
    """ModernBERT's task heads: every ModernBertFor...Classification and
    ...QuestionAnswering puts `head` (our pooler's dense kernel and norm, which the
    token and span heads here apply to every token) before `classifier`."""
    outputs = {SEQUENCE_CLASSIFICATION: "output_", TOKEN_CLASSIFICATION: "output_",
               QUESTION_ANSWERING: "cls/squad/output_"}.get(role)
    if outputs is None:
        return {}
    return {"head.dense.weight": _hf_layout(read("bert/pooler/dense/kernel"), True),
            "head.norm.weight": read("bert/pooler/LayerNorm/gamma"),
            # Our [labels, hidden] is a Linear's [out, in] as it stands.
            "classifier.weight": read(outputs + "weights"),
            "classifier.bias": read(outputs + "bias")}


def _special_token_ids(model):
    """ModernBERT's config.json token ids, from the run's tokenizer (the class defaults
    are ModernBERT-base's 50281..., beyond a smaller vocabulary)."""
    from bert_toolkit.text import tokenization
    tokenizer = tokenization.load_tokenizer(model.vocab_file, None, families.get(model.family))
    names, vocab = tokenizer.special_tokens, tokenizer.vocab
    return {"pad_token_id": vocab[names.pad], "cls_token_id": vocab[names.cls],
            "bos_token_id": vocab[names.cls], "sep_token_id": vocab[names.sep],
            "eos_token_id": vocab[names.sep]}


def _hf_layout(array, transpose):
    array = np.asarray(array, dtype=np.float32)
    return np.ascontiguousarray(array.T) if transpose else array


# -- files -------------------------------------------------------------------------------

def _labels_and_problem(config, model):
    if model.role in (SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION):
        config["id2label"] = {str(i): label for i, label in enumerate(model.labels)}
        config["label2id"] = {label: i for i, label in enumerate(model.labels)}
    if model.role == SEQUENCE_CLASSIFICATION:
        config["problem_type"] = ("multi_label_classification" if model.multi_label
                                  else "single_label_classification")
    return config


def hf_config(model):
    """config.json for the family's config class and the model's class."""
    bert = model.bert_config
    act = bert["hidden_act"]
    if act not in _ACTIVATIONS:
        raise InputError("hidden_act %r has no Hugging Face name" % act)
    family = families.get(model.family)
    architectures = [class_name(family.name, model.role)]
    if family.name != "bert":
        config = hf_families.hf_config_fields(bert, family, _ACTIVATIONS[act])
        config["architectures"] = architectures
        if family.name == "modernbert":
            config.update(_special_token_ids(model))
        return _labels_and_problem(config, model)
    config = {"model_type": "bert", "architectures": architectures,
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
    return _labels_and_problem(config, model)


def _json_text(value, **settings):
    return json.dumps(value, **settings) + "\n"


def tokenizer_files(model):
    """name -> text of a WordPiece family's tokenizer files: tokenizer.json (the Rust
    tokenizer tokenization.py runs, with [CLS]/[SEP] added as BERT adds them),
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
    config = dict(_SPECIAL_TOKENS,
                  tokenizer_class=hf_families.TOKENIZER_CLASSES[model.family],
                  do_lower_case=model.do_lower_case, strip_accents=None,
                  split_special_tokens=True,
                  tokenize_chinese_chars=True, model_max_length=model.max_seq_length,
                  clean_up_tokenization_spaces=True)
    return {"tokenizer.json": rust.to_str(),
            "tokenizer_config.json": _json_text(config, indent=2, sort_keys=True),
            "special_tokens_map.json": _json_text(_SPECIAL_TOKENS, indent=2)}


# tokenizer_config.json keys that describe the machine a folder was saved on, not the
# tokenizer: left out of an exported folder.
_LOCAL_TOKENIZER_KEYS = ("is_local", "local_files_only", "name_or_path", "tokenizer_file",
                         "auto_map", "vocab_file", "merges_file")


# The name each family's tokenizer class looks for its SentencePiece model under
# (its VOCAB_FILES_NAMES); ALBERT's spiece.model for the others.
_SPM_NAMES = {"xlm-roberta": "sentencepiece.bpe.model", "deberta-v2": "spm.model"}


def subword_tokenizer_files(model):
    """(name -> text, name -> source path to copy) of a BPE or SentencePiece family's
    tokenizer: the files of the run's tokenizer copied unchanged (a .model under the
    name the family's tokenizer class looks for), tokenizer.json made from them when
    the folder has none, tokenizer_config.json (the class, the run's max length, the
    source's own settings) and special_tokens_map.json."""
    from bert_toolkit.text import subword, tokenization
    family = families.get(model.family)
    tokenizer = tokenization.load_tokenizer(model.vocab_file, None, family)
    copies = {}
    for path in tokenizer.files():
        name = os.path.basename(path)
        if name.endswith(".model"):
            name = _SPM_NAMES.get(family.name, "spiece.model")
        copies.setdefault(name, path)
    texts = {}
    if "tokenizer.json" not in copies:
        texts["tokenizer.json"] = tokenizer.rust_tokenizer().to_str()
    config = {k: v for k, v in subword.read_tokenizer_config(model.vocab_file).items()
              if k not in _LOCAL_TOKENIZER_KEYS}
    specials = dict(hf_families.SPECIAL_TOKENS[family.name])
    names = tokenizer.special_tokens
    specials.update(cls_token=names.cls, sep_token=names.sep, pad_token=names.pad,
                    unk_token=names.unk, mask_token=names.mask)
    config.update(specials)
    # split_special_tokens: a "<s>" typed in a text is split as any characters, as
    # subword.py tokenizes it.
    config.update(tokenizer_class=hf_families.TOKENIZER_CLASSES[family.name],
                  model_max_length=model.max_seq_length, split_special_tokens=True)
    if family.name == "albert":
        config["do_lower_case"] = tokenizer.do_lower_case
    if family.name == "modernbert":
        # No token types: transformers' fast tokenizer would otherwise hand the model
        # token_type_ids, which ModernBERT's classes do not take.
        config["model_input_names"] = ["input_ids", "attention_mask"]
    if family.has_token_types and family.pair_layout == "bert":
        # ALBERT's second text is segment 1 here, as in Google's ALBERT; transformers
        # 5's AlbertTokenizer returns no token_type_ids unless told to, and its model
        # would then see segment 0 throughout a pair.
        config["model_input_names"] = ["input_ids", "token_type_ids", "attention_mask"]
    texts["tokenizer_config.json"] = _json_text(config, indent=2, sort_keys=True)
    texts["special_tokens_map.json"] = _json_text(specials, indent=2, sort_keys=True)
    return texts, copies


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
    copies = {}
    if families.get(model.family).tokenizer == "wordpiece":
        files.update(tokenizer_files(model))
        copies[hf_checkpoint.VOCAB_NAME] = model.vocab_file
    else:
        texts, copies = subword_tokenizer_files(model)
        files.update(texts)
    if model.role == SENTENCE_TRANSFORMERS:
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
    for name, source in copies.items():
        shutil.copyfile(source, os.path.join(folder, name))


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
