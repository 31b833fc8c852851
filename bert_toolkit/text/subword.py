"""Byte-level BPE and SentencePiece tokenizers: RoBERTa, XLM-RoBERTa and ALBERT.

`SubwordTokenizer(vocab_file, family, do_lower_case)` has the interface of
tokenization.FullTokenizer (vocab, inv_vocab, layout, unk_token, mask_token,
encode_batch, tokenize_batch, encode_words, encode_pairs, ...), so every task
runs either; it adds `encode_with_offsets` (character spans, for SQuAD),
`rust_tokenizer()` (for tokenizer.json on export) and `files()`.

The work is done by the Rust `tokenizers` library. `vocab_file` may name any of
the tokenizer files a Hugging Face folder of the family has:

- tokenizer.json: its normaliser, pre-tokenizer and model as they are (the
  special tokens around a text come from the family's Layout, not from its
  post-processor);
- vocab.json + merges.txt (either name; the other must be beside it): byte-level
  BPE as roberta-base's: the ByteLevel pre-tokenizer without a prefix space, and
  offsets trimmed of the spaces a token carries;
- a SentencePiece `*.model` (sentencepiece.bpe.model, spiece.model): a unigram
  model of the protobuf's pieces and scores, read by this module (no
  sentencepiece package needed). XLM-R's ids are fairseq's: <s> <pad> </s>
  <unk> first, the spm pieces after spm's own three shifted by one, <mask> last.
  The text is normalised by the model's precompiled character map, after
  ALBERT's own steps (`` and '' to ", NFKD and accents stripped unless
  tokenizer_config.json keeps them, lower-casing unless it says
  do_lower_case false); then each whitespace-separated word gets its "▁".
  DeBERTa-v3's spm.model keeps spm's ids ([PAD] [CLS] [SEP] [UNK] first) with
  [MASK] appended, and DebertaV2Tokenizer's own pipeline (`_deberta_pipeline`:
  no charsmap). These are the pipelines transformers 5 builds for these
  families, so the ids equal a tokenizer.json made by it from the same file.

Casing belongs to the file for these families (see `SubwordTokenizer`).

Texts are text: a special token written in a text ("<s>", "[CLS]") is not
matched as that token but tokenized by the model like any other characters,
as tokenization.py does for BERT (transformers' `split_special_tokens=True`,
which the export writes; a unigram model may still pick a special piece that
is in its vocabulary, as transformers' does). The tokens a tokenizer.json adds
that are not special (a user's additions) are kept whole, as transformers does.
"""

import collections
import json
import os

from bert_toolkit import errors, families
from bert_toolkit.text import sentencepiece_model, tokenization

SPIECE_UNDERLINE = "\u2581"

SpecialTokens = collections.namedtuple("SpecialTokens", ["cls", "sep", "pad", "unk", "mask"])

# A family's special tokens by its pair layout (families.Family.pair_layout);
# tokenizer_config.json beside the file may rename them.
_SPECIALS = {
    "roberta": SpecialTokens("<s>", "</s>", "<pad>", "<unk>", "<mask>"),
    "bert": SpecialTokens("[CLS]", "[SEP]", "<pad>", "<unk>", "[MASK]"),
}

# How a family's SentencePiece model becomes ids and what it does to a text
# first (the rest are plain: the spm ids, the charsmap only).
_FAIRSEQ_IDS = ("xlm-roberta",)
_ALBERT_NORMALIZER = ("albert",)
_DEBERTA_PIPELINE = ("deberta-v2",)

TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
BPE_VOCAB, BPE_MERGES = "vocab.json", "merges.txt"
_SPM_SUFFIX = ".model"

# tokenizer.json components under which a text's tokens before an ASCII space
# that follows a non-space character do not depend on what comes after it
# (see `_text_head`).
_CUT_SAFE_NORMALIZERS = ("Sequence", "NFC", "NFD", "NFKC", "NFKD", "Lowercase",
                         "StripAccents", "Strip", "Precompiled", "BertNormalizer",
                         "Prepend", "Replace")
