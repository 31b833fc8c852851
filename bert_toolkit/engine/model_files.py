"""The pre-trained model's files, read and cross-checked before a run writes anything.

bert_config.json against --max_seq_length, the tokenizer file (--vocab_file:
the config's family's, read by tokenization.load_tokenizer) against the
config's vocab_size and the checkpoint's casing, and init_checkpoint against
the variables the model (and its heads) will load: every mismatch is one
InputError line naming the file.

`--vocab_file` names any tokenizer file of a model folder: vocab.txt
(WordPiece: BERT, ELECTRA, DistilBERT), vocab.json or merges.txt (RoBERTa's
byte-level BPE), sentencepiece.bpe.model (XLM-R), spiece.model (ALBERT) or
spm.model (DeBERTa-v3),
or tokenizer.json. `family_of_tokenizer_file` tells the family from such a
file where no bert_config.json says it (create_pretraining_data.py).

No TensorFlow at import: create_pretraining_data.py reads its tokenizer here.
"""

import collections
import dataclasses
import json
import os

from bert_toolkit import families
from bert_toolkit.engine import export_layout
from bert_toolkit.errors import InputError
from bert_toolkit.text import subword, tokenization

ModelInputs = collections.namedtuple("ModelInputs", [
    "bert_config", "tokenizer", "init_checkpoint"])
"""bert_config: modeling.BertConfig; tokenizer: tokenization.FullTokenizer or
subword.SubwordTokenizer (None for runs that do not tokenize); init_checkpoint:
checked checkpoint prefix or None."""

# The settings files beside a tokenizer file that its tokenizer reads (casing,
# special tokens), copied with it into an export.
_SETTINGS_FILES = ("tokenizer_config.json", "special_tokens_map.json")


def load_model_inputs(options, head_shapes=None, with_tokenizer=True):
    """Reads and cross-checks bert_config, the tokenizer, lower-casing and init_checkpoint.

    head_shapes: bert_config -> {name: shape} of head variables init_checkpoint
    must hold besides the encoder's (e.g. the pre-training heads).
    """
    # TensorFlow only here: the tokenizer helpers below serve create_pretraining_data.
    from bert_toolkit.engine import checkpoints
    from bert_toolkit.model import modeling

    bert_config = modeling.BertConfig.from_json_file(options.bert_config_file)
    modeling.check_max_seq_length(bert_config, options.max_seq_length)
    tokenizer = None
    if with_tokenizer:
        if not options.vocab_file:
            raise InputError("--vocab_file is required")
        family = bert_config.family
        tokenizer = tokenization.load_tokenizer(options.vocab_file,
                                                requested_casing(options, family), family)
        if family.tokenizer == "wordpiece":
            tokenization.validate_case_matches_checkpoint(tokenizer.do_lower_case,
                                                          options.init_checkpoint)
        modeling.check_vocab_matches_config(bert_config, len(tokenizer.vocab),
                                            options.vocab_file)
    init_checkpoint = None
    if options.init_checkpoint:
        expected = dict(modeling.bert_variable_shapes(bert_config),
                        **(head_shapes(bert_config) if head_shapes else {}))
        init_checkpoint = checkpoints.check_checkpoint(options.init_checkpoint, expected)
    return ModelInputs(bert_config, tokenizer, init_checkpoint)


# -- casing --------------------------------------------------------------------

def requested_casing(options, family):
    """The do_lower_case a tokenizer of `family` is built with (tokenization.
    load_tokenizer), from options' field.

    WordPiece: the flag's value (None, "not given": tokenizer_config.json's
    beside the vocabulary, else True). The others take their casing from the
    tokenizer file, so only a value the user gave is passed on (the tokenizer
    reports one that contradicts the file); a value equal to the field's
    default is taken as not given, since the two cannot be told apart (while
    the default is True, --do_lower_case can only contradict a lower-casing file
    by being false).
    """
    value = options.do_lower_case
    if family.tokenizer == "wordpiece" or value != _field_default(options, "do_lower_case"):
        return value
    return None


