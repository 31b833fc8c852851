"""Training under the Estimator: the progress log, stopping on a signal, checkpoints.

`train` runs Estimator.train with the hooks every run shares: the one-line
progress log with examples/s, peak memory and MFU (TrainingLogHook, added by
model_fn.py), a checkpoint of the current step on SIGTERM or Ctrl-C (StopOnSignalHook), the
watchdog that ends a run whose cluster lost a worker (StepWatchdogHook), and a
checkpoint saver without the text dump of the graph, which can also save and
call back at given steps (evaluation during training, in the training session).
"""

import contextlib
import os
import signal
import sys
import threading
import time

import tensorflow as tf

from bert_toolkit import console, system
from bert_toolkit.engine import tfrecord_codec
from bert_toolkit.errors import Stopped
from bert_toolkit.model import flops

tf1 = tf.compat.v1


CYCLE_CLOSED = "cycle_closed"
"""The logged tensor that says a call ended with an optimizer update."""
SEQUENCE_LENGTH = "sequence_length"
"""The logged tensor with the length of the call's batch (for the FLOPs count)."""
DENSE_TOKENS = "dense_tokens"
"""The logged tensor with the tokens per example the dense layers ran on (fewer than
the length when the encoder skipped padding; for the FLOPs count)."""


_paused_seconds = 0.0


@contextlib.contextmanager
def training_paused():
    """The time the block takes (an evaluation inside the training session) is
    left out of the training log's elapsed time, examples/s and time left."""
    global _paused_seconds
    start = time.time()
    try:
        yield
    finally:
        _paused_seconds += time.time() - start


def training_clock():
    """Seconds on a clock that stands still inside training_paused()."""
    return time.time() - _paused_seconds


