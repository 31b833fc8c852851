"""Token labelling: conlleval's counting, windows, readers, and run_seq_labeling.py
end to end (subprocesses, as a user runs it) on tiny models and on the real
all-MiniLM-L6-v2 with the real tweet NER corpus."""

import itertools
import json
import os
import random
import re
import subprocess
import sys

import numpy as np
import pytest

from bert_toolkit.engine import export_layout
from bert_toolkit.errors import InputError
from bert_toolkit.serving import client as serving_client
from bert_toolkit.tasks.seq_labeling import conlleval, punctuation
from bert_toolkit.tasks.seq_labeling import features as seq_labeling_features
from bert_toolkit.tasks.seq_labeling import outputs as seq_labeling_outputs
from bert_toolkit.tasks.seq_labeling import readers as seq_labeling_readers
from bert_toolkit.text import tokenization

import script_runs
from tiny import REPO, TINY_WORDS, write_tiny_model

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


def run_script(*args, check=True):
    result = script_runs.run(["run_seq_labeling.py"] + list(args), env=ENV, timeout=600)
    if check and result.returncode != 0:
        raise AssertionError("exit %d:\n%s" % (result.returncode, result.stderr[-3000:]))
    return result


def model_args(model, data_dir, output_dir, *extra):
    return ["--data_dir=%s" % data_dir, "--vocab_file=%s" % model["vocab_file"],
            "--bert_config_file=%s" % model["bert_config_file"],
            "--init_checkpoint=%s" % model["init_checkpoint"],
            "--output_dir=%s" % output_dir] + list(extra)


# -- conlleval's counting -------------------------------------------------------------

@pytest.mark.parametrize("labels, spans", [
    (["B-PER", "I-PER", "O", "B-LOC"], [(0, 2, "PER"), (3, 4, "LOC")]),
    # A span may start with I- (IOB1, or a model's slip): after O it opens one.
    (["I-PER", "I-PER", "O", "I-LOC"], [(0, 2, "PER"), (3, 4, "LOC")]),
    (["O", "I-ORG", "B-ORG", "I-ORG"], [(1, 2, "ORG"), (2, 4, "ORG")]),
    # A change of type inside a span closes it and opens another.
    (["B-PER", "I-LOC", "I-LOC"], [(0, 1, "PER"), (1, 3, "LOC")]),
    (["B-PER", "I-PER", "B-PER"], [(0, 2, "PER"), (2, 3, "PER")]),
    # BIOES: E and S close a span; S-X S-X are two spans.
    (["S-PER", "S-PER", "O"], [(0, 1, "PER"), (1, 2, "PER")]),
    (["B-LOC", "I-LOC", "E-LOC", "I-LOC"], [(0, 3, "LOC"), (3, 4, "LOC")]),
    (["B-ORG", "E-ORG", "E-ORG"], [(0, 2, "ORG"), (2, 3, "ORG")]),
    (["B-PER", "S-PER", "E-PER"], [(0, 1, "PER"), (1, 2, "PER"), (2, 3, "PER")]),
    (["E-MISC"], [(0, 1, "MISC")]),
    # Types may hold hyphens: only the first one separates the prefix.
    (["B-geo-loc", "I-geo-loc", "I-other"], [(0, 2, "geo-loc"), (2, 3, "other")]),
    (["O", "O"], []),
])
def test_entity_spans_follow_conlleval(labels, spans):
    assert conlleval.entity_spans(labels) == spans


