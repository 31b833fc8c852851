"""serving_server.py and serving_client.py end to end, on a tiny exported classifier.

A tiny model is trained and exported as a user would (run_custom_classifier.py
--save_for_serving); local servers with and without batching run as
subprocesses on free loopback ports; answers are compared with the SavedModel's
own serving_default signature on the same features.
"""

import glob
import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import numpy as np
import pytest
import tensorflow as tf

from bert_toolkit.engine import export_layout
from bert_toolkit.errors import InputError
from bert_toolkit.serving import client as serving_client
from bert_toolkit.serving import server as serving_server
from bert_toolkit.text import tokenization

import shared_fixture
from servers import ENV, MAX_REQUEST_BYTES, MAX_ROWS, server_url, start_server, stop
from tiny import REPO, write_sentiment_csv, write_tiny_model

SENTENCES = ["the movie is good", "a very bad plot .", "the acting was great and the music "
             "fine", "dull", "", "not awful , but not good either", "the story"]


# -- fixtures -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def export(request):
    """(model base path, version folder) of a tiny trained, exported classifier, made
    once per session for all test workers (shared_fixture.build_once): read only."""
    return tuple(shared_fixture.build_once(request, "serving_export", _train_and_export))


def _train_and_export(folder):
    """(model base path, version folder) of a classifier trained and exported in `folder`."""
    root = pathlib.Path(folder)
    model = write_tiny_model(str(root / "model"), with_classifier_labels=2)
    data_dir = root / "data"
    data_dir.mkdir()
    write_sentiment_csv(str(data_dir / "train.csv"), 64, seed=1)
    output_dir = str(root / "out")
    result = subprocess.run(
        [sys.executable, "run_custom_classifier.py", "--task_name=custom",
         "--data_dir=%s" % data_dir, "--text_a_column=sentence", "--label_column=label",
         "--vocab_file=%s" % model["vocab_file"],
         "--bert_config_file=%s" % model["bert_config_file"],
         "--init_checkpoint=%s" % model["init_checkpoint"], "--output_dir=%s" % output_dir,
         "--max_seq_length=16", "--learning_rate=3e-3", "--num_train_epochs=3",
         "--train_batch_size=8", "--do_train", "--save_for_serving"],
        cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        universal_newlines=True)
    assert result.returncode == 0, result.stderr[-3000:]
    base_path = os.path.join(output_dir, "serving")
    (version_dir,) = glob.glob(os.path.join(base_path, "*"))
    return base_path, version_dir


@pytest.fixture(scope="module")
def reference(export):
    """probabilities(features): the SavedModel's serving_default, called in-process."""
    signature = tf.saved_model.load(export[1]).signatures["serving_default"]

    def probabilities(features):
        outputs = signature(**{name: tf.constant(value) for name, value in features.items()})
        return outputs["probabilities"].numpy()
    return probabilities


@pytest.fixture(scope="module")
def tokenizer(export):
    config = serving_client.load_serving_config(
        os.path.join(export[1], "assets.extra", "serving_config.json"))
    vocab = os.path.join(export[1], "assets.extra", "vocab.txt")
    return tokenization.FullTokenizer(vocab, config["do_lower_case"])


@pytest.fixture(scope="module")
def servers(export):
    """{"batching": url, "direct": url}: two servers of the export, started together."""
    processes = {
        # A wide batching window, so that concurrent test requests surely meet.
        "batching": start_server(export[0], "--enable_batching", "--max_batch_size=32",
                                 "--batch_timeout_micros=50000"),
        "direct": start_server(export[0], "--noenable_batching"),
    }
    try:
        yield {name: server_url(process) for name, process in processes.items()}
    finally:
        for process in processes.values():
            if process.poll() is None:
                stop(process)
            process.stdout.close()
            process.stderr.close()


