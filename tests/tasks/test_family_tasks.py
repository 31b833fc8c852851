"""Every task and script on the other encoder families (issue 58): the rows each
family's layout gives, and runs of the scripts on tiny RoBERTa, ALBERT (and
XLM-R, DistilBERT) models made here from the tokenizers of
tests/fixtures/families/ (a bert_config.json naming the family, a random
checkpoint), as a converted model folder has them."""

import glob
import json
import os
import random
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit import families
from bert_toolkit.engine import export_layout, model_files
from bert_toolkit.errors import InputError
from bert_toolkit.serving import client as serving_client
from bert_toolkit.serving import server as serving_server
from bert_toolkit.tasks.features import extraction
from bert_toolkit.tasks.features.options import FeatureExtractionOptions
from bert_toolkit.tasks.pretraining import data as pretraining_data
from bert_toolkit.tasks.pretraining import task as pretraining
from bert_toolkit.tasks.pretraining.options import PretrainingDataConfig
from bert_toolkit.tasks.reranking import task as reranking
from bert_toolkit.tasks.seq_labeling import features as seq_labeling_features
from bert_toolkit.tasks.squad import answers as squad_answers
from bert_toolkit.tasks.squad import data as squad_data
from bert_toolkit.tasks.squad import features as squad_features
from bert_toolkit.text import tokenization

import script_runs
from tiny import FIXTURES, NEGATIVE_WORDS, POSITIVE_WORDS, TINY_WORDS, tiny_config

tf1 = tf.compat.v1

FAMILY_FIXTURES = os.path.join(FIXTURES, "families")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")

# family -> (its fixture folder's tokenizer file --vocab_file names, bert_config fields
# as a conversion writes them: RoBERTa's 2 + 64 positions and epsilon, ALBERT's and
# ELECTRA's narrower embeddings, DistilBERT without token types).
CASES = {
    "roberta": ("vocab.json", dict(max_position_embeddings=66, type_vocab_size=1,
                                   layer_norm_eps=1e-5)),
    "xlm-roberta": ("sentencepiece.bpe.model", dict(max_position_embeddings=66,
                                                    type_vocab_size=1, layer_norm_eps=1e-5)),
    "albert": ("spiece.model", dict(embedding_size=16, hidden_act="gelu")),
    "distilbert": ("vocab.txt", dict(type_vocab_size=0)),
    "electra": ("vocab.txt", dict(embedding_size=16)),
    # ModernBERT: tokenizer.json alone; a window of 8 (the texts are longer), layer 0
    # global and layer 1 local.
    "modernbert": ("tokenizer.json", dict(
        type_vocab_size=0, layer_norm_eps=1e-5, hidden_act="gelu_exact", local_attention=8,
        global_attn_every_n_layers=3, global_rope_theta=160000.0, local_rope_theta=10000.0,
        classifier_pooling="cls")),
    # DeBERTa-v3 (model_type deberta-v2): spm.model; 8 log buckets, as its fixture.
    "deberta-v2": ("spm.model", dict(type_vocab_size=0, layer_norm_eps=1e-7,
                                     position_buckets=8, max_relative_positions=-1)),
}
# A family's fixture folder, where it is not named as the family.
FOLDERS = {"deberta-v2": "deberta-v3"}
# ALBERT's one layer runs three times, so each step moves its weights by three
# layers' gradients: at 3e-3 the tiny model diverged on TensorFlow 2.21.
LEARNING_RATES = {"albert": "1e-3"}
LEARNING_RATES.update((family, "3e-3") for family in CASES if family != "albert")
_TOKENIZER_FILES = ("vocab.txt", "vocab.json", "merges.txt", "tokenizer.json",
                    "sentencepiece.bpe.model", "spiece.model", "tokenizer_config.json",
                    "spm.model")


def copy_tokenizer(family, directory):
    """The fixture folder's tokenizer files of `family` copied into `directory`;
    returns the path --vocab_file names."""
    os.makedirs(directory, exist_ok=True)
    source = os.path.join(FAMILY_FIXTURES, FOLDERS.get(family, family))
    for name in _TOKENIZER_FILES:
        if os.path.isfile(os.path.join(source, name)):
            shutil.copy(os.path.join(source, name), directory)
    return os.path.join(directory, CASES[family][0])


def family_tokenizer(family):
    """The tokenizer of the family's fixture folder."""
    return tokenization.load_tokenizer(
        os.path.join(FAMILY_FIXTURES, FOLDERS.get(family, family), CASES[family][0]), None,
        families.get(family))


