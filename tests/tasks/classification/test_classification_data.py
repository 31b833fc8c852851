"""Tests of tasks/classification/data.py: GLUE layouts, the custom task and bad input."""

import collections
import json
import os

import pytest

from bert_toolkit import errors, fileio
from bert_toolkit.tasks.classification import data as cd


def write(directory, name, text, encoding="utf-8"):
    """Writes `text` exactly as given (no newline translation); returns the path."""
    path = os.path.join(str(directory), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(text.encode(encoding) if isinstance(text, str) else text)
    return path


def tsv(*rows):
    return "".join("\t".join(row) + "\n" for row in rows)


def input_error(function, *args, **kwargs):
    """Calls `function`, expects an InputError and returns its one-line message."""
    with pytest.raises(errors.InputError) as info:
        function(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message and "\r" not in message
    return message


def as_tuples(examples):
    return [(e.guid, e.text_a, e.text_b, e.label) for e in examples]


# ---------------------------------------------------------------------------
# GLUE processors


def test_cola(tmp_path):
    write(tmp_path, "train.tsv", tsv(["gj04", "1", "", "Our friends won't buy this."],
                                     ["gj04", "0", "*", "They drank the pub."]))
    write(tmp_path, "dev.tsv", tsv(["gj04", "1", "", "It rained."]))
    write(tmp_path, "test.tsv", tsv(["index", "sentence"], ["0", "Bill whistled."]))
    processor = cd.get_processor("CoLA")
    assert processor.get_labels() == ["0", "1"]
    assert not processor.is_multi_label
    assert as_tuples(processor.get_train_examples(str(tmp_path))) == [
        ("train-0", "Our friends won't buy this.", None, "1"),
        ("train-1", "They drank the pub.", None, "0")]
    assert as_tuples(processor.get_dev_examples(str(tmp_path))) == [
        ("dev-0", "It rained.", None, "1")]
    assert as_tuples(processor.get_test_examples(str(tmp_path))) == [
        ("test-0", "Bill whistled.", None, None)]


MNLI_TRAIN_HEADER = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                     "sentence2_binary_parse", "sentence1_parse", "sentence2_parse",
                     "sentence1", "sentence2", "label1", "gold_label"]
MNLI_DEV_HEADER = MNLI_TRAIN_HEADER[:-1] + ["label2", "label3", "label4", "label5",
                                            "gold_label"]


def mnli_row(index, premise, hypothesis, labels):
    return [str(index), "1", "1e", "fiction", "(x)", "(y)", "(ROOT x)", "(ROOT y)",
            premise, hypothesis] + list(labels)


def test_mnli_matched_and_mismatched(tmp_path):
    assert len(MNLI_DEV_HEADER) == 16
    write(tmp_path, "train.tsv", tsv(
        MNLI_TRAIN_HEADER,
        mnli_row(0, "A man eats.", "Someone eats.", ["entailment", "entailment"]),
        mnli_row(1, "It is hot.", "It is cold.", ["contradiction", "contradiction"])))
    five = ["neutral"] * 5
    write(tmp_path, "dev_matched.tsv", tsv(
        MNLI_DEV_HEADER, mnli_row(0, "Matched p.", "Matched h.", five + ["neutral"])))
    write(tmp_path, "dev_mismatched.tsv", tsv(
        MNLI_DEV_HEADER, mnli_row(0, "Mismatched p.", "Mismatched h.",
                                  ["entailment"] * 6)))
    write(tmp_path, "test_matched.tsv", tsv(
        MNLI_TRAIN_HEADER[:10], mnli_row(0, "Test p.", "Test h.", [])))
    write(tmp_path, "test_mismatched.tsv", tsv(
        MNLI_TRAIN_HEADER[:10], mnli_row(0, "Test mm p.", "Test mm h.", [])))
    data_dir = str(tmp_path)

    mnli = cd.get_processor("mnli")
    assert mnli.get_labels() == ["contradiction", "entailment", "neutral"]
    assert as_tuples(mnli.get_train_examples(data_dir)) == [
        ("train-0", "A man eats.", "Someone eats.", "entailment"),
        ("train-1", "It is hot.", "It is cold.", "contradiction")]
    assert as_tuples(mnli.get_dev_examples(data_dir)) == [
        ("dev-0", "Matched p.", "Matched h.", "neutral")]
    assert as_tuples(mnli.get_dev_mismatched_examples(data_dir)) == [
        ("dev_mismatched-0", "Mismatched p.", "Mismatched h.", "entailment")]
    assert as_tuples(mnli.get_test_examples(data_dir)) == [
        ("test-0", "Test p.", "Test h.", None)]
    assert mnli.get_test_mismatched_examples(data_dir)[0].text_a == "Test mm p."

    mismatched = cd.get_processor("MNLI-MM")
    assert mismatched.get_dev_examples(data_dir)[0].text_a == "Mismatched p."
    assert mismatched.get_test_examples(data_dir)[0].text_a == "Test mm p."


def test_mnli_falls_back_to_positions_when_header_lacks_names(tmp_path):
    header = ["c%d" % i for i in range(12)]
    write(tmp_path, "train.tsv", tsv(header, mnli_row(0, "P.", "H.", ["x", "neutral"])))
    examples = cd.get_processor("mnli").get_train_examples(str(tmp_path))
    assert as_tuples(examples) == [("train-0", "P.", "H.", "neutral")]


def test_mrpc(tmp_path):
    header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    write(tmp_path, "train.tsv", tsv(header, ["1", "702876", "702977", "He said.", "He told."]))
    write(tmp_path, "dev.tsv", tsv(header, ["0", "1", "2", "Yes.", "No."]))
    write(tmp_path, "test.tsv", tsv(["index"] + header[1:], ["0", "1", "2", "A.", "B."]))
    processor = cd.get_processor("mrpc")
    assert processor.get_labels() == ["0", "1"]
    assert as_tuples(processor.get_train_examples(str(tmp_path))) == [
        ("train-0", "He said.", "He told.", "1")]
    assert as_tuples(processor.get_dev_examples(str(tmp_path))) == [
        ("dev-0", "Yes.", "No.", "0")]
    assert as_tuples(processor.get_test_examples(str(tmp_path))) == [
        ("test-0", "A.", "B.", None)]


XNLI_HEADER = ["language", "gold_label", "sentence1_binary_parse", "sentence2_binary_parse",
               "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "promptID",
               "pairID", "genre", "label1", "label2", "label3", "label4", "label5",
               "sentence1_tokenized", "sentence2_tokenized", "match"]


def xnli_row(language, label, premise, hypothesis):
    return [language, label, "", "", "", "", premise, hypothesis, "1", "1", "slate",
            label, label, label, label, label, premise, hypothesis, "True"]


def test_xnli(tmp_path):
    write(tmp_path, "multinli/multinli.train.zh.tsv", tsv(
        ["premise", "hypo", "label"], ["他来了。", "他没来。", "contradictory"],
        ["她笑了。", "她很高兴。", "neutral"]))
    write(tmp_path, "multinli/multinli.train.de.tsv", tsv(
        ["premise", "hypo", "label"], ["Er kam.", "Er ist da.", "entailment"]))
    dev_rows = [xnli_row("zh", "entailment", "中文前提。", "中文假设。"),
                xnli_row("de", "neutral", "Prämisse.", "Hypothese."),
                xnli_row("zh", "contradiction", "第二。", "第三。")]
    write(tmp_path, "xnli.dev.tsv", tsv(XNLI_HEADER, *dev_rows))
    write(tmp_path, "xnli.test.tsv", tsv(XNLI_HEADER, *dev_rows))
    data_dir = str(tmp_path)

    chinese = cd.get_processor("xnli")
    assert chinese.get_labels() == ["contradiction", "entailment", "neutral"]
    assert as_tuples(chinese.get_train_examples(data_dir)) == [
        ("train-0", "他来了。", "他没来。", "contradiction"),
        ("train-1", "她笑了。", "她很高兴。", "neutral")]
    assert as_tuples(chinese.get_dev_examples(data_dir)) == [
        ("dev-0", "中文前提。", "中文假设。", "entailment"),
        ("dev-1", "第二。", "第三。", "contradiction")]
    assert [e.label for e in chinese.get_test_examples(data_dir)] == [None, None]

    german = cd.get_processor("xnli", language="de")
    assert german.get_train_examples(data_dir)[0].label == "entailment"
    assert as_tuples(german.get_dev_examples(data_dir)) == [
        ("dev-0", "Prämisse.", "Hypothese.", "neutral")]

    message = input_error(cd.get_processor("xnli", language="fr").get_dev_examples, data_dir)
    assert "xnli.dev.tsv" in message and "'fr'" not in message and "fr" in message
    assert "'de', 'zh'" in message
    message = input_error(cd.get_processor("xnli", language="fr").get_train_examples, data_dir)
    assert "multinli.train.fr.tsv" in message and "file not found" in message


def test_qqp(tmp_path):
    header = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
    write(tmp_path, "train.tsv", tsv(header, ["7", "15", "16", "How?", "Why?", "0"]))
    write(tmp_path, "dev.tsv", tsv(header, ["8", "17", "18", "What?", "What is it?", "1"]))
    write(tmp_path, "test.tsv", tsv(["id", "question1", "question2"], ["0", "Q1?", "Q2?"]))
    processor = cd.get_processor("qqp")
    assert as_tuples(processor.get_train_examples(str(tmp_path))) == [
        ("train-0", "How?", "Why?", "0")]
    assert processor.get_dev_examples(str(tmp_path))[0].label == "1"
    assert as_tuples(processor.get_test_examples(str(tmp_path))) == [
        ("test-0", "Q1?", "Q2?", None)]


def test_sst2_reads_quotes_literally(tmp_path):
    write(tmp_path, "train.tsv", tsv(["sentence", "label"], ['"a" gem of a film ', "1"],
                                     ["it 's \" dull", "0"]))
    write(tmp_path, "dev.tsv", tsv(["sentence", "label"], ["fine", "1"]))
    write(tmp_path, "test.tsv", tsv(["index", "sentence"], ["0", "uneven"]))
    processor = cd.get_processor("sst-2")
    assert as_tuples(processor.get_train_examples(str(tmp_path))) == [
        ("train-0", '"a" gem of a film', None, "1"),
        ("train-1", 'it \'s " dull', None, "0")]
    assert processor.get_dev_examples(str(tmp_path))[0].text_a == "fine"
    assert as_tuples(processor.get_test_examples(str(tmp_path))) == [
        ("test-0", "uneven", None, None)]


@pytest.mark.parametrize("task,text_columns", [("rte", ["sentence1", "sentence2"]),
                                               ("qnli", ["question", "sentence"])])
def test_rte_and_qnli(tmp_path, task, text_columns):
    header = ["index"] + text_columns + ["label"]
    write(tmp_path, "train.tsv", tsv(header, ["0", "A.", "B.", "not_entailment"],
                                     ["1", "C.", "D.", "entailment"]))
    write(tmp_path, "dev.tsv", tsv(header, ["0", "E.", "F.", "entailment"]))
    write(tmp_path, "test.tsv", tsv(header[:3], ["0", "G.", "H."]))
    processor = cd.get_processor(task)
    assert processor.get_labels() == ["entailment", "not_entailment"]
    assert as_tuples(processor.get_train_examples(str(tmp_path))) == [
        ("train-0", "A.", "B.", "not_entailment"), ("train-1", "C.", "D.", "entailment")]
    assert processor.get_dev_examples(str(tmp_path))[0].text_b == "F."
    assert as_tuples(processor.get_test_examples(str(tmp_path))) == [
        ("test-0", "G.", "H.", None)]


def test_glue_label_outside_the_task(tmp_path):
    path = write(tmp_path, "train.tsv", tsv(["sentence", "label"], ["ok", "1"], ["bad", "2"]))
    message = input_error(cd.get_processor("sst-2").get_train_examples, str(tmp_path))
    assert message.startswith(path + ":3: ")
    assert "'2'" in message and "'0', '1'" in message


def test_glue_headers_that_differ_fall_back_to_googles_positions(tmp_path):
    # Google's readers skip the header and read by position; so do we when a
    # header lacks the names (here: QNLI's header on RTE files, renamed CoLA/QQP).
    write(tmp_path, "train.tsv", tsv(["index", "question", "sentence", "label"],
                                     ["0", "A.", "B.", "entailment"]))
    (example,) = cd.get_processor("rte").get_train_examples(str(tmp_path))
    assert (example.text_a, example.text_b, example.label) == ("A.", "B.", "entailment")
    write(tmp_path, "test.tsv", tsv(["id", "text"], ["0", "Colourless ideas."]))
    (example,) = cd.get_processor("cola").get_test_examples(str(tmp_path))
    assert example.text_a == "Colourless ideas."
    write(tmp_path, "test.tsv", tsv(["id", "q1", "q2"], ["0", "How?", "Why?"]))
    (example,) = cd.get_processor("QQP").get_test_examples(str(tmp_path))
    assert (example.text_a, example.text_b) == ("How?", "Why?")
    # A position beyond the rows is still one line naming the file.
    path = write(tmp_path, "train.tsv", tsv(["a", "b"], ["x", "y"]))
    message = input_error(cd.get_processor("rte").get_train_examples, str(tmp_path))
    assert message.startswith(path + ":1: ") and "out of range" in message


def test_glue_wrong_field_count(tmp_path):
    path = write(tmp_path, "train.tsv", "gj04\t1\t\tFine.\ngj04\t0\tThe\ttab\tsplit.\n")
    message = input_error(cd.get_processor("cola").get_train_examples, str(tmp_path))
    assert message.startswith(path + ":2: ")
    assert "expected 4 fields" in message and "got 5" in message
    write(tmp_path, "train.tsv", "gj04\t1\n")
    message = input_error(cd.get_processor("cola").get_train_examples, str(tmp_path))
    assert message.startswith(path + ":1: ") and "index 3 (text_a)" in message


# ---------------------------------------------------------------------------
# The custom task


def custom(**options):
    return cd.get_processor("custom", **options)


def test_custom_tsv_by_header_names_with_pairs_and_inferred_labels(tmp_path):
    header = ["id", "premise", "hypothesis", "label"]
    write(tmp_path, "train.tsv", tsv(header, ["a1", " P1 ", "H1", "yes"],
                                     ["a2", "P2", "H2", "no"], ["a3", "P3", "H3", "maybe"]))
    dev = write(tmp_path, "dev.tsv", tsv(header, ["d1", "P4", "H4", "no"],
                                         ["d2", "P5", "H5", "perhaps"]))
    write(tmp_path, "test.tsv", tsv(header[:3], ["t1", "P6", "H6"]))
    processor = custom(text_a_column="premise", text_b_column="hypothesis",
                       label_column="label", id_column="id")
    data_dir = str(tmp_path)
    assert processor.get_labels(data_dir) == ["maybe", "no", "yes"]
    assert as_tuples(processor.get_train_examples(data_dir)) == [
        ("a1", "P1", "H1", "yes"), ("a2", "P2", "H2", "no"), ("a3", "P3", "H3", "maybe")]
    message = input_error(processor.get_dev_examples, data_dir)
    assert message.startswith(dev + ":3: ")
    assert "'perhaps'" in message and "'maybe', 'no', 'yes'" in message
    assert "train.tsv" in message  # says where the label set came from
    assert as_tuples(processor.get_test_examples(data_dir)) == [("t1", "P6", "H6", None)]


def test_custom_dev_before_train_infers_labels_from_train(tmp_path):
    write(tmp_path, "train.tsv", tsv(["text", "label"], ["x", "b"], ["y", "a"]))
    write(tmp_path, "dev.tsv", tsv(["text", "label"], ["z", "a"]))
    processor = custom(text_a_column="text", label_column="label")
    assert processor.get_dev_examples(str(tmp_path))[0].label == "a"
    assert processor.get_labels() == ["a", "b"]


def test_custom_explicit_labels_keep_their_order(tmp_path):
    path = write(tmp_path, "train.tsv", tsv(["text", "label"], ["x", "pos"], ["y", "neutral"]))
    processor = custom(text_a_column="text", label_column="label", labels="pos, neg ,neutral")
    assert processor.get_labels() == ["pos", "neg", "neutral"]
    assert len(processor.get_train_examples(str(tmp_path))) == 2
    strict = custom(text_a_column="text", label_column="label", labels="pos,neg")
    message = input_error(strict.get_train_examples, str(tmp_path))
    assert message.startswith(path + ":3: ") and "'neutral'" in message
    assert "--labels" in message


def test_custom_csv_by_index_without_header(tmp_path):
    # A BOM, Windows line endings, a quoted comma, doubled quotes, and a text
    # running over three lines: the third row starts on line 4.
    text = ('\ufeff"1","good, really"\r\n'
            '0,"a ""quoted"" word"\r\n'
            '-1,"first line\r\nsecond line\r\n"\r\n'
            '1,plain\r\n')
    write(tmp_path, "reviews.csv", text)
    processor = custom(train_file="reviews.csv", label_column=0, text_a_column="1",
                       has_header=False)
    examples = processor.get_train_examples(str(tmp_path))
    assert as_tuples(examples) == [
        ("train-0", "good, really", None, "1"),
        ("train-1", 'a "quoted" word', None, "0"),
        ("train-2", "first line\r\nsecond line", None, "-1"),
        ("train-3", "plain", None, "1")]
    assert processor.get_labels() == ["-1", "0", "1"]
    lines = [n for n, _ in cd.read_delimited(os.path.join(str(tmp_path), "reviews.csv"),
                                             ",", '"')]
    assert lines == [1, 2, 3, 6]


def test_custom_csv_by_header_with_negative_index(tmp_path):
    write(tmp_path, "train.csv", "label,title,body\npos,T1,B1\nneg,T2,B2\n")
    processor = custom(text_a_column="title", text_b_column=-1, label_column="label")
    assert as_tuples(processor.get_train_examples(str(tmp_path))) == [
        ("train-0", "T1", "B1", "pos"), ("train-1", "T2", "B2", "neg")]


def test_custom_jsonl(tmp_path):
    lines = [{"uid": 10, "q": "Is it?", "a": "Yes.", "y": 1},
             {"uid": 11, "q": "Was it?", "a": None, "y": 0}]
    write(tmp_path, "train.jsonl", "".join(json.dumps(r) + "\r\n" for r in lines) + "\n")
    write(tmp_path, "test.jsonl", json.dumps({"uid": "x", "q": "Q", "a": "A"}) + "\n")
    processor = custom(text_a_column="q", text_b_column="a", label_column="y", id_column="uid")
    assert as_tuples(processor.get_train_examples(str(tmp_path))) == [
        ("10", "Is it?", "Yes.", "1"), ("11", "Was it?", "", "0")]
    assert processor.get_labels() == ["0", "1"]
    assert as_tuples(processor.get_test_examples(str(tmp_path))) == [("x", "Q", "A", None)]


def test_custom_jsonl_keys_that_look_like_indices(tmp_path):
    write(tmp_path, "train.jsonl", json.dumps({"0": "text", "1": "lab"}) + "\n")
    processor = custom(text_a_column=0, label_column="1")
    assert as_tuples(processor.get_train_examples(str(tmp_path))) == [
        ("train-0", "text", None, "lab")]


def test_custom_multi_label(tmp_path):
    write(tmp_path, "train.tsv", tsv(["text", "tags"], ["a", "sports|news"],
                                     ["b", " news | tech "], ["c", ""], ["d", "tech|tech"]))
    processor = custom(text_a_column="text", label_column="tags", multi_label=True)
    assert processor.is_multi_label
    examples = processor.get_train_examples(str(tmp_path))
    assert [e.label for e in examples] == [("sports", "news"), ("news", "tech"), (), ("tech",)]
    assert processor.get_labels() == ["news", "sports", "tech"]

    write(tmp_path, "train.jsonl", json.dumps({"t": "a", "l": ["x", "y"]}) + "\n"
          + json.dumps({"t": "b", "l": "y,z"}) + "\n")
    processor = custom(train_file="train.jsonl", text_a_column="t", label_column="l",
                       multi_label="true", label_separator=",", labels="x,y")
    message = input_error(processor.get_train_examples, str(tmp_path))
    assert message.startswith(os.path.join(str(tmp_path), "train.jsonl") + ":2: ")
    assert "'z'" in message


def test_custom_multi_label_without_any_label(tmp_path):
    path = write(tmp_path, "train.tsv", tsv(["text", "tags"], ["a", ""], ["b", "|"]))
    message = input_error(custom(text_a_column="text", label_column="tags", multi_label=True)
                          .get_train_examples, str(tmp_path))
    assert message.startswith(path + ": ") and "no labels" in message


def test_custom_single_label_rejects_a_list(tmp_path):
    path = write(tmp_path, "train.jsonl", json.dumps({"t": "a", "l": ["x", "y"]}) + "\n")
    message = input_error(custom(text_a_column="t", label_column="l").get_train_examples,
                          str(tmp_path))
    assert message.startswith(path + ":1: ") and "--multi_label" in message


def test_custom_default_file_discovery(tmp_path):
    data_dir = str(tmp_path)
    message = input_error(custom(text_a_column=0, label_column=1).get_train_examples, data_dir)
    assert "train.tsv or train.csv or train.jsonl" in message and "--train_file" in message
    write(tmp_path, "train.csv", "t,l\nx,a\n")
    assert len(custom(text_a_column="t", label_column="l").get_train_examples(data_dir)) == 1
    write(tmp_path, "train.tsv", "t\tl\nx\ta\n")
    message = input_error(custom(text_a_column="t", label_column="l").get_train_examples,
                          data_dir)
    assert "--file_format" in message
    processor = custom(text_a_column="t", label_column="l", file_format="tsv")
    assert len(processor.get_train_examples(data_dir)) == 1


def test_custom_file_format_overrides_extension(tmp_path):
    path = write(tmp_path, "data.txt", "t\tl\nx\ta\n")
    message = input_error(custom(train_file="data.txt", text_a_column="t",
                                 label_column="l").get_train_examples, str(tmp_path))
    assert message.startswith(path + ": ") and "--file_format" in message
    processor = custom(train_file=path, text_a_column="t", label_column="l",
                       file_format="tsv")
    assert processor.get_train_examples("/nonexistent")[0].label == "a"


def test_custom_test_file_needs_no_label_column(tmp_path):
    write(tmp_path, "test.csv", "text\nhello\n")
    processor = custom(text_a_column="text", label_column="label", labels="a,b")
    assert as_tuples(processor.get_test_examples(str(tmp_path))) == [
        ("test-0", "hello", None, None)]




def test_custom_latin1_encoding(tmp_path):
    write(tmp_path, "train.tsv", "t\tl\ncaf\u00e9\ta\n", encoding="latin-1")
    processor = custom(text_a_column="t", label_column="l", encoding="latin-1")
    assert processor.get_train_examples(str(tmp_path))[0].text_a == "caf\u00e9"


# ---------------------------------------------------------------------------
# Bad input: one-line InputErrors that name the file and line


def test_missing_file(tmp_path):
    message = input_error(cd.get_processor("rte").get_dev_examples, str(tmp_path))
    assert message == "%s: file not found" % os.path.join(str(tmp_path), "dev.tsv")


def test_directory_instead_of_file(tmp_path):
    os.mkdir(os.path.join(str(tmp_path), "train.tsv"))
    message = input_error(custom(text_a_column=0, label_column=1, has_header=False,
                                 file_format="tsv").get_train_examples, str(tmp_path))
    assert "train.tsv" in message and "directory" in message


def test_unreadable_file(tmp_path, monkeypatch):
    path = write(tmp_path, "train.tsv", "t\tl\nx\ta\n")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    # chmod would not stop root, who often runs these tests in containers.
    monkeypatch.setattr(fileio, "open", refuse, raising=False)
    message = input_error(custom(text_a_column="t", label_column="l").get_train_examples,
                          str(tmp_path))
    assert message == path + ": cannot read the file: Permission denied"


def test_missing_column_by_name_lists_the_columns(tmp_path):
    path = write(tmp_path, "train.csv", "sentence,label\nx,a\n")
    message = input_error(custom(text_a_column="text", label_column="label")
                          .get_train_examples, str(tmp_path))
    assert message.startswith(path + ":1: ")
    assert "'text'" in message and "--text_a_column" in message
    assert "'sentence', 'label'" in message


def test_column_index_out_of_range(tmp_path):
    path = write(tmp_path, "train.tsv", "x\ta\n")
    message = input_error(custom(text_a_column=0, label_column=2, has_header=False)
                          .get_train_examples, str(tmp_path))
    assert message.startswith(path + ":1: ")
    assert "index 2" in message and "--label_column" in message and "2 columns" in message


def test_column_name_without_header(tmp_path):
    path = write(tmp_path, "train.tsv", "x\ta\n")
    message = input_error(custom(text_a_column="text", label_column=1, has_header="false")
                          .get_train_examples, str(tmp_path))
    assert message.startswith(path + ":1: ") and "--has_header" in message


def test_same_column_twice(tmp_path):
    write(tmp_path, "train.tsv", "t\tl\nx\ta\n")
    message = input_error(custom(text_a_column="t", label_column=0).get_train_examples,
                          str(tmp_path))
    assert "same column" in message


def test_label_not_in_a_long_label_set_is_truncated(tmp_path):
    path = write(tmp_path, "train.tsv", tsv(["t", "l"], ["x", "L3"], ["y", "other"]))
    labels = ",".join("L%d" % i for i in range(40))
    message = input_error(custom(text_a_column="t", label_column="l", labels=labels)
                          .get_train_examples, str(tmp_path))
    assert message.startswith(path + ":3: ")
    assert "'other'" in message and "'L0'" in message and "(40 in all)" in message
    assert "'L39'" not in message
    assert len(message) < 600


@pytest.mark.parametrize("content", ["", "t\tl\n", "\n\n"])
def test_empty_training_file(tmp_path, content):
    path = write(tmp_path, "train.tsv", content)
    message = input_error(custom(text_a_column="t", label_column="l").get_train_examples,
                          str(tmp_path))
    assert message.startswith(path + ": ") and "no examples" in message


def test_non_utf8_bytes(tmp_path):
    path = write(tmp_path, "train.tsv", b"t\tl\nok\ta\ncaf\xe9\tb\n")
    message = input_error(custom(text_a_column="t", label_column="l").get_train_examples,
                          str(tmp_path))
    assert message.startswith(path + ":3: ")
    assert "utf-8" in message and "0xe9" in message and "byte offset 12" in message


def test_wrong_number_of_fields(tmp_path):
    path = write(tmp_path, "train.csv", "t,l\nx,a\ny,b,extra\n")
    message = input_error(custom(text_a_column="t", label_column="l").get_train_examples,
                          str(tmp_path))
    assert message.startswith(path + ":3: ")
    assert "expected 2 fields" in message and "got 3" in message


def test_blank_lines_are_not_rows(tmp_path):
    write(tmp_path, "train.csv", "t,l\r\n\r\nx,a\r\n\r\n")
    examples = custom(text_a_column="t", label_column="l").get_train_examples(str(tmp_path))
    assert as_tuples(examples) == [("train-0", "x", None, "a")]


def test_unclosed_quote(tmp_path):
    path = write(tmp_path, "train.csv", 't,l\nx,a\n"never closed,b\ny,c\n')
    message = input_error(custom(text_a_column="t", label_column="l").get_train_examples,
                          str(tmp_path))
    assert message.startswith(path + ":3: ") and "never closed" in message


def test_carriage_return_inside_a_line(tmp_path):
    path = write(tmp_path, "train.tsv", "t\tl\rx\ta\r")
    message = input_error(custom(text_a_column="t", label_column="l").get_train_examples,
                          str(tmp_path))
    assert message.startswith(path + ":1: ") and "carriage return" in message


@pytest.mark.parametrize("line,expected", [
    ('{"t": "x", "l": "a"', "not valid JSON"),
    ('["x", "a"]', "expected a JSON object, got list"),
    ('{"text": "x", "l": "a"}', "no key 't' (--text_a_column); keys: 'text', 'l'"),
    ('{"t": 3, "l": "a"}', "must be a string"),
])
def test_bad_jsonl_lines(tmp_path, line, expected):
    path = write(tmp_path, "train.jsonl", '{"t": "ok", "l": "a"}\n\n' + line + "\n")
    message = input_error(custom(text_a_column="t", label_column="l").get_train_examples,
                          str(tmp_path))
    assert message.startswith(path + ":3: ")
    assert expected in message


def test_empty_text_a_is_an_error_but_empty_text_b_is_allowed(tmp_path):
    path = write(tmp_path, "train.tsv", tsv(["a", "b", "l"], ["x", "", "p"], ["  ", "y", "q"]))
    processor = custom(text_a_column="a", text_b_column="b", label_column="l")
    message = input_error(processor.get_train_examples, str(tmp_path))
    assert message.startswith(path + ":3: ") and "text_a" in message and "empty" in message
    write(tmp_path, "train.tsv", tsv(["a", "b", "l"], ["x", "", "p"]))
    assert processor.get_train_examples(str(tmp_path))[0].text_b == ""


def test_empty_label_and_duplicate_id(tmp_path):
    path = write(tmp_path, "train.tsv", tsv(["t", "l"], ["x", "a"], ["y", " "]))
    message = input_error(custom(text_a_column="t", label_column="l").get_train_examples,
                          str(tmp_path))
    assert message.startswith(path + ":3: ") and "label is empty" in message
    write(tmp_path, "train.tsv", tsv(["i", "t", "l"], ["1", "x", "a"], ["1", "y", "a"]))
    message = input_error(custom(text_a_column="t", label_column="l", id_column="i")
                          .get_train_examples, str(tmp_path))
    assert message.startswith(path + ":3: ") and "'1' already used on line 2" in message


def test_label_column_needed_for_training(tmp_path):
    path = write(tmp_path, "train.tsv", "t\nx\n")
    message = input_error(custom(text_a_column="t").get_train_examples, str(tmp_path))
    assert message.startswith(path + ": ") and "--label_column" in message
    message = input_error(custom(text_a_column="t").get_labels)
    assert "--labels" in message


@pytest.mark.parametrize("options,expected", [
    ({}, "--text_a_column"),
    ({"text_a_column": "t", "file_format": "xml"}, "--file_format"),
    ({"text_a_column": "t", "has_header": "maybe"}, "--has_header"),
    ({"text_a_column": "t", "labels": "a,b,a"}, "'a' more than once"),
    ({"text_a_column": "t", "labels": "a,,b"}, "--labels"),
    ({"text_a_column": "t", "encoding": "no-such-codec"}, "unknown encoding"),
    ({"text_a_column": "t", "encoding": "utf-16"}, "ASCII-compatible"),
    ({"text_a_column": " "}, "--text_a_column is empty"),
    ({"text_a_column": "t", "label_separator": ""}, "--label_separator"),
])
def test_bad_custom_options(options, expected):
    assert expected in input_error(cd.get_processor, "custom", **options)


def test_unknown_task_lists_known_tasks():
    message = input_error(cd.get_processor, "glue-everything")
    assert "'glue-everything'" in message
    assert "cola, custom, mlabel, mnli, mnli-mm, mrpc, qnli, qqp, rte, sst-2, xnli" in message
    assert "--processor_module with a GlueeverythingProcessor class" in message


def test_option_a_task_does_not_take():
    message = input_error(cd.get_processor, "cola", language="de", has_header=None)
    assert "--language" in message and "has_header" not in message
    assert isinstance(cd.get_processor("cola", text_a_column=None), cd.ColaProcessor)


# ---------------------------------------------------------------------------
# Helpers and the registry


def test_read_delimited_quote_none_and_line_numbers(tmp_path):
    path = write(tmp_path, "x.tsv", 'a\t"b\n\nc\td"\r\n')
    assert list(cd.read_delimited(path, "\t")) == [(1, ["a", '"b']), (3, ["c", 'd"'])]


@pytest.fixture
def clean_registry():
    saved = dict(cd.PROCESSORS)
    yield
    cd.PROCESSORS.clear()
    cd.PROCESSORS.update(saved)


def test_register_processor(tmp_path, clean_registry):
    @cd.register_processor("Spam")
    class SpamProcessor(cd.DataProcessor):
        def get_train_examples(self, data_dir):
            return self._read(os.path.join(data_dir, "spam_train.tsv"), "train")

        def get_labels(self, data_dir=None):
            return ["ham", "spam"]

        def _read(self, path, set_name):
            return [cd.InputExample("%s-%d" % (set_name, i), fields[1], label=fields[0])
                    for i, (_, fields) in enumerate(cd.read_delimited(path, "\t"))]

    write(tmp_path, "spam_train.tsv", tsv(["spam", "WIN NOW"], ["ham", "see you"]))
    processor = cd.get_processor("SPAM")
    assert isinstance(processor, SpamProcessor)
    assert processor.get_labels() == ["ham", "spam"]
    assert as_tuples(processor.get_train_examples(str(tmp_path))) == [
        ("train-0", "WIN NOW", None, "spam"), ("train-1", "see you", None, "ham")]
    assert "spam" in input_error(cd.get_processor, "nope")

    with pytest.raises(ValueError):
        @cd.register_processor("cola")
        class OtherCola(cd.DataProcessor):
            pass

    with pytest.raises(TypeError):
        cd.register_processor("plain")(object)


def test_read_tsv_for_ported_processors(tmp_path):
    path = write(tmp_path, "x.tsv", "h1\th2\r\nv1\tv2\r\n")
    assert cd.DataProcessor._read_tsv(path) == [["h1", "h2"], ["v1", "v2"]]


def test_input_example_defaults():
    example = cd.InputExample("g-1", "text")
    assert (example.text_b, example.label) == (None, None)
    assert cd.InputExample("g", "a", "b", ("x",)).label == ("x",)


# ---------------------------------------------------------------------------
# Real data


@pytest.mark.slow
def test_custom_reads_the_real_polarity_csv(corpora_dir):
    processor = cd.get_processor("custom", train_file="polarity-en-pang&lee2.csv",
                                 label_column=0, text_a_column=1, has_header=False)
    examples = processor.get_train_examples(corpora_dir)
    assert len(examples) == 4000
    assert collections.Counter(e.label for e in examples) == {"-1": 2000, "1": 2000}
    assert processor.get_labels() == ["-1", "1"]
    assert all(e.text_a and e.text_a == e.text_a.strip() for e in examples)
    assert all(e.text_b is None for e in examples)
    assert examples[0].text_a.startswith("the rock is destined")
    assert examples[0].text_a.endswith("steven segal .")
    assert len({e.guid for e in examples}) == 4000