def test_entity_scores_of_a_hand_counted_document():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["I-ORG", "I-ORG", "O"],
            ["B-MISC", "I-MISC", "I-MISC"], ["S-LOC", "O"]]
    predicted = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "I-ORG", "O"],
                 ["B-MISC", "I-LOC", "I-LOC"], ["B-LOC", "O"]]
    counts = conlleval.entity_counts(gold, predicted)
    # [correct, true, predicted]: PER and the I-started ORG match exactly; MISC
    # loses its end to a type change; B-LOC alone is the same span as S-LOC.
    assert counts == {"PER": [1, 1, 1], "LOC": [1, 2, 2], "ORG": [1, 1, 2],
                      "MISC": [0, 1, 1]}
    report = conlleval.entity_report(counts, ["PER", "LOC", "ORG", "MISC", "DATE"])
    assert report["entity_precision"] == pytest.approx(3 / 6)
    assert report["entity_recall"] == pytest.approx(3 / 5)
    assert report["entity_f1"] == pytest.approx(2 * 0.5 * 0.6 / 1.1)
    assert report["entity_f1[ORG]"] == pytest.approx(2 / 3)
    assert report["entity_f1[DATE]"] == 0.0 and report["num_entities[DATE]"] == 0
    assert (report["num_entities"], report["num_predicted_entities"]) == (5, 6)


# conlleval's tables, transcribed: which (previous tag, tag) pairs end or start a
# chunk, in the version of the script extended with E- and S- (for B/I/O alone
# it is the original CoNLL-2000 script), and its counting loop, which tracks
# one candidate match word by word instead of comparing span lists.
_ENDS = {("B", "B"), ("B", "O"), ("B", "S"), ("I", "B"), ("I", "S"), ("I", "O"),
         ("E", "E"), ("E", "I"), ("E", "O"), ("E", "S"), ("E", "B"),
         ("S", "E"), ("S", "I"), ("S", "O"), ("S", "S"), ("S", "B")}
_STARTS = {("B", "B"), ("I", "B"), ("O", "B"), ("S", "B"), ("E", "B"),
           ("B", "S"), ("I", "S"), ("O", "S"), ("S", "S"), ("E", "S"),
           ("O", "I"), ("S", "I"), ("E", "I"), ("S", "E"), ("E", "E"), ("O", "E")}


def _conlleval_counts(gold_sentences, predicted_sentences):
    def end(prev, tag, prev_type, type_):
        return (prev, tag) in _ENDS or (prev != "O" and prev_type != type_)

    def start(prev, tag, prev_type, type_):
        return (prev, tag) in _STARTS or (tag != "O" and prev_type != type_)

    correct = found_gold = found_predicted = 0
    in_correct = False
    last_gold = last_predicted = ("O", "")
    # The sentence boundary reads as an O for both, as conlleval's -X- line does.
    stream = itertools.chain.from_iterable(
        list(zip(g, p)) + [("O", "O")] for g, p in zip(gold_sentences, predicted_sentences))
    for gold_label, predicted_label in stream:
        gold = conlleval.split_tag(gold_label)
        predicted = conlleval.split_tag(predicted_label)
        if in_correct:
            gold_ends = end(last_gold[0], gold[0], last_gold[1], gold[1])
            predicted_ends = end(last_predicted[0], predicted[0], last_predicted[1],
                                 predicted[1])
            if gold_ends and predicted_ends and last_gold[1] == last_predicted[1]:
                in_correct = False
                correct += 1
            elif gold_ends != predicted_ends or gold[1] != predicted[1]:
                in_correct = False
        gold_starts = start(last_gold[0], gold[0], last_gold[1], gold[1])
        predicted_starts = start(last_predicted[0], predicted[0], last_predicted[1],
                                 predicted[1])
        if gold_starts and predicted_starts and gold[1] == predicted[1]:
            in_correct = True
        found_gold += gold_starts
        found_predicted += predicted_starts
        last_gold, last_predicted = gold, predicted
    return correct, found_gold, found_predicted


@pytest.mark.parametrize("prefixes", ["BIO", "BIOES"])
def test_span_matching_equals_conllevals_counting_loop(prefixes):
    rng = random.Random(7)
    tags = ["O"] + ["%s-%s" % (p, t) for p in prefixes if p != "O" for t in ("PER", "LOC")]
    for _ in range(300):
        lengths = [rng.randint(1, 9) for _ in range(rng.randint(1, 4))]
        gold = [[rng.choice(tags) for _ in range(n)] for n in lengths]
        # Mostly right, as a model's answers are, so that matches happen.
        predicted = [[label if rng.random() < 0.7 else rng.choice(tags) for label in s]
                     for s in gold]
        counts = conlleval.entity_counts(gold, predicted)
        totals = tuple(sum(c[i] for c in counts.values()) for i in range(3))
        assert totals == _conlleval_counts(gold, predicted), (gold, predicted)