_CUT_SAFE_REGEXES = (" {2,}", "\\A +| +\\z", "\\A" + SPIECE_UNDERLINE, " +")
_CUT_SAFE_PRE_TOKENIZERS = ("Sequence", "ByteLevel", "Metaspace", "WhitespaceSplit",
                            "Whitespace", "BertPreTokenizer")


# -- files ---------------------------------------------------------------------


def exists(path):
    """Whether `path` is a file (gs:// and other remote paths through TensorFlow)."""
    if "://" in str(path):
        import tensorflow as tf
        return tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path)
    return os.path.isfile(path)


def _read_bytes(path, expected):
    """The content of `path`; InputError saying `expected` when it is missing."""
    if not exists(path):
        raise errors.InputError("vocab file %s: not found; expected %s" % (path, expected))
    if "://" in str(path):
        import tensorflow as tf
        with tf.io.gfile.GFile(path, "rb") as reader:
            return reader.read()
    with open(path, "rb") as reader:
        return reader.read()


def _read_text(path, expected):
    """The UTF-8 text of `path`; InputError naming it when it is not UTF-8."""
    data = _read_bytes(path, expected)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise errors.InputError("vocab file %s: not UTF-8; expected %s" % (path, expected))


def _read_json(path, expected):
    """The JSON value in `path`; InputError naming it when it does not parse."""
    text = _read_text(path, expected)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise errors.InputError("vocab file %s: not JSON (%s); expected %s"
                                % (path, str(exc).splitlines()[0], expected))


def _sibling(path, name):
    """`name` in the folder of `path`."""
    return os.path.join(os.path.dirname(path), name)


def _bpe_pair(path):
    """(vocab.json, merges.txt) for either of the two named: the same prefix
    (roberta-base-vocab.json, roberta-base-merges.txt) or the plain names."""
    base = os.path.basename(path)
    if base.endswith(BPE_MERGES):
        return _sibling(path, base[:-len(BPE_MERGES)] + BPE_VOCAB), path
    return path, _sibling(path, base[:-len(BPE_VOCAB)] + BPE_MERGES)


# source_kind's kinds, as a message names them.
KIND_NAMES = {"tokenizer.json": "tokenizer.json", "bpe": "byte-level BPE",
              "spm": "SentencePiece", "wordpiece": "WordPiece"}


def source_kind(vocab_file):
    """What kind of tokenizer file `vocab_file` names, by its name: "tokenizer.json",
    "bpe" (vocab.json or merges.txt), "spm" (*.model), "wordpiece" (vocab.txt and
    any other name)."""
    base = os.path.basename(str(vocab_file))
    if base.endswith(TOKENIZER_JSON):
        return "tokenizer.json"
    if base.endswith(BPE_VOCAB) or base.endswith(BPE_MERGES):
        return "bpe"
    if base.endswith(_SPM_SUFFIX):
        return "spm"
    return "wordpiece"


def read_tokenizer_config(vocab_file):
    """tokenizer_config.json beside `vocab_file` as a dict ({} when there is none)."""
    path = _sibling(vocab_file, TOKENIZER_CONFIG)
    if not exists(path):
        return {}
    config = _read_json(path, "a JSON object of tokenizer settings")
    if not isinstance(config, dict):
        raise errors.InputError("vocab file %s: not a JSON object; expected the "
                                "tokenizer's settings" % path)
    return config


