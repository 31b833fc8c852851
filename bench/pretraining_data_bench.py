"""Instances/s of create_pretraining_data.py against Google's original, in one run.

    python bench/pretraining_data_bench.py --dupe_factor=5 --num_workers=2 --rounds=1

Input: the 1,500 real movie reviews of polarity-en-pang&lee1.csv (fetched by
bert_toolkit/assets.py), one sentence per line (a review's lines, split again at " . "),
a blank line between reviews; vocabulary: all-MiniLM-L6-v2's, which is
bert-base-uncased's. Both programs run as a user runs them, one subprocess
each, and are timed from start to exit (interpreter and imports included):
instances/s = instances written / wall seconds. CPU seconds are shown too.

The original is Google's bert/create_pretraining_data.py from the PyPI wheel
bert-tensorflow==1.0.4, fetched at run time with `pip download --no-deps` into
a temporary folder (never committed) and run under TensorFlow 2 through a
small shim (tf.compat.v1 with absl flags and tf.io.gfile behind the names it
uses). Pass --skip_original to time ours only (e.g. without network).
"""

import argparse
import csv
import os
import re
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from bert_toolkit import assets  # noqa: E402

ORIGINAL_REQUIREMENT = "bert-tensorflow==1.0.4"

# Runs the original module as __main__ after making sure the TensorFlow 1 names
# it uses exist. TensorFlow 2.15's tf.compat.v1 still has them all; the
# fallbacks keep the benchmark working where it does not.
SHIM = '''
import runpy
import sys

sys.path.insert(0, sys.argv.pop(1))
import tensorflow as tf
from absl import flags as absl_flags

v1 = tf.compat.v1
if not hasattr(v1, "flags"):
    v1.flags = absl_flags
if not hasattr(v1, "gfile"):
    class _GFileNames(object):
        GFile = tf.io.gfile.GFile
        Glob = staticmethod(tf.io.gfile.glob)
        Exists = staticmethod(tf.io.gfile.exists)
        MakeDirs = staticmethod(tf.io.gfile.makedirs)
    v1.gfile = _GFileNames
runpy.run_module("bert.create_pretraining_data", run_name="__main__", alter_sys=True)
'''


def write_review_documents(csv_path, out_path, limit=None):
    """Writes the reviews as one sentence per line, a blank line between reviews.

    The corpus already has one sentence per line mostly; a line holding more
    than one is split after each " ." that a space follows. Returns the number
    of documents written.
    """
    with open(csv_path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f))
    if limit:
        rows = rows[:limit]
    written = 0
    with open(out_path, "w", encoding="utf-8") as out:
        for row in rows:
            sentences = [s.strip() for line in row[1].splitlines()
                         for s in re.split(r"(?<= \.) ", line)]
            sentences = [s for s in sentences if s]
            if sentences:
                out.write("\n".join(sentences) + "\n\n")
                written += 1
    return written


def count_records(path):
    """Number of TFRecord records in `path` (reads only the length headers)."""
    count = 0
    with open(path, "rb") as f:
        while True:
            header = f.read(12)
            if len(header) < 12:
                return count
            f.seek(struct.unpack("<Q", header[:8])[0] + 4, os.SEEK_CUR)
            count += 1


def fetch_original(work_dir):
    """Folder holding the original `bert` package, from the PyPI wheel."""
    download_dir = os.path.join(work_dir, "wheel")
    os.makedirs(download_dir)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--disable-pip-version-check", "-d", download_dir, ORIGINAL_REQUIREMENT],
                   check=True, stdout=subprocess.DEVNULL)
    (wheel,) = [n for n in os.listdir(download_dir) if n.endswith(".whl")]
    package_root = os.path.join(work_dir, "original")
    with zipfile.ZipFile(os.path.join(download_dir, wheel)) as zf:
        for name in zf.namelist():
            if name.startswith("bert/") and name.endswith(".py"):
                zf.extract(name, package_root)
    return package_root


def timed_run(command, env=None):
    """(wall seconds, CPU seconds of the process and its children, stderr text)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    result = subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, universal_newlines=True)
    wall = time.time() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit("command failed (exit %d): %s\n%s" % (
            result.returncode, " ".join(command), result.stderr[-2000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, result.stderr


def common_flags(args, input_path, vocab_file, output_path):
    return ["--input_file=%s" % input_path, "--output_file=%s" % output_path,
            "--vocab_file=%s" % vocab_file, "--do_lower_case=true",
            "--max_seq_length=%d" % args.max_seq_length,
            "--max_predictions_per_seq=%d" % args.max_predictions_per_seq,
            "--dupe_factor=%d" % args.dupe_factor, "--random_seed=12345",
            "--masked_lm_prob=0.15", "--short_seq_prob=0.1"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--num_workers", type=int, default=2)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1,
                        help="timed runs of each program (alternating); the best is kept")
    parser.add_argument("--skip_original", action="store_true")
    args = parser.parse_args()

    work_dir = tempfile.mkdtemp(prefix="pretraining_data_bench.")
    try:
        input_path = os.path.join(work_dir, "reviews.txt")
        num_documents = write_review_documents(
            os.path.join(assets.corpora_dir(), "polarity-en-pang&lee1.csv"), input_path)
        vocab_file = os.path.join(assets.minilm_dir(), "vocab.txt")
        programs = {"ours": [sys.executable, "create_pretraining_data.py",
                             "--num_workers=%d" % args.num_workers]}
        if not args.skip_original:
            shim_path = os.path.join(work_dir, "run_original.py")
            with open(shim_path, "w") as f:
                f.write(SHIM)
            programs["original"] = [sys.executable, shim_path, fetch_original(work_dir)]
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        best = {}
        for round_index in range(args.rounds):
            for name, command in programs.items():
                output = os.path.join(work_dir, "%s-%d.tfrecord" % (name, round_index))
                wall, cpu, _ = timed_run(
                    command + common_flags(args, input_path, vocab_file, output), env)
                instances = count_records(output)
                os.remove(output)
                rate = instances / wall
                print("round %d %-8s %7d instances in %6.2f s wall (%6.2f s CPU): "
                      "%8.0f instances/s" % (round_index + 1, name, instances, wall, cpu,
                                             rate), flush=True)
                if name not in best or rate > best[name][0]:
                    best[name] = (rate, instances, wall, cpu)
        print("input: %d reviews, dupe_factor %d, max_seq_length %d; ours with %d worker(s) "
              "on %d core(s)" % (num_documents, args.dupe_factor, args.max_seq_length,
                                 args.num_workers, os.cpu_count()))
        for name, (rate, instances, wall, cpu) in best.items():
            print("%-8s %8.0f instances/s  (%d instances, %.2f s wall, %.2f s CPU)"
                  % (name, rate, instances, wall, cpu))
        if "original" in best:
            print("ratio ours/original: %.1fx" % (best["ours"][0] / best["original"][0]))
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