def post(url, body, timeout=30):
    """(status, decoded JSON) of POSTing `body` (bytes, or JSON-able) to `url`."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def get(url, timeout=30):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8")


def run_client(*args, stdin=None):
    return subprocess.run([sys.executable, "serving_client.py"] + list(args), cwd=REPO,
                          env=ENV, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=60)


def features_of(tokenizer, texts):
    return serving_client.encode(tokenizer, [(text, None) for text in texts], 16)


# -- through the servers ---------------------------------------------------------------

def test_client_prints_the_saved_models_probabilities(export, servers, reference, tokenizer,
                                                      tmp_path):
    expected = reference(features_of(tokenizer, SENTENCES))
    labels = ["0", "1"]

    result = run_client("--export_dir=%s" % export[0], "--url=%s" % servers["batching"],
                        *SENTENCES)
    assert result.returncode == 0, result.stderr
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert len(rows) == len(SENTENCES)
    np.testing.assert_allclose([[float(p) for p in row[1:]] for row in rows], expected,
                               atol=1e-5)
    assert [row[0] for row in rows] == [labels[i] for i in expected.argmax(axis=1)]

    # Standard input, JSON Lines, the columnar format, small batches, a version URL
    # and the assets named explicitly.
    extra = os.path.join(export[1], "assets.extra")
    version_url = "%s/versions/%s" % (servers["direct"], os.path.basename(export[1]))
    result = run_client("--vocab_file=%s" % os.path.join(extra, "vocab.txt"),
                        "--serving_config=%s" % os.path.join(extra, "serving_config.json"),
                        "--url=%s" % version_url, "--output_format=jsonl",
                        "--request_format=columnar", "--batch_size=3",
                        stdin="".join(text + "\n" for text in SENTENCES))
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["text"] for r in records] == SENTENCES
    np.testing.assert_allclose([[r["probabilities"][label] for label in labels] for r in records],
                               expected, atol=1e-5)

    # A file, one text per line, against the version folder as --export_dir.
    input_file = tmp_path / "texts.txt"
    input_file.write_text("\n".join(SENTENCES[:3]) + "\n")
    result = run_client("--export_dir=%s" % export[1], "--url=%s" % servers["direct"],
                        "--input_file=%s" % input_file, "--output_format=jsonl")
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["label"] for line in result.stdout.splitlines()] == [
        labels[i] for i in expected[:3].argmax(axis=1)]


def test_text_signature_through_client_and_raw_http(export, servers, reference, tokenizer):
    """Raw text in, predictions out: the export tokenizes in its own graph, and
    answers as serving_default does on the client's ids."""
    expected = reference(features_of(tokenizer, SENTENCES))
    result = run_client("--export_dir=%s" % export[0], "--url=%s" % servers["batching"],
                        "--signature_name=text", "--batch_size=3", *SENTENCES)
    assert result.returncode == 0, result.stderr
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    np.testing.assert_allclose([[float(p) for p in row[1:]] for row in rows], expected,
                               atol=1e-5)
    # The README's curl body, in both formats.
    for url in servers.values():
        status, body = post(url + ":predict", {"signature_name": "text",
                                               "instances": [{"text_a": t} for t in SENTENCES]})
        assert status == 200, body
        np.testing.assert_allclose([p["probabilities"] for p in body["predictions"]],
                                   expected, atol=1e-5)
        assert [p["labels"] for p in body["predictions"]] == [["0", "1"]] * len(SENTENCES)
        status, body = post(url + ":predict", {"signature_name": "text",
                                               "inputs": {"text_a": SENTENCES[:2]}})
        assert status == 200, body
        np.testing.assert_allclose(body["outputs"]["probabilities"], expected[:2], atol=1e-5)
        status, body = post(url + ":predict", {"signature_name": "text",
                                               "instances": [{"text_a": 3}]})
        assert status == 400 and "expected" in body["error"], body


