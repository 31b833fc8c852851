"""How many optimizer updates a run makes, from epochs or from steps, and its log line.

One optimizer update consumes per_replica_batch_size x num_replicas x
accumulation_steps examples (the global batch). No TensorFlow.
"""

import collections
import math

TrainingPlan = collections.namedtuple("TrainingPlan", [
    "num_examples", "num_train_epochs", "num_replicas", "per_replica_batch_size",
    "accumulation_steps", "global_batch_size", "num_train_steps", "num_warmup_steps"])
"""How many optimizer updates a run makes; every field is a plain number."""


def plan_training(num_examples, num_train_epochs, per_replica_batch_size, num_replicas,
                  accumulation_steps, warmup_proportion):
    """Optimizer updates from the GLOBAL batch (earlier forks divided by one GPU's batch).

    One update consumes per_replica_batch_size * num_replicas * accumulation_steps
    examples, so N replicas make N times fewer updates for the same epochs. On
    one device without accumulation the steps are Google's exact arithmetic,
    int(num_examples / train_batch_size * num_train_epochs) (at least 1), so a
    command of the original trains the same number of steps; otherwise they are
    rounded up, so every example of the last partial global batch is seen.
    Warmup is int(num_train_steps * warmup_proportion), as in the original.
    """
    global_batch_size = per_replica_batch_size * num_replicas * accumulation_steps
    if global_batch_size == per_replica_batch_size:
        num_train_steps = int(num_examples / float(global_batch_size) * num_train_epochs)
    else:
        num_train_steps = int(math.ceil(num_examples * num_train_epochs
                                        / float(global_batch_size)))
    num_train_steps = max(1, num_train_steps)
    num_warmup_steps = int(num_train_steps * warmup_proportion)
    return TrainingPlan(num_examples, num_train_epochs, num_replicas, per_replica_batch_size,
                        accumulation_steps, global_batch_size, num_train_steps,
                        num_warmup_steps)


def describe_plan(plan):
    """One log line with every number of the plan."""
    return ("training plan: %d replicas x %d examples per replica x %d accumulation steps "
            "= global batch %d; %d examples x %g epochs = %d optimizer steps (%d warmup)"
            % (plan.num_replicas, plan.per_replica_batch_size, plan.accumulation_steps,
               plan.global_batch_size, plan.num_examples, plan.num_train_epochs,
               plan.num_train_steps, plan.num_warmup_steps))


def plan_steps(num_train_steps, num_warmup_steps, per_replica_batch_size, num_replicas,
               accumulation_steps):
    """A TrainingPlan given in optimizer steps (pretraining) rather than epochs.

    num_examples is what the steps consume: num_train_steps * global batch.
    """
    global_batch_size = per_replica_batch_size * num_replicas * accumulation_steps
    return TrainingPlan(num_train_steps * global_batch_size, None, num_replicas,
                        per_replica_batch_size, accumulation_steps, global_batch_size,
                        num_train_steps, num_warmup_steps)


def describe_step_plan(plan):
    """One log line with every number of a plan made by `plan_steps`."""
    return ("training plan: %d replicas x %d examples per replica x %d accumulation steps "
            "= global batch %d; %d optimizer steps (%d warmup) = %d examples"
            % (plan.num_replicas, plan.per_replica_batch_size, plan.accumulation_steps,
               plan.global_batch_size, plan.num_train_steps, plan.num_warmup_steps,
               plan.num_examples))
