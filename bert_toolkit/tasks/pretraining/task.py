"""Pretraining: the masked-LM and next-sentence heads, their input and metrics.

The heads have exactly the variables of Google's run_pretraining.py, so a
released `bert_model.ckpt` (which includes them) continues pretraining, and
what we save loads into the original code and into our fine-tuning scripts:

    cls/predictions/transform/dense/{kernel [hidden, width], bias [width]}
    cls/predictions/transform/LayerNorm/{gamma, beta} [width]
    cls/predictions/output_bias [vocab]   (the output matrix is tied to
                                           bert/embeddings/word_embeddings)
    cls/seq_relationship/output_weights [2, hidden], output_bias [2]

`width` is the embedding tables' (hidden, or ALBERT's and small ELECTRAs'
embedding_size: the transform maps back to the tied [vocab, width] table);
the transform's activation is the config's hidden_act, its layer norm the
config's epsilon. Every family's converted masked-LM head has these names.

The next-sentence head trains for BERT, and for the other families of BERT's
pair layout whose checkpoint has one (ALBERT's sentence-order head, converted
to cls/seq_relationship: the data's next-sentence labels then train it on
another question than its own); RoBERTa, XLM-R and checkpoints without the
head (DistilBERT, ELECTRA) train masked LM alone (`learns_next_sentence`).
A checkpoint without the cls/ variables (e.g. a converted Hugging Face
encoder) starts the heads fresh.

The training input is one stream of records that every worker reads the same
way (same files, same seeded shuffle); each optimizer micro-step takes the
next `global batch` of it, and worker w's replica r takes its slice of that
batch. So the examples of a step do not depend on how the replicas are spread
over workers and devices, and a restart can skip exactly the batches already
trained on (with the same global batch, in any layout).
"""


import tensorflow as tf

from bert_toolkit import console, fileio
from bert_toolkit.engine import (
    checkpoints,
    hdf5_shards,
    input_pipeline,
    launch,
    metrics,
    model_files,
    model_fn_builder,
    tfrecord_codec,
    training_plan,
)
from bert_toolkit.engine.model_fn_builder import Head
from bert_toolkit.errors import InputError
from bert_toolkit.estimator_compat import tf_estimator
from bert_toolkit.model import fused, modeling, modernbert
from bert_toolkit.tasks.pretraining.data import feature_lengths

tf1 = tf.compat.v1

# Streamed eval counts, summed over batches and replicas (see eval_report).
_COUNT_NAMES = ("masked_lm_correct", "masked_lm_weight", "masked_lm_loss_sum",
                "next_sentence_correct", "next_sentence_count", "next_sentence_loss_sum")


def feature_spec(max_seq_length, max_predictions_per_seq):
    """The reference parsing spec: int64 features, float masked_lm_weights."""
    return input_pipeline.fixed_length_spec(
        feature_lengths(max_seq_length, max_predictions_per_seq),
        float_names=("masked_lm_weights",))


# -- heads -------------------------------------------------------------------------

def gather_indexes(sequence_tensor, positions):
    """The vectors at `positions` of each sequence.

    Args:
      sequence_tensor: [batch, seq, width].
      positions: int [batch, num_positions].
    Returns:
      [batch * num_positions, width].
    """
    batch_size, seq_length, width = modeling.get_shape_list(sequence_tensor, expected_rank=3)
    offsets = tf.reshape(tf.range(batch_size, dtype=tf.int32) * seq_length, [-1, 1])
    flat_positions = tf.reshape(tf.cast(positions, tf.int32) + offsets, [-1])
    return tf.gather(tf.reshape(sequence_tensor, [-1, width]), flat_positions)


