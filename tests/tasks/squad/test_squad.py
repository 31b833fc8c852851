"""SQuAD: reading and windows, the official metric, answers from logits, and
run_squad.py end to end (forked runs of the script on tiny models, the bad
inputs among them), plus one test on the real all-MiniLM-L6-v2."""

import collections
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from bert_toolkit.errors import InputError
from bert_toolkit.serving import client as serving_client
from bert_toolkit.tasks.squad import answers as squad_answers
from bert_toolkit.tasks.squad import data as squad_data
from bert_toolkit.tasks.squad import evaluation as squad_eval
from bert_toolkit.tasks.squad import features as squad_features
from bert_toolkit.tasks.squad import task as squad
from bert_toolkit.text import tokenization
from bert_toolkit.text import windows as text_windows

from bad_input import REPO, check_one_error_line, run_commands
from tiny import TINY_WORDS, write_tiny_model

FIXTURES = os.path.join(REPO, "tests", "fixtures", "squad")
SETTINGS = {"max_seq_length": 32, "doc_stride": 8, "max_query_length": 8,
            "n_best_size": 5, "max_answer_length": 10, "do_lower_case": True,
            "version_2_with_negative": False, "null_score_diff_threshold": 0.0}


def squad_json(paragraphs, version="1.1"):
    """A SQuAD file's object from [(context, [qa dict, ...]), ...]."""
    return {"version": version, "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": qas} for context, qas in paragraphs]}]}


def qa(qid, question, context, answer, **extra):
    """A qas entry whose answer is the first occurrence of `answer` in `context`."""
    entry = {"id": qid, "question": question,
             "answers": [{"text": answer, "answer_start": context.index(answer)}]}
    entry.update(extra)
    return entry


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        f.write(value if isinstance(value, str) else json.dumps(value))
    return str(path)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return write_tiny_model(str(tmp_path_factory.mktemp("tiny_squad")))


@pytest.fixture(scope="module")
def tokenizer(tiny_model):
    return tokenization.FullTokenizer(tiny_model["vocab_file"], True)


def toy_file(rng, paragraphs, impossible=False):
    """Learnable toy questions on the tiny vocabulary: the answer is the one
    sentiment word of a context of filler words (v2.0: plus an unanswerable
    question per paragraph)."""
    entries = []
    for p in range(paragraphs):
        words = [rng.choice(TINY_WORDS[:9]) for _ in range(rng.randint(20, 50))]
        position = rng.randint(0, len(words))
        words.insert(position, rng.choice(["good", "great", "awful"]))
        context = " ".join(words)
        start = len(" ".join(words[:position])) + (1 if position else 0)
        qas = [{"id": "p%d" % p, "question": "is the movie good",
                "answers": [{"text": words[position], "answer_start": start}]}]
        if impossible:
            qas[0]["is_impossible"] = False
            qas.append({"id": "n%d" % p, "question": "music", "answers": [],
                        "is_impossible": True})
        entries.append((context, qas))
    return squad_json(entries, "v2.0" if impossible else "1.1")


# -- reading -----------------------------------------------------------------------------

def test_words_and_answer_words_follow_googles_whitespace(tmp_path):
    context = "Steve  Smith's\tbook\u202f(1895-1943) sold\u00a0well."
    words, char_to_word = squad_data.split_words(context)
    # U+202F splits words as in Google's reader; U+00A0 does not.
    assert words == ["Steve", "Smith's", "book", "(1895-1943)", "sold\u00a0well."]
    assert char_to_word[context.index("book")] == 2
    assert char_to_word[5] == 0  # a space belongs to the word before it
    path = write_json(tmp_path / "a.json", squad_json([(context, [
        qa("1", "who", context, "Smith"), qa("2", "when", context, "1895")])]))
    read = squad_data.read_squad(path, True, False)
    first, second = read.questions
    assert (first.start_word, first.end_word, first.answer_text) == (1, 1, "Smith")
    assert (second.start_word, second.end_word) == (3, 3)
    assert first.paragraph is second.paragraph and read.has_answers and not read.skipped


