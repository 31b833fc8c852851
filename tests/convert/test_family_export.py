"""export_hf.py for every family: the stock transformers classes, and back.

The run folders are tests/convert/family_export_cases.py's: each family's fixture
(tests/fixtures/families/<case>/) converted here, with a seeded head of each kind.
Each is exported and checked against tests/fixtures/family_export_reference.json
(made by tests/fixtures/make_family_export_reference.py with transformers): the
folder is byte for byte the one transformers loaded (no missing or unexpected
tensor), its model.safetensors holds exactly the names transformers saves for the
class, and our graph on the fixture's reference ids gives what transformers
computed from the folder (the classifier's logits, the sentence-transformers
embedding of the mean-pooled one, the token and span heads, the masked LM) within
1e-4. Converting an export back gives the run's variables.
"""

import filecmp
import json
import math
import os

import family_export_cases as cases
import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file

from bert_toolkit.convert import hf_checkpoint, hf_export, hf_families
from bert_toolkit.convert.options import ExportHfOptions
from bert_toolkit.errors import InputError
from bert_toolkit.model import modeling
from bert_toolkit.text import tokenization

from tiny import peer_python

tf1 = tf.compat.v1
RECORDED = json.load(open(cases.REFERENCE + ".json", encoding="utf-8"))["cases"]
PAIRS = [(case, role) for case in cases.CASES for role in RECORDED[case]]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("family_exports"))


@pytest.fixture(scope="module")
def exports(root):
    """(case, role) -> exported folder of every recorded case and role."""
    return {(case, role): cases.export_case(case, role, root) for case, role in PAIRS}


def reference_arrays(case):
    return np.load(os.path.join(cases.FAMILIES_DIR, case, "reference.npz"))


def recorded_outputs(case, role):
    arrays = np.load(cases.REFERENCE + ".npz")
    prefix = "%s/%s/" % (case, role)
    return {name[len(prefix):]: arrays[name] for name in arrays.files if name.startswith(prefix)}


def run_dir(root, case, role):
    return os.path.join(root, "%s-%s-run" % (case, role))


# -- the folder transformers loaded -------------------------------------------------------

@pytest.mark.parametrize("case, role", PAIRS)
def test_the_export_holds_the_stock_tensor_names(exports, case, role):
    tensors = load_file(os.path.join(exports[case, role], "model.safetensors"))
    assert sorted(tensors) == RECORDED[case][role]["stock_keys"]
    assert all(t.dtype == np.float32 for t in tensors.values())
    config = json.load(open(os.path.join(exports[case, role], "config.json")))
    assert config["architectures"] == [RECORDED[case][role]["class"]]


@pytest.mark.parametrize("case, role", PAIRS)
def test_the_export_is_the_folder_transformers_loaded(exports, case, role):
    # If this fails after a change to the exporter (or the fixtures), re-run
    # tests/fixtures/make_family_export_reference.py.
    assert cases.folder_digests(exports[case, role]) == RECORDED[case][role]["files"]
    assert RECORDED[case][role]["tokenizer_ids_equal"] is True
    assert not any(RECORDED[case][role]["loading"].values())


def test_config_json_uses_each_familys_fields(exports):
    def config(case, role="encoder"):
        return json.load(open(os.path.join(exports[case, role], "config.json")))
    distilbert = config("distilbert")
    assert distilbert["model_type"] == "distilbert"
    assert (distilbert["dim"], distilbert["hidden_dim"], distilbert["n_layers"],
            distilbert["n_heads"], distilbert["activation"]) == (32, 37, 2, 4, "gelu")
    assert "hidden_size" not in distilbert and "type_vocab_size" not in distilbert
    for case in ("roberta", "xlm-roberta"):
        roberta = config(case)
        assert roberta["model_type"] == case
        assert (roberta["pad_token_id"], roberta["bos_token_id"], roberta["eos_token_id"]) == (
            1, 0, 2)
        assert roberta["max_position_embeddings"] == 66 and roberta["type_vocab_size"] == 1
        assert roberta["layer_norm_eps"] == 1e-5
    assert config("electra")["embedding_size"] == 16
    albert = config("albert")
    assert (albert["embedding_size"], albert["num_hidden_groups"], albert["inner_group_num"],
            albert["hidden_act"]) == (16, 1, 1, "gelu_new")
    classifier = config("roberta", "classifier")
    assert classifier["id2label"] == {str(i): label for i, label in enumerate(cases.LABELS)}
    assert classifier["problem_type"] == "single_label_classification"


