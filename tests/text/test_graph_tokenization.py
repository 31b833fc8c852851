"""Tests of text/graph_tokenization.py: in-graph WordPiece equal to text/tokenization.py.

The reference is always tokenization.py's Python path (backend="python") on
the same UTF-8 bytes that the graph gets. Fast tests use a tiny vocabulary
and hand-picked strings (the tricky strings of the reference fixture, plus
the cases only an in-graph version can get wrong: the final-sigma context,
the reordering of combining marks, invalid UTF-8) and export a tiny
Estimator whose SavedModel is loaded in a fresh interpreter. The slow ones
run the real bert-base-uncased vocabulary over the real corpora, and every
assigned code point through the basic tokenizer.
"""

import base64
import csv
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
from test_tokenization import FIXTURE, TINY_TOKENS, digest, write_vocab

from bert_toolkit import errors
from bert_toolkit.estimator_compat import tf_estimator
from bert_toolkit.text import graph_tokenization, tokenization

LAYOUT = tokenization.Layout(cls_id=2, sep_id=3, pad_id=0, seps_between=1, segment_b=1)

CASES = {"uncased": True, "cased": False}
FEATURES = ("input_ids", "input_mask", "segment_ids")
TOKENS = TINY_TOKENS + ["##e", "#", "$", "5", "##中", "ab", "##ab", "[MASK]x"]

# What an in-graph version can get wrong beyond the fixture's tricky strings.
EXTRA_TEXTS = [
    # Final sigma: the context skips case-ignorable characters (here ', . and
    # marks), reads across punctuation but not across whitespace, and is read
    # after cleaning (NUL and the soft hyphen are gone) and CJK spacing.
    "ΟΔΟΣ Σ ΣΑ", "AΣ'", "A'Σ", "AΣ.B", "AΣ.", "aΣ\u0301", "aΣ\u0301b", "A\u00adΣ", "AΣ\x00B",
    "A中Σ", "AΣ中", "ΣΣ ΣΣΣ", "\u1fbcΣ", "\u01c5Σ", "A\u0345Σ", "\u02b0Σ", "1Σ", "Σ1",
    # NFD reordering of the Mc marks that survive accent stripping; U+034F
    # (an Mn of class 0) blocks it; U+1D15E decomposes into two.
    "x\U0001d16d\U0001d165y", "a\u302e\u1715b", "a\u0301\U0001d16d\u0300\U0001d165",
    "a\U0001d16d\u034f\U0001d165", "\U0001d15e\U0001d16d", "\U0001d16d\U0001d165\u302e\u1715",
    # Case mappings and decompositions.
    "İ \u0130\u0307 \u1e9e ǄǅǇ \ufb03 \u2126\u212b\u037e\u0387\u1fef", "\uf900\ufa0e\U0002f800",
    "한국어 \u1100\u1161\u11a8", "\u0390 \u1f52 \u00c5\u0301",
    # Whitespace and controls Python treats specially.
    "a\x1cb\x1dc\x1ed\x1fe\x85f", "a\u180eb\u200bc", "a\x0bb\x0cc",
    # Words around the 200-character limit, before and after accent stripping.
    "x" * 150, "x" * 200, "x" * 201, "\u00c9" * 150, "E\u0301" * 150, "\u00c9" * 201,
    "un" + "x" * 199, "x" * 198 + "e\u0301\u0301",
    "", " ", "\u3000\u2028", "[MASK]x ##ab ab##ab",
]
# Bytes that are not UTF-8: dropped by the decoder as convert_to_unicode drops them.
BAD_UTF8 = [b"caf\xc3\xa9 \xff\xfe", b"\xed\xa0\x80x\xed\xbf\xbf", b"a\xc0\x80b",
            b"\xf4\x90\x80\x80y", b"\xe2\x82", b"\xe2\x82a\xf0\x9f\x98", b"ab\x80\xbf", b"\xf5z"]


def utf8(text):
    """The tf.string bytes of a text; a lone surrogate (fixture "surrogate") passes
    through as its three bytes, which both sides then drop as invalid UTF-8."""
    return text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")


@pytest.fixture(scope="module")
def reference():
    with open(FIXTURE, encoding="ascii") as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def tricky(reference):
    """Every hand-picked text, as bytes."""
    return [utf8(item["text"]) for item in reference["tricky"]] + [
        utf8(text) for text in EXTRA_TEXTS] + BAD_UTF8


