"""WordPiece tokenization for BERT, with a fast batch path.

The public API is the one of the original BERT code (`FullTokenizer`,
`BasicTokenizer`, `WordpieceTokenizer`, `load_vocab`, `convert_to_unicode`,
`printable_text`, `whitespace_tokenize`, `validate_case_matches_checkpoint`),
plus batch methods on `FullTokenizer` for feature conversion:
`tokenize_batch`, `encode_batch` and `encode_pairs`.

The algorithm is the original one: drop NUL, U+FFFD and control characters
(categories Cc and Cf, except tab, newline and carriage return); put spaces
around CJK ideographs; split on whitespace; when lower-casing, lower-case and
strip accents (NFD, then drop the Mn marks); split off every punctuation
character (ASCII symbols and the Unicode P* categories); then greedy
longest-match-first WordPiece with "##" continuations, where a word longer than
200 characters (`MAX_INPUT_CHARS_PER_WORD`, Google's limit), or one that cannot
be covered by the vocabulary, becomes a single "[UNK]".

Two backends run it:

- "python": this module's own implementation. Each text goes through a few
  regular expressions built once per process from Python's Unicode database,
  then a cached WordPiece loop over its words.
- "rust": the Hugging Face `tokenizers` package (BertNormalizer,
  BertPreTokenizer and a WordPiece model built from the same vocabulary, no
  post-processor), driven through its batch encoder, which runs in parallel.

`backend="auto"` picks Rust when `tokenizers` imports and the vocabulary has
"[UNK]" (Rust's WordPiece cannot do without it), else Python.

Guarantee: for every input text both backends give the same tokens and ids.
The Rust code departs from the original on a few characters: its Unicode
tables are older than Python's (newer punctuation is not split off, newer
format characters and combining marks are kept, private-use characters are
dropped), its CJK ranges miss U+2B820-U+2B91F, and it lower-cases letter by
letter, so a word-final capital sigma becomes "σ" where Python gives "ς".
Rather than emulate those quirks, the Rust backend hands every text that
contains such a character (one in `_RUST_DIVERGENT_RANGES`, an unassigned,
private-use or surrogate code point, or a capital sigma when lower-casing) to
the Python path. The check is one precompiled regular expression per non-ASCII
text; a slow test runs both backends on every other code point.
"""

import collections
import functools
import itertools
import os
import re
import unicodedata

import numpy as np

from bert_toolkit import errors

# Ideograph blocks that get a space on each side, as in the original BERT: the
# CJK Unified Ideographs (with extensions A to E) and the two compatibility
# blocks. Hangul, kana and the other scripts that separate words with spaces
# are not in this list on purpose.
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