def masked_lm_output(config, sequence_output, embedding_table, positions, label_ids,
                     label_weights, compute_dtype=tf.float32, is_training=False):
    """The masked-LM head and its loss (variables under cls/predictions/).

    Args:
      sequence_output: float32 [batch, seq, hidden]; embedding_table: float32
        [vocab, width] (the tied output matrix; width: config.embedding_width).
      positions, label_ids: int [batch, num_predictions]; label_weights: float
        [batch, num_predictions], 1.0 for real predictions and 0.0 for padding.
      compute_dtype: dtype of the two matmuls (the vocabulary projection is a
        large share of the head's cost); the softmax is float32.
      is_training: a bf16 training graph computes the loss as one XLA kernel each
        way (fused.softmax_cross_entropy).
    Returns:
      (loss: float32 scalar, the weighted mean over real predictions;
       per_prediction_loss: float32 [batch * num_predictions];
       log_probs: float32 [batch * num_predictions, vocab]).
    """
    hidden = tf.cast(gather_indexes(sequence_output, positions), compute_dtype)
    with tf1.variable_scope("cls/predictions"):
        with tf1.variable_scope("transform"):
            if config.family.pre_norm:
                # ModernBERT's head: bias-free dense, its GELU, bias-free norm.
                hidden = modernbert.pre_norm_head(hidden, config)
            else:
                hidden = modeling.dense(hidden, config.embedding_width, "dense",
                                        config.initializer_range,
                                        modeling.get_activation(config.hidden_act))
                hidden = modeling.layer_norm(hidden, epsilon=config.layer_norm_eps)
        output_bias = tf1.get_variable("output_bias", [config.vocab_size],
                                       initializer=tf1.zeros_initializer())
    unbiased_logits = tf.matmul(hidden, tf.cast(embedding_table, compute_dtype),
                                transpose_b=True)
    logits = tf.nn.bias_add(tf.cast(unbiased_logits, tf.float32), output_bias)
    label_ids = tf.reshape(label_ids, [-1])
    weights = tf.reshape(tf.cast(label_weights, tf.float32), [-1])
    # -log_probs at the labels, by one kernel that also keeps softmax - one_hot for
    # the gradient. Picking from log_softmax's output instead made the gradient
    # scatter the picks into a zero [predictions, vocab] matrix (2.6% of MiniLM's
    # bf16 step) and then go back through the softmax. log_probs only runs where
    # something reads it (evaluation).
    if modeling.fuses_elementwise(is_training, compute_dtype):
        per_prediction_loss = fused.softmax_cross_entropy(unbiased_logits, output_bias,
                                                          label_ids)
    else:
        per_prediction_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=label_ids, logits=logits)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    # Padding predictions have weight 0; the epsilon covers a batch without any.
    loss = tf.reduce_sum(weights * per_prediction_loss) / (tf.reduce_sum(weights) + 1e-5)
    return loss, per_prediction_loss, log_probs


def next_sentence_output(config, pooled_output, labels):
    """The next-sentence head (variables under cls/seq_relationship/).

    Args:
      pooled_output: float32 [batch, hidden]; labels: int [batch] or [batch, 1],
        0 = B follows A, 1 = B is random.
    Returns:
      (loss: float32 scalar mean; per_example_loss: float32 [batch];
       log_probs: float32 [batch, 2]).
    """
    with tf1.variable_scope("cls/seq_relationship"):
        output_weights = tf1.get_variable(
            "output_weights", [2, config.hidden_size],
            initializer=modeling.create_initializer(config.initializer_range))
        output_bias = tf1.get_variable("output_bias", [2], initializer=tf1.zeros_initializer())
    logits = tf.nn.bias_add(tf.matmul(pooled_output, output_weights, transpose_b=True),
                            output_bias)
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    labels = tf.reshape(labels, [-1])
    per_example_loss = -tf.gather(log_probs, labels, axis=1, batch_dims=1)
    return tf.reduce_mean(per_example_loss), per_example_loss, log_probs


