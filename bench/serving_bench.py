"""Requests/s and latency of serving_server.py with and without batching, in one run.

    python bench/serving_bench.py --export_dir=runs/quickstart/classifier/serving \
        --clients=8 --requests=20 --rounds=3 --rows_per_request=1

starts the local server twice on free loopback ports, one --noenable_batching
and one --enable_batching, and measures each in `--rounds` rounds, alternating
between them: in a round `--clients` concurrent clients each send `--requests`
`:predict` requests one after the other (`--rows_per_request` tokenized
sentences each), after a short unmeasured warm-up. It prints one table:
requests/s, rows/s, p50 and p99 latency and rows per model call for both, and
their ratio, then checks both gave the same probabilities. Without
--export_dir a tiny random model is trained and exported first (seconds; its
numbers say more about HTTP and JSON overheads than about BERT). Every loop is
bounded, only 127.0.0.1 is used, and the servers are stopped at the end.
"""

import argparse
import asyncio
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import time

import aiohttp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

REPO = benchlib.REPO
sys.path.insert(0, REPO)

from bert_toolkit.engine import export_layout  # noqa: E402
from bert_toolkit.errors import InputError  # noqa: E402
from bert_toolkit.serving import client as serving_client  # noqa: E402
from bert_toolkit.text import tokenization  # noqa: E402

# Review-like sentences; each request takes `rows_per_request` of them in turn.
SENTENCES = [
    "a gripping , beautifully acted story that stays with you long after the credits .",
    "the plot is a mess and the jokes fall flat ; i wanted my two hours back .",
    "an uneven but often charming debut .",
    "dull , lifeless and far too long .",
    "the music is great and the acting is fine , but the story is not .",
    "one of the best films of the year .",
    "it is a very bad film , and not even a fun one .",
    "the director knows exactly what she is doing .",
]
SERVER_START_SECONDS = 120
REQUEST_TIMEOUT_SECONDS = 120


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message):
        raise InputError(message)


def make_parser():
    parser = _ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--export_dir", help="Model base path or version folder (default: "
                        "train and export a tiny model first).")
    parser.add_argument("--clients", type=int, default=8, help="Concurrent clients.")
    parser.add_argument("--requests", type=int, default=20,
                        help="Requests per client, one after the other.")
    parser.add_argument("--rows_per_request", type=int, default=1,
                        help="Sentences in each request.")
    parser.add_argument("--rounds", type=int, default=3,
                        help="Measured rounds per mode (each: every client sends "
                             "--requests requests), alternating between the modes.")
    parser.add_argument("--warmup_requests", type=int, default=2,
                        help="Unmeasured requests per client before the measured ones.")
    parser.add_argument("--max_batch_size", type=int, default=64)
    parser.add_argument("--batch_timeout_micros", type=int, default=2000)
    parser.add_argument("--num_batch_threads", type=int, default=os.cpu_count() or 1)
    return parser


