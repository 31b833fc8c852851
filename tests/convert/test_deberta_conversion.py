"""DeBERTa-v3's conversion specifics beyond the parametrized family tests: the Hub's
config.json as microsoft/deberta-v3-base has it, the settings the graph does not have
(one line each), the masked-LM head under DeBERTa's own names, the discriminator's
head left out, and an embedding table longer than the tokenizer."""

import json
import os
import shutil

import numpy as np
import pytest
from safetensors.numpy import save_file

from bert_toolkit import families
from bert_toolkit.convert import hf_checkpoint as conv
from bert_toolkit.convert import hf_families
from bert_toolkit.errors import InputError
from bert_toolkit.model import modeling

from tiny import FIXTURES, assert_one_line, read_checkpoint

CASE = os.path.join(FIXTURES, "families", "deberta-v3")

# config.json of microsoft/deberta-v3-base (its fields as the Hub has them).
HUB_CONFIG = {"model_type": "deberta-v2", "attention_probs_dropout_prob": 0.1,
              "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 768,
              "initializer_range": 0.02, "intermediate_size": 3072,
              "max_position_embeddings": 512, "relative_attention": True,
              "position_buckets": 256, "norm_rel_ebd": "layer_norm", "share_att_key": True,
              "pos_att_type": "p2c|c2p", "layer_norm_eps": 1e-7,
              "max_relative_positions": -1, "position_biased_input": False,
              "num_attention_heads": 12, "num_hidden_layers": 12, "type_vocab_size": 0,
              "vocab_size": 128100}


def test_the_hub_config_of_deberta_v3_base():
    family = families.by_hf_model_type("deberta-v2")
    hf_families.check_hf_config(HUB_CONFIG, family)
    fields = hf_families.bert_config_from_hf(HUB_CONFIG, family, conv.HF_ACTIVATIONS)
    assert fields["model_family"] == "deberta-v2" and fields["hidden_act"] == "gelu_exact"
    assert (fields["position_buckets"], fields["max_relative_positions"]) == (256, -1)
    assert fields["layer_norm_eps"] == 1e-7 and fields["type_vocab_size"] == 0
    assert "embedding_size" not in fields
    config = modeling.BertConfig.from_dict(fields)
    shapes = modeling.bert_variable_shapes(config)
    assert shapes["bert/encoder/rel_embeddings"] == [512, 768]
    assert config.max_sequence_length == 512
    # And back: the fields DebertaV2Config needs, which pass the same checks.
    back = hf_families.hf_config_fields(fields, family, "gelu")
    hf_families.check_hf_config(back, family)
    assert back["position_buckets"] == 256 and back["pos_att_type"] == ["p2c", "c2p"]


@pytest.mark.parametrize("changes, fragment", [
    (dict(share_att_key=False), "'share_att_key' is False; only true"),
    (dict(position_biased_input=True), "'position_biased_input' is True; only false"),
    (dict(relative_attention=False), "'relative_attention' is False"),
    (dict(conv_kernel_size=3), "'conv_kernel_size' is 3; only 0"),
    (dict(pos_att_type=["c2p"]), "'pos_att_type' is ['c2p']; only both terms"),
    (dict(pos_att_type="p2c|c2p|p2p"), "'pos_att_type'"),
    (dict(norm_rel_ebd="none"), "'norm_rel_ebd' is 'none'; only 'layer_norm'"),
    (dict(type_vocab_size=2), "'type_vocab_size' is 2; only 0"),
    (dict(pooler_hidden_act="tanh"), "'pooler_hidden_act' is 'tanh'"),
    (dict(pooler_hidden_size=16), "'pooler_hidden_size' is 16"),
    (dict(position_buckets=8.5), "'position_buckets' must be an integer"),
])
def test_what_the_graph_does_not_have_is_one_line(tmp_path, changes, fragment):
    folder = tmp_path / "hf"
    shutil.copytree(CASE, str(folder), ignore=shutil.ignore_patterns("reference.npz"))
    config = json.load(open(str(folder / "config.json")))
    config.update(changes)
    json.dump(config, open(str(folder / "config.json"), "w"))
    with pytest.raises(InputError) as error:
        conv.convert(str(folder), str(tmp_path / "out"))
    assert_one_line(error.value, fragment, "config.json")
    assert not os.path.exists(str(tmp_path / "out"))


def deberta_state():
    return dict(conv.load_hf_state(CASE)[1])


def write_folder(tmp_path, state):
    folder = tmp_path / "hf"
    os.makedirs(str(folder))
    for name in ("config.json", "spm.model", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(CASE, name), str(folder / name))
    save_file(state, str(folder / "model.safetensors"))
    return str(folder)


def test_deberta_s_own_masked_lm_names_and_its_discriminator_head(tmp_path):
    """microsoft/deberta-v3-* hold lm_predictions.lm_head.* and the replaced-token
    detector's mask_predictions.*: the first is the same head, the second has no place."""
    state = deberta_state()
    renamed = {}
    for key, value in state.items():
        if key == "cls.predictions.decoder.weight":
            continue  # DeBERTa's own head has none: its decoder is the word table
        key = key.replace("cls.predictions.transform.", "lm_predictions.lm_head.")
        key = key.replace("cls.predictions.bias", "lm_predictions.lm_head.bias")
        renamed[key] = np.ascontiguousarray(value)
    renamed = {k: v for k, v in renamed.items() if k != "cls.predictions.decoder.bias"}
    renamed["mask_predictions.classifier.weight"] = np.zeros((1, 32), np.float32)
    result = conv.convert(write_folder(tmp_path, renamed), str(tmp_path / "out"))
    assert result.ignored_keys == ["mask_predictions.classifier.weight"]
    ours = read_checkpoint(str(tmp_path / "out" / "bert_model.ckpt"))
    np.testing.assert_array_equal(ours["cls/predictions/output_bias"],
                                  state["cls.predictions.bias"])
    np.testing.assert_array_equal(ours["cls/predictions/transform/dense/kernel"],
                                  state["cls.predictions.transform.dense.weight"].T)


def test_the_table_may_be_longer_than_the_tokenizer_but_not_shorter(tmp_path):
    # The fixture: 1008 rows for 1000 ids, as deberta-v3-base's 128100 for 128001.
    assert json.load(open(os.path.join(CASE, "config.json")))["vocab_size"] == 1008
    state = deberta_state()
    for key in list(state):
        if state[key].shape[0] == 1008:
            state[key] = np.ascontiguousarray(state[key][:990])
    folder = write_folder(tmp_path, state)
    config = json.load(open(os.path.join(folder, "config.json")))
    config["vocab_size"] = 990
    json.dump(config, open(os.path.join(folder, "config.json"), "w"))
    with pytest.raises(InputError, match="spm.model: 1000 tokens, but config.json has "
                                         "vocab_size 990"):
        conv.convert(folder, str(tmp_path / "out"))
