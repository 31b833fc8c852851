"""One attention layer's forward + backward: the masked square against blocks and chunks.

    python bench/long_attention_bench.py --lengths=256,512,1024,2048,4096 --precision=fp32,bf16

model/long_attention.py's forms at ModernBERT-base's shape (batch 1, 12 heads of 64,
a local window of 128), as a training graph builds them (the length unknown while
building, as in batches cut to their longest text; bf16 with the fused kernels):
milliseconds of the best of --repeats runs of the forward and the gradients with
respect to queries, keys and values, for

- local layers: the square with the band mask against windowed_attention (blocks at
  every length when the length is unknown while building);
- global layers: the plain square against chunked_attention (chunks of 512 rows).

A length whose square would not fit in --max_square_gb is not run as a square.
Each form runs in this one process, so no peak memory is printed (the progress line
of bench/long_input_bench.py gives a whole run's).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

HEADS, WIDTH, WINDOW = 12, 64, 128
FORMS = ("band", "windowed", "square", "chunks")
HEADER = ["precision", "length", "local: square", "local: blocks", "global: square",
          "global: chunks"]


def milliseconds(form, seq_length, precision, repeats):
    """The best forward + backward time of `form` (FORMS) at `seq_length`."""
    import numpy as np
    import tensorflow as tf

    from bert_toolkit.model import long_attention, modeling
    tf1 = tf.compat.v1
    dtype = tf.bfloat16 if precision == "bf16" else tf.float32
    fuse = precision == "bf16"
    graph = tf.Graph()
    with graph.as_default():
        fed = [tf1.placeholder(tf.float32, [1, HEADS, None, WIDTH]) for _ in range(3)]
        query, key, value = (tf.cast(x, dtype) for x in fed)
        mask = tf1.placeholder(tf.int32, [1, None])
        bias = modeling.attention_mask_bias(mask)
        if form == "band":
            band = long_attention.window_mask_bias(tf.shape(query)[2], WINDOW)
            context = long_attention.square_attention(query, key, value, bias + band, 0.0, fuse)
        elif form == "windowed":
            context = long_attention.windowed_attention(query, key, value, bias, WINDOW,
                                                        fuse=fuse)
        elif form == "square":
            context = long_attention.square_attention(query, key, value, bias, 0.0, fuse)
        else:
            context = long_attention.chunked_attention(query, key, value, bias, fuse=fuse)
        gradients = tf.gradients(tf.reduce_sum(tf.cast(context, tf.float32)), fed)
        fetches = [tf.reduce_sum(g) for g in gradients]
    rng = np.random.RandomState(0)
    feed = {x: rng.normal(size=[1, HEADS, seq_length, WIDTH]).astype(np.float32)
            for x in fed}
    feed[mask] = np.ones([1, seq_length], np.int32)
    times = []
    with tf1.Session(graph=graph) as session:
        for run in range(repeats + 2):  # two warm-up runs
            start = time.perf_counter()
            session.run(fetches, feed)
            if run >= 2:
                times.append(time.perf_counter() - start)
    return 1000.0 * min(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="256,512,1024,2048,4096")
    parser.add_argument("--precision", default="fp32,bf16")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max_square_gb", type=float, default=4.0,
                        help="Skip the square where its float32 scores alone pass this.")
    args = parser.parse_args(argv)
    print(benchlib.machine_line())
    rows = []
    for precision in args.precision.split(","):
        for seq_length in (int(n) for n in args.lengths.split(",")):
            fits = 4.0 * HEADS * seq_length ** 2 / 1e9 <= args.max_square_gb
            cells = [precision, str(seq_length)]
            for form in FORMS:
                square = form in ("band", "square")
                cells.append("%.1f" % milliseconds(form, seq_length, precision, args.repeats)
                             if fits or not square else "-")
            rows.append(cells)
            print(benchlib.format_table(HEADER, rows[-1:]), flush=True)
    print()
    print(benchlib.format_table(HEADER, rows))
    print("load average after: %.2f" % benchlib.load_average())


if __name__ == "__main__":
    main()
