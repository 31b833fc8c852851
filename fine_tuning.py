"""The flow every fine-tuning script shares, driven by the common flags.

check model inputs -> plan -> Estimator -> train / evaluate / predict / export.
Everything a user can get wrong (config, vocab, checkpoint, sequence length,
devices, precision, a missing trained model) is checked before the first byte
is written to output_dir, and reported as one InputError line.
"""

import collections
import json
import os

import tensorflow as tf

import distribution
import input_pipeline
import modeling
import tokenization
import training
from errors import InputError

tf1 = tf.compat.v1

FineTuningTask = collections.namedtuple("FineTuningTask", [
    "name", "label_list", "examples", "head_variable_shapes", "examples_digest",
    "feature_rows", "feature_spec", "head_fn", "eval_report", "eval_summary_keys",
    "prediction_file", "prediction_lines", "serving_config", "predict_eval_report",
    "prediction_files", "head_settings"], defaults=(None, None, None))
"""What one fine-tuning script contributes; `run_task` does the rest.

examples: split ("train", "eval", "predict") -> list, read and validated.
head_variable_shapes: name -> shape of the head's variables (resume checks).
examples_digest(examples) -> str; feature_rows(examples) -> list of feature dicts;
feature_spec: name -> tf.io.FixedLenFeature; head_fn: see training.Head.
eval_report(Estimator.evaluate results) -> flat dict; eval_summary_keys: the
report entries logged. prediction_lines(examples, predictions) -> str lines
written to output_dir/prediction_file. serving_config: settings for clients,
exported beside the SavedModel.

Optional: predict_eval_report(eval examples, predictions) -> flat dict, added
to the eval report, for metrics that need whole predictions rather than
streamed counts (e.g. entities spanning several windows of one sentence);
the eval split is then also predicted. prediction_files(examples,
predictions) -> [(file name, lines)] replaces prediction_file and
prediction_lines when a task writes more than one file. head_settings:
flag name -> value of the flags that shape the head without changing its
variables (e.g. pooling); recorded in output_dir, and a later run with other
values is refused.
"""

ModelInputs = collections.namedtuple("ModelInputs", [
    "bert_config", "tokenizer", "init_checkpoint"])
Runtime = collections.namedtuple("Runtime", [
    "devices", "precision", "inference_precision"])


def load_model_inputs(flags_values):
    """Reads and cross-checks bert_config, vocab, lower-casing and init_checkpoint."""
    for name in ("bert_config_file", "vocab_file", "output_dir"):
        if not flags_values[name].value:
            raise InputError("--%s is required" % name)
    for name in ("output_dir", "cache_dir"):
        check_folder_flag(flags_values, name)
    bert_config = modeling.BertConfig.from_json_file(flags_values.bert_config_file)
    modeling.check_max_seq_length(bert_config, flags_values.max_seq_length)
    if flags_values.max_seq_length < 2:
        raise InputError("--max_seq_length must be >= 2 (it holds [CLS] and [SEP]), got %d"
                         % flags_values.max_seq_length)
    tokenization.validate_case_matches_checkpoint(flags_values.do_lower_case,
                                                  flags_values.init_checkpoint)
    tokenizer = tokenization.FullTokenizer(flags_values.vocab_file,
                                           flags_values.do_lower_case)
    modeling.check_vocab_matches_config(bert_config, len(tokenizer.vocab),
                                        flags_values.vocab_file)
    init_checkpoint = None
    if flags_values.init_checkpoint:
        init_checkpoint = check_checkpoint(flags_values.init_checkpoint,
                                           modeling.bert_variable_shapes(bert_config))
    return ModelInputs(bert_config, tokenizer, init_checkpoint)


def check_folder_flag(flags_values, name):
    """InputError if the folder flag `name` names something that is not a folder."""
    path = flags_values[name].value
    if path and tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
        raise InputError("--%s=%s is a file, expected a folder" % (name, path))


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


def check_resumable(output_dir, expected_shapes, plan=None):
    """InputError unless the checkpoint in output_dir (if any) belongs to this run.

    A re-run resumes (or evaluates) the latest checkpoint in output_dir. One of
    another bert_config or label count would otherwise be restored silently into
    variables of other shapes (resource variables do not check) or fail deep in
    TensorFlow, after files have been written. With `plan` (the run trains), a
    checkpoint that training will resume must also hold the gradient
    accumulation buffers (`<var>/accum_grad`) the plan's accumulation needs.
    """
    latest = training.latest_checkpoint_or_none(output_dir)
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


