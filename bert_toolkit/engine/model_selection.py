"""Evaluation during training: the record of evaluations, the best checkpoint,
early stopping and the learning-curve picture (no TensorFlow here).

What a run keeps in output_dir:

    eval_history.jsonl     one JSON line per evaluation during training: the step,
                           the report, and the best so far with the patience count
    best/                  a copy of the best checkpoint (the rolling ones get deleted)
    best_checkpoint.json   which step it is, by which metric, with what value
    learning_curve.png     training loss and the dev metric against the step

Everything a resumed run needs (best so far, evaluations without improvement,
whether training stopped early) is read back from these files, so a run killed
and resumed records what an uninterrupted one would.
"""

import contextlib
import glob
import json
import math
import os
import shutil
import threading
import time

from bert_toolkit import fileio
from bert_toolkit.errors import InputError, LostWorker

HISTORY_FILE = "eval_history.jsonl"
EVALUATING_FILE = "evaluating.json"
HEARTBEAT_SECONDS = 10
CHIEF_SILENT_SECONDS = 120
BEST_FILE = "best_checkpoint.json"
BEST_DIR = "best"
PLOT_FILE = "learning_curve.png"


def lower_is_better(metric):
    """Losses go down; every other report entry (accuracy, F1, MRR...) goes up."""
    return "loss" in metric


def evaluation_steps(num_train_steps, every_n_steps):
    """The steps to evaluate at: every `every_n_steps`, and the last step."""
    steps = list(range(every_n_steps, num_train_steps, every_n_steps))
    return steps + [num_train_steps]


def steps_per_epoch(plan):
    """Optimizer steps of one epoch of the plan (at least 1)."""
    return max(1, int(round(plan.num_train_steps / float(plan.num_train_epochs))))


def read_history(output_dir):
    """The evaluations recorded in output_dir, in step order ([] if none).

    A last line cut short by a kill is dropped: that evaluation runs again.
    """
    path = os.path.join(output_dir, HISTORY_FILE)
    if not os.path.exists(path):
        return []
    entries = []
    for line_number, line in fileio.decoded_lines(path):
        try:
            entries.append(json.loads(line))
        except ValueError:
            if line.endswith("\n"):
                raise InputError("%s:%d: not a JSON line; the file records this run's "
                                 "evaluations (delete it to start the record afresh)"
                                 % (path, line_number))
    return entries


def next_entry(history, step, report, metric, patience):
    """The history entry of an evaluation at `step` with `report` (name -> number).

    Returns a dict with the step, the report, `improved`, the best step and
    value so far, `evaluations_without_improvement` and `stop` (patience
    reached; patience 0 never stops).
    """
    if metric not in report:
        raise InputError("--best_metric=%s: the evaluation reports %s"
                         % (metric, ", ".join(sorted(report))))
    value = float(report[metric])
    previous = history[-1] if history else None
    improved = previous is None or _better(value, previous["best_value"], metric)
    waited = 0 if improved else previous["evaluations_without_improvement"] + 1
    return {"step": int(step), "report": report, "metric": metric, "improved": improved,
            "best_step": int(step) if improved else previous["best_step"],
            "best_value": value if improved else previous["best_value"],
            "evaluations_without_improvement": waited,
            "stop": bool(patience) and waited >= patience}


def _better(value, best, metric):
    if math.isnan(value):
        return False
    if math.isnan(best):
        return True
    return value < best if lower_is_better(metric) else value > best