@pytest.mark.parametrize("case", cases.CASES)
def test_the_tokenizer_files_travel_unchanged(exports, case):
    folder = exports[case, "classifier"]
    source = os.path.join(cases.FAMILIES_DIR, case)
    wordpiece = case in ("electra", "distilbert")
    copied = ["vocab.txt"] if wordpiece else [
        n for n in ("tokenizer.json", "vocab.json", "merges.txt", "sentencepiece.bpe.model",
                    "spiece.model", "spm.model") if os.path.exists(os.path.join(source, n))]
    for name in copied:
        assert filecmp.cmp(os.path.join(source, name), os.path.join(folder, name),
                           shallow=False), name
    settings = json.load(open(os.path.join(folder, "tokenizer_config.json")))
    family = json.load(open(os.path.join(folder, "config.json")))["model_type"]
    assert settings["tokenizer_class"] == hf_families.TOKENIZER_CLASSES[family]
    assert settings["model_max_length"] == cases.MAX_SEQ_LENGTH
    assert settings["split_special_tokens"] is True
    for key in ("is_local", "local_files_only"):
        assert key not in settings


@pytest.mark.parametrize("case", cases.CASES)
def test_our_tokenizer_on_the_exported_files_gives_the_reference_ids(exports, case):
    folder = exports[case, "classifier"]
    bert_config = modeling.BertConfig.from_json_file(
        os.path.join(run_dir(os.path.dirname(folder), case, "classifier"), "bert_config.json"))
    vocab = "vocab.txt" if bert_config.family.tokenizer == "wordpiece" else "tokenizer.json"
    tokenizer = tokenization.load_tokenizer(os.path.join(folder, vocab),
                                            True if vocab == "vocab.txt" else None,
                                            bert_config.family)
    arrays = reference_arrays(case)
    parts = [str(text).split(" ||| ") for text in arrays["texts"]]
    ids, mask, types = tokenizer.encode_pairs([p[0] for p in parts],
                                              [p[1] if len(p) > 1 else None for p in parts],
                                              max_seq_length=arrays["input_ids"].shape[1])
    real = arrays["attention_mask"].astype(bool)
    np.testing.assert_array_equal(mask, arrays["attention_mask"])
    np.testing.assert_array_equal(ids[real], arrays["input_ids"][real])
    np.testing.assert_array_equal(types[real], arrays["token_type_ids"][real])


# -- and back ---------------------------------------------------------------------------

@pytest.mark.parametrize("case, role", [(c, r) for c, r in PAIRS
                                        if r in ("encoder", "classifier", "pretraining")])
def test_converting_the_export_back_gives_the_run_variables(exports, root, tmp_path, case,
                                                            role):
    hf_checkpoint.convert(exports[case, role], str(tmp_path / "back"))
    back = cases.read_variables(str(tmp_path / "back" / "bert_model.ckpt"))
    ours = cases.read_variables(os.path.join(run_dir(root, case, role), "bert_model.ckpt"))
    naming = hf_families.naming(cases.FAMILIES.get(case, case))
    if role != "classifier" and not hf_export._has_base_pooler(
            naming, hf_export.ENCODER if role == "encoder" else naming.masked_lm_class):
        ours = {n: v for n, v in ours.items() if not n.startswith("bert/pooler/")}
    assert sorted(back) == sorted(ours)
    for name in ours:
        np.testing.assert_array_equal(back[name], ours[name], name)


# -- what transformers computed from the folders -----------------------------------------

def our_encoder(run, arrays, input_ids=None, token_heads=False):
    """(sequence output [rows, seq, hidden], pooled [rows, hidden]) of our graph, fp32,
    predict mode, on the run's checkpoint and the reference's ids; with token_heads,
    the token-level heads' input (BertModel.get_token_head_input: ModernBERT's head on
    every token) instead of the sequence output."""
    config = modeling.BertConfig.from_json_file(os.path.join(run, "bert_config.json"))
    ids = arrays["input_ids"] if input_ids is None else input_ids
    with tf.Graph().as_default():
        model = modeling.BertModel(config, False, tf.constant(ids),
                                   tf.constant(arrays["attention_mask"]),
                                   tf.constant(arrays["token_type_ids"]))
        saver = tf1.train.Saver()
        with tf1.Session() as session:
            saver.restore(session, os.path.join(run, "bert_model.ckpt"))
            states = model.get_token_head_input() if token_heads else \
                model.get_sequence_output()
            return session.run([states, model.get_pooled_output()])