def resolve_runtime(flags_values):
    """Devices and precisions from the flags; InputError if they cannot exist here."""
    devices = distribution.replica_devices(flags_values.use_gpu, flags_values.num_gpu_cores,
                                           flags_values.num_cpu_replicas)
    precision = distribution.resolve_precision(flags_values.precision,
                                               flags_values.use_fp16, flags_values.use_gpu)
    inference_precision = distribution.resolve_precision(flags_values.inference_precision,
                                                         use_gpu=flags_values.use_gpu)
    if precision == "fp16" and not flags_values.use_gpu:
        tf1.logging.warning("fp16 on a CPU is very slow (no fp16 matrix units); "
                            "bf16 or fp32 is the better choice here")
    return Runtime(devices, precision, inference_precision)


def require_trained_model(output_dir, what):
    """Raises InputError if output_dir holds no checkpoint to evaluate/predict/export."""
    if training.latest_checkpoint_or_none(output_dir) is None:
        raise InputError("--output_dir=%s has no trained checkpoint for %s (add --do_train "
                         "or point --output_dir at a trained model)" % (output_dir, what))


def make_estimator(flags_values, runtime, model_fn):
    run_config = distribution.make_run_config(
        flags_values.output_dir, runtime.devices, use_xla=flags_values.use_xla,
        save_checkpoints_steps=flags_values.save_checkpoints_steps,
        keep_checkpoint_max=flags_values.keep_checkpoint_max, seed=flags_values.seed)
    return tf.estimator.Estimator(model_fn=model_fn, config=run_config)


def trained_batches(output_dir, plan):
    """(checkpoint, optimizer steps, input batches) already trained in output_dir.

    (None, 0, 0) without a checkpoint. One optimizer step consumes
    accumulation_steps micro-batches of every replica, and the replicas of one
    worker take consecutive batches of the one input pipeline; `accum_counter`
    counts the micro-batches of an unfinished accumulation cycle.
    """
    done, step, calls = trained_micro_batch_calls(output_dir, plan)
    return done, step, calls * plan.num_replicas


def trained_micro_batch_calls(output_dir, plan):
    """(checkpoint, optimizer steps, train-op calls) already made in output_dir.

    One call trains one micro-batch on every replica (one global micro-batch);
    (None, 0, 0) without a checkpoint.
    """
    done = training.latest_checkpoint_or_none(output_dir)
    if done is None:
        return None, 0, 0
    reader = tf.train.load_checkpoint(done)
    step = int(reader.get_tensor("global_step"))
    pending = int(reader.get_tensor("accum_counter")) if reader.has_tensor("accum_counter") \
        else 0
    return done, step, step * plan.accumulation_steps + pending


def train(estimator, make_input_fn, plan):
    """Trains up to plan.num_train_steps; a re-run resumes from the last checkpoint.

    `make_input_fn(skip_batches)` returns the training input_fn that starts
    `skip_batches` batches into its (deterministically shuffled) stream, so a
    resumed run goes on with the examples the interrupted one had not reached
    rather than repeating the ones it had.
    """
    done, step, batches = trained_batches(estimator.model_dir, plan)
    if done:
        if step >= plan.num_train_steps:
            tf1.logging.info("output_dir already holds step %d of %d: nothing to train",
                             step, plan.num_train_steps)
            return
        tf1.logging.info("resuming from %s (step %d of %d), after the %d input batches "
                         "already trained on", done, step, plan.num_train_steps, batches)
    estimator.train(make_input_fn(batches), max_steps=plan.num_train_steps)


def saved_labels_path(output_dir):
    return os.path.join(output_dir, "label_list.json")


def read_saved_labels(output_dir):
    """The label list a previous run in output_dir trained with, or None."""
    path = saved_labels_path(output_dir)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        text = f.read()
    try:
        labels = json.loads(text)
    except ValueError as e:
        raise InputError("%s: not valid JSON (%s); expected the list of labels a previous "
                         "run wrote" % (path, e))
    if not (isinstance(labels, list) and labels
            and all(isinstance(label, str) for label in labels)):
        raise InputError("%s: expected a JSON list of label strings, got %s"
                         % (path, text.strip()[:60]))
    return labels


def check_saved_labels(output_dir, label_list):
    """Refuses to continue a model trained with another label set (writes nothing)."""
    saved = read_saved_labels(output_dir)
    if saved is not None and saved != list(label_list):
        raise InputError("%s: this output_dir was trained with labels %s, but the data has "
                         "%s (use a new --output_dir)"
                         % (saved_labels_path(output_dir), saved, list(label_list)))
    return saved


