"""The training log line (engine/training.py)."""

import collections

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1


def test_training_log_line_shows_mfu_and_the_numbers_of_the_last_update(monkeypatch):
    """Two calls make one accumulated update: the line counts both calls' FLOPs
    (each at its own sequence length) and shows the gradient norm of the call
    that updated, not the NaN of the call that only accumulated."""
    from bert_toolkit.engine import training
    lines = _captured(monkeypatch, "info")
    hook = _begun_log_hook(
        monkeypatch, [100.0, 101.0, 103.0], examples_per_call=4,
        flops_per_example=lambda length, dense: 1e9 * (length if dense is None else dense))
    for step, closed, norm, length, dense in [(0, True, 1.0, 16, None),
                                              (0, False, np.nan, 10, None),
                                              (1, True, 2.5, 20, 5.0)]:
        logged = {"loss": 0.5, "gradient_norm": norm,
                  training.CYCLE_CLOSED: closed, training.SEQUENCE_LENGTH: length}
        if dense is not None:  # the encoder skipped padding: 5 tokens an example
            logged[training.DENSE_TOKENS] = dense
        hook.after_run(_RunContext(step), _Values(logged))
    # 4 examples x 1e9 x (10 + 5) FLOPs in the 3 s since the first call, peak 1e12.
    assert len(lines) == 1 and lines[0].startswith("step 1/10 (10%), 2.7 examples/s")
    assert "gradient norm 2.5" in lines[0] and lines[0].endswith("MFU 2.0%")


def _captured(monkeypatch, level):
    """The lines training.console.<level> is given, as a list that fills."""
    from bert_toolkit.engine import training
    lines = []
    monkeypatch.setattr(training.console, level,
                        lambda message, *a: lines.append(message % a if a else message))
    return lines


def _begun_log_hook(monkeypatch, clock_times, examples_per_call, flops_per_example):
    """A begun TrainingLogHook (10 steps, a line every step, a peak of 1 TFLOP/s)
    whose clock reads `clock_times`, one per call."""
    from bert_toolkit.engine import training
    clock = iter(clock_times)
    monkeypatch.setattr(training.time, "time", lambda: next(clock))
    with tf.Graph().as_default():
        tf1.train.get_or_create_global_step()
        hook = training.TrainingLogHook(
            {}, examples_per_call=examples_per_call, every_n_steps=1, total_steps=10,
            flops_per_example=flops_per_example, matmul_peak_flops=1e12)
        hook.begin()
    return hook


_Values = collections.namedtuple("Values", ["results"])


class _RunContext:
    """What after_run reads of its run context: a session whose run gives the step."""

    def __init__(self, step):
        self.session = type("Session", (), {"run": lambda _, tensor: step})()


def test_each_training_segment_logs_its_steps_once_with_their_own_loss(tmp_path, monkeypatch):
    """Two segments of a real MonitoredSession (evaluation during training trains
    in segments; a segment's first call only starts the clock): one line per
    step after it, each with examples counted and the loss of the update it
    names, and the same (step, loss) pairs in TensorBoard for the learning
    curve. The step fetched beside the train op can be the value before the
    update: a segment's last line then came twice, the second with 0.0
    examples/s and the loss of the step before."""
    from bert_toolkit.engine import training
    lines = []
    monkeypatch.setattr(training.console, "info",
                        lambda message, *a: lines.append(message % a if a else message))
    for segment_end in (3, 6):
        with tf.Graph().as_default():
            global_step = tf1.train.get_or_create_global_step()
            train_op = tf1.assign_add(global_step, 1)
            # The loss of the update to step s is s.
            loss = tf.cast(train_op, tf.float32)
            hook = training.TrainingLogHook(
                {"loss": loss}, examples_per_call=2, every_n_steps=1, total_steps=6,
                output_dir=str(tmp_path))
            with tf1.train.MonitoredTrainingSession(
                    checkpoint_dir=str(tmp_path), save_summaries_steps=None,
                    save_checkpoint_steps=1, log_step_count_steps=None,
                    hooks=[hook, tf1.train.StopAtStepHook(last_step=segment_end)]) as session:
                while not session.should_stop():
                    # Readable while the session runs (the learning curve at an
                    # evaluation inside the training session).
                    if session.run(train_op) == 2:
                        assert training.logged_values(str(tmp_path), "loss") == [(2, 2.0)]
    logged_steps = [int(line.split()[1].split("/")[0]) for line in lines]
    assert logged_steps == [2, 3, 5, 6], lines
    for line, step in zip(lines, logged_steps):
        assert "loss %d" % step in line or "loss %d.0" % step in line, line
        assert " 0.0 examples/s" not in line, line
    assert training.logged_values(str(tmp_path), "loss") == [(2, 2.0), (3, 3.0), (5, 5.0),
                                                             (6, 6.0)]


def test_lost_worker_timeout_floors_the_first_step_and_scales_with_the_longest():
    from bert_toolkit.engine import training
    assert training.lost_worker_timeout(None) == 600
    assert training.lost_worker_timeout(None, 30) == 600  # graph building, first collectives
    assert training.lost_worker_timeout(None, 900) == 900
    assert training.lost_worker_timeout(0.5) == 60
    assert training.lost_worker_timeout(12.0) == 120
    assert training.lost_worker_timeout(12.0, 30) == 30


