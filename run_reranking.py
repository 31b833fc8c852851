"""Fine-tune BERT to re-rank passages (MS MARCO style), rank candidates, report MRR@10.

Training reads `query \\t positive \\t negative` triples (two pairs each);
evaluation and prediction read `qid \\t pid \\t query \\t passage` candidate
files and write ranked run files (`qid \\t pid \\t rank \\t score`);
evaluation scores dev_run.tsv against the qrels (MRR@10 as the official
msmarco_eval.py computes it, and recall@k). Devices, precision, resume and
export work as in run_custom_classifier.py. See docs/reranking.md.
"""

import tensorflow_env  # noqa: F401  (first: TensorFlow reads its settings once)

import os

from absl import flags

import common_flags
import fine_tuning
import modeling
import reranking
from errors import InputError

FLAGS = flags.FLAGS

common_flags.define_fine_tuning_script_flags(modeling.POOLING_MODES)
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


def data_path(name):
    """A file flag's value, relative to --data_dir unless absolute."""
    return os.path.join(FLAGS.data_dir or "", FLAGS[name].value)


def check_flags():
    if not 1 <= FLAGS.max_query_length <= FLAGS.max_seq_length - 4:
        raise InputError("--max_query_length=%d: expected 1 to --max_seq_length - 4 = %d "
                         "(the passage needs a token besides [CLS], [SEP], [SEP])"
                         % (FLAGS.max_query_length, FLAGS.max_seq_length - 4))
    if FLAGS.max_train_triples < 0:
        raise InputError("--max_train_triples must be >= 0, got %d" % FLAGS.max_train_triples)


def scan_inputs(options):
    """Every split the run needs, validated and counted; the dev qrels (or None)."""
    sources, qrels = {}, None
    if options.do_train:
        sources["train"] = reranking.scan_triples(data_path("train_file"),
                                                  FLAGS.max_train_triples or None)
    if options.do_eval:
        sources["eval"], qids = reranking.scan_candidates(data_path("dev_file"))
        qrels = reranking.read_qrels(data_path("dev_qrels_file"))
        reranking.check_candidates_match_qrels(data_path("dev_file"), qids,
                                               data_path("dev_qrels_file"), qrels)
    if options.do_predict:
        sources["predict"], _ = reranking.scan_candidates(data_path("test_file"))
    return sources, qrels


def main(_):
    options = common_flags.read_run_options()
    check_flags()
    sources, qrels = scan_inputs(options)
    fine_tuning.run(reranking.RerankingTask(sources, FLAGS.max_query_length, FLAGS.pooling,
                                            qrels), options)


if __name__ == "__main__":
    common_flags.run_script(main)
