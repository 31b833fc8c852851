"""The families' pieces of the one encoder graph (bert_toolkit/families.py), on tiny
random configs: which variables each builds, that each piece changes the outputs
(position offset, epsilon, projection, shared layers, pooler activation), and that
Google's own ELECTRA and ALBERT checkpoint names initialise the graph."""

import math

import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit import families
from bert_toolkit.convert import hf_checkpoint
from bert_toolkit.errors import InputError
from bert_toolkit.model import google_names, modeling

from tiny import tiny_config

tf1 = tf.compat.v1

FAMILY_CONFIGS = {
    "bert": {},
    "roberta": dict(model_family="roberta", max_position_embeddings=66, type_vocab_size=1,
                    layer_norm_eps=1e-5),
    "xlm-roberta": dict(model_family="xlm-roberta", max_position_embeddings=66,
                        type_vocab_size=1, layer_norm_eps=1e-5),
    "electra": dict(model_family="electra", embedding_size=16),
    "distilbert": dict(model_family="distilbert", type_vocab_size=0),
    "albert": dict(model_family="albert", embedding_size=16, num_hidden_layers=3,
                   hidden_act="gelu"),
    "deberta-v2": dict(model_family="deberta-v2", type_vocab_size=0, layer_norm_eps=1e-7,
                       position_buckets=4, max_relative_positions=-1),
    "modernbert": dict(model_family="modernbert", type_vocab_size=0, layer_norm_eps=1e-5,
                       num_hidden_layers=3, local_attention=4, global_attn_every_n_layers=2,
                       global_rope_theta=160000.0, local_rope_theta=10000.0,
                       classifier_pooling="cls"),
}
IDS = np.array([[5, 9, 13, 7, 0, 0], [3, 4, 5, 6, 7, 8]], np.int32)
MASK = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], np.int32)
TYPES = np.array([[0, 0, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1]], np.int32)


def run_model(config, variables=None, seed=0):
    """(sequence output [2, 6, 32], pooled [2, 32], {variable name: value}) of a fresh
    graph of `config`, from `variables` (name -> array) where given."""
    with tf.Graph().as_default():
        tf1.set_random_seed(seed)
        types = TYPES if config.type_vocab_size > 1 else np.zeros_like(TYPES)
        model = modeling.BertModel(config, False, tf.constant(IDS), tf.constant(MASK),
                                   tf.constant(types))
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            by_name = {modeling.variable_name(v): v for v in tf1.global_variables()}
            for name, value in (variables or {}).items():
                by_name[name].load(value, session)
            sequence, pooled = session.run([model.get_sequence_output(),
                                            model.get_pooled_output()])
            values = session.run(by_name)
    return sequence, pooled, values


@pytest.mark.parametrize("family", sorted(FAMILY_CONFIGS))
def test_each_family_builds_the_variables_bert_variable_shapes_lists(family):
    config = tiny_config(**FAMILY_CONFIGS[family])
    _, _, values = run_model(config)
    shapes = {name: list(value.shape) for name, value in values.items()}
    assert shapes == {name: list(shape)
                      for name, shape in modeling.bert_variable_shapes(config).items()}
    assert ("bert/embeddings/token_type_embeddings" in shapes) == (
        family not in ("distilbert", "deberta-v2", "modernbert"))
    assert ("bert/embeddings_project/kernel" in shapes) == (family in ("electra", "albert"))
    assert ("bert/encoder/rel_embeddings" in shapes) == (family == "deberta-v2")
    layers = {name.split("/")[2] for name in shapes if name.startswith("bert/encoder/layer_")}
    assert layers == ({"layer_0"} if family == "albert"
                      else {"layer_%d" % n for n in range(config.num_hidden_layers)})


def test_a_bert_config_is_written_as_google_wrote_it():
    fields = modeling.BertConfig(vocab_size=10).to_dict()
    assert "model_family" not in fields and "layer_norm_eps" not in fields
    roberta = tiny_config(**FAMILY_CONFIGS["roberta"]).to_dict()
    assert roberta["model_family"] == "roberta" and roberta["layer_norm_eps"] == 1e-5
    assert modeling.BertConfig.from_dict(roberta).to_dict() == roberta


def test_google_albert_config_is_read_as_albert():
    fields = dict(tiny_config().to_dict(), embedding_size=16, num_hidden_groups=1,
                  inner_group_num=1)
    assert modeling.BertConfig.from_dict(fields).model_family == "albert"
    with pytest.raises(InputError, match="'num_hidden_groups' is 2"):
        modeling.BertConfig.from_dict(dict(fields, num_hidden_groups=2), "albert_config.json")
    with pytest.raises(InputError, match="'model_family' 'gpt2' is not one of bert, roberta"):
        modeling.BertConfig.from_dict(dict(fields, model_family="gpt2"), "x.json")


