"""What a run keeps in its output_dir beside TensorFlow's files, and who holds it.

- The lock: one run per output_dir (an operating-system lock on .lock).
- The records: the label list and the head settings a model was trained with,
  which its checkpoint's variables cannot tell apart (a later run with others
  is refused), and the options of the last run that trained there, so the
  model can be exported or asked later without its command line (api.predict).

Everything here reads, except `lock_output_dir`, `save_records` and
`save_options`, which the flows call after every check has passed.
"""

import datetime
import fcntl
import json
import os
import socket
import sys

import tensorflow as tf

from bert_toolkit import fileio
from bert_toolkit.errors import InputError

LABELS_FILE = "label_list.json"
HEAD_SETTINGS_FILE = "head_settings.json"
OPTIONS_FILE = "run_options.json"
LOCK_FILE = ".lock"
_held_locks = {}  # lock file path -> its open file, held until the process exits


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


def save_options(output_dir, options):
    """Records the options of a run that trains (its class and every setting)."""
    cls = type(options)
    record = {"options_class": "%s:%s" % (cls.__module__, cls.__qualname__),
              "options": options.as_dict()}
    fileio.write_text_atomically(os.path.join(output_dir, OPTIONS_FILE),
                                 json.dumps(record, indent=1, sort_keys=True) + "\n")


def read_options(output_dir):
    """(options class path "module:Class", settings dict) of the last run that trained
    in output_dir, or None if none was recorded."""
    path = os.path.join(output_dir, OPTIONS_FILE)
    record = _read_json_record(path, dict, "a JSON object of a run's options")
    if record is None:
        return None
    if not (isinstance(record.get("options_class"), str)
            and isinstance(record.get("options"), dict)):
        raise InputError("%s: expected options_class and options, as a training run "
                         "writes them" % path)
    return record["options_class"], record["options"]
