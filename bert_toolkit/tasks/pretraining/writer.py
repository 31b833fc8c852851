"""create_pretraining_data.py's driver: documents in, TFRecord (or hdf5) files out, streamed.

Reads the input files (one sentence per line, a blank line between
documents; UTF-8, a byte that is not is refused with its file and line),
groups the documents into shards, has worker processes turn each shard into
framed records (pretraining_data.ShardWorker) and writes them, in shard order,
round-robin over the output files. Memory stays bounded whatever the corpus
size, the output is the same for any number of workers, and the output files
appear only when complete.

With --output_format=hdf5 (or output files named *.hdf5 / *.h5) the same
instances, masked alike, are written as NVIDIA's hdf5 shards instead
(engine/hdf5_shards.py: the layout DeepLearningExamples' PyTorch BERT and
Distributed_BERT train on): the workers hand over arrays of rows rather than
framed records (Hdf5ShardWorker).
"""

import contextlib
import multiprocessing
import os
import sys
import threading
import time

import numpy as np

from bert_toolkit import console, fileio, system
from bert_toolkit.engine import hdf5_shards
from bert_toolkit.errors import InputError
from bert_toolkit.tasks.pretraining.data import ShardWorker

# -- reading documents ---------------------------------------------------------

# How much of each input file is read (and so checked) before the run starts.
_CHECKED_CHARACTERS = 1 << 20


def check_has_text(path):
    """Raises InputError unless `path` has a non-blank line and its first MiB or so
    is valid text: most bad inputs (a binary or mis-encoded file) stop the run
    before it prints or writes anything; a bad byte further on stops it when the
    stream reaches it. Checking a large corpus stays cheap."""
    has_text, read = False, 0
    for _, line in fileio.decoded_lines(path):
        has_text = has_text or bool(line.strip())
        read += len(line)
        if has_text and read >= _CHECKED_CHARACTERS:
            return
    if not has_text:
        raise InputError("--input_file: %s holds no documents (expected one sentence per "
                         "line, a blank line between documents)" % path)


def read_documents(paths):
    """Yields each document as a list of its stripped, non-empty lines.

    A blank line or the end of a file ends a document. One document at a time
    is held in memory. A byte that is not UTF-8 (or a NUL byte: a binary
    file) is an InputError naming the file and line, as the classifier's
    readers do: the original dropped such bytes silently.
    """
    for path in paths:
        document = []
        for _, line in fileio.decoded_lines(path):
            line = line.strip()
            if line:
                document.append(line)
            elif document:
                yield document
                document = []
        if document:
            yield document


def shard_documents(documents, documents_per_shard, max_shard_chars):
    """Groups a stream of documents into lists of at most `documents_per_shard`.

    A shard also closes once it holds `max_shard_chars` characters, which
    bounds the memory a worker needs whatever the document lengths. A final
    shard with fewer than half of `documents_per_shard` documents joins the
    one before it, so that its documents still have others to draw random
    next sentences from.
    """
    pending = None
    shard, chars = [], 0
    for document in documents:
        shard.append(document)
        chars += sum(len(line) for line in document)
        if len(shard) >= documents_per_shard or chars >= max_shard_chars:
            if pending is not None:
                yield pending
            pending, shard, chars = shard, [], 0
    if shard and pending is not None and len(shard) < documents_per_shard / 2.0:
        pending = pending + shard
        shard = []
    if pending is not None:
        yield pending
    if shard:
        yield shard


# -- the parallel, streaming driver -------------------------------------------------

_PROCESS_WORKER = None  # the ShardWorker of a worker process


def _init_process(config, worker_class=ShardWorker):
    global _PROCESS_WORKER
    # Each process tokenizes on its own core: the Rust tokenizer's thread pool
    # would otherwise compete with the other workers.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _PROCESS_WORKER = worker_class(config)


def _process_in_worker(task):
    shard_index, documents = task
    return _PROCESS_WORKER.process(shard_index, documents)


