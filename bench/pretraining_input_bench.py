"""Examples/s of run_pretraining.py's input pipeline alone: NVIDIA's hdf5 shards against
TFRecords of the same instances, in one run.

    python bench/pretraining_input_bench.py --dupe_factor=5 --rounds=3

Input: the 1,500 real movie reviews of polarity-en-pang&lee1.csv (fetched by
bert_toolkit/assets.py), one sentence per line, written by create_pretraining_data.py
with all-MiniLM-L6-v2's vocabulary (bert-base-uncased's) twice from the same seed:
as TFRecords and as hdf5 shards in NVIDIA's layout (--output_format=hdf5), so both
hold the same instances. Each format is read by the training input_fn that
run_pretraining.py builds (task.make_train_input_fn: repeat, shuffle, global
batches, this replica's slice, parse or unpack), in this process, and timed over
--batches batches after --warmup_batches; the evaluation input_fn (in order,
once) is timed the same way. The formats alternate for --rounds rounds; the best
round of each is kept. No model runs: this is what the pipeline could feed.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from bench.pretraining_data_bench import write_review_documents  # noqa: E402
from bert_toolkit import assets  # noqa: E402


def make_shards(text_path, vocab_file, work_dir, args):
    """{format: [files]}: the same instances as TFRecords and as hdf5 shards."""
    files = {}
    for kind, extension in (("tfrecord", "tfrecord"), ("hdf5", "hdf5")):
        files[kind] = [os.path.join(work_dir, "reviews_training_%d.%s" % (i, extension))
                       for i in range(args.num_shards)]
        subprocess.run([sys.executable, os.path.join(REPO, "create_pretraining_data.py"),
                        "--input_file=%s" % text_path, "--output_file=%s" % ",".join(
                            files[kind]), "--vocab_file=%s" % vocab_file,
                        "--max_seq_length=%d" % args.max_seq_length,
                        "--max_predictions_per_seq=%d" % args.max_predictions_per_seq,
                        "--dupe_factor=%d" % args.dupe_factor, "--random_seed=12345"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    return files


def time_batches(dataset, warmup_batches, batches, batch_size):
    """Examples/s of `batches` batches of `dataset` after `warmup_batches`."""
    iterator = iter(dataset)
    for _ in range(warmup_batches):
        next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return batches * batch_size / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--num_shards", type=int, default=2)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32, help="examples per batch")
    parser.add_argument("--batches", type=int, default=300, help="timed batches per round")
    parser.add_argument("--warmup_batches", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--text_file", help="documents to use instead of the reviews (one "
                        "sentence per line, a blank line between documents)")
    parser.add_argument("--vocab_file", help="with --text_file: its vocab.txt")
    args = parser.parse_args()

    import tensorflow as tf

    from bert_toolkit.tasks.pretraining import task

    work_dir = tempfile.mkdtemp(prefix="pretraining_input_bench.")
    try:
        text_path = args.text_file
        vocab_file = args.vocab_file
        if not text_path:
            text_path = os.path.join(work_dir, "reviews.txt")
            write_review_documents(os.path.join(assets.corpora_dir(),
                                                "polarity-en-pang&lee1.csv"), text_path)
            vocab_file = os.path.join(assets.minilm_dir(), "vocab.txt")
        files = make_shards(text_path, vocab_file, work_dir, args)
        sizes = {kind: sum(os.path.getsize(p) for p in paths) for kind, paths in files.items()}
        best = {}
        for round_index in range(args.rounds):
            for kind, paths in files.items():
                train = task.make_train_input_fn(
                    paths, args.max_seq_length, args.max_predictions_per_seq, args.batch)()
                evaluation = task.make_eval_input_fn(
                    paths, args.max_seq_length, args.max_predictions_per_seq, args.batch)()
                rates = (time_batches(train, args.warmup_batches, args.batches, args.batch),
                         time_batches(evaluation.repeat(), args.warmup_batches, args.batches,
                                      args.batch))
                print("round %d %-8s training %8.0f examples/s, evaluation %8.0f examples/s"
                      % (round_index + 1, kind, rates[0], rates[1]), flush=True)
                best[kind] = tuple(max(a, b) for a, b in zip(best.get(kind, (0, 0)), rates))
                del train, evaluation
        print("input: %s; %d shards of each format, seq %d, %d predictions, batch %d, "
              "TensorFlow %s, %d core(s)" % (
                  "the 1,500 reviews, dupe_factor %d" % args.dupe_factor if not args.text_file
                  else args.text_file, args.num_shards, args.max_seq_length,
                  args.max_predictions_per_seq, args.batch, tf.__version__, os.cpu_count()))
        for kind, (train_rate, eval_rate) in best.items():
            print("%-8s training %8.0f examples/s  evaluation %8.0f examples/s  (%.1f MB on "
                  "disk)" % (kind, train_rate, eval_rate, sizes[kind] / 1e6))
        print("ratio hdf5/tfrecord: training %.2fx, evaluation %.2fx" % (
            best["hdf5"][0] / best["tfrecord"][0], best["hdf5"][1] / best["tfrecord"][1]))
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