def head_variable_shapes(config, next_sentence=True):
    """name -> shape of the variables the heads add (the next-sentence head's only
    with `next_sentence`)."""
    h, width = config.hidden_size, config.embedding_width
    shapes = {
        "cls/predictions/transform/dense/kernel": [h, width],
        "cls/predictions/transform/dense/bias": [width],
        "cls/predictions/transform/LayerNorm/gamma": [width],
        "cls/predictions/transform/LayerNorm/beta": [width],
        "cls/predictions/output_bias": [config.vocab_size],
    }
    if config.family.pre_norm:  # ModernBERT's transform has no biases
        del shapes["cls/predictions/transform/dense/bias"]
        del shapes["cls/predictions/transform/LayerNorm/beta"]
    if next_sentence:
        shapes.update({"cls/seq_relationship/output_weights": [2, h],
                       "cls/seq_relationship/output_bias": [2]})
    return shapes


def learns_next_sentence(config, init_checkpoint):
    """Whether pretraining trains the next-sentence head: always for BERT (a
    checkpoint without it starts it fresh, as Google's code does); for the other
    families of BERT's pair layout when `init_checkpoint` (a checked prefix, or
    None) holds the head; never for RoBERTa's layout (full sentences, no pairs)."""
    family = config.family
    if family.pair_layout != "bert":
        return False
    if family.name == "bert":
        return True
    if init_checkpoint is None:
        return False
    stored = dict(tf.train.list_variables(init_checkpoint))
    return "cls/seq_relationship/output_weights" in stored


def eval_counts(mlm_log_probs, mlm_ids, mlm_weights, mlm_loss, ns_log_probs, ns_labels,
                ns_loss):
    """float32 [6]: this batch's counts named by _COUNT_NAMES.

    Args:
      mlm_log_probs: [n, vocab]; mlm_ids, mlm_weights, mlm_loss: [n] (n =
        batch * num_predictions). ns_log_probs: [batch, 2]; ns_labels,
        ns_loss: [batch].
    """
    weights = tf.reshape(tf.cast(mlm_weights, tf.float32), [-1])
    mlm_correct = tf.cast(tf.equal(tf.argmax(mlm_log_probs, axis=-1, output_type=tf.int32),
                                   tf.reshape(tf.cast(mlm_ids, tf.int32), [-1])), tf.float32)
    ns_correct = tf.cast(tf.equal(tf.argmax(ns_log_probs, axis=-1, output_type=tf.int32),
                                  tf.reshape(tf.cast(ns_labels, tf.int32), [-1])), tf.float32)
    return tf.stack([
        tf.reduce_sum(weights * mlm_correct), tf.reduce_sum(weights),
        tf.reduce_sum(weights * mlm_loss), tf.reduce_sum(ns_correct),
        tf.cast(tf.size(ns_correct), tf.float32), tf.reduce_sum(ns_loss)])


def make_head_fn(bert_config, training_precision="fp32", inference_precision="fp32",
                 next_sentence=True):
    """The pretraining head_fn for model_fn_builder.build_model_fn: the MLM loss, plus
    the NSP loss with `next_sentence` (see learns_next_sentence)."""
    def head_fn(model, features, mode):
        is_training = mode == tf_estimator.ModeKeys.TRAIN
        compute_dtype = modeling.get_compute_dtype(
            training_precision if is_training else inference_precision)
        mlm_loss, mlm_per_prediction, mlm_log_probs = masked_lm_output(
            bert_config, model.get_sequence_output(), model.get_embedding_table(),
            features["masked_lm_positions"], features["masked_lm_ids"],
            features["masked_lm_weights"], compute_dtype, is_training)
        if next_sentence:
            ns_loss, ns_per_example, ns_log_probs = next_sentence_output(
                bert_config, model.get_pooled_output(), features["next_sentence_labels"])
            predictions = {"next_sentence_log_probs": ns_log_probs}
            logs = {"masked_lm_loss": mlm_loss, "next_sentence_loss": ns_loss}
        else:
            # No sentence head: the eval counts still count the sequences (zeros
            # stand in for its outputs), and eval_report leaves its metrics out.
            batch = tf.shape(features["next_sentence_labels"])[0]
            ns_loss, ns_per_example, ns_log_probs = None, tf.zeros([batch]), tf.zeros([batch, 2])
            predictions = {"masked_lm_predictions": tf.reshape(
                tf.argmax(mlm_log_probs, axis=-1, output_type=tf.int32), [batch, -1])}
            logs = {"masked_lm_loss": mlm_loss}
        eval_metric_ops = None
        if mode == tf_estimator.ModeKeys.EVAL:
            eval_metric_ops = {"pretraining_counts": metrics.streaming_counts(
                "pretraining_counts", [len(_COUNT_NAMES)], eval_counts(
                    mlm_log_probs, features["masked_lm_ids"], features["masked_lm_weights"],
                    mlm_per_prediction, ns_log_probs, features["next_sentence_labels"],
                    ns_per_example))}
        return Head(loss=mlm_loss + ns_loss if next_sentence else mlm_loss,
                    predictions=predictions, eval_metric_ops=eval_metric_ops,
                    serving_outputs=predictions, training_logs=logs)
    return head_fn


