"""Where and how the Estimator runs: devices, replicas, precision, and the step plan.

Facts this module is built on (TensorFlow 2.15.1):

- Under `MirroredStrategy` the Estimator calls `input_fn` for the batch of ONE
  replica and calls `model_fn` once per replica. So `train_batch_size` is per
  replica, and the global batch of one optimizer update is
  per_replica_batch_size * num_replicas * accumulation_steps.
- Several replicas on one CPU need both the strategy's CPU device list and a
  session config with that many CPU devices; otherwise replica 1 silently runs
  on CPU:0.
- GPUs all-reduce with NCCL; CPU replicas with a plain copy to one device.
"""

import collections
import contextlib
import json
import math
import os
import shutil
import time

import tensorflow as tf

import console
import machine
import modeling
from errors import InputError

tf1 = tf.compat.v1

Runtime = collections.namedtuple("Runtime", [
    "devices", "precision", "inference_precision"])
"""devices: this process's replica devices; precision / inference_precision:
"fp32", "fp16" or "bf16" for training and for eval, predict and export."""

TrainingPlan = collections.namedtuple("TrainingPlan", [
    "num_examples", "num_train_epochs", "num_replicas", "per_replica_batch_size",
    "accumulation_steps", "global_batch_size", "num_train_steps", "num_warmup_steps"])
"""How many optimizer updates a run makes; every field is a plain number."""


def plan_training(num_examples, num_train_epochs, per_replica_batch_size, num_replicas,
                  accumulation_steps, warmup_proportion):
    """Optimizer updates from the GLOBAL batch (earlier forks divided by one GPU's batch).

    One update consumes per_replica_batch_size * num_replicas * accumulation_steps
    examples, so N replicas make N times fewer updates for the same epochs. On
    one device without accumulation the steps are Google's exact arithmetic,
    int(num_examples / train_batch_size * num_train_epochs) (at least 1), so a
    command of the original trains the same number of steps; otherwise they are
    rounded up, so every example of the last partial global batch is seen.
    Warmup is int(num_train_steps * warmup_proportion), as in the original.
    """
    global_batch_size = per_replica_batch_size * num_replicas * accumulation_steps
    if global_batch_size == per_replica_batch_size:
        num_train_steps = int(num_examples / float(global_batch_size) * num_train_epochs)
    else:
        num_train_steps = int(math.ceil(num_examples * num_train_epochs
                                        / float(global_batch_size)))
    num_train_steps = max(1, num_train_steps)
    num_warmup_steps = int(num_train_steps * warmup_proportion)
    return TrainingPlan(num_examples, num_train_epochs, num_replicas, per_replica_batch_size,
                        accumulation_steps, global_batch_size, num_train_steps,
                        num_warmup_steps)


def describe_plan(plan):
    """One log line with every number of the plan."""
    return ("training plan: %d replicas x %d examples per replica x %d accumulation steps "
            "= global batch %d; %d examples x %g epochs = %d optimizer steps (%d warmup)"
            % (plan.num_replicas, plan.per_replica_batch_size, plan.accumulation_steps,
               plan.global_batch_size, plan.num_examples, plan.num_train_epochs,
               plan.num_train_steps, plan.num_warmup_steps))


def visible_gpu_count():
    return len(tf.config.list_physical_devices("GPU"))


def replica_devices(use_gpu, num_gpu_cores, num_cpu_replicas):
    """The device list to mirror over; raises InputError if it cannot exist here."""
    if use_gpu:
        available = visible_gpu_count()
        if num_gpu_cores > available:
            raise InputError("--num_gpu_cores=%d but %d GPU(s) are visible to TensorFlow "
                             "(check CUDA_VISIBLE_DEVICES and that tensorflow[and-cuda] "
                             "is installed)" % (num_gpu_cores, available))
        return ["/gpu:%d" % i for i in range(num_gpu_cores)]
    return ["/cpu:%d" % i for i in range(num_cpu_replicas)]


def make_strategy(devices):
    """None for one device (plain Estimator), else a MirroredStrategy over `devices`."""
    if len(devices) == 1:
        return None
    if devices[0].startswith("/gpu"):
        cross_device_ops = tf.distribute.NcclAllReduce()
    else:
        cross_device_ops = tf.distribute.ReductionToOneDevice(reduce_to_device="/cpu:0")
    return tf.distribute.MirroredStrategy(devices, cross_device_ops=cross_device_ops)


def cpu_supports_bf16():
    """True if this x86 CPU has bf16 matrix instructions (AMX or AVX-512 BF16)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            flags = next((line for line in cpuinfo if line.startswith("flags")), "")
    except OSError:
        return False
    return any(flag in flags.split() for flag in ("amx_bf16", "avx512_bf16"))


def gpu_supports_bf16():
    """True if every visible GPU is Ampere (compute capability 8.0) or newer."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return False
    capabilities = [tf.config.experimental.get_device_details(g).get("compute_capability")
                    for g in gpus]
    return all(c is not None and c >= (8, 0) for c in capabilities)


