"""convert_hf_checkpoint.py for every family of bert_toolkit/families.py.

On the Hub-layout fixture folders tests/fixtures/families/<case>/ (tiny random
models saved by transformers, with transformers' outputs on real sentences in
reference.npz; made by tests/fixtures/make_family_fixtures.py): conversion writes
the variables our graph expects (bert_variable_shapes) and the heads each class
has, copies the tokenizer files unchanged, and our BertModel on the converted
checkpoint gives transformers' last_hidden_state within 1e-4 at real positions. A
fine-tuned ...ForSequenceClassification converts whole; what cannot convert is one
line. Hub ids (offline, from a cache laid out as huggingface_hub lays it out) and
Google's own ELECTRA and ALBERT checkpoints are here too.
"""

import filecmp
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import save_file

from bert_toolkit.convert import google_checkpoints
from bert_toolkit.convert import hf_checkpoint as conv
from bert_toolkit.errors import InputError
from bert_toolkit.model import modeling

from tiny import FIXTURES, assert_one_line, read_checkpoint

tf1 = tf.compat.v1
FAMILIES_DIR = os.path.join(FIXTURES, "families")
CASES = ["roberta", "xlm-roberta", "electra", "electra-discriminator", "distilbert", "albert",
         "modernbert", "modernbert-mean", "deberta-v3", "deberta-v3-nobuckets"]
# case -> (model_family, the heads its class has: "mlm", "nsp", "pooler")
EXPECTED = {
    "roberta": ("roberta", {"mlm"}),
    "xlm-roberta": ("xlm-roberta", {"mlm"}),
    "electra": ("electra", set()),
    "electra-discriminator": ("electra", set()),
    "distilbert": ("distilbert", {"mlm"}),
    "albert": ("albert", {"mlm", "nsp", "pooler"}),
    "modernbert": ("modernbert", {"mlm"}),
    # ModernBertForSequenceClassification: its head is our pooler, its classifier ours.
    "modernbert-mean": ("modernbert", {"pooler", "classifier"}),
    # DebertaV2ForMaskedLM (its legacy cls.predictions head) and DebertaV2Model.
    "deberta-v3": ("deberta-v2", {"mlm"}),
    "deberta-v3-nobuckets": ("deberta-v2", set()),
}
REFERENCE = "reference.npz"


def fixture_dir(case):
    return os.path.join(FAMILIES_DIR, case)






def copy_case(case, target, state=None, **config_changes):
    """A copy of a fixture folder (its reference left behind), with config.json's fields
    changed and, given `state`, the weights replaced by it (as model.safetensors)."""
    source = fixture_dir(case)
    os.makedirs(target)
    for name in os.listdir(source):
        if name == REFERENCE or (state is not None and name.endswith((".bin", ".safetensors"))):
            continue
        shutil.copyfile(os.path.join(source, name), os.path.join(target, name))
    if config_changes:
        path = os.path.join(target, "config.json")
        config = json.load(open(path))
        config.update(config_changes)
        for key in [k for k, v in config_changes.items() if v is None]:
            del config[key]
        json.dump(config, open(path, "w"))
    if state is not None:
        save_file(dict(state), os.path.join(target, "model.safetensors"))
    return str(target)


def fixture_state(case):
    return conv.load_hf_state(fixture_dir(case))[1]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """case -> (output folder, ConversionResult) of every fixture, converted once."""
    root = tmp_path_factory.mktemp("converted")
    return {case: (str(root / case), conv.convert(fixture_dir(case), str(root / case)))
            for case in CASES}