def write_family_model(directory, family, heads=(), **overrides):
    """A converted model folder of `family`: its tokenizer files, bert_config.json
    naming the family (a 2-layer, 32-wide encoder) and a random bert_model.ckpt,
    with the pre-training heads `heads` ("mlm", "nsp") too. Returns dict(vocab_file,
    bert_config_file, init_checkpoint)."""
    vocab_file = copy_tokenizer(family, directory)
    tokenizer = tokenization.load_tokenizer(vocab_file, None, families.get(family))
    config = tiny_config(vocab_size=len(tokenizer.vocab), model_family=family,
                         **dict(CASES[family][1], **overrides))
    from bert_toolkit.model import modeling
    shapes = pretraining.head_variable_shapes(config, "nsp" in heads) if heads else {}
    return dict(modeling.write_initial_checkpoint(config, directory, shapes, seed=5),
                vocab_file=vocab_file)


def model_args(model, output_dir, *extra):
    return ["--vocab_file=%s" % model["vocab_file"],
            "--bert_config_file=%s" % model["bert_config_file"],
            "--init_checkpoint=%s" % model["init_checkpoint"],
            "--output_dir=%s" % output_dir] + list(extra)


def run_script(script, *args):
    result = script_runs.run([script] + list(args), env=ENV, timeout=900)
    if result.returncode != 0:
        raise AssertionError("%s exit %d:\n%s" % (script, result.returncode,
                                                  result.stderr[-3000:]))
    return result


def sentiment_rows(rng, count, pairs=False):
    """(label, sentence[, second text]): label 1 iff the sentence has a positive word."""
    rows = []
    for _ in range(count):
        label = rng.choice(["0", "1"])
        words = [rng.choice(TINY_WORDS[:9]) for _ in range(rng.randint(2, 6))]
        words.insert(rng.randint(0, len(words)), rng.choice(
            POSITIVE_WORDS if label == "1" else NEGATIVE_WORDS))
        row = [label, " ".join(words)]
        if pairs:
            row.append(" ".join(rng.choice(TINY_WORDS[:9]) for _ in range(3)))
        rows.append(row)
    return rows


