"""A ModernBERT-base-sized classifier's training step at 8,192 tokens: seconds and memory.

    python bench/long_input_bench.py --seq_length=8192 --precision=fp32,bf16 --steps=3

What `run_custom_classifier.py` runs, through the Python API (bt.run): a model
folder of ModernBERT-base's shape (22 layers, hidden 768, 12 heads, GeGLU 1152,
a local window of 128 tokens, every third layer global, 8,192 positions,
vocabulary 50,368) with random weights, written here (nothing is downloaded),
and a training file of texts that fill --seq_length after tokenization, trained
at batch 1. Each precision runs in its own process, so the peak memory (the
process's resident high-water mark, what the progress line prints) is that
precision's alone. Printed per precision: seconds per step (the median of the
steps after the first two: the first pays graph optimisation and XLA's compiles,
the second runs a little slower too; with --steps=2, the second), the peak memory
and the MFU of the progress line, and the machine's load.

The tokenizer is the ModernBERT test fixture's byte-level BPE
(tests/fixtures/families/modernbert/tokenizer.json) with its vocabulary padded
to 50,368 entries, so the embedding table and its optimizer state are
ModernBERT-base's size.
"""

import argparse
import csv
import json
import os
import random
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

FIXTURE = os.path.join(benchlib.REPO, "tests", "fixtures", "families", "modernbert")
# ModernBERT-base as a bert_config.json (answerdotai/ModernBERT-base's config.json,
# converted): dropout 0 as published.
MODERNBERT_BASE = benchlib.CONFIGS["modernbert-base"]
WORDS = ("the movie plot film is was a very not good great fine bad awful dull and but "
         "story acting music").split()


def write_tokenizer(directory, vocab_size):
    """The fixture's tokenizer.json with never-produced entries appended up to
    `vocab_size`; returns its path."""
    with open(os.path.join(FIXTURE, "tokenizer.json")) as f:
        tokenizer = json.load(f)
    vocab = tokenizer["model"]["vocab"]
    taken = set(vocab.values()) | {token["id"] for token in tokenizer["added_tokens"]}
    for token_id in range(vocab_size):
        if token_id not in taken:
            vocab["<unused_%d>" % token_id] = token_id
    path = os.path.join(directory, "tokenizer.json")
    with open(path, "w") as f:
        json.dump(tokenizer, f)
    with open(os.path.join(FIXTURE, "tokenizer_config.json")) as source, \
            open(os.path.join(directory, "tokenizer_config.json"), "w") as target:
        target.write(source.read())
    return path


def write_model(directory):
    """bert_config.json, tokenizer.json and a random bert_model.ckpt of ModernBERT-base's
    shape; returns the bt.ClassifierOptions fields naming them."""
    from bert_toolkit.model import modeling
    os.makedirs(directory, exist_ok=True)
    vocab_file = write_tokenizer(directory, MODERNBERT_BASE["vocab_size"])
    return dict(modeling.write_initial_checkpoint(
        modeling.BertConfig.from_dict(MODERNBERT_BASE), directory), vocab_file=vocab_file)


