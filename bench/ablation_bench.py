"""Before/after of each graph-level speed-up, one at a time, in one process.

    python bench/ablation_bench.py --config=minilm --seq_length=128 --batch=32 --mode=train

Builds the training step exactly as model_fn_builder.build_model_fn does (BertModel,
the classifier head, optimization.create_train_op with AdamW), or the
inference graph (--mode=infer), once per VARIANT, each in its own session,
then runs the variants in turns (round-robin) so background load hits all
alike. Prints examples/s (wall, median of --rounds) and examples per CPU
second (steadier on a shared machine), with the ratio to the first variant.

Variants (default: all that apply to the mode):
  fp32           the toolkit's fp32 graph
  fused-qkv      fp32 with one matmul for the Q, K and V projections (kernels
                 concatenated in the graph, variables unchanged)
  bf16           the toolkit's bf16 graph (bf16 between the float32
                 variables; softmax and layer norm in float32)
  bf16-rewrite   the fp32 graph with grappler's
                 auto_mixed_precision_onednn_bfloat16 rewrite
  fp32-inter1    fp32 with inter_op_parallelism_threads=1
  fp32-xla       fp32 with XLA auto-clustering, which on CPUs also needs
                 TF_XLA_FLAGS=--tf_xla_cpu_global_jit (set here)
  no-optimizer   fp32 forward + backward only: the AdamW update's share
  bf16-no-optimizer  the same in bf16
  unfused-adamw  fp32 with AdamW written as separate ops (a dozen variable-sized
                 temporaries per step), as before the fused in-place update
  apply-adam     fp32 with AdamW as TensorFlow's in-place ResourceApplyAdam after
                 the clip and the decay as ops, as before its XLA kernel
  bf16-apply-adam  the same in bf16
  float-dropout  fp32 with tf.nn.dropout's masks (a float32 uniform per element),
                 as before the 16-bit masks
  select-dropout fp32 with the 16-bit masks applied by a select between the scaled
                 input and zeros, as before the scaled mask multiplied in
  bf16-select-dropout  the same in bf16, unfused (see bf16-unfused)
  fused-scores   fp32 with the scale applied to the scores and a mask bias whose
                 shape grappler can infer, so that with oneDNN on the scores'
                 matmul, scale and mask add run as one _MklFusedBatchMatMulV2 (in
                 inference; training's varying lengths keep them apart)
  bf16-unfused   bf16 training with its element-wise chains as TensorFlow ops, as
                 before model/fused.py's XLA kernels
  bf16-inter1    bf16 with inter_op_parallelism_threads=1
  bf16-no-dropout  bf16 without dropout: what the masks still cost
  bf16-relu      bf16 with ReLU instead of GELU (fused into oneDNN's matmul): what
                 the GELU still costs
  fp32-fused     fp32 training with the element-wise chains as model/fused.py's XLA
                 kernels, as bf16 training runs them
  bf16-recompute  bf16 with the attention kernel's backward recomputing the
                 probabilities (what it does where GPUs are visible) instead of
                 reading the ones its forward kept
"""

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

sys.path.insert(0, benchlib.REPO)

TRAIN_VARIANTS = ("fp32", "fused-qkv", "bf16", "bf16-rewrite", "fp32-inter1",
                  "fp32-xla", "no-optimizer", "bf16-no-optimizer", "unfused-adamw",
                  "apply-adam", "bf16-apply-adam", "float-dropout", "select-dropout",
                  "bf16-select-dropout", "fused-scores", "bf16-unfused", "bf16-inter1",
                  "bf16-no-dropout", "bf16-relu", "bf16-recompute", "fp32-fused")
INFER_VARIANTS = ("fp32", "fused-qkv", "bf16", "bf16-rewrite", "fused-scores")


def make_parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    benchlib.add_model_args(parser)
    parser.add_argument("--mode", choices=["train", "infer"], default="train")
    parser.add_argument("--variants", help="Comma-separated subset, in this order.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps_per_round", type=int, default=3)
    parser.add_argument("--json", help="Also write the results here.")
    return parser


