import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit.model import modeling, optimization

from tiny import cpu_session, cpu_strategy, tiny_config

tf1 = tf.compat.v1

SEQ = 6


def build_training(num_replicas, per_replica_batch, precision="fp32", accumulation_steps=1,
                   optimizer="adamw", loss_scale_window=2000, init_lr=1e-3,
                   initial_loss_scale=2.0 ** 15):
    """A tiny BERT classifier trained by `create_train_op` under a strategy.

    The graph takes the whole step's examples in one placeholder
    [num_replicas * per_replica_batch, SEQ]; replica r trains on its slice.
    Returns (graph, placeholders dict, fetches dict).
    """
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(7)
        strategy = cpu_strategy(num_replicas)
        ids = tf1.placeholder(tf.int32, [num_replicas * per_replica_batch, SEQ])
        labels = tf1.placeholder(tf.int32, [num_replicas * per_replica_batch])
        poison_replica = tf1.placeholder_with_default(-1, [])

        def replica_step():
            context = tf.distribute.get_replica_context()
            start = context.replica_id_in_sync_group * per_replica_batch
            my_ids = ids[start:start + per_replica_batch]
            my_labels = labels[start:start + per_replica_batch]
            model = modeling.BertModel(tiny_config(), True, my_ids,
                                       compute_dtype=modeling.get_compute_dtype(precision))
            weights = tf1.get_variable("output_weights", [3, 32],
                                       initializer=tf1.truncated_normal_initializer(0.02))
            logits = tf.matmul(model.get_pooled_output(), weights, transpose_b=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=my_labels, logits=logits))
            # Multiplying (not tf.where-selecting) keeps the gradient finite when unpoisoned.
            poisoned = tf.equal(context.replica_id_in_sync_group, poison_replica)
            loss *= tf.where(poisoned, np.inf, 1.0)
            step = optimization.create_train_op(
                loss, init_lr, num_train_steps=100, num_warmup_steps=0,
                accumulation_steps=accumulation_steps, precision=precision,
                optimizer=optimizer, loss_scale_window=loss_scale_window,
                initial_loss_scale=initial_loss_scale)
            return step.train_op, step.gradient_norm, step.loss_scale, loss

        with strategy.scope():
            tf1.train.get_or_create_global_step()
            train_op, norm, scale, loss = strategy.extended.call_for_each_replica(replica_step)
            loss = strategy.reduce(tf.distribute.ReduceOp.MEAN, loss, axis=None)
            norm = strategy.experimental_local_results(norm)[0]
            scale = strategy.experimental_local_results(scale)[0]
        init = tf1.global_variables_initializer()
    return graph, dict(ids=ids, labels=labels, poison=poison_replica), dict(
        train_op=train_op, norm=norm, scale=scale, loss=loss, init=init)


def data(total, seed=0):
    rng = np.random.RandomState(seed)
    return rng.randint(1, 64, size=(total, SEQ)), rng.randint(0, 3, size=total)


def component_values(graph, sess):
    """name -> list of per-device values of every global variable (replicas unpacked)."""
    with graph.as_default():
        parts = {variable.name: list(getattr(variable, "values", (variable,)))
                 for variable in tf1.global_variables()}
    # One run for all: each run of a new set of fetches prunes and optimises the
    # graph again (a tenth of a second each, hundreds of variables).
    return sess.run(parts)


def bert_weights(values):
    return {k: v for k, v in values.items() if k.startswith("bert/") and "/adam_" not in k
            and "accum" not in k}


def test_learning_rate_warmup_then_linear_decay():
    with tf.Graph().as_default(), tf1.Session() as sess:
        step = tf1.placeholder(tf.int64, [])
        lr = optimization.learning_rate_schedule(step, 1e-3, num_train_steps=100,
                                                 num_warmup_steps=10)
        got = [sess.run(lr, {step: s}) for s in (0, 5, 10, 55, 100, 150)]
    np.testing.assert_allclose(got, [0.0, 5e-4, 9e-4, 4.5e-4, 0.0, 0.0], atol=1e-9)


def test_weight_decay_skips_layer_norm_and_biases():
    assert optimization.uses_weight_decay("bert/encoder/layer_0/output/dense/kernel")
    assert optimization.uses_weight_decay("output_weights")
    assert not optimization.uses_weight_decay("bert/encoder/layer_0/output/dense/bias")
    assert not optimization.uses_weight_decay("bert/embeddings/LayerNorm/gamma")


def google_adamw(weights, gradients, m, v, lr, decays, rate=0.01, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-6):
    """One step of Google's AdamW (optimization.py of google-research/bert) in numpy."""
    m = beta_1 * m + (1 - beta_1) * gradients
    v = beta_2 * v + (1 - beta_2) * gradients ** 2
    update = m / (np.sqrt(v) + epsilon) + (rate * weights if decays else 0.0)
    return weights - lr * update, m, v


