"""A local stand-in for TensorFlow Serving's REST API, for development and tests.

    python serving_server.py --model_name=sentiment \
        --model_base_path=runs/quickstart/classifier/serving --port=8501 --enable_batching

loads the highest integer version under --model_base_path (as
tensorflow_model_server does) and answers, on 127.0.0.1 unless --host says
otherwise:

- POST /v1/models/<name>[/versions/<v>]:predict, row format
  {"instances": [{"input_ids": [...], ...}, ...]} -> {"predictions": [...]}, or
  columnar format {"inputs": {"input_ids": [[...]], ...}} -> {"outputs": {...}};
- GET /v1/models/<name>[/versions/<v>]: the model's version status;
- GET /monitoring/prometheus/metrics: model calls, requests and rows served.

An export whose tokenizer has no in-graph form (byte-level BPE, SentencePiece:
RoBERTa, XLM-R, ALBERT) has no `text` signature; for a classifier or
re-ranker this server offers one anyway, tokenizing the texts in Python with
the tokenizer files the export carries (as serving_client.py does) and
answering with serving_default's outputs and `labels`, as the in-graph
signature of a WordPiece export does. TensorFlow Serving itself has no such
signature: its clients tokenize (serving_client.py).

Errors are {"error": "..."} with 400 (malformed JSON, missing or unknown
input, wrong shape or dtype, values the model rejects), 404 (unknown model,
version or path), 405 or 413 (body over --max_request_bytes, or more rows than
--max_rows_per_request).

With --enable_batching, rows of concurrent requests are gathered into one model
call: a batch closes when it holds --max_batch_size rows or
--batch_timeout_micros after its first request arrived, like TensorFlow
Serving's batching options of the same names. SIGINT or SIGTERM stops the
server cleanly (requests in flight are answered, the port is released, exit 0).
"""

import asyncio
import collections
import concurrent.futures
import json
import os
import signal
import socket
import sys

import numpy as np
import tensorflow as tf
from absl import logging
from aiohttp import web

from bert_toolkit import console
from bert_toolkit.engine import export_layout
from bert_toolkit.errors import InputError
from bert_toolkit.serving import client
from bert_toolkit.serving.options import TEXT_SIGNATURE

InputSpec = collections.namedtuple("InputSpec", ["dtype", "shape"])
"""A signature input: numpy dtype and shape (None for a free dimension, batch first)."""

SIGNATURE = "serving_default"
PATHS_HELP = ("POST /v1/models/<name>[/versions/<version>]:predict, GET /v1/models/<name>"
              "[/versions/<version>] or GET /monitoring/prometheus/metrics")


class RequestError(Exception):
    """A request the server refuses: HTTP status and a one-line message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


class ModelInputError(Exception):
    """The model itself rejected the values of a request (an id outside the vocab, say)."""


# -- requests -> arrays ------------------------------------------------------------

def describe_shape(shape, row_format):
    """'[batch, 16]' for a signature shape (None first), '[16]' per instance in rows."""
    dims = ["batch" if d is None and i == 0 else ("any" if d is None else str(d))
            for i, d in enumerate(shape)]
    return "[%s]" % ", ".join(dims[1:] if row_format else dims)


def input_array(name, values, spec, row_format):
    """`values` (nested JSON lists, batch first) as an array of the input's dtype.

    Raises RequestError(400) naming the input if they are ragged, of another
    kind (floats or strings for an integer input, say), out of the dtype's
    range, or of another shape.
    """
    expected = "%s of %s" % (describe_shape(spec.shape, row_format),
                             "strings" if spec.dtype == object else spec.dtype.name)
    where = "each instance's %r" % name if row_format else "input %r" % name
    if spec.dtype == object:
        return _string_array(values, spec, where, expected)
    try:
        array = np.asarray(values)
    except ValueError:
        array = None  # ragged: numpy refuses to build it
    if array is None or array.dtype == object:
        raise RequestError(400, "%s: expected %s; the values are ragged or not numbers"
                           % (where, expected))
    kind = spec.dtype.kind
    accepted = {"i": "iu", "u": "iu", "f": "iuf", "b": "b"}.get(kind, kind)
    if array.size and array.dtype.kind not in accepted:
        found = {"f": "numbers with a fraction", "U": "strings", "b": "booleans"}.get(
            array.dtype.kind, array.dtype.name)
        raise RequestError(400, "%s: expected %s, got %s" % (where, expected, found))
    if kind in "iu" and array.size:
        limits = np.iinfo(spec.dtype)
        if array.min() < limits.min or array.max() > limits.max:
            raise RequestError(400, "%s: values outside the range of %s"
                               % (where, spec.dtype.name))
    if array.ndim != len(spec.shape) or any(
            d is not None and d != got for d, got in zip(spec.shape, array.shape)):
        got = list(array.shape[1:] if row_format else array.shape)
        raise RequestError(400, "%s: expected %s, got shape %s" % (where, expected, got))
    return array.astype(spec.dtype)


def _string_array(values, spec, where, expected):
    """A tf.string input's JSON strings as an object array of UTF-8 bytes."""
    array = np.array(values, dtype=object) if isinstance(values, list) else None
    if array is None or array.ndim != len(spec.shape) or not all(
            isinstance(value, str) for value in array.ravel()):
        raise RequestError(400, "%s: expected %s" % (where, expected))
    return np.vectorize(lambda value: value.encode("utf-8"), otypes=[object])(array) \
        if array.size else array


