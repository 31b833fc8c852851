"""The training op: AdamW (or LAMB), warmup + decay, clipping, accumulation, loss scaling.

`create_train_op` is called inside a model_fn, once per replica when a
MirroredStrategy is in use. Each replica computes the gradient of its own loss;
the gradients are summed across replicas in one cross-replica step
(`merge_call`), and every decision taken from them (the global norm, whether
they are finite, whether this micro-batch closes an accumulation cycle) is made
once, so all replicas apply the same update.

One call of the train op processes one micro-batch per replica:

- gradient accumulation: with `accumulation_steps=N`, each replica adds its
  gradient to a replica-local buffer, with no communication, and only the N-th
  call sums the buffers across replicas (one all-reduce per optimizer update,
  not per micro-batch: on R GPUs or nodes that is 1 instead of N transfers of
  every gradient) and updates the weights. The reduction sits under a
  conditional on the accumulation counter, which every replica and worker
  advances in lockstep, so they all enter it on the same call. `global_step`
  counts optimizer updates, so the learning-rate schedule and
  `num_train_steps` are in updates.
- fp16: the loss is multiplied by a dynamic loss scale before differentiation.
  An update whose summed gradient is not finite is skipped entirely (weights and
  Adam moments keep their values) and the scale is halved; after
  `loss_scale_window` finite updates in a row it doubles. This works with any
  number of replicas, because the finiteness test runs on the all-reduced sum.
- bf16 and fp32 need no loss scale; a non-finite update is skipped there too.

Variables created here (all saved in checkpoints, so resuming is exact):
`<var>/adam_m`, `<var>/adam_v` (the names of Google's optimizer),
`<var>/accum_grad` (replica-local, only with accumulation), `accum_counter`,
`loss_scale`, `loss_scale_good_steps`.
"""

import collections
import re

import tensorflow as tf

from bert_toolkit import tensorflow_env
from bert_toolkit.model import modeling

tf1 = tf.compat.v1

_NO_DECAY_PATTERNS = ("LayerNorm", "layer_norm", "bias")

TrainOp = collections.namedtuple("TrainOp", [
    "learning_rate", "train_op", "gradient_norm", "loss_scale", "update_applied",
    "cycle_closed"])
"""What `create_train_op` returns: the op and scalars for logging. gradient_norm
(float32) is the clipped update's norm before clipping, NaN on a call that only
accumulates; loss_scale (float32) is the scale after the call's update, the one
the next call runs with; update_applied and cycle_closed are bools (a closed cycle
whose gradient is not finite is skipped)."""

ALL_REDUCE_SCOPE = "gradient_all_reduce"
"""The name scope of the cross-replica gradient sum (tests count its ops)."""


def learning_rate_schedule(global_step, init_lr, num_train_steps, num_warmup_steps,
                           end_lr=0.0, power=1.0):
    """Linear warmup to `init_lr` over `num_warmup_steps`, then polynomial decay.

    The decay runs from step 0 to `num_train_steps` (as in the original BERT),
    so right after warmup the rate is slightly below `init_lr`.

    Args:
      global_step: int64 scalar, the number of optimizer updates so far.
    Returns:
      float32 scalar.
    """
    step = tf.cast(global_step, tf.float32)
    decay_steps = float(max(num_train_steps, 1))
    fraction_left = 1.0 - tf.minimum(step, decay_steps) / decay_steps
    decayed = (init_lr - end_lr) * tf.pow(fraction_left, power) + end_lr
    if not num_warmup_steps:
        return decayed
    warmup = init_lr * step / float(num_warmup_steps)
    return tf.where(step < float(num_warmup_steps), warmup, decayed)


def uses_weight_decay(variable_name, exclude_patterns=_NO_DECAY_PATTERNS):
    """LayerNorm parameters and biases are not decayed."""
    return not any(re.search(pattern, variable_name) for pattern in exclude_patterns)


def _slot(variable, suffix, **kwargs):
    return tf1.get_variable(modeling.variable_name(variable) + "/" + suffix,
                            shape=variable.shape.as_list(), dtype=tf.float32,
                            initializer=tf1.zeros_initializer(), trainable=False, **kwargs)


def _scalar_variable(name, initial_value, dtype):
    return tf1.get_variable(name, shape=[], dtype=dtype, trainable=False,
                            initializer=tf1.constant_initializer(initial_value),
                            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)