def test_a_lost_worker_is_named_in_one_line_with_the_rule_that_ended_the_wait():
    """The watchdog's line and the cluster line's rule, for the derived timeout
    (the default), a --step_timeout_seconds and none; the two-worker test in
    test_pretraining kills a worker under a short --step_timeout_seconds."""
    from bert_toolkit.engine import launch, training
    derived = training.lost_worker_error(120, 12.0, None, "/runs/a")
    assert derived.startswith("error: no training step finished in 120 s (max(60 s, 10x the "
                              "longest step); --step_timeout_seconds sets another): a worker "
                              "of the cluster is probably gone")
    assert derived.endswith("to resume from the last checkpoint in /runs/a")
    assert training.lost_worker_error(30, 1.0, 30, None).startswith(
        "error: no training step finished in 30 s (--step_timeout_seconds): ")
    assert training.lost_worker_error(600, None, None, None).startswith(
        "error: the first training step did not finish in 600 s: ")
    assert "\n" not in derived
    assert launch.describe_lost_worker_rule(None) == (
        "a lost worker ends this one after no step in max(60 s, 10x the longest step so "
        "far), 600 s for the first step")
    assert launch.describe_lost_worker_rule(30).startswith(
        "a lost worker ends this one after 30 s without a step (--step_timeout_seconds)")
    assert launch.describe_lost_worker_rule(0) == (
        "waits for a lost worker forever (--step_timeout_seconds=0)")


def test_the_agreed_signal_is_this_workers_own_else_the_voters():
    import signal

    from bert_toolkit.engine import training
    assert training.agreed_signal([0.0, 0.0]) is None
    assert training.agreed_signal([0.0, 0.0], received=None) is None
    assert training.agreed_signal([30.0, 2.0]) == signal.SIGTERM
    assert training.agreed_signal([15.0, 1.0], received=signal.SIGINT) == signal.SIGINT


def test_the_stop_hook_votes_through_the_graph_and_stops_on_the_sum():
    """One replica stands for a cluster (the two-worker tests in
    tests/tasks/pretraining run the real one): no vote, no stop; after SIGTERM
    the hook feeds its vote and stops on the summed result."""
    import collections
    import signal

    from bert_toolkit.engine import training

    class RunContext:
        stopped = False

        def request_stop(self):
            self.stopped = True

    Values = collections.namedtuple("Values", ["results"])
    with tf.Graph().as_default():
        training.stop_vote()
        hook = training.StopOnSignalHook()
        hook.begin()
        try:
            with tf1.Session() as session:
                def step():
                    args = hook.before_run(None)
                    totals = session.run(args.fetches, feed_dict=args.feed_dict)
                    context = RunContext()
                    hook.after_run(context, Values(totals))
                    return context.stopped, totals[0].tolist()
                assert step() == (False, [0.0, 0.0])
                hook._on_signal(signal.SIGTERM, None)
                assert step() == (True, [15.0, 1.0])
                assert hook.stopped_on == signal.SIGTERM
        finally:
            hook.restore()


def test_the_saver_also_saves_at_evaluation_steps_and_calls_back_unless_stopping():
    """The saver's schedule plus the evaluation steps, each step once; the call
    after a save at one of them is left out while training stops on a signal, and
    the time it takes is left out of the training clock."""
    from bert_toolkit.engine import training
    timer = training._ScheduleAndSteps(tf1.train.SecondOrStepTimer(every_steps=10), [4, 8])
    timer.update_last_triggered_step(0)
    saved = []
    for step in range(1, 21):  # as CheckpointSaverHook.after_run asks after each step
        if timer.should_trigger_for_step(step):
            timer.update_last_triggered_step(step)
            saved.append(step)
    # The schedule counts from the last save, whatever made it (so did a segment).
    assert saved == [4, 8, 18]
    assert not timer.should_trigger_for_step(18)

    class StopHook:
        received = None

    calls = []
    listener = training.CallAfterSaving([4, 8], lambda step: calls.append(step) or step == 8,
                                        StopHook)
    before = training.training_clock()
    assert [listener.after_save(None, s) for s in (3, 4, 8)] == [False, False, True]
    assert calls == [4, 8]
    StopHook.received = 15
    assert listener.after_save(None, 4) is False and calls == [4, 8]
    assert training.training_clock() - before < 1.0


def test_a_peak_the_model_beats_is_raised_to_its_rate_and_said_once(monkeypatch):
    """A start-up peak measured on a busy machine would show MFU over 100%: the
    line shows 100% against the rate reached, one warning names both rates, and
    a later, slower line is against the raised peak."""
    from bert_toolkit.engine import training
    lines, warnings = _captured(monkeypatch, "info"), _captured(monkeypatch, "warning")
    hook = _begun_log_hook(monkeypatch, [100.0, 101.0, 103.0], examples_per_call=1,
                           flops_per_example=lambda length, dense: 2e12)
    for step in range(3):
        hook.after_run(_RunContext(step), _Values({training.SEQUENCE_LENGTH: 8}))
    # 2e12 FLOPs in 1 s against a peak of 1e12, then 2e12 in 2 s.
    assert [line.rsplit(" ", 1)[-1] for line in lines] == ["100.0%", "50.0%"], lines
    assert len(warnings) == 1 and "ran at 2 TFLOP/s, above the matmul peak of 1 TFLOP/s" \
        in warnings[0], warnings