def check_input_names(names, specs, where):
    """RequestError(400) if `names` lacks an input of the signature or has another."""
    wanted = ", ".join(sorted(specs))
    missing = sorted(set(specs) - set(names))
    if missing:
        raise RequestError(400, "%s: missing input %r (the model takes %s)"
                           % (where, missing[0], wanted))
    unknown = sorted(set(names) - set(specs))
    if unknown:
        raise RequestError(400, "%s: unknown input %r (the model takes %s)"
                           % (where, unknown[0], wanted))


def columns_of_instances(instances, specs):
    """Input name -> list of per-instance values, from the row format's 'instances'."""
    if not isinstance(instances, list) or not instances:
        raise RequestError(400, "'instances' must be a non-empty list")
    if len(specs) == 1 and not isinstance(instances[0], dict):
        return {next(iter(specs)): instances}  # a single input may be given bare
    for number, instance in enumerate(instances):
        if not isinstance(instance, dict):
            raise RequestError(400, "instance %d: expected an object with the inputs %s"
                               % (number, ", ".join(sorted(specs))))
        check_input_names(instance, specs, "instance %d" % number)
    return {name: [instance[name] for instance in instances] for name in specs}


def columns_of_inputs(inputs, specs):
    """Input name -> batch of values, from the columnar format's 'inputs'."""
    if not isinstance(inputs, dict):
        if len(specs) == 1:
            return {next(iter(specs)): inputs}
        raise RequestError(400, "'inputs' must be an object with the inputs %s"
                           % ", ".join(sorted(specs)))
    check_input_names(inputs, specs, "'inputs'")
    return dict(inputs)


def parse_predict_request(body, signatures, max_rows=None):
    """(signature name, features, num_rows, row_format) of a :predict body (bytes).

    signatures: signature name -> its input specs. features: input name ->
    array of the signature's dtype, batch first. Raises RequestError(400) for
    anything TensorFlow Serving would refuse, and RequestError(413) for more
    than `max_rows` rows (one request must not hold the model for minutes).
    """
    try:
        request = json.loads(body)
    except ValueError as e:  # UnicodeDecodeError is one too
        raise RequestError(400, "malformed JSON request body: %s" % e)
    except RecursionError:
        raise RequestError(400, "JSON request body nested too deeply")
    if not isinstance(request, dict):
        raise RequestError(400, "expected a JSON object with 'instances' (row format) or "
                           "'inputs' (columnar format)")
    signature = request.get("signature_name", SIGNATURE)
    if signature not in signatures:
        raise RequestError(400, "signature_name %r not found; this model has %s"
                           % (signature, ", ".join(repr(n) for n in sorted(signatures))))
    specs = signatures[signature]
    unknown = sorted(set(request) - {"signature_name", "instances", "inputs"})
    if unknown:
        raise RequestError(400, "unknown key %r in the request (expected 'instances' or "
                           "'inputs', and optionally 'signature_name')" % unknown[0])
    if ("instances" in request) == ("inputs" in request):
        raise RequestError(400, "expected exactly one of 'instances' (row format) or "
                           "'inputs' (columnar format)")
    row_format = "instances" in request
    columns = (columns_of_instances(request["instances"], specs) if row_format
               else columns_of_inputs(request["inputs"], specs))
    num_rows = _count_rows(columns, row_format)
    if max_rows and num_rows > max_rows:
        raise RequestError(413, "the request holds %d rows; at most %d per request "
                           "(--max_rows_per_request): send them in several requests"
                           % (num_rows, max_rows))
    features = {name: input_array(name, columns[name], specs[name], row_format)
                for name in sorted(specs)}
    sizes = {name: array.shape[0] if array.ndim else None for name, array in features.items()}
    if len(set(sizes.values())) != 1:
        raise RequestError(400, "the inputs have different batch sizes: %s" % ", ".join(
            "%s %s" % (name, size) for name, size in sorted(sizes.items())))
    num_rows = next(iter(sizes.values()))
    if not num_rows:
        raise RequestError(400, "the request holds no rows")
    return signature, features, num_rows, row_format