class Progress(object):
    """Documents and instances per second on stderr, at most every `interval` s."""

    def __init__(self, stream, interval=None, clock=None):
        self._clock = clock or time.time
        self._stream = stream
        self._is_tty = hasattr(stream, "isatty") and stream.isatty()
        self._interval = interval if interval is not None else (0.5 if self._is_tty else 10.0)
        self._start = self._last = self._clock()
        self.documents = self.instances = 0

    def add(self, documents, instances):
        self.documents += documents
        self.instances += instances
        now = self._clock()
        if now - self._last >= self._interval:
            self._last = now
            self._show(now, final=False)

    def line(self, now=None):
        """The console's progress line for a stream: documents, then instances."""
        elapsed = max((now or self._clock()) - self._start, 1e-9)
        return console.progress_line(
            "document", self.documents, None, self.documents / elapsed, "documents", elapsed,
            None, [("instances", "%d (%.0f/s)" % (self.instances, self.instances / elapsed))])

    def _show(self, now, final):
        if self._stream is None:
            return
        end = "\n" if final or not self._is_tty else ""
        self._stream.write(("\r" if self._is_tty else "") + self.line(now) + end)
        self._stream.flush()

    def finish(self):
        self._show(self._clock(), final=True)


class _OutputFiles(object):
    """Output files written under temporary names, renamed only when complete.

    Records go round-robin over the files, as in the original. On any failure
    the temporary files are removed (fileio.atomic_path), so a failed run
    leaves no output behind.
    """

    def __init__(self, paths):
        self.paths = list(paths)
        self._files = []
        self._stack = contextlib.ExitStack()
        self.count = 0

    def _open(self, temporary):
        """The context manager of one output file at its temporary path."""
        return fileio.open_file(temporary, "wb")

    def __enter__(self):
        with self._stack as stack:
            for path in self.paths:
                # A folder made here goes again if the run fails: nothing is left.
                stack.enter_context(fileio.new_folders_removed_on_failure(
                    os.path.dirname(os.path.abspath(path))))
                temporary = stack.enter_context(fileio.atomic_path(path))
                self._files.append(stack.enter_context(self._open(temporary)))
            self._stack = stack.pop_all()
        return self

    def write(self, blobs, record_lengths):
        """Appends framed records (`blobs`: bytes objects of whole records, laid
        end to end, `record_lengths` bytes each) to the files, round-robin."""
        if len(self._files) == 1:
            for blob in blobs:
                self._files[0].write(blob)
        else:
            view, ends = memoryview(b"".join(blobs)), np.cumsum(record_lengths)
            starts = ends - record_lengths
            n = len(self._files)
            for offset in range(n):
                first = (offset - self.count) % n
                self._files[offset].write(b"".join(
                    view[s:e] for s, e in zip(starts[first::n], ends[first::n])))
        self.count += len(record_lengths)

    def __exit__(self, exc_type, exc, tb):
        # Closes the files, then renames them (or removes them on an exception).
        return self._stack.__exit__(exc_type, exc, tb)


class _RowArrays(object):
    """ShardWorker's encoder for hdf5 output: the masked instances as NVIDIA's
    datasets (a dict of arrays per chunk of instances) instead of framed
    records; `records` passes them on with one count per instance."""

    @staticmethod
    def examples(input_ids, lengths, lengths_a, positions, labels, counts, is_random_next):
        del counts  # the unused slots are the zeros of positions and labels
        return hdf5_shards.instance_features(input_ids, lengths, lengths_a, positions,
                                             labels, is_random_next)

    @staticmethod
    def records(features):
        return features, np.ones(len(features["input_ids"]), dtype=np.int64)


class Hdf5ShardWorker(ShardWorker):
    """A ShardWorker whose shards come out as NVIDIA's hdf5 rows: the same
    instances, masked with the same draws, as the TFRecord records of the seed."""

    def __init__(self, config):
        super().__init__(config)
        self.encoder = _RowArrays()


class _Hdf5OutputFiles(_OutputFiles):
    """hdf5 shards written under temporary names, renamed only when complete;
    rows go round-robin over the files, as records do over TFRecord files."""

    def __init__(self, paths, max_seq_length, max_predictions_per_seq):
        super().__init__(paths)
        self._shape = (max_seq_length, max_predictions_per_seq)

    def _open(self, temporary):
        return hdf5_shards.ShardWriter(temporary, *self._shape)

    def write(self, chunks, record_lengths):
        """Appends `chunks` (dicts of NVIDIA's datasets, rows of instances) to the
        files, round-robin by instance."""
        del record_lengths
        n = len(self._files)
        for features in chunks:
            rows = len(features["input_ids"])
            for offset, writer in enumerate(self._files):
                first = (offset - self.count) % n
                writer.append({name: values[first::n] for name, values in features.items()})
            self.count += rows