@pytest.fixture(scope="module")
def tiny_vocab(tmp_path_factory):
    return write_vocab(tmp_path_factory.mktemp("vocab"), TOKENS)


def graph_runner(build, inputs):
    """Builds `build(*placeholders)` in a fresh TF1 graph: returns run(*feeds).

    inputs: how many tf.string [None] placeholders; run takes a list of
    bytes for each. The tables are initialized as an Estimator's export does
    it, with tables_initializer().
    """
    graph = tf.Graph()
    with graph.as_default():
        placeholders = [tf.compat.v1.placeholder(tf.string, [None]) for _ in range(inputs)]
        fetches = build(*placeholders)
        init = tf.compat.v1.tables_initializer()
    session = tf.compat.v1.Session(graph=graph)
    session.run(init)
    return lambda *feeds: session.run(fetches, dict(zip(placeholders, feeds)))


def run_in_graph(build, feeds):
    """graph_runner(build, len(feeds)) run once on feeds."""
    return graph_runner(build, len(feeds))(*feeds)


def assert_features_equal(got, want, what):
    for name, array in zip(FEATURES, want):
        assert got[name].dtype == np.int32 and got[name].shape == array.shape, (what, name)
        wrong = np.flatnonzero((got[name] != array).any(axis=1))
        assert not len(wrong), "%s %s: rows %s differ" % (what, name, wrong[:10].tolist())


# --------------------------------------------------------------------------
# Fast: tiny vocabulary, hand-picked strings.
# --------------------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(CASES))
def test_basic_words_equal_basic_tokenizer(tricky, case):
    got = run_in_graph(lambda text: graph_tokenization.basic_words(text, CASES[case]), [tricky])
    basic = tokenization.BasicTokenizer(do_lower_case=CASES[case])
    for text, words in zip(tricky, got.to_list()):
        assert [word.decode("utf-8") for word in words] == basic.tokenize(text), text


@pytest.mark.parametrize("case", sorted(CASES))
def test_encode_equals_encode_batch(tiny_vocab, tricky, case):
    tokenizer = tokenization.FullTokenizer(tiny_vocab, CASES[case], backend="python")
    got = run_in_graph(lambda text: graph_tokenization.encode(
        text, tokenizer.vocab, CASES[case]), [tricky]).to_list()
    want = tokenizer.encode_batch(tricky)
    for text, ids, expected in zip(tricky, got, want):
        assert ids == expected, (text, tokenizer.convert_ids_to_tokens(ids))


def pair_texts(tricky):
    """Hand-picked texts and word sequences of many lengths, for truncation."""
    words = ["hello", "world", "the", "a", "unaffable", "x", "中文", "don't"]
    built = [" ".join(words[(i + j) % len(words)] for j in range(n))
             for i, n in enumerate([0, 1, 2, 3, 5, 8, 13, 21, 34, 55])]
    return [utf8(text) for text in built] + tricky


@pytest.mark.parametrize("case", sorted(CASES))
def test_text_features_equal_encode_pairs(tiny_vocab, tricky, case):
    tokenizer = tokenization.FullTokenizer(tiny_vocab, CASES[case], backend="python")
    texts_a = pair_texts(tricky)
    texts_b = texts_a[::-1]
    pair_lengths, single_lengths = (3, 8, 64), (2, 64)

    def build(text_a, text_b):
        return ({n: graph_tokenization.text_features(text_a, text_b, tokenizer.vocab,
                                                     CASES[case], n) for n in pair_lengths},
                {n: graph_tokenization.text_features(text_a, None, tokenizer.vocab,
                                                     CASES[case], n) for n in single_lengths})
    pairs, singles = run_in_graph(build, [texts_a, texts_b])
    for n, got in pairs.items():
        assert_features_equal(got, tokenizer.encode_pairs(texts_a, texts_b, n), "pair %d" % n)
    for n, got in singles.items():
        assert_features_equal(got, tokenizer.encode_pairs(texts_a, None, n), "single %d" % n)


