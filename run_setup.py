"""What every training script checks and sets up before its Estimator runs.

- The pre-trained model's files (bert_config, vocab, init_checkpoint) read and
  cross-checked (`load_model_inputs`, `check_checkpoint`).
- output_dir: usable as a folder, its checkpoint from this model (`check_resumable`),
  where a re-run resumes (`resume_position`), and what a run records there
  beside TensorFlow's files: the label list and the head settings, which the
  checkpoint's variables cannot tell apart.

Everything here reads; the only writes are the `save_*` records, which the
flow calls after every check has passed.
"""

import collections
import datetime
import fcntl
import json
import os
import socket
import sys

import tensorflow as tf

import console
import fileio
import modeling
import tokenization
from errors import InputError


ModelInputs = collections.namedtuple("ModelInputs", [
    "bert_config", "tokenizer", "init_checkpoint"])
"""bert_config: modeling.BertConfig; tokenizer: tokenization.FullTokenizer (None
for runs that do not tokenize); init_checkpoint: checked checkpoint prefix or None."""

LABELS_FILE = "label_list.json"
HEAD_SETTINGS_FILE = "head_settings.json"
LOCK_FILE = ".lock"
_held_locks = {}  # lock file path -> its open file, held until the process exits


def load_model_inputs(options, head_shapes=None, with_tokenizer=True):
    """Reads and cross-checks bert_config, vocab, lower-casing and init_checkpoint.

    head_shapes: bert_config -> {name: shape} of head variables init_checkpoint
    must hold besides BERT's (e.g. the pre-training heads).
    """
    bert_config = modeling.BertConfig.from_json_file(options.bert_config_file)
    modeling.check_max_seq_length(bert_config, options.max_seq_length)
    tokenizer = None
    if with_tokenizer:
        if not options.vocab_file:
            raise InputError("--vocab_file is required")
        tokenization.validate_case_matches_checkpoint(options.do_lower_case,
                                                      options.init_checkpoint)
        tokenizer = tokenization.FullTokenizer(options.vocab_file, options.do_lower_case)
        modeling.check_vocab_matches_config(bert_config, len(tokenizer.vocab),
                                            options.vocab_file)
    init_checkpoint = None
    if options.init_checkpoint:
        expected = dict(modeling.bert_variable_shapes(bert_config),
                        **(head_shapes(bert_config) if head_shapes else {}))
        init_checkpoint = check_checkpoint(options.init_checkpoint, expected)
    return ModelInputs(bert_config, tokenizer, init_checkpoint)


def lock_output_dir(output_dir):
    """Makes output_dir (if needed) and holds it for this process until it exits.

    A second run into the same folder (another terminal, a re-submitted job)
    would write interleaved checkpoints; it gets an InputError naming the
    process that holds the folder, and the folder stays as it was. The lock is
    the operating system's (flock): a killed run releases it, so a stale
    .lock file never blocks a resume.
    """
    if not output_dir or fileio.is_remote(output_dir):
        return
    path = os.path.join(os.path.abspath(output_dir), LOCK_FILE)
    if path in _held_locks:
        return
    os.makedirs(output_dir, exist_ok=True)
    lock = open(path, "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.seek(0)
        holder = lock.read().strip() or "another process"
        lock.close()
        raise InputError("--output_dir=%s is in use by %s; wait for that run to end or stop "
                         "it, or use another --output_dir" % (output_dir, holder))
    lock.truncate(0)
    lock.write("process %d on %s, started %s: %s\n" % (
        os.getpid(), socket.gethostname(), datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:300]))
    lock.flush()
    _held_locks[path] = lock