def resolve_output_format(output_format, output_paths):
    """The format to write, "tfrecord" or "hdf5", for --output_format; auto: hdf5
    when every output file is named *.hdf5 / *.h5 / *.hdf, else TFRecord
    (InputError for a mix)."""
    if output_format != "auto":
        return output_format
    named = [path.lower().endswith(hdf5_shards.EXTENSIONS) for path in output_paths]
    if any(named) and not all(named):
        raise InputError("--output_file: %s: some files are named as hdf5 shards and some "
                         "not; name them alike or pass --output_format"
                         % ", ".join(output_paths))
    return "hdf5" if named and all(named) else "tfrecord"


def _bounded(iterable, semaphore):
    """Yields from `iterable`, taking `semaphore` before each item.

    multiprocessing.Pool reads its task iterator in a thread as fast as it
    can; the semaphore (released when a result is consumed) keeps only a few
    shards in flight, so memory stays bounded on any corpus size.
    """
    for item in iterable:
        semaphore.acquire()
        yield item


def write_pretraining_data(input_paths, output_paths, config, num_workers=1,
                           documents_per_shard=256, max_shard_chars=4_000_000,
                           progress_stream=None, start_line=None, output_format="tfrecord"):
    """Streams the documents of `input_paths` into TFRecord files `output_paths`
    (NVIDIA's hdf5 shards with output_format="hdf5").

    config: the recipe, an options.PretrainingDataConfig (checked when made).
    With num_workers > 1, shards are processed by that many processes; the
    records are written in shard order, so the output is the same for any
    num_workers. Returns the final `Progress` (documents and instances).
    Raises InputError for a missing or empty input, a bad vocabulary or
    flag value, before any output file exists; `start_line` goes to
    progress_stream once those checks have passed.
    """
    for path in output_paths:
        fileio.check_output_file(path, "output_file")
    for path in input_paths:
        check_has_text(path)
    worker_class = Hdf5ShardWorker if output_format == "hdf5" else ShardWorker
    local = worker_class(config) if num_workers == 1 else None
    if local is None:
        worker_class(config)  # the vocabulary's mistakes, raised here and not in a worker
    shards = enumerate(shard_documents(read_documents(input_paths), documents_per_shard,
                                       max_shard_chars))
    if start_line and progress_stream:
        progress_stream.write(start_line + "\n")
    progress = Progress(progress_stream)
    outputs = (_Hdf5OutputFiles(output_paths, config.max_seq_length,
                                config.max_predictions_per_seq)
               if output_format == "hdf5" else _OutputFiles(output_paths))
    with outputs as out:
        if local is not None:
            for index, documents in shards:
                kept, blobs, record_lengths = local.process(index, documents)
                out.write(blobs, record_lengths)
                progress.add(kept, len(record_lengths))
        else:
            # fork is the cheapest start, but unsafe once TensorFlow's threads
            # exist in this process (e.g. when called from a test or a notebook).
            method = "fork" if "tensorflow" not in sys.modules else "spawn"
            context = multiprocessing.get_context(method)
            in_flight = threading.BoundedSemaphore(2 * num_workers + 2)
            with context.Pool(num_workers, initializer=_init_process,
                              initargs=(config, worker_class)) as pool:
                for kept, blobs, record_lengths in pool.imap(_process_in_worker,
                                                             _bounded(shards, in_flight)):
                    in_flight.release()
                    out.write(blobs, record_lengths)
                    progress.add(kept, len(record_lengths))
        if progress.documents == 0:
            raise InputError("--input_file: %s hold(s) no documents (expected one sentence "
                             "per line, a blank line between documents)"
                             % ", ".join(input_paths))
    progress.finish()
    return progress


def run(options):
    """create_pretraining_data.py: the files of PretrainingDataOptions written; returns
    the final Progress."""
    input_paths = fileio.expand_patterns(options.input_file, "input_file")
    output_paths = [p.strip() for p in options.output_file.split(",") if p.strip()]
    output_format = resolve_output_format(options.output_format, output_paths)
    num_workers = options.num_workers or system.available_cores()
    return write_pretraining_data(
        input_paths, output_paths, options.recipe(), num_workers=num_workers,
        documents_per_shard=options.documents_per_shard, progress_stream=sys.stderr,
        start_line="reading %d input file(s) with %d worker(s), writing %s%s"
        % (len(input_paths), num_workers, ", ".join(output_paths),
           " (NVIDIA's hdf5 shards)" if output_format == "hdf5" else ""),
        output_format=output_format)