def _field_default(options, name):
    """The default of options' field `name`."""
    return next(field.default for field in dataclasses.fields(options) if field.name == name)


# -- which tokenizer a file holds ------------------------------------------------

def family_of_tokenizer_file(vocab_file, model_family=None):
    """The families.Family whose tokenizer `vocab_file` is.

    model_family (a --model_family flag) wins; else the model folder's
    bert_config.json (`model_family`) or config.json (`model_type`) beside the
    file itself: spiece.model -> ALBERT, sentencepiece.bpe.model -> XLM-R,
    spm.model -> DeBERTa-v3 (deberta-v2), vocab.json / merges.txt -> RoBERTa,
    tokenizer.json -> by its model and special tokens (BPE with [CLS]: ModernBERT),
    any other name -> BERT (WordPiece's vocab.txt, however
    named: ELECTRA and DistilBERT tokenize alike). InputError when nothing
    tells (another .model, a tokenizer.json of another model).
    """
    if model_family:
        return families.get(model_family, "--model_family")
    folder = os.path.dirname(os.path.abspath(vocab_file))
    for config_name, key, lookup in (("bert_config.json", "model_family", families.get),
                                     ("config.json", "model_type",
                                      families.by_hf_model_type)):
        value = _json_field(os.path.join(folder, config_name), key)
        if value is not None:
            return lookup(value, os.path.join(folder, config_name))
    source = subword.source_kind(vocab_file)
    family = {"bpe": "roberta", "wordpiece": "bert"}.get(source)
    if source == "spm":
        family = next((family for suffix, family in _SPM_FAMILIES
                       if os.path.basename(vocab_file).endswith(suffix)), None)
    elif source == subword.TOKENIZER_JSON and os.path.isfile(vocab_file):
        model_type, uses_cls = _tokenizer_json(vocab_file)
        # A byte-level BPE with BERT's [CLS] is ModernBERT's (OLMo's BPE with BERT's
        # specials); mmBERT's Gemma tokenizer has none: its config.json tells.
        family = {"WordPiece": "bert", "BPE": "modernbert" if uses_cls else "roberta",
                  "Unigram": "albert" if uses_cls else "xlm-roberta"}.get(model_type)
    if family is None:
        raise InputError("--vocab_file=%s: cannot tell the model family from this file; add "
                         "--model_family (one of %s)"
                         % (vocab_file, ", ".join(families.FAMILIES)))
    return families.get(family)


# The SentencePiece files' names as the Hub's folders have them.
_SPM_FAMILIES = (("sentencepiece.bpe.model", "xlm-roberta"), ("spiece.model", "albert"),
                 ("spm.model", "deberta-v2"))


def _json_field(path, key):
    """json[key] of the file at `path`, or None (no such file, not JSON, no key)."""
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None
    return value.get(key) if isinstance(value, dict) else None


def _tokenizer_json(path):
    """(its model's type, whether its special tokens are BERT's [CLS]) of a
    tokenizer.json; InputError if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            tokenizer = json.load(f)
        model_type = tokenizer["model"]["type"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError("--vocab_file=%s: not a readable tokenizer.json (%s)" % (path, e))
    specials = json.dumps([tokenizer.get("post_processor"), tokenizer.get("added_tokens")])
    return model_type, "[CLS]" in specials


def tokenizer_files(tokenizer):
    """{name: path} of the files `tokenizer` is read from, which a run's feature cache
    depends on and an export carries: WordPiece's vocab.txt (under that name); for
    the others its source files and the other forms and settings files beside
    them (tokenizer.json, vocab.json + merges.txt, tokenizer_config.json, ...),
    under their own names."""
    if tokenizer.family_tokenizer == "wordpiece":
        return {export_layout.VOCAB_FILE: tokenizer.vocab_file}
    folder = os.path.dirname(tokenizer.vocab_file)
    settings = [os.path.join(folder, name) for name in _SETTINGS_FILES
                if os.path.isfile(os.path.join(folder, name))]
    return {os.path.basename(path): path for path in list(tokenizer.files()) + settings}