def append_entry(output_dir, entry):
    """Adds one evaluation to eval_history.jsonl (a line, flushed to disk)."""
    with open(os.path.join(output_dir, HISTORY_FILE), "a", encoding="utf-8") as f:
        f.write(json.dumps(entry, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def save_best(output_dir, checkpoint_path, entry):
    """Copies `checkpoint_path` (its .index and .data files) to output_dir/best/ and
    points best_checkpoint.json at it; the previous best's files go after."""
    best_dir = os.path.join(output_dir, BEST_DIR)
    os.makedirs(best_dir, exist_ok=True)
    name = os.path.basename(checkpoint_path)
    for source in glob.glob(checkpoint_path + ".*"):
        target = os.path.join(best_dir, os.path.basename(source))
        with fileio.atomic_path(target) as temporary:
            shutil.copyfile(source, temporary)
    record = {"checkpoint": os.path.join(BEST_DIR, name), "step": entry["best_step"],
              "metric": entry["metric"], "value": entry["best_value"]}
    fileio.write_text_atomically(os.path.join(output_dir, BEST_FILE),
                                 json.dumps(record, indent=2, sort_keys=True) + "\n")
    for old in glob.glob(os.path.join(best_dir, "*")):
        if not os.path.basename(old).startswith(name + "."):
            os.remove(old)


@contextlib.contextmanager
def evaluating(output_dir, step):
    """While the block runs (the chief of a cluster evaluating at `step`),
    output_dir/evaluating.json is rewritten every HEARTBEAT_SECONDS, so the
    workers waiting for the result (wait_for_entry) know the chief is alive."""
    path = os.path.join(output_dir, EVALUATING_FILE)
    done = threading.Event()

    def beat():
        count = 0
        while True:
            count += 1
            fileio.write_text_atomically(path, json.dumps({"step": step, "beat": count}))
            if done.wait(HEARTBEAT_SECONDS):
                return

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        fileio.remove_quietly(path)


def wait_for_entry(output_dir, step, silent_seconds=CHIEF_SILENT_SECONDS):
    """The evaluation record at `step` that the chief appends (a worker of a cluster
    that is not the chief waits for it, then stops early or trains on as the
    chief does). errors.LostWorker when the chief has given no sign of life
    (evaluating.json unchanged, no record) for `silent_seconds` of this worker's
    clock (clocks of other nodes are not compared)."""
    path = os.path.join(output_dir, EVALUATING_FILE)
    last_beat, last_change = None, time.time()
    while True:
        for entry in read_history(output_dir):
            if entry["step"] == step:
                return entry
        try:
            with open(path, encoding="utf-8") as f:
                beat = f.read()
        except OSError:
            beat = None
        if beat != last_beat:
            last_beat, last_change = beat, time.time()
        elif time.time() - last_change > silent_seconds:
            raise LostWorker(
                "the chief has not evaluated step %d, nor shown it is evaluating, in %d s: "
                "it is probably gone; stop the job and run the same command again to "
                "resume from the last checkpoint in %s" % (step, silent_seconds, output_dir))
        time.sleep(0.5)


def best_checkpoint(output_dir):
    """(checkpoint prefix, record) of output_dir's best checkpoint, or (None, None)."""
    path = os.path.join(output_dir, BEST_FILE)
    if not os.path.exists(path):
        return None, None
    with open(path, encoding="utf-8") as f:
        try:
            record = json.load(f)
        except ValueError:
            raise InputError("%s: not valid JSON; it names the best checkpoint" % path)
    prefix = os.path.join(output_dir, record["checkpoint"])
    if not os.path.exists(prefix + ".index"):
        raise InputError("%s names %s, which is missing" % (path, prefix))
    return prefix, record


def describe(entry, num_train_steps, summary_keys=()):
    """One console line for an evaluation during training: the best metric and
    the task's `summary_keys` (the whole report is in eval_history.jsonl)."""
    names = [entry["metric"]] + [k for k in summary_keys if k != entry["metric"]]
    shown = ", ".join("%s %.4f" % (name, entry["report"][name]) for name in names
                      if name in entry["report"])
    best = ("new best" if entry["improved"] else "best %.4f at step %d, %d evaluation(s) "
            "without improvement" % (entry["best_value"], entry["best_step"],
                                     entry["evaluations_without_improvement"]))
    return "eval at step %d/%d: %s (%s %s)" % (entry["step"], num_train_steps, shown,
                                              entry["metric"], best)


def plot_learning_curve(output_dir, training_losses, history):
    """Draws learning_curve.png: training loss [(step, loss)] and the history's
    metric against the step, the best step marked. Needs matplotlib."""
    import matplotlib
    matplotlib.use("Agg")  # no display needed
    from matplotlib import pyplot

    figure, loss_axis = pyplot.subplots(figsize=(8, 4.5), dpi=100)
    if training_losses:
        steps, losses = zip(*training_losses)
        loss_axis.plot(steps, losses, color="tab:blue", linewidth=1, label="training loss")
    loss_axis.set_xlabel("optimizer step")
    loss_axis.set_ylabel("training loss", color="tab:blue")
    if history:
        metric = history[-1]["metric"]
        metric_axis = loss_axis.twinx()
        metric_axis.plot([e["step"] for e in history], [e["report"][metric] for e in history],
                         color="tab:orange", marker="o", label="dev " + metric)
        metric_axis.set_ylabel("dev " + metric, color="tab:orange")
        best = history[-1]
        metric_axis.axvline(best["best_step"], color="tab:green", linestyle="--")
        metric_axis.annotate("best: step %d" % best["best_step"],
                             (best["best_step"], best["best_value"]),
                             textcoords="offset points", xytext=(6, 6), color="tab:green")
    loss_axis.set_title(os.path.basename(os.path.abspath(output_dir)))
    figure.tight_layout()
    path = os.path.join(output_dir, PLOT_FILE)
    with fileio.atomic_path(path) as temporary:
        figure.savefig(temporary, format="png")
    pyplot.close(figure)
    return path
