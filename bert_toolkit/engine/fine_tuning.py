"""The fine-tuning flow every fine-tuning task shares.

A task (bert_toolkit/tasks/*/task.py) reads its data into a `Task`
(engine/base_task.py) and calls `run(task, options)` with its options (a
FineTuningOptions); the flow returns a launch.Report:

    prepare  -> check model, output_dir and data; convert features (cached)
    train    -> resumes from output_dir's checkpoint
    evaluate -> streamed metrics and/or metrics from written predictions
    predict  -> prediction files in output_dir
    export   -> a SavedModel for TensorFlow Serving

Everything a user can get wrong (config, vocab, checkpoint, sequence length,
devices, precision, labels, a missing trained model) is checked in `prepare`
before the first byte is written to output_dir, and reported as one
InputError line.
"""

import collections
import functools
import os

import tensorflow as tf

from bert_toolkit import console, families, fileio
from bert_toolkit.engine import (
    checkpoints,
    export,
    input_pipeline,
    launch,
    model_files,
    model_fn_builder,
    model_selection,
    run_folder,
    training,
    training_plan,
)
from bert_toolkit.model import modeling

SPLITS = ("train", "eval", "predict")


Prepared = collections.namedtuple("Prepared", ["records", "plan", "model_fn",
                                               "checkpoint_path"], defaults=(None,))
"""records: split -> (TFRecord path, number of records); plan:
training_plan.TrainingPlan; model_fn: the Estimator's; checkpoint_path: what
evaluation, prediction and export read (None: output_dir's latest checkpoint;
else a fine-tuned --init_checkpoint, see checkpoints.checkpoint_to_use)."""


def run(task, options, model_inputs=None):
    """Prepares, then trains, evaluates, predicts and exports as `options` say;
    returns the launch.Report.

    task: an engine/base_task.py Task; options: engine/options.py FineTuningOptions;
    model_inputs: model_files.ModelInputs, if the caller has read them already.
    In a cluster (--cluster) every worker trains; the chief then evaluates,
    predicts and exports on its own devices.
    """
    placement = launch.place(options, options.do_train)
    model_inputs = model_inputs or model_files.load_model_inputs(options)
    prepared = prepare(task, options, model_inputs, placement)
    estimator = launch.make_estimator(options, placement, prepared.model_fn)
    console.info(launch.describe(options, placement))
    report = launch.Report(options.output_dir)
    if options.do_train:
        report.history = train(estimator, task, options, prepared, placement)
    if not launch.is_chief(placement):
        return report
    if options.do_train:
        prepared = prepared._replace(checkpoint_path=checkpoint_after_training(options))
        report.best_checkpoint = prepared.checkpoint_path
    report.checkpoint = checkpoints.latest_checkpoint(options.output_dir)
    if options.do_eval:
        report.eval = evaluate(estimator, task, options, prepared,
                               len(placement.runtime.devices))
    if options.do_predict:
        report.prediction_files = write_predictions(estimator, task, options, prepared,
                                                    "predict")
    if options.save_for_serving:
        report.export_dir = export_model(estimator, task, options, model_inputs,
                                         prepared.checkpoint_path)
    return report


def prepare(task, options, model_inputs, placement):
    """Checks everything, then writes the run's records and feature cache.

    Nothing is written to output_dir (or cache_dir) until every check and every
    conversion of examples to features has passed.
    """
    output_dir = options.output_dir
    fileio.check_folder(output_dir, "output_dir")
    fileio.check_folder(options.cache_dir, "cache_dir")
    shapes = dict(modeling.bert_variable_shapes(model_inputs.bert_config),
                  **task.head_variable_shapes(model_inputs.bert_config.hidden_size))
    checkpoint_path = None
    if not options.do_train:
        checkpoint_path = checkpoints.checkpoint_to_use(
            output_dir, model_inputs.init_checkpoint, shapes,
            "evaluation, prediction or export")
    run_folder.check_saved_labels(output_dir, task.label_list)
    run_folder.check_head_settings(output_dir, task.head_settings)
    converted = convert_examples(task, options, model_inputs.tokenizer)
    num_train = converted["train"][2] if options.do_train else 0
    plan = training_plan.plan_training(
        num_train, options.num_train_epochs, options.train_batch_size,
        launch.num_replicas(placement), options.gradient_accumulation_steps,
        options.warmup_proportion)
    checkpoints.check_resumable(output_dir, shapes, plan if options.do_train else None)

    # Nothing has been written so far; from here on output_dir is ours.
    launch.claim(output_dir, placement)
    run_folder.save_records(output_dir, task.label_list,
                            task.head_settings if options.do_train else None)
    if options.do_train and launch.is_chief(placement):
        # What the model is, for a later export or handing back without the command.
        run_folder.save_options(output_dir, options)
        export.write_serving_config(output_dir, serving_config(task, options, model_inputs))
    records = write_records(converted, options.cache_dir or output_dir)
    model_fn = model_fn_builder.build_model_fn(
        model_inputs.bert_config, task.head_fn(model_inputs.bert_config), plan,
        init_checkpoint=model_inputs.init_checkpoint,
        skip_padding=task.per_example_outputs,
        **launch.model_fn_settings(options, placement))
    return Prepared(records, plan, model_fn, checkpoint_path)