def write_data(directory, examples, seq_length):
    """train.csv: `examples` texts of random words, long enough to fill seq_length
    tokens (the fixture's tokenizer gives about 1.3 tokens a word)."""
    os.makedirs(directory, exist_ok=True)
    rng = random.Random(0)
    with open(os.path.join(directory, "train.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["label", "sentence"])
        for index in range(examples):
            words = [rng.choice(WORDS) for _ in range(seq_length)]
            writer.writerow([str(index % 2), " ".join(words)])


def available_memory_gb():
    """MemAvailable of /proc/meminfo in GB (None elsewhere)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1e6
    except OSError:
        pass
    return None


def guard_memory(min_available_gb, workdir):
    """Ends this process (exit 3, one line, `workdir` removed) when the machine's
    available memory falls below `min_available_gb`: a run that does not fit stops
    before the kernel's OOM killer picks some other process."""
    def watch():
        while True:
            available = available_memory_gb()
            if available is not None and available < min_available_gb:
                sys.stderr.write("long_input_bench: %.1f GB available, under --min_available_gb="
                                 "%g: stopped (does not fit beside what else runs)\n"
                                 % (available, min_available_gb))
                benchlib.remove_tree(workdir)
                os._exit(3)
            time.sleep(0.5)
    threading.Thread(target=watch, daemon=True).start()


def worker(args):
    """One precision: trains args.steps steps at batch 1 and prints one BENCH line."""
    import bert_toolkit as bt
    from bert_toolkit.engine import training
    workdir = benchlib.scratch_dir("long_input_bench_")
    guard_memory(args.min_available_gb, workdir)
    try:
        model = write_model(os.path.join(workdir, "model"))
        write_data(os.path.join(workdir, "data"), args.steps, args.seq_length)
        output_dir = os.path.join(workdir, "run")
        start = time.perf_counter()
        bt.run(bt.ClassifierOptions(
            task_name="custom", data_dir=os.path.join(workdir, "data"), output_dir=output_dir,
            do_train=True, max_seq_length=args.seq_length, train_batch_size=1,
            num_train_epochs=1.0, precision=args.precision, text_a_column="sentence",
            label_column="label", save_checkpoints_steps=10 ** 6, log_every_n_steps=1,
            **model))
        wall = time.perf_counter() - start
        # The progress line's figures, unrounded, from its TensorBoard events.
        rates = [rate for _, rate in training.logged_values(output_dir, "examples_per_second")]
        peaks = [gb for _, gb in training.logged_values(output_dir, "peak_memory_gb")]
        mfu = [value for _, value in training.logged_values(output_dir, "mfu")]
    finally:
        benchlib.remove_tree(workdir)
    if not rates or not peaks:
        raise benchlib.BenchError("no progress line in the run's events")
    benchlib.send(dict(precision=args.precision, seconds_per_step=[1.0 / r for r in rates],
                       peak_memory_gb=max(peaks), mfu=100.0 * mfu[-1] if mfu else None,
                       wall_seconds=wall))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seq_length", type=int, default=8192)
    parser.add_argument("--precision", default="fp32,bf16", help="Comma-separated: fp32, bf16.")
    parser.add_argument("--steps", type=int, default=3,
                        help="Training steps per precision (the first is not timed).")
    parser.add_argument("--json", default="", help="Also write the results here.")
    parser.add_argument("--min_available_gb", type=float, default=1.5,
                        help="A run stops (reported as not fitting) when the machine's "
                             "available memory falls below this.")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    if args.steps < 2:
        raise SystemExit("--steps must be >= 2 (the first step is not timed)")
    print(benchlib.machine_line())
    print("ModernBERT-base-sized classifier, %d tokens, batch 1, %d steps"
          % (args.seq_length, args.steps))
    rows, results = [], []
    for precision in args.precision.split(","):
        command = [sys.executable, os.path.abspath(__file__), "--worker",
                   "--precision=%s" % precision, "--seq_length=%d" % args.seq_length,
                   "--steps=%d" % args.steps, "--min_available_gb=%g" % args.min_available_gb]
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
        answers = [json.loads(line[len(benchlib.PREFIX):]) for line in done.stdout.splitlines()
                   if line.startswith(benchlib.PREFIX)]
        if done.returncode != 0 or not answers:
            rows.append([precision, "does not fit" if done.returncode == 3 else
                         "failed (exit %d)" % done.returncode, "", "", ""])
            continue
        result = answers[-1]
        results.append(result)
        # The first timed step runs a little slower (1.8 s against 1.35 s at 512 tokens):
        # with more than one, it is left out.
        timed = result["seconds_per_step"][1:] or result["seconds_per_step"]
        rows.append([precision, "%.1f" % benchlib.median(timed),
                     "%.1f" % result["peak_memory_gb"],
                     "%.1f%%" % result["mfu"] if result["mfu"] is not None else "-",
                     "%.0f" % result["wall_seconds"]])
    print(benchlib.format_table(["precision", "s/step", "peak memory GB", "MFU",
                                 "run wall s"], rows))
    print("load average after: %.2f" % benchlib.load_average())
    benchlib.write_json(args.json, dict(machine=benchlib.machine_line(),
                                        seq_length=args.seq_length, results=results))


if __name__ == "__main__":
    main()
