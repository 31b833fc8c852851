"""ModernBERT's conversion specifics, beyond the parametrized family tests: config.json in
both spellings, what does not convert (one line each), the heads its classes share the
name `head` for, and which files say a folder is ModernBERT's (mmBERT's tokenizer
naming only its bos and eos tokens included)."""

import json
import os
import shutil

import numpy as np
import pytest
from test_family_conversion import copy_case, fixture_dir, fixture_state

from bert_toolkit import families
from bert_toolkit.convert import hf_checkpoint as conv
from bert_toolkit.convert import hf_families
from bert_toolkit.engine import model_files
from bert_toolkit.errors import InputError
from bert_toolkit.text import subword

from tiny import assert_one_line, read_checkpoint


def test_both_spellings_of_config_json_read_alike():
    new = json.load(open(os.path.join(fixture_dir("modernbert"), "config.json")))
    old = json.load(open(os.path.join(fixture_dir("modernbert-mean"), "config.json")))
    assert "layer_types" in new and "rope_parameters" in new
    assert "layer_types" not in old and "global_rope_theta" in old
    config = hf_families.modernbert_config_from_hf(new, conv.HF_ACTIVATIONS)
    assert (config["global_attn_every_n_layers"], config["local_attention"],
            config["global_rope_theta"], config["local_rope_theta"],
            config["classifier_pooling"], config["layer_norm_eps"], config["hidden_act"],
            config["type_vocab_size"]) == (3, 8, 160000.0, 10000.0, "cls", 1e-5, "gelu_exact", 0)
    config = hf_families.modernbert_config_from_hf(old, conv.HF_ACTIVATIONS)
    assert (config["global_attn_every_n_layers"], config["local_attention"],
            config["global_rope_theta"], config["local_rope_theta"],
            config["classifier_pooling"]) == (2, 6, 50000.0, 1000.0, "mean")
    # transformers 5's rope_parameters win over 4.x's fields, as in ModernBertConfig.
    both = dict(new, global_rope_theta=1.0, local_rope_theta=2.0)
    config = hf_families.modernbert_config_from_hf(both, conv.HF_ACTIVATIONS)
    assert (config["global_rope_theta"], config["local_rope_theta"]) == (160000.0, 10000.0)
    # And what config.json leaves out is ModernBertConfig's default.
    bare = {k: v for k, v in old.items() if k not in (
        "global_attn_every_n_layers", "global_rope_theta", "local_rope_theta",
        "local_attention", "classifier_pooling")}
    config = hf_families.modernbert_config_from_hf(bare, conv.HF_ACTIVATIONS)
    assert (config["global_attn_every_n_layers"], config["local_attention"],
            config["global_rope_theta"], config["local_rope_theta"],
            config["classifier_pooling"]) == (3, 128, 160000.0, 10000.0, "cls")


def test_the_exported_config_reads_back_the_same():
    bert_config = hf_families.modernbert_config_from_hf(
        json.load(open(os.path.join(fixture_dir("modernbert-mean"), "config.json"))),
        conv.HF_ACTIVATIONS)
    fields = hf_families.modernbert_config_fields(bert_config, "gelu")
    assert fields["layer_types"] == ["full_attention", "sliding_attention", "full_attention"]
    assert hf_families.modernbert_config_from_hf(fields, conv.HF_ACTIVATIONS) == bert_config


def test_the_fine_tuned_classifier_converts_whole(tmp_path):
    result = conv.convert(fixture_dir("modernbert-mean"), str(tmp_path / "out"))
    variables = read_checkpoint(str(tmp_path / "out" / "bert_model.ckpt"))
    state = fixture_state("modernbert-mean")
    np.testing.assert_array_equal(variables["output_weights"], state["classifier.weight"])
    np.testing.assert_array_equal(variables["bert/pooler/dense/kernel"],
                                  state["head.dense.weight"].T)
    np.testing.assert_array_equal(variables["bert/pooler/LayerNorm/gamma"],
                                  state["head.norm.weight"])
    assert result.ignored_keys == []
    assert any("3 labels" in note for note in result.notes)
    config = json.load(open(str(tmp_path / "out" / "bert_config.json")))
    assert config["max_position_embeddings"] == 64 and config["classifier_pooling"] == "mean"


def test_a_token_classifier_converts_its_encoder_and_leaves_its_head_out(tmp_path):
    state = dict(fixture_state("modernbert"))
    mlm = state.pop("head.dense.weight"), state.pop("head.norm.weight")
    del state["decoder.bias"]
    state = {("model." + k if not k.startswith("model.") else k): v for k, v in state.items()}
    state.update({"head.dense.weight": mlm[0], "head.norm.weight": mlm[1],
                  "classifier.weight": np.ones((5, 32), np.float32),
                  "classifier.bias": np.zeros(5, np.float32)})
    hf_dir = copy_case("modernbert", tmp_path / "hf", state,
                       architectures=["ModernBertForTokenClassification"])
    result = conv.convert(hf_dir, str(tmp_path / "out"))
    assert result.ignored_keys == ["classifier.bias", "classifier.weight", "head.dense.weight",
                                   "head.norm.weight"]
    assert not any(name.startswith(("cls/", "output_")) for name in read_checkpoint(
        str(tmp_path / "out" / "bert_model.ckpt")))