def convert_examples(task, options, tokenizer):
    """split -> (cache key, feature rows or None if cached, number of records).

    Rows are built in memory (and so checked) before anything is written;
    a streaming task's rows are an iterator of len(examples) records.
    """
    cache_dir = options.cache_dir or options.output_dir
    vocab_digest = input_pipeline.input_fingerprint(
        list(model_files.tokenizer_files(tokenizer).values()))
    converted = {}
    for split, examples in task.examples.items():
        key = {"task": task.name, "examples": task.examples_digest(examples),
               "vocab": vocab_digest, "do_lower_case": options.do_lower_case,
               "max_seq_length": options.max_seq_length, "labels": task.label_list}
        _, count = input_pipeline.find_cached_tfrecord(cache_dir, split, key)
        rows = None
        if count is None:
            rows = task.feature_rows(examples, tokenizer, options.max_seq_length)
            count = len(rows) if isinstance(rows, list) else len(examples)
        converted[split] = (key, rows, count)
    return converted


def write_records(converted, cache_dir):
    """split -> (TFRecord path, number of records), writing the splits not cached."""
    records = {}
    for split, (key, rows, _) in converted.items():
        path, count = input_pipeline.cached_tfrecord(cache_dir, split, key, lambda: rows)
        console.info("%s: %d records in %s", split, count, path)
        records[split] = (path, count)
    return records


def _trim(task, options):
    """The features every batch is cut to its longest sequence (rounded up to 16),
    where the task's features allow it: padding is masked, so results are
    unchanged, and short texts stop paying for max_seq_length (see
    docs/performance.md)."""
    return input_pipeline.trimmable_token_features(
        task.feature_spec(options.max_seq_length),
        input_pipeline.TOKEN_FEATURES + tuple(task.masked_token_features))


def train_input_fn(task, options, prepared, skip_batches=0):
    """Shuffled, repeated training batches, starting `skip_batches` into the stream."""
    return input_pipeline.make_input_fn(
        prepared.records["train"][0], task.feature_spec(options.max_seq_length),
        options.train_batch_size, True, seed=options.seed, skip_batches=skip_batches,
        trim_to_longest_of=_trim(task, options), bucket_by_length=options.bucket_by_length)


def eval_input_fn(task, options, prepared, num_replicas):
    """The eval records, padded so every replica's last batch is full (zero weights)."""
    path, count = prepared.records["eval"]
    return input_pipeline.make_eval_input_fn(
        path, task.feature_spec(options.max_seq_length), options.eval_batch_size, count,
        num_replicas, trim_to_longest_of=_trim(task, options))


def predict_input_fn(task, options, prepared, split):
    """One split's records in order, for Estimator.predict."""
    batch_size = options.predict_batch_size if split == "predict" else options.eval_batch_size
    return input_pipeline.make_input_fn(
        prepared.records[split][0], task.prediction_feature_spec(options.max_seq_length),
        batch_size, False, keep_int64=task.int64_features,
        trim_to_longest_of=_trim(task, options))


def train(estimator, task, options, prepared, placement):
    """Trains up to the plan's steps; a re-run resumes from the last checkpoint,
    going on with the input batches the interrupted run had not reached. With
    evaluation during training, evaluates at model_selection.evaluation_steps
    (see model_selection.py); returns that record (the evaluations, [] without).

    In one process each evaluation runs inside the training session, right after
    the checkpoint of its step, so the training graph and session are built once.
    A cluster trains in segments between evaluations, which the chief runs alone."""
    plan = prepared.plan
    history = model_selection.read_history(options.output_dir)
    if history and history[-1]["stop"]:
        console.info("training stopped early at step %d (see %s): nothing to train",
                     history[-1]["step"], model_selection.HISTORY_FILE)
        return history
    if checkpoints.resume_position(options.output_dir, plan) is not None:
        console.info(training_plan.describe_plan(plan))
    if not options.evaluates_during_training:
        train_segment(estimator, task, options, prepared, placement, plan.num_train_steps)
        return history
    every = options.eval_every_n_steps or model_selection.steps_per_epoch(plan)
    steps = model_selection.evaluation_steps(plan.num_train_steps, every)
    record = functools.partial(record_evaluation, estimator, task, options, prepared,
                               placement, history)
    if placement.cluster is None:
        _train_evaluating_in_session(estimator, task, options, prepared, placement, steps,
                                     history, record)
    else:
        _train_in_segments(estimator, task, options, prepared, placement, steps, history,
                           record)
    return history