@pytest.mark.parametrize("case", cases.CASES)
def test_the_classifier_gives_transformers_logits(exports, root, case):
    run = run_dir(root, case, "classifier")
    arrays = reference_arrays(case)
    _, pooled = our_encoder(run, arrays)
    head = cases.read_variables(os.path.join(run, "bert_model.ckpt"))
    logits = pooled @ head["output_weights"].T + head["output_bias"]
    np.testing.assert_allclose(logits, recorded_outputs(case, "classifier")["logits"],
                               atol=1e-4, rtol=0)


@pytest.mark.parametrize("case", cases.CASES)
def test_the_mean_pooled_classifier_gives_sentence_transformers_output(exports, root, case):
    run = run_dir(root, case, "mean")
    arrays = reference_arrays(case)
    states, _ = our_encoder(run, arrays)
    weights = arrays["attention_mask"][:, :, None].astype(np.float32)
    mean = (states * weights).sum(1) / weights.sum(1)
    head = cases.read_variables(os.path.join(run, "bert_model.ckpt"))
    logits = mean @ head["output_weights"].T + head["output_bias"]
    np.testing.assert_allclose(logits, recorded_outputs(case, "mean")["logits"],
                               atol=1e-4, rtol=0)


@pytest.mark.parametrize("case, role", [(c, r) for c in cases.CASES
                                        for r in ("tagger", "squad")])
def test_the_token_and_span_heads_give_transformers_logits(exports, root, case, role):
    run = run_dir(root, case, role)
    arrays = reference_arrays(case)
    states, _ = our_encoder(run, arrays, token_heads=True)
    head = cases.read_variables(os.path.join(run, "bert_model.ckpt"))
    mask = arrays["attention_mask"].astype(bool)
    recorded = recorded_outputs(case, role)
    if role == "tagger":
        logits = states @ head["output_weights"].T + head["output_bias"]
        np.testing.assert_allclose(logits[mask], recorded["logits"][mask], atol=1e-4, rtol=0)
    else:
        logits = states @ head["cls/squad/output_weights"].T + head["cls/squad/output_bias"]
        np.testing.assert_allclose(logits[..., 0][mask], recorded["start_logits"][mask],
                                   atol=1e-4, rtol=0)
        np.testing.assert_allclose(logits[..., 1][mask], recorded["end_logits"][mask],
                                   atol=1e-4, rtol=0)


_GELU = {"gelu_exact": np.vectorize(lambda x: 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))),
         "gelu": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi)
                                                    * (x + 0.044715 * x ** 3))),
         "relu": lambda x: np.maximum(x, 0.0)}


def _layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * gamma + beta


@pytest.mark.parametrize("case", [c for c in cases.CASES if "pretraining" in RECORDED[c]])
def test_the_masked_lm_gives_transformers_logits(exports, root, case):
    """The exported masked-LM head (transform, norm, tied decoder, bias) computes what
    our variables mean: checked in numpy from the run's checkpoint."""
    run = run_dir(root, case, "pretraining")
    arrays = reference_arrays(case)
    ids = arrays["input_ids"].copy()
    ids[:, 2] = RECORDED[case]["pretraining"]["mask_token_id"]
    states, _ = our_encoder(run, arrays, input_ids=ids)
    v = cases.read_variables(os.path.join(run, "bert_model.ckpt"))
    config = json.load(open(os.path.join(run, "bert_config.json")))
    activation = (hf_families.naming(cases.FAMILIES.get(case, case)).mlm.activation
                  or config["hidden_act"])
    # ModernBERT's transform has no biases.
    hidden = states[:2, 2] @ v["cls/predictions/transform/dense/kernel"] + v.get(
        "cls/predictions/transform/dense/bias", 0.0)
    hidden = _layer_norm(_GELU[activation](hidden),
                         v["cls/predictions/transform/LayerNorm/gamma"],
                         v.get("cls/predictions/transform/LayerNorm/beta", 0.0),
                         config.get("layer_norm_eps", 1e-12))
    logits = hidden @ v["bert/embeddings/word_embeddings"].T + v["cls/predictions/output_bias"]
    np.testing.assert_allclose(logits, recorded_outputs(case, "pretraining")["mlm_logits"],
                               atol=1e-4, rtol=0)


