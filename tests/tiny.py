"""Tiny random BERT configs, in Google's and Hugging Face's layouts, and helpers shared
by the fast tests."""

import collections
import json
import os
import socket

import numpy as np
import tensorflow as tf
from safetensors.numpy import save_file

from bert_toolkit.model import modeling

tf1 = tf.compat.v1

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(REPO, "tests", "fixtures")


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


TINY_WORDS = ["the", "movie", "plot", "film", "is", "was", "a", "very", "not", "good", "great",
              "fine", "bad", "awful", "dull", "and", "but", "story", "acting", "music", ".", ","]
POSITIVE_WORDS = ("good", "great", "fine")
NEGATIVE_WORDS = ("bad", "awful", "dull")


def write_tiny_model(directory, with_classifier_labels=None, vocab_size=None,
                     **config_overrides):
    """Writes bert_config.json, vocab.txt and a random bert_model.ckpt to `directory`.

    With `with_classifier_labels=N` the checkpoint also holds a classifier head
    (output_weights [N, hidden], output_bias [N]), so runs that start from it
    begin from identical weights whatever the device layout. `vocab_size` pads
    the vocab with [unused<i>] tokens (30522: ids of real BERT requests fit).
    Returns dict(bert_config_file, vocab_file, init_checkpoint).
    """
    import os
    os.makedirs(directory, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + TINY_WORDS + ["##s"]
    vocab += ["[unused%d]" % i for i in range((vocab_size or 0) - len(vocab))]
    vocab_file = os.path.join(directory, "vocab.txt")
    with open(vocab_file, "w") as f:
        f.write("\n".join(vocab) + "\n")
    config = tiny_config(vocab_size=len(vocab), **config_overrides)
    config_file = os.path.join(directory, "bert_config.json")
    config.to_json_file(config_file)
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(3)
        ids = tf1.placeholder(tf.int32, [None, 8])
        modeling.BertModel(config, False, ids)
        if with_classifier_labels:
            tf1.get_variable("output_weights", [with_classifier_labels, config.hidden_size],
                             initializer=tf1.truncated_normal_initializer(stddev=0.02))
            tf1.get_variable("output_bias", [with_classifier_labels],
                             initializer=tf1.zeros_initializer())
        saver = tf1.train.Saver()
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            checkpoint = saver.save(sess, os.path.join(directory, "bert_model.ckpt"),
                                    write_meta_graph=False)
    return dict(bert_config_file=config_file, vocab_file=vocab_file,
                init_checkpoint=checkpoint)


def write_sentiment_csv(path, num_examples, seed=0, header=("label", "sentence")):
    """A learnable toy task: label 1 iff the sentence has a positive word."""
    import csv
    import random
    rng = random.Random(seed)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        if header:
            writer.writerow(header)
        for _ in range(num_examples):
            label = rng.choice(["0", "1"])
            key = rng.choice(POSITIVE_WORDS if label == "1" else NEGATIVE_WORDS)
            filler = [rng.choice(TINY_WORDS[:9]) for _ in range(rng.randint(2, 6))]
            filler.insert(rng.randint(0, len(filler)), key)
            writer.writerow([label, " ".join(filler)])


def free_port():
    """A localhost port nothing listens on now (for a local cluster's workers)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tiny_hf_config(**overrides):
    """config.json of a 2-layer BERT small enough to convert in a blink."""
    config = {
        "architectures": ["BertModel"], "model_type": "bert", "vocab_size": 12,
        "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 16, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 16,
        "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12,
        "position_embedding_type": "absolute", "pad_token_id": 0,
    }
    config.update(overrides)
    return config


def tiny_hf_state(config, seed=0, prefix="", old_layer_norm=False, pooler=True, heads=False):
    """Random tensors with Hugging Face names and shapes (Linear weight is [out, in])."""
    rng = np.random.RandomState(seed)
    hidden, inner = config["hidden_size"], config["intermediate_size"]
    state = collections.OrderedDict()

    def add(key, *shape):
        state[key] = rng.standard_normal(shape).astype(np.float32)

    def linear(path, in_size, out_size):
        add(prefix + path + ".weight", out_size, in_size)
        add(prefix + path + ".bias", out_size)

    def layer_norm(path, pre=prefix):
        names = ("gamma", "beta") if old_layer_norm else ("weight", "bias")
        add(pre + path + "." + names[0], hidden)
        add(pre + path + "." + names[1], hidden)

    add(prefix + "embeddings.word_embeddings.weight", config["vocab_size"], hidden)
    add(prefix + "embeddings.position_embeddings.weight", config["max_position_embeddings"],
        hidden)
    add(prefix + "embeddings.token_type_embeddings.weight", config["type_vocab_size"], hidden)
    layer_norm("embeddings.LayerNorm")
    state[prefix + "embeddings.position_ids"] = np.arange(
        config["max_position_embeddings"], dtype=np.int64)[None]
    for index in range(config["num_hidden_layers"]):
        layer = "encoder.layer.%d." % index
        for part in ("query", "key", "value"):
            linear(layer + "attention.self." + part, hidden, hidden)
        linear(layer + "attention.output.dense", hidden, hidden)
        layer_norm(layer + "attention.output.LayerNorm")
        linear(layer + "intermediate.dense", hidden, inner)
        linear(layer + "output.dense", inner, hidden)
        layer_norm(layer + "output.LayerNorm")
    if pooler:
        linear("pooler.dense", hidden, hidden)
    if heads:
        add("cls.predictions.transform.dense.weight", hidden, hidden)
        add("cls.predictions.transform.dense.bias", hidden)
        layer_norm("cls.predictions.transform.LayerNorm", pre="")
        add("cls.predictions.bias", config["vocab_size"])
        state["cls.predictions.decoder.bias"] = state["cls.predictions.bias"].copy()
        state["cls.predictions.decoder.weight"] = \
            state[prefix + "embeddings.word_embeddings.weight"].copy()
        add("cls.seq_relationship.weight", 2, hidden)
        add("cls.seq_relationship.bias", 2)
    return state


def make_hf_dir(path, config, state, vocab_size=None):
    """Writes config.json, vocab.txt ([PAD], [UNK], tok2, ...) and model.safetensors."""
    os.makedirs(str(path), exist_ok=True)
    with open(os.path.join(str(path), "config.json"), "w") as f:
        json.dump(config, f)
    count = config["vocab_size"] if vocab_size is None else vocab_size
    tokens = ["[PAD]", "[UNK]"] + ["tok%d" % i for i in range(2, count)]
    with open(os.path.join(str(path), "vocab.txt"), "w") as f:
        f.write("\n".join(tokens[:count]) + "\n")
    if state is not None:
        save_file(dict(state), os.path.join(str(path), "model.safetensors"))
    return str(path)


def read_checkpoint(prefix):
    """Name -> np.ndarray of every variable in a TF checkpoint."""
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def assert_one_line(error, *fragments):
    """`error`'s message is one line holding every fragment."""
    message = str(error)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message


def peer_python():
    """An interpreter with torch and transformers ($BENCH_PEER_PYTHON or .venv-bench),
    or None: the slow tests that load an export in stock transformers need one."""
    import subprocess
    for candidate in (os.environ.get("BENCH_PEER_PYTHON"),
                      os.path.join(REPO, ".venv-bench", "bin", "python")):
        if candidate and os.path.exists(candidate) and subprocess.run(
                [candidate, "-c", "import torch, transformers"],
                capture_output=True).returncode == 0:
            return candidate
    return None