def train_tiny_export(root):
    """Trains and exports a tiny random classifier under `root`; returns its base path."""
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from tiny import write_sentiment_csv, write_tiny_model
    model = write_tiny_model(os.path.join(root, "model"), with_classifier_labels=2)
    data_dir = os.path.join(root, "data")
    os.makedirs(data_dir)
    write_sentiment_csv(os.path.join(data_dir, "train.csv"), 64, seed=1)
    output_dir = os.path.join(root, "out")
    subprocess.run(
        [sys.executable, os.path.join(REPO, "run_custom_classifier.py"), "--task_name=custom",
         "--data_dir=%s" % data_dir, "--text_a_column=sentence", "--label_column=label",
         "--vocab_file=%s" % model["vocab_file"],
         "--bert_config_file=%s" % model["bert_config_file"],
         "--init_checkpoint=%s" % model["init_checkpoint"], "--output_dir=%s" % output_dir,
         "--max_seq_length=16", "--num_train_epochs=1", "--train_batch_size=8",
         "--do_train", "--save_for_serving"],
        cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    return os.path.join(output_dir, "serving")


def request_bodies(export_dir, num_clients, rows_per_request):
    """One JSON :predict body (bytes) per client, tokenized as serving_client does."""
    vocab_file, config_file = export_layout.resolve_assets(export_dir)
    config = serving_client.load_serving_config(config_file)
    tokenizer = tokenization.FullTokenizer(vocab_file, config["do_lower_case"])
    bodies = []
    for client in range(num_clients):
        texts = [SENTENCES[(client * rows_per_request + i) % len(SENTENCES)]
                 for i in range(rows_per_request)]
        pairs = [(text, text) if config["sentence_pairs"] else (text, None) for text in texts]
        features = serving_client.encode(tokenizer, pairs, config["max_seq_length"])
        bodies.append(json.dumps(serving_client.build_request(features)).encode("utf-8"))
    return bodies, config


def start_server(export_dir, flags):
    """(process, model URL) of serving_server.py on a free loopback port."""
    process = subprocess.Popen(
        [sys.executable, os.path.join(REPO, "serving_server.py"), "--model_name=bench",
         "--model_base_path=%s" % export_dir, "--host=127.0.0.1", "--port=0"] + flags,
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), universal_newlines=True)
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        ready = selector.select(timeout=SERVER_START_SECONDS)
    line = process.stdout.readline() if ready else ""
    match = re.search(r" at (http://\S+)", line)
    if not match:
        stop_server(process)
        raise RuntimeError("the server did not start within %d s (exit code %s)"
                           % (SERVER_START_SECONDS, process.poll()))
    return process, match.group(1)


def stop_server(process):
    """SIGTERM and wait; the exit code (None if it had to be killed)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return None


async def run_load(url, bodies, num_requests, num_warmup):
    """(seconds, latencies in s, last answer per client, model calls, rows) of every
    client sending its body `num_requests` times in a row, all clients at once, after
    a warm-up; the model calls and rows are the server's, counted without the warm-up.

    A body is bytes, or a function that makes them for each request (its time
    is part of the request's latency, as in a client that tokenizes)."""
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS)
    connector = aiohttp.TCPConnector(limit=len(bodies))
    headers = {"Content-Type": "application/json"}
    metrics_url = url.split("/v1/")[0] + "/monitoring/prometheus/metrics"
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        async def send(body):
            async with session.post(url + ":predict", data=body, headers=headers) as response:
                answer = await response.json()
                if response.status != 200:
                    raise RuntimeError("%s: HTTP %d: %s" % (url, response.status, answer))
                return answer

        async def client(body, count, latencies):
            answer = None
            for _ in range(count):
                started = time.perf_counter()
                answer = await send(body() if callable(body) else body)
                latencies.append(time.perf_counter() - started)
            return answer

        async def server_counts():
            async with session.get(metrics_url) as response:
                return parse_metrics(await response.text())

        await asyncio.gather(*(client(body, num_warmup, []) for body in bodies))
        before = await server_counts()
        latencies = []
        started = time.perf_counter()
        answers = await asyncio.gather(*(client(body, num_requests, latencies)
                                         for body in bodies))
        seconds = time.perf_counter() - started
        after = await server_counts()
    calls, rows = ("bert_serving_%s_total" % name for name in ("model_calls", "rows"))
    return (seconds, np.array(latencies), answers, after[calls] - before[calls],
            after[rows] - before[rows])


def parse_metrics(text):
    """Name -> value of the server's Prometheus text (model calls, rows, ...)."""
    return {name: float(value) for name, value in
            (line.split() for line in text.splitlines() if not line.startswith("#"))}


def summarize(rounds, args):
    """One mode's numbers over its rounds [run_load() results]: requests/s, rows/s,
    p50/p99 ms, rows per model call, and the last answers."""
    seconds = sum(r[0] for r in rounds)
    milliseconds = np.concatenate([r[1] for r in rounds]) * 1000.0
    total_requests = len(milliseconds)
    return {"requests_per_second": total_requests / seconds,
            "rows_per_second": total_requests * args.rows_per_request / seconds,
            "p50_ms": float(np.percentile(milliseconds, 50)),
            "p99_ms": float(np.percentile(milliseconds, 99)),
            "rows_per_call": sum(r[4] for r in rounds) / max(sum(r[3] for r in rounds), 1),
            "answers": rounds[-1][2]}