def test_an_untied_decoder_does_not_convert(tmp_path):
    state = dict(fixture_state("modernbert"))
    state["decoder.weight"] = state["model.embeddings.tok_embeddings.weight"] + 1.0
    hf_dir = copy_case("modernbert", tmp_path / "hf", state)
    with pytest.raises(InputError) as info:
        conv.convert(hf_dir, str(tmp_path / "out"))
    assert_one_line(info.value, "decoder.weight differs from the word embeddings")


@pytest.mark.parametrize("changes, fragments", [
    ({"attention_bias": True}, ["'attention_bias' is True", "only false"]),
    ({"norm_bias": True}, ["'norm_bias' is True"]),
    ({"decoder_bias": False}, ["'decoder_bias' is False", "only true"]),
    ({"classifier_activation": "silu"}, ["'classifier_activation'", "'silu'"]),
    ({"layer_types": ["full_attention", "sliding_attention", "full_attention",
                      "full_attention"]}, ["'layer_types' is not a global layer every n"]),
    ({"layer_types": ["full_attention"]}, ["'layer_types' must list"]),
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, ["'rope_scaling' is set"]),
    ({"rope_parameters": {"full_attention": {"rope_type": "yarn", "rope_theta": 1.0}}},
     ["rope_type 'yarn'"]),
    ({"classifier_pooling": "max"}, ["'classifier_pooling' must be 'cls' or 'mean'"]),
    ({"num_attention_heads": 32}, ["even head size"]),
    ({"local_attention": 0}, ["'local_attention' must be a positive integer"]),
])
def test_a_config_that_cannot_convert_is_one_line(tmp_path, changes, fragments):
    hf_dir = copy_case("modernbert", tmp_path / "hf", **changes)
    with pytest.raises(InputError) as info:
        conv.convert(hf_dir, str(tmp_path / "out"))
    assert_one_line(info.value, os.path.join(hf_dir, "config.json"), *fragments)


def test_position_embedding_type_is_ignored_as_transformers_ignores_it(tmp_path):
    # The Hub's configs say "absolute" (ModernBERT) or "sans_pos" (mmBERT): unused.
    hf_dir = copy_case("modernbert", tmp_path / "hf", position_embedding_type="sans_pos",
                       layer_norm_eps=1e-12)
    conv.convert(hf_dir, str(tmp_path / "out"))
    config = json.load(open(str(tmp_path / "out" / "bert_config.json")))
    assert config["layer_norm_eps"] == 1e-5  # norm_eps, not the unused layer_norm_eps


# -- which files are ModernBERT's -------------------------------------------------------

def test_a_bpe_tokenizer_json_with_bert_specials_is_modernberts(tmp_path):
    shutil.copy(os.path.join(fixture_dir("modernbert"), "tokenizer.json"), str(tmp_path))
    path = str(tmp_path / "tokenizer.json")
    assert model_files.family_of_tokenizer_file(path).name == "modernbert"
    roberta = str(tmp_path / "roberta")
    os.makedirs(roberta)
    shutil.copy(os.path.join(fixture_dir("roberta"), "tokenizer.json"), roberta)
    assert model_files.family_of_tokenizer_file(
        os.path.join(roberta, "tokenizer.json")).name == "roberta"
    # config.json beside the file decides (mmBERT's Gemma tokenizer has no [CLS]).
    with open(os.path.join(roberta, "config.json"), "w") as f:
        json.dump({"model_type": "modernbert"}, f)
    assert model_files.family_of_tokenizer_file(
        os.path.join(roberta, "tokenizer.json")).name == "modernbert"


def test_a_tokenizer_naming_only_bos_and_eos_frames_rows_with_them(tmp_path):
    """mmBERT's Gemma tokenizer: <pad> 0, <eos> 1, <bos> 2, <unk> 3, <mask> 4 and a
    tokenizer_config.json naming bos, eos, pad, unk and mask: rows are <bos> a <eos>
    and <bos> a <eos> b <eos>."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    vocab = {token: index for index, token in enumerate(
        ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "a", "b", "c", "ab", "\u0120"])}
    tokenizer = Tokenizer(models.BPE(vocab, [("a", "b")], unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.add_special_tokens(["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"])
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    with open(str(tmp_path / "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>",
                   "unk_token": "<unk>", "mask_token": "<mask>"}, f)
    ours = subword.SubwordTokenizer(str(tmp_path / "tokenizer.json"),
                                    families.get("modernbert"))
    assert ours.special_tokens == subword.SpecialTokens("<bos>", "<eos>", "<pad>", "<unk>",
                                                        "<mask>")
    ids, _, _ = ours.encode_pairs(["ab"], ["c"], max_seq_length=8)
    assert ids[0].tolist() == [2, 8, 1, 7, 1, 0, 0, 0]
