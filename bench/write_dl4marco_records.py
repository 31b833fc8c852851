"""Writes dl4marco-bert's MS MARCO records from run_reranking.py's TSV files.

    python bench/write_dl4marco_records.py --output_folder=records \\
      --vocab_file=$BERT/vocab.txt --train_dataset_path=triples.train.small.tsv \\
      --dev_dataset_path=top1000.dev --dev_qrels_path=qrels.dev.tsv \\
      --eval_dataset_path=top1000.eval --max_seq_length=512 --max_query_length=64 \\
      --num_eval_docs=1000

The flags are those of nyu-dl/dl4marco-bert's convert_msmarco_to_tfrecord.py, and
the files what it writes (dataset_train.tf, dataset_dev.tf + query_doc_ids_dev.txt,
dataset_eval.tf + query_doc_ids_eval.txt): run_reranking.py --data_dir=records
reads them, as dl4marco-bert's run_msmarco.py and the MS MARCO fork's
run_multi_gpu.py do. Any re-ranking task's files can thus be turned into that
format (the tests and bench/dl4marco_records_bench.py make records of the movie-review
ranking task). The writer is bert_toolkit/tasks/reranking/msmarco_writer.py; the
format and its differences from the converter are described there and in
docs/reranking.md.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_folder", required=True,
                        help="Folder where the records are written.")
    parser.add_argument("--vocab_file", required=True,
                        help="The vocab.txt of the BERT model the records are for.")
    parser.add_argument("--do_lower_case", type=int, default=1,
                        help="1 (the converter's: uncased models) or 0.")
    parser.add_argument("--train_dataset_path",
                        help="Triples `query \\t positive \\t negative`.")
    parser.add_argument("--dev_dataset_path",
                        help="Dev candidates `qid \\t pid \\t query \\t passage`.")
    parser.add_argument("--dev_qrels_path",
                        help="Dev judgements `qid 0 pid relevance` (the dev labels).")
    parser.add_argument("--eval_dataset_path",
                        help="Eval candidates `qid \\t pid \\t query \\t passage`.")
    parser.add_argument("--max_seq_length", type=int, default=512)
    parser.add_argument("--max_query_length", type=int, default=64)
    parser.add_argument("--num_eval_docs", type=int, default=1000,
                        help="Records per dev and eval query (fake documents fill them up).")
    parser.add_argument("--max_train_triples", type=int, default=0,
                        help="Only the first N triples (0: all).")
    return parser


def main():
    args = make_parser().parse_args()
    from bert_toolkit import console
    from bert_toolkit.errors import InputError, fail
    from bert_toolkit.tasks.reranking import msmarco_writer
    from bert_toolkit.text import tokenization
    console.setup()
    try:
        if not (args.train_dataset_path or args.dev_dataset_path or args.eval_dataset_path):
            raise InputError("nothing to do: give --train_dataset_path, --dev_dataset_path "
                             "and/or --eval_dataset_path")
        tokenizer = tokenization.FullTokenizer(args.vocab_file, bool(args.do_lower_case))
        msmarco_writer.write_dataset(
            args.output_folder, tokenizer, args.train_dataset_path, args.dev_dataset_path,
            args.dev_qrels_path, args.eval_dataset_path, args.max_seq_length,
            args.max_query_length, args.num_eval_docs, args.max_train_triples or None)
    except InputError as e:
        fail(e)


if __name__ == "__main__":
    main()
