"""SavedModel inference examples/s against PyTorch + transformers and onnxruntime, in one run.

    python bench/inference_bench.py --config=minilm --seq_length=128 --batch=32 \
        --precision=fp32,bf16 --rounds=3 --steps_per_round=10

OURS is the SavedModel users serve: the classifier's model_fn exported by
`export.export_for_serving` (inference precision = --precision), loaded
with `tf.saved_model.load` and called through its serving_default signature,
exactly as serving_server.py does (without HTTP). Without --export_dir the
model has random weights (speed does not depend on them); with --export_dir
an existing export is measured instead (its sequence length wins).

PEERS (bench/torch_peer.py, under an interpreter with torch and transformers):
`BertForSequenceClassification` of the same config in eval mode under
torch.inference_mode, fp32 and bf16 autocast; and that model exported to ONNX
and run by onnxruntime (fp32), when onnxruntime and onnx are installed.

Every side runs the same batches of --batch examples with every CPU: random
token ids that fill the whole sequence (--data=synthetic), or the real movie-review
sentences (--data=sentences), which each side pads as its users do: the peers to
the longest sentence of the batch (transformers' tokenizer with padding=True; the
ONNX model takes any length), ours to --seq_length as a client of the export sends
them, the export cutting each batch to its longest sentence (rounded up to 8)
inside the serving graph and running every layer but the attention products on
the real tokens only (modeling.token_packing). examples/s is the median of
--rounds rounds of --steps_per_round batches, after warm-up, the sides taking
turns; GFLOP/s and MFU count the matmul work each side does.
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
from bert_toolkit.engine import export_layout, model_fn_builder  # noqa: E402


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    benchlib.add_model_args(parser)
    parser.add_argument("--precision", default="fp32,bf16",
                        help="Comma-separated: fp32, bf16 (never fp16 on a CPU).")
    parser.add_argument("--data", choices=["synthetic", "sentences"], default="synthetic")
    parser.add_argument("--export_dir", help="Measure this export (a version folder or "
                        "its parent) instead of a fresh random one.")
    benchlib.add_round_args(parser, 10, "Interpreter with torch + transformers.")
    return parser


def export_random_model(config_fields, seq_length, precision, workdir):
    """Exports the classifier with random weights at `precision`; returns the version dir."""
    import tensorflow as tf

    from bert_toolkit.engine import export, model_fn_builder, training_plan
    from bert_toolkit.estimator_compat import tf_estimator
    from bert_toolkit.model import modeling
    from bert_toolkit.tasks.classification import head as classifier_head
    tf1 = tf.compat.v1
    bert_config = modeling.BertConfig.from_dict(config_fields)
    plan = training_plan.plan_steps(1, 0, 1, 1, 1)
    model_fn = model_fn_builder.build_model_fn(
        bert_config, classifier_head.make_head_fn(2, bert_config.hidden_dropout_prob), plan,
        inference_precision=precision, skip_padding=True)
    checkpoint = os.path.join(workdir, "random", "model.ckpt")
    with tf.Graph().as_default():
        inputs = {name: tf1.placeholder(tf.int32, [None, seq_length], name=name)
                  for name in export_layout.SERVING_INPUTS}
        tf1.train.get_or_create_global_step()
        model_fn(inputs, None, tf_estimator.ModeKeys.PREDICT)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            tf1.train.Saver().save(session, checkpoint, write_meta_graph=False)
    estimator = tf_estimator.Estimator(model_fn=model_fn,
                                       model_dir=os.path.join(workdir, "random"))
    return export.export_for_serving(estimator, os.path.join(workdir, "serving"),
                                     seq_length, {}, checkpoint_path=checkpoint)


def serve_ours(args):

    import tensorflow as tf

    peak = estimator_rounds.measure_tf_peak(args.precision, args.peak_size)
    if args.export_dir:
        _, version_dir = export_layout.resolve_version_dir(args.export_dir)
    else:
        _, fields = benchlib.load_config(args.config)
        version_dir = export_random_model(fields, args.seq_length, args.precision,
                                          args.workdir)
    signature = tf.saved_model.load(version_dir).signatures["serving_default"]
    features = dict(np.load(args.features))
    count = len(features["input_ids"])
    state = {"start": 0}

    def step():
        rows = np.arange(state["start"], state["start"] + args.batch) % count
        state["start"] = (state["start"] + args.batch) % count
        outputs = signature(input_ids=tf.constant(features["input_ids"][rows]),
                            input_mask=tf.constant(features["input_mask"][rows]),
                            segment_ids=tf.constant(features["segment_ids"][rows]))
        outputs["probabilities"].numpy()

    benchlib.serve_steps(step, args.batch, args.warmup_steps,
                         {"peak_gflops": peak, "export": version_dir})


def batch_longest_length(features, batch):
    """The mean over the bench's batches of their longest text, in tokens: the
    length a side that pads each batch to its longest runs at."""
    lengths = features["input_mask"].sum(axis=1)
    count = len(lengths) // batch * batch
    return float(lengths[:count].reshape(-1, batch).max(axis=1).mean())


def export_seq_length(export_dir):
    from bert_toolkit.serving import client as serving_client
    _, config_file = export_layout.resolve_assets(export_dir)
    return serving_client.load_serving_config(config_file)["max_seq_length"]


def run(args):
    _, config = benchlib.load_config(args.config)
    precisions = [p.strip() for p in args.precision.split(",") if p.strip()]
    for precision in precisions:
        if precision not in ("fp32", "bf16"):
            raise benchlib.BenchError("--precision=%s: expected fp32 and/or bf16" % precision)
    if args.export_dir:
        args.seq_length = export_seq_length(args.export_dir)
        if len(precisions) > 1:
            raise benchlib.BenchError("--export_dir: the export has one precision; give "
                                      "it as --precision (fp32 or bf16)")
    onednn_sides = benchlib.onednn_sides(args.onednn)
    tf_sides = benchlib.tf_python_sides(args.tf_python)
    peer_python = None
    ort = False
    if args.peer == "auto":
        peer_python = benchlib.find_peer_python(("torch", "transformers"), args.peer_python)
        ort = peer_python is not None and benchlib.have_modules(
            peer_python, ("onnxruntime", "onnx"))
    features = finetune_bench.make_features(
        config, args.seq_length, "synthetic" if args.data == "synthetic" else "polarity",
        max(4 * args.batch, 128) if args.data == "synthetic" else 32 * args.batch)
    # Matmul work per example: on sentences the peers run every layer at each batch's
    # longest text, our export the attention at that length rounded up and the rest
    # on the real tokens only.
    sentences = args.data == "sentences"
    ours_flops = benchlib.mean_forward_flops(
        config, features, args.batch,
        model_fn_builder.INFERENCE_LENGTH_MULTIPLE if sentences else None, sentences)
    peer_flops = benchlib.mean_forward_flops(config, features, args.batch,
                                             1 if sentences else None)
    print(benchlib.machine_line())
    print("inference %s, seq %d, batch %d, data %s%s; GFLOP per example: %s; %d rounds x %d "
          "batches after %d warm-up batches, sides alternating"
          % (args.export_dir or args.config, args.seq_length, args.batch, args.data,
             " (mean real tokens %.1f, batches' longest %.1f)" % (
                 features["input_mask"].sum(axis=1).mean(),
                 batch_longest_length(features, args.batch))
             if args.data == "sentences" else "",
             "%.2f" % (ours_flops / 1e9) if ours_flops == peer_flops else
             "ours %.2f (padding skipped), peers %.2f" % (ours_flops / 1e9, peer_flops / 1e9),
             args.rounds, args.steps_per_round, args.warmup_steps),
          flush=True)
    if benchlib.describe_tf_pythons(tf_sides):
        print(benchlib.describe_tf_pythons(tf_sides), flush=True)
    workdir = benchlib.scratch_dir("inference_bench_")
    workers = {}
    try:
        features_path = os.path.join(workdir, "features.npz")
        np.savez(features_path, **features)
        # Each ours worker exports the random model itself (serve_ours), under its own
        # interpreter's TensorFlow, into its own folder, before it warms up: every
        # --tf_python side serves an export of its own TensorFlow, as its users would.
        # With --export_dir they all load that one export.
        for precision, (onednn, env), tf_index in [
                (p, o, t) for p in precisions for o in onednn_sides
                for t in range(len(tf_sides))]:
            tf_suffix, python = tf_sides[tf_index]
            sub = os.path.join(workdir, "%s%s-tf%d" % (precision, onednn.replace(" ", "-"),
                                                       tf_index))
            os.makedirs(sub)
            command = [python, os.path.abspath(__file__), "--worker=ours",
                       "--features=%s" % features_path, "--workdir=%s" % sub,
                       "--precision=%s" % precision, "--config=%s" % args.config,
                       "--seq_length=%d" % args.seq_length, "--batch=%d" % args.batch,
                       "--warmup_steps=%d" % args.warmup_steps,
                       "--peak_size=%d" % args.peak_size]
            if args.export_dir:
                command.append("--export_dir=%s" % args.export_dir)
            name = "ours SavedModel %s%s%s" % (precision, onednn, tf_suffix)
            workers[name] = benchlib.Worker(name, command, env)
        if peer_python:
            peers = [(name, "infer", precision, extra) for name, precision, extra
                     in benchlib.torch_peer_sides(precisions, args.torch_compile)]
            if ort:
                peers.append(("onnxruntime fp32", "onnx", "fp32", []))
            for name, mode, precision, extra in peers:
                command = [peer_python, os.path.join(benchlib.BENCH_DIR, "torch_peer.py"),
                           "--mode=%s" % mode, "--features=%s" % features_path,
                           "--precision=%s" % precision, "--config=%s" % args.config,
                           "--batch=%d" % args.batch, "--warmup_steps=%d" % args.warmup_steps,
                           "--peak_size=%d" % args.peak_size] + extra
                if args.data == "sentences":
                    command += ["--pad_to_longest", "--pad_multiple=1"]
                workers[name] = benchlib.Worker(name, command)
        rounds = benchlib.alternate_rounds(workers, args.rounds, args.max_wait,
                                           steps=args.steps_per_round)
        benchlib.print_compile_times(workers)
    finally:
        benchlib.close_all(workers)
        benchlib.remove_tree(workdir)
    results = []
    peaks = benchlib.final_peaks(precisions, peer_python, args.peak_size, args.max_wait,
                                 [python for _, python in tf_sides])
    for name, side_rounds in rounds.items():
        bf16 = "bf16" in name
        # The best either framework reached, at start-up or re-measured after the rounds.
        peak = max([w.ready.get("peak_gflops", 0.0) for n, w in workers.items()
                    if ("bf16" in n) == bf16] + [peaks.get("bf16" if bf16 else "fp32", 0.0)])
        rate = benchlib.median([r["examples_per_second"] for r in side_rounds])
        example_flops = ours_flops if name.startswith("ours") else peer_flops
        results.append({"side": name, "precision": "bf16" if bf16 else "fp32",
                        "examples_per_second": rate,
                        "rounds": [r["examples_per_second"] for r in side_rounds],
                        "load_averages": [r["load_average"] for r in side_rounds],
                        "others_runnable": [r["others_runnable_before"] for r in side_rounds],
                        "python": workers[name].python,
                        "gflops_per_example": example_flops / 1e9, "peak_gflops": peak,
                        "achieved_gflops": rate * example_flops / 1e9,
                        "mfu": rate * example_flops / 1e9 / peak if peak else float("nan")})
    finetune_bench.print_results(results, peer_python, args)
    if peer_python and not ort:
        print("onnxruntime skipped: the peer interpreter lacks onnxruntime or onnx")
    benchlib.write_json(args.json, {"bench": "inference", "args": vars(args),
                                    "machine": benchlib.machine_line(),
                                    "results": results})
    return 0


def main():
    benchlib.bench_main(make_parser(), run, serve_ours)


if __name__ == "__main__":
    main()