@tensorflow_env.xla_kernel
def _adamw_in_place(variable, m, v, gradient, multiplier, learning_rate, weight_decay_rate,
                    beta_1, beta_2, epsilon):
    """One XLA kernel: Google's AdamW step of one variable, its m and v, in place.

    XLA reads the variables' buffers and writes them back where they are, one pass
    over the variable, its gradient and moments: TensorFlow's ops took five (the
    clip multiplier, the decay's product and subtraction, ResourceApplyAdam) and
    allocated two variable-sized temporaries, 1.8x the time for BERT's word
    embedding on a Zen 4 (42 against 23 ms). Traced once per variable shape.

    Args:
      variable, m, v: resource handles of float32 variables (handles, not the
        variables: a mirrored variable's component passed in would be read and
        assigned as the whole mirrored variable, every device's copy at once).
      gradient: float32, the shape of `variable`; multiplied by `multiplier` with
        multiply_no_nan, so a non-finite gradient of a skipped update counts as 0.
      multiplier, learning_rate, weight_decay_rate, beta_1, beta_2, epsilon:
        float32 scalars.
    """
    def read(handle):
        return tf.raw_ops.ReadVariableOp(resource=handle, dtype=tf.float32)

    g = tf.math.multiply_no_nan(gradient, multiplier)
    weights = read(variable)
    next_m = beta_1 * read(m) + (1.0 - beta_1) * g
    next_v = beta_2 * read(v) + (1.0 - beta_2) * tf.square(g)
    update = next_m / (tf.sqrt(next_v) + epsilon) + weight_decay_rate * weights
    for handle, value in ((m, next_m), (v, next_v), (variable, weights - learning_rate * update)):
        tf.raw_ops.AssignVariableOp(resource=handle, value=value)
    # An output to take the call's op from: a graph-mode call of a function that
    # returns nothing returns None.
    return tf.constant(True)


def _fused_adamw_update(variable, gradient, m, v, learning_rate, weight_decay_rate, beta_1,
                        beta_2, epsilon, multiplier=1.0):
    """Google's AdamW update of one variable, in place (_adamw_in_place).

    The same arithmetic as _adam_update's "adamw" branch, with no variable-sized
    temporaries: the unfused update allocated a dozen per step (for the 47 MB word
    embedding of a BERT vocabulary, most of a small-batch step went to allocating
    and faulting in that memory).

    Args:
      gradient: float32, the shape of `variable`, scaled by `multiplier` (the
        clip and mean) inside the kernel.
      learning_rate, beta_1, beta_2: float32 scalars. An update to skip passes a
        learning rate of 0, betas of 1 and a multiplier of 0: m, v and the variable
        then stay bit for bit as they were. (A tf.cond per variable and device did
        the same, but building them took a tenth of building the training graph.)
    Returns:
      The update op.
    """
    if not (weight_decay_rate and uses_weight_decay(modeling.variable_name(variable))):
        weight_decay_rate = 0.0
    scalars = [tf.cast(value, tf.float32) for value in (
        multiplier, learning_rate, weight_decay_rate, beta_1, beta_2, epsilon)]
    return _adamw_in_place(variable.handle, m.handle, v.handle, gradient, *scalars).op


def _adam_update(variable, gradient, m, v, learning_rate, apply_update, optimizer,
                 weight_decay_rate, beta_1, beta_2, epsilon, step):
    """Builds the gated LAMB update of one variable (one device's copy); with
    optimizer "adamw", the unfused form of _fused_adamw_update (which training
    uses; bench/ablation_bench.py measures this one against it).

    Args:
      gradient: float32, same shape as `variable`, already averaged and clipped.
      apply_update: bool scalar; where False every assignment keeps the old value.
      step: float32 scalar, 1-based update number (LAMB's bias correction).
    Returns:
      The group of the three assignments.
    """
    next_m = beta_1 * m + (1.0 - beta_1) * gradient
    next_v = beta_2 * v + (1.0 - beta_2) * tf.square(gradient)
    if optimizer == "lamb":
        m_hat = next_m / (1.0 - tf.pow(beta_1, step))
        v_hat = next_v / (1.0 - tf.pow(beta_2, step))
        update = m_hat / (tf.sqrt(v_hat) + epsilon)
    else:
        # Google's AdamW: no bias correction (kept so results match the original).
        update = next_m / (tf.sqrt(next_v) + epsilon)
    if weight_decay_rate and uses_weight_decay(modeling.variable_name(variable)):
        update += weight_decay_rate * variable
    if optimizer == "lamb":
        weight_norm = tf.norm(variable)
        update_norm = tf.norm(update)
        trust_ratio = tf.where((weight_norm > 0.0) & (update_norm > 0.0),
                               weight_norm / update_norm, 1.0)
        update *= trust_ratio
    next_variable = variable - learning_rate * update
    # tf.where, not a multiply: a NaN in a skipped update must not leak through.
    return tf.group(
        variable.assign(tf.where(apply_update, next_variable, variable)),
        m.assign(tf.where(apply_update, next_m, m)),
        v.assign(tf.where(apply_update, next_v, v)))


