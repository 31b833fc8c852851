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
- Whether bf16 beats fp32 on a CPU is not in its flags: a VM may list
  avx512_bf16 and hide AMX, and there bf16 matmuls run at 0.6x fp32's (issue 61);
  on the AVX512-BF16 EPYC they run at 1.9x. So `auto` times both (cpu_rates).
"""

import collections
import contextlib
import math
import os
import time

import tensorflow as tf

from bert_toolkit import console, system
from bert_toolkit.errors import InputError
from bert_toolkit.estimator_compat import tf_estimator
from bert_toolkit.model import modeling

tf1 = tf.compat.v1

Runtime = collections.namedtuple("Runtime", [
    "devices", "precision", "inference_precision", "graph_rewrite", "cpu_rates"],
    defaults=[False, None])
"""devices: this process's replica devices; precision / inference_precision:
"fp32", "fp16" or "bf16" for training and for eval, predict and export;
graph_rewrite: training applies `precision` by TensorFlow's mixed precision pass
(see with_mixed_precision_rewrite), the model being built in fp32; cpu_rates:
the CpuRates `auto` or an explicit bf16 on a CPU was checked against (None when
neither was asked, or on GPUs)."""

CpuRates = collections.namedtuple("CpuRates", ["fp32", "bf16", "fresh"])
"""FLOP/s of this CPU's best square matmul in fp32 and in bf16, both None when not
timed (a CPU without bf16 units: emulated bf16 is always slower); fresh: measured
by this process, not read from the cache."""

NOT_TIMED = CpuRates(None, None, False)

# `auto` takes bf16 on a CPU only when its matmuls measure this much faster than
# fp32's, so a near tie keeps fp32 (exact, and no casts). The step is not all
# matmuls, so the margins come from the step's other work (docs/performance.md,
# the AVX512-BF16 EPYC, MiniLM): training's element-wise chains run as bf16 XLA
# kernels and got cheaper in bf16 (a 1.9x matmul made a 1.97x step; a 0.6x one,
# on the Xeon of issue 61, a 0.82x step: break-even near 0.8x), while inference
# adds casts (the same 1.9x matmul made a 1.28x SavedModel: break-even near
# 1.2x). Each margin sits above its break-even.
TRAINING_BF16_MARGIN = 1.1
INFERENCE_BF16_MARGIN = 1.3

# How the CPU rates are measured: rounds of fp32 then bf16, the best of each.
RATE_ROUNDS = 5
RATES_RECORD = "matmul-rates"


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


def choose_cpu_precision(rates, margin):
    """"bf16" when bf16's matmul rate is at least `margin` times fp32's, else "fp32"
    (also when bf16 was not timed). A pure function of the figures."""
    if rates.bf16 is None or rates.fp32 is None:
        return "fp32"
    return "bf16" if rates.bf16 >= margin * rates.fp32 else "fp32"


def resolve_precision(precision, use_gpu=False, rates=None, margin=TRAINING_BF16_MARGIN):
    """Turns a precision flag's value into fp32, fp16 or bf16.

    "auto" on GPUs: bf16 on Ampere and newer, fp16 before (no measurement); on a
    CPU: choose_cpu_precision of `rates` (CpuRates; None: cpu_rates(), measured
    or read from the cache) and `margin` (TRAINING_ or INFERENCE_BF16_MARGIN).
    """
    if precision == "auto":
        if use_gpu:
            return "bf16" if gpu_supports_bf16() else "fp16"
        return choose_cpu_precision(cpu_rates() if rates is None else rates, margin)
    if precision not in ("fp32", "fp16", "bf16"):
        raise InputError("--precision must be fp32, fp16, bf16 or auto, got %r" % precision)
    return precision


def resolve_runtime(options):
    """The Runtime of engine/options.py's RunOptions; InputError if it cannot exist here.

    On a CPU, `auto` and an explicit bf16 (training or inference) need the CPU's
    matmul rates: measured once per machine and TensorFlow (cpu_rates)."""
    devices = replica_devices(options.use_gpu, options.num_gpu_cores, options.num_cpu_replicas)
    asked = (options.training_precision, options.inference_precision)
    rates = None
    if not options.use_gpu and ("auto" in asked or "bf16" in asked):
        rates = cpu_rates()
    precision = resolve_precision(asked[0], options.use_gpu, rates, TRAINING_BF16_MARGIN)
    inference_precision = resolve_precision(asked[1], options.use_gpu, rates,
                                            INFERENCE_BF16_MARGIN)
    if precision == "fp16" and not options.use_gpu:
        console.warning("fp16 on a CPU is very slow (no fp16 matrix units); "
                        "bf16 or fp32 is the better choice here")
    slower = slower_bf16_warning(asked, rates)
    if slower:
        console.warning(slower)
    graph_rewrite = options.mixed_precision == "graph_rewrite" and precision != "fp32"
    if graph_rewrite and (precision == "fp16") != bool(options.use_gpu):
        raise InputError("--mixed_precision=graph_rewrite with --precision=%s%s: TensorFlow's "
                         "pass rewrites to fp16 on GPUs and to bf16 on CPUs only; use "
                         "--mixed_precision=casts" % (
                             precision, " (resolved from auto)" if options.precision == "auto"
                             else "", ))
    return Runtime(devices, precision, inference_precision, graph_rewrite, rates)


def slower_bf16_warning(asked, rates):
    """The warning for bf16 asked by name on a CPU where fp32 runs faster (None
    if there is nothing to say): asked is (training, inference) precision flags,
    rates the CpuRates (None on GPUs)."""
    flags = [flag for flag, value in zip(("--precision", "--inference_precision"), asked)
             if value == "bf16"]
    if rates is None or not flags:
        return None
    named = " and ".join(flag + "=bf16" for flag in flags)
    if rates.bf16 is None:
        return ("%s: this CPU has no bf16 units, so bf16 is emulated and slower than fp32; "
                "running bf16 as asked" % named)
    if rates.fp32 > rates.bf16:
        return ("%s: fp32 measured faster on this CPU (%s); running bf16 as asked"
                % (named, describe_rates(rates)))
    return None


def describe_rates(rates):
    """'fp32 285, bf16 170 GFLOP/s'."""
    return "fp32 %.0f, bf16 %.0f GFLOP/s" % (rates.fp32 / 1e9, rates.bf16 / 1e9)


def margin_note(precision, rates, margin):
    """', bf16 not 1.1x faster' when `auto` kept fp32 although bf16 measured faster
    (by less than `margin`), else ''."""
    if precision != "fp32" or rates is None or rates.bf16 is None:
        return ""
    return ", bf16 not %.1fx faster" % margin if rates.bf16 > rates.fp32 else ""


def describe_auto(precision, rates, margin, use_gpu=False):
    """What `auto` resolving to `precision` was decided by: 'auto: fp32 285, bf16
    170 GFLOP/s' (plus margin_note), the CPU's missing bf16 units, or the GPUs'
    generation."""
    if use_gpu:
        return "auto: %s" % ("Ampere or newer GPUs" if precision == "bf16"
                             else "GPUs before Ampere")
    if rates is None or rates.bf16 is None:
        return "auto: no bf16 units on this CPU, emulated bf16 is slower"
    return "auto: %s%s" % (describe_rates(rates), margin_note(precision, rates, margin))


def describe_precisions(options, runtime):
    """'precision fp32 (auto: fp32 285, bf16 170 GFLOP/s), inference fp32 (auto)'
    for the devices line: each precision, and what decided it when it was auto
    (the figures once when both were)."""
    training = "precision " + runtime.precision + (
        " by graph rewrite" if runtime.graph_rewrite else "")
    inference = "inference " + runtime.inference_precision
    training_auto = options.training_precision == "auto"
    if training_auto:
        training += " (%s)" % describe_auto(runtime.precision, runtime.cpu_rates,
                                            TRAINING_BF16_MARGIN, options.use_gpu)
    if options.inference_precision == "auto":
        if training_auto:  # the figures are on the line already
            said = "auto" + ("" if options.use_gpu else margin_note(
                runtime.inference_precision, runtime.cpu_rates, INFERENCE_BF16_MARGIN))
        else:
            said = describe_auto(runtime.inference_precision, runtime.cpu_rates,
                                 INFERENCE_BF16_MARGIN, options.use_gpu)
        inference += " (%s)" % said
    return training + ", " + inference


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


def time_matmuls(device, precisions, size, repeats):
    """precision -> FLOP/s of the best of `repeats` size^3 matmuls on `device` in
    each of `precisions`. The operands are stored in the precision, so no cast is
    timed; the precisions take turns (fp32, bf16, fp32, ...), so load that comes
    and goes while they are timed hits each alike.

    On a CPU the time is this process's CPU time spread over the cores it may
    use, not the wall time: on a machine shared with other work the wall time
    measures the share of the cores we got, and a peak taken that way would be
    low and the MFU above 100%.
    """
    on_cpu = "cpu" in device.lower()
    graph = tf.Graph()
    products = {}
    with graph.as_default(), tf.device(device):
        for precision in precisions:
            dtype = modeling.get_compute_dtype(precision)
            a = tf.Variable(tf.cast(tf1.random_uniform([size, size]), dtype))
            b = tf.Variable(tf.cast(tf1.random_uniform([size, size]), dtype))
            # A scalar fetch: the timing is the matmul's, not a copy of its product.
            products[precision] = tf.reduce_sum(tf.matmul(a, b))
        init = tf1.global_variables_initializer()
    if on_cpu:
        cores = system.available_cores()
        clock = lambda: time.process_time() / cores  # noqa: E731
    else:
        clock = time.perf_counter
    best = {precision: float("inf") for precision in precisions}
    with tf1.Session(graph=graph) as session:
        session.run(init)
        for product in products.values():
            session.run(product)  # warm-up: kernels chosen, memory touched
        for _ in range(repeats):
            for precision, product in products.items():
                started = clock()
                session.run(product)
                best[precision] = min(best[precision], clock() - started)
    # A clock too coarse to see the product reads 0 s: count it as one tick.
    return {precision: 2.0 * size ** 3 / max(seconds, 1e-9)
            for precision, seconds in best.items()}


def measure_matmul_peak(device, precision, size=None, repeats=3):
    """FLOP/s of the best of `repeats` size^3 matmuls on `device` in `precision`:
    the peak MFU is measured against. `size` defaults to 2048 on a GPU and to
    peak_matmul_size of TensorFlow's threads on a CPU (a tenth to a third of a
    second each); see time_matmuls."""
    if size is None:
        size = (peak_matmul_size(tensorflow_cpu_threads()) if "cpu" in device.lower()
                else 2048)
    return time_matmuls(device, [precision], size, repeats)[precision]


def rates_key():
    """The cache key of the CPU rates: the machine (CPU model, flags, cores), the
    TensorFlow, its threads and oneDNN setting, and the measurement's size and
    rounds (a changed method measures again)."""
    threads = tensorflow_cpu_threads()
    return system.machine_key(
        tensorflow=tf.__version__, threads=threads,
        onednn=os.environ.get("TF_ENABLE_ONEDNN_OPTS", ""),
        size=peak_matmul_size(threads), rounds=RATE_ROUNDS)


def measure_cpu_rates():
    """{"fp32": FLOP/s, "bf16": FLOP/s} of this CPU now (time_matmuls at
    peak_matmul_size, RATE_ROUNDS turns: one to two seconds on 2 cores)."""
    return time_matmuls("/cpu:0", ("fp32", "bf16"),
                        peak_matmul_size(tensorflow_cpu_threads()), RATE_ROUNDS)


def rates_from_record(values):
    """CpuRates of a cache record's values, None unless both rates are positive
    finite numbers."""
    try:
        fp32, bf16 = float(values["fp32"]), float(values["bf16"])
    except (KeyError, TypeError, ValueError):
        return None
    if not all(math.isfinite(rate) and rate > 0 for rate in (fp32, bf16)):
        return None
    return CpuRates(fp32, bf16, fresh=False)


def cpu_rates(measure=None):
    """The CpuRates `auto` decides by: NOT_TIMED on a CPU without bf16 units; else
    read from the cache (system.read_machine_record under rates_key) or, when
    this machine and TensorFlow were never measured or the record is unreadable,
    `measure()`d now and cached."""
    if not system.cpu_supports_bf16():
        return NOT_TIMED
    key = rates_key()
    cached = rates_from_record(system.read_machine_record(RATES_RECORD, key) or {})
    if cached is not None:
        return cached
    measured = (measure or measure_cpu_rates)()
    system.write_machine_record(RATES_RECORD, key, {
        "fp32": measured["fp32"], "bf16": measured["bf16"],
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S")})
    return CpuRates(measured["fp32"], measured["bf16"], fresh=True)


def matmul_peak(options, runtime):
    """FLOP/s for the MFU of the training log: --matmul_peak_tflops if given, the
    rate of the training precision if this process just measured it (cpu_rates),
    else measured on the first training device; None for fp16 on a CPU (no fp16
    units: measuring would take minutes, and nobody trains that way)."""
    if options.matmul_peak_tflops:
        return options.matmul_peak_tflops * 1e12
    if runtime.precision == "fp16" and not options.use_gpu:
        return None
    rates = runtime.cpu_rates
    if rates is not None and rates.fresh:
        rate = rates._asdict().get(runtime.precision)
        if rate:
            return rate
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