def resolve_precision(precision, use_gpu=False):
    """Turns a precision flag's value into fp32, fp16 or bf16.

    "auto" picks the fastest precision that needs no loss scaling where the
    hardware has it: bf16 on Ampere+ GPUs and on CPUs with bf16 matrix units,
    fp16 on older GPUs, fp32 otherwise.
    """
    if precision == "auto":
        if use_gpu:
            return "bf16" if gpu_supports_bf16() else "fp16"
        return "bf16" if cpu_supports_bf16() else "fp32"
    if precision not in ("fp32", "fp16", "bf16"):
        raise InputError("--precision must be fp32, fp16, bf16 or auto, got %r" % precision)
    return precision


def resolve_runtime(options):
    """The Runtime of run_options.RunOptions; InputError if it cannot exist here."""
    devices = replica_devices(options.use_gpu, options.num_gpu_cores, options.num_cpu_replicas)
    precision = resolve_precision(options.training_precision, use_gpu=options.use_gpu)
    inference_precision = resolve_precision(options.inference_precision,
                                            use_gpu=options.use_gpu)
    if precision == "fp16" and not options.use_gpu:
        console.warning("fp16 on a CPU is very slow (no fp16 matrix units); "
                            "bf16 or fp32 is the better choice here")
    return Runtime(devices, precision, inference_precision)


def measure_matmul_peak(device, precision, size=2048, repeats=3):
    """FLOP/s of the best of `repeats` size^3 matmuls on `device` in `precision`:
    the peak MFU is measured against. About a second on a CPU.

    On a CPU the time is this process's CPU time spread over the cores it may
    use, not the wall time: on a machine shared with other work the wall time
    measures the share of the cores we got, and a peak taken that way would be
    low and the MFU above 100%.
    """
    dtype = modeling.get_compute_dtype(precision)
    graph = tf.Graph()
    with graph.as_default(), tf.device(device):
        a = tf.Variable(tf1.random_uniform([size, size], dtype=tf.float32))
        b = tf.Variable(tf1.random_uniform([size, size], dtype=tf.float32))
        a_cast, b_cast = tf.cast(a, dtype), tf.cast(b, dtype)
        # A scalar fetch: the timing is the matmul's, not a copy of its product.
        product = tf.reduce_sum(tf.cast(tf.matmul(a_cast, b_cast), tf.float32))
        init = tf1.global_variables_initializer()
    on_cpu = "cpu" in device.lower()
    if on_cpu:
        cores = machine.available_cores()
        clock = lambda: time.process_time() / cores  # noqa: E731
    else:
        clock = time.perf_counter
    best = float("inf")
    with tf1.Session(graph=graph) as session:
        session.run(init)
        session.run(product)
        for _ in range(repeats):
            started = clock()
            session.run(product)
            best = min(best, clock() - started)
    return 2.0 * size ** 3 / best


def matmul_peak(options, runtime):
    """FLOP/s for the MFU of the training log: --matmul_peak_tflops if given,
    else measured on the first training device; None for fp16 on a CPU (no fp16
    units: measuring would take minutes, and nobody trains that way)."""
    if options.matmul_peak_tflops:
        return options.matmul_peak_tflops * 1e12
    if runtime.precision == "fp16" and not options.use_gpu:
        return None
    return measure_matmul_peak(runtime.devices[0], runtime.precision)


def describe_peak(peak):
    """', matmul peak 0.41 TFLOP/s' for the devices line ('' without one)."""
    return ", matmul peak %.3g TFLOP/s" % (peak / 1e12) if peak else ""


def make_estimator(options, runtime, model_fn):
    """An Estimator in options.output_dir over the runtime's devices (one process,
    whatever TF_CONFIG says: RunConfig would otherwise read a cluster from it)."""
    with without_tf_config():
        run_config = make_run_config(
            options.output_dir, runtime.devices, use_xla=options.use_xla,
            save_checkpoints_steps=options.save_checkpoints_steps,
            keep_checkpoint_max=options.keep_checkpoint_max, seed=options.seed)
    return tf.estimator.Estimator(model_fn=model_fn, config=run_config)