def _count_rows(columns, row_format):
    """The most rows any input claims, counted before any conversion (cheap)."""
    if row_format:
        return len(next(iter(columns.values())))
    return max((len(values) for values in columns.values() if isinstance(values, list)),
               default=0)


# -- arrays -> responses -----------------------------------------------------------

def json_values(array):
    """Nested lists of `array`'s values for JSON. float32 values keep their shortest
    repr ("0.5172819", not "0.5172818899154663"): the same number, half the bytes."""
    if array.dtype.kind == "f" or array.dtype.name == "bfloat16":
        array = array.astype(np.float32)
        shortest = np.array([float(str(value)) for value in array.ravel()], dtype=np.float64)
        return shortest.reshape(array.shape).tolist()
    if array.dtype.kind in "SO":
        return np.vectorize(lambda v: v.decode("utf-8", "replace") if isinstance(v, bytes)
                            else str(v), otypes=[object])(array).tolist()
    return array.tolist()


def predict_response(outputs, row_format):
    """TensorFlow Serving's answer for `outputs` (name -> array, batch first).

    Row format: {"predictions": [per-row dict of outputs]}, or a list of bare
    values when there is one output; columnar: {"outputs": {name: batch}}, or
    the bare batch for one output.
    """
    values = {name: json_values(outputs[name]) for name in sorted(outputs)}
    names = sorted(values)
    if not row_format:
        return {"outputs": values[names[0]] if len(names) == 1 else values}
    if len(names) == 1:
        return {"predictions": values[names[0]]}
    num_rows = len(values[names[0]])
    return {"predictions": [{name: values[name][row] for name in names}
                            for row in range(num_rows)]}


def model_status(version):
    """The GET /v1/models/<name> answer of TensorFlow Serving for one loaded version."""
    return {"model_version_status": [{
        "version": str(version), "state": "AVAILABLE",
        "status": {"error_code": "OK", "error_message": ""}}]}


def model_error_text(message):
    """The one informative line of a TensorFlow op error ("indices[0,3] = 99 is not in
    [0, 28)"), without the graph traceback and node names around it."""
    head = message.split("[[", 1)[0].split(" [Op:", 1)[0]
    lines = [line.strip() for line in head.splitlines() if line.strip()]
    return lines[-1] if lines else message.strip()


def split_rows(outputs, counts):
    """Cuts batch-first `outputs` (name -> array) into consecutive pieces of `counts` rows."""
    bounds = np.cumsum([0] + list(counts))
    return [{name: array[start:end] for name, array in outputs.items()}
            for start, end in zip(bounds[:-1], bounds[1:])]


# -- the model and the calls to it --------------------------------------------------