def expected_shapes(out_dir, heads):
    """name -> shape of what the converted folder should hold: the graph's variables
    (modeling.bert_variable_shapes) and the heads of the source's class, written out
    from the config here."""
    config = modeling.BertConfig.from_json_file(os.path.join(out_dir, "bert_config.json"))
    shapes = {n: tuple(s) for n, s in modeling.bert_variable_shapes(config).items()}
    if "pooler" not in heads:
        shapes = {n: s for n, s in shapes.items() if not n.startswith("bert/pooler/")}
    h, e = config.hidden_size, config.embedding_width
    if config.model_family == "modernbert":
        return dict(shapes, **_modernbert_heads(config, heads))
    if "mlm" in heads:
        shapes.update({"cls/predictions/transform/dense/kernel": (h, e),
                       "cls/predictions/transform/dense/bias": (e,),
                       "cls/predictions/transform/LayerNorm/gamma": (e,),
                       "cls/predictions/transform/LayerNorm/beta": (e,),
                       "cls/predictions/output_bias": (config.vocab_size,)})
    if "nsp" in heads:
        shapes.update({"cls/seq_relationship/output_weights": (2, h),
                       "cls/seq_relationship/output_bias": (2,)})
    return shapes


def _modernbert_heads(config, heads):
    """The bias-free heads of ModernBERT's classes: ForMaskedLM's transform and decoder
    bias, ForSequenceClassification's output layer (3 labels in the fixture)."""
    h = config.hidden_size
    shapes = {}
    if "mlm" in heads:
        shapes.update({"cls/predictions/transform/dense/kernel": (h, h),
                       "cls/predictions/transform/LayerNorm/gamma": (h,),
                       "cls/predictions/output_bias": (config.vocab_size,)})
    if "classifier" in heads:
        shapes.update({"output_weights": (3, h), "output_bias": (3,)})
    return shapes


# -- what is written ------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES)
def test_conversion_writes_the_graph_variables_and_the_class_heads(converted, case):
    out_dir, result = converted[case]
    family, heads = EXPECTED[case]
    assert result.family == family
    bert_config = json.load(open(os.path.join(out_dir, "bert_config.json")))
    assert bert_config["model_family"] == family
    variables = read_checkpoint(os.path.join(out_dir, "bert_model.ckpt"))
    assert {n: v.shape for n, v in variables.items()} == expected_shapes(out_dir, heads)
    assert all(v.dtype == np.float32 for v in variables.values())


def test_family_settings_reach_bert_config(converted):
    """RoBERTa keeps its 66-row table (positions from row 2) and epsilon 1e-5;
    DistilBERT has no token types; ALBERT and the narrow ELECTRA project 16 -> 32;
    activations are named as the BERT path names them."""
    configs = {case: json.load(open(os.path.join(converted[case][0], "bert_config.json")))
               for case in CASES}
    assert configs["roberta"]["max_position_embeddings"] == 66
    assert configs["roberta"]["layer_norm_eps"] == 1e-5
    assert configs["roberta"]["type_vocab_size"] == 1
    assert configs["roberta"]["hidden_act"] == "gelu_exact"
    assert configs["distilbert"]["type_vocab_size"] == 0
    assert "layer_norm_eps" not in configs["distilbert"]
    assert configs["albert"]["embedding_size"] == 16 and configs["albert"]["hidden_act"] == "gelu"
    assert configs["electra"]["embedding_size"] == 16
    assert "embedding_size" not in configs["electra-discriminator"]
    for config in configs.values():
        modeling.BertConfig.from_dict(config).validate()


@pytest.mark.parametrize("case", CASES)
def test_tokenizer_files_are_copied_unchanged(converted, case):
    out_dir, result = converted[case]
    source = fixture_dir(case)
    tokenizer_files = [n for n in os.listdir(source) if n not in (
        "config.json", REFERENCE, "model.safetensors", "pytorch_model.bin")]
    assert tokenizer_files
    for name in tokenizer_files:
        assert filecmp.cmp(os.path.join(source, name), os.path.join(out_dir, name),
                           shallow=False), name
    assert REFERENCE not in os.listdir(out_dir) and "config.json" not in os.listdir(out_dir)
    assert os.path.basename(result.vocab_file) in tokenizer_files


def test_summary_names_the_family_and_what_was_left_out(converted):
    summary = conv.format_summary(converted["electra-discriminator"][1])
    assert "model_family electra" in summary and "--vocab_file=" in summary
    assert "left out (no place in Google's layout): discriminator_predictions." in summary
    assert "replaced-token detection head" in summary
    assert "no pooler in the source" in conv.format_summary(converted["roberta"][1])