class TrainingLogHook(tf1.train.SessionRunHook):
    """The training progress line, and the same numbers to TensorBoard.

    'step 150/300 (50%), 26.2 examples/s, 1 min 10 s elapsed, 1 min 10 s left,
    loss 0.41, learning rate 4.2e-05, ..., peak memory 1.3 GB, MFU 41.0%' (the
    process's resident high-water mark): after the first measured step, then
    at every multiple of `every_n_steps` optimizer steps and every ~30 s, and a
    final line when training ends that counts the last step.

    One session.run is one micro-batch per replica, so `examples_per_call` is
    per_replica_batch_size * num_replicas and examples/s counts every example
    processed; steps are optimizer steps (global_step), whatever the
    accumulation. With `num_replicas` the line also gives examples/s per
    replica (in pre-training an example is one sequence). With accumulation the
    numbers shown are those of the last call that updated the weights (the
    gradient norm exists only there). Synchronous workers
    run in lockstep, so `examples_per_call` of all the workers' replicas gives
    the cluster's total; only the chief (`show`) prints. With
    `flops_per_example(sequence_length, dense_tokens)` and `matmul_peak_flops` the line ends
    with the MFU: the model FLOPs of the calls since the last line, per second,
    over the peak.
    """

    def __init__(self, tensors, examples_per_call, every_n_steps, total_steps,
                 output_dir=None, num_replicas=None, show=True, flops_per_example=None,
                 matmul_peak_flops=None):
        self._tensors = tensors
        self._examples_per_call = examples_per_call
        self._every_n_steps = max(1, every_n_steps)
        self._total_steps = total_steps
        self._output_dir = output_dir
        self._num_replicas = num_replicas
        self._show = show
        self._flops_per_example = flops_per_example
        self._matmul_peak_flops = matmul_peak_flops
        self._peak_raised = False  # said once per run, kept across training segments

    def begin(self):
        self._global_step = tf1.train.get_global_step()
        self._calls = 0
        self._start = self._last_time = None
        self._last_calls = self._last_step = self._first_step = 0
        self._flops = 0.0
        self._values = {}
        self._writer = (tf1.summary.FileWriterCache.get(self._output_dir)
                        if self._output_dir else None)

    def before_run(self, run_context):
        return tf1.train.SessionRunArgs(self._tensors)

    def after_run(self, run_context, run_values):
        now = training_clock()
        self._calls += 1
        values = dict(run_values.results)
        # Read apart: fetched beside the train op, the step may be the value
        # before this call's update (a segment's last line then came twice, the
        # second with no examples and the same loss).
        step = int(run_context.session.run(self._global_step))
        length = values.pop(SEQUENCE_LENGTH, None)
        dense_tokens = values.pop(DENSE_TOKENS, None)
        if values.pop(CYCLE_CLOSED, True) or not self._values:
            self._values = values
        if self._start is None:
            # The first call includes graph optimisation: start the clock after it.
            self._start, self._last_time = now, now
            self._first_step = self._last_step = step
            self._last_calls = self._calls
            return
        if self._flops_per_example is not None:
            self._flops += self._examples_per_call * self._flops_per_example(
                int(length), None if dense_tokens is None else float(dense_tokens))
        # The first measured step always gets a line (is_due's "first unit"):
        # until a line is written, the last step is the one the clock started at.
        last_step = self._last_step if self._last_step > self._first_step else 0
        if console.is_due(step, last_step, now, self._last_time, self._every_n_steps,
                          self._total_steps, aligned=True) and step > self._first_step:
            self._report(step, now)

    def _report(self, step, now):
        examples = (self._calls - self._last_calls) * self._examples_per_call
        seconds = max(now - self._last_time, 1e-9)
        seconds_per_step = seconds / max(step - self._last_step, 1)
        self._last_time, self._last_calls, self._last_step = now, self._calls, step
        values = dict(self._values, examples_per_second=examples / seconds)
        first = ("loss", "learning_rate")
        names = [n for n in first if n in self._values] + sorted(set(self._values) - set(first))
        extra = [(name.replace("_", " "), self._values[name]) for name in names]
        if self._num_replicas:
            values["examples_per_second_per_replica"] = (
                values["examples_per_second"] / self._num_replicas)
            extra.append(("examples/s per replica",
                          values["examples_per_second_per_replica"]))
        peak_memory = system.peak_memory_bytes()
        if peak_memory is not None:
            # So a user sees a long --max_seq_length fit (docs/long_inputs.md).
            values["peak_memory_gb"] = peak_memory / 1e9
            extra.append(("peak memory", "%.1f GB" % values["peak_memory_gb"]))
        if self._flops_per_example is not None:
            flops_per_second, self._flops = self._flops / seconds, 0.0
            self._raise_peak_to(flops_per_second)
            values["mfu"] = flops.utilisation(flops_per_second, self._matmul_peak_flops)
            extra.append(("MFU", "%.1f%%" % (100.0 * values["mfu"])))
        if self._show:
            console.info(console.progress_line(
                "step", step, self._total_steps, values["examples_per_second"], "examples",
                now - self._start, console.seconds_left(step, self._total_steps,
                                                        seconds_per_step), extra))
        if self._writer is not None:
            summary = tf1.Summary(value=[tf1.Summary.Value(tag=name, simple_value=float(v))
                                         for name, v in values.items()])
            self._writer.add_summary(summary, step)
            # Read back during training: the learning curve at each evaluation.
            self._writer.flush()

    def _raise_peak_to(self, flops_per_second):
        """A peak the model's own matmuls beat was measured while other work held
        the cores (or set too low): the MFU is then taken against the best rate
        reached, and the first time says so, instead of showing over 100%."""
        if not self._matmul_peak_flops or flops_per_second <= self._matmul_peak_flops:
            return
        if self._show and not self._peak_raised:
            console.warning(
                "the model's matmuls ran at %.3g TFLOP/s, above the matmul peak of %.3g "
                "TFLOP/s measured at start-up (the machine was busy then) or set by "
                "--matmul_peak_tflops: MFU is against the best rate reached from here on",
                flops_per_second / 1e12, self._matmul_peak_flops / 1e12)
        self._peak_raised = True
        self._matmul_peak_flops = flops_per_second

    def end(self, session):
        step = int(session.run(self._global_step))
        if self._start is not None and step > self._last_step:
            self._report(step, training_clock())
        if self._writer is not None:
            self._writer.flush()


class ProgressHook(tf1.train.SessionRunHook):
    """Adds `per_call` units to a console.Progress after every session.run (an
    evaluation batch on every replica), so evaluation shows how far it is."""

    def __init__(self, progress, per_call):
        self._progress = progress
        self._per_call = per_call

    def after_run(self, run_context, run_values):
        self._progress.add(min(self._per_call, self._progress.total - self._progress.done))