def eval_report(results, next_sentence=True):
    """The four reference metrics (and counts) from Estimator.evaluate's results; the
    masked-LM ones alone without `next_sentence`."""
    counts = dict(zip(_COUNT_NAMES, [float(c) for c in results["pretraining_counts"]]))
    mlm_weight = max(counts["masked_lm_weight"], 1e-9)
    ns_count = max(counts["next_sentence_count"], 1e-9)
    report = {
        "masked_lm_accuracy": counts["masked_lm_correct"] / mlm_weight,
        "masked_lm_loss": counts["masked_lm_loss_sum"] / mlm_weight,
        "next_sentence_accuracy": counts["next_sentence_correct"] / ns_count,
        "next_sentence_loss": counts["next_sentence_loss_sum"] / ns_count,
        "loss": float(results.get("loss", 0.0)),
        "global_step": int(results.get("global_step", 0)),
        "num_masked_predictions": int(round(counts["masked_lm_weight"])),
        "num_sequences": int(round(counts["next_sentence_count"])),
    }
    if not next_sentence:
        del report["next_sentence_accuracy"], report["next_sentence_loss"]
    return report


# -- input ---------------------------------------------------------------------------

def check_records(path, max_seq_length, max_predictions_per_seq):
    """Reads the first record of `path`; InputError unless it fits the flags.

    Catches data made with another --max_seq_length / --max_predictions_per_seq
    (or not made by create_pretraining_data.py at all) before training starts.
    NVIDIA's hdf5 shards are checked by their datasets' shapes (hdf5_shards).
    """
    if hdf5_shards.is_hdf5(path):
        hdf5_shards.check_shard(path, max_seq_length, max_predictions_per_seq)
        return
    try:
        # Read by hand rather than with tf.data, so that checking the input does
        # not start TensorFlow's runtime (a multi-worker strategy must come first).
        first = tfrecord_codec.read_first_record(path, tf.io.gfile.GFile)
    except tf.errors.OpError as e:
        raise InputError("%s: cannot read it (%s)" % (path, " ".join(str(e.message).split())))
    try:
        example = tf.train.Example.FromString(first)
    except Exception:  # noqa: BLE001 - any decoding failure means "not an Example"
        raise InputError("%s: the first record is not a tf.train.Example" % path)
    features = example.features.feature
    flag_of = {"input_ids": "max_seq_length", "masked_lm_positions": "max_predictions_per_seq"}
    for name, length in feature_lengths(max_seq_length, max_predictions_per_seq).items():
        if name not in features:
            raise InputError("%s: records have no feature %r (expected the features of "
                             "create_pretraining_data.py)" % (path, name))
        kind = features[name].WhichOneof("kind")
        values = getattr(features[name], kind).value if kind else []
        if len(values) != length:
            flag = flag_of.get(name, "max_seq_length" if length == max_seq_length
                               else "max_predictions_per_seq")
            raise InputError("%s: records have %s of length %d but --%s=%d (they were "
                             "written with --%s=%d; pass the value the data was made with)"
                             % (path, name, len(values), flag, length, flag, len(values)))