def test_pack_features_truncates_and_packs_like_encode_pairs():
    # Rows of every length from 0 to 12, paired with every other.
    lengths = [(a, b) for a in range(13) for b in range(13)]
    ids_a = [list(range(100, 100 + a)) for a, _ in lengths]
    ids_b = [list(range(200, 200 + b)) for _, b in lengths]
    for max_seq_length in range(3, 28):
        got = graph_tokenization.pack_features(
            tf.ragged.constant(ids_a, tf.int32, row_splits_dtype=tf.int64),
            tf.ragged.constant(ids_b, tf.int32, row_splits_dtype=tf.int64), 2, 3,
            max_seq_length)
        want = tokenization.pack_rows(ids_a, ids_b, max_seq_length, LAYOUT)
        assert_features_equal({k: v.numpy() for k, v in got.items()}, want,
                              "pair %d" % max_seq_length)
    for max_seq_length in (2, 3, 7, 14):
        got = graph_tokenization.pack_features(
            tf.ragged.constant(ids_a, tf.int32, row_splits_dtype=tf.int64), None, 2, 3,
            max_seq_length)
        want = tokenization.pack_rows(ids_a, [None] * len(ids_a), max_seq_length, LAYOUT)
        assert_features_equal({k: v.numpy() for k, v in got.items()}, want,
                              "single %d" % max_seq_length)


def test_long_texts_are_cut_to_heads_exactly(tiny_vocab):
    # Heads are cut before a space or newline; a head with too few words is
    # split again whole.
    tokenizer = tokenization.FullTokenizer(tiny_vocab, True, backend="python")
    texts = [utf8(text) for text in [
        "hello world " * 500,                   # the head is enough
        "中文" * 600,                            # no space to cut at: whole text
        "\u200b " * 900 + "hello world " * 40,  # head without words: split again
        "\u0301 " * 500 + "the " * 100,         # only marks, dropped when lower-casing
        "ΟΔΟΣ " * 300,                          # a final sigma just before the cut
        "hello\nworld\n" * 300,                 # cut at a newline
        "x" * 3000 + " hello",                  # one long word, then no space in reach
        " " + "a" * 2000,                       # a space at byte 0 only
        "un" + "x" * 150 + " " + "hello " * 300,  # a long word first
    ]] + [b"\xe2\x82 hello" * 400, b"caf\xc3\xa9 \xc3" * 500]  # bad UTF-8 around cuts
    for max_seq_length in (3, 32):
        got = run_in_graph(lambda a, b: (
            graph_tokenization.text_features(a, None, tokenizer.vocab, True, max_seq_length),
            graph_tokenization.text_features(a, b, tokenizer.vocab, True, max_seq_length)),
            [texts, texts[::-1]])
        assert_features_equal(got[0], tokenizer.encode_pairs(texts, None, max_seq_length),
                              "single %d" % max_seq_length)
        assert_features_equal(got[1], tokenizer.encode_pairs(texts, texts[::-1], max_seq_length),
                              "pair %d" % max_seq_length)


def test_truncated_pair_lengths_equal_tokenization():
    grid = np.array([(a, b, budget) for a in range(40) for b in range(40)
                     for budget in (0, 1, 2, 5, 17, 30, 125)], dtype=np.int64)
    got_a, got_b = graph_tokenization.truncated_pair_lengths(
        tf.constant(grid[:, 0]), tf.constant(grid[:, 1]), tf.constant(grid[:, 2]))
    want = [tokenization.truncated_pair_lengths(*row) for row in grid.tolist()]
    assert list(zip(got_a.numpy().tolist(), got_b.numpy().tolist())) == want


def test_eager_and_tf_function_give_the_graph_result(tiny_vocab):
    tokenizer = tokenization.FullTokenizer(tiny_vocab, True, backend="python")
    texts_a = [b"Hello, WORLD!", b"", "unaffable \u4e2d\u6587 \u03a3".encode("utf-8")]
    texts_b = [b"the", b"x " * 20, b""]
    want = tokenizer.encode_pairs(texts_a, texts_b, 9)

    def features(text_a, text_b):
        return graph_tokenization.text_features(text_a, text_b, tokenizer.vocab, True, 9)
    assert_features_equal({k: v.numpy() for k, v in features(
        tf.constant(texts_a), tf.constant(texts_b)).items()}, want, "eager")
    traced = tf.function(features)
    for _ in range(2):  # the second call reuses the trace and its tables
        assert_features_equal({k: v.numpy() for k, v in traced(
            tf.constant(texts_a), tf.constant(texts_b)).items()}, want, "tf.function")
    empty = features(tf.constant([], tf.string), tf.constant([], tf.string))
    assert [empty[k].shape.as_list() for k in FEATURES] == [[0, 9]] * 3