# -- windows ------------------------------------------------------------------------


def test_window_features_put_labels_on_first_sub_tokens():
    # 7 sub-tokens; windows of 4 (max_seq_length 6), one sub-token apart (stride 1).
    pieces = [[11], [12, 13, 14], [15], [16, 17]]
    layout = tokenization.Layout(cls_id=2, sep_id=3, pad_id=0, seps_between=1, segment_b=1)
    rows = list(seq_labeling_features.encode_sentences([pieces], 6, 1, layout,
                                                       [[0, 1, 2, 3]]))
    assert [list(r["input_ids"]) for r in rows] == [[2, 11, 12, 13, 14, 3],
                                                    [2, 12, 13, 14, 15, 3],
                                                    [2, 15, 16, 17, 3, 0]]
    assert [list(r["label_mask"]) for r in rows] == [[0, 1, 1, 0, 0, 0], [0, 1, 0, 0, 1, 0],
                                                     [0, 1, 1, 0, 0, 0]]
    assert list(rows[0]["label_ids"][:3]) == [0, 0, 1]
    merged = seq_labeling_features.merge_windows(
        [dict(r, label_ids=r["word_ids"] + 100) for r in rows], [4])
    assert list(merged) == [[100, 101, 102, 103]]


# -- readers ------------------------------------------------------------------------

def test_conll_reader_skips_docstart_and_reads_spaces_and_token_only_files(tmp_path):
    path = tmp_path / "train.txt"
    path.write_bytes(b"\xef\xbb\xbf-DOCSTART- -X- O\n\nEU NNP B-ORG\nrejects VBZ O\n  \n"
                     b"Peter NNP B-PER\r\n")
    sentences = seq_labeling_readers.read_conll(str(path), "train", labelled=True)
    assert [s.words for s in sentences] == [("EU", "rejects"), ("Peter",)]
    assert [s.labels for s in sentences] == [("B-ORG", "O"), ("B-PER",)]
    assert sentences[0].columns[0] == ("EU", "NNP", "B-ORG") and sentences[0].delimiter == " "
    assert sentences[1].line_numbers == (6,)
    test = tmp_path / "test.txt"
    test.write_text("New\nYork\n\n-DOCSTART-\nbig\n")
    sentences = seq_labeling_readers.read_conll(str(test), "predict", labelled=False)
    assert [s.words for s in sentences] == [("New", "York"), ("big",)]
    assert sentences[0].labels is None and sentences[0].columns == (("New",), ("York",))


def test_punctuation_labels_and_restored_text():
    words, labels = punctuation.punctuation_labels(
        'Well, "is it?" he said... (Really) don\'t stop : 3.5 ; done !')
    assert words == ("Well", "is", "it", "he", "said", "Really", "don't", "stop", "3.5",
                     "done")
    assert labels == ("COMMA", "O", "QUESTION", "O", "PERIOD", "O", "O", "COMMA", "PERIOD",
                      "PERIOD")
    assert punctuation.restore_text(words[:3], labels[:3]) == "Well, is it?"
    assert punctuation.punctuation_labels(" , .. ") == ((), ())


# -- end to end on tiny models ---------------------------------------------------------

def _tagged_sentence(rng, length):
    """Tiny-vocabulary words tagged with a learnable rule: praise words are B-POS
    (a following "music" I-POS), blame words B-NEG."""
    rows = []
    while len(rows) < length:
        word = rng.choice(TINY_WORDS + ["zzz"])  # zzz is no vocabulary word: [UNK]
        if word in ("good", "great", "fine"):
            rows.append((word, "B-POS"))
            if rng.random() < 0.5:
                rows.append(("music", "I-POS"))
        else:
            rows.append((word, "B-NEG" if word in ("bad", "awful", "dull") else "O"))
    return rows