STOP_VOTES, STOP_TOTALS = "bert_toolkit_stop_votes", "bert_toolkit_stop_totals"
"""Graph collections, one item per replica: the placeholder [signal number, 1] a
worker that received a stop signal feeds (zeros otherwise), and its sum over
every replica of the cluster (see stop_vote)."""


def stop_vote():
    """Adds this replica's stop vote to the training graph (call in the model_fn, in
    replica context, on a cluster): float32 [2] placeholder, summed across every
    replica of every worker in the same step as the gradients, so that all workers
    learn of a signal any one of them received at the same step."""
    vote = tf1.placeholder_with_default(tf.zeros([2]), [2], name="stop_vote")
    total = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, vote)
    tf1.add_to_collection(STOP_VOTES, vote)
    tf1.add_to_collection(STOP_TOTALS, total)


def agreed_signal(total, received=None):
    """The signal a cluster stops on, from the summed votes `total` = [sum of signal
    numbers, number of replicas voting] (None: nobody voted): this worker's own
    signal if it got one, else the voters' (their mean, when they agree)."""
    if total[1] <= 0:
        return None
    return received or int(round(total[0] / total[1]))


class StopOnSignalHook(tf1.train.SessionRunHook):
    """Ends training cleanly on SIGTERM (a cluster's preemption notice, Slurm's
    time limit) or SIGINT (Ctrl-C): the train-op call running finishes, training
    stops, and the Estimator's checkpoint saver writes the current step on its
    way out (accumulation buffers and their counter included, so a resume
    continues mid-cycle). A second signal acts as it normally would.

    On a cluster (the graph has stop_vote()s) a worker cannot stop alone: the
    others would wait for it in the next all-reduce. Each step it votes (its
    signal, if it got one) and every worker reads the sum in the same step, so
    all stop after the same step and save it together (the chief's copy in
    output_dir). `received`: this worker's signal; `stopped_on`: the signal
    training stopped on (this worker's or another's), else None.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.received = None
        self.stopped_on = None
        self._previous = {}
        self._votes = self._totals = []

    def begin(self):
        self._votes = tf1.get_collection(STOP_VOTES)
        self._totals = tf1.get_collection(STOP_TOTALS)
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._on_signal) for s in self.SIGNALS}

    def _on_signal(self, signum, frame):
        del frame
        self.received = signum
        self.restore()

    def restore(self):
        """Puts the handlers back as they were before training (the default one
        where TensorFlow's C++ runtime had put its own: see default_sigterm)."""
        for signum, handler in self._previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        self._previous = {}

    def before_run(self, run_context):
        if not self._votes:
            return None
        mine = [float(self.received), 1.0] if self.received else [0.0, 0.0]
        # Only the first replica of a worker votes; every replica's sum is fetched,
        # as each replica's collective must run in the step.
        feed = {vote: mine if index == 0 else [0.0, 0.0]
                for index, vote in enumerate(self._votes)}
        return tf1.train.SessionRunArgs(self._totals, feed_dict=feed)

    def after_run(self, run_context, run_values):
        if self._votes:
            self.stopped_on = agreed_signal(run_values.results[0], self.received)
        elif self.received is not None:
            self.stopped_on = self.received
        if self.stopped_on is not None:
            run_context.request_stop()


def default_sigterm():
    """Gives SIGTERM back its default action if TensorFlow's C++ runtime took it.

    Joining a cluster starts TensorFlow's coordination service, whose preemption
    notifier catches SIGTERM and only records it: a worker told to stop before
    training (which then stops on it, see StopOnSignalHook) would go on as if
    nothing happened."""
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) is None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


LOST_WORKER_FLOOR_SECONDS = 60
FIRST_STEP_SECONDS = 600
LOST_WORKER_STEP_MULTIPLE = 10
LOST_WORKER_RULE = ("max(%d s, %dx the longest step so far), %d s for the first step"
                    % (LOST_WORKER_FLOOR_SECONDS, LOST_WORKER_STEP_MULTIPLE,
                       FIRST_STEP_SECONDS))


def lost_worker_timeout(longest_step_seconds, fixed_seconds=None):
    """Seconds without a finished step after which a worker of a cluster gives up.

    longest_step_seconds: the longest step this segment has run, None before its
    first step ends (graph optimisation, the first collectives: FIRST_STEP_SECONDS
    at least). fixed_seconds: --step_timeout_seconds (None: derived, see
    LOST_WORKER_RULE; a periodic checkpoint save counts in a step's time)."""
    if longest_step_seconds is None:
        return max(FIRST_STEP_SECONDS, fixed_seconds or 0)
    if fixed_seconds:
        return fixed_seconds
    return max(LOST_WORKER_FLOOR_SECONDS, LOST_WORKER_STEP_MULTIPLE * longest_step_seconds)


