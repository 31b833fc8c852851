"""Tests of tokenization.py: the original BERT WordPiece and its two backends.

Fast tests use a tiny vocabulary written to tmp_path. The slow ones compare
both backends with tests/fixtures/tokenizer_reference.json (made by
tests/fixtures/make_tokenizer_reference.py from transformers'
BertTokenizerLegacy) on the real all-MiniLM-L6-v2 vocabulary and the real
corpora, and check the Rust backend against the Python one on every code
point it is trusted with.
"""

import collections
import csv
import hashlib
import json
import os
import unicodedata

import numpy as np
import pytest

from bert_toolkit import errors
from bert_toolkit.text import tokenization

from tiny import FIXTURES

FIXTURE = os.path.join(FIXTURES, "tokenizer_reference.json")
BACKENDS = ("python", "rust")
CASES = {"uncased": True, "cased": False}

TINY_TOKENS = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "un", "##aff", "##able",
    "hello", "world", ",", "!", ".", "'", "[", "]", "cl", "##s", "a", "##b", "b",
    "中", "文", "naive", "cafe", "οδος", "run", "##ning", "don", "t", "x", "##x",
    "i", "e", "σ", "ς",
]


def write_vocab(tmp_path, tokens, name="vocab.txt"):
    path = tmp_path / name
    path.write_text("".join(token + "\n" for token in tokens), encoding="utf-8")
    return str(path)


@pytest.fixture
def tiny_vocab(tmp_path):
    return write_vocab(tmp_path, TINY_TOKENS)


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Each backend in turn; "rust" is skipped when tokenizers is not installed."""
    if request.param == "rust":
        pytest.importorskip("tokenizers")
    return request.param


def original_truncation(len_a, len_b, budget):
    """run_classifier's _truncate_seq_pair, on lengths."""
    while len_a + len_b > budget:
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    return len_a, len_b


def naive_pairs(tokenizer, texts_a, texts_b, max_seq_length):
    """encode_pairs built the slow, obvious way from full encode_batch ids."""
    cls, sep = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    rows = []
    for i, text_a in enumerate(texts_a):
        a = tokenizer.encode_batch([text_a])[0]
        text_b = texts_b[i] if texts_b is not None else None
        if text_b is None:
            a = a[:max_seq_length - 2]
            ids, segments = [cls] + a + [sep], [0] * (len(a) + 2)
        else:
            b = tokenizer.encode_batch([text_b])[0]
            len_a, len_b = original_truncation(len(a), len(b), max_seq_length - 3)
            a, b = a[:len_a], b[:len_b]
            ids = [cls] + a + [sep] + b + [sep]
            segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        pad = max_seq_length - len(ids)
        rows.append((ids + [0] * pad, [1] * len(ids) + [0] * pad, segments + [0] * pad))
    return tuple(np.array([row[k] for row in rows], dtype=np.int32)
                 .reshape(-1, max_seq_length) for k in range(3))


# --------------------------------------------------------------------------
# Public API of the original module.
# --------------------------------------------------------------------------

def test_load_vocab_is_ordered_token_to_line(tiny_vocab):
    vocab = tokenization.load_vocab(tiny_vocab)
    assert isinstance(vocab, collections.OrderedDict)
    assert list(vocab) == TINY_TOKENS
    assert list(vocab.values()) == list(range(len(TINY_TOKENS)))