# -- parity with transformers ---------------------------------------------------------

def encoder_states(out_dir, arrays):
    """Our BertModel (fp32, predict mode) on the converted checkpoint: float32
    [rows, seq, hidden] for the reference's input_ids, mask and token types."""
    config = modeling.BertConfig.from_json_file(os.path.join(out_dir, "bert_config.json"))
    checkpoint = os.path.join(out_dir, "bert_model.ckpt")
    with tf.Graph().as_default():
        model = modeling.BertModel(
            config, is_training=False, input_ids=tf.constant(arrays["input_ids"]),
            input_mask=tf.constant(arrays["attention_mask"]),
            token_type_ids=tf.constant(arrays["token_type_ids"]))
        tvars = tf1.trainable_variables()
        assignment_map, _ = modeling.get_assignment_map_from_checkpoint(tvars, checkpoint)
        # Every encoder variable comes from the checkpoint (only a pooler may be absent).
        missing = set(v.name[:-2] for v in tvars) - set(assignment_map)
        assert all(name.startswith("bert/pooler/") for name in missing), missing
        tf1.train.init_from_checkpoint(checkpoint, assignment_map)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            return session.run(model.get_sequence_output())


@pytest.mark.parametrize("case", CASES)
def test_converted_encoder_gives_transformers_states(converted, case):
    arrays = np.load(os.path.join(fixture_dir(case), REFERENCE))
    states = encoder_states(converted[case][0], arrays)
    mask = arrays["attention_mask"].astype(bool)
    for row in range(mask.shape[0]):
        diff = np.abs(states[row][mask[row]] - arrays["last_hidden_state"][row][mask[row]])
        assert diff.max() < 1e-4, "%s row %d (%s): max abs diff %g" % (
            case, row, arrays["texts"][row], diff.max())
    weights = mask[:, :, None].astype(np.float32)
    mean = (states * weights).sum(1) / weights.sum(1)
    np.testing.assert_allclose(mean, arrays["mean_pooled"], atol=1e-4, rtol=0)


# -- a fine-tuned classifier converts whole ---------------------------------------------

def _with_classifier(state, keys_and_shapes, seed=5):
    rng = np.random.RandomState(seed)
    state = dict(state)
    for key, shape in keys_and_shapes.items():
        state[key] = rng.standard_normal(shape).astype(np.float32)
    return state


@pytest.mark.parametrize("case, architecture, head, pooler_key", [
    ("roberta", "RobertaForSequenceClassification",
     {"classifier.dense.weight": (32, 32), "classifier.dense.bias": (32,),
      "classifier.out_proj.weight": (3, 32), "classifier.out_proj.bias": (3,)},
     "classifier.dense"),
    ("electra", "ElectraForSequenceClassification",
     {"classifier.dense.weight": (32, 32), "classifier.dense.bias": (32,),
      "classifier.out_proj.weight": (3, 32), "classifier.out_proj.bias": (3,)},
     "classifier.dense"),
    ("distilbert", "DistilBertForSequenceClassification",
     {"pre_classifier.weight": (32, 32), "pre_classifier.bias": (32,),
      "classifier.weight": (3, 32), "classifier.bias": (3,)}, "pre_classifier"),
    ("albert", "AlbertForSequenceClassification",
     {"classifier.weight": (3, 32), "classifier.bias": (3,)}, "albert.pooler"),
    ("deberta-v3", "DebertaV2ForSequenceClassification",
     {"pooler.dense.weight": (32, 32), "pooler.dense.bias": (32,),
      "classifier.weight": (3, 32), "classifier.bias": (3,)}, "pooler.dense"),
])
def test_a_sequence_classifier_converts_whole(tmp_path, case, architecture, head, pooler_key):
    state = _with_classifier(fixture_state(case), head)
    for key in [k for k in state if k.startswith(("lm_head.", "vocab_", "predictions.",
                                                    "sop_classifier.", "cls."))]:
        del state[key]  # a ...ForSequenceClassification has no pre-training heads
    labels = {"0": "negative", "1": "neutral", "2": "positive"}
    hf_dir = copy_case(case, tmp_path / "hf", state, architectures=[architecture],
                       id2label=labels)
    result = conv.convert(hf_dir, str(tmp_path / "out"))
    variables = read_checkpoint(str(tmp_path / "out" / "bert_model.ckpt"))
    out_key = [k for k in head if k.endswith("weight") and head[k][0] == 3][0]
    np.testing.assert_array_equal(variables["output_weights"], state[out_key])
    np.testing.assert_array_equal(variables["output_bias"], state[out_key[:-6] + "bias"])
    np.testing.assert_array_equal(variables["bert/pooler/dense/kernel"],
                                  state[pooler_key + ".weight"].T)
    assert result.ignored_keys == []
    assert any("negative, neutral, positive" in note for note in result.notes)


