"""Fine-tune BERT to re-rank passages (MS MARCO style), rank candidates, report MRR@10.

Training reads `query \\t positive \\t negative` triples (two pairs each);
evaluation and prediction read `qid \\t pid \\t query \\t passage` candidate
files and write ranked run files (`qid \\t pid \\t rank \\t score`);
evaluation scores dev_run.tsv against the qrels (MRR@10 as the official
msmarco_eval.py computes it, and recall@k). Devices, precision, resume and
export work as in run_custom_classifier.py. See docs/reranking.md.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # CUDA plugin chatter on CPU machines

from absl import flags  # noqa: E402
import tensorflow as tf  # noqa: E402

import common_flags  # noqa: E402
import fine_tuning  # noqa: E402
import reranking  # noqa: E402
import training  # noqa: E402
from errors import InputError  # noqa: E402

FLAGS = flags.FLAGS

common_flags.define_model_flags()
common_flags.define_run_flags()
common_flags.define_fine_tuning_flags()
common_flags.define_pooling_flag()
FLAGS.set_default("max_seq_length", 512)
flags.DEFINE_integer("max_query_length", 64,
                     "Most query tokens kept; the passage gets the rest of max_seq_length "
                     "after the query and [CLS], [SEP], [SEP].")
flags.DEFINE_string("train_file", "triples.train.small.tsv",
                    "Training triples `query \\t positive \\t negative` (in data_dir).")
flags.DEFINE_integer("max_train_triples", 0, "Use only the first N triples (0: all).")
flags.DEFINE_string("dev_file", "top1000.dev",
                    "Dev candidates `qid \\t pid \\t query \\t passage` (in data_dir).")
flags.DEFINE_string("dev_qrels_file", "qrels.dev.tsv",
                    "Dev relevance judgements `qid 0 pid relevance` (in data_dir).")
flags.DEFINE_string("test_file", "top1000.eval",
                    "Candidates ranked by --do_predict (in data_dir).")

RUN_FILES = {"eval": "dev_run.tsv", "predict": "test_run.tsv"}


def data_path(name):
    """A file flag's value, relative to --data_dir unless absolute."""
    return os.path.join(FLAGS.data_dir or "", FLAGS[name].value)


def check_flags():
    common_flags.check_run_flags()
    common_flags.check_fine_tuning_flags()
    if not 1 <= FLAGS.max_query_length <= FLAGS.max_seq_length - 4:
        raise InputError("--max_query_length=%d: expected 1 to --max_seq_length - 4 = %d "
                         "(the passage needs a token besides [CLS], [SEP], [SEP])"
                         % (FLAGS.max_query_length, FLAGS.max_seq_length - 4))
    if FLAGS.max_train_triples < 0:
        raise InputError("--max_train_triples must be >= 0, got %d" % FLAGS.max_train_triples)


def scan_inputs():
    """Every split the run needs, validated and counted; the dev qrels (or None)."""
    sources, qrels = {}, None
    if FLAGS.do_train:
        sources["train"] = reranking.scan_triples(data_path("train_file"),
                                                  FLAGS.max_train_triples or None)
    if FLAGS.do_eval:
        sources["eval"], qids = reranking.scan_candidates(data_path("dev_file"))
        qrels = reranking.read_qrels(data_path("dev_qrels_file"))
        reranking.check_candidates_match_qrels(data_path("dev_file"), qids,
                                               data_path("dev_qrels_file"), qrels)
    if FLAGS.do_predict:
        sources["predict"], _ = reranking.scan_candidates(data_path("test_file"))
    return sources, qrels


def make_evaluate_and_predict(qrels):
    """run_task's hook: rank the candidates, write the run files, score the dev run."""
    def evaluate_and_predict(estimator, records):
        for split, batch_size in (("eval", FLAGS.eval_batch_size),
                                  ("predict", FLAGS.predict_batch_size)):
            if split not in records:
                continue
            run_path = os.path.join(FLAGS.output_dir, RUN_FILES[split])
            queries, pairs = reranking.predict_and_rank(
                estimator, records[split][0], FLAGS.max_seq_length, batch_size, run_path)
            tf.compat.v1.logging.info("%s: %d queries, %d pairs ranked in %s",
                                      split, queries, pairs, run_path)
            if split == "eval":
                report = reranking.evaluate_ranked(reranking.read_run(run_path), qrels)
                report["global_step"] = int(estimator.get_variable_value("global_step"))
                training.write_json_and_text(
                    report, os.path.join(FLAGS.output_dir, "eval_results.json"),
                    os.path.join(FLAGS.output_dir, "eval_results.txt"))
                tf.compat.v1.logging.info("eval: %s", reranking.format_report(report))
    return evaluate_and_predict


def main(_):
    check_flags()
    model_inputs = fine_tuning.load_model_inputs(FLAGS)
    runtime = fine_tuning.resolve_runtime(FLAGS)
    sources, qrels = scan_inputs()
    hidden_size = model_inputs.bert_config.hidden_size
    task = fine_tuning.FineTuningTask(
        name="reranking", label_list=list(reranking.LABELS), examples=sources,
        head_variable_shapes={"output_weights": [len(reranking.LABELS), hidden_size],
                              "output_bias": [len(reranking.LABELS)]},
        examples_digest=lambda source: reranking.source_digest(source,
                                                               FLAGS.max_query_length),
        feature_rows=lambda source: reranking.feature_rows(
            source, model_inputs.tokenizer, FLAGS.max_query_length, FLAGS.max_seq_length),
        feature_spec=reranking.feature_spec(FLAGS.max_seq_length),
        head_fn=reranking.make_head_fn(model_inputs.bert_config.hidden_dropout_prob,
                                       FLAGS.pooling),
        head_settings={"pooling": FLAGS.pooling},
        eval_report=None, eval_summary_keys=(), prediction_file=None,
        prediction_lines=None,
        serving_config=reranking.serving_config(FLAGS.max_query_length))
    fine_tuning.run_task(FLAGS, model_inputs, runtime, task,
                         evaluate_and_predict=make_evaluate_and_predict(qrels))


if __name__ == "__main__":
    common_flags.run_script(main)