def check_and_save_labels(output_dir, label_list):
    """Refuses to continue a model trained with another label set; records ours."""
    saved = check_saved_labels(output_dir, label_list)
    if saved is None:
        tf.io.gfile.makedirs(output_dir)
        training.write_text_atomically(saved_labels_path(output_dir),
                                       json.dumps(list(label_list)) + "\n")


def head_settings_path(output_dir):
    return os.path.join(output_dir, "head_settings.json")


def check_head_settings(output_dir, settings, save=False):
    """Refuses head flags other than those output_dir was trained with; records ours.

    The variables do not tell, e.g., pooled from mean-pooled heads apart, so a
    mismatch would silently give wrong outputs.
    """
    if not settings:
        return
    path = head_settings_path(output_dir)
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
            try:
                saved = json.load(f)
            except ValueError as e:
                raise InputError("%s: not valid JSON (%s); expected the head settings a "
                                 "previous run wrote" % (path, e))
        if not isinstance(saved, dict):
            raise InputError("%s: expected a JSON object of head settings, got %s"
                             % (path, json.dumps(saved)[:60]))
        different = ["--%s=%s" % (name, value) for name, value in sorted(saved.items())
                     if settings.get(name, value) != value]
        if different:
            raise InputError("%s: this output_dir was trained with %s; pass the same, or "
                             "use a new --output_dir" % (path, " ".join(different)))
    elif save:
        training.write_text_atomically(path, json.dumps(settings, sort_keys=True) + "\n")


def export(estimator, flags_values, serving_config):
    """Exports output_dir/serving/<version>/ with vocab and settings in assets.extra/."""
    settings_path = os.path.join(flags_values.output_dir, "serving_config.json")
    training.write_text_atomically(settings_path,
                                   json.dumps(serving_config, indent=2, sort_keys=True) + "\n")
    path = training.export_for_serving(
        estimator, os.path.join(flags_values.output_dir, "serving"),
        flags_values.max_seq_length,
        {"vocab.txt": flags_values.vocab_file, "serving_config.json": settings_path})
    tf1.logging.info("exported SavedModel for TensorFlow Serving: %s", path)
    return path