def fused_qkv_attention_layer(flat_hidden, mask_bias, batch_size, seq_length, num_heads,
                              initializer_range=0.02, attention_dropout=0.0, packing=None,
                              fuse=False, relative=None):
    """modeling.self_attention with one matmul for Q, K and V (a candidate, measured;
    BERT's attention only: no DeBERTa `relative` terms).

    The variables stay separate (Google's names and shapes) and are
    concatenated in the graph; the 1/sqrt(head_size) scale is folded into the
    query's kernel and bias. Measured no faster here (docs/performance.md),
    so modeling.py keeps the three projections.
    """
    import tensorflow as tf

    from bert_toolkit.model import modeling
    tf1 = tf.compat.v1
    assert packing is None and not fuse and relative is None, "BERT's fp32 graphs, unpacked"
    width = flat_hidden.shape[-1]
    head_size = width // num_heads
    scale = 1.0 / math.sqrt(float(head_size))
    kernels, biases = [], []
    for name in ("query", "key", "value"):
        with tf1.variable_scope(name):
            kernels.append(tf1.get_variable(
                "kernel", [width, width], dtype=tf.float32,
                initializer=modeling.create_initializer(initializer_range)))
            biases.append(tf1.get_variable("bias", [width], dtype=tf.float32,
                                           initializer=tf1.zeros_initializer()))
    kernel = tf.concat([kernels[0] * scale, kernels[1], kernels[2]], axis=1)
    bias = tf.concat([biases[0] * scale, biases[1], biases[2]], axis=0)
    projected = tf.nn.bias_add(tf.matmul(flat_hidden, tf.cast(kernel, flat_hidden.dtype)),
                               tf.cast(bias, flat_hidden.dtype))
    # [batch * seq, 3 * hidden] -> [3, batch, heads, seq, head]
    split = tf.reshape(projected, [batch_size, seq_length, 3, num_heads, head_size])
    query, key, value = tf.unstack(tf.transpose(split, [2, 0, 3, 1, 4]), axis=0)
    scores = tf.matmul(query, key, transpose_b=True)
    probs = tf.nn.softmax(tf.cast(scores, tf.float32) + mask_bias)
    probs = modeling.dropout(probs, attention_dropout)
    context = tf.matmul(tf.cast(probs, flat_hidden.dtype), value)
    context = tf.transpose(context, [0, 2, 1, 3])
    return tf.reshape(context, [-1, width])


def unfused_adamw_update(variable, gradient, m, v, learning_rate, weight_decay_rate, beta_1,
                         beta_2, epsilon, multiplier=1.0):
    """optimization._fused_adamw_update's arithmetic as separate ops (measured). A
    skipped update comes with rate 0 and betas 1, which leave every value as it was."""
    import tensorflow as tf

    from bert_toolkit.model import optimization
    return optimization._adam_update(variable, tf.math.multiply_no_nan(gradient, multiplier),
                                     m, v, learning_rate, tf.constant(True), "adamw",
                                     weight_decay_rate, beta_1, beta_2, epsilon, None)


def apply_adam_update(variable, gradient, m, v, learning_rate, weight_decay_rate, beta_1,
                      beta_2, epsilon, multiplier=1.0):
    """optimization._fused_adamw_update as it was before its XLA kernel (measured):
    the clip multiplier, the decay's product and subtraction, then TensorFlow's
    in-place ResourceApplyAdam with both beta powers 0 (no bias correction)."""
    import tensorflow as tf

    from bert_toolkit.model import modeling, optimization
    decay = []
    if weight_decay_rate and optimization.uses_weight_decay(modeling.variable_name(variable)):
        decay.append(variable.assign_sub(learning_rate * weight_decay_rate
                                         * variable.read_value()))
    with tf.control_dependencies(decay):
        zero = tf.constant(0.0, tf.float32)
        return tf.raw_ops.ResourceApplyAdam(
            var=variable.handle, m=m.handle, v=v.handle, beta1_power=zero,
            beta2_power=zero, lr=learning_rate, beta1=beta_1, beta2=beta_2,
            epsilon=tf.constant(epsilon, tf.float32),
            grad=tf.math.multiply_no_nan(gradient, multiplier))


def float_dropout(input_tensor, dropout_prob):
    """modeling.dropout as it was before the 16-bit masks (measured)."""
    import tensorflow as tf
    if dropout_prob is None or dropout_prob == 0.0:
        return input_tensor
    return tf.nn.dropout(input_tensor, rate=dropout_prob)


def select_dropout(input_tensor, dropout_prob):
    """modeling.dropout as it was before the scaled mask (measured)."""
    import tensorflow as tf

    from bert_toolkit.model import modeling
    if dropout_prob is None or dropout_prob == 0.0:
        return input_tensor
    keep, scale = modeling._keep_mask(tf.shape(input_tensor), tf.size(input_tensor),
                                      dropout_prob)
    return tf.where(keep, input_tensor * tf.cast(scale, input_tensor.dtype),
                    tf.zeros_like(input_tensor))


