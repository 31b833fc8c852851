"""Question answering on SQuAD: the span head, answers from logits, and the Task.

The head is Google's run_squad.py head: one linear layer over the sequence
output, `cls/squad/output_weights` [2, hidden] and `cls/squad/output_bias`
[2] (so checkpoints fine-tuned by Google's script load), giving a start and
an end logit per position; the loss is the mean of the start and end
cross-entropies. Padding positions get -10000 (they can never be answers, and
the loss does not depend on how far a batch is padded).

Answers are made as Google's script makes them, question by question, from
the windows' logits: the n best starts and ends of each window's context
pieces (where that window is the piece's max-context window), spans of at
most max_answer_length pieces, ranked by start + end logit, each mapped back
to the original context text (get_final_text's character alignment). v2.0
adds the null answer ([CLS]) and predicts "" when its score beats the best
span by more than null_score_diff_threshold.

Output files, as Google's: predictions.json (id -> text),
nbest_predictions.json (id -> [{text, probability, start_logit,
end_logit}]) and, for v2.0, null_odds.json (id -> null score - best span
score), written question by question (memory does not grow with the file).
"""

import collections
import json
import math
import tempfile

import tensorflow as tf

import fine_tuning
import input_pipeline
import squad_data
import squad_eval
import tokenization
from training import Head

tf1 = tf.compat.v1

PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
NULL_ODDS_FILE = "null_odds.json"
WEIGHTS = "cls/squad/output_weights"
BIAS = "cls/squad/output_bias"


def make_head_fn():
    """The span head for training.build_model_fn.

    Predictions: start_logits, end_logits float32 [batch, seq] (and
    example_index [batch] when the records have it); the export returns the
    two logits.
    """
    def head_fn(model, features, mode):
        sequence = model.get_sequence_output()  # float32 [batch, seq, hidden]
        weights = tf1.get_variable(WEIGHTS, [2, sequence.shape[-1]],
                                   initializer=tf1.truncated_normal_initializer(stddev=0.02))
        bias = tf1.get_variable(BIAS, [2], initializer=tf1.zeros_initializer())
        logits = tf.nn.bias_add(tf.einsum("bsh,lh->bsl", sequence, weights), bias)
        padding = 1.0 - tf.cast(features["input_mask"], tf.float32)  # [batch, seq]
        logits += padding[:, :, tf.newaxis] * -10000.0
        start_logits, end_logits = tf.unstack(logits, axis=-1)  # [batch, seq] each
        serving = {"start_logits": start_logits, "end_logits": end_logits}
        predictions = dict(serving)
        if "example_index" in features:
            predictions["example_index"] = tf.reshape(features["example_index"], [-1])
        if mode == tf.estimator.ModeKeys.PREDICT:
            return Head(None, predictions, None, serving)

        start_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.reshape(features["start_positions"], [-1]), logits=start_logits)
        end_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.reshape(features["end_positions"], [-1]), logits=end_logits)
        loss = (tf.reduce_mean(start_loss) + tf.reduce_mean(end_loss)) / 2.0
        return Head(loss, predictions, {}, serving)

    return head_fn


# -- answers from logits -------------------------------------------------------------

Candidate = collections.namedtuple("Candidate", ["window", "start", "end", "start_logit",
                                                 "end_logit"])
Answer = collections.namedtuple("Answer", ["qas_id", "text", "nbest", "null_odds"])
"""qas_id; text: the prediction; nbest: [OrderedDict(text, probability,
start_logit, end_logit)]; null_odds: null score - best span score (v2.0),
else None."""


def best_indexes(logits, n, limit):
    """The indexes of the `n` largest of logits[:limit], largest first (ties:
    the lower index first). Only real tokens compete, so the answer does not
    depend on how much padding a batch had."""
    order = sorted(range(min(limit, len(logits))), key=lambda i: logits[i], reverse=True)
    return order[:n]


def softmax(scores):
    """Probabilities of a list of floats (a list)."""
    top = max(scores)
    exps = [math.exp(score - top) for score in scores]
    total = sum(exps)
    return [value / total for value in exps]


def strip_spaces(text):
    """(text without spaces, index in it -> index in `text`)."""
    kept, where = [], []
    for index, char in enumerate(text):
        if char != " ":
            kept.append(char)
            where.append(index)
    return "".join(kept), where


def final_text(piece_text, original, do_lower_case):
    """The part of `original` (the context words a span covers, joined by
    spaces) that the detokenized pieces `piece_text` stand for.

    The words are run through the basic tokenizer; when that text without
    spaces has as many characters as `original` without spaces, the two are
    aligned character by character and piece_text's start and end are mapped
    back ("Steve Smith's" holds the prediction "steve smith" as "Steve
    Smith"). Otherwise (accents stripped, characters dropped) `original` is
    returned whole, as Google's script does.
    """
    basic = " ".join(tokenization.BasicTokenizer(do_lower_case).tokenize(original))
    start = basic.find(piece_text)
    if start == -1:
        return original
    end = start + len(piece_text) - 1
    original_chars, original_where = strip_spaces(original)
    basic_chars, basic_where = strip_spaces(basic)
    if len(original_chars) != len(basic_chars):
        return original
    to_stripped = {index: stripped for stripped, index in enumerate(basic_where)}
    if start not in to_stripped or end not in to_stripped:
        return original
    return original[original_where[to_stripped[start]]:original_where[to_stripped[end]] + 1]


