"""Where and how the Estimator runs in one process: devices, replicas, precision, peak.

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
import os
import time

import tensorflow as tf

from bert_toolkit import console, system
from bert_toolkit.errors import InputError
from bert_toolkit.estimator_compat import tf_estimator
from bert_toolkit.model import modeling

tf1 = tf.compat.v1

Runtime = collections.namedtuple("Runtime", [
    "devices", "precision", "inference_precision", "graph_rewrite"], defaults=[False])
"""devices: this process's replica devices; precision / inference_precision:
"fp32", "fp16" or "bf16" for training and for eval, predict and export;
graph_rewrite: training applies `precision` by TensorFlow's mixed precision pass
(see with_mixed_precision_rewrite), the model being built in fp32."""


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
        return "bf16" if system.cpu_supports_bf16() else "fp32"
    if precision not in ("fp32", "fp16", "bf16"):
        raise InputError("--precision must be fp32, fp16, bf16 or auto, got %r" % precision)
    return precision


def resolve_runtime(options):
    """The Runtime of engine/options.py's RunOptions; InputError if it cannot exist here."""
    devices = replica_devices(options.use_gpu, options.num_gpu_cores, options.num_cpu_replicas)
    precision = resolve_precision(options.training_precision, use_gpu=options.use_gpu)
    inference_precision = resolve_precision(options.inference_precision,
                                            use_gpu=options.use_gpu)
    if precision == "fp16" and not options.use_gpu:
        console.warning("fp16 on a CPU is very slow (no fp16 matrix units); "
                            "bf16 or fp32 is the better choice here")
    graph_rewrite = options.mixed_precision == "graph_rewrite" and precision != "fp32"
    if graph_rewrite and (precision == "fp16") != bool(options.use_gpu):
        raise InputError("--mixed_precision=graph_rewrite with --precision=%s%s: TensorFlow's "
                         "pass rewrites to fp16 on GPUs and to bf16 on CPUs only; use "
                         "--mixed_precision=casts" % (
                             precision, " (resolved from auto)" if options.precision == "auto"
                             else "", ))
    return Runtime(devices, precision, inference_precision, graph_rewrite)


def peak_matmul_size(threads):
    """The side of the square matmul the CPU peak is measured with: 2048 for one
    thread, growing with the cube root of the threads (2560 for 2, 4096 from 8
    on), so each thread gets the same 17 GFLOP up to 8 threads. Smaller products
    read low (1280^3 in bf16 reads 8% under 2048^3 on a 2-core Zen 4, whose run
    is 11 ms); a fixed large one would take seconds of a small machine at every
    start."""
    return min(4096, int(round(2048 * threads ** (1.0 / 3) / 256.0)) * 256)


def tensorflow_cpu_threads():
    """The threads TensorFlow's CPU ops run on: TF_NUM_INTRAOP_THREADS if set,
    else one per core this process may use."""
    cores = system.available_cores()
    try:
        threads = int(os.environ.get("TF_NUM_INTRAOP_THREADS", "0"))
    except ValueError:
        threads = 0
    return min(threads, cores) if threads > 0 else cores


def measure_matmul_peak(device, precision, size=None, repeats=3):
    """FLOP/s of the best of `repeats` size^3 matmuls on `device` in `precision`:
    the peak MFU is measured against. `size` defaults to 2048 on a GPU and to
    peak_matmul_size of TensorFlow's threads on a CPU (a tenth to a third of a
    second each). The operands are stored in `precision`, so no cast is timed.

    On a CPU the time is this process's CPU time spread over the cores it may
    use, not the wall time: on a machine shared with other work the wall time
    measures the share of the cores we got, and a peak taken that way would be
    low and the MFU above 100%.
    """
    on_cpu = "cpu" in device.lower()
    if size is None:
        size = peak_matmul_size(tensorflow_cpu_threads()) if on_cpu else 2048
    dtype = modeling.get_compute_dtype(precision)
    graph = tf.Graph()
    with graph.as_default(), tf.device(device):
        a = tf.Variable(tf.cast(tf1.random_uniform([size, size]), dtype))
        b = tf.Variable(tf.cast(tf1.random_uniform([size, size]), dtype))
        # A scalar fetch: the timing is the matmul's, not a copy of its product.
        product = tf.reduce_sum(tf.matmul(a, b))
        init = tf1.global_variables_initializer()
    if on_cpu:
        cores = system.available_cores()
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
    return tf_estimator.Estimator(model_fn=model_fn, config=run_config)


@contextlib.contextmanager
def without_tf_config():
    """Hides TF_CONFIG, so a RunConfig made inside describes this process alone."""
    saved = os.environ.pop("TF_CONFIG", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["TF_CONFIG"] = saved


def make_session_config(devices, use_xla=False):
    """Session options: enough CPU devices for CPU replicas, XLA on request."""
    num_cpu = sum(1 for d in devices if d.startswith("/cpu")) or 1
    config = tf1.ConfigProto(device_count={"CPU": num_cpu}, allow_soft_placement=True)
    config.gpu_options.allow_growth = True
    if use_xla:
        config.graph_options.optimizer_options.global_jit_level = tf1.OptimizerOptions.ON_1
    return config


def with_mixed_precision_rewrite(session_config, precision):
    """A copy of `session_config` with TensorFlow's automatic mixed precision pass on
    for `precision`: "fp16" (the CUDA pass) or "bf16" (oneDNN's CPU pass).

    Grappler rewrites the fp32 graph when a session starts: matmuls and the ops
    between them run in the low precision, ops on its deny list (softmax, the
    reductions of layer norm and of the losses) stay fp32, variables stay fp32.
    """
    config = tf1.ConfigProto()
    config.CopyFrom(session_config)
    rewrite = config.graph_options.rewrite_options
    on = type(rewrite).ON
    if precision == "fp16":
        rewrite.auto_mixed_precision = on
    elif precision == "bf16":
        rewrite.auto_mixed_precision_onednn_bfloat16 = on
    return config


def training_run_config(run_config, runtime):
    """`run_config`, or for a runtime with graph_rewrite a copy whose sessions run
    the mixed precision pass (for training only: evaluation keeps the plain config
    and --inference_precision)."""
    if not runtime.graph_rewrite:
        return run_config
    return run_config.replace(session_config=with_mixed_precision_rewrite(
        run_config.session_config, runtime.precision))


def make_run_config(output_dir, devices, use_xla=False, save_checkpoints_steps=1000,
                    keep_checkpoint_max=5, seed=None):
    """A RunConfig that distributes training AND evaluation over `devices`."""
    strategy = make_strategy(devices)
    return run_config(output_dir, devices, use_xla, save_checkpoints_steps,
                       keep_checkpoint_max, seed, save_summary_steps=0,
                       train_distribute=strategy, eval_distribute=strategy)


def run_config(output_dir, devices, use_xla, save_checkpoints_steps, keep_checkpoint_max,
                seed, **distribution_options):
    return tf_estimator.RunConfig(
        model_dir=output_dir,
        tf_random_seed=seed,
        session_config=make_session_config(devices, use_xla),
        save_checkpoints_steps=save_checkpoints_steps,
        keep_checkpoint_max=keep_checkpoint_max,
        # Our own hook logs loss and examples/s; the Estimator's would log the
        # replica-summed loss and steps/s in micro-batches.
        log_step_count_steps=None,
        **distribution_options)
