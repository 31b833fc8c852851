"""Accumulated updates before and after one all-reduce per update, in one run.

    python bench/accumulation_bench.py --before=917030e --accumulation=4

Times pre-training updates of `--config` (random weights; records cut by
create_pretraining_data.py from the real corpus text with the MiniLM
vocabulary) with `--accumulation` micro-batches per update, in two layouts:

  replicas   one process, two CPU replicas (MirroredStrategy; the gradients of
             the replicas are summed on one device)
  workers    two local worker processes given TF_CONFIG, one CPU core each
             (MultiWorkerMirroredStrategy: ring all-reduce over gRPC)

each with this checkout's code (AFTER: the micro-batches of an update add to
replica-local buffers and only the last one all-reduces) and with the code of
`--before`, a git revision checked out into a scratch worktree or a folder
(BEFORE, at 917030e: every micro-batch all-reduced its gradients). The four
runs take turns, `--rounds` times, so background load hits all alike. A
run's number is the median of the per-update examples/s the training log
writes to TensorBoard, the first update (graph optimisation) left out. The
bytes all-reduced per update are arithmetic: 4 bytes x trained parameters x
all-reduces.
"""

import argparse
import json
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pretraining_data_bench  # noqa: E402

import benchlib  # noqa: E402

sys.path.insert(0, benchlib.REPO)


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    benchlib.add_model_args(parser, batch_help="Examples per replica per micro-batch.")
    parser.set_defaults(batch=8)
    parser.add_argument("--before", required=True,
                        help="The code to compare with: a git revision (e.g. the commit "
                             "before the change), or a folder holding a checkout.")
    parser.add_argument("--accumulation", type=int, default=4)
    parser.add_argument("--updates", type=int, default=6, help="Optimizer updates per run.")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--reviews", type=int, default=300,
                        help="Movie reviews cut into the pre-training records.")
    parser.add_argument("--layouts", default="replicas,workers")
    parser.add_argument("--json", help="Also write the results here.")
    return parser


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_inputs(args, scratch):
    """(bert_config path, records path): the config, and records cut from the
    corpus with the MiniLM vocabulary."""
    from bert_toolkit import assets
    _, fields = benchlib.load_config(args.config)
    vocab_file = os.path.join(assets.minilm_dir(), "vocab.txt")
    with open(vocab_file, encoding="utf-8") as f:
        fields["vocab_size"] = sum(1 for _ in f)
    config_path = os.path.join(scratch, "bert_config.json")
    with open(config_path, "w") as f:
        json.dump(fields, f)
    text_path = os.path.join(scratch, "reviews.txt")
    pretraining_data_bench.write_review_documents(
        os.path.join(assets.corpora_dir(), "polarity-en-pang&lee1.csv"), text_path,
        limit=args.reviews)
    records = os.path.join(scratch, "train.tfrecord")
    subprocess.run([sys.executable, "create_pretraining_data.py", "--input_file=" + text_path,
                    "--output_file=" + records,
                    "--vocab_file=" + vocab_file,
                    "--max_seq_length=%d" % args.seq_length, "--max_predictions_per_seq=20",
                    "--dupe_factor=2"], cwd=benchlib.REPO, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return config_path, records


def training_rates(output_dir):
    """Per-update examples/s the training log wrote, in step order."""
    from bert_toolkit.engine import training
    return [rate for _, rate in training.logged_values(output_dir, "examples_per_second")]


def run_once(code_dir, layout, args, config_path, records, output_dir):
    """Median examples/s (all replicas) of one pre-training run."""
    flags = ["--input_file=" + records, "--train_batch_size=%d" % args.batch,
             "--bert_config_file=" + config_path,
             "--output_dir=" + output_dir, "--do_train",
             "--max_seq_length=%d" % args.seq_length,
             "--max_predictions_per_seq=20", "--num_train_steps=%d" % args.updates,
             "--num_warmup_steps=1", "--log_every_n_steps=1",
             "--save_checkpoints_steps=100000",
             "--gradient_accumulation_steps=%d" % args.accumulation]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TF_CONFIG", None)
    if layout == "replicas":
        commands = [(flags + ["--num_cpu_replicas=2"], env)]
    else:
        ports = [free_port(), free_port()]
        cluster = {"worker": ["localhost:%d" % port for port in ports]}
        commands = [(flags, dict(env, TF_CONFIG=json.dumps({"cluster": cluster, "task": {
                         "type": "worker", "index": index}}))) for index in range(2)]
    processes = [subprocess.Popen([sys.executable, "run_pretraining.py"] + command, cwd=code_dir,
                                  env=command_env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
                 for command, command_env in commands]
    outputs = [process.communicate()[0] for process in processes]
    if any(process.returncode for process in processes):
        raise benchlib.BenchError("%s run in %s failed:\n%s" % (
            layout, code_dir, "\n".join(output[-2000:] for output in outputs)))
    rates = training_rates(output_dir)[1:]
    if not rates:
        raise benchlib.BenchError("no examples/s in the training log of %s" % output_dir)
    return benchlib.median(rates)


def trained_parameters(config_path):
    """Parameters the pre-training graph trains (encoder, pooler, MLM head)."""
    with open(config_path) as f:
        c = json.load(f)
    h, i, layers = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    embeddings = (c["vocab_size"] + c["max_position_embeddings"] + c["type_vocab_size"]) * h + 2 * h
    layer = 4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h
    heads = (h * h + h) + (h * h + h + 2 * h + c["vocab_size"]) + (2 * h + 2)
    return embeddings + layers * layer + heads


def run(args):
    scratch = benchlib.scratch_dir("accumulation_bench_")
    worktree = None
    if os.path.isdir(args.before):
        before_dir = os.path.abspath(args.before)
    else:
        before_dir = worktree = os.path.join(scratch, "before")
    try:
        if worktree:
            made = subprocess.run(["git", "worktree", "add", "--detach", worktree, args.before],
                                  cwd=benchlib.REPO, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
            if made.returncode:
                raise benchlib.BenchError("--before=%s: not a folder, and git cannot check it "
                                          "out: %s" % (args.before, made.stderr.strip()))
        config_path, records = make_inputs(args, scratch)
        layouts = [layout.strip() for layout in args.layouts.split(",")]
        print(benchlib.machine_line())
        results = {(code, layout): [] for layout in layouts for code in ("before", "after")}
        for round_number in range(args.rounds):
            for (code, layout), rates in results.items():
                code_dir = before_dir if code == "before" else benchlib.REPO
                output_dir = os.path.join(scratch, "%s_%s_%d" % (code, layout, round_number))
                rates.append(run_once(code_dir, layout, args, config_path, records, output_dir))
                print("round %d: %s, %s: %.2f examples/s" % (round_number + 1, layout, code,
                                                             rates[-1]), flush=True)
        parameters = trained_parameters(config_path)
        rows, payload = [], {"config": args.config, "seq_length": args.seq_length,
                             "per_replica_batch": args.batch, "accumulation": args.accumulation,
                             "before": args.before, "trained_parameters": parameters,
                             "machine": benchlib.machine_line(), "layouts": {}}
        for layout in layouts:
            before = benchlib.median(results[("before", layout)])
            after = benchlib.median(results[("after", layout)])
            payload["layouts"][layout] = {"before": before, "after": after,
                                          "rounds_before": results[("before", layout)],
                                          "rounds_after": results[("after", layout)]}
            rows.append([layout, "%.2f" % before, "%.2f" % after,
                         "%.2fx" % benchlib.ratio(after, before)])
        print(benchlib.format_table(["layout", "before ex/s", "after ex/s", "after/before"],
                                    rows))
        megabytes = 4 * parameters / 1e6
        print("all-reduced per update and replica: before %d x %.0f MB, after 1 x %.0f MB "
              "(%d trained parameters)" % (args.accumulation, megabytes, megabytes, parameters))
        benchlib.write_json(args.json, payload)
        return 0
    finally:
        if worktree:
            subprocess.run(["git", "worktree", "remove", "--force", worktree],
                           cwd=benchlib.REPO, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        benchlib.remove_tree(scratch)


if __name__ == "__main__":
    benchlib.bench_main(make_parser(), run)