def check_checkpoint(path, expected_shapes, required_prefix="bert/"):
    """Resolves a checkpoint and checks it fits `expected_shapes` and can be read.

    Every variable of `expected_shapes` under `required_prefix` must be present
    with its shape, and the tensors the model will load must read back intact
    (a truncated or corrupt .data file otherwise fails mid-way through the first
    training step, with a TensorFlow traceback). Returns the checkpoint prefix.
    """
    path = modeling.resolve_checkpoint(path)
    try:
        modeling.check_checkpoint_compatible(expected_shapes, path, required_prefix)
        reader = tf.train.load_checkpoint(path)
        for name in expected_shapes:
            if reader.has_tensor(name):
                reader.get_tensor(name)
    except (tf.errors.OpError, IndexError) as e:
        # IndexError: TensorFlow's reader on a truncated .data file.
        raise InputError("%s: cannot read the checkpoint (%s)"
                         % (path, " ".join(str(getattr(e, "message", e)).split())))
    return path


def latest_checkpoint(output_dir):
    """The newest checkpoint prefix in output_dir, or None."""
    return tf.train.latest_checkpoint(output_dir) if tf.io.gfile.isdir(output_dir) else None


def require_trained_model(output_dir, what):
    """InputError if output_dir holds no checkpoint to evaluate/predict/export."""
    if latest_checkpoint(output_dir) is None:
        raise InputError("--output_dir=%s has no trained checkpoint for %s (add --do_train "
                         "or point --output_dir at a trained model)" % (output_dir, what))


def checkpoint_to_use(output_dir, init_checkpoint, expected_shapes, what):
    """The checkpoint a run without training evaluates, predicts or exports.

    None means output_dir's latest checkpoint (the usual case). When output_dir
    has none, Google's recipe applies: an --init_checkpoint that holds the whole
    fine-tuned model (every variable of `expected_shapes`, the task head
    included, and global_step) is used as it is, and said so in one log line.
    Otherwise (e.g. a pre-trained BERT without the head): InputError.
    """
    if latest_checkpoint(output_dir) is not None:
        return None
    if init_checkpoint:
        stored = dict(tf.train.list_variables(init_checkpoint))
        if "global_step" in stored and all(name in stored for name in expected_shapes):
            for name, shape in expected_shapes.items():
                if list(stored[name]) != list(shape):
                    raise InputError("--init_checkpoint=%s: its %s has shape %s but this "
                                     "task needs %s (a model of another label set?)"
                                     % (init_checkpoint, name, list(stored[name]),
                                        list(shape)))
            console.info("--output_dir=%s has no checkpoint: using the fine-tuned model in "
                         "--init_checkpoint=%s (it holds the task head) for %s",
                         output_dir, init_checkpoint, what)
            return init_checkpoint
    require_trained_model(output_dir, what)


def check_resumable(output_dir, expected_shapes, plan=None):
    """InputError unless the checkpoint in output_dir (if any) belongs to this run.

    A re-run resumes (or evaluates) the latest checkpoint in output_dir. One of
    another bert_config or label count would otherwise be restored silently into
    variables of other shapes (resource variables do not check) or fail deep in
    TensorFlow, after files have been written. With `plan` (the run trains), a
    checkpoint that training will resume must also hold the gradient
    accumulation buffers (`<var>/accum_grad`) the plan's accumulation needs.
    """
    latest = latest_checkpoint(output_dir)
    if latest is None:
        return
    try:
        check_checkpoint(latest, dict(expected_shapes, global_step=[]), required_prefix="")
    except InputError as e:
        raise InputError("%s; this is the checkpoint in --output_dir=%s that a re-run "
                         "resumes or evaluates: use a new --output_dir" % (e, output_dir))
    if plan is None or plan.accumulation_steps == 1:
        return
    reader = tf.train.load_checkpoint(latest)
    if int(reader.get_tensor("global_step")) >= plan.num_train_steps:
        return  # finished: nothing will be resumed
    if not any(name.endswith("/accum_grad") for name in reader.get_variable_to_shape_map()):
        raise InputError("--gradient_accumulation_steps=%d, but %s was trained without "
                         "gradient accumulation; resume with the settings it was trained "
                         "with or use a new --output_dir" % (plan.accumulation_steps, latest))


