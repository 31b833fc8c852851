"""Tiny random BERT configs and graph helpers shared by the fast tests."""

import tensorflow as tf

import modeling

tf1 = tf.compat.v1


def tiny_config(**overrides):
    """A 2-layer, 32-wide BERT that builds and runs in milliseconds."""
    fields = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=64, type_vocab_size=2,
                  hidden_act="gelu_exact", hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)
    fields.update(overrides)
    return modeling.BertConfig(**fields)


def cpu_session(graph, num_cpus=2):
    """A session with `num_cpus` CPU devices, as MirroredStrategy over CPUs needs."""
    config = tf1.ConfigProto(device_count={"CPU": num_cpus}, allow_soft_placement=False)
    return tf1.Session(graph=graph, config=config)


def cpu_strategy(num_replicas):
    """The default strategy for one replica, else MirroredStrategy over CPU devices."""
    if num_replicas == 1:
        return tf.distribute.get_strategy()
    devices = ["/cpu:%d" % i for i in range(num_replicas)]
    return tf.distribute.MirroredStrategy(
        devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