def test_tables_are_made_in_the_calling_graph(tiny_vocab):
    tokenizer = tokenization.FullTokenizer(tiny_vocab, True, backend="python")
    for shape in ([None], None):  # a text tensor of unknown rank is checked at run time
        graph = tf.Graph()
        with graph.as_default():
            text = tf.compat.v1.placeholder(tf.string, shape)
            features = graph_tokenization.text_features(text, None, tokenizer.vocab, True, 16)
            init = tf.compat.v1.tables_initializer()
        assert [features[k].shape.as_list() for k in FEATURES] == [[None, 16]] * 3
        assert all(features[k].dtype == tf.int32 for k in FEATURES)
        tables = [op for op in graph.get_operations() if op.type == "HashTableV2"]
        assert len(tables) == 2  # the tokens, and the "##" tokens without "##"
        initializers = graph.get_collection(tf.compat.v1.GraphKeys.TABLE_INITIALIZERS)
        assert len(initializers) == 2
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(init)
            got = session.run(features, {text: [b"Hello world!"]})
            assert_features_equal(got, tokenizer.encode_pairs([b"Hello world!"], None, 16),
                                  "shape %s" % shape)
            if shape is None:
                with pytest.raises(tf.errors.InvalidArgumentError):
                    session.run(features, {text: [[b"Hello"]]})


@pytest.mark.parametrize("tokens, message", [
    ([t for t in TINY_TOKENS if t != "[CLS]"], "missing [CLS]"),
    ([t for t in TINY_TOKENS if t not in ("[SEP]", "[PAD]")], "missing [PAD] [SEP]"),
    (TINY_TOKENS + ["hello"], "token 'hello' at ids 9 and %d" % len(TINY_TOKENS)),
])
def test_bad_vocabularies_raise_input_error(tokens, message):
    with pytest.raises(errors.InputError, match=re.escape(message)):
        graph_tokenization.text_features(tf.constant(["a"]), None, tokens, True, 8)


def test_too_small_max_seq_length_raises_input_error():
    with pytest.raises(errors.InputError, match="max_seq_length=2: expected at least 3"):
        graph_tokenization.text_features(tf.constant(["a"]), tf.constant(["b"]), TINY_TOKENS,
                                         True, 2)
    with pytest.raises(errors.InputError, match="max_seq_length=1: expected at least 2"):
        graph_tokenization.text_features(tf.constant(["a"]), None, TINY_TOKENS, True, 1)


# --------------------------------------------------------------------------
# The exported artefact: an Estimator SavedModel, loaded without this code.
# --------------------------------------------------------------------------

# Runs in a fresh interpreter that imports nothing but tensorflow: loads the
# SavedModel, calls its serving signature, and lists every op type of every
# graph and function in saved_model.pb.
LOADER = r"""
import base64, json, os, sys
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry

export_dir, request = sys.argv[1], json.load(sys.stdin)
model = tf.saved_model.load(export_dir)
inputs = {name: tf.constant([base64.b64decode(t) for t in texts])
          for name, texts in request.items()}
outputs = model.signatures["serving_default"](**inputs)
proto = saved_model_pb2.SavedModel()
with open(os.path.join(export_dir, "saved_model.pb"), "rb") as handle:
    proto.ParseFromString(handle.read())
ops, functions, init = set(), set(), []
for meta_graph in proto.meta_graphs:
    ops.update(node.op for node in meta_graph.graph_def.node)
    for function in meta_graph.graph_def.library.function:
        functions.add(function.signature.name)
        ops.update(node.op for node in function.node_def)
    init += [key for key in meta_graph.signature_def if key == "__saved_model_init_op"]
    init += [key for key in meta_graph.collection_def if "init_op" in key or "main_op" in key]
json.dump({"outputs": {k: v.numpy().tolist() for k, v in outputs.items()},
           "ops": sorted(ops - functions),
           "unregistered": sorted(op for op in ops - functions
                                  if op_def_registry.get(op) is None),
           "init": init,
           "text_modules": sorted(m for m in sys.modules if "tensorflow_text" in m)},
          sys.stdout)
"""

