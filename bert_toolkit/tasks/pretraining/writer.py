"""create_pretraining_data.py's driver: documents in, TFRecord files out, streamed.

Reads the input files (one sentence per line, a blank line between
documents; UTF-8, a byte that is not is refused with its file and line),
groups the documents into shards, has worker processes turn each shard into
framed records (pretraining_data.ShardWorker) and writes them, in shard order,
round-robin over the output files. Memory stays bounded whatever the corpus
size, the output is the same for any number of workers, and the output files
appear only when complete.
"""

import contextlib
import multiprocessing
import os
import sys
import threading
import time

import numpy as np

from bert_toolkit import console, fileio, system
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


def _init_process(config):
    global _PROCESS_WORKER
    # Each process tokenizes on its own core: the Rust tokenizer's thread pool
    # would otherwise compete with the other workers.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _PROCESS_WORKER = ShardWorker(config)


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

    def __enter__(self):
        with self._stack as stack:
            for path in self.paths:
                # A folder made here goes again if the run fails: nothing is left.
                stack.enter_context(fileio.new_folders_removed_on_failure(
                    os.path.dirname(os.path.abspath(path))))
                temporary = stack.enter_context(fileio.atomic_path(path))
                self._files.append(stack.enter_context(fileio.open_file(temporary, "wb")))
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
                           progress_stream=None, start_line=None):
    """Streams the documents of `input_paths` into TFRecord files `output_paths`.

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
    local = ShardWorker(config) if num_workers == 1 else None
    if local is None:
        ShardWorker(config)  # the vocabulary's mistakes, raised here and not in a worker
    shards = enumerate(shard_documents(read_documents(input_paths), documents_per_shard,
                                       max_shard_chars))
    if start_line and progress_stream:
        progress_stream.write(start_line + "\n")
    progress = Progress(progress_stream)
    with _OutputFiles(output_paths) as out:
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
                              initargs=(config,)) as pool:
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
    num_workers = options.num_workers or system.available_cores()
    return write_pretraining_data(
        input_paths, output_paths, options.recipe(), num_workers=num_workers,
        documents_per_shard=options.documents_per_shard, progress_stream=sys.stderr,
        start_line="reading %d input file(s) with %d worker(s), writing %s"
        % (len(input_paths), num_workers, ", ".join(output_paths)))
