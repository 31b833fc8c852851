"""Our side of the training benches: an Estimator that trains in timed rounds.

What finetune_bench.py and pretraining_bench.py share on the TensorFlow side:
the matmul peak, the input pipeline's own rate, and `train_in_rounds`, which
runs one Estimator session for every round, so that graph building and
warm-up are paid once and nothing but training steps is timed.
"""

import os
import time

import benchlib

# With --profile, BENCH_PROFILE_NODES=N also prints the N nodes (ops by name) that
# took the most time.
PROFILE_NODES = int(os.environ.get("BENCH_PROFILE_NODES", "0") or 0)


def prepare_worker(args):
    """What an ours worker starts from: (matmul peak GFLOP/s at args.precision, the
    BertConfig of args.config, the controller's features (dict of arrays), the
    path of the TFRecord they were written to in args.workdir)."""
    import numpy as np

    from bert_toolkit.engine import input_pipeline
    from bert_toolkit.model import modeling
    peak = measure_tf_peak(args.precision, args.peak_size)
    _, config_fields = benchlib.load_config(args.config)
    features = dict(np.load(args.features))
    record_path = os.path.join(args.workdir, "train.tf_record")
    input_pipeline.write_tfrecord(record_path, (
        {name: values[i] for name, values in features.items()}
        for i in range(len(features["input_ids"]))))
    return peak, modeling.BertConfig.from_dict(config_fields), features, record_path


def train_in_rounds(estimator, input_fn, args, peak, input_rate):
    """Trains `estimator` on `input_fn`: args.warmup_steps unmeasured steps, then
    rounds of args.steps_per_round (or the controller's count) on request, each
    answered with examples/s (args.batch examples per step), wall and CPU
    seconds; with args.profile, also the traced seconds of each op type."""
    import tensorflow as tf
    tf1 = tf.compat.v1
    commands = benchlib.commands()

    class RoundHook(tf1.train.SessionRunHook):
        """Warm-up, then rounds on request; blocks between them (nothing timed there)."""

        def __init__(self):
            self.calls = 0
            self.round_steps = None
            self.started = None
            self.op_times = {}

        def before_run(self, run_context):
            if args.profile and self.round_steps:
                return tf1.train.SessionRunArgs(None, options=tf1.RunOptions(
                    trace_level=tf1.RunOptions.FULL_TRACE))
            return None

        def after_run(self, run_context, run_values):
            self.calls += 1
            if args.profile and self.round_steps and run_values.run_metadata is not None:
                add_op_times(self.op_times, run_values.run_metadata)
            if self.round_steps is None:
                if self.calls < args.warmup_steps:
                    return
                benchlib.send({"ready": True, "peak_gflops": peak,
                               "input_examples_per_second": input_rate})
            else:
                self.round_steps -= 1
                if self.round_steps:
                    return
                seconds = time.perf_counter() - self.started
                cpu = time.process_time() - self.cpu_started
                benchlib.send({"examples_per_second": self.steps * args.batch / seconds,
                               "seconds": seconds, "cpu_seconds": cpu,
                               "op_seconds": dict(self.op_times)})
                self.op_times.clear()
            command = next(commands, None)
            if command is None:
                run_context.request_stop()
                self.round_steps = 1  # the stop takes effect after this run
                return
            self.steps = self.round_steps = int(command.get("steps", args.steps_per_round))
            self.started = time.perf_counter()
            self.cpu_started = time.process_time()

    estimator.train(input_fn, max_steps=10 ** 8, hooks=[RoundHook()])


def print_profile(result, steps, side):
    """Prints a traced round's op types, model parts, both together and (with
    PROFILE_NODES) nodes, by time, then the wall time no matmul ran and the op
    types running in it; returns 0."""
    def kind(prefix):
        return {name[len(prefix):]: t for name, t in result["op_seconds"].items()
                if name.startswith(prefix)}
    parts, pairs, nodes = kind("part: "), kind("pair: "), kind("node: ")
    walls, matmul_free = kind("wall: "), kind("matmul-free: ")
    op_seconds = {name: t for name, t in result["op_seconds"].items()
                  if ": " not in name}
    total = sum(op_seconds.values())
    print("%s, traced: %.3f s wall per step (tracing slows it), %.3f s of op time per step "
          "(the cores' times add up)" % (side, result["seconds"] / steps, total / steps))
    for title, seconds, limit in (("op type", op_seconds, 30), ("part of the model", parts, None),
                                  ("part of the model, op type", pairs, 30),
                                  ("node", nodes, PROFILE_NODES)):
        if not seconds:
            continue
        rows = [[name, "%.1f" % (1000 * t / steps), "%.1f%%" % (100 * t / total)]
                for name, t in sorted(seconds.items(), key=lambda item: -item[1])[:limit]]
        print(benchlib.format_table([title, "ms per step", "share"], rows))
    if walls.get("step"):
        step, free, tail = (1000 * walls[key] / steps
                            for key in ("step", "no matmul", "after matmuls"))
        print("wall per traced step %.0f ms; no matmul ran for %.0f ms of it (%.1f%%), %.0f ms "
              "of them after the last matmul" % (step, free, 100 * free / step, tail))
        rows = [[name, "%.1f" % (1000 * t / steps)]
                for name, t in sorted(matmul_free.items(), key=lambda item: -item[1])[:15]]
        print(benchlib.format_table(["while no matmul runs: part, op type", "ms per step"],
                                    rows))
    return 0


