"""Raw text through serving_server.py: tokenized in the export's graph vs by the client.

    python bench/text_serving_bench.py --export_dir=runs/quickstart/classifier/serving \
        --clients=4 --requests=20 --rows_per_request=8 --rounds=3

One server (batching on) serves one export; two kinds of client take turns,
round by round, sending the same real review sentences:

  client tokenizes  each request: FullTokenizer.encode_pairs in the client
                    (the Rust fast path, as serving_client.py does), then the
                    ids to serving_default
  in-graph          each request: the raw text to the `text` signature, which
                    tokenizes inside the SavedModel (bert_toolkit/text/graph_tokenization.py)

A client's own work (tokenizing, building JSON) counts in its latency. It
prints requests/s, rows/s and latency of both and their ratio, then checks
both gave the same probabilities. Only 127.0.0.1 is used; every loop is
bounded and the server is stopped at the end.
"""

import asyncio
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serving_bench  # noqa: E402

import benchlib  # noqa: E402

sys.path.insert(0, benchlib.REPO)
from bert_toolkit.engine import export_layout  # noqa: E402
from bert_toolkit.errors import InputError  # noqa: E402
from bert_toolkit.serving import client as serving_client  # noqa: E402
from bert_toolkit.text import tokenization  # noqa: E402


def make_parser():
    parser = serving_bench.make_parser()
    parser.description = __doc__.split("\n\n")[0]
    parser.set_defaults(clients=4, rows_per_request=8)
    return parser


def body_makers(export_dir, num_clients, rows_per_request):
    """mode -> one body function per client (each call builds one request's bytes)."""
    vocab_file, config_file = export_layout.resolve_assets(export_dir)
    config = serving_client.load_serving_config(config_file)
    if not config.get("text_signature"):
        raise InputError("--export_dir=%s: this export has no text signature (export it "
                         "again with this version of the toolkit)" % export_dir)
    tokenizer = tokenization.FullTokenizer(vocab_file, config["do_lower_case"])
    sentences = serving_bench.SENTENCES
    makers = {"client tokenizes": [], "in-graph": []}
    for client in range(num_clients):
        texts = [sentences[(client * rows_per_request + i) % len(sentences)]
                 for i in range(rows_per_request)]
        pairs = [(text, text if config["sentence_pairs"] else None) for text in texts]

        def tokenized(pairs=pairs):
            features = serving_client.encode(tokenizer, pairs, config["max_seq_length"])
            return json.dumps(serving_client.build_request(features)).encode("utf-8")

        def raw(pairs=pairs):
            return json.dumps(serving_client.build_request(
                serving_client.text_inputs(pairs, config), "row",
                serving_client.TEXT_SIGNATURE)).encode("utf-8")
        makers["client tokenizes"].append(tokenized)
        makers["in-graph"].append(raw)
    return makers, config


def measure(export_dir, makers, args):
    """mode -> serving_bench.summarize() of its rounds, the modes alternating."""
    process, url = serving_bench.start_server(export_dir, [
        "--enable_batching", "--max_batch_size=%d" % args.max_batch_size,
        "--batch_timeout_micros=%d" % args.batch_timeout_micros,
        "--num_batch_threads=%d" % args.num_batch_threads])
    try:
        rounds = {mode: [] for mode in makers}
        for _ in range(args.rounds):
            for mode, bodies in makers.items():
                rounds[mode].append(asyncio.run(serving_bench.run_load(
                    url, bodies, args.requests, args.warmup_requests)))
    finally:
        code = serving_bench.stop_server(process)
    if code != 0:
        raise RuntimeError("the server exited with %s on SIGTERM" % code)
    return {mode: serving_bench.summarize(mode_rounds, args)
            for mode, mode_rounds in rounds.items()}


def run(args):
    serving_bench.check_args(args)
    with tempfile.TemporaryDirectory(prefix="text_serving_bench_") as scratch:
        export_dir = args.export_dir
        if not export_dir:
            print("no --export_dir: training and exporting a tiny random model", flush=True)
            export_dir = serving_bench.train_tiny_export(scratch)
        makers, config = body_makers(export_dir, args.clients, args.rows_per_request)
        print("%s; max_seq_length %d; %d clients x %d requests x %d rows, %d rounds per "
              "mode, alternating" % (benchlib.machine_line(), config["max_seq_length"],
                                    args.clients, args.requests, args.rows_per_request,
                                    args.rounds), flush=True)
        results = measure(export_dir, makers, args)
    lines = ["%-17s %12s %10s %9s %9s" % ("mode", "requests/s", "rows/s", "p50 ms", "p99 ms")]
    for mode, r in results.items():
        lines.append("%-17s %12.1f %10.1f %9.1f %9.1f" % (
            mode, r["requests_per_second"], r["rows_per_second"], r["p50_ms"], r["p99_ms"]))
    client, graph = results["client tokenizes"], results["in-graph"]
    lines.append("in-graph / client tokenizes: %.2fx requests/s, p50 %.2fx" % (
        graph["requests_per_second"] / client["requests_per_second"],
        graph["p50_ms"] / client["p50_ms"]))
    print("\n".join(lines))
    same = all(np.allclose(serving_bench.probabilities(a), serving_bench.probabilities(b),
                           atol=1e-4) for a, b in zip(client["answers"], graph["answers"]))
    print("same probabilities (atol 1e-4): %s" % ("yes" if same else "NO"))
    return 0 if same else 1


def main():
    benchlib.bench_main(make_parser(), run)


if __name__ == "__main__":
    main()
