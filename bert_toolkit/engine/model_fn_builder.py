"""The Estimator model_fn every task shares: BERT, the task's head, the train op and its log.

A task supplies a `head_fn(model, features, mode) -> Head`: the layer on top
of BERT, its loss, predictions, metrics and serving outputs. `build_model_fn`
wraps it with what is the same for every task: the BERT graph in the chosen
precision, initialisation from a checkpoint, the train op (model/optimization.py)
and the training log (engine/training.py).
"""

import collections
import functools

import tensorflow as tf

from bert_toolkit.engine import input_pipeline, training
from bert_toolkit.estimator_compat import tf_estimator
from bert_toolkit.model import flops, modeling, optimization

Head = collections.namedtuple("Head", [
    "loss", "predictions", "eval_metric_ops", "serving_outputs", "training_logs"],
    defaults=(None,))
"""What a task's head_fn returns.

loss: float32 scalar (None in PREDICT mode); predictions: dict of tensors for
Estimator.predict; eval_metric_ops: dict for EVAL mode; serving_outputs: dict
of tensors for the SavedModel's serving_default signature; training_logs
(optional): dict name -> float32 scalar logged in training beside the loss
(e.g. the parts of a multi-task loss).
"""


# Inference runs each request once: a finer rounding than training's 16 wastes
# less on padding, and a new length costs no compilation (no XLA by default).
INFERENCE_LENGTH_MULTIPLE = 8


def graph_precision(precision, graph_rewrite):
    """The precision the training graph is built in: fp32 when TensorFlow's mixed
    precision pass applies `precision` to it (graph_rewrite), else `precision`."""
    return "fp32" if graph_rewrite else precision