def fused_scores_attend(query, key, value, mask_bias, dropout_prob, fuse=False,
                        position_terms=None):
    """modeling._attend with the query unscaled: matmul * scale + mask is the pattern
    oneDNN's grappler pass fuses into one kernel (a candidate, measured; fp32 only:
    a bf16 matmul's cast to float32 breaks the pattern; BERT's attention, no DeBERTa
    `position_terms`). Its query must come from unscaled(modeling._attention_heads)."""
    import tensorflow as tf

    from bert_toolkit.model import modeling
    assert not fuse and position_terms is None, "BERT's attention in an fp32 graph"
    scores = tf.matmul(query, key, transpose_b=True) * (1.0 / math.sqrt(query.shape[-1]))
    if mask_bias is not None:
        scores += mask_bias
    probs = modeling.dropout(tf.nn.softmax(scores), dropout_prob)
    context = tf.matmul(tf.cast(probs, value.dtype), value)
    return tf.transpose(context, [0, 2, 1, 3])


def unscaled(attention_heads):
    """modeling._attention_heads ignoring its query `scale` (fused_scores_attend
    applies it)."""
    def heads(*args, scale=None, **kwargs):
        del scale
        return attention_heads(*args, **kwargs)
    return heads


def reshaped_mask_bias(mask):
    """modeling.attention_mask_bias made with a reshape: grappler's shape inference,
    which does not trust fed shapes, then still knows the bias is [batch, 1, *, to],
    which the fusion requires."""
    import tensorflow as tf

    from bert_toolkit.model import modeling
    if mask is None:
        return None
    shape = modeling.get_shape_list(mask, expected_rank=[2, 3])
    mask = tf.reshape(tf.cast(mask, tf.float32), [-1, 1] + [1] * (3 - len(shape)) + shape[1:])
    return (1.0 - mask) * -10000.0


def build(variant, config, features, mode):
    """(session, fetch, feed) of one variant's step.

    The features are fed, shaped as the toolkit's graphs see them: inference
    [any batch, seq] (a served SavedModel), training [batch, any length] (the
    training pipeline's fixed batches, cut to their longest sequence), so that
    grappler optimises what it would optimise in a real run.
    """
    import tensorflow as tf

    from bert_toolkit.estimator_compat import tf_estimator
    from bert_toolkit.model import fused, modeling, optimization
    from bert_toolkit.tasks.classification import head as classifier_head
    tf1 = tf.compat.v1
    precision = "bf16" if variant.startswith("bf16") and variant != "bf16-rewrite" else "fp32"
    original = (modeling.self_attention, optimization._fused_adamw_update, modeling.dropout,
                modeling._attend, modeling._attention_heads, modeling.attention_mask_bias,
                modeling.fuses_elementwise, fused.keeps_attention_probabilities)
    # The kernels are cached and traced once: a variant that changes them gets its own.
    fused.biased_activation.cache_clear()
    if variant == "fused-scores":
        modeling._attend = fused_scores_attend
        modeling._attention_heads = unscaled(modeling._attention_heads)
        modeling.attention_mask_bias = reshaped_mask_bias
    if variant == "fused-qkv":
        modeling.self_attention = fused_qkv_attention_layer
    if variant == "unfused-adamw":
        optimization._fused_adamw_update = unfused_adamw_update
    if variant.endswith("apply-adam"):
        optimization._fused_adamw_update = apply_adam_update
    if variant == "float-dropout":
        modeling.dropout = float_dropout
    if variant.endswith("select-dropout"):
        modeling.dropout = select_dropout
    if variant == "bf16-no-dropout":
        config = modeling.BertConfig.from_dict(dict(config.to_dict(), hidden_dropout_prob=0.0,
                                                    attention_probs_dropout_prob=0.0))
    if variant == "bf16-relu":
        config = modeling.BertConfig.from_dict(dict(config.to_dict(), hidden_act="relu"))
    if variant in ("bf16-unfused", "bf16-select-dropout"):
        modeling.fuses_elementwise = lambda is_training, compute_dtype: False
    if variant == "fp32-fused":
        modeling.fuses_elementwise = lambda is_training, compute_dtype: is_training
    if variant == "bf16-recompute":
        fused.keeps_attention_probabilities = lambda: False
    graph = tf.Graph()
    try:
        with graph.as_default():
            tf1.set_random_seed(1)
            is_training = mode == "train"
            placeholders = {
                name: tf1.placeholder(tf.as_dtype(values.dtype),
                                      ([len(values), None] if is_training
                                       else [None] + list(values.shape[1:]))[:values.ndim],
                                      name=name)
                for name, values in features.items()}
            feed = {placeholders[name]: values for name, values in features.items()}
            inputs = dict(placeholders, label_ids=tf.reshape(placeholders["label_ids"], [-1, 1]))
            model = modeling.BertModel(
                config, is_training, inputs["input_ids"], inputs["input_mask"],
                inputs["segment_ids"], compute_dtype=modeling.get_compute_dtype(precision))
            estimator_mode = tf_estimator.ModeKeys.TRAIN if is_training \
                else tf_estimator.ModeKeys.PREDICT
            head = classifier_head.make_head_fn(2, config.hidden_dropout_prob)(
                model, inputs, estimator_mode)
            if not is_training:
                fetch = head.predictions["probabilities"]
            elif variant.endswith("no-optimizer"):
                # A sum over every gradient, so none of them can be pruned away.
                gradients = tf1.gradients(head.loss, tf1.trainable_variables())
                fetch = tf.add_n([tf.reduce_sum(tf.convert_to_tensor(g))
                                  for g in gradients if g is not None])
            else:
                fetch = optimization.create_train_op(head.loss, 5e-5, 10 ** 6, 10,
                                                     precision=precision).train_op
    finally:
        (modeling.self_attention, optimization._fused_adamw_update, modeling.dropout,
         modeling._attend, modeling._attention_heads, modeling.attention_mask_bias,
         modeling.fuses_elementwise, fused.keeps_attention_probabilities) = original
        fused.biased_activation.cache_clear()
    session_config = tf1.ConfigProto()
    if variant == "bf16-rewrite":
        session_config.graph_options.rewrite_options.auto_mixed_precision_onednn_bfloat16 = 1
    if variant in ("fp32-inter1", "bf16-inter1"):
        session_config.inter_op_parallelism_threads = 1
    if variant == "fp32-xla":
        session_config.graph_options.optimizer_options.global_jit_level = \
            tf1.OptimizerOptions.ON_1
    session = tf1.Session(graph=graph, config=session_config)
    with graph.as_default():
        session.run(tf1.global_variables_initializer())
    for _ in range(2):  # graph optimisation, oneDNN primitive creation
        session.run(fetch, feed)
    return session, fetch, feed