def make_train_input_fn(files, max_seq_length, max_predictions_per_seq,
                        per_replica_batch_size, skip_global_batches=0, seed=12345,
                        shuffle_buffer=10000):
    """The training input_fn: one shared, shuffled stream, sliced per replica.

    Every worker reads the same files in the same order and shuffles them
    with the same seed, so all see one stream. Micro-step t uses global batch
    t of it (per_replica_batch_size * replicas records); this worker keeps the
    slice of its replicas, which take consecutive per-replica batches.

    The files are TFRecords, or NVIDIA's hdf5 shards (hdf5_shards: the same
    stream of examples, each a packed row until its batch is cut into features).

    Returns input_fn(params, input_context) -> dataset of dicts of
    [per_replica_batch_size, length] tensors (int32, float32 weights).
    """
    spec = feature_spec(max_seq_length, max_predictions_per_seq)
    hdf5 = hdf5_shards.all_hdf5(files)

    def parse(serialized):
        if hdf5:
            return hdf5_shards.unpack_batch(serialized, max_seq_length,
                                            max_predictions_per_seq)
        parsed = tf.io.parse_example(serialized, spec)
        return {name: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t
                for name, t in parsed.items()}

    def input_fn(params=None, input_context=None):
        del params
        num_pipelines, pipeline_id, num_replicas = 1, 0, 1
        if input_context is not None:
            num_pipelines = input_context.num_input_pipelines
            pipeline_id = input_context.input_pipeline_id
            num_replicas = input_context.num_replicas_in_sync
        local_replicas = num_replicas // num_pipelines
        global_batch = per_replica_batch_size * num_replicas
        dataset = (hdf5_shards.packed_rows_dataset(files, max_seq_length,
                                                   max_predictions_per_seq)
                   if hdf5 else tf.data.TFRecordDataset(files))
        dataset = dataset.repeat()
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.batch(global_batch, drop_remainder=True)
        if skip_global_batches:
            dataset = dataset.skip(skip_global_batches)  # serialized: cheap
        if num_pipelines > 1 or local_replicas > 1:
            start = pipeline_id * local_replicas * per_replica_batch_size
            size = local_replicas * per_replica_batch_size
            dataset = dataset.map(lambda batch: batch[start:start + size]).unbatch()
            dataset = dataset.batch(per_replica_batch_size, drop_remainder=True)
        dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        return dataset.prefetch(tf.data.AUTOTUNE)

    return input_fn


def make_eval_input_fn(files, max_seq_length, max_predictions_per_seq, batch_size):
    """The eval input_fn: the records (or hdf5 rows) in order, once, in batches per
    replica."""
    if hdf5_shards.all_hdf5(files, "eval_input_file"):
        return hdf5_shards.make_eval_input_fn(files, max_seq_length, max_predictions_per_seq,
                                              batch_size)
    return input_pipeline.make_input_fn(files, feature_spec(max_seq_length,
                                                            max_predictions_per_seq),
                                        batch_size, is_training=False)


# -- the run --------------------------------------------------------------------------

