"""Re-running the same command after an interruption resumes from the last checkpoint.

The end-to-end test SIGKILLs a real training run of run_custom_classifier.py
once it has saved a checkpoint past step 0, re-runs the identical command and
checks that it resumes (log line, exact planned final step, cached TFRecord
reused untouched) and that a third run trains nothing. The in-process tests
pin the two pieces resuming relies on: the input stream a resumed run skips
into, and how many batches a checkpoint says were consumed.
"""

import glob
import os
import re
import signal
import time

import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit.engine import checkpoints, input_pipeline, training_plan

import script_runs
import tiny

tf1 = tf.compat.v1

BATCH = 4
NUM_EXAMPLES = 300
SAVE_EVERY = 25


def _env():
    env = dict(os.environ)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    return env


def _command(model, data_dir, output_dir, epochs):
    return ["run_custom_classifier.py", "--task_name=custom",
            "--data_dir=%s" % data_dir, "--text_a_column=sentence", "--label_column=label",
            "--vocab_file=%s" % model["vocab_file"],
            "--bert_config_file=%s" % model["bert_config_file"],
            "--init_checkpoint=%s" % model["init_checkpoint"],
            "--output_dir=%s" % output_dir, "--do_train", "--max_seq_length=16",
            "--train_batch_size=%d" % BATCH, "--num_train_epochs=%d" % epochs,
            "--save_checkpoints_steps=%d" % SAVE_EVERY, "--log_every_n_steps=1000"]


def _latest_step(output_dir):
    """(checkpoint prefix, global_step) of the latest checkpoint, or (None, None)."""
    latest = tf.train.latest_checkpoint(output_dir) if os.path.isdir(output_dir) else None
    if latest is None:
        return None, None
    return latest, int(tf.train.load_checkpoint(latest).get_tensor("global_step"))


def _recorded_step(output_dir):
    """The step of the newest checkpoint that is complete: model.ckpt-N.index is
    written first, the `checkpoint` file naming it (atomically) after; -1 if none."""
    try:
        with open(os.path.join(output_dir, "checkpoint")) as f:
            text = f.read()
    except OSError:
        return -1
    match = re.search(r'^model_checkpoint_path: ".*model\.ckpt-(\d+)"', text, re.M)
    if match is None or not glob.glob(os.path.join(
            output_dir, "model.ckpt-%s.index" % match.group(1))):
        return -1
    return int(match.group(1))


def _run(command):
    return script_runs.run(command, env=_env(), timeout=600)


def _start_and_kill(command, output_dir, planned_steps):
    """Starts `command`, SIGKILLs it once a checkpoint past step 0 is complete
    (its model.ckpt-N.index exists and the `checkpoint` file names it).

    Returns the step of the latest checkpoint after the kill, or None if the run
    got to the end (or past its last checkpoint) before it could be killed.
    """
    log_path = output_dir + ".log"  # a file, not a pipe: a full pipe would stall the run
    process = script_runs.start(command, env=_env(), stderr=log_path)
    try:
        deadline = time.time() + 300
        while process.poll() is None and time.time() < deadline:
            if _recorded_step(output_dir) > 0:
                break
            time.sleep(0.02)
        if process.poll() is not None:
            with open(log_path) as f:
                assert process.returncode == 0, f.read()[-3000:]
            return None  # finished before we could interrupt it
        process.kill()  # SIGKILL: no handler, no clean-up, like a lost machine
        process.wait(timeout=60)
        if process.returncode == 0:
            return None  # it finished just before the signal
        assert process.returncode == -9, process.returncode
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    _, step = _latest_step(output_dir)
    if step is None or not 0 < step < planned_steps:
        return None
    return step