def _write_conll(path, sentences, with_labels=True):
    with open(path, "w") as f:
        for rows in sentences:
            for word, label in rows:
                f.write("%s\t%s\n" % (word, label) if with_labels else word + "\n")
            f.write("\n")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return write_tiny_model(str(tmp_path_factory.mktemp("seq_model")))


def test_long_sentences_get_a_label_for_every_word_in_eval_predict_and_export(
        tiny_model, tmp_path):
    rng = random.Random(0)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    _write_conll(str(data_dir / "train.txt"), [_tagged_sentence(rng, rng.randint(3, 12))
                                               for _ in range(48)])
    # Dev and test: the same sentences of 20 to 45 words, far longer than the
    # 14 sub-tokens a window of max_seq_length 16 holds.
    long_sentences = [_tagged_sentence(rng, rng.randint(20, 45)) for _ in range(6)]
    _write_conll(str(data_dir / "dev.txt"), long_sentences)
    _write_conll(str(data_dir / "test.txt"), long_sentences)
    output_dir = str(tmp_path / "out")
    run_script("--task_name=ner", *model_args(
        tiny_model, data_dir, output_dir, "--max_seq_length=16", "--window_stride=5",
        "--learning_rate=3e-3", "--num_train_epochs=4", "--train_batch_size=8",
        "--do_train", "--do_eval", "--do_predict", "--save_for_serving"))

    with open(os.path.join(output_dir, "test_results.txt")) as f:
        blocks = f.read().split("\n\n")
    assert blocks[-1] == ""
    rows = [[line.split("\t") for line in block.split("\n")] for block in blocks[:-1]]
    assert [[(r[0], r[1]) for r in block] for block in rows] == long_sentences
    predicted = [[r[2] for r in block] for block in rows]
    with open(os.path.join(output_dir, "eval_results.json")) as f:
        report = json.load(f)
    # Dev is the test set: the streamed metrics, weighted by the windows' word_ids,
    # and the merged predictions must count the same words the same way.
    gold = [[label for _, label in s] for s in long_sentences]
    assert report["num_words"] == sum(map(len, gold))
    assert report["accuracy"] == pytest.approx(
        np.mean([g == p for gs, ps in zip(gold, predicted) for g, p in zip(gs, ps)]))
    counts = conlleval.entity_counts(gold, predicted)
    assert report["entity_f1"] == pytest.approx(
        conlleval.entity_report(counts)["entity_f1"])
    assert report["entity_f1"] == pytest.approx(seq_labeling_outputs.score_predictions_file(
        os.path.join(output_dir, "test_results.txt"))["entity_f1"])
    assert report["entity_f1"] > 0.3  # it learned, so the comparison means something
    assert set(report) >= {"entity_precision[POS]", "entity_recall[NEG]", "eval_loss"}

    # The SavedModel: per-token label_ids [batch, seq] and probabilities
    # [batch, seq, labels]; its config lets the client cut and merge windows.
    import tensorflow as tf
    serving = os.path.join(output_dir, "serving")
    version_dir = export_layout.resolve_version_dir(serving)[1]
    vocab, config_path = export_layout.resolve_assets(serving)
    config = serving_client.load_serving_config(config_path)
    assert (config["task"], config["window_stride"], config["max_seq_length"]) == (
        "token_classification", 5, 16)
    from bert_toolkit.text import tokenization
    tokenizer = tokenization.FullTokenizer(vocab, config["do_lower_case"])
    pairs = [(" ".join(word for word, _ in s), None) for s in long_sentences] + [("", None)]
    features, layout = serving_client.TASKS["token_classification"].encode(
        tokenizer, pairs, config)
    signature = tf.saved_model.load(version_dir).signatures["serving_default"]
    outputs = signature(**{name: tf.constant(v) for name, v in features.items()})
    num_windows = len(features["input_ids"])
    assert outputs["label_ids"].shape == (num_windows, 16)
    assert outputs["probabilities"].shape == (num_windows, 16, len(config["labels"]))
    results = serving_client.TASKS["token_classification"].results(
        {"label_ids": outputs["label_ids"].numpy().tolist()}, config, layout)
    assert [record["labels"] for record, _ in results] == predicted + [[]]
    assert results[0][1][0] == "%s/%s" % (long_sentences[0][0][0], predicted[0][0])


