"""Fine-tuning examples/s of our Estimator path against PyTorch + transformers, in one run.

    python bench/finetune_bench.py --config=minilm --seq_length=128 --batch=32 \
        --precision=bf16 --rounds=3 --steps_per_round=8

OURS is what `run_custom_classifier.py` runs: `model_fn_builder.build_model_fn` with the
classifier head, `optimization.create_train_op` (AdamW), the TFRecord
input_fn of `input_pipeline`, the RunConfig of `distribution` (replicas,
precision, XLA), inside `Estimator.train`. A hook blocks between
rounds, so one Estimator session serves every round and nothing but training
steps is timed.

The PEER (bench/torch_peer.py, under an interpreter with torch and
transformers; see `benchlib.find_peer_python`) trains
`BertForSequenceClassification` of the same config with torch.optim.AdamW on
the same batches: fp32 eager, and bf16 under torch.autocast. Both sides use
every CPU (2 threads here), dropout on, random initial weights (speed does
not depend on them), and the same examples: random token ids filling the
whole sequence (`--data=synthetic`, the FLOPs count assumes this), or the
real movie-review sentences tokenized to `--seq_length` (`--data=polarity`).

Printed per side: examples/s (median of --rounds rounds of --steps_per_round
optimizer steps each, after --warmup_steps unmeasured ones, the sides taking
turns), model FLOPs per example, achieved GFLOP/s and MFU: the fraction of the
machine's matmul peak at the same precision, measured at start-up with a
2048^3 matmul by each framework (the higher of the two is the peak).
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import estimator_rounds  # noqa: E402

import benchlib  # noqa: E402

sys.path.insert(0, benchlib.REPO)
from bert_toolkit.model import flops  # noqa: E402


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    benchlib.add_model_args(
        parser, batch_help="GLOBAL batch (examples per optimizer step, all replicas).")
    parser.add_argument("--precision", default="fp32,bf16",
                        help="Comma-separated: fp32, bf16 (fp16 is never benchmarked on "
                             "a CPU: no fp16 units, hundreds of times slower).")
    parser.add_argument("--replicas", default="1",
                        help="Comma-separated CPU replica counts for ours, e.g. 1,2 (the "
                             "global batch is split between them).")
    parser.add_argument("--use_xla", action="store_true", help="Ours with XLA JIT.")
    parser.add_argument("--data", choices=["synthetic", "polarity"], default="synthetic")
    parser.add_argument("--padding", default="longest",
                        help="Comma-separated, one ours side each: 'longest' (what the "
                             "toolkit does: each batch cut to its longest sequence, rounded "
                             "up to 16, the encoder skipping the rest of the padding, see "
                             "modeling.token_packing), 'unpacked' (the cut alone), 'full' "
                             "(every batch padded to --seq_length), 'bucketed' (longest, "
                             "with pools of 64 batches sorted by length). "
                             "The peer pads to the batch's longest (rounded up to 16) unless "
                             "only 'full' is asked for.")
    parser.add_argument("--padding_mode", default="longest", help=argparse.SUPPRESS)
    parser.add_argument("--mixed_precision", default="casts",
                        help="Comma-separated, one ours side each for bf16: 'casts' (the "
                             "toolkit's explicit casts), 'graph_rewrite' (TensorFlow's "
                             "automatic mixed precision pass on the fp32 graph, "
                             "--mixed_precision=graph_rewrite).")
    parser.add_argument("--mixed_precision_mode", default="casts", help=argparse.SUPPRESS)
    benchlib.add_round_args(parser, 8, "Interpreter with torch + transformers.")
    parser.add_argument("--profile", action="store_true",
                        help="Instead of rounds: trace --steps_per_round steps of ours (first "
                             "precision, first replica count) and print where the time goes: "
                             "op time by op type and part of the model, and the wall "
                             "time no matmul ran.")
    parser.add_argument("--baseline_config", default="",
                        help="Also run ours on this config (e.g. base beside "
                             "--config=roberta-base), in the same alternating rounds, for the "
                             "ratio of the two models' steps; synthetic data only.")
    parser.add_argument("--num_replicas", type=int, default=1, help=argparse.SUPPRESS)
    return parser


def make_features(config, seq_length, data, num_examples, seed=0):
    """dict of int32 arrays [n, seq]: input_ids, input_mask, segment_ids, label_ids [n]."""
    rng = np.random.RandomState(seed)
    if data == "synthetic":
        vocab_size = config["vocab_size"]
        # Ids above the special tokens (and, in a real vocabulary, the unused ones).
        ids = rng.randint(1000 if vocab_size > 2000 else 5, vocab_size,
                          size=(num_examples, seq_length))
        mask = np.ones_like(ids)
    else:
        import csv

        from bert_toolkit import assets
        from bert_toolkit.text import tokenization
        source = os.path.join(assets.corpora_dir(), "polarity-en-pang&lee2.csv")
        with open(source, encoding="utf-8-sig", newline="") as f:
            rows = [(label, text.strip()) for label, text in csv.reader(f)]
        rows = [rows[i] for i in rng.permutation(len(rows))[:num_examples]]
        tokenizer = tokenization.FullTokenizer(
            os.path.join(assets.minilm_dir(), "vocab.txt"), True)
        ids, mask, _ = tokenizer.encode_pairs([text for _, text in rows], None, seq_length)
    return {"input_ids": ids.astype(np.int32), "input_mask": mask.astype(np.int32),
            "segment_ids": np.zeros_like(ids, dtype=np.int32),
            "label_ids": rng.randint(0, 2, size=len(ids)).astype(np.int32)}


# -- ours: the Estimator worker ------------------------------------------------------


def serve_ours(args):

    from bert_toolkit.engine import distribution, input_pipeline, model_fn_builder, training_plan
    from bert_toolkit.estimator_compat import tf_estimator
    from bert_toolkit.tasks.classification import features as classifier_features
    from bert_toolkit.tasks.classification import head as classifier_head

    peak, bert_config, _, record_path = estimator_rounds.prepare_worker(args)
    spec = classifier_features.feature_spec(args.seq_length, 2, False)
    per_replica_batch = args.batch // args.num_replicas
    plan = training_plan.plan_steps(10 ** 8, 10, per_replica_batch, args.num_replicas, 1)
    rewrite = args.mixed_precision_mode == "graph_rewrite" and args.precision != "fp32"
    model_fn = model_fn_builder.build_model_fn(
        bert_config, classifier_head.make_head_fn(2, bert_config.hidden_dropout_prob), plan,
        precision=args.precision, log_every_n_steps=10 ** 7, graph_rewrite=rewrite,
        skip_padding=args.padding_mode in ("longest", "bucketed"), use_xla=args.use_xla,
        max_seq_length=args.seq_length)
    devices = distribution.replica_devices(False, 1, args.num_replicas)
    model_dir = os.path.join(args.workdir, "model")
    run_config = distribution.make_run_config(model_dir, devices, use_xla=args.use_xla,
                                              save_checkpoints_steps=10 ** 8, seed=1)
    if rewrite:
        run_config = run_config.replace(session_config=distribution.with_mixed_precision_rewrite(
            run_config.session_config, args.precision))
    estimator = tf_estimator.Estimator(model_fn=model_fn, config=run_config)
    # As fine_tuning.prepare builds it: batches cut to their longest sequence.
    trim = () if args.padding_mode == "full" else \
        input_pipeline.trimmable_token_features(spec)
    input_fn = input_pipeline.make_input_fn(record_path, spec, per_replica_batch, True,
                                            seed=1, trim_to_longest_of=trim,
                                            bucket_by_length=args.padding_mode == "bucketed")
    input_rate = estimator_rounds.input_examples_per_second(input_fn, per_replica_batch)
    estimator_rounds.train_in_rounds(estimator, input_fn, args, peak, input_rate)


# -- controller ----------------------------------------------------------------------


def run(args):
    _, config = benchlib.load_config(args.config)
    precisions = [p.strip() for p in args.precision.split(",") if p.strip()]
    for precision in precisions:
        if precision not in ("fp32", "bf16"):
            raise benchlib.BenchError("--precision=%s: expected fp32 and/or bf16 (fp16 on a "
                                      "CPU is not benchmarked: no fp16 units)" % precision)
    replica_counts = [int(r) for r in args.replicas.split(",")]
    onednn_sides = benchlib.onednn_sides(args.onednn)
    tf_sides = benchlib.tf_python_sides(args.tf_python)
    modes = benchlib.split_choices(args.mixed_precision, ("casts", "graph_rewrite"),
                                   "--mixed_precision")
    paddings = [m.strip() for m in args.padding.split(",") if m.strip()]
    if not paddings or set(paddings) - {"longest", "unpacked", "full", "bucketed"}:
        raise benchlib.BenchError("--padding=%s: expected longest, unpacked, full and/or "
                                  "bucketed" % args.padding)
    for count in replica_counts:
        if count < 1 or args.batch % count:
            raise benchlib.BenchError("--replicas=%d must divide --batch=%d"
                                      % (count, args.batch))
    if args.seq_length > config["max_position_embeddings"]:
        raise benchlib.BenchError("--seq_length=%d exceeds the config's "
                                  "max_position_embeddings %d"
                                  % (args.seq_length, config["max_position_embeddings"]))
    peer_python = None
    if args.peer == "auto":
        peer_python = benchlib.find_peer_python(("torch", "transformers"), args.peer_python)
    example_flops = flops.training_flops_per_example(config, args.seq_length)
    baseline = None
    if args.baseline_config:
        if args.data != "synthetic":
            raise benchlib.BenchError("--baseline_config needs --data=synthetic (the "
                                      "real text is tokenized for one vocabulary)")
        _, baseline = benchlib.load_config(args.baseline_config)
        # Ids that both vocabularies hold.
        config = dict(config, vocab_size=min(config["vocab_size"], baseline["vocab_size"]))
    print(benchlib.machine_line())
    print("fine-tuning %s, seq %d, global batch %d, data %s%s; %.2f GFLOP per example%s; "
          "%d rounds x %d steps after %d warm-up steps, sides alternating"
          % (args.config, args.seq_length, args.batch, args.data,
             ", padding %s" % args.padding if args.data != "synthetic" else "", example_flops / 1e9,
             " at full length (GFLOP/s and MFU count the work each side does)"
             if args.data != "synthetic" else "",
             args.rounds, args.steps_per_round, args.warmup_steps), flush=True)
    if benchlib.describe_tf_pythons(tf_sides):
        print(benchlib.describe_tf_pythons(tf_sides), flush=True)
    workdir = benchlib.scratch_dir("finetune_bench_")
    try:
        features = make_features(config, args.seq_length, args.data,
                                 max(8 * args.batch, 256))
        features_path = os.path.join(workdir, "features.npz")
        np.savez(features_path, **features)
        if args.data != "synthetic":
            real = features["input_mask"].sum(axis=1).mean()
            print("mean real tokens per example: %.1f of %d" % (real, args.seq_length))
        if args.profile:
            return profile(args, features_path, workdir, precisions[0], replica_counts[0],
                           tf_sides[0][1])
        workers, replicas, side_paddings = {}, {}, {}
        try:
            # Started one after the other (each warms up alone), then measured in
            # turns: every side sees the same background load.
            for precision, count, padding, (onednn, env), mode, (tf_suffix, python) in [
                    (p, c, m, o, x, t) for p in precisions for c in replica_counts
                    for m in paddings for o in onednn_sides
                    for x in (modes if p != "fp32" else modes[:1]) for t in tf_sides]:
                name = "ours %s%s%s%s%s%s%s" % (
                    precision, " x%d replicas" % count if count > 1 else "",
                    " xla" if args.use_xla else "",
                    " pad %s" % padding if len(paddings) > 1 else "", onednn,
                    " by graph rewrite" if mode == "graph_rewrite" else "", tf_suffix)
                sub = os.path.join(workdir, "%s-%d-%s%s-%s-tf%d" % (
                    precision, count, padding, onednn.replace(" ", "-"), mode,
                    tf_sides.index((tf_suffix, python))))
                os.makedirs(sub)
                command = [python, os.path.abspath(__file__), "--worker=ours",
                           "--features=%s" % features_path, "--workdir=%s" % sub,
                           "--num_replicas=%d" % count, "--precision=%s" % precision,
                           "--padding_mode=%s" % padding, "--mixed_precision_mode=%s" % mode]
                workers[name] = benchlib.Worker(name, command + passthrough(args), env)
                replicas[name] = count
                side_paddings[name] = padding
                if baseline is not None:
                    base_name = "%s [%s]" % (name, args.baseline_config)
                    os.makedirs(sub + "-baseline")
                    workers[base_name] = benchlib.Worker(base_name, command[:4] + [
                        "--workdir=%s" % (sub + "-baseline")] + command[5:] + passthrough(
                        args) + ["--config=%s" % args.baseline_config], env)
                    replicas[base_name] = count
                    side_paddings[base_name] = padding
            if peer_python:
                for name, precision, extra in benchlib.torch_peer_sides(precisions,
                                                                        args.torch_compile):
                    command = [peer_python, os.path.join(benchlib.BENCH_DIR, "torch_peer.py"),
                               "--mode=train", "--features=%s" % features_path,
                               "--precision=%s" % precision, "--config=%s" % args.config,
                               "--batch=%d" % args.batch,
                               "--warmup_steps=%d" % args.warmup_steps,
                               "--peak_size=%d" % args.peak_size] + extra
                    if paddings != ["full"]:
                        command.append("--pad_to_longest")
                    workers[name] = benchlib.Worker(name, command)
        except BaseException:
            benchlib.close_all(workers)
            raise
        results = benchlib.measure_sides(workers, args, precisions, peer_python,
                                         example_flops, replicas)
        if baseline is not None:
            rescale_baseline(results, args.baseline_config, example_flops,
                             flops.training_flops_per_example(baseline, args.seq_length))
        if args.data != "synthetic":
            count_work_done(results, config, features, args.batch, side_paddings,
                            paddings == ["full"])
    finally:
        benchlib.remove_tree(workdir)
    print_results(results, peer_python, args)
    benchlib.write_json(args.json, {"bench": "fine-tuning", "args": vars(args),
                                    "machine": benchlib.machine_line(),
                                    "results": results})
    return 0


def rescale_baseline(results, baseline_name, example_flops, baseline_flops):
    """The baseline sides' GFLOP/s and MFU from their own model's FLOPs per example
    (measure_sides counted --config's)."""
    for result in results:
        if result["side"].endswith("[%s]" % baseline_name):
            for key in ("achieved_gflops", "mfu"):
                result[key] *= baseline_flops / example_flops


def count_work_done(results, config, features, batch, side_paddings, peer_full):
    """On real text, GFLOP/s and MFU from the matmul work each side does: the peer
    pads each batch to its longest rounded up to 16 (to the full length with
    `peer_full`), ours as its --padding (`side_paddings`: side name -> padding)
    says, a 'bucketed' side counted as 'longest'."""
    # (cut to a multiple of, dense layers on the real tokens only) per padding.
    cuts = {"full": (None, False), "unpacked": (16, False), "longest": (16, True),
            "bucketed": (16, True)}
    for result in results:
        padding = side_paddings.get(result["side"], "full" if peer_full else "unpacked")
        # Training: the backward pass's matmuls are twice the forward's.
        benchlib.count_work(result, 3 * benchlib.mean_forward_flops(
            config, features, batch, *cuts[padding]))


def profile(args, features_path, workdir, precision, count, python=None):
    """Traces ours (under `python`, default this interpreter) for one round and
    prints the op types that take the time."""
    command = [python or sys.executable, os.path.abspath(__file__), "--worker=ours",
               "--profile",
               "--features=%s" % features_path, "--workdir=%s" % workdir,
               "--padding_mode=%s" % args.padding.split(",")[0],
               "--num_replicas=%d" % count, "--precision=%s" % precision]
    worker = benchlib.Worker("ours profile", command + passthrough(args),
                             benchlib.onednn_sides(args.onednn)[0][1])
    try:
        result = worker.request("round", steps=args.steps_per_round)
    finally:
        worker.close()
    return estimator_rounds.print_profile(result, args.steps_per_round,
                                          "ours %s, %d replica(s)" % (precision, count))


def passthrough(args):
    """The controller's flags that a worker needs too."""
    out = ["--config=%s" % args.config, "--seq_length=%d" % args.seq_length,
           "--batch=%d" % args.batch, "--warmup_steps=%d" % args.warmup_steps,
           "--peak_size=%d" % args.peak_size,
           "--steps_per_round=%d" % args.steps_per_round]
    if args.use_xla:
        out.append("--use_xla")
    return out


def print_results(results, peer_python, args):
    header = ["side", "examples/s", "rounds", "GFLOP/s", "peak GFLOP/s", "MFU", "load avg",
              "others runnable"]
    rows = [[r["side"], "%.2f" % r["examples_per_second"],
             "/".join("%.1f" % x for x in r["rounds"]), "%.0f" % r["achieved_gflops"],
             "%.0f" % r["peak_gflops"], "%.1f%%" % (100 * r["mfu"]),
             "/".join("%.1f" % x for x in r["load_averages"]),
             "/".join("%.1f" % x for x in r.get("others_runnable", []))] for r in results]
    print(benchlib.format_table(header, rows))
    for r in results:
        if r.get("input_examples_per_second"):
            consumed = r["examples_per_second"] / r["replicas"]  # by each replica
            print("%s: its input pipeline alone delivers %.0f examples/s, %.0fx what a "
                  "replica consumes" % (r["side"], r["input_examples_per_second"],
                                        r["input_examples_per_second"] / consumed))
    if getattr(args, "baseline_config", ""):  # other benches print their results here too
        by_side = {r["side"]: r for r in results}
        for r in results:
            base = by_side.get("%s [%s]" % (r["side"], args.baseline_config))
            if base:
                print("%s / its %s: %.3fx" % (r["side"], args.baseline_config, benchlib.ratio(
                    r["examples_per_second"], base["examples_per_second"])))
    if not peer_python:
        print("peer skipped: %s" % ("--peer=none" if args.peer == "none" else
                                    "no interpreter with torch + transformers found (see "
                                    "requirements-bench.txt)"))
        return
    print("peer ran in a subprocess under %s" % benchlib.describe_python(peer_python))
    peers = [r for r in results if not r["side"].startswith("ours")]
    for r in results:
        if r["side"].startswith("ours"):
            print("%s / %s" % (r["side"], ", ".join("%s %.2fx" % (peer["side"], benchlib.ratio(
                r["examples_per_second"], peer["examples_per_second"])) for peer in peers)))


def main():
    benchlib.bench_main(make_parser(), run, serve_ours)


if __name__ == "__main__":
    main()
