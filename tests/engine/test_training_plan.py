"""Optimizer steps from epochs and the global batch."""


import tensorflow as tf

from bert_toolkit.engine import training_plan

tf1 = tf.compat.v1


def test_plan_counts_optimizer_steps_from_the_global_batch():
    one = training_plan.plan_training(3200, 3, 32, 1, 1, 0.1)
    four = training_plan.plan_training(3200, 3, 32, 4, 1, 0.1)
    accumulated = training_plan.plan_training(3200, 3, 32, 2, 2, 0.1)
    assert (one.num_train_steps, one.num_warmup_steps) == (300, 30)
    assert four.global_batch_size == 128 and four.num_train_steps == 75
    assert accumulated.global_batch_size == 128 and accumulated.num_train_steps == 75
    assert "= global batch 128; 3200 examples x 3 epochs = 75 optimizer steps" in \
        training_plan.describe_plan(accumulated)


def test_one_device_plan_is_googles_arithmetic_and_several_round_up():
    # Google: int(num_examples / train_batch_size * num_train_epochs), warmup
    # int(steps * proportion); MRPC's 3,668 examples at batch 32 for 3 epochs.
    one = training_plan.plan_training(3668, 3.0, 32, 1, 1, 0.1)
    assert (one.num_train_steps, one.num_warmup_steps) == (343, 34)
    assert training_plan.plan_training(10, 1.0, 4, 1, 1, 0.1).num_train_steps == 2
    assert training_plan.plan_training(10, 1.0, 32, 1, 1, 0.1).num_train_steps == 1  # not 0
    # The same global batch of 4 from two replicas sees the last partial batch.
    assert training_plan.plan_training(10, 1.0, 2, 2, 1, 0.1).num_train_steps == 3
    assert training_plan.plan_training(10, 1.0, 2, 1, 2, 0.1).num_train_steps == 3