def test_the_update_is_googles_adamw_with_clipping_and_decay():
    """Three updates of a decayed kernel and an undecayed bias, the global
    gradient norm clipped to 1.0, against the numpy reference."""
    rng = np.random.RandomState(3)
    start = {"layer/kernel": rng.randn(4, 3).astype(np.float32),
             "layer/bias": rng.randn(3).astype(np.float32)}
    x = rng.randn(5, 4).astype(np.float32)
    graph = tf.Graph()
    with graph.as_default():
        kernel = tf1.get_variable("layer/kernel", initializer=start["layer/kernel"])
        bias = tf1.get_variable("layer/bias", initializer=start["layer/bias"])
        scale = tf1.placeholder(tf.float32, [])  # a large scale makes the clip bite
        loss = scale * tf.reduce_sum(tf.square(tf.matmul(x, kernel) + bias)) / 5.0
        step = optimization.create_train_op(loss, 1e-2, num_train_steps=10,
                                            num_warmup_steps=0)
        gradients = tf1.gradients(loss, [kernel, bias])
        init = tf1.global_variables_initializer()
    weights = dict(start)
    moments = {name: (np.zeros_like(w), np.zeros_like(w)) for name, w in weights.items()}
    with cpu_session(graph) as sess:
        sess.run(init)
        for number, scale_value in enumerate([0.01, 10.0, 0.01]):
            grads = dict(zip(["layer/kernel", "layer/bias"],
                             sess.run(gradients, {scale: scale_value})))
            norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads.values()))
            clip = min(1.0, 1.0 / norm)
            lr = 1e-2 * (1.0 - number / 10.0)
            for name in weights:
                m, v = moments[name]
                weights[name], m, v = google_adamw(weights[name], grads[name] * clip, m, v,
                                                   lr, decays=name.endswith("kernel"))
                moments[name] = (m, v)
            sess.run(step.train_op, {scale: scale_value})
            got = dict(zip(["layer/kernel", "layer/bias"], sess.run([kernel, bias])))
            for name in weights:
                np.testing.assert_allclose(got[name], weights[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("num_replicas,accumulation_steps", [(1, 4), (2, 2)])
def test_accumulated_micro_batches_equal_one_big_batch(num_replicas, accumulation_steps):
    """N micro-batches of size b (over R replicas) update like one batch of N*R*b."""
    micro, updates = 2, 2
    big_batch = micro * accumulation_steps * num_replicas
    ids, labels = data(big_batch * updates)

    graph, ph, fetch = build_training(1, big_batch)
    with cpu_session(graph) as sess:
        sess.run(fetch["init"])
        big_norms = []
        for u in range(updates):
            chunk = slice(u * big_batch, (u + 1) * big_batch)
            big_norms.append(sess.run([fetch["train_op"], fetch["norm"]],
                                      {ph["ids"]: ids[chunk], ph["labels"]: labels[chunk]})[1])
        expected = component_values(graph, sess)

    graph, ph, fetch = build_training(num_replicas, micro,
                                      accumulation_steps=accumulation_steps)
    per_call = micro * num_replicas
    with cpu_session(graph) as sess:
        sess.run(fetch["init"])
        norms = []
        for call in range(updates * accumulation_steps):
            chunk = slice(call * per_call, (call + 1) * per_call)
            _, norm = sess.run([fetch["train_op"], fetch["norm"]],
                               {ph["ids"]: ids[chunk], ph["labels"]: labels[chunk]})
            if call % accumulation_steps == accumulation_steps - 1:
                norms.append(norm)
            elif call == 0:
                # Mid-cycle: nothing has moved yet.
                mid = component_values(graph, sess)
                assert mid["global_step:0"][0] == 0
        got = component_values(graph, sess)

    # The gradient norm is scale-sensitive (Adam's update is not), so it proves
    # the accumulated sum is divided correctly.
    np.testing.assert_allclose(norms, big_norms, rtol=1e-4)
    assert got["global_step:0"][0] == updates
    for name, parts in bert_weights(expected).items():
        for copy in got[name]:  # every replica's copy
            np.testing.assert_allclose(copy, parts[0], atol=2e-5, err_msg=name)


def test_fp16_two_replicas_skip_non_finite_update_and_halve_scale():
    # Scale 2**12 so that no honest step overflows; lr 1e-3 keeps the tiny model stable.
    graph, ph, fetch = build_training(2, 2, precision="fp16", init_lr=1e-3,
                                      initial_loss_scale=2.0 ** 12)
    ids, labels = data(4)
    feed = {ph["ids"]: ids, ph["labels"]: labels}
    with cpu_session(graph) as sess:
        sess.run(fetch["init"])
        before = component_values(graph, sess)
        assert before["loss_scale:0"][0] == 2.0 ** 12
        # Only replica 1 overflows: the all-reduced sum must still veto the update.
        sess.run(fetch["train_op"], {**feed, ph["poison"]: 1})
        after = component_values(graph, sess)
        for name, parts in before.items():
            if name in ("loss_scale:0", "global_step:0", "loss_scale_good_steps:0"):
                continue
            for old, new in zip(parts, after[name]):
                np.testing.assert_array_equal(old, new, err_msg=name)
        assert after["loss_scale:0"] == [2.0 ** 11, 2.0 ** 11]
        # Normal steps then continue and train every replica's copy alike.
        losses = [sess.run([fetch["train_op"], fetch["loss"]], feed)[1] for _ in range(5)]
        final = component_values(graph, sess)
    assert final["loss_scale:0"][0] == 2.0 ** 11
    assert losses[-1] < losses[0]
    for name, parts in bert_weights(final).items():
        assert not np.array_equal(parts[0], before[name][0]), name
        np.testing.assert_array_equal(parts[0], parts[1], err_msg=name)


def test_fp16_loss_scale_grows_after_a_window_of_finite_updates():
    graph, ph, fetch = build_training(1, 2, precision="fp16", loss_scale_window=3,
                                      init_lr=1e-3, initial_loss_scale=2.0 ** 10)
    ids, labels = data(2)
    with cpu_session(graph) as sess:
        sess.run(fetch["init"])
        # The scale after each update: doubled by the third finite one in a row.
        scales = [sess.run([fetch["train_op"], fetch["scale"]],
                           {ph["ids"]: ids, ph["labels"]: labels})[1] for _ in range(4)]
        final = component_values(graph, sess)["loss_scale:0"][0]
    assert scales == [2.0 ** 10] * 2 + [2.0 ** 11] * 2 and final == 2.0 ** 11


# LAMB scales each step by the weight norm, so it wants a larger learning rate.
@pytest.mark.parametrize("precision,optimizer,init_lr",
                         [("bf16", "adamw", 1e-3), ("fp32", "lamb", 2e-2)])
def test_training_lowers_the_loss(precision, optimizer, init_lr):
    graph, ph, fetch = build_training(1, 8, precision=precision, optimizer=optimizer,
                                      init_lr=init_lr)
    ids, labels = data(8)
    with cpu_session(graph) as sess:
        sess.run(fetch["init"])
        losses = [sess.run([fetch["train_op"], fetch["loss"]],
                           {ph["ids"]: ids, ph["labels"]: labels})[1] for _ in range(20)]
    assert losses[-1] < 0.5 * losses[0]


def test_accumulation_all_reduces_once_per_update():
    """Two replicas, 2 micro-batches per update: the cross-replica sum runs on
    the call that closes a cycle and on no other (one reduction per variable
    there), counted in the executed ops of each call's trace."""
    graph, ph, fetch = build_training(2, 2, accumulation_steps=2)
    ids, labels = data(16)
    with graph.as_default():
        trained = len([v for v in tf1.global_variables() if v.name.endswith("/adam_m:0")])
    reductions = []
    with cpu_session(graph) as sess:
        sess.run(fetch["init"])
        for call in range(4):
            chunk = slice(call * 4, (call + 1) * 4)
            meta = tf1.RunMetadata()
            sess.run(fetch["train_op"], {ph["ids"]: ids[chunk], ph["labels"]: labels[chunk]},
                     options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE),
                     run_metadata=meta)
            reductions.append(sum(
                1 for device in meta.step_stats.dev_stats for node in device.node_stats
                if optimization.ALL_REDUCE_SCOPE + "/AddN" in node.node_name))
        step = component_values(graph, sess)["global_step:0"][0]
    assert trained > 30
    assert reductions == [0, trained, 0, trained]
    assert step == 2


@pytest.mark.parametrize("clip_norm, expected_first_moment", [
    (1.0, [0.1, 0.0]), (4.0, [0.2, 0.0]), (0.0, [0.2, 0.0])])
def test_clip_norm_scales_only_gradients_above_it(clip_norm, expected_first_moment):
    """A gradient [2, 0] (global norm 2) reaches Adam's first moment (0.1 x the gradient
    after one step) clipped to norm 1.0 (Google's), whole under 4.0, and whole with
    clipping off (0)."""
    with tf.Graph().as_default():
        weight = tf1.get_variable("w", initializer=tf.constant([0.0, 0.0]))
        loss = tf.reduce_sum(weight * tf.constant([2.0, 0.0]))
        step = optimization.create_train_op(loss, 1.0, 10, 0, weight_decay_rate=0.0,
                                            clip_norm=clip_norm)
        moment = [v for v in tf1.global_variables() if v.name.startswith("w/adam_m")][0]
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            _, norm = session.run([step.train_op, step.gradient_norm])
            first_moment = session.run(moment)
    assert norm == pytest.approx(2.0)
    np.testing.assert_allclose(first_moment, expected_first_moment, rtol=1e-5, atol=1e-7)