def span_text(window, start, end, words, do_lower_case):
    """The original context text of tokens start..end of `window`."""
    pieces = " ".join(window.tokens[start:end + 1])
    pieces = " ".join(pieces.replace(" ##", "").replace("##", "").split())
    original = " ".join(words[window.token_to_word[start]:window.token_to_word[end] + 1])
    return final_text(pieces, original, do_lower_case)


def answer_question(question, windows, results, n_best_size, max_answer_length,
                    do_lower_case, version_2=False, null_score_diff_threshold=0.0):
    """The Answer of one question from its windows (squad_data.Window) and their
    results (dicts of start_logits and end_logits, sequences of floats)."""
    candidates = []
    null = None  # (score, start logit, end logit, window) of the lowest null score
    for index, (window, result) in enumerate(zip(windows, results)):
        starts, ends = result["start_logits"], result["end_logits"]
        if version_2:
            score = float(starts[0]) + float(ends[0])
            if null is None or score < null[0]:
                null = (score, float(starts[0]), float(ends[0]), index)
        limit = len(window.tokens)
        for start in best_indexes(starts, n_best_size, limit):
            if start not in window.token_to_word or not window.is_max_context[start]:
                continue
            for end in best_indexes(ends, n_best_size, limit):
                if end not in window.token_to_word or end < start:
                    continue
                if end - start + 1 > max_answer_length:
                    continue
                candidates.append(Candidate(index, start, end, float(starts[start]),
                                            float(ends[end])))
    if null is not None:
        candidates.append(Candidate(null[3], 0, 0, null[1], null[2]))
    candidates.sort(key=lambda c: c.start_logit + c.end_logit, reverse=True)

    words = question.paragraph.words
    nbest, seen = [], set()
    for candidate in candidates:
        if len(nbest) >= n_best_size:
            break
        text = ""
        if candidate.start > 0:
            text = span_text(windows[candidate.window], candidate.start, candidate.end,
                             words, do_lower_case)
        if text in seen:
            continue
        seen.add(text)
        nbest.append((text, candidate.start_logit, candidate.end_logit))
    if null is not None and "" not in seen:
        nbest.append(("", null[1], null[2]))
    if not nbest:  # no valid span at all (Google's placeholder)
        nbest.append(("empty", 0.0, 0.0))
    probabilities = softmax([start + end for _, start, end in nbest])
    entries = [collections.OrderedDict([("text", text), ("probability", probability),
                                        ("start_logit", start), ("end_logit", end)])
               for (text, start, end), probability in zip(nbest, probabilities)]
    if not version_2:
        return Answer(question.qas_id, nbest[0][0], entries, None)
    best_span = next(((start, end) for text, start, end in nbest if text), None)
    if best_span is None:
        # Only the null answer (Google's script fails here): "" for any threshold.
        return Answer(question.qas_id, "", entries, 1e6)
    odds = null[0] - best_span[0] - best_span[1]
    best_text = next(text for text, _, _ in nbest if text)
    text = "" if odds > null_score_diff_threshold else best_text
    return Answer(question.qas_id, text, entries, odds)


def answers(questions, predictions, tokenizer, settings):
    """Yields the Answer of every question, reading `predictions` (per-window
    dicts with start_logits, end_logits and example_index, in window order)
    once. The windows are cut again here exactly as for the records.

    settings: dict of max_seq_length, doc_stride, max_query_length,
    n_best_size, max_answer_length, do_lower_case, version_2_with_negative,
    null_score_diff_threshold.
    """
    windows = squad_data.windows_of(questions, tokenizer, settings["max_seq_length"],
                                    settings["doc_stride"], settings["max_query_length"],
                                    False)
    current, its_windows, its_results = None, [], []
    for (index, window), result in zip(windows, predictions):
        if int(result["example_index"]) != index:
            raise ValueError("prediction of question %d read for question %d: the records "
                             "do not match the file" % (int(result["example_index"]), index))
        if index != current and current is not None:
            yield _answer(questions[current], its_windows, its_results, settings)
            its_windows, its_results = [], []
        current = index
        its_windows.append(window)
        its_results.append(result)
    if current is not None:
        yield _answer(questions[current], its_windows, its_results, settings)


def _answer(question, windows, results, settings):
    return answer_question(question, windows, results, settings["n_best_size"],
                           settings["max_answer_length"], settings["do_lower_case"],
                           settings["version_2_with_negative"],
                           settings["null_score_diff_threshold"])


