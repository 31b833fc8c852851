"""Predict on raw text with a BERT model behind TensorFlow Serving's REST API.

    python serving_client.py --export_dir=runs/quickstart/classifier/serving \
        --url=http://127.0.0.1:8501/v1/models/sentiment "a gripping story" "dull"

Texts come from positional arguments, from `--input_file` (one text per line)
or from standard input. For a model trained on sentence pairs, each line (or
argument) holds two texts separated by a tab, or the second texts come from
`--text_b`. They are tokenized exactly as training did, with the vocab and
settings the export carries in assets.extra/ (`--export_dir`), or with
`--vocab_file` and `--serving_config` given explicitly (the model family's
tokenizer: WordPiece's vocab.txt, or the byte-level BPE or SentencePiece files
an export of RoBERTa, XLM-R or ALBERT carries), and sent to the
server's `:predict` endpoint `--batch_size` texts at a time. One line per input
is printed: TSV (predicted label, then one probability per label) or JSON Lines.
A token classification export (run_seq_labeling.py) labels every word of each
text: TSV gives one word/LABEL field per word (punct: the restored text), JSON
Lines the words and labels; long texts go as overlapping windows, merged back.
A question answering export (run_squad.py) takes question<TAB>context (or the
question as the argument, the context by --text_b) and answers with the text as
it stands in the context, its character offsets there and its probability,
cutting windows and choosing the span as run_squad.py does.

The functions below are the reusable part (finding an export, reading its
settings, building `:predict` requests, parsing responses, formatting results)
and import neither TensorFlow nor any HTTP library beyond Python's own.
"""

import collections
import http.client
import json
import os
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request

import numpy as np

from bert_toolkit import console, errors, families, fileio
from bert_toolkit.engine import export_layout
from bert_toolkit.errors import InputError
from bert_toolkit.serving.options import DEFAULT_SIGNATURE, TEXT_SIGNATURE
from bert_toolkit.tasks.seq_labeling import features as seq_labeling_features
from bert_toolkit.tasks.seq_labeling import outputs as seq_labeling_outputs
from bert_toolkit.tasks.seq_labeling import punctuation
from bert_toolkit.tasks.squad import answers as squad_answers
from bert_toolkit.tasks.squad import data as squad_data
from bert_toolkit.tasks.squad import features as squad_features
from bert_toolkit.text import tokenization
from bert_toolkit.text import windows as text_windows


class ServingError(Exception):
    """The server could not be reached, refused the request, or answered nonsense."""


# -- the export's settings ----------------------------------------------------------

def parse_serving_config(text, source="serving_config.json"):
    """The settings dict of a serving_config.json's text, checked and with defaults.

    Required: task (a kind in TASKS), labels (a list of strings), max_seq_length
    (an integer >= 2), do_lower_case (a boolean; null for a tokenizer that is not
    WordPiece, whose file has its casing). Optional: model_family (default
    bert), tokenizer_file (the tokenizer's file in assets.extra/, default
    vocab.txt).
    """
    try:
        config = json.loads(text)
    except ValueError as e:
        raise InputError("%s: not valid JSON (%s)" % (source, e))
    if not isinstance(config, dict):
        raise InputError("%s: expected a JSON object of serving settings" % source)
    # A question answering export has no labels to predict.
    required = ("task", "max_seq_length", "do_lower_case") + (
        () if config.get("task") == "squad" else ("labels",))
    missing = [key for key in required if key not in config]
    if missing:
        raise InputError("%s: missing %s (written by --save_for_serving)"
                         % (source, ", ".join(missing)))
    if config["task"] not in TASKS:
        raise InputError("%s: task %r is not one this client knows (%s)"
                         % (source, config["task"], ", ".join(sorted(TASKS))))
    labels = config.get("labels", [])
    if not (isinstance(labels, list) and (labels or config["task"] == "squad")
            and all(isinstance(label, str) for label in labels)):
        raise InputError("%s: labels must be a non-empty list of strings, got %r"
                         % (source, labels))
    length = config["max_seq_length"]
    if isinstance(length, bool) or not isinstance(length, int) or length < 2:
        raise InputError("%s: max_seq_length must be an integer >= 2, got %r" % (source, length))
    family = families.get(config.get("model_family"), source)
    casing = config["do_lower_case"]
    if not (isinstance(casing, bool) or (casing is None and family.tokenizer != "wordpiece")):
        raise InputError("%s: do_lower_case must be true or false, got %r"
                         % (source, config["do_lower_case"]))
    tokenizer_file = config.get("tokenizer_file", export_layout.VOCAB_FILE)
    if not isinstance(tokenizer_file, str) or not tokenizer_file \
            or os.path.basename(tokenizer_file) != tokenizer_file:
        raise InputError("%s: tokenizer_file must be a file name (in assets.extra/), got %r"
                         % (source, tokenizer_file))
    if config["task"] == "token_classification":
        stride = config.get("window_stride")
        if isinstance(stride, bool) or not isinstance(stride, int) \
                or not 1 <= stride <= length - 2:
            raise InputError("%s: window_stride must be an integer from 1 to max_seq_length "
                             "- 2, got %r" % (source, stride))
    if config["task"] == "squad":
        config = {**SQUAD_ANSWER_DEFAULTS, **config, "sentence_pairs": True}
        _check_squad_settings(config, source)
    return dict({"multi_label": False, "multi_label_threshold": 0.5, "sentence_pairs": False},
                **config)