def input_examples_per_second(input_fn, batch_size, seconds=2.0):
    """Examples/s the training input pipeline alone delivers (read, parse, cut, batch).

    Far above the training step's rate means the device never waits for data
    and the pipeline takes a small share of the cores it shares with training.
    """
    batches = iter(input_fn())
    next(batches)  # start-up: opening the file, filling the shuffle buffer
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        next(batches)
        count += 1
    return count * batch_size / (time.perf_counter() - start)


def add_op_times(op_times, run_metadata):
    """Adds each traced op's wall time (s) to op_times[op type]; time on both cores adds.
    Also adds the step's wall time and how much of it no matmul ran (matmul_free_wall)."""
    spans = []
    for device in run_metadata.step_stats.dev_stats:
        if "/cpu:" not in device.device.lower() and "/device:cpu:" not in device.device.lower():
            continue
        for node in device.node_stats:
            label = node.timeline_label
            # "name = OpType(inputs)"; fall back on the node name.
            op = label.split(" = ", 1)[1].split("(", 1)[0] if " = " in label \
                else node.node_name.split(":")[0]
            seconds = (node.all_end_rel_micros or node.op_end_rel_micros) / 1e6
            op_times[op] = op_times.get(op, 0.0) + seconds
            part = model_part(node.node_name)
            pair = "%s, %s" % (part, op)
            for key in ("part: " + part, "pair: " + pair):
                op_times[key] = op_times.get(key, 0.0) + seconds
            if PROFILE_NODES:
                key = "node: %s %s" % (op, node.node_name)
                op_times[key] = op_times.get(key, 0.0) + seconds
            start = node.all_start_micros / 1e6
            if op not in _BOOKKEEPING_OPS:
                spans.append((pair, "MatMul" in op, start, start + seconds))
    walls, matmul_free = matmul_free_wall(spans)
    for prefix, seconds in (("wall: ", walls), ("matmul-free: ", matmul_free)):
        for key, value in seconds.items():
            op_times[prefix + key] = op_times.get(prefix + key, 0.0) + value


# Ops that move no data (handles, control flow, views of a buffer) but whose traced
# spans can stretch over much of a step: left out of matmul_free_wall's attribution.
_BOOKKEEPING_OPS = frozenset(["VarHandleOp", "NoOp", "_Retval", "_Arg", "Switch", "Merge",
                              "Identity", "Const", "Enter", "Exit", "NextIteration",
                              "Reshape", "Shape", "ExpandDims", "Squeeze"])


def matmul_free_wall(spans):
    """Where a step's wall time went that no matmul used: op time overstates the
    matmuls (two run at once, each on every core) and hides what stands between them.

    Args:
      spans: [(name, is_matmul, start s, end s)] of one step's ops.
    Returns:
      ({"step": wall s, "no matmul": s with no matmul running, "after matmuls": s
      after the last matmul ended}, {name: its share of the no-matmul seconds; ops
      running together split an interval}).
    """
    # An op of no duration takes no time (and would end before it starts in the sweep).
    spans = [span for span in spans if span[3] > span[2]]
    if not spans:
        return {}, {}
    # Sweep the starts and ends in time order (an end before a start at one instant).
    events = sorted([(start, 1, i) for i, (_, _, start, _) in enumerate(spans)] +
                    [(end, 0, i) for i, (_, _, _, end) in enumerate(spans)])
    running, matmuls, matmul_free = set(), 0, {}
    last_time = events[0][0]
    free = 0.0
    for time_, is_start, i in events:
        interval = time_ - last_time
        if interval > 0 and not matmuls:
            free += interval
            for name in [spans[j][0] for j in running] or ["(no op working)"]:
                matmul_free[name] = matmul_free.get(name, 0.0) + interval / max(len(running), 1)
        last_time = time_
        if is_start:
            running.add(i)
        else:
            running.discard(i)
        matmuls += (1 if is_start else -1) * spans[i][1]
    step = events[-1][0] - events[0][0]
    last_matmul = max((end for _, is_matmul, _, end in spans if is_matmul), default=events[0][0])
    return ({"step": step, "no matmul": free, "after matmuls": events[-1][0] - last_matmul},
            matmul_free)


# Which part of the model a node belongs to, from its name; first match wins.
_PARTS = (("cls/predictions", "masked-LM head"), ("cls/seq_relationship", "next-sentence head"),
          ("dropout", "dropout"), ("LayerNorm", "layer norm"), ("moments", "layer norm"),
          ("attention/self", "self-attention"), ("attention/output", "attention output"),
          ("intermediate", "feed-forward in + GELU"), ("/output/", "feed-forward out"),
          ("embeddings", "embeddings"), ("pooler", "pooler"), ("loss", "loss"),
          ("output_weights", "classifier"))


def model_part(node_name):
    """'forward: self-attention', 'backward: dropout', 'optimizer', ... for a node name."""
    direction = "backward" if node_name.startswith("gradients") else "forward"
    for pattern, part in _PARTS:
        if pattern in node_name:
            return "%s: %s" % (direction, part)
    if direction == "forward" and not node_name.startswith("bert/"):
        return "optimizer and the rest"
    return "%s: other" % direction


def measure_tf_peak(precision, n=2048, repeats=5):
    """GFLOP/s of TensorFlow's best n^3 matmul at `precision` on the CPU (all
    threads): the measurement the training log's MFU uses."""
    from bert_toolkit.engine import distribution
    return distribution.measure_matmul_peak("/cpu:0", precision, n, repeats) / 1e9


