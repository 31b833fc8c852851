"""Fine-tune BERT on SQuAD v1.1/v2.0 and answer questions: Google's run_squad.py.

Google's command line works unchanged (--train_file, --predict_file,
--doc_stride, --max_query_length, --n_best_size, --max_answer_length,
--version_2_with_negative, --null_score_diff_threshold, ...), with the
flags every fine-tuning script here shares (devices, precision,
accumulation, resume, export). --do_predict writes Google's
predictions.json, nbest_predictions.json and (v2.0) null_odds.json; when the
predict file has answers it also writes eval_results.txt with the official
exact match and F1. See squad.py and squad_data.py.
"""

import tensorflow_env  # noqa: F401  (first: TensorFlow reads its settings once)

from absl import flags

import common_flags
import console
import fine_tuning
import run_setup
import squad
import squad_data
from errors import InputError

FLAGS = flags.FLAGS

common_flags.define_fine_tuning_script_flags()
FLAGS.set_default("max_seq_length", 384)  # Google's run_squad.py default
flags.DEFINE_string("train_file", None, "SQuAD JSON to train on (e.g. train-v1.1.json).")
flags.DEFINE_string("predict_file", None,
                    "SQuAD JSON to answer with --do_predict (e.g. dev-v1.1.json); when "
                    "its questions have answers, the predictions are also scored "
                    "(eval_results.txt).")
flags.DEFINE_integer("doc_stride", 128, "Context pieces between the starts of a "
                     "question's windows when the context does not fit one window.")
flags.DEFINE_integer("max_query_length", 64, "Question pieces kept (longer questions are "
                     "cut).")
flags.DEFINE_integer("n_best_size", 20, "Answers listed per question in "
                     "nbest_predictions.json (and start/end candidates per window).")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in WordPiece tokens.")
flags.DEFINE_bool("version_2_with_negative", False,
                  "SQuAD 2.0: questions may be unanswerable (is_impossible); the null "
                  "answer competes with the spans.")
flags.DEFINE_float("null_score_diff_threshold", 0.0,
                   "v2.0: predict no answer when the null score minus the best span's "
                   "score is above this.")
flags.DEFINE_bool("verbose_logging", False, "Accepted for Google's command lines; no "
                  "effect.")


def check_flags():
    """InputError for flags that cannot work together."""
    for name in ("n_best_size", "max_answer_length"):
        if FLAGS[name].value < 1:
            raise InputError("--%s=%d: expected at least 1" % (name, FLAGS[name].value))
    squad_data.check_window_settings(FLAGS.max_seq_length, FLAGS.doc_stride,
                                     FLAGS.max_query_length)
    if FLAGS.do_train and not FLAGS.train_file:
        raise InputError("--train_file is required with --do_train")
    if (FLAGS.do_predict or FLAGS.do_eval) and not FLAGS.predict_file:
        raise InputError("--predict_file is required with --do_predict (and --do_eval, "
                         "which scores it)")


def read_examples(options):
    """(examples by split, options): the files read and checked before anything is
    written. A predict file with answers becomes the "eval" split, scored."""
    version_2 = FLAGS.version_2_with_negative
    examples = {}
    if options.do_train:
        train = squad_data.read_squad(FLAGS.train_file, True, version_2)
        if train.skipped:
            console.warning("%s", squad_data.left_out_line(FLAGS.train_file, train.skipped))
        examples["train"] = train.questions
    wants_answers = options.do_predict or options.do_eval
    if wants_answers:
        predict = squad_data.read_squad(FLAGS.predict_file, False, version_2)
        if options.do_eval and not predict.has_answers:
            raise InputError("--do_eval: %s has no answers to score; use --do_predict"
                             % FLAGS.predict_file)
        split = "eval" if predict.has_answers else "predict"
        examples[split] = predict.questions
        changes = {"do_eval": split == "eval", "do_predict": split == "predict"}
        if split == "eval" and not FLAGS["eval_batch_size"].present:
            changes["eval_batch_size"] = options.predict_batch_size
        options = options.replace(**changes)
    for split, questions in examples.items():
        console.info("%s: %d questions from %s", split, len(questions),
                     FLAGS.train_file if split == "train" else FLAGS.predict_file)
    return examples, options


def main(_):
    options = common_flags.read_run_options()
    check_flags()
    examples, options = read_examples(options)
    model_inputs = run_setup.load_model_inputs(options)
    settings = {"max_seq_length": options.max_seq_length, "doc_stride": FLAGS.doc_stride,
                "max_query_length": FLAGS.max_query_length, "n_best_size": FLAGS.n_best_size,
                "max_answer_length": FLAGS.max_answer_length,
                "do_lower_case": options.do_lower_case,
                "version_2_with_negative": FLAGS.version_2_with_negative,
                "null_score_diff_threshold": FLAGS.null_score_diff_threshold}
    task = squad.SquadTask(examples, model_inputs.tokenizer, settings)
    fine_tuning.run(task, options, model_inputs)


if __name__ == "__main__":
    common_flags.run_script(main)
