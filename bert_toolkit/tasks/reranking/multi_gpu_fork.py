"""The MS MARCO fork of bert-multi-gpu's run_multi_gpu.py, run by our re-ranker.

That fork (lionelmessi6410/bert-multi-gpu, "tested ... with MSMARCO dataset")
keeps its settings as variables at the top of run_multi_gpu.py, which its users
edit before `python run_multi_gpu.py`; it fine-tunes BERT-large (its main reads
bert_config_file_large and init_checkpoint_large) on dl4marco-bert's
dataset_train.tf, splitting train_batch_size over num_gpu towers, and every
save_checkpoints_steps steps appends `MM/DD/YYYY, HH:MM:SS <step> step loss:
<mean loss since the last line>` to output_dir/loss.txt and saves
output_dir/bert-model.ckpt. The root run_multi_gpu.py keeps those settings
under their names and hands them to `run` here, which runs run_reranking.py's
task (task.run) with them:

  data_dir                    --data_dir (dataset_train.tf; dataset_dev.tf and
                              query_doc_ids_dev.txt with do_eval)
  bert_config_file_large,     --bert_config_file, --init_checkpoint (as the
  init_checkpoint_large       fork's main; bert_config_file and init_checkpoint,
                              BERT-base, are read by nothing there either)
  output_dir                  --output_dir, plus loss.txt and bert-model.ckpt
  num_gpu                     replicas: that many GPUs, or CPU replicas on a
                              machine without GPUs (the fork needed GPUs)
  train_batch_size            the GLOBAL batch, split over the replicas
  is_training                 True: --do_train; False: --do_eval only
  max_seq_length, learning_rate, num_train_steps, num_warmup_steps,
  save_checkpoints_steps      the same flags (the steps after the fork's
                              multiplication by iterations_per_loop)
  query_length                --max_query_length
  num_labels                  2 (the re-ranker's labels); anything else is refused
  document_length, iterations_per_loop, is_fine_tuning
                              read by nothing (the fork used none of the first
                              two; is_fine_tuning = False turned BERT's dropout
                              off, said in one line: here the config's dropout
                              trains, as run_reranking.py does)

and three of ours, beside them: vocab_file (None: the vocab.txt beside the
config), do_eval (rank dataset_dev.tf after training: MRR@10) and num_eval_docs.
The fork's Adam had no weight decay: weight_decay_rate is 0 here too.
"""

import glob
import os
import re
import shutil
import threading
import time

import tensorflow as tf

from bert_toolkit import console, fileio
from bert_toolkit.engine import tfrecord_codec
from bert_toolkit.errors import InputError
from bert_toolkit.tasks.reranking import msmarco_records, task
from bert_toolkit.tasks.reranking.options import RerankingOptions

tf1 = tf.compat.v1

SCRIPT = "run_multi_gpu.py"
FORK_SETTINGS = (
    "data_dir", "bert_config_file", "bert_config_file_large", "init_checkpoint",
    "init_checkpoint_large", "output_dir", "num_gpu", "is_training", "is_fine_tuning",
    "num_labels", "max_seq_length", "query_length", "document_length", "train_batch_size",
    "learning_rate", "num_train_steps", "num_warmup_steps", "save_checkpoints_steps",
    "iterations_per_loop")
OUR_SETTINGS = {"vocab_file": None, "do_eval": False, "num_eval_docs": 1000}
LOSS_FILE = "loss.txt"
CHECKPOINT_NAME = "bert-model.ckpt"
TIME_FORMAT = "%m/%d/%Y, %H:%M:%S"
# How often the fork's files are brought up to date while training runs.
POLL_SECONDS = 10.0


def visible_gpus():
    return len(tf.config.list_physical_devices("GPU"))


def setting(settings, name, script=SCRIPT):
    """settings[name], or one InputError line naming the script and the setting."""
    if name not in settings:
        raise InputError("%s: the setting `%s` is missing (the fork's run_multi_gpu.py has "
                         "it at the top)" % (script, name))
    return settings[name]


def _whole(settings, name, script, minimum=1):
    value = setting(settings, name, script)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError("%s: %s = %r, expected a whole number >= %d"
                         % (script, name, value, minimum))
    return value