# Registered in TensorFlow, but they call back into the Python interpreter
# that made the graph: a model server has none.
PY_FUNC_OPS = {"PyFunc", "PyFuncStateless", "EagerPyFunc"}


def export_tiny_estimator(model_dir, export_base, vocab, do_lower_case, max_seq_length,
                          pair):
    """Trains a do-nothing Estimator one step, exports it with a raw-text signature.

    Its serving_input_receiver_fn takes tf.string [None] `text_a` (and
    `text_b`) placeholders and runs text_features; its model_fn returns the
    features as predictions. Returns the export directory.
    """
    def model_fn(features, labels, mode):
        step = tf.compat.v1.train.get_or_create_global_step()
        if mode == tf_estimator.ModeKeys.TRAIN:
            return tf_estimator.EstimatorSpec(mode, loss=tf.constant(0.0),
                                              train_op=tf.compat.v1.assign_add(step, 1))
        predictions = {name: tf.identity(features[name]) for name in FEATURES}
        return tf_estimator.EstimatorSpec(mode, predictions=predictions, export_outputs={
            "serving_default": tf_estimator.export.PredictOutput(predictions)})

    def serving_input_receiver_fn():
        receivers = {name: tf.compat.v1.placeholder(tf.string, [None], name=name)
                     for name in (("text_a", "text_b") if pair else ("text_a",))}
        features = graph_tokenization.text_features(
            receivers["text_a"], receivers.get("text_b"), vocab, do_lower_case, max_seq_length)
        return tf_estimator.export.ServingInputReceiver(features, receivers)

    estimator = tf_estimator.Estimator(model_fn, model_dir=model_dir)
    estimator.train(lambda: tf.data.Dataset.from_tensors(({"x": [0]}, [0])), steps=1)
    return estimator.export_saved_model(export_base, serving_input_receiver_fn).decode()


def load_in_fresh_python(export_dir, request):
    """Runs LOADER on export_dir in a new interpreter, away from the repository."""
    process = subprocess.run(
        [sys.executable, "-c", LOADER, export_dir], cwd=os.path.dirname(export_dir),
        input=json.dumps({name: [base64.b64encode(t).decode("ascii") for t in texts]
                          for name, texts in request.items()}),
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=""),
        capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads(process.stdout)


@pytest.mark.parametrize("case, pair", [("uncased", True), ("cased", False)])
def test_exported_estimator_serves_raw_text_with_core_ops_only(tmp_path, tiny_vocab, tricky,
                                                                case, pair):
    tokenizer = tokenization.FullTokenizer(tiny_vocab, CASES[case], backend="python")
    export_dir = export_tiny_estimator(str(tmp_path / "model"), str(tmp_path / "export"),
                                       tokenizer.vocab, CASES[case], 24, pair)
    texts_a = pair_texts(tricky)
    request = {"text_a": texts_a, "text_b": texts_a[::-1]} if pair else {"text_a": texts_a}
    answer = load_in_fresh_python(export_dir, request)

    want = tokenizer.encode_pairs(texts_a, request.get("text_b"), 24)
    assert_features_equal({name: np.array(answer["outputs"][name], np.int32)
                           for name in FEATURES}, want, "served " + case)
    assert answer["text_modules"] == []
    # Every op type is registered by the stock tensorflow package alone (the
    # interpreter loaded no op library), so a model server built on the same
    # TensorFlow core has a kernel for it, and none is a py_func.
    assert answer["unregistered"] == []
    assert not PY_FUNC_OPS & set(answer["ops"])
    for op in ("UnicodeDecode", "Substr", "LookupTableFindV2", "LookupTableImportV2"):
        assert op in answer["ops"]
    # The hash tables are filled by the SavedModel's init op (the Estimator's
    # default local init op runs tables_initializer()), which loaders run.
    assert answer["init"], "no init op in the SavedModel"


# --------------------------------------------------------------------------
# Slow: the real vocabulary, the real corpora, every code point.
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real_vocab(minilm_dir):
    return os.path.join(minilm_dir, "vocab.txt")


