"""The settings TensorFlow reads from the environment once, when it is first imported,
and the one framework warning every multi-replica run would otherwise print.

Importing the package (bert_toolkit/__init__.py) imports this module first, so
every script, test and notebook that uses the toolkit sets them before
TensorFlow is imported; a value already in the environment wins, so a user
can still choose otherwise.
"""

import os
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

for _name, _value in DEFAULTS.items():
    os.environ.setdefault(_name, _value)

# tf.data's note that Dataset.options() read in graph mode may not show the
# options set in the graph: MirroredStrategy reads them for every input
# pipeline it distributes, and the user can do nothing about it.
warnings.filterwarnings("ignore", message="To make it possible to preserve tf.data options")