def run(args):
    variants = (args.variants.split(",") if args.variants else
                list(TRAIN_VARIANTS if args.mode == "train" else INFER_VARIANTS))
    known = TRAIN_VARIANTS if args.mode == "train" else INFER_VARIANTS
    unknown = [v for v in variants if v not in known]
    if unknown:
        raise benchlib.BenchError("--variants: unknown for --mode=%s: %s (known: %s)"
                                  % (args.mode, ",".join(unknown), ",".join(known)))
    if "fp32-xla" in variants:
        # Must be set before TensorFlow starts: without it CPU graphs are never clustered.
        os.environ["TF_XLA_FLAGS"] = (os.environ.get("TF_XLA_FLAGS", "")
                                      + " --tf_xla_cpu_global_jit").strip()
    import finetune_bench
    import tensorflow as tf

    from bert_toolkit.model import modeling
    tf.compat.v1.disable_eager_execution()
    _, fields = benchlib.load_config(args.config)
    config = modeling.BertConfig.from_dict(fields)
    features = finetune_bench.make_features(fields, args.seq_length, "synthetic", args.batch)
    print(benchlib.machine_line())
    print("%s %s, seq %d, batch %d: %d variants built in one process, run in turns; "
          "%d rounds x %d steps" % (args.mode, args.config, args.seq_length, args.batch,
                                    len(variants), args.rounds, args.steps_per_round),
          flush=True)
    built = {variant: build(variant, config, features, args.mode) for variant in variants}
    wall = {variant: [] for variant in variants}
    cpu = {variant: [] for variant in variants}
    loads = []
    for _ in range(args.rounds):
        for variant, (session, fetch, feed) in built.items():
            started, cpu_started = time.perf_counter(), time.process_time()
            for _ in range(args.steps_per_round):
                session.run(fetch, feed)
            wall[variant].append(args.steps_per_round * args.batch
                                 / (time.perf_counter() - started))
            cpu[variant].append(args.steps_per_round * args.batch
                                / (time.process_time() - cpu_started))
        loads.append(benchlib.load_average())
    first = variants[0]
    rows, results = [], []
    for variant in variants:
        rate, per_cpu = benchlib.median(wall[variant]), benchlib.median(cpu[variant])
        rows.append([variant, "%.2f" % rate, "/".join("%.1f" % x for x in wall[variant]),
                     "%.2fx" % (rate / benchlib.median(wall[first])), "%.2f" % per_cpu,
                     "%.2fx" % (per_cpu / benchlib.median(cpu[first]))])
        results.append({"variant": variant, "examples_per_second": rate,
                        "rounds": wall[variant], "examples_per_cpu_second": per_cpu})
    print(benchlib.format_table(["variant", "examples/s", "rounds", "vs first",
                                 "examples/CPU-s", "vs first"], rows))
    print("load average after each round: %s" % "/".join("%.1f" % x for x in loads))
    benchlib.write_json(args.json, {"bench": "ablation", "args": vars(args),
                                    "machine": benchlib.machine_line(), "results": results,
                                    "load_averages": loads})
    return 0


def main():
    benchlib.bench_main(make_parser(), run)


if __name__ == "__main__":
    main()
