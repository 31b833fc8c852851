"""Files and streams: line-numbered text reading, atomic writes, globs, chunks.

No TensorFlow.

Paths with a scheme (`gs://...`, `hdfs://...`) exist only through TensorFlow's
file systems, so for those alone `tf.io.gfile` is imported on first use; local
paths never load TensorFlow (worker processes fork cheaply and scripts that do
not train start fast).
"""

import codecs
import contextlib
import glob
import io
import json
import os

from bert_toolkit.errors import InputError, input_error


def is_remote(path):
    return "://" in str(path)


def _gfile():
    import tensorflow as tf  # remote file systems only (see the module docstring)
    return tf.io.gfile


def check_folder(path, flag_name):
    """InputError unless `path` (if given) is a folder or can be made one.

    Finds what would otherwise end in a traceback deep inside TensorFlow or
    the standard library: a path that is a file, or under a file, or where
    folders cannot be created. Creates nothing.
    """
    if not path or is_remote(path):
        return
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise InputError("--%s=%s is a file, expected a folder" % (flag_name, path))
        if not os.access(path, os.W_OK | os.X_OK):
            raise InputError("--%s=%s: no permission to write into it" % (flag_name, path))
        return
    problem = _why_not_creatable(path)
    if problem:
        raise InputError("--%s=%s cannot be created: %s" % (flag_name, path, problem))


def check_output_file(path, flag_name):
    """InputError unless the file `path` can be written (its folder made if need be)."""
    if not path or is_remote(path):
        return
    if os.path.isdir(path):
        raise InputError("--%s=%s is a folder, expected a file name" % (flag_name, path))
    problem = _why_not_creatable(path)
    if problem:
        raise InputError("--%s=%s cannot be written: %s" % (flag_name, path, problem))


def _why_not_creatable(path):
    """Why `path` cannot be created below its nearest existing ancestor, or None."""
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return "%s is a file" % parent
    if not os.access(parent, os.W_OK | os.X_OK) or parent.startswith(("/proc", "/sys")):
        return "no permission to write into %s" % parent
    return None


def open_file(path, mode="r", encoding="utf-8"):
    """A file object of a local or remote path; text modes decode as `encoding`."""
    if is_remote(path):
        handle = _gfile().GFile(path, mode.replace("b", "") + "b")
        if "b" in mode:
            return handle
        return io.TextIOWrapper(handle, encoding=encoding)
    if "b" in mode:
        return open(path, mode)
    return open(path, mode, encoding=encoding, newline="")


def makedirs(path):
    if is_remote(path):
        _gfile().makedirs(path)
    elif path:
        os.makedirs(path, exist_ok=True)


def exists(path):
    return _gfile().exists(path) if is_remote(path) else os.path.exists(path)


def remove_quietly(path):
    """Removes `path` if it is there; used in clean-up after another failure."""
    try:
        if is_remote(path):
            _gfile().remove(path)
        else:
            os.remove(path)
    except Exception:  # noqa: BLE001 - best effort, the original error matters more
        pass


@contextlib.contextmanager
def atomic_path(path):
    """Yields a temporary path beside `path`; renamed to `path` only on success.

    On any exception the temporary file is removed, so readers never see a
    half-written file and a failed run leaves nothing behind. The process id in
    the temporary name keeps two writers from sharing one.
    """
    temporary = "%s.partial-%d" % (path, os.getpid())
    try:
        yield temporary
        if is_remote(path):
            _gfile().rename(temporary, path, overwrite=True)
        else:
            os.replace(temporary, path)
    except BaseException:
        remove_quietly(temporary)
        raise


def write_text_atomically(path, text):
    """Writes `text` (UTF-8) to `path` through a temporary file and a rename."""
    with atomic_path(path) as temporary:
        with open_file(temporary, "w") as f:
            f.write(text)


def expand_patterns(patterns, flag_name):
    """Files of the comma-separated globs in `patterns`, in the order given.

    Matches of one pattern are sorted, so the order (and whatever is made from
    it) does not depend on the file system. InputError naming --flag_name and
    the pattern if one matches nothing, or if there are no patterns.
    """
    paths = []
    for pattern in [p.strip() for p in (patterns or "").split(",") if p.strip()]:
        if is_remote(pattern):
            matches = sorted(_gfile().glob(pattern))
        else:
            matches = sorted(p for p in glob.glob(pattern) if os.path.isfile(p))
        if not matches:
            what = "matches no file" if any(c in pattern for c in "*?[") else "no such file"
            raise InputError("--%s: %s: %s" % (flag_name, pattern, what))
        paths.extend(matches)
    if not paths:
        raise InputError("--%s is empty; expected comma-separated files or globs" % flag_name)
    return paths