def test_the_electra_generator_keeps_its_narrow_masked_lm_head(tmp_path):
    """ElectraForMaskedLM: generator_predictions.dense [hidden -> embedding_size], its
    norm, and generator_lm_head (tied to the [vocab, 16] table) become cls/predictions."""
    state = _with_classifier(fixture_state("electra"), {
        "generator_predictions.dense.weight": (16, 32),
        "generator_predictions.dense.bias": (16,),
        "generator_predictions.LayerNorm.weight": (16,),
        "generator_predictions.LayerNorm.bias": (16,),
        "generator_lm_head.bias": (1000,)})
    state = {("electra." + k if k.startswith(("embeddings", "encoder")) else k): v
             for k, v in state.items()}
    state["generator_lm_head.weight"] = state["electra.embeddings.word_embeddings.weight"]
    hf_dir = copy_case("electra", tmp_path / "hf", state, architectures=["ElectraForMaskedLM"])
    conv.convert(hf_dir, str(tmp_path / "out"))
    variables = read_checkpoint(str(tmp_path / "out" / "bert_model.ckpt"))
    np.testing.assert_array_equal(variables["cls/predictions/transform/dense/kernel"],
                                  state["generator_predictions.dense.weight"].T)
    np.testing.assert_array_equal(variables["cls/predictions/output_bias"],
                                  state["generator_lm_head.bias"])
    assert variables["cls/predictions/transform/LayerNorm/gamma"].shape == (16,)
    state["generator_lm_head.weight"] = state["generator_lm_head.weight"] + 1.0
    hf_dir = copy_case("electra", tmp_path / "untied", state)
    with pytest.raises(InputError) as info:
        conv.convert(hf_dir, str(tmp_path / "out2"))
    assert_one_line(info.value, "generator_lm_head.weight differs from the word embeddings")


def test_a_token_classifier_head_is_left_out(tmp_path):
    state = _with_classifier(fixture_state("roberta"), {"classifier.weight": (5, 32),
                                                        "classifier.bias": (5,)})
    hf_dir = copy_case("roberta", tmp_path / "hf", state,
                       architectures=["RobertaForTokenClassification"])
    result = conv.convert(hf_dir, str(tmp_path / "out"))
    assert result.ignored_keys == ["classifier.bias", "classifier.weight"]
    assert "output_weights" not in read_checkpoint(str(tmp_path / "out" / "bert_model.ckpt"))


def test_the_base_pooler_and_the_classifier_dense_must_agree(tmp_path):
    state = _with_classifier(fixture_state("roberta"), {
        "classifier.dense.weight": (32, 32), "classifier.dense.bias": (32,),
        "classifier.out_proj.weight": (2, 32), "classifier.out_proj.bias": (2,),
        "roberta.pooler.dense.weight": (32, 32), "roberta.pooler.dense.bias": (32,)})
    hf_dir = copy_case("roberta", tmp_path / "hf", state,
                       architectures=["RobertaForSequenceClassification"])
    with pytest.raises(InputError) as info:
        conv.convert(hf_dir, str(tmp_path / "out"))
    assert_one_line(info.value, "classifier.dense.weight", "roberta.pooler.dense.weight",
                    "bert/pooler/dense/kernel")


