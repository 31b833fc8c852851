"""Several workers (nodes) training one model: TF_CONFIG, Slurm, one address,
MultiWorkerMirroredStrategy.

Every worker runs the same command; --cluster says where the cluster comes
from (TF_CONFIG as Kubeflow's TFJob sets it, the Slurm job step, or
tcp://HOST:PORT where the workers meet: rendezvous.py), and the workers train
synchronously with all-reduce. The chief writes checkpoints, summaries and
results into the shared output_dir.
"""

import collections
import json
import os
import shutil

import tensorflow as tf

from bert_toolkit.engine import distribution, rendezvous, training
from bert_toolkit.errors import InputError
from bert_toolkit.estimator_compat import tf_estimator


def join_cluster(options):
    """Resolves --cluster (see resolve_cluster), points TF_CONFIG at the result for
    TensorFlow to read, and returns this process's ClusterTask (None: one
    process); its `description` says what was picked."""
    gpus_per_task = options.num_gpu_cores if options.use_gpu else 0
    text, description = resolve_cluster(
        options.cluster, gpus_per_task, options.cluster_port_base,
        world_size=options.cluster_world_size, rank=options.cluster_rank,
        timeout_seconds=options.cluster_timeout_seconds)
    cluster = parse_tf_config(text)
    if cluster is None or cluster.num_workers < 2:
        os.environ.pop("TF_CONFIG", None)  # a one-task cluster is a single process
        return None
    os.environ["TF_CONFIG"] = text
    return cluster._replace(description=description)


ClusterTask = collections.namedtuple("ClusterTask", [
    "task_type", "task_index", "num_workers", "worker_index", "is_chief", "description"],
    defaults=("cluster: from TF_CONFIG",))
"""This process's place in a TF_CONFIG cluster.

num_workers counts the tasks that train (chief and workers); worker_index is
this task's position among them (the chief first), which is also its input
pipeline id under MultiWorkerMirroredStrategy.
"""


def parse_tf_config(text, source="TF_CONFIG"):
    """Validates a TF_CONFIG JSON string; returns a ClusterTask, or None if empty.

    Raises InputError (one line naming `source`) for text that is not JSON, a
    cluster without chief/worker tasks, or a task that is not in the cluster.
    Parameter servers and evaluator tasks are not supported (synchronous
    all-reduce training only).
    """
    if text is None or not text.strip():
        return None
    try:
        config = json.loads(text)
    except ValueError as e:
        raise InputError("%s is not valid JSON (%s): %r" % (source, e, text[:80]))
    if not isinstance(config, dict):
        raise InputError("%s: expected a JSON object with \"cluster\" and \"task\", got %r"
                         % (source, text[:80]))
    cluster = config.get("cluster") or {}
    task = config.get("task") or {}
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise InputError("%s: \"cluster\" and \"task\" must be JSON objects" % source)
    if not cluster:
        return None  # no cluster: a single local process, as TensorFlow treats it
    for job, addresses in cluster.items():
        if not (isinstance(addresses, list) and addresses
                and all(isinstance(a, str) and a for a in addresses)):
            raise InputError("%s: cluster job %r must be a non-empty list of host:port "
                             "strings" % (source, job))
    unsupported = sorted(set(cluster) - {"chief", "worker"})
    if unsupported:
        raise InputError("%s: cluster job(s) %s are not supported: synchronous training "
                         "uses only \"chief\" and \"worker\" tasks" % (source, unsupported))
    if len(cluster.get("chief", [])) > 1:
        raise InputError("%s: at most one chief task, got %d" % (source, len(cluster["chief"])))
    task_type, task_index = task.get("type"), task.get("index", 0)
    if task_type not in cluster:
        raise InputError("%s: task type %r is not a job of the cluster (jobs: %s)"
                         % (source, task_type, ", ".join(sorted(cluster))))
    if isinstance(task_index, bool) or not isinstance(task_index, int) \
            or not 0 <= task_index < len(cluster[task_type]):
        raise InputError("%s: task %s index %r is not in the cluster (%s has %d task(s))"
                         % (source, task_type, task_index, task_type,
                            len(cluster[task_type])))
    has_chief = "chief" in cluster
    num_workers = len(cluster.get("chief", [])) + len(cluster.get("worker", []))
    worker_index = task_index + (1 if has_chief and task_type == "worker" else 0)
    is_chief = task_type == "chief" or (not has_chief and task_index == 0)
    return ClusterTask(task_type, task_index, num_workers, worker_index, is_chief)