# Google's run_squad.py defaults, for exports that do not record the answer settings.
SQUAD_ANSWER_DEFAULTS = {"n_best_size": 20, "max_answer_length": 30,
                         "version_2_with_negative": False, "null_score_diff_threshold": 0.0}


def _check_squad_settings(config, source):
    """The window and answer settings of a question answering export."""
    whole = {"doc_stride": 1, "max_query_length": 1, "n_best_size": 1, "max_answer_length": 1}
    for key, least in whole.items():
        value = config.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise InputError("%s: %s must be an integer >= %d, got %r"
                             % (source, key, least, value))
    if config["max_seq_length"] <= config["max_query_length"] + 3:
        raise InputError("%s: max_seq_length must exceed max_query_length + 3" % source)
    if not isinstance(config.get("version_2_with_negative"), bool):
        raise InputError("%s: version_2_with_negative must be true or false" % source)
    threshold = config.get("null_score_diff_threshold")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise InputError("%s: null_score_diff_threshold must be a number, got %r"
                         % (source, threshold))


def export_tokenizer(vocab_file, config, explicit=False):
    """The tokenizer an export's requests are made with: the model family's
    (serving_config.json's model_family) of the export's tokenizer file.

    vocab_file: export_layout.resolve_assets' (the export's assets.extra/vocab.txt,
    or the file given); unless `explicit`, an export whose tokenizer is not
    WordPiece names its file in assets.extra/ by `tokenizer_file`. Its casing
    is the file's; WordPiece's is do_lower_case.
    """
    family = families.get(config.get("model_family"))
    if not explicit and config.get("tokenizer_file"):
        vocab_file = os.path.join(os.path.dirname(vocab_file), config["tokenizer_file"])
    casing = config["do_lower_case"] if family.tokenizer == "wordpiece" else None
    return tokenization.load_tokenizer(vocab_file, casing, family)


def load_serving_config(path):
    """parse_serving_config of the file `path`."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError("%s: cannot read the serving settings (%s)" % (path, e.strerror or e))
    return parse_serving_config(text, path)


# -- inputs ---------------------------------------------------------------------

def split_pair(text, where):
    """(text_a, text_b) of one 'a<TAB>b' input; InputError naming `where` otherwise."""
    fields = text.split("\t")
    if len(fields) != 2:
        raise InputError("%s: expected two texts separated by a tab (the model takes "
                         "sentence pairs), got %d field(s)" % (where, len(fields)))
    return fields[0], fields[1]


def pairs_from_lines(lines, source, sentence_pairs):
    """Yields (text_a, text_b or None) for each line of `lines` (an iterable of str).

    Every line is one input, an empty one included, so that output line n always
    answers input line n. For a single-text model a tab is just whitespace.
    """
    for number, line in enumerate(lines, 1):
        text = line.rstrip("\r\n")
        if sentence_pairs:
            yield split_pair(text, "%s line %d" % (source, number))
        else:
            yield text, None


def pairs_from_arguments(texts, texts_b, sentence_pairs):
    """[(text_a, text_b or None)] of positional texts and --text_b values."""
    if texts_b:
        if not sentence_pairs:
            raise InputError("--text_b: the model was trained on single texts "
                             "(serving_config.json has sentence_pairs false)")
        if len(texts_b) != len(texts):
            raise InputError("--text_b given %d time(s) for %d text(s); expected one per text"
                             % (len(texts_b), len(texts)))
        return list(zip(texts, texts_b))
    if sentence_pairs:
        return [split_pair(text, "argument %d" % number)
                for number, text in enumerate(texts, 1)]
    return [(text, None) for text in texts]


def encode(tokenizer, pairs, max_seq_length):
    """The signature's inputs for [(text_a, text_b or None)]: name -> int32
    [len(pairs), max_seq_length], built by the same call training uses."""
    texts_b = [b for _, b in pairs]
    arrays = tokenizer.encode_pairs(
        [a for a, _ in pairs], texts_b if any(b is not None for b in texts_b) else None,
        max_seq_length)
    return dict(zip(export_layout.SERVING_INPUTS, arrays))


# -- the REST protocol -----------------------------------------------------------

def predict_url(url):
    """The `:predict` address of a model URL such as
    http://host:8501/v1/models/NAME[/versions/N] (unchanged if it already ends so)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc \
            or "/v1/models/" not in parsed.path:
        raise InputError("--url=%s: expected the model's REST address, e.g. "
                         "http://127.0.0.1:8501/v1/models/<name>" % url)
    path = parsed.path.rstrip("/")
    if not path.endswith(":predict"):
        path += ":predict"
    return urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, path, "", ""))