@contextlib.contextmanager
def without_tf_config():
    """Hides TF_CONFIG, so a RunConfig made inside describes this process alone."""
    saved = os.environ.pop("TF_CONFIG", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["TF_CONFIG"] = saved


def join_cluster(options):
    """Resolves --cluster (see resolve_cluster), points TF_CONFIG at the result for
    TensorFlow to read, and returns this process's ClusterTask (None: one
    process); its `description` says what was picked."""
    gpus_per_task = options.num_gpu_cores if options.use_gpu else 0
    text, description = resolve_cluster(options.cluster, gpus_per_task,
                                        options.cluster_port_base)
    cluster = parse_tf_config(text)
    if cluster is None or cluster.num_workers < 2:
        os.environ.pop("TF_CONFIG", None)  # a one-task cluster is a single process
        return None
    os.environ["TF_CONFIG"] = text
    return cluster._replace(description=description)


def make_session_config(devices, use_xla=False):
    """Session options: enough CPU devices for CPU replicas, XLA on request."""
    num_cpu = sum(1 for d in devices if d.startswith("/cpu")) or 1
    config = tf1.ConfigProto(device_count={"CPU": num_cpu}, allow_soft_placement=True)
    config.gpu_options.allow_growth = True
    if use_xla:
        config.graph_options.optimizer_options.global_jit_level = tf1.OptimizerOptions.ON_1
    return config


def make_run_config(output_dir, devices, use_xla=False, save_checkpoints_steps=1000,
                    keep_checkpoint_max=5, seed=None):
    """A RunConfig that distributes training AND evaluation over `devices`."""
    strategy = make_strategy(devices)
    return _run_config(output_dir, devices, use_xla, save_checkpoints_steps,
                       keep_checkpoint_max, seed, save_summary_steps=0,
                       train_distribute=strategy, eval_distribute=strategy)


def _run_config(output_dir, devices, use_xla, save_checkpoints_steps, keep_checkpoint_max,
                seed, **distribution_options):
    return tf.estimator.RunConfig(
        model_dir=output_dir,
        tf_random_seed=seed,
        session_config=make_session_config(devices, use_xla),
        save_checkpoints_steps=save_checkpoints_steps,
        keep_checkpoint_max=keep_checkpoint_max,
        # Our own hook logs loss and examples/s; the Estimator's would log the
        # replica-summed loss and steps/s in micro-batches.
        log_step_count_steps=None,
        **distribution_options)



# -- several workers (nodes) ----------------------------------------------------------

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


def resolve_cluster(mode, gpus_per_task=0, port_base=8888):
    """(TF_CONFIG text or None, a line saying what was picked) for --cluster=`mode`.

    tf_config: the environment's TF_CONFIG (Kubeflow's TFJob sets it). slurm:
    the cluster of the Slurm job step this process is a task of, through
    TensorFlow's SlurmClusterResolver (hosts from SLURM_STEP_NODELIST, tasks
    per node, this task's SLURM_PROCID; task i of a node listens on
    port_base + i). local: one process, TF_CONFIG ignored. auto: TF_CONFIG if
    set, else slurm in a step of several tasks, else local.
    gpus_per_task: GPUs each task uses (0: CPU workers). Reads os.environ (as
    the resolver does).
    """
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
        raise InputError("--cluster=%s: expected one of %s" % (mode, ", ".join(CLUSTER_MODES)))
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
    runtime = resolve_runtime(options)
    if cluster is not None and options.use_gpu:
        gpus = tf.config.list_physical_devices("GPU")
        tf.config.set_visible_devices(gpus[:options.num_gpu_cores], "GPU")
    return runtime


def train_on_cluster(options, cluster, strategy, devices, model_fn, input_fn, max_steps):
    """Trains with every worker of the TF_CONFIG cluster, this process being
    `cluster`'s task; only the chief's checkpoints land in output_dir."""
    run_config = make_multi_worker_run_config(
        options.output_dir, strategy, devices, use_xla=options.use_xla,
        save_checkpoints_steps=options.save_checkpoints_steps,
        keep_checkpoint_max=options.keep_checkpoint_max, seed=options.seed)
    estimator = tf.estimator.Estimator(model_fn=model_fn, config=run_config)
    # Without an "evaluator" task, train_and_evaluate only trains: every worker
    # runs its replicas under the distribute coordinator. The EvalSpec is
    # required by the API but never used.
    tf.estimator.train_and_evaluate(
        estimator, tf.estimator.TrainSpec(input_fn, max_steps=max_steps),
        tf.estimator.EvalSpec(input_fn, steps=1))
    if not cluster.is_chief:
        # The throwaway checkpoints this worker had to write (see
        # make_multi_worker_run_config).
        shutil.rmtree(os.path.join(options.output_dir, "tmp_%s_%d" % (
            cluster.task_type, cluster.task_index)), ignore_errors=True)


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
    """A RunConfig for tf.estimator.train_and_evaluate over the TF_CONFIG cluster.

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
    return _run_config(output_dir, devices, use_xla, save_checkpoints_steps,
                       keep_checkpoint_max, seed, save_summary_steps=save_checkpoints_steps,
                       train_distribute=strategy)


def plan_steps(num_train_steps, num_warmup_steps, per_replica_batch_size, num_replicas,
               accumulation_steps):
    """A TrainingPlan given in optimizer steps (pretraining) rather than epochs.

    num_examples is what the steps consume: num_train_steps * global batch.
    """
    global_batch_size = per_replica_batch_size * num_replicas * accumulation_steps
    return TrainingPlan(num_train_steps * global_batch_size, None, num_replicas,
                        per_replica_batch_size, accumulation_steps, global_batch_size,
                        num_train_steps, num_warmup_steps)


def describe_step_plan(plan):
    """One log line with every number of a plan made by `plan_steps`."""
    return ("training plan: %d replicas x %d examples per replica x %d accumulation steps "
            "= global batch %d; %d optimizer steps (%d warmup) = %d examples"
            % (plan.num_replicas, plan.per_replica_batch_size, plan.accumulation_steps,
               plan.global_batch_size, plan.num_train_steps, plan.num_warmup_steps,
               plan.num_examples))