def test_text_signature_loads_without_tensorflow_text_and_has_no_python_ops(export):
    """A fresh interpreter that imports nothing of ours (nor tensorflow_text) serves
    the text signature, and the graph holds no PyFunc (stock TF Serving runs it)."""
    code = "\n".join([
        "import sys, tensorflow as tf",
        "from tensorflow.core.protobuf import saved_model_pb2",
        "model = tf.saved_model.load(sys.argv[1])",
        "out = model.signatures['text'](text_a=tf.constant(['the movie is good', '']))",
        "assert out['probabilities'].shape == (2, 2), out",
        "assert 'tensorflow_text' not in sys.modules",
        "proto = saved_model_pb2.SavedModel()",
        "proto.ParseFromString(open(sys.argv[1] + '/saved_model.pb', 'rb').read())",
        "graph = proto.meta_graphs[0].graph_def",
        "ops = {n.op for n in graph.node} | {n.op for f in graph.library.function "
        "for n in f.node_def}",
        "assert not ops & {'PyFunc', 'PyFuncStateless', 'EagerPyFunc'}, ops",
        "print(sorted(proto.meta_graphs[0].signature_def))"])
    result = subprocess.run([sys.executable, "-c", code, export[1]], env=ENV, cwd="/",
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "['serving_default', 'text']"


def test_raw_http_in_both_formats_matches_the_saved_model(servers, reference, tokenizer):
    features = features_of(tokenizer, SENTENCES[:4])
    expected = reference(features)
    for url in servers.values():
        status, body = post(url + ":predict", serving_client.build_request(features, "row"))
        assert status == 200, body
        assert [sorted(p) for p in body["predictions"]] == [
            ["label_ids", "logits", "probabilities"]] * 4
        np.testing.assert_allclose([p["probabilities"] for p in body["predictions"]],
                                   expected, atol=1e-5)

        status, body = post(url + ":predict", {"inputs": {
            name: value.tolist() for name, value in features.items()}})
        assert status == 200, body
        np.testing.assert_allclose(body["outputs"]["probabilities"], expected, atol=1e-5)
        assert body["outputs"]["label_ids"] == expected.argmax(axis=1).tolist()

        status, text = get(url)
        assert status == 200
        (version,) = json.loads(text)["model_version_status"]
        assert version["state"] == "AVAILABLE" and version["status"]["error_code"] == "OK"


def test_concurrent_requests_are_batched_and_answer_as_unbatched(servers, reference,
                                                                 tokenizer):
    # Eight clients at once, 1 to 4 rows each, so rows of several requests share calls.
    requests = [features_of(tokenizer, SENTENCES[i % 5:i % 5 + 1 + i % 4]) for i in range(8)]
    answers = {}
    for name, url in servers.items():
        start = threading.Barrier(len(requests))
        results = [None] * len(requests)

        def send(index):
            start.wait()
            results[index] = post(url + ":predict",
                                  serving_client.build_request(requests[index], "row"))
        threads = [threading.Thread(target=send, args=(i,)) for i in range(len(requests))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert all(status == 200 for status, _ in results), results
        answers[name] = [np.array([p["probabilities"] for p in body["predictions"]])
                         for _, body in results]
    for features, batched, direct in zip(requests, answers["batching"], answers["direct"]):
        np.testing.assert_allclose(batched, direct, atol=1e-5)
        np.testing.assert_allclose(batched, reference(features), atol=1e-5)

    metrics = get(servers["batching"].split("/v1/")[0] + "/monitoring/prometheus/metrics")[1]
    counts = dict(line.split() for line in metrics.splitlines() if not line.startswith("#"))
    assert int(counts["bert_serving_max_requests_per_call"]) >= 2, metrics


def test_bad_requests_get_a_4xx_with_a_message_and_the_server_goes_on(servers, tokenizer):
    url = servers["batching"]
    good = serving_client.build_request(features_of(tokenizer, ["good"]), "row")
    row = good["instances"][0]
    cases = [
        (b"{not json", 400, "malformed JSON"),
        ({"instances": [{"input_ids": row["input_ids"], "input_mask": row["input_mask"]}]},
         400, "missing input 'segment_ids'"),
        ({"inputs": {"input_ids": [row["input_ids"][:5]], "input_mask": [row["input_mask"]],
                     "segment_ids": [row["segment_ids"]]}}, 400, "got shape [1, 5]"),
        ({"instances": [dict(row, input_ids=[0.5] * 16)]}, 400, "numbers with a fraction"),
        ({"inputs": dict(good["instances"][0], input_ids=["a"] * 16)}, 400, "got strings"),
        ({"instances": [dict(row, input_ids=[2] + [10 ** 6] * 15)]}, 400,
         "the model rejected the input"),
        ({"instances": []}, 400, "non-empty"),
        ({"instances": [row], "inputs": {}}, 400, "exactly one of"),
        (b"x" * (MAX_REQUEST_BYTES + 1), 413, "--max_request_bytes"),
        (b"[" * 30000 + b"]" * 30000, 400, "nested too deeply"),
        ({"instances": [row] * (MAX_ROWS + 1)}, 413, "at most %d per request" % MAX_ROWS),
        ({"inputs": {name: [value] * (MAX_ROWS + 1) for name, value in row.items()}}, 413,
         "--max_rows_per_request"),
        ({"instances": [row], "signature_name": "nope"}, 400, "signature_name 'nope'"),
        ({"instances": [row], "extra": 1}, 400, "unknown key 'extra'"),
        ([row], 400, "expected a JSON object"),
        ({"instances": [dict(row, input_ids=[[2] * 16])]}, 400, "got shape"),
    ]
    for body, status, message in cases:
        got_status, answer = post(url + ":predict", body)
        assert (got_status, set(answer)) == (status, {"error"}), (body[:80], answer)
        assert message in answer["error"], answer
    base = url.rsplit("/", 1)[0]
    for bad_url, message in ((base + "/other:predict", "Servable not found"),
                             (url + "/versions/7:predict", "the loaded version is"),
                             (base.split("/v1/")[0] + "/v2/nothing:predict", "no such path")):
        got_status, answer = post(bad_url, good)
        assert got_status == 404 and message in answer["error"], answer
    assert get(url + "/versions/7")[0] == 404

    status, body = post(url + ":predict", good)  # still serving
    assert status == 200 and len(body["predictions"]) == 1


def test_client_reports_server_and_network_errors_in_one_line(export, servers):
    base = servers["direct"].rsplit("/", 1)[0]
    result = run_client("--export_dir=%s" % export[0], "--url=%s/other" % base, "good")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("error: %s/other:predict: HTTP 404: Servable not found"
                                    % base), result.stderr
    assert len(result.stderr.splitlines()) == 1

    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    result = run_client("--export_dir=%s" % export[0],
                        "--url=http://127.0.0.1:%d/v1/models/tiny" % closed_port, "good")
    assert result.returncode == 1
    assert result.stderr == "error: http://127.0.0.1:%d/v1/models/tiny:predict: cannot " \
                            "connect (Connection refused)\n" % closed_port


def test_sigterm_stops_the_server_cleanly_and_frees_its_port(export, tokenizer):
    """Also: a client that disconnects mid-body costs one log line, not a traceback."""
    process = start_server(export[0], "--enable_batching")
    good = serving_client.build_request(features_of(tokenizer, ["good"]))
    try:
        url = server_url(process)
        assert post(url + ":predict", good)[0] == 200
        host_port = re.search(r"//([^/]+)/", url).group(1).rsplit(":", 1)
        with socket.create_connection((host_port[0], int(host_port[1]))) as client:
            client.sendall(b"POST /v1/models/tiny:predict HTTP/1.1\r\nHost: x\r\n"
                           b"Content-Length: 60000\r\n\r\n{\"instances\": [")
        assert post(url + ":predict", good)[0] == 200
    finally:
        code = stop(process)
        log = process.stderr.read()
        process.stdout.close()
        process.stderr.close()
    assert code == 0
    assert "Traceback" not in log, log[-3000:]
    assert len(re.findall("client disconnected before sending the whole body", log)) == 1, log
    port = int(re.search(r":(\d+)/", url).group(1))
    with socket.socket() as probe:
        with pytest.raises(ConnectionRefusedError):
            probe.connect(("127.0.0.1", port))
    with socket.socket() as again:
        # As a restarted server binds: SO_REUSEADDR lets it past the closed
        # connections' TIME_WAIT, but not past a socket still listening.
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))
        again.listen()