def build_request(features, request_format="row", signature_name=DEFAULT_SIGNATURE):
    """The JSON body of a `:predict` request for `features` (name -> [rows, ...] array).

    "row": {"instances": [{name: row}, ...]}; "columnar": {"inputs": {name: rows}}.
    """
    columns = {name: values.tolist() for name, values in features.items()}
    if request_format == "columnar":
        return {"signature_name": signature_name, "inputs": columns}
    if request_format != "row":
        raise ValueError("request_format must be 'row' or 'columnar', got %r" % request_format)
    num_rows = len(next(iter(columns.values())))
    return {"signature_name": signature_name,
            "instances": [{name: rows[i] for name, rows in columns.items()}
                          for i in range(num_rows)]}


def text_inputs(pairs, config):
    """The `text` signature's inputs for [(text_a, text_b or None)]: name -> object
    array of strings (the server tokenizes them in its graph)."""
    names = config.get("text_inputs") or ["text_a"]
    columns = {"text_a": [a for a, _ in pairs], "text_b": [b or "" for _, b in pairs]}
    return {name: np.array(columns[name], dtype=object) for name in names}


def parse_response(body, num_rows):
    """Output name -> list with one value per row, from a `:predict` response of either
    format. A single-output model's bare values come back under the name "output"."""
    if not isinstance(body, dict):
        raise ServingError("expected a JSON object, got %s" % type(body).__name__)
    if "error" in body:
        raise ServingError(str(body["error"]))
    if "predictions" in body:
        rows = body["predictions"]
        if not isinstance(rows, list):
            raise ServingError("'predictions' is not a list")
        if rows and all(isinstance(row, dict) for row in rows):
            outputs = {name: [row.get(name) for row in rows] for name in rows[0]}
        else:
            outputs = {"output": rows}
    elif "outputs" in body:
        outputs = body["outputs"]
        if not isinstance(outputs, dict):
            outputs = {"output": outputs}
    else:
        raise ServingError("expected 'predictions' or 'outputs' in the response, got keys %s"
                           % sorted(body))
    for name, values in outputs.items():
        if not isinstance(values, list) or len(values) != num_rows:
            raise ServingError("output %r has %s values for %d inputs" % (
                name, len(values) if isinstance(values, list) else "no list of", num_rows))
    return outputs


def server_error_text(payload):
    """The server's own message from an error response body (bytes), else its text."""
    text = payload.decode("utf-8", "replace").strip()
    try:
        body = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:500] or "(empty body)"
    if isinstance(body, dict) and "error" in body:
        return " ".join(str(body["error"]).split())
    return text[:500]