@pytest.mark.long
def test_rerun_after_sigkill_resumes_to_the_planned_step_then_has_nothing_to_train(tmp_path):
    model = tiny.write_tiny_model(str(tmp_path / "model"))
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    tiny.write_sentiment_csv(str(data_dir / "train.csv"), NUM_EXAMPLES, seed=5)

    epochs = 6  # 450 optimizer steps (the kill comes at the first save, step 25)
    for attempt in range(4):
        planned = -(-NUM_EXAMPLES * epochs // BATCH)
        output_dir = str(tmp_path / ("out%d" % attempt))
        command = _command(model, str(data_dir), output_dir, epochs)
        killed_at = _start_and_kill(command, output_dir, planned)
        if killed_at is not None:
            break
        epochs *= 4  # this machine outran the poll: give it more to do
    else:
        pytest.fail("training always finished before it could be interrupted")

    records = glob.glob(os.path.join(output_dir, "train-*.tf_record"))
    assert len(records) == 1, os.listdir(output_dir)
    record = records[0]
    record_mtime = os.stat(record).st_mtime_ns
    killed_checkpoint, _ = _latest_step(output_dir)

    second = _run(command)
    assert second.returncode == 0, second.stderr[-3000:]
    log = second.stderr
    assert "resuming from %s (step %d of %d)" % (killed_checkpoint, killed_at, planned) in log
    # One replica, no accumulation: one input batch per optimizer step.
    assert "after the %d global micro-batches already trained on" % killed_at in log
    assert "= %d optimizer steps" % planned in log
    assert "train: %d records in %s" % (NUM_EXAMPLES, record) in log
    final, step = _latest_step(output_dir)
    assert step == planned
    assert final.endswith("model.ckpt-%d" % planned)
    # The cached features were reused, not rewritten.
    assert glob.glob(os.path.join(output_dir, "train-*.tf_record")) == [record]
    assert os.stat(record).st_mtime_ns == record_mtime
    assert not glob.glob(os.path.join(output_dir, "*.partial"))

    checkpoints = sorted(glob.glob(os.path.join(output_dir, "model.ckpt-*")))
    third = _run(command)
    assert third.returncode == 0, third.stderr[-3000:]
    assert ("output_dir already holds step %d of %d: nothing to train" % (planned, planned)
            in third.stderr)
    assert "resuming from" not in third.stderr
    assert _latest_step(output_dir) == (final, planned)
    assert sorted(glob.glob(os.path.join(output_dir, "model.ckpt-*"))) == checkpoints
    assert os.stat(record).st_mtime_ns == record_mtime


def _write_records(path, count):
    input_pipeline.write_tfrecord(path, ({"x": np.array([i])} for i in range(count)))


def _batches(path, skip_batches, count, batch_size=3, graph_seed=7):
    """The first `count` training batches of make_input_fn in a fresh graph."""
    spec = input_pipeline.fixed_length_spec({"x": 1})
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(graph_seed)  # as the Estimator does with tf_random_seed
        dataset = input_pipeline.make_input_fn(path, spec, batch_size, True, seed=11,
                                               skip_batches=skip_batches)()
        batch = tf1.data.make_one_shot_iterator(dataset).get_next()
        with tf1.Session(graph=graph) as session:
            return [session.run(batch)["x"].reshape(-1).tolist() for _ in range(count)]


def test_resumed_input_stream_continues_where_the_interrupted_one_stopped(tmp_path):
    path = str(tmp_path / "train.tf_record")
    _write_records(path, 10)
    whole = _batches(path, 0, 12)  # 36 examples: more than 3 epochs of 10
    assert _batches(path, 0, 12) == whole  # the shuffled stream is the same every run
    assert _batches(path, 5, 7) == whole[5:]
    # Each epoch is a permutation of the data, reshuffled from one epoch to the next.
    flat = [x for batch in whole for x in batch]
    assert sorted(flat[:10]) == list(range(10)) and sorted(flat[10:20]) == list(range(10))
    assert flat[:10] != flat[10:20]


def _write_training_checkpoint(directory, global_step, accum_counter=None):
    graph = tf.Graph()
    with graph.as_default():
        tf1.Variable(global_step, dtype=tf.int64, name="global_step")
        if accum_counter is not None:
            tf1.Variable(accum_counter, dtype=tf.int64, name="accum_counter")
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            tf1.train.Saver().save(session, os.path.join(directory, "model.ckpt"),
                                   global_step=global_step, write_meta_graph=False)


@pytest.mark.parametrize("replicas,accumulation,counter,expected", [
    (1, 1, None, 6), (2, 1, 0, 6), (2, 3, 2, 6 * 3 + 2), (1, 4, 1, 25)])
def test_resume_position_counts_every_micro_batch(tmp_path, replicas, accumulation, counter,
                                                  expected):
    """Global micro-batches trained: optimizer steps x accumulation + the pending ones
    (the flow skips that many x replicas batches of its one input pipeline)."""
    _write_training_checkpoint(str(tmp_path), 6, counter)
    plan = training_plan.plan_training(1000, 1.0, 4, replicas, accumulation, 0.1)
    assert checkpoints.resume_position(str(tmp_path), plan) == expected


def test_resume_position_without_a_checkpoint_or_when_done(tmp_path):
    plan = training_plan.plan_training(10, 1.0, 4, 1, 1, 0.1)
    assert checkpoints.resume_position(str(tmp_path / "absent"), plan) == 0
    assert checkpoints.resume_position(str(tmp_path), plan) == 0
    _write_training_checkpoint(str(tmp_path), plan.num_train_steps, None)
    assert checkpoints.resume_position(str(tmp_path), plan) is None


def _wait_for_line(process, log_path, pattern, timeout=300):
    """The first line of the log at `log_path` matching `pattern`, waiting for it
    while `process` runs; fails with the log if it ends first."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(log_path) as f:
            match = re.search(pattern, f.read(), re.M)
        if match:
            return match.group(0)
        if process.poll() is not None:
            with open(log_path) as f:
                pytest.fail("run ended (%s) before %r:\n%s"
                            % (process.returncode, pattern, f.read()[-3000:]))
        time.sleep(0.05)
    pytest.fail("no %r within %d s" % (pattern, timeout))


def _checkpoint_chain(output_dir):
    """The steps the `checkpoint` file lists, each checked readable."""
    state = tf.train.get_checkpoint_state(output_dir)
    steps = []
    for path in state.all_model_checkpoint_paths:
        steps.append(int(tf.train.load_checkpoint(path).get_tensor("global_step")))
        assert path.endswith("model.ckpt-%d" % steps[-1])
    return steps


@pytest.mark.long
def test_sigterm_saves_the_step_a_second_run_is_refused_and_the_rerun_resumes(tmp_path):
    """Two CPU replicas with accumulation: SIGTERM mid-training saves the current
    step (not a periodic checkpoint), says how to resume and exits 143; a second
    run into the busy output_dir is refused naming the first; the same command
    then resumes past the stale .lock file to exactly the planned step."""
    model = tiny.write_tiny_model(str(tmp_path / "model"))
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    tiny.write_sentiment_csv(str(data_dir / "train.csv"), NUM_EXAMPLES, seed=5)
    output_dir = str(tmp_path / "out")
    epochs = 4
    command = _command(model, str(data_dir), output_dir, epochs) + [
        "--num_cpu_replicas=2", "--gradient_accumulation_steps=3",
        "--save_checkpoints_steps=100000", "--log_every_n_steps=1"]
    planned = -(-NUM_EXAMPLES * epochs // (BATCH * 2 * 3))
    log_path = str(tmp_path / "first.log")
    first = script_runs.start(command, env=_env(), stderr=log_path)
    try:
        _wait_for_line(first, log_path, r"^step \d+/%d " % planned)
        # Paused (still holding the lock) so it cannot finish while the second
        # run starts up; the SIGTERM is handled as soon as it continues.
        first.send_signal(signal.SIGSTOP)
        second = _run(command)
        first.send_signal(signal.SIGTERM)
        first.send_signal(signal.SIGCONT)
        first.wait(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    with open(log_path) as f:
        first_log = f.read()

    lines = second.stderr.strip().splitlines()
    assert second.returncode == 1 and len(lines) == 1, second.stderr[-3000:]
    assert lines[0].startswith("error: --output_dir=%s is in use by process %d "
                               % (output_dir, first.pid)), lines

    assert first.returncode == 128 + 15, first_log[-3000:]
    stopped = first_log.strip().splitlines()[-1]
    match = re.match(r"stopped: SIGTERM: training stopped at step (\d+) of %d, saved in "
                     r"(\S+); run the same command again to resume" % planned, stopped)
    assert match, first_log[-3000:]
    step = int(match.group(1))
    assert 0 < step < planned
    assert _latest_step(output_dir) == (match.group(2), step)
    assert _checkpoint_chain(output_dir) == [0, step]

    resumed = _run(command)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from %s (step %d of %d)" % (match.group(2), step, planned) \
        in resumed.stderr
    assert _latest_step(output_dir)[1] == planned
    assert _checkpoint_chain(output_dir) == [0, step, planned]


def _history(output_dir):
    from bert_toolkit.engine import model_selection
    return model_selection.read_history(output_dir)


@pytest.mark.long
def test_kill_during_evaluated_training_resumes_to_the_same_record(tmp_path):
    """Evaluating every 25 steps: a run SIGKILLed after its first evaluation and
    resumed records the same evaluations, best step and patience counts as an
    uninterrupted run of the same command (tiny model without dropout, the
    resumed input stream exact)."""
    model = tiny.write_tiny_model(str(tmp_path / "model"))
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    tiny.write_sentiment_csv(str(data_dir / "train.csv"), NUM_EXAMPLES, seed=5)
    tiny.write_sentiment_csv(str(data_dir / "dev.csv"), 40, seed=6)

    def command(output_dir, epochs):
        return _command(model, str(data_dir), output_dir, epochs) + [
            "--do_eval", "--eval_every_n_steps=25", "--early_stopping_patience=100",
            "--save_checkpoints_steps=10", "--learning_rate=1e-3", "--noplot"]

    for attempt, epochs in enumerate((1, 2, 4)):
        killed_dir = str(tmp_path / ("killed%d" % attempt))
        process = script_runs.start(command(killed_dir, epochs), env=_env())
        try:
            deadline = time.time() + 300
            while process.poll() is None and time.time() < deadline:
                history = os.path.exists(os.path.join(killed_dir, "eval_history.jsonl")) \
                    and _history(killed_dir)
                if history and _recorded_step(killed_dir) > history[-1]["step"]:
                    process.kill()
                    break
                time.sleep(0.02)
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
        if process.returncode == -9:
            break
    else:
        pytest.fail("training always finished before it could be interrupted")
    planned = -(-NUM_EXAMPLES * epochs // BATCH)
    assert 0 < len(_history(killed_dir)) < planned // 25

    resumed = _run(command(killed_dir, epochs))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    whole_dir = str(tmp_path / "whole")
    whole = _run(command(whole_dir, epochs))
    assert whole.returncode == 0, whole.stderr[-3000:]

    def record(output_dir):
        return [(e["step"], e["best_step"], e["evaluations_without_improvement"], e["stop"])
                for e in _history(output_dir)]
    assert record(killed_dir) == record(whole_dir)
    assert record(whole_dir)[-1][0] == planned, record(whole_dir)
    for killed, full in zip(_history(killed_dir), _history(whole_dir)):
        assert killed["report"]["eval_loss"] == pytest.approx(full["report"]["eval_loss"],
                                                              abs=1e-4)