def _token_name(value):
    """A special token's string in tokenizer_config.json: "x" or {"content": "x"}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


# Families whose special tokens differ from their layout's (tokenizer_config.json
# still renames them). ModernBERT's tokenizer is BPE with BERT's [CLS] ... [SEP].
_FAMILY_SPECIALS = {
    "modernbert": SpecialTokens("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"),
    "deberta-v2": SpecialTokens("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"),
}
# tokenizer_config.json keys a family's cls and sep fall back to: mmBERT's Gemma
# tokenizer has the ModernBERT graph and may name only its bos and eos tokens.
_CLS_SEP_FALLBACKS = {"modernbert": ("bos_token", "eos_token")}


def _special_tokens(family, config):
    """The family's SpecialTokens, renamed by tokenizer_config.json's *_token keys."""
    default = _FAMILY_SPECIALS.get(family.name, _SPECIALS[family.pair_layout])
    fallbacks = _CLS_SEP_FALLBACKS.get(family.name)
    if fallbacks:
        names = [_token_name(config.get(key)) for key in fallbacks]
        default = default._replace(cls=names[0] or default.cls, sep=names[1] or default.sep)
    return SpecialTokens(*[_token_name(config.get(field + "_token")) or name
                           for field, name in zip(SpecialTokens._fields, default)])


# -- SentencePiece model files -------------------------------------------------


def read_spm_model(path):
    """The SpmModel in `path`; one InputError line when it is not a unigram model."""
    expected = "a SentencePiece unigram .model file"
    data = _read_bytes(path, expected)
    try:
        model = sentencepiece_model.parse(data)
    except ValueError as exc:
        raise errors.InputError("vocab file %s: not a SentencePiece model (%s); expected %s"
                                % (path, exc, expected))
    model_type = model.trainer["model_type"]
    if model_type == sentencepiece_model.BPE:
        raise errors.InputError(
            "vocab file %s: a SentencePiece BPE model, which is not read from the .model "
            "file; pass the tokenizer.json of its folder as --vocab_file" % path)
    if model_type != sentencepiece_model.UNIGRAM:
        kind = sentencepiece_model.MODEL_TYPES.get(model_type, str(model_type))
        raise errors.InputError("vocab file %s: a SentencePiece %s model; expected %s"
                                % (path, kind, expected))
    return model


def _spm_vocab(model, family, specials, path):
    """([(piece, score)], unk id) of the model's pieces as the family numbers them."""
    pieces = model.pieces
    if family.name in _FAIRSEQ_IDS:
        # fairseq's dictionary put its own four specials first and then the spm
        # pieces after spm's <unk> <s> </s>, so piece i >= 3 has id i + 1.
        if len(pieces) < 3 or pieces[0]["type"] != sentencepiece_model.UNKNOWN:
            raise errors.InputError(
                "vocab file %s: expected XLM-R's SentencePiece layout (<unk> <s> </s> as "
                "pieces 0-2)" % path)
        vocab = [(specials.cls, 0.0), (specials.pad, 0.0), (specials.sep, 0.0),
                 (specials.unk, 0.0)]
        vocab += [(piece["piece"], piece["score"]) for piece in pieces[3:]]
        vocab.append((specials.mask, 0.0))
        return vocab, 3
    vocab = [(piece["piece"], piece["score"]) for piece in pieces]
    if family.name in _DEBERTA_PIPELINE and specials.mask not in dict(vocab):
        # DeBERTa-v3's spm.model has no [MASK]: transformers adds it after the pieces
        # (id 128000 of microsoft/deberta-v3-base).
        vocab.append((specials.mask, 0.0))
    return vocab, model.trainer["unk_id"]


def _spm_lower_cases(model, family, config):
    """Whether the family's pipeline for this model lower-cases: ALBERT's does unless
    tokenizer_config.json says do_lower_case false; any model whose normalisation
    rule is a case-folding one (nmt_nfkc_cf) does."""
    if family.name in _ALBERT_NORMALIZER:
        return bool(config.get("do_lower_case", True))
    if family.name in _DEBERTA_PIPELINE:
        return bool(config.get("do_lower_case", False))
    return model.normalizer["name"].endswith("_cf")


def _deberta_pipeline(tokenizer, lower, config):
    """DeBERTa-v2/v3's text pipeline as transformers 5's DebertaV2Tokenizer builds it
    around the spm pieces: lower-casing first when tokenizer_config.json says
    do_lower_case, whitespace runs and tab / newline / carriage return to one
    space, NFC, trailing spaces stripped (no precompiled charsmap: transformers 5
    leaves the model's out); punctuation split off when it says split_by_punct; then
    every word with its "▁"."""
    from tokenizers import Regex, decoders, normalizers, pre_tokenizers
    steps = [normalizers.Lowercase()] if lower else []
    steps += [normalizers.Replace(Regex(r"\s{2,}|[\n\r\t]"), " "), normalizers.NFC(),
              normalizers.Strip(left=False, right=True)]
    tokenizer.normalizer = normalizers.Sequence(steps)
    words = [pre_tokenizers.Punctuation(behavior="isolated")] \
        if config.get("split_by_punct", False) else []
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        words + [_metaspace(pre_tokenizers.Metaspace)])
    tokenizer.decoder = _metaspace(decoders.Metaspace)
    return tokenizer