def resume_position(output_dir, plan, log=True):
    """How many train-op calls output_dir's checkpoint has made; None if it is done.

    One call trains one micro-batch on every replica (one global micro-batch);
    `accum_counter` counts the micro-batches of an unfinished accumulation
    cycle. Logs where training starts. The caller skips that many batches of
    its (deterministically shuffled) input, so a resumed run goes on with the
    examples the interrupted one had not reached rather than repeating some.
    """
    done = latest_checkpoint(output_dir)
    if done is None:
        return 0
    reader = tf.train.load_checkpoint(done)
    step = int(reader.get_tensor("global_step"))
    if step >= plan.num_train_steps:
        if log:
            console.info("output_dir already holds step %d of %d: nothing to train",
                         step, plan.num_train_steps)
        return None
    pending = int(reader.get_tensor("accum_counter")) if reader.has_tensor("accum_counter") \
        else 0
    calls = step * plan.accumulation_steps + pending
    if log:
        console.info("resuming from %s (step %d of %d), after the %d global micro-batches "
                     "already trained on", done, step, plan.num_train_steps, calls)
    return calls


# -- the records a run keeps in output_dir ------------------------------------------

def _read_json_record(path, expected_type, what):
    """The JSON value of a record file, or None if there is none; InputError if damaged."""
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        text = f.read()
    try:
        value = json.loads(text)
    except ValueError as e:
        raise InputError("%s: not valid JSON (%s); expected %s a previous run wrote"
                         % (path, e, what))
    if not isinstance(value, expected_type):
        raise InputError("%s: expected %s, got %s" % (path, what, text.strip()[:60]))
    return value


def read_saved_labels(output_dir):
    """The label list a previous run in output_dir trained with, or None."""
    path = os.path.join(output_dir, LABELS_FILE)
    labels = _read_json_record(path, list, "the JSON list of labels")
    if labels is not None and not (labels and all(isinstance(x, str) for x in labels)):
        raise InputError("%s: expected a JSON list of label strings, got %s"
                         % (path, json.dumps(labels)[:60]))
    return labels


def check_saved_labels(output_dir, label_list):
    """Refuses to continue a model trained with another label set."""
    saved = read_saved_labels(output_dir)
    if saved is not None and saved != list(label_list):
        raise InputError("%s: this output_dir was trained with labels %s, but the data has "
                         "%s (use a new --output_dir)"
                         % (os.path.join(output_dir, LABELS_FILE), saved, list(label_list)))


def choose_label_list(output_dir, do_train, labels_from_data):
    """The label list of the model in output_dir when not training, else the data's.

    labels_from_data: a function returning the labels the data defines (only
    called when needed, since it may read the training file).
    """
    saved = read_saved_labels(output_dir)
    if saved is not None and not do_train:
        return saved
    return list(labels_from_data())


def check_head_settings(output_dir, settings):
    """Refuses head flags other than those output_dir was trained with.

    The variables do not tell, e.g., pooled from mean-pooled heads apart, so a
    mismatch would silently give wrong outputs.
    """
    path = os.path.join(output_dir, HEAD_SETTINGS_FILE)
    saved = _read_json_record(path, dict, "a JSON object of head settings")
    if not saved or not settings:
        return
    different = ["--%s=%s" % (name, value) for name, value in sorted(saved.items())
                 if settings.get(name, value) != value]
    if different:
        raise InputError("%s: this output_dir was trained with %s; pass the same, or "
                         "use a new --output_dir" % (path, " ".join(different)))


def save_records(output_dir, label_list, head_settings):
    """Records the labels and head settings of a run that trains (first run only)."""
    fileio.makedirs(output_dir)
    for name, value in ((LABELS_FILE, list(label_list)), (HEAD_SETTINGS_FILE, head_settings)):
        path = os.path.join(output_dir, name)
        if value and not tf.io.gfile.exists(path):
            fileio.write_text_atomically(path, json.dumps(value, sort_keys=True) + "\n")
