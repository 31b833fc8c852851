"""The fine-tuning flow every fine-tuning script shares, and the Task it runs.

A script reads its flags into run_options.RunOptions and its data into a
`Task` (classifier.py, seq_labeling.py, reranking.py), then calls `run`:

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

import console
import distribution
import export
import fileio
import input_pipeline
import model_selection
import modeling
import run_setup
import training
from errors import InputError

SPLITS = ("train", "eval", "predict")


class Task(object):
    """What one fine-tuning script contributes; `run` does the rest.

    A subclass sets `name` and implements `feature_rows`, `feature_spec` and
    `head_fn`; the other methods have defaults that suit a classifier-like
    head of `output_weights` [num_labels, hidden] and `output_bias`.

    examples: split ("train", "eval", "predict") -> the split's examples, read
      and validated (a list, or a sized source a streaming task reads again).
    label_list: the label names, in label-id order.
    head_settings: flag name -> value of the flags that shape the head without
      changing its variables (e.g. pooling); recorded in output_dir, and a
      later run with other values is refused.
    """

    name = "task"                 # part of the feature cache key
    summary_keys = ("eval_loss",)  # the report entries logged after evaluation
    streamed_eval = True          # evaluate with Estimator.evaluate (distributed)
    predicts_eval_split = False   # also predict the eval split (report_from_predictions)
    int64_features = ()           # features kept int64 in prediction (e.g. large ids)
    masked_token_features = ()    # per-token features besides input_ids, input_mask and
    #                               segment_ids that are masked out past the text (e.g.
    #                               per-token labels): cut with them to a batch's longest text
    predict_keys = None           # the predictions Estimator.predict computes (None: all)
    text_inputs = ()              # the export's raw-text signature's inputs (): none
    extra_serving_inputs = {}     # name -> shape of int32 inputs the export accepts and
    #                               ignores (requests of other clients; see export.py)

    def __init__(self, examples, label_list, head_settings=None):
        self.examples = dict(examples)
        self.label_list = list(label_list)
        self.head_settings = dict(head_settings or {})

    def examples_digest(self, examples):
        """A hash of the examples and of the settings their features depend on."""
        return input_pipeline.fingerprint([repr(example) for example in examples])

    def feature_rows(self, examples, tokenizer, max_seq_length):
        """The feature dicts of `examples`: a list, or an iterator yielding exactly
        len(examples) rows (streaming tasks), in example order."""
        raise NotImplementedError

    def feature_spec(self, max_seq_length):
        """name -> tf.io.FixedLenFeature of the records training and eval read."""
        raise NotImplementedError

    def prediction_feature_spec(self, max_seq_length):
        """The records' features prediction reads (default: feature_spec's)."""
        return self.feature_spec(max_seq_length)

    def head_variable_shapes(self, hidden_size):
        """name -> shape of the head's variables (checked against checkpoints)."""
        return {"output_weights": [len(self.label_list), hidden_size],
                "output_bias": [len(self.label_list)]}

    def head_fn(self, bert_config):
        """`head_fn(model, features, mode) -> training.Head` for training.build_model_fn."""
        raise NotImplementedError

    def eval_report(self, results):
        """The flat report of Estimator.evaluate's results (streamed_eval)."""
        return {"eval_loss": float(results["eval_loss"]),
                "global_step": int(results["global_step"])}

    def prediction_files(self, split, examples, predictions):
        """[(file name, lines)] written to output_dir from one split's predictions.

        predictions: an iterator of per-record dicts, in record order; lines
        may be an iterator (written as it is consumed).
        """
        return []

    def report_from_predictions(self, written):
        """Eval metrics that need whole predictions (predicts_eval_split), from the
        files prediction_files("eval", ...) wrote: name -> path."""
        return {}

    def serving_config(self):
        """Task settings a client needs, beside labels and tokenizer settings."""
        return {}

    def text_features(self, texts, vocab_tokens, do_lower_case, max_seq_length):
        """The export's `text` signature: the model's int32 features [batch,
        max_seq_length] from tf.string [batch] texts (name in text_inputs ->
        tensor), tokenized in the graph exactly as feature_rows does."""
        raise NotImplementedError


Prepared = collections.namedtuple("Prepared", ["records", "plan", "model_fn",
                                               "checkpoint_path"], defaults=(None,))
"""records: split -> (TFRecord path, number of records); plan:
distribution.TrainingPlan; model_fn: the Estimator's; checkpoint_path: what
evaluation, prediction and export read (None: output_dir's latest checkpoint;
else a fine-tuned --init_checkpoint, see run_setup.checkpoint_to_use)."""