def _train_evaluating_in_session(estimator, task, options, prepared, placement, steps,
                                 history, record):
    """One training session; `record(step, checkpoint)` after each of `steps`'
    checkpoints. A step whose checkpoint a killed run saved but did not evaluate
    is evaluated first."""
    evaluated = {entry["step"] for entry in history}
    latest = estimator.latest_checkpoint()
    if latest is not None:
        step = launch.global_step(latest)
        if step in steps and step not in evaluated:
            evaluated.add(step)
            if record(step, latest)["stop"]:
                return

    def evaluate_at(step):
        # The saver also saves the step a session starts from, evaluated already.
        if step in evaluated:
            return False
        evaluated.add(step)
        return record(step, estimator.latest_checkpoint())["stop"]

    train_segment(estimator, task, options, prepared, placement, prepared.plan.num_train_steps,
                  call_at_steps=steps, callback=evaluate_at)


def _train_in_segments(estimator, task, options, prepared, placement, steps, history,
                       record):
    """Trains up to each of `steps` in turn; the chief evaluates alone after each,
    the others wait for its record, so that every worker stops early, or trains
    on, at the same step."""
    evaluated = {entry["step"] for entry in history}
    for step in steps:
        if step in evaluated:
            continue
        checkpoint = train_segment(estimator, task, options, prepared, placement, step)
        entry = (record(step, checkpoint) if launch.is_chief(placement)
                 else model_selection.wait_for_entry(options.output_dir, step))
        if not launch.is_chief(placement):
            history.append(entry)
        if entry["stop"]:
            break


def record_evaluation(estimator, task, options, prepared, placement, history, step,
                      checkpoint):
    """Evaluates `checkpoint` (of `step`) and records it: eval_history.jsonl and
    `history` (appended), the best checkpoint, TensorBoard, the console line and
    the learning curve. Returns the history entry."""
    with model_selection.evaluating(options.output_dir, step):
        report = eval_report(estimator, task, options, prepared._replace(
            checkpoint_path=checkpoint), len(placement.runtime.devices))
    # Default: the task's first summary metric this report has (pos and punct
    # report no entity_f1).
    metric = options.best_metric or (history[-1]["metric"] if history else next(
        (k for k in task.summary_keys if k in report), "eval_loss"))
    entry = model_selection.next_entry(history, step, report, metric,
                                       options.early_stopping_patience)
    if entry["improved"]:
        model_selection.save_best(options.output_dir, checkpoint, entry)
    model_selection.append_entry(options.output_dir, entry)
    history.append(entry)
    # A FileWriter cannot be made eagerly; Estimator.evaluate has made this one
    # only for tasks with streamed_eval.
    with tf.Graph().as_default():
        training.write_summaries(os.path.join(options.output_dir, "eval"), step, report)
    plan = prepared.plan
    console.info(model_selection.describe(entry, plan.num_train_steps, task.summary_keys))
    if options.plot:
        model_selection.plot_learning_curve(
            options.output_dir, training.logged_values(options.output_dir, "loss"), history)
    if entry["stop"]:
        console.info("early stopping: %s did not improve in %d evaluations; the best "
                     "is step %d (%s %.4f)", metric, options.early_stopping_patience,
                     entry["best_step"], metric, entry["best_value"])
    return entry


def train_segment(estimator, task, options, prepared, placement, max_steps,
                  call_at_steps=(), callback=None):
    """Trains up to `max_steps`, from where output_dir's checkpoint is; returns the
    checkpoint of that step. `call_at_steps`, `callback`: see launch.train_to.

    Every process reads the whole stream of per-replica batches (a cluster's
    workers keep their replicas' share, see input_pipeline.this_workers_batches),
    so a resumed run skips the batches every replica already took.
    """
    calls = checkpoints.resume_position(options.output_dir, prepared.plan, log=False)
    if calls is not None:
        input_fn = train_input_fn(task, options, prepared,
                                  calls * launch.num_replicas(placement))
        launch.train_to(estimator, options, placement, prepared.model_fn, input_fn, max_steps,
                        call_at_steps=call_at_steps, callback=callback)
    return estimator.latest_checkpoint()