def write_tsv(path, header, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in [header] + rows:
            f.write("\t".join(row) + "\n")


# -- which family a tokenizer file is ------------------------------------------------

def test_family_of_a_tokenizer_file_from_its_folder_or_the_file(tmp_path):
    for family, name in (("roberta", "vocab.json"), ("roberta", "merges.txt"),
                         ("xlm-roberta", "sentencepiece.bpe.model"),
                         ("albert", "spiece.model"), ("distilbert", "vocab.txt")):
        folder = tmp_path / family
        copy_tokenizer(family, str(folder))
        guessed = model_files.family_of_tokenizer_file(str(folder / name))
        assert guessed.name == ("bert" if family == "distilbert" else family), name
    # tokenizer.json: by its model and special tokens.
    for family, expected in (("roberta", "roberta"), ("xlm-roberta", "xlm-roberta"),
                             ("albert", "albert"), ("distilbert", "bert")):
        path = str(tmp_path / family / "tokenizer.json")
        assert model_files.family_of_tokenizer_file(path).name == expected, family
    # A converted folder's bert_config.json, and the flag, win over the file.
    folder = tmp_path / "electra"
    copy_tokenizer("electra", str(folder))
    (folder / "bert_config.json").write_text(json.dumps({"model_family": "electra"}))
    assert model_files.family_of_tokenizer_file(str(folder / "vocab.txt")).name == "electra"
    assert model_files.family_of_tokenizer_file(str(folder / "vocab.txt"),
                                                "distilbert").name == "distilbert"
    odd = tmp_path / "odd.model"
    odd.write_text("x\n")
    with pytest.raises(InputError, match="odd.model: cannot tell the model family.*"
                                         "--model_family"):
        model_files.family_of_tokenizer_file(str(odd))
    # A WordPiece vocabulary of any other name is BERT's, as before.
    (tmp_path / "bert-base-uncased-vocab.txt").write_text("[PAD]\n")
    assert model_files.family_of_tokenizer_file(
        str(tmp_path / "bert-base-uncased-vocab.txt")).name == "bert"


def test_a_tokenizer_file_of_another_family_is_one_line(tmp_path):
    model = write_family_model(str(tmp_path / "m"), "roberta")
    shutil.copy(os.path.join(FAMILY_FIXTURES, "distilbert", "vocab.txt"), str(tmp_path / "m"))
    options = FeatureExtractionOptions(
        input_file="in", output_file="out", vocab_file=str(tmp_path / "m" / "vocab.txt"),
        max_seq_length=64,
        bert_config_file=model["bert_config_file"], init_checkpoint=model["init_checkpoint"])
    with pytest.raises(InputError, match="vocab.txt: a WordPiece file, but the roberta "
                                         "family's tokenizer is"):
        model_files.load_model_inputs(options)
    # Any of the family's files will do: the same tokenizer, the checkpoint checked.
    for name in ("vocab.json", "merges.txt", "tokenizer.json"):
        inputs = model_files.load_model_inputs(options.replace(
            vocab_file=str(tmp_path / "m" / name)))
        assert inputs.tokenizer.layout.seps_between == 2 and inputs.init_checkpoint
        assert inputs.tokenizer.do_lower_case is False  # roberta's BPE keeps case


def test_the_casing_flag_reaches_only_wordpiece_unless_it_is_given():
    roberta, bert = families.get("roberta"), families.get("bert")
    default = PretrainingDataConfig(vocab_file="v")
    assert model_files.requested_casing(default, bert) is True
    assert model_files.requested_casing(default, roberta) is None  # the file decides
    explicit = PretrainingDataConfig(vocab_file="v", do_lower_case=False)
    assert model_files.requested_casing(explicit, roberta) is False
    assert model_files.requested_casing(explicit, bert) is False


# -- rows in each family's layout --------------------------------------------------------

def test_reranking_pairs_follow_the_roberta_layout():
    tokenizer = family_tokenizer("roberta")
    layout = tokenizer.layout
    query, passage = tokenizer.encode_batch(["good movie", "the plot was fine and good"])
    ids, mask, segments = reranking.encode_pairs(
        tokenizer, ["good movie"], ["the plot was fine and good"], 6, 12)
    kept_passage = 12 - 4 - len(query)
    assert len(query) <= 6 and kept_passage < len(passage)  # the passage is cut
    expected = [layout.cls_id] + query + [layout.sep_id] * 2 + passage[:kept_passage] + [
        layout.sep_id]
    assert list(ids[0]) == expected + [layout.pad_id] * (12 - len(expected))
    assert mask[0].sum() == len(expected) and not segments.any()
    with pytest.raises(InputError, match="--max_query_length=8: expected at most "
                                         "--max_seq_length - 5 = 7"):
        reranking.encode_pairs(tokenizer, ["a"], ["b"], 8, 12)


def test_seq_labeling_words_keep_their_space_and_rows_their_layout():
    tokenizer = family_tokenizer("roberta")
    layout = tokenizer.layout
    words = ["Great", "acting", ",", "dull", "plot"]
    pieces = seq_labeling_features.sentence_pieces(tokenizer, [words], 30)[0]
    # Each word as inside a text: byte-level BPE's "Ġ" (a space) leads it.
    assert all(tokenizer.convert_ids_to_tokens(p)[0].startswith("\u0120") for p in pieces)
    (row,) = seq_labeling_features.encode_sentences([pieces], 16, 4, layout,
                                                    [[0, 1, 0, 1, 0]])
    length = 2 + sum(map(len, pieces))
    assert row["input_ids"][0] == layout.cls_id and row["input_ids"][length - 1] == \
        layout.sep_id
    assert (row["input_ids"][length:] == layout.pad_id).all()
    assert row["label_mask"].sum() == 5 and row["input_mask"].sum() == length


def test_squad_windows_in_the_roberta_layout_answer_with_whole_words(tmp_path):
    tokenizer = family_tokenizer("roberta")
    layout = tokenizer.layout
    context = ("the movie was good and the plot was fine , but the music was awful . "
               "the acting , the story and the film were dull and not great .")
    entries = [{"id": "q%d" % i, "question": "is the movie good",
                "answers": [{"text": answer, "answer_start": context.index(answer)}]}
               for i, answer in enumerate(["good", "the music was awful", "dull"])]
    path = str(tmp_path / "squad.json")
    with open(path, "w") as f:
        json.dump({"version": "1.1", "data": [{"title": "t", "paragraphs": [
            {"context": context, "qas": entries}]}]}, f)
    questions = squad_data.read_squad(path, True, False).questions
    found = set()
    for index, window in squad_features.windows_of(questions, tokenizer, 24, 5, 6, True):
        ids, segments = window.input_ids, window.segment_ids
        query_length = len(tokenizer.encode_batch(["is the movie good"])[0])
        assert ids[0] == layout.cls_id and ids[query_length + 1:query_length + 3] == [
            layout.sep_id] * 2 and ids[-1] == layout.sep_id
        assert not any(segments) and len(ids) <= 24
        assert tokenizer.convert_tokens_to_ids(window.tokens) == ids
        row = squad_features.window_row(window, index, tokenizer, 24, True)
        assert (row["input_ids"][len(ids):] == layout.pad_id).all()
        if window.start_position:
            text = squad_answers.span_text(window, window.start_position,
                                           window.end_position, questions[index].paragraph,
                                           None)
            assert text == questions[index].answer_text
            found.add(index)
    assert found == {0, 1, 2}
    with pytest.raises(InputError, match="--max_seq_length=8 leaves no room"):
        list(squad_features.windows_of(questions, tokenizer, 8, 5, 6, True))


def test_feature_extraction_rows_follow_google_in_each_layout():
    for family in ("roberta", "albert"):
        tokenizer = family_tokenizer(family)
        layout = tokenizer.layout
        feed = extraction.encode_lines(tokenizer, [("a good movie", "the plot"),
                                                   ("a good movie", None),
                                                   ("a good movie", "")], 32)
        a, b = tokenizer.encode_batch(["a good movie", "the plot"])
        pair, segments = layout.row(a, b)
        single, _ = layout.row(a)
        assert list(feed["input_ids"][0][:len(pair)]) == pair
        assert list(feed["segment_ids"][0][:len(pair)]) == segments
        for row in (1, 2):  # an empty b is a single text, as in Google's script
            assert list(feed["input_ids"][row][:feed["input_mask"][row].sum()]) == single
        tokens = extraction.tokens_of(tokenizer, feed["input_ids"], feed["input_mask"])
        assert tokens[1][0] == tokenizer.convert_ids_to_tokens([layout.cls_id])[0]


# -- pre-training instances --------------------------------------------------------------

def _shard(rng, documents=12):
    return [[" ".join(rng.choice(TINY_WORDS) for _ in range(rng.randint(3, 9)))
             for _ in range(rng.randint(2, 6))] for _ in range(documents)]


def _instances(family, **settings):
    """Records of one shard of `family`'s instances, parsed."""
    vocab_file = os.path.join(FAMILY_FIXTURES, family, CASES[family][0])
    config = PretrainingDataConfig(vocab_file=vocab_file, model_family=family,
                                   max_seq_length=24, max_predictions_per_seq=4,
                                   dupe_factor=2, **settings)
    worker = pretraining_data.ShardWorker(config)
    _, blobs, lengths = worker.process(0, _shard(random.Random(3)))
    data, records, offset = b"".join(blobs), [], 0
    for size in lengths.tolist():
        records.append(tf.train.Example.FromString(data[offset + 12:offset + size - 4]))
        offset += size
    features = {name: np.array([list(getattr(r.features.feature[name], kind).value)
                                for r in records])
                for name, kind in (("input_ids", "int64_list"), ("input_mask", "int64_list"),
                                   ("segment_ids", "int64_list"),
                                   ("masked_lm_positions", "int64_list"),
                                   ("masked_lm_ids", "int64_list"),
                                   ("masked_lm_weights", "float_list"),
                                   ("next_sentence_labels", "int64_list"))}
    return worker, features


@pytest.mark.parametrize("whole_words", [False, True])
def test_roberta_instances_are_full_sentences_masked_with_its_own_tokens(whole_words):
    worker, records = _instances("roberta", do_whole_word_mask=whole_words)
    tokenizer, layout = worker.tokenizer, worker.tokenizer.layout
    special = {layout.cls_id, layout.sep_id, layout.pad_id, worker.mask_id,
               tokenizer.vocab[tokenizer.unk_token]}
    assert len(records["input_ids"]) > 20
    assert not records["next_sentence_labels"].any() and not records["segment_ids"].any()
    masked = 0
    for ids, mask, positions, labels, weights in zip(
            records["input_ids"], records["input_mask"], records["masked_lm_positions"],
            records["masked_lm_ids"], records["masked_lm_weights"]):
        length = int(mask.sum())
        # <s> A </s>: one separator, at the end; padding is <pad>.
        assert ids[0] == layout.cls_id and ids[length - 1] == layout.sep_id
        assert layout.sep_id not in ids[1:length - 1].tolist()
        assert (ids[length:] == layout.pad_id).all()
        used = positions[weights > 0]
        assert used.size and (used >= 1).all() and (used <= length - 2).all()
        assert not set(labels[weights > 0].tolist()) & special
        replaced = ids[used]
        masked += int((replaced == worker.mask_id).sum())
        assert not set(replaced.tolist()) & (special - {worker.mask_id})
    assert masked > 0
    assert tokenizer.mask_token == "<mask>" and worker.mask_id == tokenizer.vocab["<mask>"]


def test_albert_instances_are_sentence_pairs_with_its_mask():
    worker, records = _instances("albert")
    layout = worker.tokenizer.layout
    assert worker.tokenizer.convert_ids_to_tokens([worker.mask_id]) == ["[MASK]"]
    assert set(records["next_sentence_labels"].ravel().tolist()) == {0, 1}
    for ids, mask, segments in zip(records["input_ids"], records["input_mask"],
                                   records["segment_ids"]):
        length = int(mask.sum())
        first_b = int(np.flatnonzero(segments)[0])
        assert ids[0] == layout.cls_id and ids[first_b - 1] == ids[length - 1] == \
            layout.sep_id
        assert (segments[first_b:length] == 1).all()


def test_whole_words_of_bpe_and_sentencepiece_start_with_their_space_marks():
    table = pretraining_data.continuation_table(["<s>", "\u0120good", "ness", "."], "bpe", {0})
    assert table == [False, False, True, True]
    table = pretraining_data.continuation_table(["\u2581good", "ness", "[CLS]"], "unigram",
                                                {2})
    assert table == [False, True, False]
    assert pretraining_data.continuation_table(["good", "##s"], "wordpiece") == [False, True]


# -- the scripts, end to end ---------------------------------------------------------------

@pytest.fixture(scope="module", params=["roberta", "albert", "modernbert", "deberta-v2"])
def family_model(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    return request.param, write_family_model(str(root / "model"), request.param), root


def test_classifier_pairs_train_predict_and_export_without_an_in_graph_text_signature(
        family_model):
    family, model, root = family_model
    rng = random.Random(0)
    data_dir = root / "pairs"
    data_dir.mkdir()
    for split, count in (("train", 64), ("dev", 16), ("test", 6)):
        write_tsv(str(data_dir / ("%s.tsv" % split)), ["label", "sentence", "second"],
                  sentiment_rows(rng, count, pairs=True))
    output_dir = str(root / "pairs_out")
    result = run_script("run_custom_classifier.py", "--task_name=custom",
                        "--data_dir=%s" % data_dir, "--text_a_column=sentence",
                        "--text_b_column=second", "--label_column=label",
                        *model_args(model, output_dir, "--max_seq_length=24",
                                    "--learning_rate=%s" % LEARNING_RATES[family],
                                    "--num_train_epochs=15",
                                    "--train_batch_size=8", "--do_train", "--do_eval",
                                    "--do_predict", "--save_for_serving"))
    with open(os.path.join(output_dir, "eval_results.json")) as f:
        assert json.load(f)["accuracy"] > 0.8
    # One line says why the export has no `text` signature.
    lines = [line for line in result.stderr.splitlines() if "no in-graph 'text'" in line]
    assert len(lines) == 1 and "serving_client.py and serving_server.py tokenize" in lines[0]
    export_dir = export_layout.resolve_version_dir(os.path.join(output_dir, "serving"))[1]
    extra = os.path.join(export_dir, export_layout.ASSETS_EXTRA)
    vocab_file, config_file = export_layout.resolve_assets(export_dir)
    config = serving_client.load_serving_config(config_file)
    name = os.path.basename(model["vocab_file"])
    assert (config["model_family"], config["tokenizer_file"]) == (family, name)
    assert config["text_inputs"] == ["text_a", "text_b"] and "text_signature" not in config
    assert os.path.isfile(os.path.join(extra, name))
    assert "vocab.txt" not in os.listdir(extra)
    signatures = tf.saved_model.load(export_dir).signatures
    assert set(signatures) == {"serving_default"}

    # The client tokenizes with the export's files as training did: the same
    # probabilities as test_results.tsv.
    tokenizer = serving_client.export_tokenizer(vocab_file, config)
    with open(str(data_dir / "test.tsv")) as f:
        pairs = [tuple(line.rstrip("\n").split("\t")[1:]) for line in f][1:]
    features = serving_client.encode(tokenizer, pairs, config["max_seq_length"])
    outputs = signatures["serving_default"](**{k: tf.constant(v) for k, v in features.items()})
    with open(os.path.join(output_dir, "test_results.tsv")) as f:
        expected = np.array([[float(x) for x in line.split("\t")] for line in f])
    np.testing.assert_allclose(outputs["probabilities"].numpy(), expected, atol=1e-5)

    # serving_server.py's Python `text` signature answers raw text alike.
    servable = serving_server.load_servable(os.path.join(output_dir, "serving"))
    assert set(servable.specs["text"]) == {"text_a", "text_b"}
    answer = servable.run({name: np.array([p[k].encode("utf-8") for p in pairs], dtype=object)
                           for k, name in enumerate(("text_a", "text_b"))}, "text")
    np.testing.assert_allclose(answer["probabilities"], expected, atol=1e-5)
    assert answer["labels"].tolist() == [config["labels"]] * len(pairs)


def test_classifier_long_texts_in_windows_with_class_weights(family_model):
    family, model, root = family_model
    rng = random.Random(1)
    data_dir = root / "long"
    data_dir.mkdir()
    for split, count in (("train", 48), ("dev", 12), ("test", 4)):
        rows = [[label, " ".join([text] + [rng.choice(TINY_WORDS[:9]) for _ in range(30)])]
                for label, text in sentiment_rows(rng, count)]
        write_tsv(str(data_dir / ("%s.tsv" % split)), ["label", "sentence"], rows)
    output_dir = str(root / "long_out")
    run_script("run_custom_classifier.py", "--task_name=custom", "--data_dir=%s" % data_dir,
               "--text_a_column=sentence", "--label_column=label", "--long_text=windows",
               "--doc_stride=8", "--class_weights=1,2",
               *model_args(model, output_dir, "--max_seq_length=16", "--learning_rate=3e-3",
                           "--num_train_epochs=3", "--train_batch_size=16", "--do_train",
                           "--do_eval", "--do_predict"))
    with open(os.path.join(output_dir, "eval_results.json")) as f:
        report = json.load(f)
    assert report["num_examples"] == 12
    with open(os.path.join(output_dir, "test_results.tsv")) as f:
        assert len(f.read().splitlines()) == 4


def test_seq_labeling_squad_reranking_and_features(family_model):
    family, model, root = family_model
    rng = random.Random(2)
    # Token labelling: each word's tag from its polarity.
    ner = root / "ner"
    ner.mkdir()
    tag = {w: "B-POS" if w in POSITIVE_WORDS else "B-NEG" if w in NEGATIVE_WORDS else "O"
           for w in TINY_WORDS}
    for split, count in (("train", 40), ("dev", 8), ("test", 8)):
        with open(str(ner / ("%s.txt" % split)), "w") as f:
            for _ in range(count):
                words = [rng.choice(TINY_WORDS) for _ in range(rng.randint(3, 20))]
                f.write("".join("%s %s\n" % (w, tag[w]) for w in words) + "\n")
    out = str(root / "ner_out")
    run_script("run_seq_labeling.py", "--task_name=ner", "--data_dir=%s" % ner,
               *model_args(model, out, "--max_seq_length=16", "--window_stride=4",
                           "--learning_rate=3e-3", "--num_train_epochs=3",
                           "--train_batch_size=8", "--do_train", "--do_eval", "--do_predict",
                           "--save_for_serving"))
    with open(os.path.join(out, "eval_results.json")) as f:
        assert json.load(f)["num_words"] > 0
    with open(os.path.join(out, "test_results.txt")) as f:
        blocks = [[line.split() for line in block.splitlines()]
                  for block in f.read().split("\n\n") if block]
    assert len(blocks) == 8
    # The client cuts and merges the windows of raw text as prediction did.
    answers = _client_answers(out, [(" ".join(r[0] for r in block), None) for block in blocks])
    assert [record["labels"] for record in answers] == [[r[-1] for r in b] for b in blocks]

    # SQuAD on real paragraphs: answers are whole words of the context.
    out = str(root / "squad_out")
    squad = os.path.join(FIXTURES, "squad")
    run_script("run_squad.py", "--train_file=%s/train-v1.1-small.json" % squad,
               "--predict_file=%s/dev-v1.1-small.json" % squad,
               *model_args(model, out, "--max_seq_length=64", "--doc_stride=24",
                           "--max_query_length=16", "--train_batch_size=16",
                           "--num_train_epochs=1", "--do_train", "--do_eval",
                           "--save_for_serving"))
    with open(os.path.join(out, "eval_results.json")) as f:
        assert set(json.load(f)) >= {"exact_match", "f1"}
    with open(os.path.join(out, "predictions.json")) as f:
        predictions = json.load(f)
    with open(os.path.join(squad, "dev-v1.1-small.json")) as f:
        asked = [(qa["id"], qa["question"], p["context"]) for a in json.load(f)["data"]
                 for p in a["paragraphs"] for qa in p["qas"]]
    assert len(predictions) == 40
    assert all(predictions[qid] in context for qid, _, context in asked)
    answers = _client_answers(out, [(question, context) for _, question, context in asked[:6]])
    assert [record["answer"] for record in answers] == [predictions[q] for q, _, _ in asked[:6]]

    # Re-ranking: query-passage pairs.
    data = root / "rerank"
    data.mkdir()
    with open(str(data / "triples.tsv"), "w") as f:
        for _ in range(24):
            f.write("good movie\t%s\t%s\n" % (rng.choice(POSITIVE_WORDS) + " plot",
                                             rng.choice(NEGATIVE_WORDS) + " plot"))
    with open(str(data / "dev.tsv"), "w") as f, open(str(data / "qrels.txt"), "w") as q:
        for qid in range(3):
            for pid in range(4):
                word = (POSITIVE_WORDS if pid == 0 else NEGATIVE_WORDS)[qid % 3]
                f.write("%d\t%d\tgood movie\t%s plot\n" % (qid, qid * 10 + pid, word))
            q.write("%d 0 %d 1\n" % (qid, qid * 10))
    out = str(root / "rerank_out")
    run_script("run_reranking.py", "--data_dir=%s" % data, "--train_file=triples.tsv",
               "--dev_file=dev.tsv", "--dev_qrels_file=qrels.txt",
               *model_args(model, out, "--max_seq_length=16", "--max_query_length=4",
                           "--learning_rate=3e-3", "--num_train_epochs=3",
                           "--train_batch_size=8", "--do_train", "--do_eval",
                           "--save_for_serving"))
    with open(os.path.join(out, "eval_results.json")) as f:
        assert json.load(f)["queries_ranked"] == 3
    # serving_server.py's Python `text` signature scores pairs as serving_default does.
    servable = serving_server.load_servable(os.path.join(out, "serving"))
    queries, passages = ["good movie"] * 2, ["great plot", "awful plot"]
    tokenizer = tokenization.load_tokenizer(model["vocab_file"], None, families.get(family))
    ids = dict(zip(export_layout.SERVING_INPUTS,
                   reranking.encode_pairs(tokenizer, queries, passages, 4, 16)))
    by_text = servable.run({"text_a": np.array([q.encode() for q in queries], dtype=object),
                            "text_b": np.array([p.encode() for p in passages], dtype=object)},
                           "text")
    np.testing.assert_allclose(by_text["scores"], servable.run(ids)["scores"], atol=1e-6)

    # extract_features: Google's token layout and mean-pooled vectors.
    lines = root / "lines.txt"
    lines.write_text("a good movie\nthe plot ||| was dull\n\n")
    out = str(root / "features.jsonl")
    run_script("extract_features.py", "--input_file=%s" % lines, "--output_file=%s" % out,
               "--max_seq_length=16", "--layers=-1", *model_args(model, "unused")[:3])
    with open(out) as f:
        records = [json.loads(line) for line in f]
    tokenizer = tokenization.load_tokenizer(model["vocab_file"], None, families.get(family))
    cls_token, sep_token = tokenizer.convert_ids_to_tokens([tokenizer.layout.cls_id,
                                                            tokenizer.layout.sep_id])
    tokens = [feature["token"] for feature in records[1]["features"]]
    assert tokens[0] == cls_token and tokens[-1] == sep_token
    assert tokens.count(sep_token) == tokenizer.layout.seps_between + 1
    vectors = str(root / "vectors.npy")
    run_script("extract_features.py", "--input_file=%s" % lines, "--output_file=%s" % vectors,
               "--max_seq_length=16", "--pooling=mean", *model_args(model, "unused")[:3])
    assert np.load(vectors).shape == (3, 32)


def _client_answers(output_dir, pairs):
    """serving_client.py's records for `pairs`, from the run's export, its
    SavedModel called in this process (api.predict's way)."""
    export_dir = os.path.join(output_dir, "serving")
    vocab_file, config_file = export_layout.resolve_assets(export_dir)
    config = serving_client.load_serving_config(config_file)
    tokenizer = serving_client.export_tokenizer(vocab_file, config)
    kind = serving_client.TASKS[config["task"]]
    features, layout = kind.encode(tokenizer, pairs, config)
    outputs = serving_server.load_servable(export_dir).run(features)
    return [record for record, _ in kind.results(
        {name: values.tolist() for name, values in outputs.items()}, config, layout)]


@pytest.mark.parametrize("family,heads,learns_next", [
    ("roberta", ("mlm",), False), ("albert", ("mlm", "nsp"), True),
    ("distilbert", ("mlm",), False), ("modernbert", ("mlm",), False),
    ("deberta-v2", ("mlm",), False)])
def test_pretraining_data_and_a_few_steps_from_the_family_checkpoint(
        family, heads, learns_next, tmp_path):
    model = write_family_model(str(tmp_path / "model"), family, heads)
    rng = random.Random(4)
    text = tmp_path / "text.txt"
    with open(str(text), "w") as f:
        for document in _shard(rng, 30):
            f.write("\n".join(document) + "\n\n")
    records = str(tmp_path / "data.tfrecord")
    # No --model_family: the model folder's bert_config.json says it.
    run_script("create_pretraining_data.py", "--input_file=%s" % text,
               "--output_file=%s" % records, "--vocab_file=%s" % model["vocab_file"],
               "--max_seq_length=32", "--max_predictions_per_seq=5", "--dupe_factor=2")
    out = str(tmp_path / "out")
    result = run_script("run_pretraining.py", "--input_file=%s" % records,
                        "--bert_config_file=%s" % model["bert_config_file"],
                        "--init_checkpoint=%s" % model["init_checkpoint"],
                        "--output_dir=%s" % out, "--max_seq_length=32",
                        "--max_predictions_per_seq=5", "--train_batch_size=8",
                        "--num_train_steps=4", "--num_warmup_steps=1",
                        "--learning_rate=1e-3", "--do_train", "--do_eval",
                        "--max_eval_steps=2")
    with open(os.path.join(out, "eval_results.json")) as f:
        report = json.load(f)
    assert ("next_sentence_accuracy" in report) == learns_next
    assert ("masked LM alone" in result.stderr) != learns_next
    assert 0 < report["masked_lm_loss"] < 20
    stored = dict(tf.train.list_variables(tf.train.latest_checkpoint(out)))
    for name, shape in pretraining.head_variable_shapes(
            tiny_config(vocab_size=1, model_family=family, **CASES[family][1]),
            learns_next).items():
        if name != "cls/predictions/output_bias":
            assert stored[name] == shape, name
    assert ("cls/seq_relationship/output_weights" in stored) == learns_next


def test_xlm_roberta_and_distilbert_classify_too(tmp_path):
    rng = random.Random(5)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    for split, count in (("train", 48), ("dev", 8)):
        write_tsv(str(data_dir / ("%s.tsv" % split)), ["label", "sentence"],
                  sentiment_rows(rng, count))
    for family in ("xlm-roberta", "distilbert"):
        model = write_family_model(str(tmp_path / family), family)
        out = str(tmp_path / (family + "_out"))
        result = run_script("run_custom_classifier.py", "--task_name=custom",
                            "--data_dir=%s" % data_dir, "--text_a_column=sentence",
                            "--label_column=label",
                            *model_args(model, out, "--max_seq_length=16",
                                        "--learning_rate=3e-3", "--num_train_epochs=2",
                                        "--train_batch_size=8", "--do_train", "--do_eval",
                                        "--save_for_serving"))
        with open(os.path.join(out, "eval_results.json")) as f:
            assert json.load(f)["num_examples"] == 8
        export_dir = glob.glob(os.path.join(out, "serving", "*"))[0]
        signatures = set(tf.saved_model.load(export_dir).signatures)
        # DistilBERT's WordPiece runs in the graph; XLM-R's SentencePiece does not.
        assert ("text" in signatures) == (family == "distilbert")
        assert ("no in-graph" in result.stderr) == (family == "xlm-roberta")


# -- converted Hub folders -----------------------------------------------------------------

@pytest.mark.parametrize("family", ["roberta", "xlm-roberta", "albert", "distilbert",
                                    "electra", "modernbert", "modernbert-mean", "deberta-v3",
                                    "deberta-v3-nobuckets"])
def test_extract_features_of_a_converted_hub_folder_equal_transformers(family, tmp_path):
    """convert_hf_checkpoint.py, then extract_features.py --pooling=mean on the
    reference's texts and `a ||| b` pairs: transformers' masked mean of
    last_hidden_state (tests/fixtures/families/<family>/reference.npz)."""
    model_dir = str(tmp_path / "model")
    run_script("convert_hf_checkpoint.py", "--hf_dir=%s" % os.path.join(FAMILY_FIXTURES, family),
               "--output_dir=%s" % model_dir)
    reference = np.load(os.path.join(FAMILY_FIXTURES, family, "reference.npz"))
    lines = tmp_path / "lines.txt"
    lines.write_text("".join("%s\n" % text for text in reference["texts"]), encoding="utf-8")
    # (modernbert-mean: a second ModernBERT fixture, tokenizer.json as the first.)
    name = "vocab.txt" if CASES.get(family, ("",))[0] == "vocab.txt" else "tokenizer.json"
    if family.startswith("deberta"):
        name = "spm.model"  # (DeBERTa-v3's folders have no tokenizer.json)
    vectors = str(tmp_path / "vectors.npy")
    run_script("extract_features.py", "--input_file=%s" % lines, "--output_file=%s" % vectors,
               "--vocab_file=%s" % os.path.join(model_dir, name),
               "--bert_config_file=%s" % os.path.join(model_dir, "bert_config.json"),
               "--init_checkpoint=%s" % os.path.join(model_dir, "bert_model.ckpt"),
               "--max_seq_length=64", "--pooling=mean")
    np.testing.assert_allclose(np.load(vectors), reference["mean_pooled"], atol=1e-4)