def reranking_options(settings, script=SCRIPT, num_gpus=0):
    """The RerankingOptions of run_multi_gpu.py's settings (name -> value), on
    `num_gpus` visible GPUs (0: CPU replicas)."""
    for name in FORK_SETTINGS:
        setting(settings, name, script)
    if setting(settings, "num_labels", script) != 2:
        raise InputError("%s: num_labels = %r, expected 2 (a pair is relevant or not)"
                         % (script, settings["num_labels"]))
    replicas = _whole(settings, "num_gpu", script)
    if 0 < num_gpus < replicas:
        raise InputError("%s: num_gpu = %d, but %d GPU(s) are visible to TensorFlow"
                         % (script, replicas, num_gpus))
    global_batch = _whole(settings, "train_batch_size", script)
    if global_batch % replicas:
        raise InputError("%s: train_batch_size = %d is the GLOBAL batch, split over num_gpu "
                         "= %d replicas: expected a multiple of %d"
                         % (script, global_batch, replicas, replicas))
    training = bool(setting(settings, "is_training", script))
    evaluating = bool(settings.get("do_eval", OUR_SETTINGS["do_eval"])) or not training
    data_dir = setting(settings, "data_dir", script)
    check_records(data_dir, training, evaluating, script)
    save_steps = _whole(settings, "save_checkpoints_steps", script)
    return RerankingOptions(
        data_dir=data_dir, output_dir=setting(settings, "output_dir", script),
        bert_config_file=setting(settings, "bert_config_file_large", script),
        init_checkpoint=setting(settings, "init_checkpoint_large", script),
        vocab_file=settings.get("vocab_file"), do_train=training, do_eval=evaluating,
        use_gpu=num_gpus > 0, num_gpu_cores=replicas if num_gpus else 1,
        num_cpu_replicas=1 if num_gpus else replicas,
        train_batch_size=global_batch // replicas,
        max_seq_length=_whole(settings, "max_seq_length", script),
        max_query_length=_whole(settings, "query_length", script),
        learning_rate=setting(settings, "learning_rate", script),
        num_train_steps=_whole(settings, "num_train_steps", script),
        num_warmup_steps=_whole(settings, "num_warmup_steps", script, minimum=0),
        save_checkpoints_steps=save_steps, log_every_n_steps=save_steps,
        weight_decay_rate=0.0,
        num_eval_docs=settings.get("num_eval_docs", OUR_SETTINGS["num_eval_docs"]))


def check_records(data_dir, training, evaluating, script=SCRIPT):
    """InputError unless data_dir holds the records the run reads: dataset_train.tf
    to train, dataset_dev.tf and query_doc_ids_dev.txt to evaluate."""
    for split, needed in (("train", training), ("eval", evaluating)):
        for name in filter(None, msmarco_records.FILES[split] if needed else ()):
            if not fileio.exists(os.path.join(data_dir, name)):
                raise InputError("%s: data_dir = %r holds no %s (dl4marco-bert's records%s)"
                                 % (script, data_dir, name, "" if split == "train" else
                                    ", read with is_training = False or do_eval = True"))


def describe(options, settings, num_gpus, script=SCRIPT):
    """The line saying what the settings became."""
    replicas = options.num_gpu_cores if options.use_gpu else options.num_cpu_replicas
    where = "%d %s" % (replicas, "GPU(s)" if num_gpus else "CPU replica(s) (no GPU)")
    if not options.do_train:
        return ("%s: is_training = False: %s ranks dataset_dev.tf on %s (MRR@10)"
                % (script, options.bert_config_file, where))
    dropout = ("is_fine_tuning = False turned BERT's dropout off in the fork; here the "
               "config's dropout trains" if not settings.get("is_fine_tuning")
               else "is_fine_tuning = True")
    return ("%s: %s on %s, global batch %d = %d per replica, %d steps%s; %s"
            % (script, options.bert_config_file, where, options.train_batch_size * replicas,
               options.train_batch_size, options.num_train_steps,
               " then MRR@10 on dataset_dev.tf" if options.do_eval else "", dropout))


# -- the fork's files: loss.txt and bert-model.ckpt ----------------------------------------

def logged_losses(output_dir):
    """[(step, loss, wall time)] of the training log's TensorBoard events, by step."""
    by_step = {}
    for path in sorted(glob.glob(os.path.join(output_dir, "events.out.tfevents.*"))):
        with open(path, "rb") as f:
            for record in tfrecord_codec.read_records(f):
                event = tf1.Event.FromString(record)
                for value in event.summary.value:
                    if value.tag == "loss":
                        by_step[int(event.step)] = (float(value.simple_value), event.wall_time)
    return [(step, loss, wall_time) for step, (loss, wall_time) in sorted(by_step.items())]


