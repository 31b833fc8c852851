"""Token labelling results: the prediction files, their entity scores, and the export's settings.

test_results.txt (every input line with the predicted label appended:
conlleval's input when the test file has gold labels), dev_results.txt (the
same for the eval split, scored for ner), punct's test_restored.txt, and the
fork's test_results.tsv (a line of space-separated labels per test sentence).
No TensorFlow.
"""

from bert_toolkit.errors import input_error
from bert_toolkit.tasks.seq_labeling import conlleval, features, readers
from bert_toolkit.tasks.seq_labeling.punctuation import punctuation_labels, restore_text

# The fork's prediction file: one line of space-separated labels per test sentence.
FORK_RESULTS_FILE = "test_results.tsv"


EVAL_RESULTS_FILE = "dev_results.txt"


def score_predictions_file(path, entity_types=(), encoding="utf-8"):
    """entity_report of a predictions file (test_results.txt of a test file with a
    gold label column, or dev_results.txt): the gold tags are its next-to-last
    column, the predictions its last. entity_types: as in entity_report."""
    sentences = readers.read_conll(path, "predict", labelled=True, encoding=encoding)
    if len(sentences[0].columns[0]) < 3:
        raise input_error(path, sentences[0].line_numbers[0], "expected token, gold "
                          "label and predicted label columns")
    gold = [[columns[-2] for columns in sentence.columns] for sentence in sentences]
    predicted = [sentence.labels for sentence in sentences]
    return conlleval.entity_report(conlleval.entity_counts(gold, predicted), entity_types)


def conll_lines(sentences, predicted):
    """test_results.txt: every word's line as read, with the predicted label appended
    in one more column; a blank line after each sentence."""
    for sentence, labels in zip(sentences, predicted):
        for columns, label in zip(sentence.columns, labels):
            yield sentence.delimiter.join(columns + (label,))
        yield ""


def prediction_files(split, sentences, predictions, label_list, task_name,
                     label_lines=False):
    """[(file name, lines)] of one split's predictions: every word's line with the
    predicted label appended (test_results.txt, or dev_results.txt for the eval
    split: conlleval's input), for punct's test split test_restored.txt (one
    line of restored text per input line), and with `label_lines` the fork's
    FORK_RESULTS_FILE (a line of labels per test sentence)."""
    predicted = features.merged_labels(sentences, predictions, label_list)
    if split == "eval":
        return [(EVAL_RESULTS_FILE, list(conll_lines(sentences, predicted)))]
    files = [("test_results.txt", list(conll_lines(sentences, predicted)))]
    if label_lines:
        files.append((FORK_RESULTS_FILE, [" ".join(labels) for labels in predicted]))
    if task_name == "punct":
        files.append(("test_restored.txt", [restore_text(sentence.words, labels)
                                            for sentence, labels in zip(sentences, predicted)]))
    return files


def serving_config(task_name, stride):
    """What a client needs, beyond the labels and tokenizer settings, to align words."""
    return {"task": "token_classification", "task_name": task_name,
            "words": "punctuation_stripped" if task_name == "punct" else "whitespace",
            "label_position": "first_sub_token", "window_stride": stride}


def words_of_text(text, config):
    """The words of a raw text as the export's task splits them."""
    if config.get("words") == "punctuation_stripped":
        return list(punctuation_labels(text)[0])
    return text.split()