# Assigned characters that tokenizers 0.23's Rust code treats differently from
# Python 3.11 (Unicode 14), found by running both on every code point in a few
# contexts. Its tables predate these characters or their current category:
# punctuation it does not split off (e.g. U+2E43-U+2E5D), format characters it
# keeps (U+0890, U+13430), combining marks it does not strip (U+1ABF-U+1ACE),
# and U+2B820-U+2B91F, which its CJK range skips. Texts with any of them, or
# with an unassigned, private-use or surrogate code point, go to Python.
# tests/test_tokenization.py checks every other code point.
_RUST_DIVERGENT_RANGES = (
    (0x061D, 0x061D), (0x07FD, 0x07FD), (0x0890, 0x0891), (0x0898, 0x089F),
    (0x08CA, 0x08E2), (0x09FD, 0x09FE), (0x0A76, 0x0A76), (0x0AFA, 0x0AFF),
    (0x0B55, 0x0B55), (0x0C04, 0x0C04), (0x0C3C, 0x0C3C), (0x0C77, 0x0C77),
    (0x0C84, 0x0C84), (0x0D00, 0x0D00), (0x0D3B, 0x0D3C), (0x0D81, 0x0D81),
    (0x0EBA, 0x0EBA), (0x166D, 0x166D), (0x1734, 0x1734), (0x180F, 0x180F),
    (0x1885, 0x1886), (0x1ABF, 0x1ACE), (0x1B7D, 0x1B7E), (0x1DF6, 0x1DFB),
    (0x2E43, 0x2E4F), (0x2E52, 0x2E5D), (0xA82C, 0xA82C), (0xA8C5, 0xA8C5),
    (0xA8FF, 0xA8FF), (0xA9BD, 0xA9BD), (0x10D24, 0x10D27), (0x10EAB, 0x10EAD),
    (0x10F46, 0x10F50), (0x10F55, 0x10F59), (0x10F82, 0x10F89), (0x11070, 0x11070),
    (0x11073, 0x11074), (0x110C2, 0x110C2), (0x110CD, 0x110CD), (0x111C9, 0x111C9),
    (0x111CF, 0x111CF), (0x1123E, 0x1123E), (0x1133B, 0x1133B), (0x11438, 0x1143F),
    (0x11442, 0x11444), (0x11446, 0x11446), (0x1144B, 0x1144F), (0x1145A, 0x1145B),
    (0x1145D, 0x1145E), (0x11660, 0x1166C), (0x116B9, 0x116B9), (0x1182F, 0x11837),
    (0x11839, 0x1183B), (0x11938, 0x11938), (0x1193B, 0x1193C), (0x1193E, 0x1193E),
    (0x11943, 0x11946), (0x119D4, 0x119D7), (0x119DA, 0x119DB), (0x119E0, 0x119E0),
    (0x119E2, 0x119E2), (0x11A01, 0x11A0A), (0x11A33, 0x11A38), (0x11A3B, 0x11A47),
    (0x11A51, 0x11A56), (0x11A59, 0x11A5B), (0x11A8A, 0x11A96), (0x11A98, 0x11A9C),
    (0x11A9E, 0x11AA2), (0x11C30, 0x11C36), (0x11C38, 0x11C3D), (0x11C3F, 0x11C3F),
    (0x11C41, 0x11C45), (0x11C70, 0x11C71), (0x11C92, 0x11CA7), (0x11CAA, 0x11CB0),
    (0x11CB2, 0x11CB3), (0x11CB5, 0x11CB6), (0x11D31, 0x11D36), (0x11D3A, 0x11D3A),
    (0x11D3C, 0x11D3D), (0x11D3F, 0x11D45), (0x11D47, 0x11D47), (0x11D90, 0x11D91),
    (0x11D95, 0x11D95), (0x11D97, 0x11D97), (0x11EF3, 0x11EF4), (0x11EF7, 0x11EF8),
    (0x11FFF, 0x11FFF), (0x12FF1, 0x12FF2), (0x13430, 0x13438), (0x16E97, 0x16E9A),
    (0x16F4F, 0x16F4F), (0x16FE2, 0x16FE2), (0x16FE4, 0x16FE4), (0x1CF00, 0x1CF2D),
    (0x1CF30, 0x1CF46), (0x1E000, 0x1E006), (0x1E008, 0x1E018), (0x1E01B, 0x1E021),
    (0x1E023, 0x1E024), (0x1E026, 0x1E02A), (0x1E130, 0x1E136), (0x1E2AE, 0x1E2AE),
    (0x1E2EC, 0x1E2EF), (0x1E944, 0x1E94A), (0x1E95E, 0x1E95F), (0x2B820, 0x2B91F),
    # Characters of Unicode 15.0 and 15.1 (Python 3.12 and 3.13), found the same way
    # under Python 3.13: unassigned in Rust's tables, so Rust treats them otherwise.
    (0x0ECE, 0x0ECE), (0x10EFD, 0x10EFF), (0x11241, 0x11241), (0x11B00, 0x11B09),
    (0x11F00, 0x11F01), (0x11F36, 0x11F3A), (0x11F40, 0x11F40), (0x11F42, 0x11F4F),
    (0x13439, 0x13440), (0x13447, 0x13455), (0x1E08F, 0x1E08F), (0x1E4EC, 0x1E4EF),
)

# Python lower-cases a capital sigma at the end of a word to "ς", Rust always
# to "σ"; only texts that are lower-cased need to avoid Rust for it.
_CAPITAL_SIGMA = 0x03A3

# Words seen by the Python WordPiece path are cached; the cache is dropped when
# it reaches this size so that a long run over many rare words stays bounded.
_WORD_CACHE_SIZE = 1 << 17
# Characters per needed token in the first head of a long text: English prose
# averages about 4.6 (the real reviews), so most heads are long enough, and
# the rest are cut again four times longer (see `_text_head`).
_HEAD_CHARS_PER_TOKEN = 5

_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")

# Longest word (in code points, after BasicTokenizer) that WordPiece splits;
# longer ones become a single [UNK]. 200 as in google-research/bert.
MAX_INPUT_CHARS_PER_WORD = 200


def convert_to_unicode(text):
    """Returns `text` as str; bytes are decoded as UTF-8, dropping bad bytes."""
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        return text.decode("utf-8", "ignore")
    raise ValueError("Unsupported string type: %s" % type(text))