# -- what does not convert: one line each ------------------------------------------------

def test_an_unknown_model_type_names_the_families_that_convert(tmp_path):
    hf_dir = copy_case("roberta", tmp_path / "hf", model_type="gpt2")
    with pytest.raises(InputError) as info:
        conv.convert(hf_dir, str(tmp_path / "out"))
    assert_one_line(info.value, os.path.join(hf_dir, "config.json"), "'gpt2'", "roberta",
                    "xlm-roberta", "electra", "distilbert", "albert")
    assert not os.path.exists(str(tmp_path / "out"))


@pytest.mark.parametrize("case, missing", [
    ("roberta", "roberta.encoder.layer.1.attention.self.key.weight"),
    ("distilbert", "distilbert.transformer.layer.0.ffn.lin2.bias"),
    ("albert", "albert.encoder.albert_layer_groups.0.albert_layers.0.ffn_output.weight"),
    ("electra", "electra.embeddings_project.weight"),
])
def test_a_missing_tensor_names_its_key(tmp_path, case, missing):
    state = fixture_state(case)
    key = missing if missing in state else missing.split(".", 1)[1]
    del state[key]
    hf_dir = copy_case(case, tmp_path / "hf", state)
    with pytest.raises(InputError) as info:
        conv.convert(hf_dir, str(tmp_path / "out"))
    assert_one_line(info.value, "model.safetensors", "missing tensor " + missing.split(".", 1)[1])


@pytest.mark.parametrize("case, changes, fragments", [
    ("albert", {"num_hidden_groups": 2}, ["'num_hidden_groups' is 2", "one shared layer"]),
    ("albert", {"inner_group_num": 2}, ["'inner_group_num' is 2"]),
    ("roberta", {"pad_token_id": 0}, ["'pad_token_id' is 0", "pad_token_id + 1"]),
    ("roberta", {"hidden_act": "swish"}, ["'hidden_act' 'swish'"]),
    ("distilbert", {"n_heads": 3}, ["'dim' 32 is not a multiple of 'n_heads' 3"]),
    ("electra", {"embedding_size": None}, ["missing required field 'embedding_size'"]),
    ("electra", {"is_decoder": True}, ["'is_decoder' is true"]),
])
def test_a_config_that_cannot_convert_is_one_line(tmp_path, case, changes, fragments):
    hf_dir = copy_case(case, tmp_path / "hf", **changes)
    with pytest.raises(InputError) as info:
        conv.convert(hf_dir, str(tmp_path / "out"))
    assert_one_line(info.value, os.path.join(hf_dir, "config.json"), *fragments)


def test_a_subword_folder_needs_a_tokenizer_file(tmp_path):
    hf_dir = copy_case("xlm-roberta", tmp_path / "hf")
    for name in ("tokenizer.json", "sentencepiece.bpe.model"):
        os.remove(os.path.join(hf_dir, name))
    with pytest.raises(InputError) as info:
        conv.convert(hf_dir, str(tmp_path / "out"))
    assert_one_line(info.value, hf_dir, "no tokenizer file", "xlm-roberta")


def test_the_tokenizer_must_fit_vocab_size(tmp_path):
    hf_dir = copy_case("roberta", tmp_path / "hf", vocab_size=999)
    with pytest.raises(InputError) as info:
        conv.convert(hf_dir, str(tmp_path / "out"))
    assert_one_line(info.value, "tokens", "vocab_size 999")


# -- a Hub model id, offline, from huggingface_hub's cache --------------------------------

def _hub_cache(root, model_id, case, revision="0123456789abcdef0123456789abcdef01234567"):
    """Lays `case`'s fixture out as huggingface_hub caches `model_id` under root/hub."""
    repo = os.path.join(root, "hub", "models--" + model_id.replace("/", "--"))
    copy_case(case, os.path.join(repo, "snapshots", revision))
    os.makedirs(os.path.join(repo, "refs"))
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(revision)
    return repo


