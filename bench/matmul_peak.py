"""The machine's matmul peak (GFLOP/s) at fp32 and bf16, by TensorFlow or PyTorch.

    python bench/matmul_peak.py --framework=tf --precision=fp32,bf16

Prints one JSON line {"fp32": GFLOP/s, ...}: the best of --repeats n^3 matmuls
(2 n^3 FLOPs each) with every core. The benches take the higher of the two
frameworks' numbers as the peak their MFU is a fraction of; they run this
after their rounds, on a quiet machine when they can, because a peak taken
while another process holds a core understates the machine (and so inflates
every MFU).
"""

import argparse
import json
import os
import sys
import time


def tf_peak(precision, n, repeats):
    # TensorFlow as the toolkit's scripts configure it (oneDNN on).
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import tensorflow as tf

    from bert_toolkit import tensorflow_env  # noqa: F401
    dtype = tf.bfloat16 if precision == "bf16" else tf.float32
    a = tf.cast(tf.random.uniform([n, n]), dtype)
    b = tf.cast(tf.random.uniform([n, n]), dtype)
    matmul = tf.function(tf.matmul)
    matmul(a, b).numpy()

    def once():
        started = time.perf_counter()
        matmul(a, b).numpy()
        return time.perf_counter() - started
    return 2.0 * n ** 3 / min(once() for _ in range(repeats)) / 1e9


def torch_peak(precision, n, repeats):
    import torch
    torch.set_num_threads(os.cpu_count() or 1)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a = torch.rand(n, n).to(dtype)
    b = torch.rand(n, n).to(dtype)
    torch.matmul(a, b)

    def once():
        started = time.perf_counter()
        torch.matmul(a, b)
        return time.perf_counter() - started
    return 2.0 * n ** 3 / min(once() for _ in range(repeats)) / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--framework", choices=["tf", "torch"], default="tf")
    parser.add_argument("--precision", default="fp32,bf16")
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    peak = tf_peak if args.framework == "tf" else torch_peak
    print(json.dumps({p: peak(p, args.size, args.repeats)
                      for p in args.precision.split(",")}))


if __name__ == "__main__":
    main()