def test_training_questions_googles_reader_cannot_use_are_left_out_by_id(tmp_path):
    """Google's two rules: "a\u00a0b" sits inside the one word "a\u00a0b" (a
    no-break space does not split words) but reads "a b" once whitespace is
    normalised, so training cannot point at it; an answer whose answer_start
    does not hold its text (or lies outside the context) cannot be located.
    Both are left out of training, by id and reason, and said in one line;
    predicting keeps them all (the official scores read only the texts)."""
    context = "x a\u00a0b y"
    moved = qa("moved", "where", context, "y")
    moved["answers"][0]["answer_start"] = 0
    outside = qa("outside", "how", context, "y")
    outside["answers"][0]["answer_start"] = 99
    path = write_json(tmp_path / "a.json", squad_json([(context, [
        qa("kept", "what", context, "x"), qa("odd", "which", context, "a\u00a0b"), moved,
        outside])]))
    read = squad_data.read_squad(path, True, False)
    assert [q.qas_id for q in read.questions] == ["kept"]
    assert read.skipped == [("odd", "unrecoverable"), ("moved", "misplaced"),
                            ("outside", "misplaced")]
    assert squad_data.left_out_line("a.json", read.skipped) == (
        "a.json: 3 question(s) left out of training, as Google's reader leaves them out: "
        "2 where the answer text is not at its answer_start (moved, outside); 1 where "
        "the answer text is not in the words it covers once whitespace is normalised (odd)")
    predicted = squad_data.read_squad(path, False, False)
    assert not predicted.skipped and len(predicted.questions) == 4
    assert predicted.questions[2].gold_answers == ["y"]


def test_fixtures_read_as_the_shared_files_describe():
    train = squad_data.read_squad(os.path.join(FIXTURES, "train-v1.1-small.json"), True,
                                  False)
    assert len(train.questions) == 52 and train.skipped == []
    dev = squad_data.read_squad(os.path.join(FIXTURES, "dev-v2.0-small.json"), False, True)
    impossible = [q for q in dev.questions if q.is_impossible]
    assert dev.has_answers and 0 < len(impossible) < len(dev.questions)
    assert all(q.gold_answers == [] for q in impossible)
    with pytest.raises(InputError, match=r"is_impossible: true: .*--version_2_with_negative"):
        squad_data.read_squad(os.path.join(FIXTURES, "dev-v2.0-small.json"), False, False)


# -- windows -----------------------------------------------------------------------------


def test_training_windows_map_back_to_the_exact_answer(tokenizer, tmp_path):
    context = ("the movie was good and the plot was fine , but the music was awful . "
               "the acting , the story and the film were dull and not great .")
    qas = [qa("q%d" % i, "is the movie good", context, answer)
           for i, answer in enumerate(["good", "the music was awful", "dull", "great",
                                       "movie", "story and the film"])]
    # Part of a word: the pieces movie ##s narrow to the answer's own piece.
    plural = context.replace("movie", "movies")
    path = write_json(tmp_path / "w.json", squad_json([
        (context, qas), (plural, [qa("sub", "the", plural, "movie")])]))
    questions = squad_data.read_squad(path, True, False).questions
    found = collections.Counter()
    for index, window in squad_features.windows_of(questions, tokenizer, 24, 5, 6, True):
        question = questions[index]
        assert len(window.tokens) <= 24
        if window.start_position == 0:
            assert window.end_position == 0
            continue
        text = squad_answers.span_text(window, window.start_position,
                                       window.end_position, question.paragraph, True)
        assert text == question.answer_text, (question.qas_id, window.tokens)
        found[question.qas_id] += 1
    assert set(found) == {q.qas_id for q in questions}  # every answer in some window
    # Every context piece is scored in exactly one window (its max-context one).
    for tokenized in squad_features.tokenize_questions(questions[:1], tokenizer, 6):
        windows = squad_features.question_windows(tokenized, 24, 5)
        spans = text_windows.token_windows(len(tokenized.pieces),
                                           24 - len(tokenized.query_tokens) - 3, 5)
        offset = len(tokenized.query_tokens) + 2
        scored = collections.Counter()
        for (start, _), window in zip(spans, windows):
            for position, is_best in window.is_max_context.items():
                assert window.tokens[position] == tokenized.pieces[start + position - offset]
                scored[start + position - offset] += is_best
        assert len(windows) > 2
        assert scored == collections.Counter(range(len(tokenized.pieces)))