class StepWatchdogHook(tf1.train.SessionRunHook):
    """Ends the process with one error line, exit 1, when no training step has
    finished for lost_worker_timeout(): in a synchronous cluster a lost worker
    leaves the others waiting in the all-reduce forever (TensorFlow 2.15's
    collective timeout did not end that wait under the Estimator in our test).
    The line says how to resume; the last checkpoint is where that starts."""

    def __init__(self, timeout_seconds=None, output_dir=None):
        self._fixed = timeout_seconds
        self._output_dir = output_dir
        self._done = threading.Event()

    def begin(self):
        self._last = time.time()
        self._longest = None
        threading.Thread(target=self._watch, daemon=True).start()

    def after_run(self, run_context, run_values):
        now = time.time()
        if self._longest is not None:
            self._longest = max(self._longest, now - self._last)
        else:
            self._longest = 0.0  # the first step ran: from now on steps are timed
        self._last = now

    def end(self, session):
        self._done.set()

    def _watch(self):
        while not self._done.wait(1.0):
            timeout = lost_worker_timeout(self._longest, self._fixed)
            if time.time() - self._last > timeout:
                sys.stderr.write(lost_worker_error(timeout, self._longest, self._fixed,
                                                   self._output_dir) + "\n")
                sys.stderr.flush()
                os._exit(1)


def lost_worker_error(timeout, longest_step_seconds, fixed_seconds, output_dir):
    """The error line of a worker that gave up after `timeout` seconds (the
    arguments as lost_worker_timeout's; output_dir may be None)."""
    if longest_step_seconds is None:
        what = "the first training step did not finish in %d s" % timeout
    elif fixed_seconds:
        what = "no training step finished in %d s (--step_timeout_seconds)" % timeout
    else:
        what = ("no training step finished in %d s (max(%d s, %dx the longest step); "
                "--step_timeout_seconds sets another)"
                % (timeout, LOST_WORKER_FLOOR_SECONDS, LOST_WORKER_STEP_MULTIPLE))
    return ("error: %s: a worker of the cluster is probably gone; stop the job and run the "
            "same command again (on as many workers as are left) to resume from the last "
            "checkpoint%s" % (what, " in %s" % output_dir if output_dir else ""))


def write_summaries(directory, step, values):
    """Adds name -> number `values` at `step` to the TensorBoard events in `directory`."""
    writer = tf1.summary.FileWriterCache.get(directory)
    writer.add_summary(tf1.Summary(value=[
        tf1.Summary.Value(tag=name, simple_value=float(value))
        for name, value in sorted(values.items()) if isinstance(value, (int, float))]), step)
    writer.flush()


def logged_values(output_dir, tag):
    """[(step, value)] of `tag` ("loss", "examples_per_second", ...) the training
    log wrote to output_dir's TensorBoard events (up to its last line: the log
    flushes them with each line).

    The events are read with tfrecord_codec rather than summary_iterator, whose
    deprecated record reader prints a four-line warning in the user's run.
    """
    values_by_step = {}
    for path in sorted(tf.io.gfile.glob(os.path.join(output_dir, "events.out.tfevents.*"))):
        with tf.io.gfile.GFile(path, "rb") as f:
            for record in tfrecord_codec.read_records(f):
                event = tf1.Event.FromString(record)
                for value in event.summary.value:
                    if value.tag == tag:
                        values_by_step[int(event.step)] = float(value.simple_value)
    return sorted(values_by_step.items())


