"""The data splits of the README's measured classifier runs (seeded, reproducible).

    python scripts/experiments/make_splits.py imbalanced DIR    # 1 positive in 10
    python scripts/experiments/make_splits.py long_reviews DIR  # the 1,500 full reviews
"""

import csv
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from bert_toolkit import assets  # noqa: E402


def read_corpus(name):
    with open(os.path.join(assets.corpora_dir(), name), encoding="utf-8-sig",
              newline="") as f:
        rows = [(label, text.strip()) for label, text in csv.reader(f)]
    random.Random(0).shuffle(rows)
    return rows


def write(folder, name, header, rows):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def imbalanced(folder):
    """Sentences: train 1,000 negative + 100 positive, held out 500 + 50."""
    rows = read_corpus("polarity-en-pang&lee2.csv")
    negative = [r for r in rows if r[0] == "-1"]
    positive = [r for r in rows if r[0] == "1"]
    for name, part in (("train.csv", negative[:1000] + positive[:100]),
                       ("dev.csv", negative[1000:1500] + positive[100:150])):
        random.Random(1).shuffle(part)
        write(folder, name, ["label", "sentence"], part)


def long_reviews(folder):
    """Full reviews (745 words on average): 1,200 for training, 300 held out."""
    rows = read_corpus("polarity-en-pang&lee1.csv")
    write(folder, "train.csv", ["label", "review"], rows[:1200])
    write(folder, "dev.csv", ["label", "review"], rows[1200:])


if __name__ == "__main__":
    {"imbalanced": imbalanced, "long_reviews": long_reviews}[sys.argv[1]](sys.argv[2])
