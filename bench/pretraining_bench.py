"""Pre-training examples/s of run_pretraining.py's model_fn against transformers'
BertForPreTraining, in one run.

    python bench/pretraining_bench.py --config=minilm --seq_length=128 --precision=fp32 \
        --rounds=3

OURS is what `run_pretraining.py` trains: `model_fn_builder.build_model_fn` with the
masked-LM + next-sentence head of tasks/pretraining/task.py (its vocabulary
projection runs on the masked positions only, as Google's does), its input_fn
over a TFRecord, one CPU replica, AdamW (`--optimizer=adamw`) and/or LAMB, inside
`Estimator.train` (bench/estimator_rounds.py).

The PEER (bench/torch_peer.py --mode=pretrain) trains transformers'
`BertForPreTraining` of the same config as its users do: labels -100 except at
the masked positions, `next_sentence_label`, torch.optim.AdamW, gradient clipping;
eager (fp32, or bf16 under torch.autocast) and under torch.compile. Its forward
computes the vocabulary logits at every position (its design); the MFU of both
sides counts the FLOPs of the masked positions only (the work the task needs).

Both sides train on the same examples: random token ids filling the whole
sequence, segment A/B halves, `--max_predictions` masked positions per
sequence (default 15% of the length, as the originals' recipe gives) and random
next-sentence labels. Dropout on; random initial weights (speed does not depend
on them). Printed per side: examples/s (median of the rounds, the sides taking
turns), achieved GFLOP/s and MFU against the machine's matmul peak.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import estimator_rounds  # noqa: E402
import finetune_bench  # noqa: E402

import benchlib  # noqa: E402

sys.path.insert(0, benchlib.REPO)
from bert_toolkit.model import flops  # noqa: E402


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    benchlib.add_model_args(parser, batch_help="Examples per optimizer step.")
    parser.add_argument("--max_predictions", type=int, default=0,
                        help="Masked positions per sequence (0: 15%% of --seq_length, "
                             "rounded: 19 at 128, 77 at 512).")
    parser.add_argument("--precision", default="fp32",
                        help="Comma-separated: fp32, bf16.")
    parser.add_argument("--optimizer", default="adamw,lamb",
                        help="Comma-separated, one ours side each: adamw, lamb (the peer "
                             "uses torch.optim.AdamW).")
    benchlib.add_round_args(parser, 4, "Interpreter with torch + transformers.")
    parser.add_argument("--profile", action="store_true",
                        help="Instead of rounds: trace --steps_per_round steps of ours (first "
                             "precision and optimizer) and print where the time goes, as "
                             "finetune_bench.py --profile does.")
    return parser


def predictions_per_sequence(args):
    return args.max_predictions or max(1, int(round(0.15 * args.seq_length)))


def make_pretraining_features(config, seq_length, predictions, num_examples, seed=0):
    """dict of arrays: input_ids, input_mask, segment_ids [n, seq] int32;
    masked_lm_positions, masked_lm_ids [n, predictions] int32, masked_lm_weights
    [n, predictions] float32; next_sentence_labels [n] int32."""
    rng = np.random.RandomState(seed)
    vocab_size = config["vocab_size"]
    low = 1000 if vocab_size > 2000 else 5
    ids = rng.randint(low, vocab_size, size=(num_examples, seq_length))
    segments = np.zeros_like(ids)
    segments[:, seq_length // 2:] = 1
    # Distinct positions, [CLS] (0) excluded, in order as the data writer keeps them.
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq_length), predictions,
                                             replace=False) for _ in range(num_examples)]),
                        axis=1)
    return {"input_ids": ids.astype(np.int32), "input_mask": np.ones_like(ids, np.int32),
            "segment_ids": segments.astype(np.int32),
            "masked_lm_positions": positions.astype(np.int32),
            "masked_lm_ids": rng.randint(low, vocab_size,
                                         size=positions.shape).astype(np.int32),
            "masked_lm_weights": np.ones(positions.shape, np.float32),
            "next_sentence_labels": rng.randint(0, 2, size=num_examples).astype(np.int32)}


# -- ours: the Estimator worker ------------------------------------------------------


def serve_ours(args):

    from bert_toolkit.engine import distribution, model_fn_builder, training_plan
    from bert_toolkit.estimator_compat import tf_estimator
    from bert_toolkit.tasks.pretraining import task as pretraining

    peak, bert_config, features, record_path = estimator_rounds.prepare_worker(args)
    plan = training_plan.plan_steps(10 ** 8, 10, args.batch, 1, 1)
    model_fn = model_fn_builder.build_model_fn(
        bert_config, pretraining.make_head_fn(bert_config, args.precision), plan,
        precision=args.precision, optimizer=args.optimizer, learning_rate=1e-4,
        log_every_n_steps=10 ** 7, max_seq_length=args.seq_length)
    run_config = distribution.make_run_config(
        os.path.join(args.workdir, "model"), distribution.replica_devices(False, 1, 1),
        save_checkpoints_steps=10 ** 8, seed=1)
    estimator = tf_estimator.Estimator(model_fn=model_fn, config=run_config)
    input_fn = pretraining.make_train_input_fn(
        [record_path], args.seq_length, predictions_per_sequence(args), args.batch, seed=1,
        shuffle_buffer=len(features["input_ids"]))
    input_rate = estimator_rounds.input_examples_per_second(input_fn, args.batch)
    estimator_rounds.train_in_rounds(estimator, input_fn, args, peak, input_rate)


# -- controller ----------------------------------------------------------------------


def run(args):
    _, config = benchlib.load_config(args.config)
    precisions = benchlib.split_choices(args.precision, ("fp32", "bf16"), "--precision")
    optimizers = benchlib.split_choices(args.optimizer, ("adamw", "lamb"), "--optimizer")
    if args.seq_length > config["max_position_embeddings"]:
        raise benchlib.BenchError("--seq_length=%d exceeds the config's "
                                  "max_position_embeddings %d"
                                  % (args.seq_length, config["max_position_embeddings"]))
    predictions = predictions_per_sequence(args)
    if predictions >= args.seq_length:
        raise benchlib.BenchError("--max_predictions=%d: expected fewer than --seq_length=%d"
                                  % (predictions, args.seq_length))
    tf_sides = benchlib.tf_python_sides(args.tf_python)
    peer_python = None
    if args.peer == "auto":
        peer_python = benchlib.find_peer_python(("torch", "transformers"), args.peer_python)
    example_flops = flops.pretraining_flops_per_example(config, args.seq_length, predictions)
    print(benchlib.machine_line())
    print("pre-training %s, seq %d, %d masked positions, batch %d; %.2f GFLOP per example "
          "(masked-LM head %.0f%%); %d rounds x %d steps after %d warm-up steps, sides "
          "alternating" % (args.config, args.seq_length, predictions, args.batch,
                           example_flops / 1e9,
                           100 * (1 - flops.training_flops_per_example(
                               config, args.seq_length) / example_flops),
                           args.rounds, args.steps_per_round, args.warmup_steps), flush=True)
    if benchlib.describe_tf_pythons(tf_sides):
        print(benchlib.describe_tf_pythons(tf_sides), flush=True)
    workdir = benchlib.scratch_dir("pretraining_bench_")
    try:
        features_path = os.path.join(workdir, "features.npz")
        np.savez(features_path, **make_pretraining_features(
            config, args.seq_length, predictions, max(8 * args.batch, 64)))
        sides = [(p, o, t) for p in precisions for o in optimizers
                 for t in range(len(tf_sides))]
        if args.profile:
            sides = sides[:1]
        workers = {}
        try:
            for precision, optimizer, tf_index in sides:
                tf_suffix, python = tf_sides[tf_index]
                name = "ours %s %s%s" % (precision, optimizer, tf_suffix)
                sub = os.path.join(workdir, "%s-%s-tf%d" % (precision, optimizer, tf_index))
                os.makedirs(sub)
                command = [python, os.path.abspath(__file__), "--worker=ours",
                           "--features=%s" % features_path, "--workdir=%s" % sub,
                           "--precision=%s" % precision, "--optimizer=%s" % optimizer]
                workers[name] = benchlib.Worker(name, command + passthrough(args),
                                                benchlib.onednn_sides(args.onednn)[0][1])
            if args.profile:
                result = workers[name].request("round", steps=args.steps_per_round)
                benchlib.close_all(workers)
                return estimator_rounds.print_profile(result, args.steps_per_round, name)
            if peer_python:
                for name, precision, extra in benchlib.torch_peer_sides(precisions,
                                                                        args.torch_compile):
                    workers[name] = benchlib.Worker(name, [
                        peer_python, os.path.join(benchlib.BENCH_DIR, "torch_peer.py"),
                        "--mode=pretrain", "--features=%s" % features_path,
                        "--precision=%s" % precision, "--config=%s" % args.config,
                        "--batch=%d" % args.batch, "--warmup_steps=%d" % args.warmup_steps,
                        "--peak_size=%d" % args.peak_size] + extra)
        except BaseException:
            benchlib.close_all(workers)
            raise
        results = benchlib.measure_sides(workers, args, precisions, peer_python, example_flops)
    finally:
        benchlib.remove_tree(workdir)
    finetune_bench.print_results(results, peer_python, args)
    benchlib.write_json(args.json, {"bench": "pre-training", "args": vars(args),
                                    "machine": benchlib.machine_line(),
                                    "results": results})
    return 0


def passthrough(args):
    """The controller's flags that a worker needs too."""
    return ["--config=%s" % args.config, "--seq_length=%d" % args.seq_length,
            "--batch=%d" % args.batch, "--warmup_steps=%d" % args.warmup_steps,
            "--peak_size=%d" % args.peak_size, "--steps_per_round=%d" % args.steps_per_round,
            "--max_predictions=%d" % predictions_per_sequence(args)] + (
                ["--profile"] if args.profile else [])


def main():
    benchlib.bench_main(make_parser(), run, serve_ours)


if __name__ == "__main__":
    main()