@pytest.fixture(scope="module")
def corpus_texts(corpora_dir, reference):
    """The 5,750 texts of the three corpora, in the fixture's order, as bytes."""
    texts = []
    for name in reference["corpora"]:
        with open(os.path.join(corpora_dir, name), encoding="utf-8-sig", newline="") as handle:
            texts += [row[1].encode("utf-8") for row in csv.reader(handle)]
    assert len(texts) == 5750
    return texts


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_real_corpora_equal_encode_pairs(real_vocab, corpus_texts, reference, case):
    tokenizer = tokenization.FullTokenizer(real_vocab, CASES[case], backend="python")
    run = graph_runner(lambda a, b: (
        graph_tokenization.text_features(a, None, tokenizer.vocab, CASES[case], 128),
        graph_tokenization.text_features(a, b, tokenizer.vocab, CASES[case], 128),
        graph_tokenization.encode(a, tokenizer.vocab, CASES[case])), 2)
    # Pairs of consecutive texts, so that every text is both a and b.
    texts_a, texts_b = corpus_texts, corpus_texts[1:] + corpus_texts[:1]
    want_digests = [d for entry in reference["corpora"].values() for d in entry[case]]
    start = time.time()
    for lo in range(0, len(texts_a), 256):
        a, b = texts_a[lo:lo + 256], texts_b[lo:lo + 256]
        single, pair, ids = run(a, b)
        # Only row numbers in a failure: the corpus text stays out of logs.
        assert_features_equal(single, tokenizer.encode_pairs(a, None, 128), "single @%d" % lo)
        assert_features_equal(pair, tokenizer.encode_pairs(a, b, 128), "pair @%d" % lo)
        # All the ids of every text, against the transformers-made fixture.
        wrong = [lo + row for row, (got, want) in enumerate(zip(
            ids.to_list(), want_digests[lo:lo + 256])) if digest(got) != want]
        assert not wrong, "rows %s: ids differ from the reference digests" % wrong[:10]
    print("%s: %d texts as single, pairs and whole in %.1f s" % (case, len(texts_a),
                                                                 time.time() - start))


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_tricky_strings_match_the_reference_fixture(real_vocab, reference, case):
    """The fixture's ids come from transformers' tokenizer set up as Google's."""
    vocab = tokenization.load_vocab(real_vocab)
    texts = [utf8(item["text"]) for item in reference["tricky"]]
    got = run_in_graph(lambda text: graph_tokenization.encode(text, vocab, CASES[case]),
                       [texts]).to_list()
    for item, ids in zip(reference["tricky"], got):
        if item["name"] == "surrogate":
            continue  # a str with lone surrogates cannot be UTF-8: not a tf.string text
        assert ids == item[case], item["name"]


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_assigned_code_point_in_context(case):
    """Each assigned code point, and every 61st other one, in contexts that
    exercise each table: alone, inside a word, before and after a capital
    sigma, between accented capitals (NFD and mark stripping around it) and
    after a mark it may be reordered with."""
    unassigned = tokenization.code_point_sets().unassigned
    skipped = np.zeros(0x110000, bool)
    for lo, hi in unassigned:
        skipped[lo:hi + 1] = True
    skipped[np.arange(0, 0x110000, 61)] = False
    skipped[0xD800:0xE000] = True
    chars = [chr(cp) for cp in np.flatnonzero(~skipped).tolist()]
    assert len(chars) > 150000
    texts = [("%s a%sb A%s\u03a3 A\u03a3%s \u00c9%s\u00c9 x\U0001d16d%s\u0301y"
              % ((char,) * 6)).encode("utf-8") for char in chars]
    run = graph_runner(lambda text: graph_tokenization.basic_words(text, CASES[case]), 1)
    basic = tokenization.BasicTokenizer(do_lower_case=CASES[case])
    bad = []
    for lo in range(0, len(texts), 20000):
        got = run(texts[lo:lo + 20000]).to_list()
        for char, text, words in zip(chars[lo:], texts[lo:], got):
            if [word.decode("utf-8") for word in words] != basic.tokenize(text):
                bad.append("U+%04X" % ord(char))
    assert not bad, "%d code points differ, e.g. %s" % (len(bad), bad[:20])