# -- the pieces, without a server ---------------------------------------------------------

def test_pairs_are_split_on_tabs_and_encoded_as_in_training(tokenizer):
    pairs = list(serving_client.pairs_from_lines(["the plot\tis good\n", "a\tb"], "in.txt",
                                                 sentence_pairs=True))
    assert pairs == [("the plot", "is good"), ("a", "b")]
    with pytest.raises(InputError, match=r"in.txt line 2: expected two texts separated by "
                                         r"a tab .* got 1 field"):
        list(serving_client.pairs_from_lines(["a\tb", "no tab"], "in.txt", True))
    assert serving_client.pairs_from_arguments(["x", "y"], ["u", "v"], True) == [
        ("x", "u"), ("y", "v")]
    with pytest.raises(InputError, match="--text_b: the model was trained on single texts"):
        serving_client.pairs_from_arguments(["x"], ["u"], False)

    features = serving_client.encode(tokenizer, pairs, 16)
    ids, mask, segments = tokenizer.encode_pairs(["the plot", "a"], ["is good", "b"], 16)
    np.testing.assert_array_equal(features["input_ids"], ids)
    np.testing.assert_array_equal(features["input_mask"], mask)
    np.testing.assert_array_equal(features["segment_ids"], segments)
    assert features["segment_ids"][0].tolist()[:6] == [0, 0, 0, 0, 1, 1]