def _build_spm(model, family, specials, config, path):
    """A tokenizers.Tokenizer (no post-processor, no added tokens) of a unigram model
    as transformers 5 builds the family's; plus whether it lower-cases."""
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import Unigram
    vocab, unk_id = _spm_vocab(model, family, specials, path)
    tokenizer = Tokenizer(Unigram(vocab, unk_id))
    if family.name in _DEBERTA_PIPELINE:
        lower = _spm_lower_cases(model, family, config)
        return _deberta_pipeline(tokenizer, lower, config), lower
    steps = []
    lower = _spm_lower_cases(model, family, config)
    if family.name in _ALBERT_NORMALIZER:
        steps += [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
        if not config.get("keep_accents", False):
            steps += [normalizers.NFKD(), normalizers.StripAccents()]
        if lower:
            steps.append(normalizers.Lowercase())
    charsmap = model.normalizer["precompiled_charsmap"]
    if charsmap:
        steps.append(normalizers.Precompiled(charsmap))
    if steps:
        tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(), _metaspace(pre_tokenizers.Metaspace)])
    tokenizer.decoder = _metaspace(decoders.Metaspace)
    return tokenizer, lower


def _metaspace(kind):
    """A Metaspace pre-tokenizer or decoder that gives every word its "▁" (SentencePiece's
    dummy prefix): prepend_scheme "always", which tokenizers < 0.19 spells
    add_prefix_space=True."""
    try:
        return kind(replacement=SPIECE_UNDERLINE, prepend_scheme="always")
    except TypeError:
        return kind(replacement=SPIECE_UNDERLINE, add_prefix_space=True)


# -- byte-level BPE files ------------------------------------------------------