def checkpoint_after_training(options):
    """What evaluation, prediction and export read after training: the best
    checkpoint when one was kept (and --use_best_checkpoint), else None (the
    latest)."""
    if not (options.evaluates_during_training and options.use_best_checkpoint):
        return None
    path, record = model_selection.best_checkpoint(options.output_dir)
    if path is not None:
        console.info("using the best checkpoint: step %d (%s %.4f), %s", record["step"],
                     record["metric"], record["value"], path)
    return path


def eval_report(estimator, task, options, prepared, num_replicas):
    """The task's report on the eval split for prepared.checkpoint_path (None:
    the latest): streamed metrics and/or those of written predictions."""
    report = {}
    if task.streamed_eval:
        progress = console.Progress("example", prepared.records["eval"][1])
        report.update(task.eval_report(estimator.evaluate(
            eval_input_fn(task, options, prepared, num_replicas),
            hooks=[training.ProgressHook(progress, options.eval_batch_size * num_replicas)],
            checkpoint_path=prepared.checkpoint_path)))
    if task.predicts_eval_split:
        report.update(task.report_from_predictions(
            write_predictions(estimator, task, options, prepared, "eval")))
    report.setdefault("global_step", launch.global_step(
        prepared.checkpoint_path or estimator.latest_checkpoint()))
    return report


def evaluate(estimator, task, options, prepared, num_replicas):
    """Writes eval_results.{json,txt} (see eval_report) and returns the report."""
    report = eval_report(estimator, task, options, prepared, num_replicas)
    fileio.write_results(report, options.output_dir, "eval_results")
    console.info("eval: %s", ", ".join("%s %.4f" % (key, report[key])
                                           for key in task.summary_keys if key in report))
    return report


def write_predictions(estimator, task, options, prepared, split):
    """Predicts one split (on one device, every record once, in order) and writes
    the task's prediction files; returns file name -> path."""
    predictions = _counted(estimator.predict(
        predict_input_fn(task, options, prepared, split),
        predict_keys=task.predict_keys, yield_single_examples=True,
        checkpoint_path=prepared.checkpoint_path),
        console.Progress("example", prepared.records[split][1]))
    written = {}
    for name, lines in task.prediction_files(split, task.examples[split], predictions):
        path = os.path.join(options.output_dir, name)
        with fileio.atomic_path(path) as temporary:
            with fileio.open_file(temporary, "w") as f:
                for line in lines:
                    f.write(line + "\n")
        written[name] = path
        console.info("%s predictions written to %s", split, path)
    return written


def export_model(estimator, task, options, model_inputs, checkpoint_path=None):
    """output_dir/serving/<version>/: serving_default on ids, and the raw-text
    signature `text` when the task has text_inputs and the tokenizer runs in the
    graph (WordPiece; see export.py), from `checkpoint_path` (None: output_dir's
    latest)."""
    tokenizer = model_inputs.tokenizer
    settings = serving_config(task, options, model_inputs)
    text = None
    if task.text_inputs:
        if export.has_text_signature(tokenizer.family_tokenizer,
                                     model_inputs.bert_config.family.name):
            text = export.TextSignature(task.text_inputs, task.label_list, functools.partial(
                task.text_features, vocab_tokens=list(tokenizer.vocab),
                do_lower_case=tokenizer.do_lower_case, max_seq_length=options.max_seq_length))
        else:
            # What serving_server.py's Python `text` signature takes.
            settings["text_inputs"] = list(task.text_inputs)
    return export.export_model(
        estimator, options.output_dir, options.max_seq_length,
        model_files.tokenizer_files(tokenizer), settings, text, checkpoint_path,
        task.extra_serving_inputs)


def _counted(items, progress):
    """Yields `items`, adding each to `progress`."""
    for item in items:
        progress.add(1)
        yield item


def serving_config(task, options, model_inputs):
    """serving_config.json: the task's settings, its labels and the tokenizer's (a
    family other than BERT adds `model_family`; a tokenizer other than WordPiece
    its file's name in the export, `tokenizer_file`, and the file's own casing)."""
    family = model_inputs.bert_config.family
    config = dict(task.serving_config(), do_lower_case=model_inputs.tokenizer.do_lower_case,
                  max_seq_length=options.max_seq_length, labels=task.label_list,
                  **task.head_settings)
    if family.name != families.DEFAULT:
        config["model_family"] = family.name
    if family.tokenizer != "wordpiece":
        config["tokenizer_file"] = os.path.basename(options.vocab_file)
    return config