def check_encoding(encoding):
    """Returns the codec name; line-by-line decoding needs b"\\n" to mean newline."""
    try:
        name = codecs.lookup(encoding).name
    except (LookupError, TypeError):
        raise InputError("--encoding: unknown encoding %r" % (encoding,))
    if name == "utf-8-sig":
        name = "utf-8"  # the BOM is skipped anyway
    if "\n".encode(name) != b"\n" or "a,\t\"{".encode(name) != b"a,\t\"{":
        raise InputError("--encoding: %s is not supported; it must be ASCII-compatible such "
                         "as utf-8, latin-1 or cp1252 (re-save the file as UTF-8)" % name)
    return name


def _open_for_reading(path):
    try:
        return open_file(path, "rb")
    except FileNotFoundError:
        raise input_error(path, None, "file not found")
    except IsADirectoryError:
        raise input_error(path, None, "is a directory, expected a data file")
    except OSError as e:
        raise input_error(path, None, "cannot read the file: %s" % (e.strerror or e))


def decoded_lines(path, encoding="utf-8"):
    """Yields (line_number, text) for each line of a file, line ending kept.

    Lines are split on b"\\n" before decoding so an undecodable byte is
    reported with its line and byte offset (one InputError line, never a
    silently dropped byte); a UTF-8 byte-order mark is skipped.
    """
    encoding = check_encoding(encoding)
    with _open_for_reading(path) as handle:
        offset = 0
        line_number = 0
        while True:
            try:
                raw = handle.readline()
            except OSError as e:
                raise input_error(path, line_number + 1,
                                  "cannot read the file: %s" % (e.strerror or e))
            if not raw:
                return
            line_number += 1
            start = 0
            if line_number == 1 and encoding == "utf-8" and raw.startswith(codecs.BOM_UTF8):
                start = len(codecs.BOM_UTF8)
            if b"\0" in raw:
                raise input_error(path, line_number, "a NUL byte at byte %d of the line: this "
                                  "looks like a binary file, expected text"
                                  % (raw.index(b"\0") + 1))
            try:
                text = raw[start:].decode(encoding)
            except UnicodeDecodeError as e:
                bad = start + e.start
                raise input_error(
                    path, line_number,
                    "not valid %s: byte 0x%02x at byte offset %d of the file (byte %d "
                    "of the line); save the file as %s" % (
                        encoding, raw[bad], offset + bad, bad + 1, encoding))
            offset += len(raw)
            yield line_number, text


def non_blank_lines(path, encoding="utf-8"):
    """Yields (line_number, text without its line ending) of the non-blank lines."""
    for line_number, text in decoded_lines(path, encoding):
        text = text.rstrip("\r\n")
        if text.strip():
            yield line_number, text


def chunks(items, size):
    """Yields lists of up to `size` consecutive items of the iterable `items`."""
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def write_results(results, output_dir, name):
    """Writes a flat dict as output_dir/<name>.json and as `key = value` lines in
    output_dir/<name>.txt (the layout of Google's eval_results.txt), atomically."""
    payload = {k: (v.item() if hasattr(v, "item") else v) for k, v in results.items()}
    write_text_atomically(os.path.join(output_dir, name + ".json"),
                          json.dumps(payload, indent=2, sort_keys=True) + "\n")
    write_text_atomically(os.path.join(output_dir, name + ".txt"),
                          "".join("%s = %s\n" % (k, payload[k]) for k in sorted(payload)))


@contextlib.contextmanager
def new_folders_removed_on_failure(folder):
    """Makes `folder` (and missing parents); if the block then fails, removes the
    folders it made that are still empty, so a failed run leaves no trace."""
    missing = []
    if not is_remote(folder):
        path = os.path.abspath(folder)
        while not os.path.exists(path):
            missing.append(path)
            path = os.path.dirname(path)
    makedirs(folder)
    try:
        yield
    except BaseException:
        for path in missing:  # deepest first
            try:
                os.rmdir(path)
            except OSError:
                break  # not empty (or gone): keep it and its parents
        raise


def count_lines(path, block_size=1 << 20):
    """Lines of a local file, counting a last line without a newline; None for a
    remote one (not worth reading twice). Reads blocks, whatever the size."""
    if is_remote(path):
        return None
    count, last = 0, b"\n"
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(block_size), b""):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")
