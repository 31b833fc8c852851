"""Question answering on SQuAD: the span head, answers from logits, the Task, and `run`.

`run(options)` is what run_squad.py does: read the SQuAD files, then
fine-tune, answer, score and export through the shared flow.

The head is Google's run_squad.py head: one linear layer over the sequence
output, `cls/squad/output_weights` [2, hidden] and `cls/squad/output_bias`
[2] (so checkpoints fine-tuned by Google's script load), giving a start and
an end logit per position; the loss is the mean of the start and end
cross-entropies. Padding positions get -10000 (they can never be answers, and
the loss does not depend on how far a batch is padded).

Answers are made from the windows' logits by answers.py, as Google's
script makes them.

Output files, as Google's: predictions.json (id -> text),
nbest_predictions.json (id -> [{text, probability, start_logit,
end_logit}]) and, for v2.0, null_odds.json (id -> null score - best span
score), written question by question (memory does not grow with the file).
"""

import collections
import json
import tempfile

import tensorflow as tf

from bert_toolkit import console
from bert_toolkit.engine import base_task, fine_tuning, input_pipeline, model_files
from bert_toolkit.engine.model_fn_builder import Head
from bert_toolkit.errors import InputError
from bert_toolkit.estimator_compat import tf_estimator
from bert_toolkit.tasks.squad import answers as squad_answers
from bert_toolkit.tasks.squad import data as squad_data
from bert_toolkit.tasks.squad import evaluation as squad_eval
from bert_toolkit.tasks.squad import features as squad_features

tf1 = tf.compat.v1

PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
NULL_ODDS_FILE = "null_odds.json"
WEIGHTS = "cls/squad/output_weights"
BIAS = "cls/squad/output_bias"


def make_head_fn():
    """The span head for model_fn_builder.build_model_fn.

    Predictions: start_logits, end_logits float32 [batch, seq] (and
    example_index [batch] when the records have it); the export returns the
    two logits.
    """
    def head_fn(model, features, mode):
        # float32 [batch, seq, hidden]; ModernBERT's with its head on every token.
        sequence = model.get_token_head_input()
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
        if mode == tf_estimator.ModeKeys.PREDICT:
            return Head(None, predictions, None, serving)

        start_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.reshape(features["start_positions"], [-1]), logits=start_logits)
        end_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.reshape(features["end_positions"], [-1]), logits=end_logits)
        loss = (tf.reduce_mean(start_loss) + tf.reduce_mean(end_loss)) / 2.0
        return Head(loss, predictions, {}, serving)

    return head_fn


# -- output files ---------------------------------------------------------------------

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
    null_odds = best_spans = None
    if version_2 and NULL_ODDS_FILE in written:
        with open(written[NULL_ODDS_FILE], encoding="utf-8") as f:
            null_odds = json.load(f)
        with open(written[NBEST_FILE], encoding="utf-8") as f:
            best_spans = {qid: next((entry["text"] for entry in nbest if entry["text"]), "")
                          for qid, nbest in json.load(f).items()}
    gold = collections.OrderedDict((q.qas_id, q.gold_answers) for q in questions)
    return squad_eval.evaluate(gold, predictions, null_odds, version_2, best_spans)


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


class SquadTask(base_task.Task):
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
        return squad_features.examples_digest(examples, self._window_settings())

    def feature_rows(self, examples, tokenizer, max_seq_length):
        is_training = examples is self.examples.get("train")
        return squad_features.feature_rows(examples, tokenizer, max_seq_length,
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
        answers = squad_answers.answers(examples, predictions, self.tokenizer,
                                        self.settings)
        return answer_files(answers, self.settings["version_2_with_negative"])

    def report_from_predictions(self, written):
        return score_files(self.examples["eval"], written,
                           self.settings["version_2_with_negative"])

    def serving_config(self):
        """What serving_client.py needs to cut windows and make answers as this
        run does (max_seq_length and do_lower_case are added by the flow)."""
        keys = ("doc_stride", "max_query_length", "n_best_size", "max_answer_length",
                "version_2_with_negative", "null_score_diff_threshold")
        return dict({key: self.settings[key] for key in keys}, task="squad",
                    sentence_pairs=True, outputs=["start_logits", "end_logits"])



# -- the run --------------------------------------------------------------------------

def run(options):
    """Fine-tunes, answers, scores and exports as SquadOptions say; returns the
    launch.Report."""
    examples, options = read_examples(options)
    model_inputs = model_files.load_model_inputs(options)
    settings = {"max_seq_length": options.max_seq_length, "doc_stride": options.doc_stride,
                "max_query_length": options.max_query_length,
                "n_best_size": options.n_best_size,
                "max_answer_length": options.max_answer_length,
                "do_lower_case": options.do_lower_case,
                "version_2_with_negative": options.version_2_with_negative,
                "null_score_diff_threshold": options.null_score_diff_threshold}
    task = SquadTask(examples, model_inputs.tokenizer, settings)
    return fine_tuning.run(task, options, model_inputs)


def read_examples(options):
    """(examples by split, options): the files read and checked before anything is
    written. A predict file with answers becomes the "eval" split, scored."""
    version_2 = options.version_2_with_negative
    examples = {}
    if options.do_train:
        path = options.data_path("train_file")
        train = squad_data.read_squad(path, True, version_2)
        if train.skipped:
            console.warning("%s", squad_data.left_out_line(path, train.skipped))
        examples["train"] = train.questions
    changes = {"eval_batch_size": options.eval_batch_size or options.predict_batch_size}
    if options.do_predict or options.do_eval:
        path = options.data_path("predict_file")
        predict = squad_data.read_squad(path, False, version_2)
        if options.do_eval and not predict.has_answers:
            raise InputError("--do_eval: %s has no answers to score; use --do_predict" % path)
        split = "eval" if predict.has_answers else "predict"
        examples[split] = predict.questions
        changes.update(do_eval=split == "eval", do_predict=split == "predict")
    options = options.replace(**changes)
    for split, questions in examples.items():
        console.info("%s: %d questions from %s", split, len(questions), options.data_path(
            "train_file" if split == "train" else "predict_file"))
    return examples, options