def test_a_hub_id_converts_offline_from_the_cache(tmp_path, monkeypatch):
    pytest.importorskip("huggingface_hub")
    _hub_cache(str(tmp_path / "hf_home"), "FacebookAI/tiny-xlm-roberta", "xlm-roberta")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    result = conv.convert("FacebookAI/tiny-xlm-roberta", str(tmp_path / "out"))
    assert result.family == "xlm-roberta"
    assert "snapshots" in result.weights_path
    assert result.notes[0].startswith("FacebookAI/tiny-xlm-roberta from the Hugging Face Hub")
    assert filecmp.cmp(os.path.join(fixture_dir("xlm-roberta"), "sentencepiece.bpe.model"),
                       str(tmp_path / "out" / "sentencepiece.bpe.model"), shallow=False)


def test_a_hub_id_offline_without_a_cache_is_one_line(tmp_path, monkeypatch):
    pytest.importorskip("huggingface_hub")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty_home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as info:
        conv.convert("FacebookAI/xlm-roberta-base", str(tmp_path / "out"))
    assert_one_line(info.value, "--hf_dir FacebookAI/xlm-roberta-base", "HF_HUB_OFFLINE",
                    "no copy", str(tmp_path / "empty_home" / "hub"))
    assert not os.path.exists(str(tmp_path / "out"))


def test_a_path_that_is_no_folder_and_no_id_is_refused_at_once(tmp_path):
    with pytest.raises(InputError) as info:
        conv.convert(str(tmp_path / "a" / "b" / "c"), str(tmp_path / "out"))
    assert_one_line(info.value, "no such folder")


# -- Google's own ELECTRA and ALBERT releases ---------------------------------------------

# Our names -> Google's inside ALBERT's shared layer, written out again here so the
# test does not read the map it checks.
_ALBERT_GOOGLE = {
    "attention/self/": "attention_1/self/",
    "attention/output/dense/": "attention_1/output/dense/",
    "attention/output/LayerNorm/": "LayerNorm/",
    "intermediate/dense/": "ffn_1/intermediate/dense/",
    "output/dense/": "ffn_1/intermediate/output/dense/",
    "output/LayerNorm/": "LayerNorm_1/",
}


def _albert_google_name(name):
    if name.startswith("bert/embeddings_project/"):
        return name.replace("bert/embeddings_project/", "bert/encoder/embedding_hidden_mapping_in/")
    layer = "bert/encoder/layer_0/"
    if name.startswith(layer):
        inner = name[len(layer):]
        for ours, theirs in _ALBERT_GOOGLE.items():
            if inner.startswith(ours):
                return ("bert/encoder/transformer/group_0/inner_group_0/" + theirs
                        + inner[len(ours):])
    return name


def _google_folder(folder, variables, extra_files):
    os.makedirs(folder)
    conv.write_checkpoint(variables, os.path.join(folder, "model.ckpt-1000"))
    for name, source in extra_files.items():
        shutil.copyfile(source, os.path.join(folder, name))
    return folder


def test_google_electra_checkpoint_converts(converted, tmp_path):
    ours = read_checkpoint(os.path.join(converted["electra"][0], "bert_model.ckpt"))
    google = {name.replace("bert/", "electra/", 1): value for name, value in ours.items()}
    rng = np.random.RandomState(0)
    for name, shape in (("discriminator_predictions/dense/kernel", (32, 32)),
                        ("discriminator_predictions/dense_1/kernel", (32, 1)),
                        ("generator/encoder/layer_0/output/dense/kernel", (37, 8)),
                        ("generator_predictions/output_bias", (1000,)),
                        ("electra/encoder/layer_0/output/dense/kernel/adam_m", (37, 32)),
                        ("global_step", ())):
        google[name] = rng.standard_normal(shape).astype(np.float32)
    folder = _google_folder(str(tmp_path / "electra_small"), google, {
        "vocab.txt": os.path.join(fixture_dir("electra"), "vocab.txt")})
    result = conv.convert(folder, str(tmp_path / "out"))
    back = read_checkpoint(str(tmp_path / "out" / "bert_model.ckpt"))
    assert set(back) == set(ours)
    for name in ours:
        np.testing.assert_array_equal(back[name], ours[name], name)
    config = json.load(open(str(tmp_path / "out" / "bert_config.json")))
    assert config["model_family"] == "electra" and config["embedding_size"] == 16
    assert config["num_hidden_layers"] == 2 and config["intermediate_size"] == 37
    assert config["num_attention_heads"] == 1  # max(1, 32 // 64), as ELECTRA sets it
    assert config["hidden_act"] == "gelu_exact"
    assert "global_step" in result.ignored_keys
    assert "discriminator_predictions/dense/kernel" in result.ignored_keys
    assert os.listdir(str(tmp_path / "out")).count("vocab.txt") == 1