def json_object_lines(items):
    """The lines of json.dumps(OrderedDict(items), indent=4), for an iterator of
    (key, value): what Google's script writes, made one entry at a time."""
    previous = None
    for key, value in items:
        entry = json.dumps({key: value}, indent=4)[2:-2]  # "    key: value"
        yield "{" if previous is None else previous + ","
        previous = entry
    if previous is None:
        yield "{}"
    else:
        yield previous
        yield "}"


def answer_files(answer_stream, version_2):
    """[(file name, lines)] of predictions.json, nbest_predictions.json and (v2.0)
    null_odds.json from an iterator of Answers, read once.

    The files are written one after the other: while predictions.json is
    written, each question's n-best list and null odds go to temporary files
    (a compact line each), which the other two files then read back.
    """
    spools = {name: tempfile.TemporaryFile("w+", encoding="utf-8")
              for name in (NBEST_FILE, NULL_ODDS_FILE)}

    def predictions():
        for answer in answer_stream:
            spools[NBEST_FILE].write(json.dumps([answer.qas_id, answer.nbest]) + "\n")
            if version_2:
                spools[NULL_ODDS_FILE].write(json.dumps([answer.qas_id, answer.null_odds])
                                             + "\n")
            yield answer.qas_id, answer.text

    def spooled(name):
        spool = spools[name]
        spool.seek(0)
        for line in spool:
            key, value = json.loads(line, object_pairs_hook=collections.OrderedDict)
            yield key, value
        spool.close()

    files = [(PREDICTIONS_FILE, json_object_lines(predictions())),
             (NBEST_FILE, json_object_lines(spooled(NBEST_FILE)))]
    if version_2:
        files.append((NULL_ODDS_FILE, json_object_lines(spooled(NULL_ODDS_FILE))))
    return files


def score_files(questions, written, version_2):
    """The official scores (squad_eval.evaluate) of the written predictions.json
    (and null_odds.json) against the questions' gold answers."""
    with open(written[PREDICTIONS_FILE], encoding="utf-8") as f:
        predictions = json.load(f)
    null_odds = None
    if version_2 and NULL_ODDS_FILE in written:
        with open(written[NULL_ODDS_FILE], encoding="utf-8") as f:
            null_odds = json.load(f)
    gold = collections.OrderedDict((q.qas_id, q.gold_answers) for q in questions)
    return squad_eval.evaluate(gold, predictions, null_odds, version_2)


# -- the Task --------------------------------------------------------------------------

def feature_spec(max_seq_length, is_training):
    """name -> tf.io.FixedLenFeature of the window records."""
    lengths = {"input_ids": max_seq_length, "input_mask": max_seq_length,
               "segment_ids": max_seq_length}
    if is_training:
        lengths.update(start_positions=1, end_positions=1)
    else:
        lengths["example_index"] = 1
    return input_pipeline.fixed_length_spec(lengths)


class SquadTask(fine_tuning.Task):
    """SQuAD v1.1/v2.0 question answering (see the module docstring).

    examples: split -> [squad_data.Question] ("train"; "eval" for a predict
    file with answers, which is scored; "predict" for one without);
    tokenizer: the run's tokenization.FullTokenizer (windows are cut again
    when answers are made); settings: dict of max_seq_length, doc_stride,
    max_query_length, n_best_size, max_answer_length, do_lower_case,
    version_2_with_negative, null_score_diff_threshold.
    """

    name = "squad"
    summary_keys = ("f1", "exact_match", "HasAns_f1", "NoAns_f1", "best_f1")
    streamed_eval = False     # scored from the written answers
    predicts_eval_split = True

    def __init__(self, examples, tokenizer, settings):
        super().__init__(examples, [])
        self.tokenizer = tokenizer
        self.settings = dict(settings)

    def _window_settings(self):
        return {key: self.settings[key] for key in ("doc_stride", "max_query_length")}

    def examples_digest(self, examples):
        return squad_data.examples_digest(examples, self._window_settings())

    def feature_rows(self, examples, tokenizer, max_seq_length):
        is_training = examples is self.examples.get("train")
        return squad_data.feature_rows(examples, tokenizer, max_seq_length,
                                       self.settings["doc_stride"],
                                       self.settings["max_query_length"], is_training)

    def feature_spec(self, max_seq_length):
        return feature_spec(max_seq_length, True)

    def prediction_feature_spec(self, max_seq_length):
        return feature_spec(max_seq_length, False)

    def head_variable_shapes(self, hidden_size):
        return {WEIGHTS: [2, hidden_size], BIAS: [2]}

    def head_fn(self, bert_config):
        return make_head_fn()

    def prediction_files(self, split, examples, predictions):
        return answer_files(answers(examples, predictions, self.tokenizer, self.settings),
                            self.settings["version_2_with_negative"])

    def report_from_predictions(self, written):
        return score_files(self.examples["eval"], written,
                           self.settings["version_2_with_negative"])

    def serving_config(self):
        return {"task": "squad", "doc_stride": self.settings["doc_stride"],
                "max_query_length": self.settings["max_query_length"],
                "outputs": ["start_logits", "end_logits"]}

