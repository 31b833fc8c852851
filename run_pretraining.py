"""Pre-trains BERT (masked LM + next sentence) on create_pretraining_data.py records.

Google's run_pretraining.py command lines work unchanged; the shared flags of
common_flags.py add devices, precision, accumulation, XLA and LAMB. With a
TF_CONFIG naming a cluster, every worker runs this same command and they
train synchronously (MultiWorkerMirroredStrategy); the chief writes
checkpoints, summaries and eval results. See docs/pretraining.md.
"""

import tensorflow_env  # noqa: F401  (first: TensorFlow reads its settings once)

import tensorflow as tf
from absl import flags

import console
import common_flags
import distribution
import fileio
import modeling
import pretraining
import run_options
import run_setup
import training
from errors import InputError

tf1 = tf.compat.v1
FLAGS = flags.FLAGS

common_flags.define_model_flags()
common_flags.define_run_flags()
flags.DEFINE_string("input_file", None,
                    "TFRecord files from create_pretraining_data.py: comma-separated files "
                    "or globs.")
flags.DEFINE_string("eval_input_file", None,
                    "Records to evaluate on (default: --input_file, as in the original).")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Masked-LM predictions per sequence; must match the data.")
flags.DEFINE_integer("num_train_steps", 100000, "Optimizer steps to train.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Optimizer steps of learning-rate warmup.")
flags.DEFINE_integer("max_eval_steps", 100, "Most evaluation batches (per replica).")
flags.DEFINE_integer("shuffle_buffer_size", 10000,
                     "Records in the training shuffle buffer (the data are only shuffled "
                     "locally when written).")


def check_flags():
    """The pre-training flags RunOptions does not hold; InputError before any write."""
    common_flags.require_flags("input_file")
    run_options.check_whole_numbers({name: FLAGS[name].value for name in (
        "max_predictions_per_seq", "num_train_steps", "max_eval_steps", "shuffle_buffer_size")})
    run_options.check_whole_numbers({"num_warmup_steps": FLAGS.num_warmup_steps}, minimum=0)
    if FLAGS.num_warmup_steps > FLAGS.num_train_steps:
        # Google's script accepts this (the rate then never reaches its peak).
        console.warning("--num_warmup_steps=%d is more than --num_train_steps=%d: the "
                            "learning rate stays in warmup for the whole run",
                            FLAGS.num_warmup_steps, FLAGS.num_train_steps)
    if FLAGS.max_seq_length < 5:
        raise InputError("--max_seq_length must be >= 5, got %d" % FLAGS.max_seq_length)


def train(options, model_fn, runtime, cluster, strategy, plan, input_files):
    skip = run_setup.resume_position(options.output_dir, plan)
    if skip is None:
        return
    input_fn = pretraining.make_train_input_fn(
        input_files, options.max_seq_length, FLAGS.max_predictions_per_seq,
        options.train_batch_size, skip_global_batches=skip, seed=options.seed,
        shuffle_buffer=FLAGS.shuffle_buffer_size)
    console.info(distribution.describe_step_plan(plan))
    if cluster is None:
        estimator = distribution.make_estimator(options, runtime, model_fn)
        training.train(estimator, input_fn, plan.num_train_steps)
        return
    distribution.train_on_cluster(options, cluster, strategy, runtime.devices, model_fn,
                                  input_fn, plan.num_train_steps)


def evaluate(options, model_fn, runtime, eval_files):
    estimator = distribution.make_estimator(options, runtime, model_fn)
    results = estimator.evaluate(
        pretraining.make_eval_input_fn(eval_files, options.max_seq_length,
                                       FLAGS.max_predictions_per_seq, options.eval_batch_size),
        steps=FLAGS.max_eval_steps)
    report = pretraining.eval_report(results)
    fileio.write_results(report, options.output_dir, "eval_results")
    console.info("eval: %s", ", ".join("%s %.4f" % (k, report[k]) for k in (
        "masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
        "next_sentence_loss")))


def read_inputs(options):
    """(model inputs, training files, eval files), every one checked."""
    input_files = fileio.expand_patterns(FLAGS.input_file, "input_file")
    eval_files = (fileio.expand_patterns(FLAGS.eval_input_file, "eval_input_file")
                  if FLAGS.eval_input_file else input_files)
    for path in sorted(set(input_files[:1] + eval_files[:1])):
        pretraining.check_records(path, options.max_seq_length, FLAGS.max_predictions_per_seq)
    fileio.check_folder(options.output_dir, "output_dir")
    model_inputs = run_setup.load_model_inputs(options, pretraining.head_variable_shapes,
                                               with_tokenizer=False)
    return model_inputs, input_files, eval_files


def main(_):
    options = common_flags.read_run_options()
    cluster = distribution.join_cluster(options)
    if cluster is not None:
        console.info(cluster.description)
    check_flags()
    runtime = distribution.cluster_runtime(options, cluster)
    strategy = None
    if cluster is not None and options.do_train:
        # Before anything else runs TensorFlow ops: the strategy configures
        # the runtime's collective ops and starts this worker's server.
        strategy = distribution.make_multi_worker_strategy(options.use_gpu)
    model_inputs, input_files, eval_files = read_inputs(options)
    bert_config = model_inputs.bert_config
    num_workers = cluster.num_workers if cluster else 1
    plan = distribution.plan_steps(FLAGS.num_train_steps, FLAGS.num_warmup_steps,
                                   options.train_batch_size, num_workers * len(runtime.devices),
                                   options.gradient_accumulation_steps)
    run_setup.check_resumable(options.output_dir, dict(
        modeling.bert_variable_shapes(bert_config),
        **pretraining.head_variable_shapes(bert_config)), plan if options.do_train else None)
    if not options.do_train:
        run_setup.require_trained_model(options.output_dir, "evaluation")

    is_chief = cluster is None or cluster.is_chief
    if is_chief:
        # Workers share the chief's output_dir; the chief holds it for the cluster.
        run_setup.lock_output_dir(options.output_dir)
    peak = distribution.matmul_peak(options, runtime) if options.do_train else None
    model_fn = training.build_model_fn(
        bert_config,
        pretraining.make_head_fn(bert_config, runtime.precision, runtime.inference_precision),
        plan, init_checkpoint=model_inputs.init_checkpoint,
        learning_rate=options.learning_rate, precision=runtime.precision,
        inference_precision=runtime.inference_precision, optimizer=options.optimizer,
        weight_decay_rate=options.weight_decay_rate,
        log_every_n_steps=options.log_every_n_steps,
        output_dir=options.output_dir if is_chief else None, log_per_replica=True,
        show_progress=is_chief,
        step_timeout_seconds=options.step_timeout_seconds, matmul_peak_flops=peak)
    console.info("%s; local devices %s, precision %s (inference %s)%s",
                     "worker %d of %d (%s)" % (cluster.worker_index, num_workers,
                                               "chief" if is_chief else "not chief")
                     if cluster else "single process",
                     ",".join(runtime.devices), runtime.precision,
                     runtime.inference_precision, distribution.describe_peak(peak))
    if options.do_train:
        train(options, model_fn, runtime, cluster, strategy, plan, input_files)
    if options.do_eval and is_chief:
        evaluate(options, model_fn, runtime, eval_files)


if __name__ == "__main__":
    common_flags.run_script(main)