def printable_text(text):
    """Returns `text` as a str suitable for printing or logging."""
    return convert_to_unicode(text)


def _read_vocab_text(vocab_file):
    """Returns the decoded content of `vocab_file` or raises InputError."""
    if "://" in str(vocab_file):
        # Remote paths (gs://, hdfs://) need TensorFlow's file system layer;
        # import it only then, so local use does not pay TensorFlow's start-up.
        import tensorflow as tf
        if not tf.io.gfile.exists(vocab_file):
            raise errors.InputError("vocab file %s: not found; expected a vocab.txt "
                                    "with one WordPiece token per line" % vocab_file)
        with tf.io.gfile.GFile(vocab_file, "rb") as reader:
            data = reader.read()
    else:
        if not os.path.isfile(vocab_file):
            raise errors.InputError("vocab file %s: not found; expected a vocab.txt "
                                    "with one WordPiece token per line" % vocab_file)
        with open(vocab_file, "rb") as reader:
            data = reader.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise errors.InputError("vocab file %s line %d: not UTF-8; expected one "
                                "UTF-8 WordPiece token per line" % (vocab_file, line))


def load_vocab(vocab_file):
    """Reads a vocab.txt into an OrderedDict token -> id (the line number from 0).

    Tokens are stripped of surrounding whitespace, as in the original BERT. An
    empty file or a repeated token raises `errors.InputError`.
    """
    lines = _read_vocab_text(vocab_file).split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line does not start a token
    if not lines:
        raise errors.InputError("vocab file %s: empty; expected one WordPiece token "
                                "per line" % vocab_file)
    vocab = collections.OrderedDict()
    for index, line in enumerate(lines):
        token = line.strip()
        if token in vocab:
            raise errors.InputError(
                "vocab file %s line %d: duplicate token %r (first on line %d); expected "
                "each token once" % (vocab_file, index + 1, token, vocab[token] + 1))
        vocab[token] = index
    return vocab


def convert_by_vocab(vocab, items):
    """Maps each item through `vocab` (a KeyError for an unknown item)."""
    return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
    """Maps tokens to ids with `vocab`."""
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
    """Maps ids to tokens with `inv_vocab`."""
    return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
    """Splits `text` on whitespace (Python's notion of it) into a list."""
    return text.split()


# Google's released checkpoints, by whether their vocabulary is lower-cased.
# The small BERTs and whole-word-masking models follow the same naming.
_LOWER_CASED_MODEL = re.compile(
    r"(?:wwm_)?uncased_L-\d+_H-\d+_A-\d+|multilingual_L-12_H-768_A-12|chinese_L-12_H-768_A-12")
_CASED_MODEL = re.compile(r"(?:wwm_)?cased_L-\d+_H-\d+_A-\d+|multi_cased_L-12_H-768_A-12")


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
    """Raises InputError if `do_lower_case` contradicts a known Google checkpoint.

    The casing is not stored in bert_config.json, so the model folder name in
    `init_checkpoint` (".../uncased_L-12_H-768_A-12/bert_model.ckpt") is the
    only hint; checkpoints with other names are not checked.
    """
    if not init_checkpoint:
        return
    match = re.search(r"([A-Za-z0-9_-]+)[/\\]bert_model\.ckpt", init_checkpoint)
    if match is None:
        return
    model_name = match.group(1)
    if _LOWER_CASED_MODEL.fullmatch(model_name) and not do_lower_case:
        wanted, kind = True, "lower-cased (uncased)"
    elif _CASED_MODEL.fullmatch(model_name) and do_lower_case:
        wanted, kind = False, "cased"
    else:
        return
    raise errors.InputError(
        "--do_lower_case=%s does not match --init_checkpoint=%s: %s is a %s model, so "
        "pass --do_lower_case=%s" % (bool(do_lower_case), init_checkpoint, model_name,
                                     kind, wanted))


def _ranges(code_points):
    """Collapses sorted code points into a list of inclusive (start, end) ranges."""
    out = []
    for cp in code_points:
        if out and out[-1][1] == cp - 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return out


def _char_class(ranges):
    """The body of a regex character class matching the given ranges."""
    return "".join("\\U%08x-\\U%08x" % (lo, hi) if lo != hi else "\\U%08x" % lo
                   for lo, hi in ranges)


CodePointSets = collections.namedtuple(
    "CodePointSets", ["drop", "punct", "mark", "unassigned", "cjk"])