def test_feature_rows_hold_windows_and_positions(tokenizer, tmp_path):
    context = "the plot was fine but the music was awful and the film was good ."
    path = write_json(tmp_path / "f.json", squad_json([(context, [
        qa("a", "is the movie good", context, "awful")])]))
    questions = squad_data.read_squad(path, True, False).questions
    rows = squad_features.feature_rows(questions, tokenizer, 16, 4, 4, True)
    windows = [w for _, w in squad_features.windows_of(questions, tokenizer, 16, 4, 4, True)]
    assert len(rows) == len(windows) > 1
    for row, window in zip(rows, windows):
        ids = tokenizer.convert_tokens_to_ids(window.tokens)
        assert list(row["input_ids"][:len(ids)]) == ids and not row["input_ids"][len(ids):].any()
        assert row["input_mask"].sum() == len(ids)
        # segment 1 from the first context piece through the last [SEP]
        assert list(row["segment_ids"][:len(ids)]) == [0] * 6 + [1] * (len(ids) - 6)
        assert row["start_positions"][0] == window.start_position
    predict_rows = squad_features.feature_rows(questions, tokenizer, 16, 4, 4, False)
    assert [r["example_index"][0] for r in predict_rows] == [0] * len(rows)
    assert "start_positions" not in predict_rows[0]


# -- the official metric ---------------------------------------------------------------

def test_normalisation_and_scores_on_hand_made_cases():
    assert squad_eval.normalize_answer("The  Cat's, HAT!") == "cats hat"
    assert squad_eval.normalize_answer("an apple a day") == "apple day"
    assert squad_eval.normalize_answer("theatre") == "theatre"  # whole words only
    assert squad_eval.exact_match("the Eiffel tower.", "Eiffel Tower") == 1.0
    # 2 shared words of 2 predicted and 4 gold: P 1, R 0.5, F1 2/3.
    assert squad_eval.f1("the cat sat", "a cat sat on mat") == pytest.approx(2 / 3)
    assert squad_eval.f1("cat cat", "cat") == pytest.approx(2 * 0.5 / 1.5)  # multisets
    assert squad_eval.f1("dog", "cat") == 0.0
    gold = {"1": ["Denver Broncos", "the Broncos"], "2": ["1973"], "3": ["in October"]}
    predictions = {"1": "Broncos", "2": "1973", "4": "extra"}
    report = squad_eval.evaluate(gold, predictions)
    # 1: EM 1 (the Broncos), F1 1; 2: 1, 1; 3: missing, 0.
    assert report == {"exact_match": pytest.approx(200 / 3), "f1": pytest.approx(200 / 3),
                      "total": 3}


def test_v2_scores_split_and_best_threshold():
    gold = {"a": ["Paris"], "b": [], "c": ["red wine"], "d": []}
    predictions = {"a": "Paris", "b": "", "c": "white wine", "d": "Rome"}
    null_odds = {"a": -3.0, "b": 2.0, "c": -1.0, "d": 0.5}
    report = squad_eval.evaluate(gold, predictions, null_odds, version_2=True)
    assert report["exact_match"] == pytest.approx(50.0)  # a and b
    assert report["f1"] == pytest.approx(100 * (1 + 1 + 0.5 + 0) / 4)
    assert (report["HasAns_exact"], report["HasAns_f1"], report["HasAns_total"]) == (
        pytest.approx(50.0), pytest.approx(75.0), 2)
    assert (report["NoAns_exact"], report["NoAns_total"]) == (pytest.approx(50.0), 2)
    # Thresholds swept over the odds: everything null scores 2 of 4; releasing a
    # (+1), c (+0.5 F1, +0 EM), then d (-1 for answering Rome), then b (prediction
    # "" still right). Best F1: 3.5 / 4 at threshold -1.0; best EM 3 / 4 at -3.0.
    assert report["best_f1"] == pytest.approx(87.5) and report["best_f1_thresh"] == -1.0
    assert report["best_exact"] == pytest.approx(75.0)
    assert report["best_exact_thresh"] == -3.0


def test_v2_best_span_sweep_finds_a_threshold_where_every_prediction_was_null():
    """Every prediction "" (the threshold said null everywhere): the official
    sweep can only keep that; the sweep over the best spans releases a (+1) and
    c (+0.5 F1), then d costs its point: best F1 3.5 / 4 at odds 1.0."""
    gold = {"a": ["Paris"], "b": [], "c": ["red wine"], "d": []}
    null_odds = {"a": 0.5, "b": 3.0, "c": 1.0, "d": 2.0}
    report = squad_eval.evaluate(gold, dict.fromkeys(gold, ""), null_odds, version_2=True,
                                 best_spans={"a": "Paris", "b": "x", "c": "white wine",
                                             "d": "Rome"})
    assert report["best_f1"] == pytest.approx(50.0) and report["best_f1_thresh"] == 0.0
    assert report["best_span_f1"] == pytest.approx(87.5)
    assert report["best_span_f1_thresh"] == 1.0
    assert report["best_span_exact"] == pytest.approx(75.0)
    assert report["best_span_exact_thresh"] == 0.5