def test_roberta_positions_start_after_the_padding_row():
    config = tiny_config(**FAMILY_CONFIGS["roberta"])
    assert config.max_sequence_length == 64
    sequence, _, values = run_model(config)
    # Rows 0 and 1 of the table are never used: changing them changes nothing.
    table = values["bert/embeddings/position_embeddings"].copy()
    # Not a constant: the layer norm would take a row's constant shift away.
    bump = np.random.RandomState(0).normal(size=table.shape[1])
    table[:2] += bump
    unchanged, _, _ = run_model(config, dict(values, **{
        "bert/embeddings/position_embeddings": table}))
    np.testing.assert_allclose(unchanged, sequence, atol=1e-6)
    table[2] += bump
    changed, _, _ = run_model(config, dict(values, **{
        "bert/embeddings/position_embeddings": table}))
    assert np.abs(changed - sequence)[MASK == 1].max() > 1e-2
    with pytest.raises(InputError, match="--max_seq_length=65 is longer than the model's 64"):
        modeling.check_max_seq_length(config, 65)


def test_albert_runs_its_one_layer_as_every_layer():
    config = tiny_config(**FAMILY_CONFIGS["albert"])
    with tf.Graph().as_default():
        model = modeling.BertModel(config, False, tf.constant(IDS), tf.constant(MASK))
        layers = model.get_all_encoder_layers()
        assert len(layers) == 3
        assert len([v for v in tf1.global_variables() if "/encoder/" in v.name]) == 16


@pytest.mark.parametrize("family, activation", [("bert", np.tanh), ("electra", None),
                                                ("distilbert", lambda x: np.maximum(x, 0))])
def test_the_pooler_applies_the_family_classifier_activation(family, activation):
    config = tiny_config(**FAMILY_CONFIGS[family])
    sequence, pooled, values = run_model(config)
    dense = sequence[:, 0] @ values["bert/pooler/dense/kernel"] + values["bert/pooler/dense/bias"]
    if activation is None:  # ELECTRA's head: the exact GELU
        expected = 0.5 * dense * (1 + np.vectorize(math.erf)(dense / np.sqrt(2)))
    else:
        expected = activation(dense)
    np.testing.assert_allclose(pooled, expected, atol=1e-5)


def test_layer_norm_epsilon_reaches_every_layer_norm():
    base = tiny_config(initializer_range=0.002)
    sequence, _, values = run_model(base)
    wider, _, _ = run_model(tiny_config(initializer_range=0.002, layer_norm_eps=1e-3), values)
    assert np.abs(wider - sequence)[MASK == 1].max() > 1e-3


def google_albert_variables(values):
    """`values` (our names) renamed as Google's ALBERT checkpoints name them."""
    renamed = {}
    for name, value in values.items():
        aliases = [a for a in google_names.google_aliases(name) if not a.startswith("electra/")]
        renamed[aliases[0] if aliases else name] = value
    return renamed


@pytest.mark.parametrize("family", ["albert", "electra"])
def test_google_checkpoints_of_albert_and_electra_initialise_the_graph(tmp_path, family):
    config = tiny_config(**FAMILY_CONFIGS[family])
    sequence, _, values = run_model(config, seed=1)
    if family == "albert":
        google = google_albert_variables(values)
        assert "bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/gamma" in google
    else:
        google = {("electra/" + name[5:] if not name.startswith("bert/pooler") else name): v
                  for name, v in values.items()}
    prefix = str(tmp_path / "model.ckpt")
    hf_checkpoint.write_checkpoint(google, prefix)
    modeling.check_checkpoint_compatible(
        {n: list(s) for n, s in modeling.bert_variable_shapes(config).items()}, prefix)
    with tf.Graph().as_default():
        model = modeling.BertModel(config, False, tf.constant(IDS), tf.constant(MASK),
                                   tf.constant(TYPES))
        loaded = modeling.init_from_checkpoint(prefix)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            got = session.run(model.get_sequence_output())
    assert loaded == set(values)
    np.testing.assert_allclose(got, sequence, atol=1e-6)


def test_every_family_is_named_once():
    assert list(families.FAMILIES) == ["bert", "roberta", "xlm-roberta", "electra",
                                       "distilbert", "albert", "deberta-v2", "modernbert"]
    assert families.by_hf_model_type("xlm-roberta").position_offset == 2
    with pytest.raises(InputError, match="'model_type' is 'gpt2'; the families that convert"):
        families.by_hf_model_type("gpt2")