@functools.lru_cache(maxsize=None)
def code_point_sets():
    """The character classes of the Python path, from this Python's Unicode database.

    Returns a CodePointSets of sorted code point lists: drop (what cleaning
    removes: Cc and Cf except tab, newline and carriage return, plus U+FFFD;
    NUL is Cc), punct (split off as words of their own: the P* categories and
    the ASCII symbols) and mark (Mn, removed after NFD when lower-casing); and
    inclusive [start, end] ranges: unassigned (the Cn, Co and Cs code points)
    and cjk (the ideographs put between spaces). Built once per process;
    graph_tokenization builds its tables from the same sets.
    """
    # One C-level pass for the categories, then work on runs of equal category:
    # a Python loop over all 1.1M code points cost ~0.5 s per process.
    runs, start = [], 0
    for category, run in itertools.groupby(map(unicodedata.category,
                                               map(chr, range(0x110000)))):
        length = len(list(run))
        runs.append((category, start, start + length - 1))
        start += length

    def code_points(wanted):
        return [cp for category, lo, hi in runs if wanted(category)
                for cp in range(lo, hi + 1)]

    drop = sorted([cp for cp in code_points(lambda c: c in ("Cc", "Cf"))
                   if chr(cp) not in "\t\n\r"] + [0xFFFD])
    ascii_symbols = [cp for cp in range(33, 127) if not chr(cp).isalnum()]
    punct = sorted(set(code_points(lambda c: c[0] == "P")) | set(ascii_symbols))
    unassigned = []  # ranges; adjacent runs (e.g. Cs then Co) merge
    for category, lo, hi in runs:
        if category in ("Cn", "Co", "Cs"):
            if unassigned and unassigned[-1][1] == lo - 1:
                unassigned[-1][1] = hi
            else:
                unassigned.append([lo, hi])
    return CodePointSets(drop=drop, punct=punct, mark=code_points(lambda c: c == "Mn"),
                         unassigned=unassigned, cjk=[list(r) for r in _CJK_RANGES])


_CharTables = collections.namedtuple(
    "_CharTables", ["drop", "cjk", "mark", "word", "rust_cased", "rust_lower"])


@functools.lru_cache(maxsize=None)
def _char_tables():
    """Regexes over `code_point_sets()`, built once per process.

    drop: characters the cleaning step removes; cjk: ideographs to surround by
    spaces; mark: Mn marks removed after NFD; word: one punctuation character
    or a run of characters that are neither punctuation nor whitespace;
    rust_cased / rust_lower: characters that send a text to the Python path.
    """
    sets = code_point_sets()
    punct_class = _char_class(_ranges(sets.punct))
    rust_cased = _char_class(sets.unassigned + list(_RUST_DIVERGENT_RANGES))
    return _CharTables(
        drop=re.compile("[%s]" % _char_class(_ranges(sets.drop))),
        cjk=re.compile("[%s]" % _char_class(_CJK_RANGES)),
        mark=re.compile("[%s]" % _char_class(_ranges(sets.mark))),
        word=re.compile("[%s]|[^%s\\s]+" % (punct_class, punct_class)),
        rust_cased=re.compile("[%s]" % rust_cased),
        rust_lower=re.compile("[%s%s]" % (rust_cased, _char_class([(_CAPITAL_SIGMA,) * 2]))),
    )


class BasicTokenizer(object):
    """Cleaning, CJK spacing, optional lower-casing and punctuation splitting."""

    def __init__(self, do_lower_case=True):
        self.do_lower_case = do_lower_case

    def tokenize(self, text):
        """Returns the words of `text` before WordPiece, as the original BERT does."""
        tables = _char_tables()
        text = tables.drop.sub("", convert_to_unicode(text))
        ascii_only = text.isascii()
        if not ascii_only:
            text = tables.cjk.sub(" \\g<0> ", text)
        if self.do_lower_case:
            # Lower-casing and NFD act on the whole text rather than word by
            # word: neither looks across whitespace (not even the final-sigma
            # rule), so the result is the same and one C call is much faster.
            text = text.lower()
            if not ascii_only:
                text = tables.mark.sub("", unicodedata.normalize("NFD", text))
        return tables.word.findall(text)


