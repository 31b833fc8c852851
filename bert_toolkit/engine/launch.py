"""What every training run does around its Estimator, fine-tuning and pre-training alike.

    place      joins the cluster --cluster names (its strategy before any other
               TensorFlow op), resolves this process's devices and precisions
               (`auto` on a CPU by its matmul rates in fp32 and bf16, cached per
               machine), measures the matmul peak the training log's MFU is taken
               against
    claim      holds output_dir for this run, once every check has passed
    describe   the one line saying where the run trains and where its output goes
    train_to   trains up to a step: in this process, or with every worker of the cluster

A run's result is a `Report` (what the Python API returns).
"""

import collections
import dataclasses
from typing import Optional

import tensorflow as tf

from bert_toolkit import console
from bert_toolkit.engine import distribution, multi_worker, run_folder, training
from bert_toolkit.estimator_compat import tf_estimator

Placement = collections.namedtuple("Placement", ["runtime", "cluster", "strategy",
                                                 "matmul_peak"])
"""Where a run trains: runtime (distribution.Runtime: this process's devices and
precisions); cluster (multi_worker.ClusterTask, None for one process); strategy
(the MultiWorkerMirroredStrategy of a cluster that trains, else None);
matmul_peak (FLOP/s of a device in the training precision, for the MFU of the
training log; None when not training)."""


@dataclasses.dataclass
class Report:
    """What a run did: the Python API's answer (the command line writes the same to
    output_dir).

    eval: the evaluation report (eval_results.json), None without evaluation;
    checkpoint: the newest checkpoint in output_dir; best_checkpoint: the best
    one kept by evaluation during training; export_dir: the SavedModel's
    version folder; prediction_files: file name -> path of what prediction
    wrote; history: the evaluations during training (eval_history.jsonl).
    A worker of a cluster that is not the chief reports only its output_dir.
    """
    output_dir: str
    eval: Optional[dict] = None
    checkpoint: Optional[str] = None
    best_checkpoint: Optional[str] = None
    export_dir: Optional[str] = None
    prediction_files: dict = dataclasses.field(default_factory=dict)
    history: list = dataclasses.field(default_factory=list)


def is_chief(placement):
    return placement.cluster is None or placement.cluster.is_chief


def place(options, trains):
    """The Placement of this process for `options` (engine/options.py RunOptions).

    trains: the run trains (a cluster's strategy and the matmul peak are made
    only then).
    """
    cluster = multi_worker.join_cluster(options)
    strategy = None
    if cluster is not None:
        console.info("%s: worker %d of %d (%s); %s", cluster.description,
                     cluster.worker_index, cluster.num_workers,
                     "chief" if cluster.is_chief else "not chief",
                     describe_lost_worker_rule(options.step_timeout_seconds))
        if trains:
            # First: it configures the collectives and starts this worker's server.
            strategy = multi_worker.make_multi_worker_strategy(options.use_gpu)
            training.default_sigterm()
    runtime = multi_worker.cluster_runtime(options, cluster)
    peak = distribution.matmul_peak(options, runtime) if trains else None
    return Placement(runtime, cluster, strategy, peak)


def describe_lost_worker_rule(step_timeout_seconds):
    """What ends a worker whose cluster lost another (training.lost_worker_timeout)."""
    if step_timeout_seconds == 0:
        return "waits for a lost worker forever (--step_timeout_seconds=0)"
    rule = ("%d s without a step (--step_timeout_seconds)" % step_timeout_seconds
            if step_timeout_seconds else "no step in " + training.LOST_WORKER_RULE)
    return "a lost worker ends this one after " + rule


def num_replicas(placement):
    """Replicas that train together: this process's devices times the workers."""
    workers = placement.cluster.num_workers if placement.cluster else 1
    return len(placement.runtime.devices) * workers


def claim(output_dir, placement):
    """Holds output_dir for this run (the chief holds it for a cluster, whose
    workers share it); call once every check has passed."""
    if is_chief(placement):
        run_folder.lock_output_dir(output_dir)


def describe(options, placement):
    """The one line saying where the run trains and where its output goes."""
    runtime, cluster = placement.runtime, placement.cluster
    return ("%s; devices %s, %s%s; output in %s (watch it with tensorboard --logdir %s)"
            % (cluster.description if cluster else "one process", ",".join(runtime.devices),
               distribution.describe_precisions(options, runtime),
               distribution.describe_peak(placement.matmul_peak), options.output_dir,
               options.output_dir))


def model_fn_settings(options, placement):
    """The model_fn_builder.build_model_fn arguments every task takes from its run
    options and placement: precisions, optimizer, the training log (the chief's)
    and, on a cluster, the stop agreement and the lost-worker timeout."""
    runtime, chief = placement.runtime, is_chief(placement)
    return dict(learning_rate=options.learning_rate, precision=runtime.precision,
                graph_rewrite=runtime.graph_rewrite,
                inference_precision=runtime.inference_precision,
                optimizer=options.optimizer, weight_decay_rate=options.weight_decay_rate,
                clip_norm=options.clip_norm,
                log_every_n_steps=options.log_every_n_steps,
                output_dir=options.output_dir if chief else None, show_progress=chief,
                step_timeout_seconds=options.step_timeout_seconds,
                on_cluster=placement.cluster is not None,
                matmul_peak_flops=placement.matmul_peak, use_xla=options.use_xla,
                max_seq_length=options.max_seq_length)


def make_estimator(options, placement, model_fn):
    """An Estimator over this process's devices in options.output_dir."""
    return distribution.make_estimator(options, placement.runtime, model_fn)


def train_to(estimator, options, placement, model_fn, input_fn, max_steps,
             call_at_steps=(), callback=None):
    """Trains up to `max_steps`: with `estimator` in one process (a signal saves the
    step and raises errors.Stopped), or with every worker of the cluster.

    In one process, `callback(step)` runs in the training session after the
    checkpoint of each of `call_at_steps` (see training.train); a cluster takes
    none (its workers would have to save those steps together)."""
    runtime = placement.runtime
    if placement.cluster is None:
        if runtime.graph_rewrite:
            estimator = tf_estimator.Estimator(model_fn=model_fn, config=(
                distribution.training_run_config(estimator.config, runtime)))
        training.train(estimator, input_fn, max_steps, call_at_steps=call_at_steps,
                       callback=callback)
    else:
        if callback is not None:
            raise ValueError("a cluster's training takes no callback at steps")
        multi_worker.train_on_cluster(options, placement.cluster, placement.strategy,
                                      runtime, model_fn, input_fn, max_steps)


def global_step(checkpoint):
    """The global_step stored in a checkpoint."""
    return int(tf.train.load_checkpoint(checkpoint).get_tensor("global_step"))