class Servable(object):
    """One loaded version of a SavedModel and its signatures (serving_default, and
    `text` where the export has it).

    Loaded as TensorFlow Serving loads it: the serving MetaGraph into a graph of
    its own, run by one session. `tf.saved_model.load` rebuilds every signature
    as a function pruned out of that graph, which took 3.8x the CPU (4.4 s
    against 1.1 s for a MiniLM export on a quiet 2-core AVX2 EPYC) for the same
    outputs at the same speed (92 examples/s either way, batches of 32 x 32).
    """

    def __init__(self, path, version):
        self.path = path
        self.version = version
        self._session = tf.compat.v1.Session(graph=tf.Graph())
        try:
            with self._session.graph.as_default():
                meta_graph = tf.compat.v1.saved_model.load(
                    self._session, [tf.saved_model.SERVING], path)
        except (OSError, RuntimeError, tf.errors.OpError, ValueError) as e:
            self._session.close()
            raise InputError("--model_base_path: %s: cannot load the SavedModel (%s)"
                             % (path, " ".join(str(e).split())[:300]))
        signatures = meta_graph.signature_def
        if SIGNATURE not in signatures:
            self._session.close()
            raise InputError("--model_base_path: %s has no %r signature (it has %s)"
                             % (path, SIGNATURE, ", ".join(sorted(signatures)) or "none"))
        self._input_tensors = {name: {input_name: info.name
                                      for input_name, info in signature.inputs.items()}
                               for name, signature in signatures.items()}
        self._output_tensors = {name: {output_name: info.name
                                       for output_name, info in signature.outputs.items()}
                                for name, signature in signatures.items()}
        self.specs = {name: {input_name: _input_spec(info)
                             for input_name, info in signature.inputs.items()}
                      for name, signature in signatures.items()}
        self.input_specs = self.specs[SIGNATURE]
        self._text = None if TEXT_SIGNATURE in signatures else python_text_signature(path)
        if self._text is not None:
            self.specs[TEXT_SIGNATURE] = {name: InputSpec(np.dtype(object), (None,))
                                          for name in self._text.inputs}

    def run(self, features, signature=SIGNATURE):
        """Output name -> array for `features` (name -> array); ModelInputError if the
        model rejects the values."""
        if signature == TEXT_SIGNATURE and self._text is not None:
            outputs = self.run(self._text.encode(features))
            rows = len(next(iter(features.values())))
            outputs["labels"] = np.array([self._text.labels] * rows, dtype=object)
            return outputs
        tensors = self._input_tensors[signature]
        try:
            return self._session.run(self._output_tensors[signature],
                                     {tensors[name]: array for name, array in features.items()})
        except tf.errors.InvalidArgumentError as e:
            raise ModelInputError(model_error_text(e.message))

    def warm_up(self):
        """One call on a row of zeros, so the first request does not pay for the
        session's first run."""
        self.run({name: np.zeros([1 if d is None else d for d in spec.shape], spec.dtype)
                  for name, spec in self.input_specs.items()})


def _input_spec(tensor_info):
    """The InputSpec of a signature input (a TensorInfo proto of the MetaGraph)."""
    return InputSpec(np.dtype(tf.dtypes.as_dtype(tensor_info.dtype).as_numpy_dtype),
                     tuple(tf.TensorShape(tensor_info.tensor_shape).as_list()))


PythonText = collections.namedtuple("PythonText", ["inputs", "labels", "encode"])
"""The `text` signature of an export without one in its graph: inputs (text_a[,
text_b]), labels (the label names), encode(features) -> serving_default's
features (features: name -> object array of UTF-8 bytes [batch])."""