def loss_lines(losses, every_n_steps, after_step, final=False):
    """The fork's loss.txt lines for logged `losses` ([(step, loss, wall time)]):
    one at each multiple of every_n_steps after `after_step` that was logged,
    with the mean of the losses logged since the previous line (the fork's mean
    was over every step; ours over the logged ones), and with `final` one at the
    last logged step too. Returns (lines, the step of the last one)."""
    lines, pending, last = [], [], after_step
    for step, loss, wall_time in losses:
        if step <= after_step:
            continue
        pending.append(loss)
        if step % every_n_steps == 0 or (final and step == losses[-1][0]):
            when = time.strftime(TIME_FORMAT, time.localtime(wall_time))
            lines.append("%s %d step loss: %.4f" % (when, step, sum(pending) / len(pending)))
            pending, last = [], step
    return lines, last


def last_written_step(loss_path):
    """The step of loss.txt's last line (0: no file or no line)."""
    if not os.path.exists(loss_path):
        return 0
    last = 0
    with open(loss_path, encoding="utf-8") as f:
        for line in f:
            match = re.search(r" (\d+) step loss: ", line)
            if match:
                last = int(match.group(1))
    return last


def place_checkpoint(checkpoint, destination):
    """The files of `checkpoint` (a prefix) under the prefix `destination`, as hard
    links where the file system allows (a checkpoint's files never change; the
    run may delete old ones), else copies; each replaced atomically."""
    for path in glob.glob(checkpoint + ".*"):
        target = destination + path[len(checkpoint):]
        temporary = "%s.partial-%d" % (target, os.getpid())
        try:
            os.link(path, temporary)
        except OSError:
            shutil.copyfile(path, temporary)
        os.replace(temporary, target)


class ForkFiles(object):
    """Keeps output_dir's loss.txt and bert-model.ckpt as the fork wrote them, from
    the run's training log and checkpoints: `update` while training runs,
    `update(final=True)` when it ends."""

    def __init__(self, output_dir, every_n_steps):
        self.output_dir, self.every_n_steps = output_dir, every_n_steps
        self.loss_path = os.path.join(output_dir, LOSS_FILE)
        self.written_step = last_written_step(self.loss_path)
        self.placed = None

    def update(self, final=False):
        if not os.path.isdir(self.output_dir):
            return
        lines, self.written_step = loss_lines(logged_losses(self.output_dir),
                                              self.every_n_steps, self.written_step, final)
        if lines:
            with open(self.loss_path, "a", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in lines))
        latest = tf.train.latest_checkpoint(self.output_dir)
        if latest and latest != self.placed:
            try:
                place_checkpoint(latest, os.path.join(self.output_dir, CHECKPOINT_NAME))
                self.placed = latest
            except OSError:
                pass  # deleted by the run meanwhile: the next update takes the newer one

    def follow(self, stop, seconds=POLL_SECONDS):
        """update() every `seconds` until the threading.Event `stop` is set."""
        while not stop.wait(seconds):
            try:
                self.update()
            except Exception as e:  # noqa: BLE001 - a file being written; next time
                console.info("%s: %s not updated yet (%s)", self.output_dir, LOSS_FILE, e)


def run(settings, script=SCRIPT):
    """Runs the re-ranker as run_multi_gpu.py's settings say (the script's
    globals(): name -> value); returns the launch.Report."""
    console.setup()
    script = os.path.basename(script)
    num_gpus = visible_gpus()
    options = reranking_options(settings, script, num_gpus)
    console.info(describe(options, settings, num_gpus, script))
    if not options.do_train:
        return task.run(options)
    files = ForkFiles(options.output_dir, options.save_checkpoints_steps)
    stop = threading.Event()
    follower = threading.Thread(target=files.follow, args=(stop,), daemon=True)
    follower.start()
    try:
        report = task.run(options)
    finally:
        # Also after a signal stopped training: the step it saved is the fork's model.
        stop.set()
        follower.join()
        files.update(final=True)
    console.info("%s: %s and %s", script, files.loss_path,
                 os.path.join(options.output_dir, CHECKPOINT_NAME))
    return report