CLUSTER_MODES = ("auto", "tf_config", "slurm", "local")


def resolve_cluster(mode, gpus_per_task=0, port_base=8888, world_size=0, rank=0,
                    timeout_seconds=300):
    """(TF_CONFIG text or None, a line saying what was picked) for --cluster=`mode`.

    tf_config: the environment's TF_CONFIG (Kubeflow's TFJob sets it). slurm:
    the cluster of the Slurm job step this process is a task of, through
    TensorFlow's SlurmClusterResolver (hosts from SLURM_STEP_NODELIST, tasks
    per node, this task's SLURM_PROCID; task i of a node listens on
    port_base + i). tcp://HOST:PORT: worker `rank` of `world_size`, which meet
    there (rendezvous.py; blocks until all have, at most `timeout_seconds`).
    local: one process, TF_CONFIG ignored. auto: TF_CONFIG if set, else slurm
    in a step of several tasks, else local.
    gpus_per_task: GPUs each task uses (0: CPU workers). Reads os.environ (as
    the resolver does).
    """
    if rendezvous.is_address(mode):
        if world_size < 2:
            return None, "cluster: %s with one worker (one process)" % mode
        return (rendezvous.tf_config(mode, world_size, rank, timeout_seconds),
                rendezvous.describe(mode))
    environ = os.environ
    if mode == "auto":
        tasks = environ.get("SLURM_STEP_NUM_TASKS") or environ.get("SLURM_NTASKS") or "1"
        mode = ("tf_config" if parse_tf_config(environ.get("TF_CONFIG")) else
                "slurm" if environ.get("SLURM_JOB_ID") and tasks.isdigit() and int(tasks) > 1
                else "local")
    if mode == "local":
        return None, "cluster: local (one process)"
    if mode == "tf_config":
        text = environ.get("TF_CONFIG")
        if parse_tf_config(text) is None:
            raise InputError("--cluster=tf_config: TF_CONFIG is not set or names no cluster")
        return text, "cluster: from TF_CONFIG"
    if mode != "slurm":
        raise InputError("--cluster=%s: expected one of %s, or tcp://HOST:PORT"
                         % (mode, ", ".join(CLUSTER_MODES)))
    return _slurm_tf_config(environ, gpus_per_task, port_base)


def _slurm_tf_config(environ, gpus_per_task, port_base):
    """The TF_CONFIG of this Slurm task (see resolve_cluster)."""
    from tensorflow.python.distribute.cluster_resolver import slurm_cluster_resolver
    missing = [name for name in ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS",
                                 "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE")
               if not environ.get(name)]
    if missing:
        raise InputError("--cluster=slurm: %s not set; start every task with srun inside "
                         "the job" % ", ".join(missing))
    tasks_per_node = slurm_cluster_resolver.expand_tasks_per_node(
        environ["SLURM_STEP_TASKS_PER_NODE"])
    # The resolver hands out GPUs per task; CPU workers pretend one each, so
    # that every task gets its place (and no CUDA_VISIBLE_DEVICES is set).
    per_task = gpus_per_task or 1
    try:
        resolver = slurm_cluster_resolver.SlurmClusterResolver(
            port_base=port_base, gpus_per_node=max(tasks_per_node) * per_task,
            gpus_per_task=per_task, auto_set_gpu=bool(gpus_per_task))
        cluster = resolver.cluster_spec().as_dict()
        task_type, task_id = resolver.get_task_info()
    except (RuntimeError, ValueError) as e:
        raise InputError("--cluster=slurm: cannot read the job step from the Slurm "
                         "environment (%s)" % e)
    text = json.dumps({"cluster": cluster, "task": {"type": task_type, "index": task_id}})
    return text, "cluster: Slurm, task %d of %d (%s)" % (
        task_id, sum(len(v) for v in cluster.values()), ", ".join(cluster["worker"]))