# -- answers from logits ---------------------------------------------------------------

def hand_question(tokenizer, tmp_path, context, seq=24, stride=5, query=6, v2=False):
    path = write_json(tmp_path / "h.json", squad_json([(context, [
        {"id": "x", "question": "is the movie good"}])]))
    question = squad_data.read_squad(path, False, v2).questions[0]
    windows = [w for _, w in squad_features.windows_of([question], tokenizer, seq, stride, query,
                                                   False)]
    return question, windows


def logits_for(window, values, length=24):
    """start or end logits [length]: -5 everywhere, `values` (token -> logit)."""
    logits = np.full(length, -5.0, dtype=np.float32)
    for token_position, value in values.items():
        logits[token_position] = value
    return logits


def test_nbest_ranks_spans_dedups_and_maps_back(tokenizer, tmp_path):
    context = "The Movies,  sadly,\twere DULL and not great."
    question, windows = hand_question(tokenizer, tmp_path, context, seq=32)
    assert len(windows) == 1
    window = windows[0]
    position = {window.tokens[p]: p for p in sorted(window.token_to_word, reverse=True)}
    starts = logits_for(window, {position["movie"]: 3.0, position["dull"]: 2.0,
                                 position["great"]: 1.0, 0: 4.0}, 32)
    ends = logits_for(window, {position["##s"]: 2.5, position["dull"]: 2.0,
                               position["great"]: 0.5, 0: 4.0}, 32)
    answer = squad_answers.answer_question(question, windows, [
        {"start_logits": starts, "end_logits": ends}], 4, 30, True)
    texts = [entry["text"] for entry in answer.nbest]
    # movie..##s (5.5) maps back to "Movies" without the comma; [CLS] (8.0) is no span
    # in v1.1; movie..dull (5.0) keeps the context's casing, punctuation and whitespace.
    assert texts[:3] == ["Movies", "Movies,  sadly,\twere DULL", "DULL"]
    assert answer.text == "Movies" and answer.null_odds is None and len(texts) == 4
    assert answer.offsets == (4, 10)
    assert sum(entry["probability"] for entry in answer.nbest) == pytest.approx(1.0)
    assert answer.nbest[0]["start_logit"] == 3.0 and answer.nbest[0]["end_logit"] == 2.5
    # max_answer_length 1: only one-piece spans; "Movies" (2 pieces) is gone.
    short = squad_answers.answer_question(question, windows, [
        {"start_logits": starts, "end_logits": ends}], 4, 1, True)
    assert short.text == "DULL" and "Movies" not in [e["text"] for e in short.nbest]


def test_only_the_max_context_window_answers_a_piece(tokenizer, tmp_path):
    context = " ".join(["the plot was fine"] * 3 + ["but the music was awful"]
                       + ["the plot was fine"] * 3)
    question, windows = hand_question(tokenizer, tmp_path, context)
    assert len(windows) >= 3
    awful = [(i, p) for i, w in enumerate(windows) for p in w.token_to_word
             if w.tokens[p] == "awful"]
    assert len(awful) >= 2
    best = [(i, p) for i, p in awful if windows[i].is_max_context[p]]
    assert len(best) == 1
    results = []
    for i, window in enumerate(windows):
        # Every window holding "awful" scores it highest, the non-best ones higher.
        values = {p: (2.0 if (i, p) in best else 9.0) for j, p in awful if j == i}
        results.append({"start_logits": logits_for(window, values),
                        "end_logits": logits_for(window, values)})
    answer = squad_answers.answer_question(question, windows, results, 3, 30, True)
    assert answer.text == "awful"
    assert answer.nbest[0]["start_logit"] == 2.0  # from the max-context window


def test_v2_null_answer_against_the_threshold(tokenizer, tmp_path):
    context = "the plot was fine but the music was awful"
    question, windows = hand_question(tokenizer, tmp_path, context, seq=32, v2=True)
    window = windows[0]
    awful = next(p for p in window.token_to_word if window.tokens[p] == "awful")
    result = {"start_logits": logits_for(window, {0: 1.0, awful: 2.0}, 32),
              "end_logits": logits_for(window, {0: 1.5, awful: 1.0}, 32)}
    answer = squad_answers.answer_question(question, windows, [result], 3, 30, True, True, 0.0)
    # null 2.5, best span 3.0: odds -0.5 <= 0, so the span is the answer.
    assert answer.null_odds == pytest.approx(-0.5) and answer.text == "awful"
    assert "" in [entry["text"] for entry in answer.nbest]
    higher = squad_answers.answer_question(question, windows, [result], 3, 30, True, True, -1.0)
    assert higher.text == "" and higher.nbest == answer.nbest