def create_train_op(loss, init_lr, num_train_steps, num_warmup_steps,
                    accumulation_steps=1, precision="fp32", optimizer="adamw",
                    weight_decay_rate=0.01, clip_norm=1.0, beta_1=0.9, beta_2=0.999,
                    epsilon=1e-6, initial_loss_scale=2.0 ** 15, loss_scale_window=2000,
                    tvars=None):
    """Builds the op that trains on one micro-batch per replica.

    Args:
      loss: float32 scalar, this replica's mean loss over its micro-batch.
      num_train_steps, num_warmup_steps: in optimizer updates (not micro-batches).
      accumulation_steps: micro-batches summed into one update.
      precision: "fp32", "bf16" or "fp16" (fp16 enables dynamic loss scaling).
      optimizer: "adamw" or "lamb".
      clip_norm: the global norm the gradient is scaled down to when above it
        (0: no clipping).
      tvars: variables to train (default: all trainable variables).
    Returns:
      A `TrainOp` (train_op plus float32 scalars for logging).

    Longer than the rest on purpose: `cross_replica_step` runs inside one
    merge_call and closes over the per-replica state built above it (slots,
    buffers, counters); passing that state through arguments would only move
    the same lines into a signature.
    """
    if optimizer not in ("adamw", "lamb"):
        raise ValueError("optimizer must be 'adamw' or 'lamb', got %r" % (optimizer,))
    if accumulation_steps < 1:
        raise ValueError("accumulation_steps must be >= 1, got %r" % (accumulation_steps,))
    use_loss_scale = precision == "fp16"
    replica_context = tf.distribute.get_replica_context()
    num_replicas = replica_context.num_replicas_in_sync

    global_step = tf1.train.get_or_create_global_step()
    tvars = tf1.trainable_variables() if tvars is None else tvars
    loss_scale = _scalar_variable("loss_scale",
                                  initial_loss_scale if use_loss_scale else 1.0, tf.float32)
    good_steps = _scalar_variable("loss_scale_good_steps", 0, tf.int64)
    accum_counter = _scalar_variable("accum_counter", 0, tf.int64)

    scaled_loss = loss * loss_scale if use_loss_scale else loss
    gradients = tf1.gradients(scaled_loss, tvars)
    # Variables the loss does not reach (e.g. an unused pooler) are left alone.
    trained = [(g, v) for g, v in zip(gradients, tvars) if g is not None]
    if not trained:
        raise ValueError("the loss does not depend on any trainable variable")
    gradients = [tf.convert_to_tensor(tf.cast(g, tf.float32)) for g, _ in trained]
    tvars = [v for _, v in trained]
    moments = [(_slot(v, "adam_m"), _slot(v, "adam_v")) for v in tvars]

    if accumulation_steps > 1:
        buffers = [_slot(v, "accum_grad",
                         synchronization=tf.VariableSynchronization.ON_READ,
                         aggregation=tf.VariableAggregation.SUM) for v in tvars]
        totals = [b.read_value() + g for b, g in zip(buffers, gradients)]
    else:
        buffers = None
        totals = gradients

    learning_rate = learning_rate_schedule(global_step, init_lr, num_train_steps,
                                           num_warmup_steps)

    def reduce_and_update(strategy, per_replica_totals):
        """Sums the accumulated gradients across replicas (the one all-reduce of
        an update), decides once, and updates every copy alike. Returns
        (gradient_norm, apply_update)."""
        with tf.name_scope(ALL_REDUCE_SCOPE):
            summed = strategy.extended.batch_reduce_to(
                tf.distribute.ReduceOp.SUM, list(zip(per_replica_totals, tvars)))
        # The mean gradient over all replicas and micro-batches, loss scale removed.
        scale = 1.0 / (tf.cast(accumulation_steps * num_replicas, tf.float32) * loss_scale)
        gradient_norm = tf.linalg.global_norm(summed) * scale
        # A non-finite element makes the norm inf or NaN, so one test covers all.
        is_finite = tf.math.is_finite(gradient_norm)
        clip_ratio = tf.where(gradient_norm > clip_norm,
                              clip_norm / tf.maximum(gradient_norm, 1e-12), 1.0) \
            if clip_norm else 1.0
        multiplier = scale * tf.where(is_finite, clip_ratio, 0.0)
        step = tf.cast(global_step + 1, tf.float32)
        # A skipped AdamW update has rate 0 and betas 1 (see _fused_adamw_update).
        adamw_rate, adamw_beta_1, adamw_beta_2 = [
            tf.where(is_finite, value, if_skipped)
            for value, if_skipped in ((learning_rate, 0.0), (beta_1, 1.0), (beta_2, 1.0))]

        def update_one(var, g, m_, v_):
            """One device's copy of one variable."""
            if optimizer == "adamw":
                return _fused_adamw_update(var, g, m_, v_, adamw_rate, weight_decay_rate,
                                           adamw_beta_1, adamw_beta_2, epsilon, multiplier)
            return _adam_update(var, g * multiplier, m_, v_, learning_rate, is_finite,
                                optimizer, weight_decay_rate, beta_1, beta_2, epsilon, step)

        updates = [strategy.extended.update(variable, update_one, args=(gradient, m, v),
                                            group=True)
                   for gradient, variable, (m, v) in zip(summed, tvars, moments)]
        if buffers is not None:
            # After the updates, which come after the sum that read the buffers: a
            # control dependency on a value from outside this branch would be
            # dropped (the branch is a function, its inputs count as ready).
            with tf.control_dependencies(updates):
                updates += [strategy.extended.update(b, _emptied, group=True) for b in buffers]
        if use_loss_scale:
            with tf.control_dependencies(updates):
                updates += _loss_scale_updates(strategy, loss_scale, good_steps, is_finite,
                                               loss_scale_window)
        with tf.control_dependencies(updates):
            return tf.identity(gradient_norm), tf.identity(is_finite)

    def cross_replica_step(strategy, per_replica_totals):
        """Runs once for all replicas. Only the micro-batch that closes an
        accumulation cycle communicates: the others add to their replica's
        buffer. The condition is the same on every replica and worker (the
        counter moves in lockstep), so all of them enter the all-reduce together
        or none does."""
        if buffers is None:
            gradient_norm, apply_update = reduce_and_update(strategy, per_replica_totals)
            closes_cycle = tf.constant(True)
        else:
            closes_cycle = accum_counter + 1 >= accumulation_steps

            def keep_accumulating():
                kept = [strategy.extended.update(b, lambda b_, t: b_.assign(t), args=(total,),
                                                 group=True)
                        for b, total in zip(buffers, per_replica_totals)]
                with tf.control_dependencies(kept):
                    # No norm without a sum: NaN says "no update on this call".
                    return tf.constant(float("nan")), tf.constant(False)

            gradient_norm, apply_update = tf.cond(
                closes_cycle, lambda: reduce_and_update(strategy, per_replica_totals),
                keep_accumulating)
        with tf.control_dependencies([gradient_norm, apply_update]):
            bookkeeping = [
                strategy.extended.update(
                    global_step,
                    lambda s: s.assign_add(tf.cast(closes_cycle, s.dtype)), group=True)]
            if buffers is not None:
                bookkeeping.append(strategy.extended.update(
                    accum_counter,
                    lambda c: c.assign(tf.where(closes_cycle, tf.constant(0, tf.int64),
                                                c + 1)), group=True))
        with tf.control_dependencies(bookkeeping):
            # Read after the update: unordered, the read raced it (the value of
            # either side of the update came back, depending on the op schedule).
            scale_after = tf.identity(loss_scale)
        return tf.group(bookkeeping), gradient_norm, scale_after, apply_update, closes_cycle

    return TrainOp(learning_rate, *replica_context.merge_call(cross_replica_step,
                                                              args=(totals,)))


def _emptied(buffer):
    return buffer.assign(tf.zeros_like(buffer))


def _loss_scale_updates(strategy, loss_scale, good_steps, is_finite, window):
    """Dynamic loss scale at the end of a cycle: halve on overflow, double
    after `window` clean updates."""
    good_after = tf.where(is_finite, good_steps + 1, tf.constant(0, tf.int64))
    grow = good_after >= window
    next_scale = tf.where(is_finite,
                          tf.where(grow, loss_scale * 2.0, loss_scale),
                          tf.maximum(loss_scale * 0.5, 1.0))
    next_good = tf.where(grow, tf.constant(0, tf.int64), good_after)
    return [strategy.extended.update(loss_scale, lambda s: s.assign(next_scale), group=True),
            strategy.extended.update(good_steps, lambda g: g.assign(next_good), group=True)]


def create_optimizer(loss, init_lr, num_train_steps, num_warmup_steps, use_tpu=False,
                     **options):
    """The original BERT signature: returns only the train op (`use_tpu` is ignored)."""
    del use_tpu
    return create_train_op(loss, init_lr, num_train_steps, num_warmup_steps,
                           **options).train_op