def run_task(flags_values, model_inputs, runtime, task, evaluate_and_predict=None):
    """Checks, converts, trains, evaluates, predicts and exports, as the flags say.

    evaluate_and_predict (optional): `f(estimator, records)`, called after
    training and before export in place of the Estimator.evaluate / predict
    steps, for tasks whose evaluation is not a streamed metric (e.g. ranking:
    predict, rank, then score the ranking); `records` maps each split to
    (TFRecord path, number of records). It acts on do_eval/do_predict itself.

    Everything that can fail on user input runs before the first write to
    output_dir: the trained model's presence, its labels and shapes, and the
    conversion of every split to features (a cached split is not converted).
    """
    output_dir = flags_values.output_dir
    if not flags_values.do_train:
        require_trained_model(output_dir, "evaluation, prediction or export")
    check_saved_labels(output_dir, task.label_list)
    check_head_settings(output_dir, task.head_settings)
    num_train = len(task.examples["train"]) if flags_values.do_train else 0
    plan = distribution.plan_training(
        num_train, flags_values.num_train_epochs, flags_values.train_batch_size,
        len(runtime.devices), flags_values.gradient_accumulation_steps,
        flags_values.warmup_proportion)
    check_resumable(output_dir, dict(modeling.bert_variable_shapes(model_inputs.bert_config),
                                     **task.head_variable_shapes),
                    plan if flags_values.do_train else None)
    # Every batch is cut to its longest sequence (rounded up to 16) where the
    # task's features allow it: padding is masked, so results are unchanged,
    # and short texts stop paying for max_seq_length (see docs/performance.md).
    trim = input_pipeline.trimmable_token_features(task.feature_spec)
    if flags_values.bucket_by_length and not trim:
        raise InputError("--bucket_by_length: task %s has per-token features, so its "
                         "batches keep full length; leave the flag off" % task.name)

    cache_dir = flags_values.cache_dir or output_dir
    vocab_digest = input_pipeline.input_fingerprint([flags_values.vocab_file])
    converted = {}
    for split, split_examples in task.examples.items():
        key = {"task": task.name, "examples": task.examples_digest(split_examples),
               "vocab": vocab_digest, "do_lower_case": flags_values.do_lower_case,
               "max_seq_length": flags_values.max_seq_length, "labels": task.label_list}
        path, count = input_pipeline.find_cached_tfrecord(cache_dir, split, key)
        rows = None if count is not None else task.feature_rows(split_examples)
        converted[split] = (key, rows)

    # Nothing has been written so far; from here on output_dir is ours.
    check_and_save_labels(output_dir, task.label_list)
    check_head_settings(output_dir, task.head_settings, save=flags_values.do_train)
    records = {}
    for split, (key, rows) in converted.items():
        path, count = input_pipeline.cached_tfrecord(cache_dir, split, key, lambda: rows)
        tf1.logging.info("%s: %d examples in %s", split, count, path)
        records[split] = (path, count)
    del converted


    def input_fn(split, batch_size, skip_batches=0, padded_eval=True):
        path, count = records[split]
        if split == "eval" and padded_eval:
            return input_pipeline.make_eval_input_fn(path, task.feature_spec, batch_size,
                                                     count, len(runtime.devices),
                                                     trim_to_longest_of=trim)
        return input_pipeline.make_input_fn(path, task.feature_spec, batch_size,
                                            split == "train", seed=flags_values.seed,
                                            skip_batches=skip_batches,
                                            trim_to_longest_of=trim,
                                            bucket_by_length=flags_values.bucket_by_length)

    model_fn = training.build_model_fn(
        model_inputs.bert_config, task.head_fn, plan,
        init_checkpoint=model_inputs.init_checkpoint,
        learning_rate=flags_values.learning_rate, precision=runtime.precision,
        inference_precision=runtime.inference_precision, optimizer=flags_values.optimizer,
        weight_decay_rate=flags_values.weight_decay_rate,
        log_every_n_steps=flags_values.log_every_n_steps, output_dir=output_dir)
    estimator = make_estimator(flags_values, runtime, model_fn)
    tf1.logging.info("devices %s, precision %s (inference %s)", ",".join(runtime.devices),
                     runtime.precision, runtime.inference_precision)

    if flags_values.do_train:
        tf1.logging.info(distribution.describe_plan(plan))
        train(estimator,
              lambda skip_batches: input_fn("train", flags_values.train_batch_size,
                                            skip_batches),
              plan)
    if flags_values.do_eval and evaluate_and_predict is None:
        report = task.eval_report(estimator.evaluate(
            input_fn("eval", flags_values.eval_batch_size)))
        if task.predict_eval_report is not None:
            # Prediction runs on one device and yields every record once, in order.
            predictions = estimator.predict(
                input_fn("eval", flags_values.eval_batch_size, padded_eval=False),
                yield_single_examples=True)
            report.update(task.predict_eval_report(task.examples["eval"], predictions))
        training.write_json_and_text(report, os.path.join(output_dir, "eval_results.json"),
                                     os.path.join(output_dir, "eval_results.txt"))
        tf1.logging.info("eval: %s", ", ".join("%s %.4f" % (k, report[k])
                                               for k in task.eval_summary_keys if k in report))
    if flags_values.do_predict and evaluate_and_predict is None:
        predictions = estimator.predict(input_fn("predict", flags_values.predict_batch_size),
                                        yield_single_examples=True)
        if task.prediction_files is None:
            files = [(task.prediction_file,
                      task.prediction_lines(task.examples["predict"], predictions))]
        else:
            files = task.prediction_files(task.examples["predict"], predictions)
        for name, lines in files:
            out_path = os.path.join(output_dir, name)
            training.write_text_atomically(out_path, "".join(line + "\n" for line in lines))
            tf1.logging.info("predictions for %d examples written to %s",
                             len(task.examples["predict"]), out_path)
    if evaluate_and_predict is not None:
        evaluate_and_predict(estimator, records)
    if flags_values.save_for_serving:
        export(estimator, flags_values, dict(
            task.serving_config, do_lower_case=flags_values.do_lower_case,
            max_seq_length=flags_values.max_seq_length, labels=task.label_list,
            **(task.head_settings or {})))


def choose_label_list(output_dir, do_train, labels_from_data):
    """The label list of the model in output_dir when not training, else the data's.

    labels_from_data: a function returning the labels the data defines (only
    called when needed, since it may read the training file).
    """
    saved = read_saved_labels(output_dir)
    if saved is not None and not do_train:
        return saved
    return list(labels_from_data())
