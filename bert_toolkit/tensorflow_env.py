"""The settings TensorFlow reads from the environment once, when it is first imported,
and the framework lines every run would otherwise print.

Importing the package (bert_toolkit/__init__.py) imports this module first, so
every script, test and notebook that uses the toolkit sets them before
TensorFlow is imported; a value already in the environment wins, so a user
can still choose otherwise.
"""

import contextlib
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import tempfile
import warnings

DEFAULTS = {
    # TensorFlow's C++ INFO and WARNING lines (CUDA plugin chatter on CPU machines).
    "TF_CPP_MIN_LOG_LEVEL": "3",
    # oneDNN's CPU kernels and graph fusions (GELU into its matmul, among others).
    # TensorFlow 2.15 turns them on by itself only on CPUs with AVX-512 VNNI, bf16
    # or AMX; on an AVX2 CPU they made the fp32 training step 1.19x and the
    # SavedModel 1.45x faster (docs/performance.md). GPU kernels are unaffected.
    "TF_ENABLE_ONEDNN_OPTS": "1",
}
# TensorFlow >= 2.16 makes tf.keras Keras 3, which has no tf.compat.v1.layers
# (Google's modeling code and its users' call tf.layers.dense); with the tf-keras
# package installed (requirements.txt does on those TensorFlows) this keeps Keras 2.
if importlib.util.find_spec("tf_keras") is not None:
    DEFAULTS["TF_USE_LEGACY_KERAS"] = "1"

for _name, _value in DEFAULTS.items():
    os.environ.setdefault(_name, _value)

# tf.data's note that Dataset.options() read in graph mode may not show the
# options set in the graph: MirroredStrategy reads them for every input
# pipeline it distributes, and the user can do nothing about it.
warnings.filterwarnings("ignore", message="To make it possible to preserve tf.data options")

# What TensorFlow >= 2.16 writes to the stderr file descriptor while its shared
# libraries load, before absl's logging is initialised, so TF_CPP_MIN_LOG_LEVEL
# cannot hide it: absl's notice that it logs to stderr, the "no CUDA driver"
# line, oneDNN's notice and the CPU-feature note with its continuation line; and
# what the first XLA compilation of a process logs (quiet_first_xla_compile).
STARTUP_NOISE = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called"
    r"|[IW]\d{4} [\d:.]+ +\d+ (cudart_stub|port|cpu_feature_guard|cuda_[a-z_]+)\.cc:\d+\]"
    r"|To enable the following instructions: .* rebuild TensorFlow"
    r"|I\d{4} [\d:.]+ +\d+ device_compiler\.h:\d+\] Compiled cluster using XLA!")


def without_startup_noise(text):
    """`text` (what TensorFlow printed while it was imported) less STARTUP_NOISE lines."""
    return "".join(line for line in text.splitlines(True) if not STARTUP_NOISE.match(line))


@contextlib.contextmanager
def _stderr_without_startup_noise():
    """Points file descriptor 2 at a temporary file while the block runs, then
    writes back whatever was printed but the STARTUP_NOISE lines (all of it if
    the block raises)."""
    try:
        saved_stderr = os.dup(2)
    except OSError:  # no stderr to quiet
        yield
        return
    sys.stderr.flush()
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        failed = True
        try:
            yield
            failed = False
        finally:
            os.dup2(saved_stderr, 2)
            os.close(saved_stderr)
            captured.seek(0)
            text = captured.read().decode("utf-8", "replace")
            sys.stderr.write(text if failed else without_startup_noise(text))
            sys.stderr.flush()


class _QuietLoader(importlib.abc.Loader):
    """Loads the tensorflow package with its start-up noise kept off stderr."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        with _stderr_without_startup_noise():
            self._loader.exec_module(module)


@functools.lru_cache(maxsize=None)
def quiet_first_xla_compile():
    """Compiles a one-op XLA function with stderr quieted, once per process.

    The first XLA compilation of a process writes two lines through absl's
    logging, which TF_CPP_MIN_LOG_LEVEL does not reach (absl's notice that it
    logs to stderr, and "Compiled cluster using XLA!", logged once per process).
    Called before a graph that XLA compiles is built, it spends them here.
    """
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0":
        return
    import tensorflow as tf
    with _stderr_without_startup_noise(), tf.Graph().as_default():
        # Fed, not a constant: grappler would fold a constant's call away.
        x = tf.compat.v1.placeholder(tf.float32, [])
        plus_one = tf.function(lambda x: x + 1.0, jit_compile=True, autograph=False)
        with tf.compat.v1.Session() as session:
            session.run(plus_one(x), {x: 1.0})


def xla_kernel(function):
    """`function` as a tf.function that XLA compiles (no autograph), which spends
    the first compilation's log lines (quiet_first_xla_compile) before its first
    call builds it into a graph: every XLA kernel of the toolkit is made here, so
    none of them can put those lines in front of a user."""
    import tensorflow as tf
    compiled = tf.function(function, jit_compile=True, autograph=False)

    @functools.wraps(function)
    def call(*args):
        quiet_first_xla_compile()
        return compiled(*args)
    return call


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """Finds the tensorflow package once, for _QuietLoader to load."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec


# A user who asks TensorFlow for its INFO lines (TF_CPP_MIN_LOG_LEVEL=0) gets them all.
if "tensorflow" not in sys.modules and os.environ["TF_CPP_MIN_LOG_LEVEL"] != "0" and not any(
        isinstance(finder, _QuietTensorFlowImport) for finder in sys.meta_path):
    sys.meta_path.insert(0, _QuietTensorFlowImport())