def test_request_and_response_formats_round_trip():
    specs = {name: serving_server.InputSpec(np.dtype(np.int32), (None, 3))
             for name in export_layout.SERVING_INPUTS}
    features = {name: np.arange(6, dtype=np.int32).reshape(2, 3) + i
                for i, name in enumerate(export_layout.SERVING_INPUTS)}
    outputs = {"probabilities": np.array([[0.25, 0.75], [0.5, 0.5]], np.float32),
               "label_ids": np.array([1, 0], np.int32)}
    for request_format in ("row", "columnar"):
        body = json.dumps(serving_client.build_request(features, request_format))
        signature, parsed, num_rows, row_format = serving_server.parse_predict_request(
            body, {"serving_default": specs})
        assert signature == "serving_default"
        assert num_rows == 2 and row_format == (request_format == "row")
        for name in features:
            np.testing.assert_array_equal(parsed[name], features[name])
        response = serving_server.predict_response(outputs, row_format)
        assert serving_client.parse_response(response, 2) == {
            "probabilities": [[0.25, 0.75], [0.5, 0.5]], "label_ids": [1, 0]}
    # One output: TensorFlow Serving drops the names.
    assert serving_server.predict_response({"p": outputs["label_ids"]}, True) == {
        "predictions": [1, 0]}
    assert serving_server.predict_response({"p": outputs["label_ids"]}, False) == {
        "outputs": [1, 0]}
    # float32 values travel as their shortest repr, which reads back to the same float32.
    value = np.float32(1) / np.float32(3)
    (text,) = serving_server.json_values(np.array([value]))
    assert repr(text) == "0.33333334" and np.float32(text) == value


def test_classification_results_and_output_lines():
    config = serving_client.parse_serving_config(json.dumps({
        "task": "classification", "labels": ["neg", "pos"], "max_seq_length": 8,
        "do_lower_case": True}))
    outputs = {"probabilities": [[0.9, 0.1], [0.2, 0.8]], "label_ids": [0, 1]}
    results = serving_client.classification_results(outputs, config)
    assert [serving_client.format_line(("a", None), r, "tsv") for r in results] == [
        "neg\t0.900000\t0.100000", "pos\t0.200000\t0.800000"]
    assert json.loads(serving_client.format_line(("a", "b"), results[1], "jsonl")) == {
        "text": "a", "text_b": "b", "label": "pos", "probabilities": {"neg": 0.2, "pos": 0.8}}
    multi = dict(config, multi_label=True, multi_label_threshold=0.5)
    (record, fields), _ = serving_client.classification_results(
        {"probabilities": [[0.7, 0.6], [0.1, 0.2]]}, multi)
    assert record["labels"] == ["neg", "pos"] and fields[0] == "neg|pos"
    with pytest.raises(serving_client.ServingError, match="3 probabilities for the 2 labels"):
        serving_client.classification_results({"probabilities": [[0.1, 0.2, 0.7]]}, config)
    with pytest.raises(InputError, match="task 'tagging' is not one this client knows"):
        serving_client.parse_serving_config(json.dumps(dict(config, task="tagging")))


def test_model_errors_are_cut_to_their_one_informative_line():
    message = ("Graph execution error:\n\nDetected at node bert/embeddings/Gather defined at "
               "(most recent call last):\n  File \"x.py\", line 4, in <module>\n\n"
               "indices[0,0] = 99 is not in [0, 28)\n\t [[{{node bert/embeddings/Gather}}]] "
               "[Op:__inference_pruned_1437]")
    assert serving_server.model_error_text(message) == "indices[0,0] = 99 is not in [0, 28)"
    assert serving_client.predict_url("http://h:1/v1/models/m/") == "http://h:1/v1/models/m:predict"
    assert serving_client.predict_url("http://h:1/v1/models/m/versions/3:predict") == \
        "http://h:1/v1/models/m/versions/3:predict"