class CheckpointSaverWithoutTextGraph(tf1.train.CheckpointSaverHook):
    """The Estimator's checkpoint saver (same schedule, saver, .meta files and
    TensorBoard graph) minus graph.pbtxt, and saving at `also_at_steps` too.

    graph.pbtxt is a text dump of the whole training graph, read by no tool
    (TensorBoard takes the graph from the events file). Formatting it took 0.9 s
    of a MiniLM fine-tuning run on one CPU replica and 2.3 s on two (5 and 12 MB),
    and grows with layers and replicas.
    """

    def __init__(self, checkpoint_dir, save_steps=None, save_secs=None, also_at_steps=(),
                 listeners=None):
        super().__init__(checkpoint_dir, save_steps=save_steps, save_secs=save_secs,
                         listeners=listeners)
        if also_at_steps:
            self._timer = _ScheduleAndSteps(self._timer, also_at_steps)

    def after_create_session(self, session, coord):
        # The base class writes graph.pbtxt here only if _save_graph_def is set;
        # the first save in it then has no .meta, every later one has.
        self._save_graph_def = False
        try:
            super().after_create_session(session, coord)
        finally:
            self._save_graph_def = True


class _ScheduleAndSteps:
    """A saver's timer (tf1.train.SecondOrStepTimer) that also fires at `steps`.

    CheckpointSaverHook asks its timer whether a step is due; replacing the
    timer, rather than the hook's after_run, keeps the hook's own logic of
    reading the step after the train op and saving at the end."""

    def __init__(self, schedule, steps):
        self._schedule = schedule
        self._steps = frozenset(steps)

    def should_trigger_for_step(self, step):
        if step == self._schedule.last_triggered_step():
            return False
        return step in self._steps or self._schedule.should_trigger_for_step(step)

    def update_last_triggered_step(self, step):
        return self._schedule.update_last_triggered_step(step)

    def last_triggered_step(self):
        return self._schedule.last_triggered_step()

    def reset(self):
        self._schedule.reset()


class CallAfterSaving(tf1.train.CheckpointSaverListener):
    """After each checkpoint the saver writes at one of `steps`, calls
    `callback(step)` inside training_paused(); a true result stops training
    (early stopping). Not while `stop_hook` is stopping training on a signal:
    the call is left to the resumed run."""

    def __init__(self, steps, callback, stop_hook):
        self._steps = frozenset(steps)
        self._callback = callback
        self._stop_hook = stop_hook

    def after_save(self, session, global_step_value):
        step = int(global_step_value)
        if step not in self._steps or self._stop_hook.received is not None:
            return False
        with training_paused():
            return bool(self._callback(step))


def checkpoint_saver_hooks(config, also_at_steps=(), listeners=None):
    """[CheckpointSaverWithoutTextGraph] on `config`'s schedule and at
    `also_at_steps` ([] if it saves at none); passed to Estimator.train, it
    replaces the Estimator's own saver."""
    save_steps, save_secs = config.save_checkpoints_steps, config.save_checkpoints_secs
    if not (save_steps or save_secs):
        if not also_at_steps:
            return []
        save_steps = min(also_at_steps)
    return [CheckpointSaverWithoutTextGraph(config.model_dir, save_steps=save_steps,
                                            save_secs=save_secs, also_at_steps=also_at_steps,
                                            listeners=listeners)]


def train(estimator, input_fn, max_steps, hooks=(), call_at_steps=(), callback=None):
    """estimator.train up to `max_steps`; on SIGTERM or SIGINT it saves the current
    step and raises errors.Stopped saying how to resume (exit code 128 + signal).

    With `call_at_steps` and `callback`, a checkpoint is also saved at each of
    those steps and callback(step) runs right after it, in the training session
    (see CallAfterSaving): evaluation during training without rebuilding the
    training graph and session for each segment between evaluations."""
    stop_hook = StopOnSignalHook()
    listeners = [CallAfterSaving(call_at_steps, callback, stop_hook)] if callback else None
    hooks = [stop_hook] + list(hooks) + checkpoint_saver_hooks(
        estimator.config, call_at_steps if callback else (), listeners)
    try:
        estimator.train(input_fn, max_steps=max_steps, hooks=hooks)
    finally:
        stop_hook.restore()
    check_stopped(stop_hook, estimator.latest_checkpoint(), max_steps)


def check_stopped(stop_hook, checkpoint, max_steps, where=None):
    """Raises errors.Stopped if `stop_hook` stopped training: one line with the
    signal, the step saved in `checkpoint` and how to resume."""
    if stop_hook.stopped_on is None:
        return
    step = tf.train.load_checkpoint(checkpoint).get_tensor("global_step")
    raise Stopped("%s: training stopped at step %d of %d, saved in %s; run the same "
                  "command again to resume from there"
                  % (signal.Signals(stop_hook.stopped_on).name, step, max_steps,
                     where or checkpoint), 128 + stop_hook.stopped_on)
