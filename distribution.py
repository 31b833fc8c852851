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
import math

import tensorflow as tf

from errors import InputError

tf1 = tf.compat.v1

TrainingPlan = collections.namedtuple("TrainingPlan", [
    "num_examples", "num_train_epochs", "num_replicas", "per_replica_batch_size",
    "accumulation_steps", "global_batch_size", "num_train_steps", "num_warmup_steps"])
"""How many optimizer updates a run makes; every field is a plain number."""


def plan_training(num_examples, num_train_epochs, per_replica_batch_size, num_replicas,
                  accumulation_steps, warmup_proportion):
    """Optimizer updates from the GLOBAL batch (earlier forks divided by one GPU's batch).

    One update consumes per_replica_batch_size * num_replicas * accumulation_steps
    examples, so N replicas make N times fewer updates for the same epochs.
    """
    global_batch_size = per_replica_batch_size * num_replicas * accumulation_steps
    num_train_steps = max(1, int(math.ceil(num_examples * num_train_epochs
                                           / float(global_batch_size))))
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
        if num_gpu_cores < 1:
            raise InputError("--num_gpu_cores must be >= 1, got %d" % num_gpu_cores)
        if num_gpu_cores > available:
            raise InputError("--num_gpu_cores=%d but %d GPU(s) are visible to TensorFlow "
                             "(check CUDA_VISIBLE_DEVICES and that tensorflow[and-cuda] "
                             "is installed)" % (num_gpu_cores, available))
        return ["/gpu:%d" % i for i in range(num_gpu_cores)]
    if num_cpu_replicas < 1:
        raise InputError("--num_cpu_replicas must be >= 1, got %d" % num_cpu_replicas)
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


def resolve_precision(precision, use_fp16=False, use_gpu=False):
    """Turns the precision flag (and the old use_fp16 alias) into fp32, fp16 or bf16.

    "auto" picks the fastest precision that needs no loss scaling where the
    hardware has it: bf16 on Ampere+ GPUs and on CPUs with bf16 matrix units,
    fp16 on older GPUs, fp32 otherwise.
    """
    if use_fp16:
        if precision not in ("fp32", "fp16"):
            raise InputError("--use_fp16 contradicts --precision=%s (use_fp16 is an alias "
                             "of --precision=fp16)" % precision)
        return "fp16"
    if precision == "auto":
        if use_gpu:
            return "bf16" if gpu_supports_bf16() else "fp16"
        return "bf16" if cpu_supports_bf16() else "fp32"
    if precision not in ("fp32", "fp16", "bf16"):
        raise InputError("--precision must be fp32, fp16, bf16 or auto, got %r" % precision)
    return precision


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
    return tf.estimator.RunConfig(
        model_dir=output_dir,
        tf_random_seed=seed,
        session_config=make_session_config(devices, use_xla),
        save_checkpoints_steps=save_checkpoints_steps,
        keep_checkpoint_max=keep_checkpoint_max,
        # Our own hook logs loss and examples/s; the Estimator's would log the
        # replica-summed loss and steps/s in micro-batches.
        log_step_count_steps=None,
        save_summary_steps=0,
        train_distribute=strategy,
        eval_distribute=strategy)