class WordpieceTokenizer(object):
    """Greedy longest-match-first WordPiece over a vocabulary.

    `vocab` is treated as read-only: results are cached per word.
    """

    def __init__(self, vocab, unk_token="[UNK]",
                 max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word
        # No vocabulary entry is longer than this, so longer candidate pieces
        # can be skipped without changing the result.
        self._longest = max((len(token) for token in vocab), default=0)
        self._cache = {}

    def tokenize(self, text):
        """Splits whitespace-separated words of `text` into WordPiece tokens."""
        output = []
        for word in whitespace_tokenize(convert_to_unicode(text)):
            output.extend(self.tokenize_word(word))
        return output

    def tokenize_word(self, word):
        """The WordPiece tokens of one word, as a tuple (cached)."""
        pieces = self._cache.get(word)
        if pieces is None:
            pieces = _greedy_pieces(word, self.vocab, self.unk_token,
                                    self.max_input_chars_per_word, self._longest)
            if len(self._cache) >= _WORD_CACHE_SIZE:
                self._cache.clear()
            self._cache[word] = pieces
        return pieces


def _greedy_pieces(word, vocab, unk_token, max_chars, longest):
    """Covers `word` with the longest vocabulary pieces from the left, or [UNK]."""
    if len(word) > max_chars:
        return (unk_token,)
    pieces = []
    start = 0
    while start < len(word):
        end = min(len(word), start + longest)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        else:
            return (unk_token,)
        pieces.append(piece)
        start = end
    return tuple(pieces)


def truncated_pair_lengths(len_a, len_b, budget):
    """Lengths left after the original BERT pair truncation.

    The original pops one token at a time from the end of the currently longer
    sequence (the second one on a tie) until the total fits `budget`; this is
    the same result without the loop.
    """
    excess = len_a + len_b - budget
    if excess <= 0:
        return len_a, len_b
    if len_a > len_b:
        cut = min(len_a - len_b, excess)
        len_a -= cut
    else:
        cut = min(len_b - len_a, excess)
        len_b -= cut
    excess -= cut
    # Equal lengths from here on: the second sequence loses the odd token.
    return len_a - excess // 2, len_b - (excess + 1) // 2


def _build_rust_tokenizer(vocab, do_lower_case, unk_token, max_input_chars_per_word):
    """A `tokenizers.Tokenizer` doing the same work as the Python path.

    Rust's WordPiece counts a word's length in code points, as Python does.
    """
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordPiece
    # The vocabulary dict comes from load_vocab, not WordPiece.from_file, so
    # that both backends see exactly the same (stripped) tokens.
    model = WordPiece(vocab=dict(vocab), unk_token=unk_token,
                      max_input_chars_per_word=max_input_chars_per_word)
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True,
        strip_accents=bool(do_lower_case), lowercase=bool(do_lower_case))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tokenizer