def post_json(url, payload, timeout):
    """POSTs `payload` as JSON to `url`, returns the decoded JSON answer.

    Raises ServingError naming the URL, with the server's error text for an HTTP
    error and the reason for a network failure.
    """
    data = json.dumps(payload, separators=(",", ":")).encode("utf-8")
    request = urllib.request.Request(url, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = response.read()
    except urllib.error.HTTPError as e:
        raise ServingError("%s: HTTP %d: %s" % (url, e.code, server_error_text(e.read())))
    except urllib.error.URLError as e:
        reason = getattr(e.reason, "strerror", None) or e.reason
        raise ServingError("%s: cannot connect (%s)" % (url, reason))
    except socket.timeout:
        raise ServingError("%s: no answer within %g s" % (url, timeout))
    except (OSError, http.client.HTTPException) as e:
        raise ServingError("%s: %s" % (url, e or type(e).__name__))
    try:
        return json.loads(answer)
    except ValueError:
        raise ServingError("%s: the answer is not JSON: %s" % (url, server_error_text(answer)))


def predict(url, features, request_format="row", timeout=60.0,
            signature_name=DEFAULT_SIGNATURE):
    """Output name -> per-row values for `features`, from the server at `url`."""
    num_rows = len(next(iter(features.values())))
    body = post_json(url, build_request(features, request_format, signature_name), timeout)
    try:
        return parse_response(body, num_rows)
    except ServingError as e:
        raise ServingError("%s: %s" % (url, e))


# -- what the outputs mean, per kind of task --------------------------------------

def classification_results(outputs, config):
    """[(record for JSON, TSV fields)] per row of a classifier's outputs.

    Single-label: the predicted label (from label_ids) and every label's
    probability; multi-label: every label whose probability reaches the export's
    threshold (from predicted_multi_hot when the server sends it).
    """
    labels = config["labels"]
    if "probabilities" not in outputs:
        raise ServingError("the response has no 'probabilities' (outputs: %s)"
                           % ", ".join(sorted(outputs)))
    results = []
    for row, probabilities in enumerate(outputs["probabilities"]):
        if not isinstance(probabilities, list) or len(probabilities) != len(labels):
            raise ServingError("row %d has %s probabilities for the %d labels of "
                               "serving_config.json (is the URL serving this export?)"
                               % (row, len(probabilities) if isinstance(probabilities, list)
                                  else "no list of", len(labels)))
        by_label = dict(zip(labels, probabilities))
        if config["multi_label"]:
            hot = outputs.get("predicted_multi_hot")
            on = (hot[row] if hot is not None else
                  [p >= config["multi_label_threshold"] for p in probabilities])
            chosen = [label for label, flag in zip(labels, on) if flag]
            record = {"labels": chosen, "probabilities": by_label}
            first = "|".join(chosen)
        else:
            label_id = (outputs["label_ids"][row] if "label_ids" in outputs
                        else max(range(len(labels)), key=probabilities.__getitem__))
            if not isinstance(label_id, int) or not 0 <= label_id < len(labels):
                raise ServingError("row %d: label id %r is not one of the %d labels of "
                                   "serving_config.json" % (row, label_id, len(labels)))
            record = {"label": labels[label_id], "probabilities": by_label}
            first = labels[label_id]
        results.append((record, [first] + ["%.6f" % p for p in probabilities]))
    return results


def encode_words(tokenizer, pairs, config):
    """Token classification: the signature's inputs for the texts of `pairs` (split
    into words as the export's task does; overlapping windows for long ones), and
    the layout to merge the windows' answers: (features, (words per text, windows))."""
    if any(text_b is not None for _, text_b in pairs):
        raise InputError("a token classification model takes single texts, not pairs")
    words = [seq_labeling_outputs.words_of_text(text, config) for text, _ in pairs]
    length = config["max_seq_length"]
    layout = tokenizer.layout
    pieces = seq_labeling_features.sentence_pieces(tokenizer, words,
                                                   length - layout.single_specials)
    windows = seq_labeling_features.stack_features(list(seq_labeling_features.encode_sentences(
        pieces, length, config["window_stride"], layout)), length)
    return {name: windows[name] for name in export_layout.SERVING_INPUTS}, (words, windows)


def token_classification_results(outputs, config, layout):
    """[(record for JSON, TSV fields)] per text: each word's label, merged from the
    windows (label_ids [window, seq], else the argmax of probabilities). TSV: one
    word/LABEL field per word; for punct, the restored text."""
    words, windows = layout
    labels = config["labels"]
    if not len(windows["sentence_index"]):
        label_ids = []  # texts without words: nothing was asked
    elif "label_ids" in outputs:
        label_ids = outputs["label_ids"]
    elif "probabilities" in outputs:
        label_ids = [[max(range(len(p)), key=p.__getitem__) for p in row]
                     for row in outputs["probabilities"]]
    else:
        raise ServingError("the response has neither 'label_ids' nor 'probabilities' "
                           "(outputs: %s)" % ", ".join(sorted(outputs)))
    rows = []
    for row, ids in enumerate(label_ids):
        if not (isinstance(ids, list) and len(ids) == config["max_seq_length"]
                and all(isinstance(i, int) and 0 <= i < len(labels) for i in ids)):
            raise ServingError("row %d: expected %d label ids below %d (is the URL serving "
                               "this export?)" % (row, config["max_seq_length"], len(labels)))
        rows.append({"sentence_index": windows["sentence_index"][row],
                     "word_ids": windows["word_ids"][row], "label_ids": ids})
    results = []
    merged = seq_labeling_features.merge_windows(rows, [len(text_words) for text_words in words])
    for text_words, ids in zip(words, merged):
        text_labels = [labels[i] for i in ids]
        record = {"words": text_words, "labels": text_labels}
        fields = ["%s/%s" % pair for pair in zip(text_words, text_labels)]
        if config.get("task_name") == "punct":
            record["restored"] = punctuation.restore_text(text_words, text_labels)
            fields = [record["restored"]]
        results.append((record, fields))
    return results


TaskKind = collections.namedtuple("TaskKind", ["encode", "results"])
"""How a client handles one kind of export. encode(tokenizer, pairs, config) ->
(the signature's inputs, layout); results(outputs, config, layout) -> [(record
for JSON, TSV fields)] per pair. `outputs`: name -> per-row values."""

def encode_classification(tokenizer, pairs, config):
    """A classifier's inputs for `pairs`; an export trained with --long_text=windows
    gets every window of every text, the layout saying whose window each is."""
    if config.get("long_text") != "windows":
        return encode(tokenizer, pairs, config["max_seq_length"]), None
    texts_b = [b for _, b in pairs]
    *arrays, text_index = text_windows.encode_windows(
        tokenizer, [a for a, _ in pairs],
        texts_b if any(b is not None for b in texts_b) else None,
        config["max_seq_length"], config["doc_stride"])
    return dict(zip(export_layout.SERVING_INPUTS, arrays)), (text_index, len(pairs))


def classification_text_results(outputs, config, layout):
    """classification_results per text: a long text's windows aggregated as the
    export's training run did (mean or max of their probabilities)."""
    if layout is not None:
        text_index, num_texts = layout
        if "probabilities" not in outputs or len(outputs["probabilities"]) != len(text_index):
            raise ServingError("expected probabilities for each of the %d windows sent"
                               % len(text_index))
        outputs = {"probabilities": text_windows.aggregate(
            outputs["probabilities"], text_index, num_texts,
            config["window_aggregation"]).tolist()}
    return classification_results(outputs, config)


def encode_questions(tokenizer, pairs, config):
    """Question answering: the windows of each (question, context), cut as
    run_squad.py cut them; the layout keeps what making the answers needs."""
    questions = []
    for number, (question, context) in enumerate(pairs):
        if context is None:
            raise InputError("a question answering model takes a question and a context "
                             "(question<TAB>context, or the context by --text_b)")
        questions.append(squad_data.question_on(str(number), question, context))
        if not questions[-1].paragraph.words:
            raise InputError("the context of the question %r is empty; expected text"
                             % question[:60])
    windows = list(squad_features.windows_of(questions, tokenizer, config["max_seq_length"],
                                         config["doc_stride"], config["max_query_length"],
                                         False))
    rows = [squad_features.window_row(window, index, tokenizer, config["max_seq_length"], False)
            for index, window in windows]
    features = {name: np.stack([row[name] for row in rows])
                for name in export_layout.SERVING_INPUTS}
    return features, (questions, windows)


def answer_results(outputs, config, layout):
    """[(record for JSON, TSV fields)] per question: the answer text as it stands in
    the context, its character offsets there (context[start:end]), its
    probability among the n best and its score (start + end logit); v2.0 adds
    null_odds, and "" (offsets null) when the null answer wins. TSV: answer,
    start, end, probability."""
    questions, windows = layout
    for name in ("start_logits", "end_logits"):
        rows = outputs.get(name)
        if not isinstance(rows, list) or len(rows) != len(windows) or not all(
                isinstance(row, list) and len(row) == config["max_seq_length"] for row in rows):
            raise ServingError("expected %s [%d windows, %d] (is the URL serving this "
                               "export?)" % (name, len(windows), config["max_seq_length"]))
    predictions = [{"start_logits": start, "end_logits": end, "example_index": index}
                   for start, end, (index, _) in zip(outputs["start_logits"],
                                                     outputs["end_logits"], windows)]
    results = []
    for answer in squad_answers.answers_of_windows(questions, windows, predictions, config):
        best = next(entry for entry in answer.nbest if entry["text"] == answer.text)
        start, end = answer.offsets or (None, None)
        record = {"answer": answer.text, "start": start, "end": end,
                  "probability": best["probability"],
                  "score": best["start_logit"] + best["end_logit"]}
        if answer.null_odds is not None:
            record["null_odds"] = answer.null_odds
        results.append((record, [answer.text, "" if start is None else str(start),
                                 "" if end is None else str(end),
                                 "%.6f" % best["probability"]]))
    return results


TASKS = {
    "classification": TaskKind(encode_classification, classification_text_results),
    "token_classification": TaskKind(encode_words, token_classification_results),
    "squad": TaskKind(encode_questions, answer_results),
}


def format_line(pair, result, output_format):
    """One output line (no newline) for an input pair and its (record, TSV fields)."""
    record, fields = result
    if output_format == "tsv":
        # A tab or newline inside a label would break the columns.
        return "\t".join(" ".join(field.split()) for field in fields)
    text_a, text_b = pair
    head = {"text": text_a} if text_b is None else {"text": text_a, "text_b": text_b}
    return json.dumps(dict(head, **record), ensure_ascii=False)


# -- the command ------------------------------------------------------------------

def input_pairs(options, texts, config, stdin):
    """The (text_a, text_b) inputs the command line asks for, lazily for files."""
    if texts and options.input_file:
        raise InputError("give texts as arguments or --input_file, not both")
    if options.text_b and not texts:
        raise InputError("--text_b needs the first texts as positional arguments")
    if texts:
        return pairs_from_arguments(texts, options.text_b, config["sentence_pairs"])
    if options.input_file and options.input_file != "-":
        try:
            stream = open(options.input_file, encoding="utf-8")
        except OSError as e:
            raise InputError("--input_file=%s: cannot read it (%s)"
                             % (options.input_file, e.strerror or e))
        return pairs_from_lines(stream, options.input_file, config["sentence_pairs"])
    return pairs_from_lines(stdin, "standard input", config["sentence_pairs"])


def run(options, texts, stdin=None, stdout=None):
    """serving_client.py: predicts on `texts` (else --input_file or standard input)
    with ClientOptions, writing one line per input to stdout."""
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    args = options
    url = predict_url(args.url)
    vocab_file, config_file = export_layout.resolve_assets(args.export_dir, args.vocab_file,
                                             args.serving_config)
    config = load_serving_config(config_file)
    if args.null_score_diff_threshold is not None:
        if config["task"] != "squad" or not config["version_2_with_negative"]:
            raise InputError("--null_score_diff_threshold: %s is not a SQuAD 2.0 question "
                             "answering export" % config_file)
        config["null_score_diff_threshold"] = args.null_score_diff_threshold
    tokenizer = export_tokenizer(vocab_file, config, explicit=bool(args.vocab_file))
    kind = TASKS[config["task"]]
    if args.signature_name == TEXT_SIGNATURE and not config.get("text_signature"):
        raise InputError("--signature_name=text: %s has no text signature (exports of "
                         "classification and re-ranking models with a WordPiece tokenizer "
                         "have one; without the flag this client tokenizes)" % config_file)
    # Many requests show how far they are on stderr (stdout holds the results).
    progress = console.Progress("text", len(texts) if texts else None)
    requests = 0
    for batch in fileio.chunks(input_pairs(args, texts, config, stdin), args.batch_size):
        if args.signature_name == TEXT_SIGNATURE:
            features, layout = text_inputs(batch, config), None
        else:
            features, layout = kind.encode(tokenizer, batch, config)
        num_rows = len(next(iter(features.values())))
        # A batch of texts without words (token tasks) needs no request.
        outputs = (predict(url, features, args.request_format, args.timeout,
                           args.signature_name) if num_rows else {})
        try:
            results = kind.results(outputs, config, layout)
        except ServingError as e:
            raise ServingError("%s: %s" % (url, e))
        for pair, result in zip(batch, results):
            stdout.write(format_line(pair, result, args.output_format) + "\n")
        stdout.flush()  # answers appear as they come, also through a pipe
        requests += 1
        progress.add(len(batch))
    if requests > 1:
        progress.finish()


def run_guarded(options, texts):
    """run, where a server that cannot answer is one error line like a user's mistake,
    and a reader that stops reading (head, say) is no failure."""
    try:
        run(options, texts)
    except ServingError as e:
        sys.stdout.flush()
        errors.fail(e)
    except BrokenPipeError:
        # Point stdout at /dev/null so the interpreter's final flush does not fail too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