def read_bpe_files(vocab_path, merges_path):
    """(vocab dict, merges [(a, b)]) of a vocab.json and its merges.txt."""
    vocab = _read_json(vocab_path, "a JSON object token -> id (with merges.txt beside it)")
    if not isinstance(vocab, dict) or not all(
            isinstance(token, str) and isinstance(index, int) and not isinstance(index, bool)
            for token, index in vocab.items()):
        raise errors.InputError("vocab file %s: expected a JSON object token -> id"
                                % vocab_path)
    text = _read_text(merges_path, "merges.txt beside %s (byte-level BPE needs both)"
                      % os.path.basename(vocab_path))
    merges = []
    for number, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        if not line or (number == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not all(parts):
            raise errors.input_error(merges_path, number,
                                     "expected two tokens separated by one space")
        merges.append((parts[0], parts[1]))
    return vocab, merges


def _build_bpe(vocab, merges, path):
    """roberta-base's byte-level BPE (no post-processor, no added tokens)."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE
    try:
        model = BPE(vocab=vocab, merges=merges, continuing_subword_prefix="",
                    end_of_word_suffix="", fuse_unk=False)
    except Exception as exc:  # the Rust error says which merge is not in the vocabulary
        raise errors.InputError("vocab file %s: not a byte-level BPE with its merges.txt "
                                "(%s)" % (path, str(exc).splitlines()[0]))
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


# -- tokenizer.json ------------------------------------------------------------


def _json_components(node):
    """Yields every component dict of a tokenizer.json normaliser or pre-tokenizer,
    the members of a Sequence included."""
    if isinstance(node, dict):
        yield node
        for member in node.get("normalizers") or node.get("pretokenizers") or ():
            yield from _json_components(member)


def _json_lower_cases(spec):
    """Whether a tokenizer.json's normaliser lower-cases."""
    return any(node.get("type") == "Lowercase"
               or (node.get("type") == "BertNormalizer" and node.get("lowercase"))
               for node in _json_components(spec.get("normalizer")))


def _json_prefix_space(spec):
    """Whether a tokenizer.json's ByteLevel pre-tokenizer adds a space before a text."""
    return any(node.get("type") == "ByteLevel" and node.get("add_prefix_space", False)
               for node in _json_components(spec.get("pre_tokenizer")))


def _safe_replace(node):
    """Whether a Replace normaliser cannot join characters across a space."""
    pattern = node.get("pattern") or {}
    if "String" in pattern:
        text = pattern["String"]
        return not text.strip() or not any(char.isspace() for char in text)
    return pattern.get("Regex") in _CUT_SAFE_REGEXES


def _json_cut_safe(spec):
    """Whether a text's head gives its first tokens under this tokenizer.json."""
    pre = spec.get("pre_tokenizer")
    if not pre:
        return False  # the model would see the whole text as one word
    for node in _json_components(spec.get("normalizer")):
        if node.get("type") not in _CUT_SAFE_NORMALIZERS or (
                node.get("type") == "Replace" and not _safe_replace(node)):
            return False
    for node in _json_components(pre):
        if node.get("type") not in _CUT_SAFE_PRE_TOKENIZERS or (
                node.get("type") == "ByteLevel" and node.get("use_regex") is False):
            return False
    return True


def _load_json_tokenizer(path, family):
    """(tokenizer without post-processor and special tokens, the JSON as a dict, the
    added tokens that are not special) of a tokenizer.json."""
    import tokenizers
    expected = "a tokenizer.json of the tokenizers library"
    text = _read_text(path, expected)
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise errors.InputError("vocab file %s: not JSON (%s); expected %s"
                                % (path, str(exc).splitlines()[0], expected))
    try:
        loaded = tokenizers.Tokenizer.from_str(text)
    except Exception as exc:  # the Rust deserialiser's error
        reason = str(exc).splitlines()[0]
        if isinstance(spec, dict) and isinstance(spec.get("model"), dict):
            # A file written by a newer tokenizers names components or fields
            # an older one does not know.
            raise errors.InputError(
                "vocab file %s: tokenizers %s cannot read this tokenizer.json (%s); a newer "
                "tokenizers wrote it: pip install -U tokenizers, or pass the folder's %s"
                % (path, tokenizers.__version__, reason,
                   _TOKENIZER_FILES[family.tokenizer]))
        raise errors.InputError("vocab file %s: not a tokenizer.json (%s); expected %s"
                                % (path, reason, expected))
    model_type = type(loaded.model).__name__
    wanted = {"bpe": "BPE", "unigram": "Unigram"}[family.tokenizer]
    if model_type != wanted:
        raise errors.InputError("vocab file %s: a %s tokenizer; the %s family's is %s"
                                % (path, model_type, family.name, wanted))
    tokenizer = tokenizers.Tokenizer(loaded.model)
    if loaded.normalizer is not None:
        tokenizer.normalizer = loaded.normalizer
    if loaded.pre_tokenizer is not None:
        tokenizer.pre_tokenizer = loaded.pre_tokenizer
    if loaded.decoder is not None:
        tokenizer.decoder = loaded.decoder
    plain = [token for _, token in sorted(loaded.get_added_tokens_decoder().items())
             if not token.special]
    return tokenizer, spec, plain


def _special_added_ids(path):
    """{content: id} of a tokenizer.json's special added tokens: their ids belong to the
    vocabulary even where the model's own vocabulary lacks them (ModernBERT's [CLS],
    [SEP], ... come after OLMo's BPE pieces), though a text never matches them."""
    spec = _read_json(path, "a tokenizer.json of the tokenizers library")
    added = spec.get("added_tokens") if isinstance(spec, dict) else None
    return {token["content"]: token["id"] for token in added or ()
            if isinstance(token, dict) and token.get("special")
            and isinstance(token.get("content"), str) and isinstance(token.get("id"), int)}


# -- the tokenizer ---------------------------------------------------------------


def _post_processor(family, specials, vocab, prefix_space):
    """The family's post-processor: RoBERTa's (which also trims the spaces off a
    byte-level token's offsets) for byte-level BPE, else a template of the layout."""
    from tokenizers import processors
    cls, sep = (specials.cls, vocab[specials.cls]), (specials.sep, vocab[specials.sep])
    if family.tokenizer == "bpe" and family.pair_layout == "roberta":
        return processors.RobertaProcessing(sep, cls, trim_offsets=True,
                                            add_prefix_space=prefix_space)
    seps, segment_b = _layout_shape(family)
    single = "%s:0 $A:0 %s:0" % (cls[0], sep[0])
    pair = "%s:0 $A:0 %s $B:%d %s:%d" % (cls[0], " ".join(["%s:0" % sep[0]] * seps),
                                         segment_b, sep[0], segment_b)
    return processors.TemplateProcessing(single=single, pair=pair, special_tokens=[cls, sep])


def _layout_shape(family):
    """(separators between a pair's texts, the second text's segment id)."""
    return (2, 0) if family.pair_layout == "roberta" else (1, 1)


def _text_head(text, need_tokens, chars_per_token):
    """(a prefix of `text` likely to hold its first `need_tokens` tokens, was_cut).

    The cut is made at an ASCII space that follows a non-space character: the
    word splitters these tokenizers use (whitespace; the byte-level regex, whose
    only patterns that span a space are whitespace runs and " word") end a word
    there whatever follows, and their normalisers act within a word, so the
    tokens of the head are the first tokens of the text.
    """
    limit = chars_per_token * need_tokens + 64
    if len(text) <= limit:
        return text, False
    cut = limit
    while True:
        cut = text.rfind(" ", 0, cut)
        if cut <= 0:
            return text, False
        if not text[cut - 1].isspace():
            return text[:cut], True


_Loaded = collections.namedtuple("_Loaded", [
    "tokenizer", "lower_cases", "files", "plain_added", "prefix_space", "cut_safe"])
"""What a tokenizer file gives: the Rust tokenizer (no post-processor, no added
tokens), whether it lower-cases, the files read, the non-special added tokens,
whether its byte-level pre-tokenizer adds a space before a text, and whether a
long text may be cut to a head (_text_head)."""


class SubwordTokenizer(object):
    """A byte-level BPE or SentencePiece unigram tokenizer with FullTokenizer's
    interface (module docstring).

    vocab_file: tokenizer.json, vocab.json / merges.txt or a SentencePiece .model
    (a local path or gs://). family: a families.Family (or its name) whose
    tokenizer is "bpe" or "unigram". do_lower_case: None takes the casing from
    the file (its normaliser; for ALBERT's .model tokenizer_config.json's
    do_lower_case, default true); True or False must agree with it, else one
    InputError line naming the file and --do_lower_case.
    """

    def __init__(self, vocab_file, family, do_lower_case=None):
        if isinstance(family, str):
            family = families.get(family)
        if family.tokenizer not in ("bpe", "unigram"):
            raise errors.InputError(
                "vocab file %s: the %s family uses WordPiece; load its vocab.txt with "
                "tokenization.FullTokenizer" % (vocab_file, family.name))
        try:
            import tokenizers  # noqa: F401
        except ImportError:
            raise errors.InputError("the %s tokenizer needs the tokenizers package: "
                                    "pip install tokenizers" % family.name)
        self.vocab_file = str(vocab_file)
        self.family = family
        self._config = read_tokenizer_config(self.vocab_file)
        self.special_tokens = _special_tokens(family, self._config)
        loaded = self._load()
        self._encoder, self.do_lower_case = loaded.tokenizer, loaded.lower_cases
        self.source_files, self._cut_safe = loaded.files, loaded.cut_safe
        if loaded.plain_added:
            self._encoder.add_tokens(loaded.plain_added)
        vocab = self._encoder.get_vocab(with_added_tokens=True)
        if source_kind(self.vocab_file) == "tokenizer.json":
            for token, index in _special_added_ids(self.vocab_file).items():
                vocab.setdefault(token, index)
        self.vocab = collections.OrderedDict(sorted(vocab.items(), key=lambda item: item[1]))
        self.inv_vocab = {index: token for token, index in self.vocab.items()}
        missing = [token for token in self.special_tokens if token not in self.vocab]
        if missing:
            raise errors.InputError("vocab file %s: no %s; the %s family needs %s"
                                    % (self.vocab_file, " ".join(missing), family.name,
                                       " ".join(self.special_tokens)))
        self._encoder.post_processor = _post_processor(family, self.special_tokens,
                                                       self.vocab, loaded.prefix_space)
        self._check_case(do_lower_case)

    def _load(self):
        """The _Loaded tokenizer of vocab_file, by its kind."""
        path, kind, wanted = self.vocab_file, source_kind(self.vocab_file), self.family.tokenizer
        if "://" not in path and os.path.isdir(path):
            raise errors.InputError("vocab file %s: a folder; expected one of its tokenizer "
                                    "files: tokenizer.json or %s"
                                    % (path, _TOKENIZER_FILES[wanted]))
        if kind == "tokenizer.json":
            tokenizer, spec, plain_added = _load_json_tokenizer(path, self.family)
            return _Loaded(tokenizer, _json_lower_cases(spec), [path], plain_added,
                           _json_prefix_space(spec), _json_cut_safe(spec))
        if kind == "bpe" and wanted == "bpe":
            vocab_path, merges_path = _bpe_pair(path)
            vocab, merges = read_bpe_files(vocab_path, merges_path)
            return _Loaded(_build_bpe(vocab, merges, path), False, [vocab_path, merges_path],
                           [], False, True)
        if kind == "spm" and wanted == "unigram":
            tokenizer, lower = _build_spm(read_spm_model(path), self.family,
                                          self.special_tokens, self._config, path)
            return _Loaded(tokenizer, lower, [path], [], False, True)
        raise errors.InputError("vocab file %s: a %s file, but the %s family's tokenizer is "
                                "%s; expected its tokenizer.json or %s"
                                % (path, KIND_NAMES[kind], self.family.name,
                                   _TOKENIZER_NAMES[wanted], _TOKENIZER_FILES[wanted]))

    def _check_case(self, do_lower_case):
        """InputError when an explicit do_lower_case contradicts the file's casing."""
        if do_lower_case is None or bool(do_lower_case) == self.do_lower_case:
            return
        raise errors.InputError(
            "--do_lower_case=%s contradicts vocab file %s, whose tokenizer %s; omit "
            "--do_lower_case (the %s family takes its casing from the file) or pass "
            "--do_lower_case=%s" % (bool(do_lower_case), self.vocab_file,
                                    "lower-cases" if self.do_lower_case else "keeps case",
                                    self.family.name, self.do_lower_case))

    # -- what the tasks read -------------------------------------------------------

    @property
    def layout(self):
        """The family's tokenization.Layout of this vocabulary's special tokens."""
        seps, segment_b = _layout_shape(self.family)
        return tokenization.Layout(self.vocab[self.special_tokens.cls],
                                   self.vocab[self.special_tokens.sep],
                                   self.vocab[self.special_tokens.pad], seps, segment_b)

    @property
    def unk_token(self):
        return self.special_tokens.unk

    @property
    def mask_token(self):
        return self.special_tokens.mask

    @property
    def family_tokenizer(self):
        """The kind of tokenizer (families.Family.tokenizer): "bpe" or "unigram"."""
        return self.family.tokenizer

    def tokenize(self, text):
        """Tokens of one text."""
        return self.tokenize_batch([text])[0]

    def convert_tokens_to_ids(self, tokens):
        """Ids of `tokens` (a KeyError for a token not in the vocabulary)."""
        return tokenization.convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids):
        """Tokens of `ids` (a KeyError for an id not in the vocabulary)."""
        return tokenization.convert_by_vocab(self.inv_vocab, ids)

    def encode_batch(self, texts):
        """Ids of each text, without special tokens: a list of lists of int."""
        return [encoding.ids for encoding in self._encode(texts, fast=True)]

    def tokenize_batch(self, texts):
        """Tokens of each text (vocabulary entries: an unknown piece is the unk token):
        a list of lists of str."""
        inv_vocab = self.inv_vocab
        return [[inv_vocab[index] for index in ids] for ids in self.encode_batch(texts)]

    def encode_with_offsets(self, texts):
        """(ids, [(start, end)]) of each text: the character span of each token in
        the text (byte-level tokens without the space they carry; a span may be
        empty, e.g. for a lone "▁")."""
        return [(encoding.ids, [tuple(span) for span in encoding.offsets])
                for encoding in self._encode(texts, fast=False)]

    def encode_words(self, words):
        """Ids of each word tokenized alone as a word inside a text (word alignment
        for sequence labelling): a byte-level word with the space before it, as
        transformers' is_split_into_words=True with add_prefix_space=True; a
        SentencePiece word with its "▁", as in any text."""
        return self.encode_batch(self._as_words(words))

    def tokenize_words(self, words):
        """Tokens of each word alone (see encode_words)."""
        return self.tokenize_batch(self._as_words(words))

    def encode_pairs(self, texts_a, texts_b=None, max_seq_length=128):
        """Classifier features in the family's layout (tokenization.Layout): each row
        one text or a pair, truncated as the original BERT truncates, padded with
        the pad id. An entry of `texts_b` may be None for a single text.

        Returns (input_ids, input_mask, segment_ids), int32 arrays of shape
        [len(texts_a), max_seq_length].
        """
        return tokenization.encode_pair_rows(self._encode_heads, self.layout, texts_a,
                                             texts_b, max_seq_length)

    # -- export --------------------------------------------------------------------

    def rust_tokenizer(self):
        """A new `tokenizers.Tokenizer` of this tokenizer with the family's special
        tokens registered and its post-processor (<s> a </s></s> b </s>, [CLS] a [SEP]
        b [SEP]), e.g. to save as tokenizer.json: encode(text) gives the ids of a row
        of encode_pairs."""
        from tokenizers import AddedToken, Tokenizer
        tokenizer = Tokenizer.from_str(self._encoder.to_str())
        tokenizer.add_special_tokens([AddedToken(token, normalized=False)
                                      for token in dict.fromkeys(self.special_tokens)])
        return tokenizer

    def files(self):
        """The tokenizer files in vocab_file's folder, the ones read first: the
        source files and the other forms of the same tokenizer beside them
        (tokenizer.json, vocab.json + merges.txt, the .model named as the family
        names it), for an export to copy unchanged."""
        folder = os.path.dirname(self.vocab_file)
        names = [TOKENIZER_JSON] + list(_SOURCE_NAMES[self.family.tokenizer])
        found = [os.path.join(folder, name) for name in names]
        return list(dict.fromkeys(self.source_files + [path for path in found
                                                       if exists(path)]))

    # -- internals -------------------------------------------------------------------

    def _as_words(self, words):
        """Each word as the text whose tokens are the word's inside a text."""
        words = [tokenization.convert_to_unicode(word) for word in words]
        if self.family.tokenizer != "bpe":
            return words
        # An empty word has no tokens, and one that starts with a space gets no
        # second one (ByteLevel's add_prefix_space).
        return [" " + word if word and not word.startswith(" ") else word for word in words]

    def _encode(self, texts, fast):
        """tokenizers Encodings of the texts, without special tokens; `fast` skips
        the offsets and token strings (encode_batch_fast, tokenizers >= 0.20)."""
        texts = [tokenization.convert_to_unicode(text) for text in texts]
        encode = self._encoder.encode_batch
        if fast:
            encode = getattr(self._encoder, "encode_batch_fast", None) or encode
        return encode(texts, add_special_tokens=False)

    def _encode_heads(self, texts, needs):
        """Ids of each text, complete or at least its first `needs[i]` ids.

        Long texts are cut to a head first (see `_text_head`) when the pipeline
        allows it; a head that turns out too short is encoded again, four
        times longer.
        """
        texts = [tokenization.convert_to_unicode(text) for text in texts]
        if not self._cut_safe:
            return self.encode_batch(texts)
        return tokenization.encode_heads(texts, needs, self.encode_batch, _text_head)


_TOKENIZER_NAMES = {"bpe": "byte-level BPE", "unigram": "a SentencePiece unigram model"}
_TOKENIZER_FILES = {"bpe": "vocab.json and merges.txt", "unigram": "SentencePiece .model"}
# The source files of each kind as the Hub names them (files()).
_SOURCE_NAMES = {"bpe": (BPE_VOCAB, BPE_MERGES),
                 "unigram": ("sentencepiece.bpe.model", "spiece.model", "spm.model")}