class FullTokenizer(object):
    """End-to-end tokenization: BasicTokenizer, then WordPiece.

    backend: "auto" (Rust when the `tokenizers` package imports, else Python),
    "rust" or "python". Both give identical results; see the module docstring.
    """

    def __init__(self, vocab_file, do_lower_case=True, backend="auto"):
        if backend not in ("auto", "rust", "python"):
            raise errors.InputError("tokenizer backend %r: expected auto, rust or python"
                                    % (backend,))
        self.vocab_file = vocab_file
        self.do_lower_case = do_lower_case
        self.vocab = load_vocab(vocab_file)
        self.inv_vocab = {index: token for token, index in self.vocab.items()}
        self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
        self._id_cache = {}
        self._rust = None
        if backend != "python":
            self._rust = self._make_rust(required=(backend == "rust"))
        self.backend = "rust" if self._rust is not None else "python"
        tables = _char_tables()
        self._rust_unsafe = tables.rust_lower if do_lower_case else tables.rust_cased

    def _make_rust(self, required):
        """The Rust tokenizer, or None when it is unavailable and not required."""
        unk = self.wordpiece_tokenizer.unk_token
        try:
            import tokenizers  # noqa: F401
        except ImportError:
            if required:
                raise errors.InputError("tokenizer backend 'rust': the tokenizers package "
                                        "is not installed; pip install tokenizers or "
                                        "use backend='python'")
            return None
        if unk not in self.vocab:
            # Rust's WordPiece fails on an unknown word when it has no [UNK];
            # the Python path can still produce the "[UNK]" string.
            if required:
                raise errors.InputError("vocab file %s: no %s token; the rust backend "
                                        "needs it" % (self.vocab_file, unk))
            return None
        return _build_rust_tokenizer(self.vocab, self.do_lower_case, unk,
                                     self.wordpiece_tokenizer.max_input_chars_per_word)

    @property
    def layout(self):
        """The BERT Layout of this vocabulary's [CLS], [SEP] and [PAD]."""
        self._require_tokens(BERT_SPECIAL_TOKENS[:2], "a BERT row")
        return bert_layout(self.vocab)

    @property
    def unk_token(self):
        return self.wordpiece_tokenizer.unk_token

    @property
    def mask_token(self):
        return "[MASK]"

    @property
    def family_tokenizer(self):
        """The kind of tokenizer (families.Family.tokenizer): "wordpiece"."""
        return "wordpiece"

    def encode_words(self, words):
        """Ids of each word tokenized alone, as a word of a text (word alignment for
        sequence labelling and SQuAD): WordPiece looks at one word at a time, so
        this is encode_batch of the words."""
        return self.encode_batch(words)

    def tokenize_words(self, words):
        """Tokens of each word alone (see encode_words)."""
        return self.tokenize_batch(words)

    def rust_tokenizer(self):
        """A new `tokenizers.Tokenizer` running this tokenizer's normaliser, word
        splitter and WordPiece (no special tokens added), e.g. to save as
        tokenizer.json. Same ids as this class but on the few characters the
        module docstring lists, which this class hands to the Python path."""
        return self._make_rust(required=True)

    # -- single text, original API ------------------------------------------

    def tokenize(self, text):
        """WordPiece tokens of one text."""
        return self.tokenize_batch([text])[0]

    def convert_tokens_to_ids(self, tokens):
        """Ids of `tokens` (a KeyError for a token not in the vocabulary)."""
        return convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids):
        """Tokens of `ids` (a KeyError for an id not in the vocabulary)."""
        return convert_by_vocab(self.inv_vocab, ids)

    # -- batches -------------------------------------------------------------

    def tokenize_batch(self, texts):
        """WordPiece tokens of each text: a list of lists of str."""
        return self._run(texts, want_ids=False)

    def encode_batch(self, texts):
        """WordPiece ids of each text, without special tokens: a list of lists of int."""
        self._require_tokens((self.wordpiece_tokenizer.unk_token,), "encode_batch")
        return self._run(texts, want_ids=True)

    def encode_pairs(self, texts_a, texts_b=None, max_seq_length=128):
        """Classifier features as the original run_classifier builds them.

        Each row is [CLS] a [SEP] or [CLS] a [SEP] b [SEP] (an entry of
        `texts_b` may be None for a single text), truncated as the original
        does, then padded with zeros. Segment ids are 0 up to and including the
        first [SEP], then 1.

        Returns (input_ids, input_mask, segment_ids), int32 arrays of shape
        [len(texts_a), max_seq_length].
        """
        self._require_tokens(_SPECIAL_TOKENS, "encode_pairs")
        return encode_pair_rows(self._encode_heads, self.layout, texts_a, texts_b,
                                max_seq_length)

    # -- internals -----------------------------------------------------------

    def _require_tokens(self, tokens, needed_by):
        """Raises InputError naming the vocab file if any of `tokens` is missing."""
        missing = [token for token in tokens if token not in self.vocab]
        if missing:
            raise errors.InputError("vocab file %s: missing %s; %s needs %s"
                                    % (self.vocab_file, " ".join(missing), needed_by,
                                       " ".join(tokens)))

    def _python_tokens(self, text):
        """WordPiece tokens of one text by the Python path."""
        tokens = []
        for word in self.basic_tokenizer.tokenize(text):
            tokens.extend(self.wordpiece_tokenizer.tokenize_word(word))
        return tokens

    def _python_ids(self, text):
        """WordPiece ids of one text by the Python path."""
        ids = []
        cache = self._id_cache
        for word in self.basic_tokenizer.tokenize(text):
            word_ids = cache.get(word)
            if word_ids is None:
                word_ids = tuple(self.vocab[token]
                                 for token in self.wordpiece_tokenizer.tokenize_word(word))
                if len(cache) >= _WORD_CACHE_SIZE:
                    cache.clear()
                cache[word] = word_ids
            ids.extend(word_ids)
        return ids

    def _encode_heads(self, texts, needs):
        """Ids of each text, complete or at least its first `needs[i]` ids
        (encode_heads, with WordPiece's _text_head)."""
        return encode_heads([convert_to_unicode(text) for text in texts], needs,
                            lambda heads: self._run(heads, want_ids=True), _text_head)

    def _run(self, texts, want_ids):
        """Tokens or ids of each text, by Rust where it is safe, else Python."""
        texts = [convert_to_unicode(text) for text in texts]
        python_one = self._python_ids if want_ids else self._python_tokens
        if self._rust is None:
            return [python_one(text) for text in texts]
        results = [None] * len(texts)
        rust_rows, rust_texts = [], []
        unsafe = self._rust_unsafe.search
        for row, text in enumerate(texts):
            if text.isascii() or unsafe(text) is None:
                rust_rows.append(row)
                rust_texts.append(text)
            else:
                results[row] = python_one(text)
        if rust_texts:
            encode = self._rust.encode_batch
            if want_ids:
                # encode_batch_fast (tokenizers >= 0.20) skips the character
                # offsets, and leaves the token strings empty.
                encode = getattr(self._rust, "encode_batch_fast", None) or encode
            encodings = encode(rust_texts, add_special_tokens=False)
            for row, encoding in zip(rust_rows, encodings):
                results[row] = encoding.ids if want_ids else encoding.tokens
        return results