def measure(export_dir, modes, bodies, args):
    """Mode name -> summarize() of `args.rounds` rounds per mode.

    Both servers run for the whole measurement and the rounds alternate between
    them, so a change in the machine's background load hits both modes alike
    (the idle server costs no CPU).
    """
    servers = {}
    try:
        for mode, flags in modes.items():
            servers[mode] = start_server(export_dir, flags)
        rounds = {mode: [] for mode in modes}
        for _ in range(args.rounds):
            for mode, (_, url) in servers.items():
                rounds[mode].append(asyncio.run(run_load(
                    url, bodies, args.requests, args.warmup_requests)))
    finally:
        exit_codes = {mode: stop_server(process) for mode, (process, _) in servers.items()}
    for mode, code in exit_codes.items():
        if code != 0:
            raise RuntimeError("the %s server exited with %s on SIGTERM" % (mode, code))
    return {mode: summarize(mode_rounds, args) for mode, mode_rounds in rounds.items()}


def probabilities(answer):
    return np.array([row["probabilities"] for row in answer["predictions"]])


def format_table(results):
    """The results table, with the batching / no batching ratios under it."""
    lines = ["%-12s %12s %10s %9s %9s %16s" % (
        "mode", "requests/s", "rows/s", "p50 ms", "p99 ms", "rows/model call")]
    for mode, r in results.items():
        lines.append("%-12s %12.1f %10.1f %9.1f %9.1f %16.1f" % (
            mode, r["requests_per_second"], r["rows_per_second"], r["p50_ms"], r["p99_ms"],
            r["rows_per_call"]))
    off, on = results["no batching"], results["batching"]
    lines.append("batching / no batching: %.2fx requests/s, p50 %.2fx, p99 %.2fx" % (
        on["requests_per_second"] / off["requests_per_second"], on["p50_ms"] / off["p50_ms"],
        on["p99_ms"] / off["p99_ms"]))
    return "\n".join(lines)


def check_args(args):
    for name in ("clients", "requests", "rounds", "rows_per_request", "max_batch_size",
                 "num_batch_threads"):
        if getattr(args, name) < 1:
            raise InputError("--%s must be >= 1, got %d" % (name, getattr(args, name)))
    if args.warmup_requests < 0 or args.batch_timeout_micros < 0:
        raise InputError("--warmup_requests and --batch_timeout_micros must be >= 0")


def run(args):
    check_args(args)
    with tempfile.TemporaryDirectory(prefix="serving_bench_") as scratch:
        export_dir = args.export_dir
        if not export_dir:
            print("no --export_dir: training and exporting a tiny random model", flush=True)
            export_dir = train_tiny_export(scratch)
        _, version_dir = export_layout.resolve_version_dir(export_dir)
        bodies, config = request_bodies(export_dir, args.clients, args.rows_per_request)
        print("export %s (max_seq_length %d); %d clients x %d requests x %d rows, loopback, "
              "%d rounds per mode, alternating, %d CPUs; batching: max_batch_size %d, "
              "batch_timeout_micros %d, num_batch_threads %d" % (
                  version_dir, config["max_seq_length"], args.clients, args.requests,
                  args.rows_per_request, args.rounds, os.cpu_count() or 0, args.max_batch_size,
                  args.batch_timeout_micros, args.num_batch_threads), flush=True)
        results = measure(export_dir, {
            "no batching": ["--noenable_batching"],
            "batching": ["--enable_batching", "--max_batch_size=%d" % args.max_batch_size,
                         "--batch_timeout_micros=%d" % args.batch_timeout_micros,
                         "--num_batch_threads=%d" % args.num_batch_threads]}, bodies, args)
    same = all(np.allclose(probabilities(a), probabilities(b), atol=1e-4) for a, b in zip(
        results["no batching"]["answers"], results["batching"]["answers"]))
    print(format_table(results))
    print("same probabilities with and without batching (atol 1e-4): %s"
          % ("yes" if same else "NO"))
    return 0 if same else 1


def main():
    benchlib.bench_main(make_parser(), run)


if __name__ == "__main__":
    main()