def test_punct_trains_on_two_cpu_replicas_and_writes_restored_text(tiny_model, tmp_path):
    rng = random.Random(1)
    data_dir = tmp_path / "data"
    data_dir.mkdir()

    def text_line():
        sentences = []
        for _ in range(rng.randint(1, 3)):
            words = [rng.choice(TINY_WORDS[:15]) for _ in range(rng.randint(2, 7))]
            if rng.random() < 0.5:
                words.insert(rng.randint(1, len(words)), "but")
                words[words.index("but") - 1] += ","
            sentences.append(" ".join(words) + rng.choice([".", ".", "?"]))
        return " ".join(sentences)

    for name, count in (("train.txt", 64), ("dev.txt", 16)):
        (data_dir / name).write_text("\n".join(text_line() for _ in range(count)) + "\n")
    test_lines = ["the movie was good but the plot was dull the acting was fine",
                  "a very bad film , and the music ?", "awful"]
    (data_dir / "test.txt").write_text("\n".join(test_lines) + "\n\n")
    output_dir = str(tmp_path / "out")
    result = run_script("--task_name=punct", *model_args(
        tiny_model, data_dir, output_dir, "--max_seq_length=12", "--num_cpu_replicas=2",
        "--train_batch_size=4", "--learning_rate=3e-3", "--num_train_epochs=2",
        "--do_train", "--do_eval", "--do_predict"))
    assert "2 replicas x 4 examples per replica" in result.stderr
    with open(os.path.join(output_dir, "eval_results.json")) as f:
        report = json.load(f)
    assert set(report) >= {"accuracy", "f1[COMMA]", "f1[PERIOD]", "f1[QUESTION]",
                           "macro_f1", "eval_loss"}
    assert report["num_words"] == sum(len(punctuation.punctuation_labels(line)[0])
                                      for line in (data_dir / "dev.txt").read_text()
                                      .splitlines())
    with open(os.path.join(output_dir, "test_restored.txt")) as f:
        restored = f.read().splitlines()
    assert len(restored) == 3
    for line, text in zip(restored, test_lines):
        words = punctuation.punctuation_labels(text)[0]
        assert re.sub(r"[,.?]", "", line).split() == list(words)
    with open(os.path.join(output_dir, "test_results.txt")) as f:
        tagged = [line.split("\t") for line in f.read().split("\n") if line]
    assert [len(row) for row in tagged] == [2] * len(tagged)
    assert {label for _, label in tagged} <= set(punctuation.PUNCT_LABELS)


def test_client_restores_punctuation_from_window_answers(tiny_model):
    from bert_toolkit.text import tokenization
    tokenizer = tokenization.FullTokenizer(tiny_model["vocab_file"], True)
    config = serving_client.parse_serving_config(json.dumps(dict(
        seq_labeling_outputs.serving_config("punct", 2), labels=list(punctuation.PUNCT_LABELS),
        max_seq_length=6, do_lower_case=True)))
    pairs = [("the movie, was good; the plot was", None), ("", None)]
    features, layout = serving_client.TASKS["token_classification"].encode(
        tokenizer, pairs, config)
    assert sorted(features) == ["input_ids", "input_mask", "segment_ids"]
    # A server answering COMMA for "movie" and "plot", PERIOD for "was", O elsewhere.
    answer = {"movie": 1, "plot": 1, "was": 2}
    inverse = {i: token for token, i in tokenizer.vocab.items()}
    label_ids = [[answer.get(inverse[i], 0) for i in row] for row in features["input_ids"]]
    ((record, fields), (empty, empty_fields)) = serving_client.TASKS[
        "token_classification"].results({"label_ids": label_ids}, config, layout)
    assert record["words"] == ["the", "movie", "was", "good", "the", "plot", "was"]
    assert fields == ["the movie, was. good the plot, was."]
    assert (empty["words"], empty_fields) == ([], [""])