def _albert_google_folder(converted, tmp_path, config_changes=None, extra=None):
    out_dir = converted["albert"][0]
    ours = read_checkpoint(os.path.join(out_dir, "bert_model.ckpt"))
    google = {_albert_google_name(name): value for name, value in ours.items()}
    google.update(extra or {})
    bert_config = json.load(open(os.path.join(out_dir, "bert_config.json")))
    albert_config = {k: v for k, v in bert_config.items() if k != "model_family"}
    albert_config.update(num_hidden_groups=1, inner_group_num=1, down_scale_factor=1)
    albert_config.update(config_changes or {})
    folder = _google_folder(str(tmp_path / "albert_base"), google, {
        "30k-clean.model": os.path.join(fixture_dir("albert"), "spiece.model")})
    with open(os.path.join(folder, "albert_config.json"), "w") as f:
        json.dump(albert_config, f)
    return folder, ours, bert_config


def test_google_albert_checkpoint_converts(converted, tmp_path):
    folder, ours, bert_config = _albert_google_folder(converted, tmp_path)
    conv.convert(folder, str(tmp_path / "out"))
    back = read_checkpoint(str(tmp_path / "out" / "bert_model.ckpt"))
    assert set(back) == set(ours)
    for name in ours:
        np.testing.assert_array_equal(back[name], ours[name], name)
    assert json.load(open(str(tmp_path / "out" / "bert_config.json"))) == bert_config
    assert "30k-clean.model" in os.listdir(str(tmp_path / "out"))


def test_google_albert_with_two_groups_is_one_line(converted, tmp_path):
    second = "bert/encoder/transformer/group_1/inner_group_0/LayerNorm/gamma"
    folder, _, _ = _albert_google_folder(converted, tmp_path,
                                         extra={second: np.ones(32, np.float32)})
    with pytest.raises(InputError) as info:
        conv.convert(folder, str(tmp_path / "out"))
    assert_one_line(info.value, second, "one shared layer")


def test_google_albert_needs_its_config(converted, tmp_path):
    folder, _, _ = _albert_google_folder(converted, tmp_path)
    os.remove(os.path.join(folder, "albert_config.json"))
    with pytest.raises(InputError) as info:
        conv.convert(folder, str(tmp_path / "out"))
    assert_one_line(info.value, "albert_config.json", "file not found")


def test_google_name_map():
    electra, albert = "electra", "albert"
    assert google_checkpoints.google_name_to_ours(
        "electra/embeddings_project/kernel", electra) == "bert/embeddings_project/kernel"
    assert google_checkpoints.google_name_to_ours(
        "generator_predictions/LayerNorm/beta", electra) is None
    assert google_checkpoints.google_name_to_ours(
        "bert/encoder/transformer/group_0/inner_group_0/ffn_1/intermediate/output/dense/bias",
        albert) == "bert/encoder/layer_0/output/dense/bias"
    assert google_checkpoints.google_name_to_ours(
        "bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/gamma",
        albert) == "bert/encoder/layer_0/output/LayerNorm/gamma"
    assert google_checkpoints.google_name_to_ours(
        "cls/predictions/output_bias/adam_v", albert) is None