# -- what cannot export -------------------------------------------------------------------

def test_a_distilbert_with_token_types_has_no_stock_layout(root, tmp_path):
    run = cases.make_run_dir("distilbert", "encoder", str(tmp_path))
    path = os.path.join(run, "bert_config.json")
    config = json.load(open(path))
    config["type_vocab_size"] = 2
    json.dump(config, open(path, "w"))
    reader = tf.train.load_checkpoint(os.path.join(run, "bert_model.ckpt"))
    variables = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
    variables["bert/embeddings/token_type_embeddings"] = np.zeros((2, 32), np.float32)
    hf_checkpoint.write_checkpoint(variables, os.path.join(run, "bert_model.ckpt"))
    with pytest.raises(InputError) as info:
        hf_export.export(ExportHfOptions(model_dir=run, hf_dir=str(tmp_path / "hf")))
    assert "\n" not in str(info.value)
    assert "distilbert model with type_vocab_size 2 has no stock" in str(info.value)
    assert not os.path.exists(str(tmp_path / "hf"))


# -- the peer environment: a fine-tuning run of each family, loaded by transformers -------



PEER_SCRIPT = """
import json, sys, torch, transformers
hf_dir, texts, length = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir)
model = transformers.AutoModelForSequenceClassification.from_pretrained(hf_dir).eval()
with torch.no_grad():
    logits = model(**tokenizer(texts, padding=True, truncation=True, max_length=length,
                               return_tensors="pt")).logits
print(json.dumps(logits.softmax(-1).tolist()))
"""




@pytest.mark.slow
@pytest.mark.skipif(peer_python() is None, reason="no interpreter with torch and transformers"
                    " (pip install -r requirements-bench.txt into .venv-bench)")
@pytest.mark.parametrize("case", cases.CASES)
def test_a_family_fine_tuned_here_loads_in_transformers(tmp_path, case):
    """The fixture converted, fine-tuned and predicted by run_custom_classifier.py on real
    reviews, exported by export_hf.py: stock AutoModelForSequenceClassification gives
    test_results.tsv's probabilities."""
    import csv
    import shutil
    import subprocess

    from bert_toolkit import assets

    import script_runs
    result = hf_checkpoint.convert(os.path.join(cases.FAMILIES_DIR, case),
                                   str(tmp_path / "model"))
    data = assets.write_polarity_split(str(tmp_path / "data"), limit=60)
    shutil.copyfile(os.path.join(data, "dev.csv"), os.path.join(data, "test.csv"))
    run = str(tmp_path / "run")
    trained = script_runs.run([
        "run_custom_classifier.py", "--task_name=custom", "--data_dir=%s" % data,
        "--output_dir=%s" % run, "--do_train", "--do_predict", "--max_seq_length=32",
        "--train_batch_size=16", "--num_train_epochs=1", "--text_a_column=sentence",
        "--label_column=label", "--bert_config_file=%s" % (tmp_path / "model" / "bert_config.json"),
        "--vocab_file=%s" % result.vocab_file,
        "--init_checkpoint=%s" % (tmp_path / "model" / "bert_model.ckpt")])
    assert trained.returncode == 0, trained.stderr[-2000:]
    exported = script_runs.run(["export_hf.py", "--model_dir=%s" % run,
                                "--hf_dir=%s" % (tmp_path / "hf")])
    assert exported.returncode == 0, exported.stderr[-2000:]
    ours = np.loadtxt(os.path.join(run, "test_results.tsv"), ndmin=2)
    with open(os.path.join(data, "test.csv"), encoding="utf-8", newline="") as f:
        texts = [row["sentence"] for row in csv.DictReader(f)]
    assert len(texts) == len(ours) == 12
    peer = subprocess.run([peer_python(), "-c", PEER_SCRIPT, str(tmp_path / "hf"),
                           json.dumps(texts), "32"], capture_output=True, text=True)
    assert peer.returncode == 0, peer.stderr[-2000:]
    theirs = np.array(json.loads(peer.stdout.strip().splitlines()[-1]))
    print("%s: test_results.tsv against transformers, largest difference %.1e"
          % (case, np.abs(ours - theirs).max()))
    np.testing.assert_allclose(ours, theirs, atol=1e-4, rtol=0)