def build_model_fn(bert_config, head_fn, plan, init_checkpoint=None, learning_rate=5e-5,
                   precision="fp32", inference_precision="fp32", optimizer="adamw",
                   weight_decay_rate=0.01, clip_norm=1.0, log_every_n_steps=50,
                   output_dir=None,
                   log_per_replica=False, show_progress=True, step_timeout_seconds=None,
                   on_cluster=False, matmul_peak_flops=None, graph_rewrite=False,
                   skip_padding=False, use_xla=False, max_seq_length=None):
    """An Estimator model_fn: BERT + the task head + the shared training machinery.

    Args:
      plan: a training_plan.TrainingPlan (optimizer steps, warmup, batch sizes).
      precision: compute precision for training; `inference_precision` for
        eval, predict and export.
      output_dir: where the training log writes TensorBoard summaries (None:
        nowhere, e.g. on a worker that is not the chief).
      log_per_replica: also log examples/s per replica; with several workers,
        plan.num_replicas counts the replicas of all of them.
      show_progress: print the progress line (only the chief of several workers).
      on_cluster: one of several workers: the workers agree on a stop signal
        (training.stop_vote) and a lost worker ends the others after
        training.lost_worker_timeout().
      step_timeout_seconds: end the process with one error line when no training
        step finishes for this long (a lost worker; 0: wait forever; None: on a
        cluster, derived from the steps' time).
      matmul_peak_flops: the device's matmul FLOP/s in `precision`; the progress
        line then shows MFU (None: not shown).
      graph_rewrite: the training graph is built in fp32 and `precision` comes from
        TensorFlow's mixed precision pass (distribution.with_mixed_precision_rewrite);
        fp16 keeps its loss scaling.
      skip_padding: for heads whose outputs have no token axis. In prediction
        (Estimator.predict and the exported SavedModel, whose requests come padded
        to max_seq_length) each batch is cut to its longest text, rounded up to
        INFERENCE_LENGTH_MULTIPLE (input_pipeline.trim_to_longest); in every mode
        the encoder's token-wise layers run on the real tokens only
        (modeling.token_packing), unless `use_xla` (XLA would compile each batch's
        new number of tokens anew).
      max_seq_length: the features' padded length, the longest a batch cut to its
        longest text can be (modeling.BertModel).
    """
    def build_graph(features, mode):
        is_training = mode == tf_estimator.ModeKeys.TRAIN
        compute_dtype = modeling.get_compute_dtype(
            graph_precision(precision, graph_rewrite) if is_training else inference_precision)
        if skip_padding and mode == tf_estimator.ModeKeys.PREDICT:
            # Padding is masked: the outputs are the same, the work shrinks.
            features = input_pipeline.trim_to_longest(
                features, input_pipeline.TOKEN_FEATURES, INFERENCE_LENGTH_MULTIPLE)
        model = modeling.BertModel(
            bert_config, is_training, features["input_ids"], features["input_mask"],
            features["segment_ids"], compute_dtype=compute_dtype,
            skip_padding=skip_padding and not use_xla, max_seq_length=max_seq_length)
        head = head_fn(model, features, mode)
        if init_checkpoint:
            # Only shapes the fresh variables: a checkpoint in output_dir wins.
            modeling.init_from_checkpoint(init_checkpoint)

        if mode == tf_estimator.ModeKeys.PREDICT:
            return tf_estimator.EstimatorSpec(
                mode, predictions=head.predictions,
                export_outputs={"serving_default": tf_estimator.export.PredictOutput(
                    head.serving_outputs)})
        if mode == tf_estimator.ModeKeys.EVAL:
            return tf_estimator.EstimatorSpec(mode, loss=head.loss,
                                              eval_metric_ops=head.eval_metric_ops)

        step = optimization.create_train_op(
            head.loss, learning_rate, plan.num_train_steps, plan.num_warmup_steps,
            accumulation_steps=plan.accumulation_steps, precision=precision,
            optimizer=optimizer, weight_decay_rate=weight_decay_rate, clip_norm=clip_norm)
        logged = {"loss": head.loss, "learning_rate": step.learning_rate,
                  "gradient_norm": step.gradient_norm, training.CYCLE_CLOSED: step.cycle_closed}
        if precision == "fp16":
            logged["loss_scale"] = step.loss_scale
        logged.update(head.training_logs or {})
        flops_per_example = None
        if matmul_peak_flops:
            # Batches are cut to their longest sequence: count the length run.
            logged[training.SEQUENCE_LENGTH] = tf.shape(features["input_ids"])[1]
            logged[training.DENSE_TOKENS] = tf.cast(model.get_dense_rows(), tf.float32) / \
                tf.cast(tf.shape(features["input_ids"])[0], tf.float32)
            flops_per_example = functools.partial(flops.training_flops_per_example,
                                                  bert_config)
        hook = training.TrainingLogHook(
            logged, examples_per_call=plan.per_replica_batch_size * plan.num_replicas,
            every_n_steps=log_every_n_steps, total_steps=plan.num_train_steps,
            output_dir=output_dir, num_replicas=plan.num_replicas if log_per_replica else None,
            show=show_progress, flops_per_example=flops_per_example,
            matmul_peak_flops=matmul_peak_flops)
        num_replicas = tf.distribute.get_replica_context().num_replicas_in_sync
        # The Estimator reports the SUM of the replicas' losses; report their mean.
        hooks = [hook]
        if on_cluster:
            training.stop_vote()
        if step_timeout_seconds or (on_cluster and step_timeout_seconds is None):
            hooks.append(training.StepWatchdogHook(step_timeout_seconds, output_dir))
        return tf_estimator.EstimatorSpec(mode, loss=head.loss / float(num_replicas),
                                          train_op=step.train_op, training_hooks=hooks)

    # Under MirroredStrategy the Estimator calls the model_fn through AutoGraph,
    # which rewrites every Python function the graph is built from (BERT's and the
    # optimizer's) before running it. Ours is TensorFlow 1 graph code with no
    # Python branch on a tensor, so the rewrite changes nothing but the time: with a
    # tiny model on 2 CPU replicas, the first training step of a process came 17 s
    # after the start of training instead of 21 (the rewrite is cached after that).
    build_graph_as_written = tf.autograph.experimental.do_not_convert(build_graph)

    def model_fn(features, labels, mode):
        del labels
        return build_graph_as_written(features, mode)

    return model_fn