Placement = collections.namedtuple("Placement", ["runtime", "cluster", "strategy",
                                                 "matmul_peak"])
"""Where a run trains: runtime (distribution.Runtime: this process's devices and
precisions); cluster (distribution.ClusterTask, None for one process); strategy
(the MultiWorkerMirroredStrategy of a cluster that trains, else None);
matmul_peak (FLOP/s of a device in the training precision, for the MFU of the
training log; None when not training)."""


def run(task, options, model_inputs=None):
    """Prepares, then trains, evaluates, predicts and exports as `options` say.

    model_inputs: run_setup.ModelInputs, if the caller has read them already.
    In a cluster (--cluster) every worker trains; the chief then evaluates,
    predicts and exports on its own devices.
    """
    cluster, strategy = join_cluster(options)
    model_inputs = model_inputs or run_setup.load_model_inputs(options)
    runtime = distribution.cluster_runtime(options, cluster)
    placement = Placement(runtime, cluster, strategy,
                          distribution.matmul_peak(options, runtime) if options.do_train
                          else None)
    prepared = prepare(task, options, model_inputs, placement)
    estimator = distribution.make_estimator(options, runtime, prepared.model_fn)
    console.info("%s; devices %s, precision %s (inference %s)%s; output in %s (watch it "
                 "with tensorboard --logdir %s)",
                 cluster.description if cluster else "one process", ",".join(runtime.devices),
                 runtime.precision, runtime.inference_precision,
                 distribution.describe_peak(placement.matmul_peak), options.output_dir,
                 options.output_dir)
    if options.do_train:
        train(estimator, task, options, prepared, placement)
        prepared = prepared._replace(checkpoint_path=checkpoint_after_training(options))
    if cluster is not None and not cluster.is_chief:
        return
    if options.do_eval:
        evaluate(estimator, task, options, prepared, len(runtime.devices))
    if options.do_predict:
        write_predictions(estimator, task, options, prepared, "predict")
    if options.save_for_serving:
        export_model(estimator, task, options, model_inputs.tokenizer,
                     prepared.checkpoint_path)


def join_cluster(options):
    """(ClusterTask, strategy) of the cluster --cluster names, or (None, None).

    The strategy exists only when training, and is made before any other
    TensorFlow op runs (it configures the collectives and starts this worker's
    server).
    """
    cluster = distribution.join_cluster(options)
    if cluster is None:
        return None, None
    if options.evaluates_during_training:
        raise InputError("%s: %d workers; evaluation during training (--eval_every_*) runs "
                         "in one process: drop it, or use --cluster=local"
                         % (cluster.description, cluster.num_workers))
    console.info("%s: worker %d of %d (%s)", cluster.description, cluster.worker_index,
                 cluster.num_workers, "chief" if cluster.is_chief else "not chief")
    strategy = (distribution.make_multi_worker_strategy(options.use_gpu)
                if options.do_train else None)
    return cluster, strategy


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
        checkpoint_path = run_setup.checkpoint_to_use(
            output_dir, model_inputs.init_checkpoint, shapes,
            "evaluation, prediction or export")
    run_setup.check_saved_labels(output_dir, task.label_list)
    run_setup.check_head_settings(output_dir, task.head_settings)
    converted = convert_examples(task, options, model_inputs.tokenizer)
    num_train = converted["train"][2] if options.do_train else 0
    cluster = placement.cluster
    is_chief = cluster is None or cluster.is_chief
    plan = distribution.plan_training(
        num_train, options.num_train_epochs, options.train_batch_size,
        len(placement.runtime.devices) * (cluster.num_workers if cluster else 1),
        options.gradient_accumulation_steps, options.warmup_proportion)
    run_setup.check_resumable(output_dir, shapes, plan if options.do_train else None)

    # Nothing has been written so far; from here on output_dir is ours (the
    # chief holds it for a cluster, whose workers share it).
    if is_chief:
        run_setup.lock_output_dir(output_dir)
    run_setup.save_records(output_dir, task.label_list,
                           task.head_settings if options.do_train else None)
    records = write_records(converted, options.cache_dir or output_dir)
    runtime = placement.runtime
    model_fn = training.build_model_fn(
        model_inputs.bert_config, task.head_fn(model_inputs.bert_config), plan,
        init_checkpoint=model_inputs.init_checkpoint, learning_rate=options.learning_rate,
        precision=runtime.precision, inference_precision=runtime.inference_precision,
        optimizer=options.optimizer, weight_decay_rate=options.weight_decay_rate,
        log_every_n_steps=options.log_every_n_steps,
        output_dir=output_dir if is_chief else None, show_progress=is_chief,
        step_timeout_seconds=options.step_timeout_seconds,
        matmul_peak_flops=placement.matmul_peak)
    return Prepared(records, plan, model_fn, checkpoint_path)