def _text_head(text, need_tokens, chars_per_token=_HEAD_CHARS_PER_TOKEN):
    """A prefix of `text` likely to hold its first `need_tokens` tokens.

    Returns (head, was_cut). The cut is made just before an ASCII space or
    newline: no step of the tokenizer looks across whitespace (cleaning, CJK
    spacing, lower-casing with its final-sigma rule, NFD reordering,
    punctuation splitting and WordPiece are all local to a word), so the
    tokens of the head are exactly the first tokens of the text. The caller
    tries a longer head when this one comes up short.
    """
    limit = chars_per_token * need_tokens + 64
    if len(text) <= limit:
        return text, False
    cut = text.rfind(" ", 0, limit)
    if cut <= 0:
        cut = text.rfind("\n", 0, limit)
    if cut <= 0:
        return text, False
    return text[:cut], True


def encode_heads(texts, needs, encode, text_head):
    """Ids of each of `texts`, complete or at least its first `needs[i]` ids.

    Long texts are cut to a head first (`text_head(text, need, chars_per_token)` ->
    (head, was_cut), cut where the tokenizer's words end); a head that turns out
    too short is encoded again, four times longer. encode: a list of texts -> a
    list of their id lists."""
    ids = [None] * len(texts)
    pending = range(len(texts))
    chars_per_token = _HEAD_CHARS_PER_TOKEN
    while pending:
        heads = [text_head(texts[row], needs[row], chars_per_token) for row in pending]
        encoded = encode([head for head, _ in heads])
        short = []
        for row, (_, was_cut), row_ids in zip(pending, heads, encoded):
            ids[row] = row_ids
            if was_cut and len(row_ids) < needs[row]:
                short.append(row)
        pending = short
        chars_per_token *= 4
    return ids


def encode_pair_rows(encode_heads_of, layout, texts_a, texts_b=None, max_seq_length=128):
    """Classifier features of a tokenizer (its `_encode_heads` and Layout): each row
    one text, or a pair (an entry of `texts_b` may be None for a single text),
    truncated as the original run_classifier truncates, padded with the layout's pad
    id. Only the head of a long text is tokenized.

    Returns (input_ids, input_mask, segment_ids), int32 [len(texts_a), max_seq_length].
    """
    texts_a = list(texts_a)
    if texts_b is None:
        texts_b = [None] * len(texts_a)
    else:
        texts_b = list(texts_b)
        if len(texts_b) != len(texts_a):
            raise ValueError("encode_pairs: %d texts_a but %d texts_b"
                             % (len(texts_a), len(texts_b)))
    has_pair = any(text is not None for text in texts_b)
    least = layout.pair_specials if has_pair else layout.single_specials
    if max_seq_length < least:
        raise errors.InputError("max_seq_length=%d: expected at least %d to hold the "
                                "special tokens" % (max_seq_length, least))
    # A text can keep at most this many tokens; lengths capped there give the
    # same truncation as the full lengths.
    need_a = [max_seq_length - (layout.single_specials if text is None
                                else layout.pair_specials) for text in texts_b]
    present_b = [text for text in texts_b if text is not None]
    ids = encode_heads_of(texts_a + present_b,
                          need_a + [max_seq_length - layout.pair_specials] * len(present_b))
    ids_b = iter(ids[len(texts_a):])
    return pack_rows(ids[:len(texts_a)],
                     [None if text is None else next(ids_b) for text in texts_b],
                     max_seq_length, layout)