# -- bad input (the command-line cases are in tests/test_bad_input.py) ---------------

def test_readers_raise_input_errors_naming_file_and_line(tmp_path):
    path = tmp_path / "dev.txt"
    path.write_bytes(b"a\tO\nb\xe9\tO\n")
    with pytest.raises(InputError, match=re.escape(str(path)) + ":2: not valid utf-8"):
        seq_labeling_readers.read_conll(str(path), "eval", labelled=True)
    path.write_text("a\tO\n\tO\n")
    with pytest.raises(InputError, match=":2: the token \\(first column\\) is empty"):
        seq_labeling_readers.read_conll(str(path), "eval", labelled=True)
    path.write_text(" , .\n")
    with pytest.raises(InputError, match="no sentences"):
        seq_labeling_readers.read_punctuated_text(str(path), "eval", labelled=True)


# -- the real model on real tweets --------------------------------------------------------

# A tenth of an epoch (47 updates of 4 tweets) takes the model from the uniform guess
# over the 21 tags (loss ln 21 = 3.04) to the most common one, O, on almost every
# word: measured, final training loss 0.135, dev loss 0.294 and token accuracy 0.945
# (O everywhere scores 0.945), entity F1 0. Entities take a few hundred updates more
# (docs/seq_labeling.md: F1 0.50 after the script's default 3 epochs); that learning
# is asserted on real text by the part-of-speech tagger of tests/test_api.py.
TWEET_EPOCHS = "0.1"


@pytest.mark.slow
def test_the_ner_script_runs_on_real_tweets_from_fetch_to_export(tmp_path, minilm_checkpoint):
    """scripts/run_seq_labeling.sh itself: the real all-MiniLM-L6-v2 fine-tuned on
    the real tweet NER corpus (seeded 80/10/10 split), scored on dev with
    conlleval's counting, every test word predicted, exported."""
    env = dict(ENV, SKIP_SETUP="1", PYTHON=sys.executable, EPOCHS=TWEET_EPOCHS,
               BATCH_SIZE="4", LEARNING_RATE="5e-5", RUN_DIR=str(tmp_path / "run"),
               MODEL_DIR=os.path.dirname(minilm_checkpoint["init_checkpoint"]))
    result = subprocess.run(["bash", "scripts/run_seq_labeling.sh"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "1919 examples x 0.1 epochs = 47 optimizer steps" in result.stdout, result.stdout
    final_loss = float(re.search(r"^step 47/47 \(100%\), .*, loss ([0-9.]+),",
                                 result.stdout, re.M).group(1))
    assert final_loss < 1.0, result.stdout
    with open(str(tmp_path / "run" / "ner" / "eval_results.json")) as f:
        report = json.load(f)
    assert report["num_entities"] > 100 and report["num_words"] > 4000
    assert report["eval_loss"] < 1.0 and report["accuracy"] > 0.9, report
    assert 0.0 <= report["entity_f1"] <= 1.0
    assert re.search(r"entity_f1 = 0\.\d+ \(\d+ entities\)", result.stdout), result.stdout
    # Every test word came back, in order, with gold and predicted tag.
    source = (tmp_path / "run" / "data" / "test.txt").read_text().split("\n")
    predicted = (tmp_path / "run" / "ner" / "test_results.txt").read_text().split("\n")
    assert [line.rsplit("\t", 1)[0] for line in predicted] == source
    assert os.path.isfile(os.path.join(export_layout.resolve_version_dir(
        str(tmp_path / "run" / "ner" / "serving"))[1], "saved_model.pb"))