def convert_examples(task, options, tokenizer):
    """split -> (cache key, feature rows or None if cached, number of records).

    Rows are built in memory (and so checked) before anything is written;
    a streaming task's rows are an iterator of len(examples) records.
    """
    cache_dir = options.cache_dir or options.output_dir
    vocab_digest = input_pipeline.input_fingerprint([options.vocab_file])
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
    evaluation during training, trains in segments with an evaluation after
    each (see model_selection.py)."""
    plan = prepared.plan
    history = model_selection.read_history(options.output_dir)
    if history and history[-1]["stop"]:
        console.info("training stopped early at step %d (see %s): nothing to train",
                     history[-1]["step"], model_selection.HISTORY_FILE)
        return
    if run_setup.resume_position(options.output_dir, plan) is not None:
        console.info(distribution.describe_plan(plan))
    if not options.evaluates_during_training:
        train_segment(estimator, task, options, prepared, placement, plan.num_train_steps)
        return
    every = options.eval_every_n_steps or model_selection.steps_per_epoch(plan)
    metric = options.best_metric or (history[-1]["metric"] if history else None)
    evaluated = {entry["step"] for entry in history}
    for step in model_selection.evaluation_steps(plan.num_train_steps, every):
        if step in evaluated:
            continue
        checkpoint = train_segment(estimator, task, options, prepared, placement, step)
        report = eval_report(estimator, task, options, prepared._replace(
            checkpoint_path=checkpoint), len(placement.runtime.devices))
        # Default: the task's first summary metric this report has (pos and punct
        # report no entity_f1).
        metric = metric or next((k for k in task.summary_keys if k in report), "eval_loss")
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
        console.info(model_selection.describe(entry, plan.num_train_steps, task.summary_keys))
        if options.plot:
            model_selection.plot_learning_curve(
                options.output_dir, training.logged_values(options.output_dir, "loss"), history)
        if entry["stop"]:
            console.info("early stopping: %s did not improve in %d evaluations; the best "
                         "is step %d (%s %.4f)", metric, options.early_stopping_patience,
                         entry["best_step"], metric, entry["best_value"])
            return


def train_segment(estimator, task, options, prepared, placement, max_steps):
    """Trains up to `max_steps`, from where output_dir's checkpoint is; returns the
    checkpoint of that step.

    Each process's input pipeline feeds its own replicas (a cluster's workers
    each read their shard of the records), so a resumed run skips the batches
    its local replicas already took.
    """
    calls = run_setup.resume_position(options.output_dir, prepared.plan, log=False)
    if calls is not None:
        devices = placement.runtime.devices
        input_fn = train_input_fn(task, options, prepared, calls * len(devices))
        if placement.cluster is None:
            training.train(estimator, input_fn, max_steps)
        else:
            distribution.train_on_cluster(options, placement.cluster, placement.strategy,
                                          devices, prepared.model_fn, input_fn, max_steps)
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
    report.setdefault("global_step", int(tf.train.load_checkpoint(
        prepared.checkpoint_path or estimator.latest_checkpoint()).get_tensor("global_step")))
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


def export_model(estimator, task, options, tokenizer, checkpoint_path=None):
    """output_dir/serving/<version>/: serving_default on ids, and the raw-text
    signature `text` when the task has text_inputs (see export.py), from
    `checkpoint_path` (None: output_dir's latest)."""
    text = None
    if task.text_inputs:
        text = export.TextSignature(task.text_inputs, task.label_list, functools.partial(
            task.text_features, vocab_tokens=list(tokenizer.vocab),
            do_lower_case=options.do_lower_case, max_seq_length=options.max_seq_length))
    return export.export_model(estimator, options.output_dir, options.max_seq_length,
                               options.vocab_file, serving_config(task, options), text,
                               checkpoint_path, task.extra_serving_inputs)


def _counted(items, progress):
    """Yields `items`, adding each to `progress`."""
    for item in items:
        progress.add(1)
        yield item


def serving_config(task, options):
    """serving_config.json: the task's settings, its labels and the tokenizer's."""
    return dict(task.serving_config(), do_lower_case=options.do_lower_case,
                max_seq_length=options.max_seq_length, labels=task.label_list,
                **task.head_settings)