class Layout(collections.namedtuple("Layout", [
        "cls_id", "sep_id", "pad_id", "seps_between", "segment_b"])):
    """How a family lays out one text or a pair (bert_toolkit/families.py):

    BERT's   [CLS] a [SEP] b [SEP]         seps_between 1, b's segment 1;
    RoBERTa's <s> a </s></s> b </s>        seps_between 2, one segment (0).

    pad_id fills the rows past their end (the input mask hides it from the model).
    """

    @property
    def single_specials(self):
        """Special tokens around one text: 2."""
        return 2

    @property
    def pair_specials(self):
        """Special tokens around a pair: 3 (BERT) or 4 (RoBERTa)."""
        return 2 + self.seps_between

    def row(self, a, b=None):
        """(token ids, segment ids) of text `a` (and `b`) with the special tokens."""
        if b is None:
            tokens = [self.cls_id] + list(a) + [self.sep_id]
            return tokens, [0] * len(tokens)
        first = [self.cls_id] + list(a) + [self.sep_id] * self.seps_between
        second = list(b) + [self.sep_id]
        return first + second, [0] * len(first) + [self.segment_b] * len(second)


BERT_SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]")


def bert_layout(vocab):
    """BERT's Layout from a vocabulary with [CLS], [SEP] and [PAD]."""
    return Layout(vocab["[CLS]"], vocab["[SEP]"], vocab.get("[PAD]", 0), 1, 1)


def pack_rows(ids_a, ids_b, max_seq_length, layout):
    """Builds the padded (input_ids, input_mask, segment_ids) int32 arrays
    [len(ids_a), max_seq_length] of rows laid out by `layout` (a Layout), each
    text or pair truncated as the original BERT truncates (truncated_pair_lengths);
    an entry of `ids_b` may be None for a single text."""
    n = len(ids_a)
    input_ids = np.full((n, max_seq_length), layout.pad_id, dtype=np.int32)
    input_mask = np.zeros((n, max_seq_length), dtype=np.int32)
    segment_ids = np.zeros((n, max_seq_length), dtype=np.int32)
    for row, (a, b) in enumerate(zip(ids_a, ids_b)):
        if b is None:
            tokens, segments = layout.row(a[:max_seq_length - layout.single_specials])
        else:
            len_a, len_b = truncated_pair_lengths(len(a), len(b),
                                                  max_seq_length - layout.pair_specials)
            tokens, segments = layout.row(a[:len_a], b[:len_b])
        input_ids[row, :len(tokens)] = tokens
        input_mask[row, :len(tokens)] = 1
        segment_ids[row, :len(tokens)] = segments
    return input_ids, input_mask, segment_ids


def load_tokenizer(vocab_file, do_lower_case=True, family=None):
    """The tokenizer a run uses, by the family (a families.Family; None is BERT) and
    the file `vocab_file` names (--vocab_file, --do_lower_case).

    WordPiece families (Family.tokenizer "wordpiece"): a FullTokenizer of vocab.txt
    (a tokenizer.json named instead reads the vocab.txt beside it). Casing is the
    flag's, as for BERT; do_lower_case None takes tokenizer_config.json's
    do_lower_case beside the file, else True.

    Byte-level BPE and SentencePiece families: a subword.SubwordTokenizer of the
    file (tokenizer.json, vocab.json or merges.txt, sentencepiece.bpe.model,
    spiece.model or any SentencePiece .model), with the methods and attributes the
    tasks use (encode_batch, encode_words, encode_pairs, encode_with_offsets,
    tokenize_batch, tokenize_words, convert_tokens_to_ids, convert_ids_to_tokens,
    vocab, inv_vocab, layout, unk_token, mask_token). Their casing is the file's:
    pass do_lower_case None unless the user gave --do_lower_case, whose value must
    then agree with the file (else one InputError line).
    """
    from bert_toolkit.text import subword
    if family is not None and family.tokenizer != "wordpiece":
        return subword.SubwordTokenizer(vocab_file, family, do_lower_case)
    kind = subword.source_kind(vocab_file)
    name = "BERT" if family is None else family.name
    if kind == "tokenizer.json":
        vocab_txt = os.path.join(os.path.dirname(str(vocab_file)), "vocab.txt")
        if not subword.exists(vocab_txt):
            raise errors.InputError("vocab file %s: the %s family reads a WordPiece vocab.txt, "
                                    "and there is none beside this tokenizer.json; pass "
                                    "--vocab_file=<its vocab.txt>" % (vocab_file, name))
        vocab_file = vocab_txt
    elif kind != "wordpiece":
        raise errors.InputError("vocab file %s: a %s file, but the %s family's tokenizer is "
                                "WordPiece; expected its vocab.txt"
                                % (vocab_file, subword.KIND_NAMES[kind], name))
    if do_lower_case is None:
        do_lower_case = bool(subword.read_tokenizer_config(vocab_file).get("do_lower_case",
                                                                            True))
    return FullTokenizer(vocab_file, do_lower_case)