def run(options):
    """run_pretraining.py: trains and/or evaluates as PretrainingOptions say, on the
    shared engine (engine/launch.py: cluster, devices, peak, lock, progress log,
    stop on a signal); returns the launch.Report."""
    if options.num_warmup_steps > options.num_train_steps:
        # Google's script accepts this (the rate then never reaches its peak).
        console.warning("--num_warmup_steps=%d is more than --num_train_steps=%d: the "
                        "learning rate stays in warmup for the whole run",
                        options.num_warmup_steps, options.num_train_steps)
    placement = launch.place(options, options.do_train)
    model_inputs, input_files, eval_files = read_inputs(options)
    bert_config = model_inputs.bert_config
    next_sentence = learns_next_sentence(bert_config, model_inputs.init_checkpoint)
    if not next_sentence:
        console.info("%s: masked LM alone (%s)", bert_config.family.name,
                     "no sentence pairs in its layout" if bert_config.family.pair_layout
                     != "bert" else "the checkpoint has no next-sentence head")
    plan = training_plan.plan_steps(options.num_train_steps, options.num_warmup_steps,
                                    options.train_batch_size, launch.num_replicas(placement),
                                    options.gradient_accumulation_steps)
    checkpoints.check_resumable(options.output_dir, dict(
        modeling.bert_variable_shapes(bert_config),
        **head_variable_shapes(bert_config, next_sentence)),
        plan if options.do_train else None)
    if not options.do_train:
        checkpoints.require_trained_model(options.output_dir, "evaluation")
    launch.claim(options.output_dir, placement)
    runtime, chief = placement.runtime, launch.is_chief(placement)
    model_fn = model_fn_builder.build_model_fn(
        bert_config,
        make_head_fn(bert_config,
                     model_fn_builder.graph_precision(runtime.precision, runtime.graph_rewrite),
                     runtime.inference_precision, next_sentence),
        plan, init_checkpoint=model_inputs.init_checkpoint, log_per_replica=True,
        **launch.model_fn_settings(options, placement))
    estimator = launch.make_estimator(options, placement, model_fn)
    console.info(launch.describe(options, placement))
    report = launch.Report(options.output_dir)
    if options.do_train:
        train(estimator, options, placement, model_fn, plan, input_files)
    if chief:
        report.checkpoint = checkpoints.latest_checkpoint(options.output_dir)
        if options.do_eval:
            report.eval = evaluate(estimator, options, eval_files, next_sentence)
    return report


def read_inputs(options):
    """(model inputs, training files, eval files), every one checked."""
    input_files = fileio.expand_patterns(options.input_file, "input_file")
    eval_files = (fileio.expand_patterns(options.eval_input_file, "eval_input_file")
                  if options.eval_input_file else input_files)
    # Every hdf5 shard: its shapes are read without touching the rows.
    checked = [paths if hdf5_shards.all_hdf5(paths, flag) else paths[:1]
               for paths, flag in ((input_files, "input_file"), (eval_files, "eval_input_file"))]
    for path in sorted(set(checked[0] + checked[1])):
        check_records(path, options.max_seq_length, options.max_predictions_per_seq)
    fileio.check_folder(options.output_dir, "output_dir")
    model_inputs = model_files.load_model_inputs(options, head_variable_shapes,
                                                 with_tokenizer=False)
    return model_inputs, input_files, eval_files


def train(estimator, options, placement, model_fn, plan, input_files):
    """Trains to the plan's steps, resuming after the global batches already trained."""
    skip = checkpoints.resume_position(options.output_dir, plan)
    if skip is None:
        return
    input_fn = make_train_input_fn(
        input_files, options.max_seq_length, options.max_predictions_per_seq,
        options.train_batch_size, skip_global_batches=skip, seed=options.seed,
        shuffle_buffer=options.shuffle_buffer_size)
    console.info(training_plan.describe_step_plan(plan))
    stop = min(options.stop_at_step or plan.num_train_steps, plan.num_train_steps)
    if stop < plan.num_train_steps:
        console.info("training stops at step %d; the learning-rate schedule runs to step %d "
                     "(--stop_at_step)", stop, plan.num_train_steps)
    launch.train_to(estimator, options, placement, model_fn, input_fn, stop)


def evaluate(estimator, options, eval_files, next_sentence=True):
    """Writes eval_results.{json,txt} of the latest checkpoint and returns the report."""
    results = estimator.evaluate(
        make_eval_input_fn(eval_files, options.max_seq_length,
                           options.max_predictions_per_seq, options.eval_batch_size),
        steps=options.max_eval_steps)
    report = eval_report(results, next_sentence)
    fileio.write_results(report, options.output_dir, "eval_results")
    console.info("eval: %s", ", ".join("%s %.4f" % (key, report[key]) for key in (
        "masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
        "next_sentence_loss") if key in report))
    return report