def cluster_runtime(options, cluster):
    """resolve_runtime for this process of `cluster` (None: one process): a CPU
    worker runs one replica, and a GPU worker shows the strategy only the GPUs
    asked for (MultiWorkerMirroredStrategy mirrors over every visible one)."""
    if cluster is not None and not options.use_gpu and options.num_cpu_replicas > 1:
        raise InputError("--num_cpu_replicas=%d: in a cluster each CPU worker runs one "
                         "replica" % options.num_cpu_replicas)
    runtime = distribution.resolve_runtime(options)
    if cluster is not None and options.use_gpu:
        gpus = tf.config.list_physical_devices("GPU")
        tf.config.set_visible_devices(gpus[:options.num_gpu_cores], "GPU")
    return runtime


def train_on_cluster(options, cluster, strategy, runtime, model_fn, input_fn, max_steps):
    """Trains with every worker of the TF_CONFIG cluster, this process being
    `cluster`'s task; only the chief's checkpoints land in output_dir.

    A stop signal on any worker stops all of them after the same step, which they
    save (training.StopOnSignalHook); each then raises errors.Stopped."""
    run_config = distribution.training_run_config(make_multi_worker_run_config(
        options.output_dir, strategy, runtime.devices, use_xla=options.use_xla,
        save_checkpoints_steps=options.save_checkpoints_steps,
        keep_checkpoint_max=options.keep_checkpoint_max, seed=options.seed), runtime)
    estimator = tf_estimator.Estimator(model_fn=model_fn, config=run_config)
    stop_hook = training.StopOnSignalHook()
    # The throwaway checkpoints a worker other than the chief has to write (see
    # make_multi_worker_run_config).
    scratch = os.path.join(options.output_dir, "tmp_%s_%d" % (cluster.task_type,
                                                              cluster.task_index))
    try:
        # Without an "evaluator" task, train_and_evaluate only trains: every worker
        # runs its replicas under the distribute coordinator. The EvalSpec is
        # required by the API but never used.
        tf_estimator.train_and_evaluate(
            estimator, tf_estimator.TrainSpec(input_fn, max_steps=max_steps,
                                              hooks=[stop_hook]),
            tf_estimator.EvalSpec(input_fn, steps=1))
        stop_hook.restore()
        # Every worker saved the step they stopped at; the chief's copy is the one.
        saved = tf.train.latest_checkpoint(options.output_dir if cluster.is_chief
                                           else scratch)
        training.check_stopped(stop_hook, saved, max_steps, where=os.path.join(
            options.output_dir, os.path.basename(saved or "")))
    finally:
        stop_hook.restore()
        if not cluster.is_chief:
            shutil.rmtree(scratch, ignore_errors=True)


def make_multi_worker_strategy(use_gpu):
    """MultiWorkerMirroredStrategy configured from TF_CONFIG.

    Each worker mirrors over all the GPUs it sees (or its CPU); gradients are
    all-reduced across workers with NCCL on GPUs, ring collectives otherwise.
    """
    implementation = (tf.distribute.experimental.CommunicationImplementation.NCCL if use_gpu
                      else tf.distribute.experimental.CommunicationImplementation.RING)
    return tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=implementation))


def make_multi_worker_run_config(output_dir, strategy, devices, use_xla=False,
                                 save_checkpoints_steps=1000, keep_checkpoint_max=5,
                                 seed=None):
    """A RunConfig for tf_estimator.train_and_evaluate over the TF_CONFIG cluster.

    RunConfig reads TF_CONFIG itself; with a cluster and this train_distribute,
    train_and_evaluate runs the distribute coordinator in independent-worker
    mode: every worker runs the same graph and the chief writes the
    checkpoints into output_dir. (Workers that are not the chief save
    throwaway copies under output_dir/tmp_worker_<i>, because a save reads
    cross-worker values and so needs every worker to take part.)

    save_summary_steps must be positive: TensorFlow 2.15's
    MonitoredTrainingSession only adds the checkpoint saver of a multi-worker
    run inside its summary branch, so 0 would silently save no checkpoint.
    """
    return distribution.run_config(
        output_dir, devices, use_xla, save_checkpoints_steps, keep_checkpoint_max, seed,
        save_summary_steps=save_checkpoints_steps, train_distribute=strategy)