def python_text_signature(version_dir):
    """The PythonText of an export whose serving_config.json names text inputs and a
    tokenizer file (a classifier or re-ranker of a family without WordPiece), else
    None."""
    extra = os.path.join(version_dir, export_layout.ASSETS_EXTRA)
    try:
        with open(os.path.join(extra, export_layout.SERVING_CONFIG_FILE),
                  encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return None  # no settings to tokenize by: serving_default alone
    inputs = config.get("text_inputs") if isinstance(config, dict) else None
    if not inputs or not config.get("tokenizer_file"):
        return None
    tokenizer = client.export_tokenizer(os.path.join(extra, export_layout.VOCAB_FILE), config)
    length = config["max_seq_length"]

    def encode(features):
        texts = [[value.decode("utf-8") for value in features[name]] for name in inputs]
        pairs = list(zip(texts[0], texts[1] if len(texts) > 1 else [None] * len(texts[0])))
        if config["task"] == "reranking":
            # A task's module pulls in TensorFlow, which this module has loaded already.
            from bert_toolkit.tasks.reranking import task as reranking
            arrays = reranking.encode_pairs(tokenizer, texts[0], texts[1],
                                            config["max_query_length"], length)
            return dict(zip(export_layout.SERVING_INPUTS, arrays))
        return client.encode(tokenizer, pairs, length)
    return PythonText(tuple(inputs), list(config["labels"]), encode)


def load_servable(base_path):
    """The Servable of the highest integer version under `base_path` (or of the
    version folder `base_path` itself)."""
    if not os.path.isdir(base_path):
        raise InputError("--model_base_path=%s: not a folder" % base_path)
    version, path = export_layout.resolve_version_dir(base_path)
    if version is None:
        raise InputError("--model_base_path=%s: the SavedModel folder's name is not an "
                         "integer version; TensorFlow Serving needs <base>/<version>/"
                         % base_path)
    return Servable(path, version)


class CallStats(object):
    """Counts of model calls, the requests and rows they served, and the largest call."""

    def __init__(self):
        self.calls = self.requests = self.rows = 0
        self.most_requests_in_a_call = self.most_rows_in_a_call = 0

    def record(self, num_requests, num_rows):
        self.calls += 1
        self.requests += num_requests
        self.rows += num_rows
        self.most_requests_in_a_call = max(self.most_requests_in_a_call, num_requests)
        self.most_rows_in_a_call = max(self.most_rows_in_a_call, num_rows)

    def prometheus_text(self):
        """The counts in Prometheus' text format."""
        lines = []
        for name, kind, value in (
                ("model_calls_total", "counter", self.calls),
                ("requests_total", "counter", self.requests),
                ("rows_total", "counter", self.rows),
                ("max_requests_per_call", "gauge", self.most_requests_in_a_call),
                ("max_rows_per_call", "gauge", self.most_rows_in_a_call)):
            lines += ["# TYPE bert_serving_%s %s" % (name, kind),
                      "bert_serving_%s %d" % (name, value)]
        return "\n".join(lines) + "\n"


class ModelCaller(object):
    """Runs model calls on a pool of threads, so the event loop keeps taking requests
    (and batches keep filling) while the model computes."""

    def __init__(self, run_fn, num_threads):
        self._run_fn = run_fn
        self._executor = concurrent.futures.ThreadPoolExecutor(
            num_threads, thread_name_prefix="model")
        self.stats = CallStats()

    async def call(self, features, num_requests, signature=SIGNATURE):
        loop = asyncio.get_running_loop()
        outputs = await loop.run_in_executor(self._executor, self._run_fn, features, signature)
        self.stats.record(num_requests, len(next(iter(features.values()))))
        return outputs

    def close(self):
        self._executor.shutdown(wait=True)


class DirectPredictor(object):
    """One model call per request (no batching)."""

    def __init__(self, caller):
        self.caller = caller

    def start(self):
        pass

    async def predict(self, features, num_rows, signature=SIGNATURE):
        return await self.caller.call(features, 1, signature)

    async def stop(self):
        pass


_Pending = collections.namedtuple("_Pending", ["features", "num_rows", "future", "arrived",
                                               "signature"])


class BatchingPredictor(object):
    """Gathers concurrent requests into model calls of up to `max_batch_size` rows.

    A batch closes when it is full, or `timeout` seconds after its first request
    arrived (a request that waited while every call slot was busy closes its
    batch at once). A request that would overflow the batch waits for the next;
    one larger than `max_batch_size` runs alone. At most `num_threads` calls run
    at once, and the next batch fills while they do.
    """

    def __init__(self, caller, max_batch_size, timeout, num_threads):
        self.caller = caller
        self._max_batch_size = max_batch_size
        self._timeout = timeout
        self._num_threads = num_threads

    def start(self):
        # asyncio objects belong to the running loop: made here, not in __init__.
        self._pending = collections.deque()
        self._arrived = asyncio.Event()
        self._slots = asyncio.Semaphore(self._num_threads)
        self._running = set()
        self._loop_task = asyncio.ensure_future(self._batch_loop())

    async def predict(self, features, num_rows, signature=SIGNATURE):
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.append(_Pending(features, num_rows, future, loop.time(), signature))
        self._arrived.set()
        return await future

    async def stop(self):
        self._loop_task.cancel()
        await asyncio.gather(self._loop_task, *self._running, return_exceptions=True)

    async def _batch_loop(self):
        while True:
            await self._slots.acquire()
            try:
                batch = await self._next_batch()
            except BaseException:
                self._slots.release()
                raise
            task = asyncio.ensure_future(self._run_batch(batch))
            self._running.add(task)  # a reference, or the task may be collected mid-way
            task.add_done_callback(self._running.discard)

    async def _wait_for_arrival(self, timeout=None):
        """True when a request arrived (or one is pending), False after `timeout`."""
        # The event is only a wake-up call: requests wait in the deque, so a
        # timeout racing an arrival loses nothing.
        self._arrived.clear()
        if self._pending:
            return True
        try:
            await asyncio.wait_for(self._arrived.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def _next_batch(self):
        while not self._pending:
            await self._wait_for_arrival()
        loop = asyncio.get_running_loop()
        batch = [self._pending.popleft()]
        rows = batch[0].num_rows
        deadline = batch[0].arrived + self._timeout
        while rows < self._max_batch_size:
            if self._pending:
                if (rows + self._pending[0].num_rows > self._max_batch_size
                        or self._pending[0].signature != batch[0].signature):
                    break
                batch.append(self._pending.popleft())
                rows += batch[-1].num_rows
                continue
            remaining = deadline - loop.time()
            if remaining <= 0 or not await self._wait_for_arrival(remaining):
                break
        return batch

    async def _run_batch(self, batch):
        try:
            await self._answer(batch)
        finally:
            self._slots.release()

    async def _answer(self, batch):
        """Runs `batch` in one call and hands each request its rows (or the error)."""
        try:
            features = {name: np.concatenate([p.features[name] for p in batch])
                        for name in batch[0].features}
            outputs = await self.caller.call(features, len(batch), batch[0].signature)
        except ModelInputError as e:
            if len(batch) == 1:
                _settle(batch[0].future, error=e)
                return
            # One request's bad values fail the whole call: run each alone, so
            # only that request gets the error (and its own row numbers).
            for pending in batch:
                await self._answer([pending])
            return
        except Exception as e:  # a bug or a broken model: every request learns of it
            for pending in batch:
                _settle(pending.future, error=e)
            return
        for pending, rows in zip(batch, split_rows(outputs, [p.num_rows for p in batch])):
            _settle(pending.future, result=rows)


def _settle(future, result=None, error=None):
    """Sets a request's result or error unless it was given up (client gone)."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


# -- HTTP -----------------------------------------------------------------------------

STATE = web.AppKey("state", dict)


def error_response(status, message):
    return web.json_response({"error": message}, status=status)


@web.middleware
async def json_errors(request, handler):
    """Every failure as {"error": "..."} with its status, as TensorFlow Serving answers."""
    try:
        return await handler(request)
    except RequestError as e:
        console.info("%s %s -> %d: %s", request.method, request.path, e.status, e.message)
        return error_response(e.status, e.message)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        if e.status == 404:
            message = "no such path %s; expected %s" % (request.path, PATHS_HELP)
        elif e.status == 405:
            message = "method %s is not allowed on %s" % (request.method, request.path)
        else:
            message = e.text or e.reason
        return error_response(e.status, message)
    except ModelInputError as e:
        return error_response(400, "the model rejected the input: %s" % e)
    except Exception as e:  # a bug: say so in the answer, keep the traceback in the log
        logging.exception("%s %s failed", request.method, request.path)
        return error_response(500, "internal error: %s: %s" % (type(e).__name__, e))


def check_model(state, name, version):
    """RequestError(404) unless /v1/models/<name>[/versions/<version>] is the loaded one."""
    servable = state["servable"]
    if name != state["model_name"]:
        raise RequestError(404, "Servable not found for request: %s(%s); this server serves "
                           "model %r" % ("Latest" if version is None else "Specific",
                                         name if version is None else "%s, %s" % (name, version),
                                         state["model_name"]))
    if version is not None and version != str(servable.version):
        raise RequestError(404, "Servable not found for request: Specific(%s, %s); the loaded "
                           "version is %d" % (name, version, servable.version))


async def read_body(request, max_bytes):
    """The request body, or RequestError(413) past `max_bytes`."""
    too_large = RequestError(413, "request body larger than --max_request_bytes=%d; send "
                             "fewer rows per request" % max_bytes)
    if request.content_length is not None and request.content_length > max_bytes:
        raise too_large
    try:
        return await request.read()  # aiohttp enforces client_max_size while reading
    except web.HTTPRequestEntityTooLarge:
        raise too_large
    except ConnectionError:
        # Nobody is left to answer; one log line, not a traceback.
        raise RequestError(400, "the client disconnected before sending the whole body")


async def handle_predict(request):
    state = request.app[STATE]
    check_model(state, request.match_info["name"], request.match_info.get("version"))
    body = await read_body(request, state["max_request_bytes"])
    signature, features, num_rows, row_format = parse_predict_request(
        body, state["servable"].specs, state["max_rows_per_request"])
    outputs = await state["predictor"].predict(features, num_rows, signature)
    return web.json_response(predict_response(outputs, row_format),
                             dumps=lambda value: json.dumps(value, separators=(",", ":")))


async def handle_status(request):
    state = request.app[STATE]
    check_model(state, request.match_info["name"], request.match_info.get("version"))
    return web.json_response(model_status(state["servable"].version))


async def handle_metrics(request):
    stats = request.app[STATE]["predictor"].caller.stats
    return web.Response(text=stats.prometheus_text(), content_type="text/plain")


def make_app(servable, model_name, predictor, max_request_bytes,
             max_rows_per_request=None):
    """The aiohttp application serving `servable` as /v1/models/<model_name>."""
    # aiohttp refuses bodies over client_max_size itself; one byte more than
    # ours, so that read_body's own 413 message is the one users see.
    app = web.Application(middlewares=[json_errors], client_max_size=max_request_bytes + 1)
    app[STATE] = {"servable": servable, "model_name": model_name, "predictor": predictor,
                  "max_request_bytes": max_request_bytes,
                  "max_rows_per_request": max_rows_per_request}
    model = "/v1/models/{name:[^/:]+}"
    version = model + "/versions/{version:[^/:]+}"
    app.router.add_post(model + ":predict", handle_predict)
    app.router.add_post(version + ":predict", handle_predict)
    app.router.add_get(model, handle_status)
    app.router.add_get(version, handle_status)
    app.router.add_get("/monitoring/prometheus/metrics", handle_metrics)
    return app


def listening_socket(host, port):
    """A bound socket for host:port (port 0: a free one); InputError if it cannot be."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as e:
        raise InputError("--host=%s --port=%d: cannot listen there (%s)"
                         % (host, port, e.strerror or e))
    return sock


def make_predictor(servable, options):
    if not options.enable_batching:
        return DirectPredictor(ModelCaller(servable.run, options.rest_api_num_threads))
    return BatchingPredictor(ModelCaller(servable.run, options.num_batch_threads),
                             options.max_batch_size,
                             options.batch_timeout_micros / 1e6,
                             options.num_batch_threads)


def describe_batching(options):
    if not options.enable_batching:
        return "batching off"
    return "batching on: max_batch_size %d, batch_timeout_micros %d, num_batch_threads %d" % (
        options.max_batch_size, options.batch_timeout_micros,
        options.num_batch_threads)


async def serve(servable, sock, options):
    """Serves until SIGINT or SIGTERM, then stops taking connections, answers the
    requests in flight and returns."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    predictor = make_predictor(servable, options)
    predictor.start()
    app = make_app(servable, options.model_name, predictor,
                   options.max_request_bytes, options.max_rows_per_request)
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=10.0)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    host, port = sock.getsockname()[:2]
    shown_host = "[%s]" % host if ":" in host else host
    print("serving model %r version %d from %s at http://%s:%d/v1/models/%s (%s)"
          % (options.model_name, servable.version, servable.path, shown_host, port,
             options.model_name, describe_batching(options)), flush=True)
    await stop.wait()
    console.info("stopping: answering the requests in flight, then exiting")
    await runner.cleanup()  # closes the listening socket first
    await predictor.stop()
    predictor.caller.close()
    console.info("stopped")


def _exit_quietly(signum, frame):
    sys.exit(0)


def run(options):
    """serving_server.py: serves ServerOptions.model_base_path until SIGINT/SIGTERM."""
    # Until the server runs, a stop request simply ends the process (exit 0);
    # serve() then answers SIGINT/SIGTERM by stopping cleanly.
    signal.signal(signal.SIGTERM, _exit_quietly)
    signal.signal(signal.SIGINT, _exit_quietly)
    sock = listening_socket(options.host, options.port)
    servable = load_servable(options.model_base_path)
    servable.warm_up()
    asyncio.run(serve(servable, sock, options))
