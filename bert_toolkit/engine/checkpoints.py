"""Checkpoints: can one be read, does it fit this model, where does a re-run resume.

A re-run of a command resumes from the latest checkpoint in output_dir; these
checks make sure that checkpoint belongs to the run (same config, label count,
accumulation) before anything is written, and say how far it got.
"""

import tensorflow as tf

from bert_toolkit import console
from bert_toolkit.errors import InputError
from bert_toolkit.model import google_names, modeling


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
        stored = reader.get_variable_to_shape_map()
        for name in expected_shapes:
            source = google_names.stored_name(name, stored)
            if source is not None:
                reader.get_tensor(source)
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