def test_load_vocab_strips_tokens_and_a_bom(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes("\ufeff[PAD]\r\n  hello \nworld".encode("utf-8"))
    assert list(tokenization.load_vocab(str(path)).items()) == [
        ("[PAD]", 0), ("hello", 1), ("world", 2)]


def test_full_tokenizer_keeps_the_original_api(tiny_vocab):
    tokenizer = tokenization.FullTokenizer(vocab_file=tiny_vocab, do_lower_case=True)
    assert tokenizer.vocab == tokenization.load_vocab(tiny_vocab)
    assert tokenizer.inv_vocab == {i: t for t, i in tokenizer.vocab.items()}
    tokens = tokenizer.tokenize("UNaffable, Hello!")
    assert tokens == ["un", "##aff", "##able", ",", "hello", "!"]
    ids = tokenizer.convert_tokens_to_ids(tokens)
    assert ids == [6, 7, 8, 11, 9, 12]
    assert tokenizer.convert_ids_to_tokens(ids) == tokens
    with pytest.raises(KeyError):
        tokenizer.convert_tokens_to_ids(["not-in-vocab"])
    assert tokenization.convert_tokens_to_ids(tokenizer.vocab, ["the"]) == [5]
    assert tokenization.convert_ids_to_tokens(tokenizer.inv_vocab, [5]) == ["the"]


def test_helper_functions():
    assert tokenization.convert_to_unicode("héllo") == "héllo"
    assert tokenization.convert_to_unicode("héllo".encode("utf-8")) == "héllo"
    assert tokenization.convert_to_unicode(b"a\xffb") == "ab"
    assert tokenization.printable_text(b"x") == "x"
    with pytest.raises(ValueError):
        tokenization.convert_to_unicode(3)
    assert tokenization.whitespace_tokenize("  a b\n\tc \u3000d ") == ["a", "b", "c", "d"]
    assert tokenization.whitespace_tokenize(" \n ") == []


def test_component_defaults(tiny_vocab):
    basic = tokenization.BasicTokenizer()
    assert basic.do_lower_case is True
    wordpiece = tokenization.WordpieceTokenizer(tokenization.load_vocab(tiny_vocab))
    assert wordpiece.unk_token == "[UNK]"
    assert wordpiece.max_input_chars_per_word == 200  # google-research/bert's limit


@pytest.mark.parametrize("text, lower, words", [
    ("Hello, World!", True, ["hello", ",", "world", "!"]),
    ("HéLLo Ångström", True, ["hello", "angstrom"]),
    ("HéLLo", False, ["HéLLo"]),
    ("e\u0301", True, ["e"]),
    ("e\u0301", False, ["e\u0301"]),  # no NFC: the mark stays a separate character
    ("ΟΔΟΣ Σ", True, ["οδος", "σ"]),  # word-final sigma
    ("İx", True, ["ix"]),
    ("a\x00b\ufffdc", True, ["abc"]),
    ("a\u200bb\u200dc\ufeffd\u00ade", True, ["abcde"]),  # Cf characters are dropped
    ("a\x0bb\x0cc\x1cd\x1fe\x85f\x7fg", True, ["abcdefg"]),  # so are Cc ones
    ("a\tb\nc\rd", True, ["a", "b", "c", "d"]),
    ("a\u00a0b\u2003c\u3000d\u2028e\u2029f", True, ["a", "b", "c", "d", "e", "f"]),
    ("x\ue000y \U000f0000", True, ["x\ue000y", "\U000f0000"]),  # private use is kept
    ("\u0378", True, ["\u0378"]),  # and so is an unassigned code point
    ("中文abc日本", True, ["中", "文", "abc", "日", "本"]),
    # Lower-casing decomposes Hangul syllables into jamo (NFD); kana are left alone.
    ("한국어 カタカナ", True, [unicodedata.normalize("NFD", "한국어"), "カタカナ"]),
    ("한국어", False, ["한국어"]),
    ("don't $5^`~", True, ["don", "'", "t", "$", "5", "^", "`", "~"]),
    ("«¿¡x!?»", True, ["«", "¿", "¡", "x", "!", "?", "»"]),
    ("[CLS] a[SEP]", True, ["[", "cls", "]", "a", "[", "sep", "]"]),
    ("##ing", True, ["#", "#", "ing"]),
    ("", True, []),
    ("  \t\n \u3000 ", True, []),
    ("\x00\x01\u200b", True, []),
    ("\u0301\u0302", True, []),
])
def test_basic_tokenizer(text, lower, words):
    assert tokenization.BasicTokenizer(do_lower_case=lower).tokenize(text) == words


def test_wordpiece_is_greedy_longest_match_first(tiny_vocab):
    vocab = tokenization.load_vocab(tiny_vocab)
    wordpiece = tokenization.WordpieceTokenizer(vocab)
    assert wordpiece.tokenize("unaffable") == ["un", "##aff", "##able"]
    assert wordpiece.tokenize("running unaffable") == ["run", "##ning", "un", "##aff", "##able"]
    assert wordpiece.tokenize("unaffablez") == ["[UNK]"]
    assert wordpiece.tokenize("x" * 200) == ["x"] + ["##x"] * 199
    assert wordpiece.tokenize("x" * 201) == ["[UNK]"]
    short = tokenization.WordpieceTokenizer(vocab, unk_token="<?>", max_input_chars_per_word=3)
    assert short.tokenize("xxx xxxx") == ["x", "##x", "##x", "<?>"]


def test_full_tokenizer_edge_cases(tiny_vocab, backend):
    tokenizer = tokenization.FullTokenizer(tiny_vocab, backend=backend)
    assert tokenizer.backend == backend
    texts = ["", " \n\t ", "\x00\u200b", "[CLS]", "Naïve CAFÉ", "中文", "ΟΔΟΣ",
             "x" * 201, "\U000f0000", "a\ud800b", "don't", "hello\u2028world"]
    assert tokenizer.tokenize_batch(texts) == [
        [], [], [], ["[", "cl", "##s", "]"], ["naive", "cafe"], ["中", "文"], ["οδος"],
        ["[UNK]"], ["[UNK]"], ["[UNK]"], ["don", "'", "t"], ["hello", "world"]]
    assert tokenizer.encode_batch(["hello world", ""]) == [[9, 10], []]
    assert tokenizer.tokenize("Hello!") == ["hello", "!"]


def test_words_up_to_200_characters_are_split_on_both_backends(tiny_vocab, backend):
    # google-research/bert's WordpieceTokenizer gives up on words longer than
    # 200 characters; 101 to 200 characters are split like shorter words.
    tokenizer = tokenization.FullTokenizer(tiny_vocab, do_lower_case=True, backend=backend)
    accented = "X\u0301" * 150  # 300 code points before the accents are stripped
    texts = ["x" * 150, "x" * 200, "x" * 201, "x" * 149 + "z", accented, "a " + "x" * 201 + " b"]
    assert tokenizer.tokenize_batch(texts) == [
        ["x"] + ["##x"] * 149, ["x"] + ["##x"] * 199, ["[UNK]"], ["[UNK]"],
        ["x"] + ["##x"] * 149, ["a", "[UNK]", "b"]]
    unk, x, xx = (tokenizer.vocab[t] for t in ("[UNK]", "x", "##x"))
    assert tokenizer.encode_batch(["x" * 150, "x" * 201]) == [[x] + [xx] * 149, [unk]]
    cased = tokenization.FullTokenizer(tiny_vocab, do_lower_case=False, backend=backend)
    assert cased.tokenize_batch(["x" * 150, "x" * 201]) == [["x"] + ["##x"] * 149, ["[UNK]"]]


def test_backends_agree_on_tiny_vocab(tiny_vocab):
    pytest.importorskip("tokenizers")
    texts = ["Hello, World!", "ΟΔΟΣ σ ς", "A\u0301 e\u0301 İ", "\u2e52x\u2e5d", "x\u0890y",
             "\U0002b820\U0002b91f", "a\u1abfb", "\ue000", "中文 ｶﾀｶﾅ", "a\u00a0b\u2028c\x85d"]
    for lower in (True, False):
        rust = tokenization.FullTokenizer(tiny_vocab, lower, backend="rust")
        python = tokenization.FullTokenizer(tiny_vocab, lower, backend="python")
        assert rust.tokenize_batch(texts) == python.tokenize_batch(texts)
        assert rust.encode_batch(texts) == python.encode_batch(texts)


class _RecordingRust(object):
    """Stands in for the Rust tokenizer and remembers what it was given."""

    def __init__(self, real):
        self.real, self.seen = real, []

    def encode_batch(self, texts, add_special_tokens):
        self.seen.extend(texts)
        return self.real.encode_batch(texts, add_special_tokens=add_special_tokens)


def test_rust_backend_routes_divergent_texts_to_python(tiny_vocab):
    pytest.importorskip("tokenizers")
    for lower, routed in ((True, ["ΟΔΟΣ", "x\ue000", "\u2e52", "a\U0002b820", "\u0378"]),
                          (False, ["x\ue000", "\u2e52", "a\U0002b820", "\u0378"])):
        tokenizer = tokenization.FullTokenizer(tiny_vocab, lower, backend="rust")
        tokenizer._rust = recorder = _RecordingRust(tokenizer._rust)
        kept = ["hello", "naïve café", "中文", "σ ς", ""]
        tokenizer.tokenize_batch(routed + kept)
        assert recorder.seen == kept
    # Without lower-casing a capital sigma is safe for Rust.
    cased = tokenization.FullTokenizer(tiny_vocab, False, backend="rust")
    cased._rust = recorder = _RecordingRust(cased._rust)
    cased.tokenize_batch(["ΟΔΟΣ"])
    assert recorder.seen == ["ΟΔΟΣ"]


def test_auto_backend_prefers_rust(tiny_vocab):
    try:
        import tokenizers  # noqa: F401
        expected = "rust"
    except ImportError:
        expected = "python"
    assert tokenization.FullTokenizer(tiny_vocab).backend == expected


# --------------------------------------------------------------------------
# encode_pairs.
# --------------------------------------------------------------------------

def test_truncated_pair_lengths_equals_the_original_loop():
    for budget in range(0, 30):
        for len_a in range(0, 50):
            for len_b in range(0, 50):
                assert (tokenization.truncated_pair_lengths(len_a, len_b, budget)
                        == original_truncation(len_a, len_b, budget)), (len_a, len_b, budget)


def test_encode_pairs_layout(tiny_vocab, backend):
    tokenizer = tokenization.FullTokenizer(tiny_vocab, backend=backend)
    input_ids, input_mask, segment_ids = tokenizer.encode_pairs(
        ["hello world", "the"], ["un", None], max_seq_length=8)
    for array in (input_ids, input_mask, segment_ids):
        assert array.dtype == np.int32 and array.shape == (2, 8)
    assert input_ids.tolist() == [[2, 9, 10, 3, 6, 3, 0, 0], [2, 5, 3, 0, 0, 0, 0, 0]]
    assert input_mask.tolist() == [[1, 1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0]]
    assert segment_ids.tolist() == [[0, 0, 0, 0, 1, 1, 0, 0], [0] * 8]
    single_ids, _, single_segments = tokenizer.encode_pairs(["hello world the"],
                                                            max_seq_length=4)
    assert single_ids.tolist() == [[2, 9, 10, 3]]
    assert single_segments.tolist() == [[0, 0, 0, 0]]
    empty = tokenizer.encode_pairs([], [], max_seq_length=5)
    assert [array.shape for array in empty] == [(0, 5)] * 3


def test_encode_pairs_truncates_like_run_classifier(tiny_vocab, backend):
    tokenizer = tokenization.FullTokenizer(tiny_vocab, backend=backend)
    words = ["hello", "world", "the", "a", "b", "x"]
    texts = [" ".join(words[(i + j) % 6] for j in range(n)) for i, n in
             enumerate([0, 1, 2, 3, 5, 8, 13, 21, 34])]
    texts_a = texts + texts[::-1] + ["", "hello"]
    texts_b = texts[::-1] + texts + [None, ""]
    for max_seq_length in (3, 4, 5, 8, 13, 64):
        expected = naive_pairs(tokenizer, texts_a, texts_b, max_seq_length)
        actual = tokenizer.encode_pairs(texts_a, texts_b, max_seq_length)
        for want, got in zip(expected, actual):
            np.testing.assert_array_equal(got, want)
    expected = naive_pairs(tokenizer, texts, None, 5)
    for want, got in zip(expected, tokenizer.encode_pairs(texts, max_seq_length=5)):
        np.testing.assert_array_equal(got, want)


def test_encode_pairs_on_long_texts_reads_only_their_heads_but_gets_them_right(
        tiny_vocab, backend):
    tokenizer = tokenization.FullTokenizer(tiny_vocab, backend=backend)
    texts = [
        "hello world " * 500,                   # head is enough
        "中文" * 600,                            # no space to cut at: whole text
        "\u200b " * 900 + "hello world " * 40,  # head has no tokens: encoded again
        "ΟΔΟΣ " * 300,                          # cut right after a final sigma
        "hello\nworld\n" * 300,                 # cut at a newline
    ]
    for max_seq_length in (8, 32):
        expected = naive_pairs(tokenizer, texts, texts[::-1], max_seq_length)
        actual = tokenizer.encode_pairs(texts, texts[::-1], max_seq_length)
        for want, got in zip(expected, actual):
            np.testing.assert_array_equal(got, want)
        expected = naive_pairs(tokenizer, texts, None, max_seq_length)
        actual = tokenizer.encode_pairs(texts, None, max_seq_length)
        for want, got in zip(expected, actual):
            np.testing.assert_array_equal(got, want)


def test_encode_pairs_rejects_bad_arguments(tiny_vocab):
    tokenizer = tokenization.FullTokenizer(tiny_vocab, backend="python")
    with pytest.raises(errors.InputError, match="max_seq_length=2"):
        tokenizer.encode_pairs(["a"], ["b"], max_seq_length=2)
    with pytest.raises(errors.InputError, match="max_seq_length=1"):
        tokenizer.encode_pairs(["a"], max_seq_length=1)
    with pytest.raises(ValueError, match="2 texts_a but 1 texts_b"):
        tokenizer.encode_pairs(["a", "b"], ["c"], max_seq_length=8)


# --------------------------------------------------------------------------
# Errors: one line naming the file or flag and what was expected.
# --------------------------------------------------------------------------

def assert_one_line_input_error(excinfo, *fragments):
    message = str(excinfo.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.parametrize("content, fragments", [
    (None, ["not found", "one WordPiece token per line"]),
    (b"", ["empty"]),
    (b"[PAD]\n[UNK]\nthe\n[CLS]\nthe\n", ["line 5", "duplicate token 'the'", "line 3"]),
    (b"[PAD]\n\xff\xfe\n", ["line 2", "not UTF-8"]),
])
def test_bad_vocab_files_raise_input_error(tmp_path, content, fragments):
    path = tmp_path / "my_vocab.txt"
    if content is not None:
        path.write_bytes(content)
    for load in (tokenization.load_vocab, tokenization.FullTokenizer):
        with pytest.raises(errors.InputError) as excinfo:
            load(str(path))
        assert_one_line_input_error(excinfo, str(path), *fragments)


@pytest.mark.parametrize("missing", ["[CLS]", "[SEP]", "[UNK]", "[PAD]"])
def test_encode_pairs_needs_the_special_tokens(tmp_path, missing, backend):
    if backend == "rust" and missing == "[UNK]":
        # The Rust backend cannot work without [UNK]: it refuses up front.
        with pytest.raises(errors.InputError) as excinfo:
            tokenization.FullTokenizer(
                write_vocab(tmp_path, [t for t in TINY_TOKENS if t != missing]), backend="rust")
        assert_one_line_input_error(excinfo, "vocab.txt", "no [UNK] token")
        return
    vocab_file = write_vocab(tmp_path, [t for t in TINY_TOKENS if t != missing])
    tokenizer = tokenization.FullTokenizer(vocab_file, backend=backend)
    assert tokenizer.tokenize("hello") == ["hello"]  # plain tokenizing still works
    with pytest.raises(errors.InputError) as excinfo:
        tokenizer.encode_pairs(["hello"], ["world"], max_seq_length=8)
    assert_one_line_input_error(excinfo, vocab_file, "missing " + missing,
                                "[PAD] [UNK] [CLS] [SEP]")


def test_unknown_backend_raises_input_error(tiny_vocab):
    with pytest.raises(errors.InputError) as excinfo:
        tokenization.FullTokenizer(tiny_vocab, backend="java")
    assert_one_line_input_error(excinfo, "'java'", "auto, rust or python")


@pytest.mark.parametrize("do_lower_case, checkpoint, wanted", [
    (False, "/models/uncased_L-12_H-768_A-12/bert_model.ckpt", "--do_lower_case=True"),
    (False, "gs://b/wwm_uncased_L-24_H-1024_A-16/bert_model.ckpt", "--do_lower_case=True"),
    (False, "uncased_L-2_H-128_A-2/bert_model.ckpt", "--do_lower_case=True"),
    (False, "x/multilingual_L-12_H-768_A-12/bert_model.ckpt", "--do_lower_case=True"),
    (False, "x/chinese_L-12_H-768_A-12/bert_model.ckpt.index", "--do_lower_case=True"),
    (True, "/models/cased_L-12_H-768_A-12/bert_model.ckpt", "--do_lower_case=False"),
    (True, "/m/cased_L-24_H-1024_A-16/bert_model.ckpt", "--do_lower_case=False"),
    (True, "/m/multi_cased_L-12_H-768_A-12/bert_model.ckpt", "--do_lower_case=False"),
    (True, "C:\\m\\wwm_cased_L-24_H-1024_A-16\\bert_model.ckpt", "--do_lower_case=False"),
])
def test_validate_case_rejects_contradictions(do_lower_case, checkpoint, wanted):
    with pytest.raises(errors.InputError) as excinfo:
        tokenization.validate_case_matches_checkpoint(do_lower_case, checkpoint)
    assert_one_line_input_error(excinfo, checkpoint, wanted,
                                "--do_lower_case=%s" % do_lower_case)


@pytest.mark.parametrize("do_lower_case, checkpoint", [
    (True, "/models/uncased_L-12_H-768_A-12/bert_model.ckpt"),
    (False, "/models/cased_L-12_H-768_A-12/bert_model.ckpt"),
    (True, "/m/my_model/bert_model.ckpt"),
    (False, "/models/uncased_L-12_H-768_A-12/model.ckpt-1000"),
    (False, ""),
    (True, None),
])
def test_validate_case_accepts_the_rest(do_lower_case, checkpoint):
    tokenization.validate_case_matches_checkpoint(do_lower_case, checkpoint)


# --------------------------------------------------------------------------
# Slow: the real vocabulary and corpora against the reference fixture.
# --------------------------------------------------------------------------

def digest(ids):
    return hashlib.sha1(" ".join(str(i) for i in ids).encode("ascii")).hexdigest()[:12]


def sha1_of(path):
    with open(path, "rb") as handle:
        return hashlib.sha1(handle.read()).hexdigest()


@pytest.fixture(scope="module")
def reference():
    with open(FIXTURE, encoding="ascii") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def real_vocab(minilm_dir, reference):
    path = os.path.join(minilm_dir, "vocab.txt")
    assert sha1_of(path) == reference["vocab_sha1"], "vocab.txt is not the one of the fixture"
    return path


@pytest.fixture(scope="module")
def corpora(corpora_dir, reference):
    """{file name: [text, ...]} of the three corpora, checked against the fixture."""
    texts = {}
    for name, entry in reference["corpora"].items():
        path = os.path.join(corpora_dir, name)
        assert sha1_of(path) == entry["file_sha1"], "%s differs from the fixture's" % name
        with open(path, encoding="utf-8-sig", newline="") as handle:
            texts[name] = [row[1] for row in csv.reader(handle)]
        assert len(texts[name]) == entry["count"]
    return texts


@pytest.fixture(scope="module")
def real_tokenizers(real_vocab):
    """{(backend, case): FullTokenizer} on the real vocabulary, for each available backend."""
    try:
        import tokenizers  # noqa: F401
        backends = BACKENDS
    except ImportError:
        backends = ("python",)
    return {(backend, case): tokenization.FullTokenizer(real_vocab, lower, backend=backend)
            for backend in backends for case, lower in CASES.items()}


def pick(real_tokenizers, backend, case):
    """The tokenizer for (backend, case), skipping the test when it is unavailable."""
    if (backend, case) not in real_tokenizers:
        pytest.skip("the tokenizers package is not installed")
    return real_tokenizers[backend, case]


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("backend", BACKENDS)
def test_corpus_digests_match_the_reference(real_tokenizers, corpora, reference, backend, case):
    tokenizer = pick(real_tokenizers, backend, case)
    for name, texts in corpora.items():
        got = [digest(ids) for ids in tokenizer.encode_batch(texts)]
        want = reference["corpora"][name][case]
        wrong = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
        # Only row numbers in the message: the corpus text stays out of logs.
        assert not wrong, "%s %s: %d texts differ, first rows %s" % (
            name, case, len(wrong), wrong[:10])
        if backend == "rust":
            routed = sum(1 for text in texts
                         if not text.isascii() and tokenizer._rust_unsafe.search(text))
            assert routed <= len(texts) // 100, "%d of %s went to Python" % (routed, name)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("backend", BACKENDS)
def test_tricky_strings_match_the_reference(real_tokenizers, reference, backend, case):
    tokenizer = pick(real_tokenizers, backend, case)
    items = reference["tricky"]
    got = tokenizer.encode_batch([item["text"] for item in items])
    for item, ids in zip(items, got):
        assert ids == item[case], "%s (%s): %s" % (
            item["name"], case, tokenizer.convert_ids_to_tokens(ids))
        assert tokenizer.tokenize(item["text"]) == tokenizer.convert_ids_to_tokens(item[case])


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_rust_equals_python_on_encode_pairs(real_tokenizers, corpora, case):
    texts = [text for name in sorted(corpora) for text in corpora[name]]
    texts_a, texts_b = texts[:-1], texts[1:]  # consecutive texts as pairs
    rust = pick(real_tokenizers, "rust", case)
    python = pick(real_tokenizers, "python", case)
    for b in (None, texts_b):
        for got, want in zip(rust.encode_pairs(texts_a, b, 128),
                             python.encode_pairs(texts_a, b, 128)):
            np.testing.assert_array_equal(got, want)
    # The head-only shortcut on real text, against full encodings.
    full = {t: ids for t, ids in zip(texts, python.encode_batch(texts))}
    cls, sep = python.vocab["[CLS]"], python.vocab["[SEP]"]
    input_ids, input_mask, segment_ids = python.encode_pairs(texts_a, texts_b, 128)
    for row, (a, b) in enumerate(zip(texts_a, texts_b)):
        len_a, len_b = original_truncation(len(full[a]), len(full[b]), 125)
        want = [cls] + full[a][:len_a] + [sep] + full[b][:len_b] + [sep]
        assert input_ids[row, :len(want)].tolist() == want
        assert not input_ids[row, len(want):].any()
        assert input_mask[row].sum() == len(want)
        assert segment_ids[row].sum() == len_b + 1


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_rust_agrees_outside_routed_chars(real_tokenizers, case):
    """Every code point the Rust backend keeps is split and normalized as in Python.

    Guards `_RUST_DIVERGENT_RANGES` against a new tokenizers or Python: each
    such character is tried alone, inside a word, between capitals, next to
    a combining mark and between accented capitals; all of it goes through
    Rust's normalizer and pre-tokenizer and through BasicTokenizer at once.
    """
    tokenizer = pick(real_tokenizers, "rust", case)
    unsafe = tokenizer._rust_unsafe
    chars = [chr(cp) for cp in range(0x110000)
             if not 0xD800 <= cp <= 0xDFFF and unsafe.match(chr(cp)) is None]
    assert len(chars) > 140000
    pieces = ["%s a%sb A%sB %s\u0301x x\u0301%s \u00c9%s\u00c9" % ((c,) * 6) for c in chars]
    text = " ".join(pieces)
    rust = tokenizer._rust
    rust_words = [w for w, _ in rust.pre_tokenizer.pre_tokenize_str(
        rust.normalizer.normalize_str(text))]
    python_words = tokenizer.basic_tokenizer.tokenize(text)
    if rust_words != python_words:
        basic = tokenizer.basic_tokenizer
        bad = [hex(ord(c)) for c, piece in zip(chars, pieces)
               if basic.tokenize(piece) != [w for w, _ in rust.pre_tokenizer.pre_tokenize_str(
                   rust.normalizer.normalize_str(piece))]]
        pytest.fail("Rust and Python differ on %d code points, e.g. %s; add them to "
                    "_RUST_DIVERGENT_RANGES" % (len(bad), bad[:20]))