def test_json_lines_are_googles_json_dumps():
    items = [("a", "x"), ("b\u00e9", [collections.OrderedDict([("text", "y"),
                                                              ("probability", 0.5)])])]
    assert "\n".join(squad.json_object_lines(iter(items))) == json.dumps(
        collections.OrderedDict(items), indent=4)
    assert list(squad.json_object_lines(iter([]))) == ["{}"]


# -- run_squad.py end to end (forked runs) ----------------------------------------------

def script_args(model, output_dir, *extra):
    return ["run_squad.py", "--vocab_file=%s" % model["vocab_file"],
            "--bert_config_file=%s" % model["bert_config_file"],
            "--init_checkpoint=%s" % model["init_checkpoint"],
            "--output_dir=%s" % output_dir, "--max_seq_length=32", "--doc_stride=8",
            "--max_query_length=8", "--train_batch_size=8"] + list(extra)


def bad_cases():
    """(name, file content or None, extra flags, expected parts of the error line)."""
    context = "the plot was fine but the music was awful"
    good = squad_json([(context, [qa("a", "what", context, "awful")])])
    moved = json.loads(json.dumps(good))
    moved["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 3
    outside = json.loads(json.dumps(good))
    outside["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = 99
    no_context = json.loads(json.dumps(good))
    del no_context["data"][0]["paragraphs"][0]["context"]
    text_start = json.loads(json.dumps(good))
    text_start["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] = "5"
    v2 = squad_json([(context, [qa("a", "what", context, "awful"),
                                {"id": "b", "question": "who", "answers": [],
                                 "is_impossible": True}])])
    twice = squad_json([(context, [qa("a", "what", context, "awful"),
                                   qa("a", "who", context, "music")])])
    mixed = squad_json([(context, [qa("a", "what", context, "awful"),
                                   {"id": "b", "question": "who"}])])
    where = "data[0].paragraphs[0]"
    return [
        ("malformed", '{"data": [{"paragraphs": [}', [], ["line 1 column 27",
                                                        "not valid JSON"]),
        ("empty", "", [], ["the file is empty"]),
        ("no_data", {"version": "1.1"}, [], ['top level: no "data"']),
        ("no_context", no_context, [], [where + ': no "context"']),
        ("outside", outside, [], ["outside.json: every question is left out of training: 1 "
                                  "where the answer text is not at its answer_start (a)"]),
        ("moved", moved, [], ["not at its answer_start (a); expected at least one to "
                              "train on"]),
        ("string_start", text_start, [], ["answer_start: expected a whole number, got '5'"]),
        ("v2_without_flag", v2, [], [where + ".qas[1].is_impossible: true",
                                     "--version_2_with_negative"]),
        ("duplicate_id", twice, [], [where + ".qas[1].id: id 'a' is also the id of " + where
                                     + ".qas[0]"]),
        ("mixed_answers", mixed, ["--nodo_train"],
         [where + ".qas[1].answers: no answers, but " + where + ".qas[0] has some"]),
        ("missing_file", None, ["--nodo_train"], ["missing.json: file not found"]),
        ("no_train_file", good, ["--train_file="], ["--train_file is required"]),
        ("query_too_long", good, ["--max_query_length=29"],
         ["--max_seq_length=32: expected more than --max_query_length + 3 = 32"]),
    ]


@pytest.mark.long
def test_run_squad_end_to_end_and_bad_input(tiny_model, tmp_path):
    import random
    rng = random.Random(0)
    train_json = toy_file(rng, 40)
    # One answer off its answer_start: left out of training, said in one line.
    misplaced = json.loads(json.dumps(train_json["data"][0]["paragraphs"][0]["qas"][0]))
    misplaced.update(id="off")
    misplaced["answers"][0]["answer_start"] += 1
    train_json["data"][0]["paragraphs"][0]["qas"].append(misplaced)
    train = write_json(tmp_path / "train.json", train_json)
    dev = write_json(tmp_path / "dev.json", toy_file(rng, 8))
    train2 = write_json(tmp_path / "train2.json", toy_file(rng, 24, impossible=True))
    dev2 = write_json(tmp_path / "dev2.json", toy_file(rng, 6, impossible=True))
    # A predict file without answers (Google's test files): answered, not scored.
    unanswered = json.load(open(dev))
    for paragraph in unanswered["data"][0]["paragraphs"]:
        for entry in paragraph["qas"]:
            del entry["answers"]
    test = write_json(tmp_path / "test.json", unanswered)
    out1, out2, out3 = str(tmp_path / "v1"), str(tmp_path / "v2"), str(tmp_path / "test")
    # Google's predict recipe: --init_checkpoint holds a fine-tuned model.
    fine_tuned = dict(tiny_model, init_checkpoint=write_fine_tuned(tiny_model,
                                                                  tmp_path / "ft"))
    commands = [
        script_args(fine_tuned, out3, "--do_predict", "--predict_file=" + test),
        # Google's README spelling of the flags, TPU flags included.
        script_args(tiny_model, out1, "--do_train=True", "--train_file=" + train,
                    "--do_predict=True", "--predict_file=" + dev, "--learning_rate=1e-3",
                    "--num_train_epochs=3.0", "--use_tpu=False", "--tpu_name=unused",
                    "--save_for_serving"),
        # --do_eval scores the predict file, here after each epoch too.
        script_args(tiny_model, out2, "--do_train", "--train_file=" + train2, "--do_eval",
                    "--predict_file=" + dev2, "--learning_rate=1e-3", "--num_train_epochs=2",
                    "--version_2_with_negative", "--eval_every_epoch", "--plot=false"),
    ]
    watched = [[], [], []]
    cases = bad_cases()
    for name, content, extra, _ in cases:
        path = str(tmp_path / "missing.json")
        if content is not None:
            path = write_json(tmp_path / ("%s.json" % name), content)
        output = str(tmp_path / ("bad_" + name))
        flags = ["--do_train", "--train_file=" + path, "--do_predict",
                 "--predict_file=" + path] + extra
        commands.append(script_args(tiny_model, output, *flags))
        watched.append([output])
    results = run_commands(commands, watched)
    for result in results[:3]:
        assert result.returncode == 0, result.stderr[-3000:]
    for result, (name, _, _, parts) in zip(results[3:], cases):
        check_one_error_line(result, parts)
    assert ("train.json: 1 question(s) left out of training, as Google's reader leaves "
            "them out: 1 where the answer text is not at its answer_start (off)"
            in results[1].stderr)
    check_v1_outputs(out1, dev)
    check_served_answers(os.path.join(out1, "serving"), dev)
    check_v2_outputs(out2, dev2)
    # Questions without answers (Google's test files): answered, not scored.
    assert "using the fine-tuned model in --init_checkpoint" in results[0].stderr
    assert not os.path.exists(os.path.join(out3, "eval_results.txt"))
    with open(os.path.join(out3, "predictions.json")) as f:
        assert set(json.load(f)) == {"p%d" % i for i in range(8)}
    assert os.path.exists(os.path.join(out3, "nbest_predictions.json"))


def write_fine_tuned(model, directory):
    """A checkpoint of `model`'s BERT with a (random) SQuAD head and a
    global_step: what Google's script leaves after fine-tuning. Returns its
    prefix."""
    import tensorflow as tf
    tf1 = tf.compat.v1
    reader = tf.train.load_checkpoint(model["init_checkpoint"])
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(5)
        for name in reader.get_variable_to_shape_map():
            tf1.Variable(reader.get_tensor(name), name=name)
        hidden_size = reader.get_variable_to_shape_map()["bert/pooler/dense/bias"][0]
        tf1.get_variable(squad.WEIGHTS, [2, hidden_size],
                         initializer=tf1.truncated_normal_initializer(stddev=0.02))
        tf1.get_variable(squad.BIAS, [2], initializer=tf1.zeros_initializer())
        tf1.train.get_or_create_global_step()
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            return tf1.train.Saver().save(sess, os.path.join(str(directory), "model.ckpt"),
                                          write_meta_graph=False)


def check_v1_outputs(output_dir, dev):
    with open(os.path.join(output_dir, "predictions.json")) as f:
        predictions = json.load(f)
    with open(os.path.join(output_dir, "nbest_predictions.json")) as f:
        nbest = json.load(f)
    with open(dev) as f:
        gold = {entry["id"]: entry["answers"][0]["text"]
                for p in json.load(f)["data"][0]["paragraphs"] for entry in p["qas"]}
    assert set(predictions) == set(nbest) == set(gold)
    assert not os.path.exists(os.path.join(output_dir, "null_odds.json"))
    with open(os.path.join(output_dir, "eval_results.json")) as f:
        report = json.load(f)
    # The tiny model learns to point at the one sentiment word.
    assert report["total"] == len(gold) and report["f1"] > 60, report
    exact = 100.0 * sum(predictions[q] == gold[q] for q in gold) / len(gold)
    assert report["exact_match"] == pytest.approx(exact)
    for qid, entries in nbest.items():
        assert entries[0]["text"] == predictions[qid]
        assert list(entries[0]) == ["text", "probability", "start_logit", "end_logit"]
        assert sum(e["probability"] for e in entries) == pytest.approx(1.0)
    # The export answers as the Estimator did: the same logits for the same windows.
    check_export(output_dir, dev, nbest, 32, 8, 8)


def check_served_answers(export_dir, dev):
    """serving_client.py answers question<TAB>context lines through
    serving_server.py with the answers of predictions.json."""
    from servers import server_url, start_server, stop
    questions = squad_data.read_squad(dev, False, False).questions
    lines = "".join("%s\t%s\n" % (q.question, q.paragraph.context) for q in questions)
    process = start_server(export_dir)
    try:
        client = subprocess.run(
            [sys.executable, "serving_client.py", "--url=" + server_url(process),
             "--export_dir=" + export_dir, "--output_format=jsonl", "--batch_size=2"],
            input=lines, cwd=REPO, capture_output=True, text=True, timeout=300)
    finally:
        stop(process)
        process.stdout.close()
        process.stderr.close()
    assert client.returncode == 0, client.stderr[-3000:]
    records = [json.loads(line) for line in client.stdout.splitlines()]
    with open(os.path.join(os.path.dirname(export_dir), "predictions.json")) as f:
        predictions = json.load(f)
    assert [r["answer"] for r in records] == [predictions[q.qas_id] for q in questions]
    assert all(q.paragraph.context[r["start"]:r["end"]] == r["answer"]
               for q, r in zip(questions, records))


def check_v2_outputs(output_dir, dev):
    with open(os.path.join(output_dir, "predictions.json")) as f:
        predictions = json.load(f)
    with open(os.path.join(output_dir, "null_odds.json")) as f:
        null_odds = json.load(f)
    with open(os.path.join(output_dir, "eval_results.json")) as f:
        report = json.load(f)
    assert set(predictions) == set(null_odds)
    for qid, text in predictions.items():
        assert (text == "") == (null_odds[qid] > 0.0)
    assert report["HasAns_total"] == report["NoAns_total"] == 6
    for key in ("best_f1", "best_f1_thresh", "best_exact", "NoAns_f1", "HasAns_exact"):
        assert key in report
    with open(os.path.join(output_dir, "eval_history.jsonl")) as f:
        history = [json.loads(line) for line in f]
    assert len(history) == 2 and {entry["metric"] for entry in history} == {"f1"}
    assert report["global_step"] == history[-1]["best_step"]


# -- the real model ----------------------------------------------------------------------

@pytest.mark.slow
def test_real_vocab_windows_and_the_real_model_answering(minilm_checkpoint, tmp_path):
    """On the real SQuAD questions of the fixtures with all-MiniLM-L6-v2's vocab:
    every training answer sits in some window and maps back to its text; then
    Google's predict recipe (--init_checkpoint: the real BERT with a SQuAD
    head) answers the dev questions and exports a model that gives the
    Estimator's logits. (Training is run on the tiny model above: on the real
    one it costs more than this file's time budget.)"""
    tokenizer = tokenization.FullTokenizer(minilm_checkpoint["vocab_file"], True)
    train = os.path.join(FIXTURES, "train-v1.1-small.json")
    questions = squad_data.read_squad(train, True, False).questions
    found, exact = set(), set()
    for index, window in squad_features.windows_of(questions, tokenizer, 128, 64, 64, True):
        if window.start_position:
            question = questions[index]
            found.add(index)
            text = squad_answers.span_text(window, window.start_position,
                                           window.end_position, question.paragraph, True)
            if squad_eval.normalize_answer(text) == squad_eval.normalize_answer(
                    question.answer_text):
                exact.add(index)
    assert len(found) == len(questions)
    assert len(exact) >= 0.95 * len(questions), len(exact)

    dev = os.path.join(FIXTURES, "dev-v1.1-small.json")
    output_dir = str(tmp_path / "real")
    [result] = run_commands([[
        "run_squad.py", "--vocab_file=%s" % minilm_checkpoint["vocab_file"],
        "--bert_config_file=%s" % minilm_checkpoint["bert_config_file"],
        "--init_checkpoint=%s" % write_fine_tuned(minilm_checkpoint, tmp_path / "ft"),
        "--output_dir=%s" % output_dir, "--do_predict", "--predict_file=" + dev,
        "--max_seq_length=96", "--doc_stride=48", "--max_query_length=24",
        "--predict_batch_size=32", "--save_for_serving"]], [[]])
    assert result.returncode == 0, result.stderr[-3000:]
    with open(os.path.join(output_dir, "nbest_predictions.json")) as f:
        nbest = json.load(f)
    with open(os.path.join(output_dir, "eval_results.json")) as f:
        report = json.load(f)
    assert report["total"] == 40 and 0 <= report["f1"] <= 100
    contexts = {q.qas_id: q.paragraph.context
                for q in squad_data.read_squad(dev, False, False).questions}
    assert all(entry["text"] in contexts[qid] for qid, entries in nbest.items()
               for entry in entries)
    check_export(output_dir, dev, nbest, 96, 48, 24)


def check_export(output_dir, dev, nbest, seq, stride, query):
    """The export answers as the Estimator did: the n-best lists of the
    exported model's logits equal nbest_predictions.json's."""
    import tensorflow as tf

    from bert_toolkit.engine import export_layout
    serving = os.path.join(output_dir, "serving")
    version_dir = export_layout.resolve_version_dir(serving)[1]
    vocab, _ = export_layout.resolve_assets(serving)
    tokenizer = tokenization.FullTokenizer(vocab, True)
    questions = squad_data.read_squad(dev, False, False).questions
    rows = squad_features.feature_rows(questions, tokenizer, seq, stride, query, False)
    signature = tf.saved_model.load(version_dir).signatures["serving_default"]
    outputs = signature(**{name: tf.constant(np.stack([r[name] for r in rows]))
                           for name in ("input_ids", "input_mask", "segment_ids")})
    results = [{"start_logits": s, "end_logits": e, "example_index": r["example_index"]}
               for s, e, r in zip(outputs["start_logits"].numpy(),
                                  outputs["end_logits"].numpy(), rows)]
    settings = dict(SETTINGS, max_seq_length=seq, doc_stride=stride, max_query_length=query,
                    n_best_size=20, max_answer_length=30)
    for answer in squad_answers.answers(questions, iter(results), tokenizer, settings):
        expected = nbest[answer.qas_id]
        assert [e["text"] for e in answer.nbest] == [e["text"] for e in expected]
        for ours, theirs in zip(answer.nbest, expected):
            assert ours["start_logit"] == pytest.approx(theirs["start_logit"], abs=1e-4)
            assert ours["end_logit"] == pytest.approx(theirs["end_logit"], abs=1e-4)
    # serving_client.py's question answering: raw question + context in, the
    # Estimator's answer out, with its offsets in the context.
    config = serving_client.load_serving_config(
        os.path.join(version_dir, "assets.extra", "serving_config.json"))
    assert (config["max_seq_length"], config["doc_stride"]) == (seq, stride)
    pairs = [(q.question, q.paragraph.context) for q in questions]
    features, layout = serving_client.encode_questions(tokenizer, pairs, config)
    outputs = signature(**{name: tf.constant(value) for name, value in features.items()})
    client = serving_client.answer_results(
        {name: outputs[name].numpy().tolist() for name in ("start_logits", "end_logits")},
        config, layout)
    for question, (record, fields) in zip(questions, client):
        assert record["answer"] == nbest[question.qas_id][0]["text"] == fields[0]
        assert question.paragraph.context[record["start"]:record["end"]] == record["answer"]
        assert record["probability"] == pytest.approx(
            nbest[question.qas_id][0]["probability"], abs=1e-4)


def test_the_client_refuses_a_question_without_a_context(tokenizer):
    config = serving_client.parse_serving_config(json.dumps({
        "task": "squad", "labels": [], "max_seq_length": 32, "do_lower_case": True,
        "doc_stride": 8, "max_query_length": 8}))
    # An export without the answer settings gets Google's defaults.
    assert (config["n_best_size"], config["max_answer_length"]) == (20, 30)
    assert config["sentence_pairs"] and not config["version_2_with_negative"]
    with pytest.raises(InputError, match="takes a question and a context"):
        serving_client.encode_questions(tokenizer, [("who", None)], config)
    with pytest.raises(InputError, match="the context of the question 'who' is empty"):
        serving_client.encode_questions(tokenizer, [("who", " \t")], config)
    with pytest.raises(InputError, match="max_seq_length must exceed max_query_length"):
        serving_client.parse_serving_config(json.dumps(dict(config, max_query_length=29)))
