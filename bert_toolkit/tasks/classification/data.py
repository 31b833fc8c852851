"""Data processors for sentence and sentence-pair classification.

A processor turns the files of one task into a list of `InputExample`s and
tells which labels exist. `run_custom_classifier.py` picks one by
`--task_name` through `get_processor`. Nothing here needs TensorFlow.

Tasks
-----
Unless noted, files are tab-separated with a header line and are read with
quoting disabled (a `"` is an ordinary character), as GLUE expects. Columns of
files with a header are found by their header name, or at the position Google's
readers use when the header lacks the name. Rows of test files carry no
label: their examples have ``label=None``.

========  ==================================================================
cola      train.tsv, dev.tsv without header: source, label, original
          judgement, sentence. test.tsv with header: index, sentence.
          Labels 0, 1.
mnli      train.tsv, dev_matched.tsv, test_matched.tsv; columns sentence1,
          sentence2, gold_label (positions 8, 9 and the last one when the
          header lacks those names). Labels contradiction, entailment,
          neutral. `get_dev_examples` gives the matched dev set;
          `get_dev_mismatched_examples` and `get_test_mismatched_examples`
          read dev_mismatched.tsv and test_mismatched.tsv.
mnli-mm   The same processor, but its dev and test sets are the mismatched
          ones, so evaluation and prediction run on them unchanged.
mrpc      train.tsv, dev.tsv: Quality, #1 ID, #2 ID, #1 String, #2 String;
          test.tsv has index in place of Quality. Labels 0, 1.
xnli      The layout of the original BERT release: train is
          multinli/multinli.train.<language>.tsv (premise, hypo, label;
          "contradictory" is read as "contradiction"), dev is xnli.dev.tsv
          and test xnli.test.tsv (language, gold_label, ..., sentence1,
          sentence2, ...) keeping only the rows of the language. Option
          `language`, default "zh". Labels contradiction, entailment,
          neutral.
qqp       id, qid1, qid2, question1, question2, is_duplicate; test.tsv: id,
          question1, question2. Labels 0, 1.
sst-2     sentence, label; test.tsv: index, sentence. Labels 0, 1.
rte       index, sentence1, sentence2, label. Labels entailment,
          not_entailment.
qnli      index, question, sentence, label. Labels as rte.
custom    Your own files, described by options (below).
========  ==================================================================

Example ids (`guid`) are "<set>-<n>" with n counting the examples of the file
from 0 ("train-12"); the custom task uses the values of `--id_column` instead
when it is given, so predictions can be joined back to your rows.

The custom task
---------------
Every option is a keyword of `get_processor("custom", ...)` and is meant to be
the command-line flag of the same name:

- `train_file`, `dev_file`, `test_file`: paths, relative to the data dir
  unless absolute. Defaults: train.<ext>, dev.<ext>, test.<ext> in the data
  dir, where <ext> comes from `file_format`, or, without it, is whichever of
  tsv, csv, jsonl exists.
- `file_format`: tsv (tab-separated, no quoting, like GLUE), csv (commas and
  standard double-quote quoting, so fields may hold commas and newlines) or
  jsonl (one JSON object per line). Inferred from each file's extension when
  not given (.tsv, .csv, .jsonl or .ndjson).
- `text_a_column` (required), `text_b_column` (for sentence pairs),
  `label_column` (required for train and dev), `id_column`: a header name or
  a 0-based index (negative counts from the end) for tsv/csv, a key for
  jsonl.
- `has_header` (tsv/csv, default true): whether the first line names the
  columns. Columns given by name need it.
- `labels`: the label set, comma-separated. Without it the set is the sorted
  unique labels of the training file, remembered by the processor so dev and
  test use the same one; call `get_labels(data_dir)` to infer it before
  reading any file.
- `multi_label` (default false): each row has zero or more labels, joined by
  `label_separator` (default "|"); a jsonl label may also be a JSON list.
  Labels are then tuples of strings.
- `encoding` (default utf-8; a byte-order mark is skipped). Other encodings
  must be ASCII-compatible (latin-1, cp1252, ...).

Test files must have the columns of the training file, but their label
column may be missing or hold anything: test labels are never read.

Texts are stripped of surrounding whitespace. An empty `text_a` is an error
in the custom task; an empty `text_b` is allowed (it becomes ""). GLUE files
are taken as published and may have empty texts. Wholly blank lines are not
rows and are passed over; every other bad row is an `errors.InputError` whose
one-line message names the file and line.

Adding a processor
------------------
Subclass `DataProcessor` and register it under a task name; it must be
imported before `get_processor` is called::

    import os
    from bert_toolkit.tasks.classification import data as cd

    @cd.register_processor("spam")
    class SpamProcessor(cd.DataProcessor):
        def get_train_examples(self, data_dir):
            return self._read(os.path.join(data_dir, "spam_train.tsv"), "train")

        def get_dev_examples(self, data_dir):
            return self._read(os.path.join(data_dir, "spam_dev.tsv"), "dev")

        def get_test_examples(self, data_dir):
            return self._read(os.path.join(data_dir, "spam_test.tsv"), "test")

        def get_labels(self, data_dir=None):
            return ["ham", "spam"]

        def _read(self, path, set_name):
            return [cd.InputExample("%s-%d" % (set_name, i), fields[1], label=fields[0])
                    for i, (_, fields) in enumerate(cd.read_delimited(path, "\\t"))]
"""

import csv
import dataclasses
import inspect
import json
import os
import re
from typing import Optional, Tuple, Union

from bert_toolkit import errors, fileio
from bert_toolkit.errors import check_labels, input_error, show, show_list

# Training files of a few hundred MB are normal; reading them must not hold
# more than one line of raw text at a time, and csv's default limit of 128K
# characters per field would reject long documents.
_FIELD_SIZE_LIMIT = 2 ** 31 - 1


@dataclasses.dataclass(frozen=True)
class InputExample:
    """One example: its id, one or two texts and its label.

    `label` is a string for single-label tasks, a tuple of strings for
    multi-label tasks and None for unlabeled (test) data.
    """
    guid: str
    text_a: str
    text_b: Optional[str] = None
    label: Union[None, str, Tuple[str, ...]] = None


# ---------------------------------------------------------------------------
# Messages


def _parse_bool(value, flag):
    """True/False from a bool or a string such as "true", "0", "no"."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "t", "yes", "y"):
        return True
    if text in ("0", "false", "f", "no", "n"):
        return False
    raise errors.InputError("--%s must be true or false, got %s" % (flag, show(value)))


# ---------------------------------------------------------------------------
# Reading files


def read_delimited(path, delimiter, quotechar=None, encoding="utf-8"):
    """Yields (line_number, fields) for each record of a delimited text file.

    `quotechar` None reads with quoting disabled (csv.QUOTE_NONE, the GLUE
    convention); otherwise fields may be quoted with it and then hold
    delimiters and newlines. `line_number` is the 1-based line on which the
    record starts. Blank lines are passed over; the header, if any, is
    yielded like any other record. Windows line endings are fine.

    Raises errors.InputError naming the file and line for a missing or
    unreadable file, bytes that are not `encoding`, and malformed quoting.
    """
    csv.field_size_limit(max(csv.field_size_limit(), _FIELD_SIZE_LIMIT))
    lines = (text for _, text in fileio.decoded_lines(path, encoding))
    if quotechar is None:
        reader = csv.reader(lines, delimiter=delimiter, quoting=csv.QUOTE_NONE)
    else:
        # strict makes an unclosed quote an error instead of a field that
        # silently swallows the rest of the file.
        reader = csv.reader(lines, delimiter=delimiter, quotechar=quotechar,
                            quoting=csv.QUOTE_MINIMAL, strict=True)
    last_line = 0
    while True:
        start_line = last_line + 1
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise input_error(path, start_line, _explain_csv_error(e, quotechar))
        last_line = reader.line_num
        if fields:
            yield start_line, fields


def _explain_csv_error(error, quotechar):
    message = str(error)
    if "new-line character seen in unquoted field" in message:
        return ("a carriage return (\\r) inside a line; convert the file's line endings "
                "to \\n or \\r\\n")
    if "unexpected end of data" in message:
        return "a quoted field starting here is never closed (missing %s)" % quotechar
    if "expected after" in message:
        return ("malformed quoting: a closing %s must be followed by the delimiter "
                "(write %s%s for a literal quote)" % (quotechar, quotechar, quotechar))
    return "malformed record: %s" % message


# ---------------------------------------------------------------------------
# Columns and records


@dataclasses.dataclass(frozen=True)
class _Column:
    """Where a field is: by header `name`, by 0-based `index`, or by name
    falling back to index when the header lacks the name. `flag` names the
    option that chose it, for messages."""
    name: Optional[str] = None
    index: Optional[int] = None
    flag: Optional[str] = None

    def describe(self, field=None):
        what = show(self.name) if self.name is not None else "index %d" % self.index
        if self.flag:
            return "%s (--%s)" % (what, self.flag)
        return "%s (%s)" % (what, field) if field else what


def _parse_column(value, flag):
    """A _Column from a flag value: an int or digit string is an index, else a name."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise errors.InputError("--%s must be a column name or index, got %s" % (flag, value))
    if isinstance(value, int):
        return _Column(index=value, flag=flag)
    text = str(value).strip()
    if not text:
        raise errors.InputError("--%s is empty; give a column name or a 0-based index" % flag)
    if re.fullmatch(r"-?[0-9]+", text):
        return _Column(index=int(text), flag=flag)
    return _Column(name=text, flag=flag)


def _resolve_column(column, field, header, width, path, line_number):
    """The index of `column` (read as `field`) in rows of `width` fields."""
    described = column.describe(field)
    if column.name is not None and header is not None:
        positions = [i for i, name in enumerate(header) if name.strip() == column.name]
        if len(positions) > 1:
            raise input_error(path, line_number, "column %s appears %d times in the header"
                              % (described, len(positions)))
        if positions:
            return positions[0]
        if column.index is None:
            raise input_error(path, line_number, "no column %s in the header; columns: %s"
                              % (described, show_list(h.strip() for h in header)))
    elif column.index is None:
        raise input_error(path, line_number, "column %s is given by name but the file "
                          "has no header line; give a 0-based index or set --has_header"
                          % described)
    if not -width <= column.index < width:
        raise input_error(path, line_number, "column %s is out of range: rows have %d "
                          "columns (indices 0 to %d)" % (described, width, width - 1))
    return column.index % width


def _delimited_records(path, columns, has_header, delimiter, quotechar=None,
                       encoding="utf-8"):
    """Yields (line_number, {field: text}) picking `columns` ({field: _Column}).

    Every row must have as many fields as the header (or, without one, as
    the first row).
    """
    header = None
    indices = None
    width = None
    first_line = None
    for line_number, fields in read_delimited(path, delimiter, quotechar, encoding):
        if indices is None:
            width, first_line = len(fields), line_number
            if has_header:
                header = fields
            indices = {field: _resolve_column(column, field, header, width, path,
                                              line_number)
                       for field, column in columns.items()}
            _check_distinct(columns, indices, path, line_number)
            if has_header:
                continue
        if len(fields) != width:
            raise input_error(path, line_number, "expected %d fields (as on line %d), got %d%s"
                              % (width, first_line, len(fields),
                                  _field_count_hint(delimiter, quotechar)))
        yield line_number, {field: fields[i] for field, i in indices.items()}


def _field_count_hint(delimiter, quotechar):
    if delimiter == "\t":
        return "; is there a tab inside a text?"
    if quotechar is not None:
        return "; quote fields that contain %s" % show(delimiter)
    return ""


def _check_distinct(columns, indices, path, line_number):
    """Two roles reading one column is always a mistake in the options."""
    owner = {}
    for field, index in indices.items():
        if index in owner:
            raise input_error(path, line_number, "columns %s and %s are the same column"
                              % (columns[owner[index]].describe(owner[index]),
                                  columns[field].describe(field)))
        owner[index] = field


def _jsonl_records(path, keys, encoding="utf-8"):
    """Yields (line_number, {field: value}) picking `keys` ({field: (key, flag)})."""
    for line_number, text in fileio.decoded_lines(path, encoding):
        text = text.strip()
        if not text:
            continue
        try:
            record = json.loads(text)
        except ValueError as e:
            raise input_error(path, line_number, "not valid JSON (%s); each line must "
                              "hold one JSON object" % getattr(e, "msg", e))
        if not isinstance(record, dict):
            raise input_error(path, line_number, "expected a JSON object, got %s"
                              % type(record).__name__)
        values = {}
        for field, (key, flag) in keys.items():
            if key not in record:
                raise input_error(path, line_number, "no key %s (--%s); keys: %s"
                                  % (show(key), flag, show_list(record)))
            values[field] = record[key]
        yield line_number, values


# ---------------------------------------------------------------------------
# Records to examples


def _text_value(value, field, path, line_number, may_be_empty):
    """The stripped text of a field; None (JSON null) counts as empty."""
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise input_error(path, line_number, "%s must be a string, got %s"
                          % (field, show(value)))
    value = value.strip()
    if not value and not may_be_empty:
        raise input_error(path, line_number, "%s is empty" % field)
    return value


def _scalar_label(value, path, line_number):
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise input_error(path, line_number, "a label must be a string or an integer, got %s"
                          % show(value))
    return str(value).strip()


def _label_value(value, multi_label, separator, path, line_number):
    """A label string, or for multi-label a tuple of distinct label strings."""
    if not multi_label:
        if isinstance(value, list):
            raise input_error(path, line_number, "expected one label, got a list "
                              "(set --multi_label for several labels per example)")
        label = _scalar_label(value, path, line_number)
        if not label:
            raise input_error(path, line_number, "the label is empty")
        return label
    if isinstance(value, list):
        parts = [_scalar_label(v, path, line_number) for v in value]
    else:
        parts = _scalar_label(value, path, line_number).split(separator)
    # An empty list is a real answer in multi-label data: none of the labels.
    return tuple(dict.fromkeys(p.strip() for p in parts if p.strip()))


def _build_examples(path, set_name, records, labels=None, labels_origin="",
                    multi_label=False, label_separator="|", empty_text_a=False,
                    label_map=None):
    """InputExamples from (line_number, {field: value}) records.

    Fields: text_a, and optionally text_b, label (read when present) and id
    (used as guid). `labels` None accepts any label (for inferring the set).
    """
    examples = []
    id_lines = {}
    for line_number, values in records:
        text_a = _text_value(values["text_a"], "text_a", path, line_number, empty_text_a)
        text_b = None
        if "text_b" in values:
            text_b = _text_value(values["text_b"], "text_b", path, line_number, True)
        label = None
        if "label" in values:
            label = _label_value(values["label"], multi_label, label_separator,
                                 path, line_number)
            if label_map:
                label = label_map.get(label, label)
            if labels is not None:
                check_labels(label if multi_label else (label,), labels, labels_origin,
                             path, line_number)
        if "id" in values:
            raw_id = values["id"]
            if isinstance(raw_id, int) and not isinstance(raw_id, bool):
                raw_id = str(raw_id)  # jsonl ids are often numbers
            guid = _text_value(raw_id, "the id", path, line_number, False)
            if guid in id_lines:
                raise input_error(path, line_number, "id %s already used on line %d"
                                  % (show(guid), id_lines[guid]))
            id_lines[guid] = line_number
        else:
            guid = "%s-%d" % (set_name, len(examples))
        examples.append(InputExample(guid, text_a, text_b, label))
    if not examples:
        raise input_error(path, None, "no examples: the file is empty or has only a header")
    return examples


# ---------------------------------------------------------------------------
# Processors and their registry


class DataProcessor:
    """Reads the examples of one task; subclass it for your own data.

    Override the three get_*_examples methods and get_labels. Examples of
    test sets have label None.
    """

    is_multi_label = False

    def get_train_examples(self, data_dir):
        """The training examples in `data_dir`."""
        raise NotImplementedError()

    def get_dev_examples(self, data_dir):
        """The evaluation examples in `data_dir`."""
        raise NotImplementedError()

    def get_test_examples(self, data_dir):
        """The prediction examples in `data_dir` (labels None)."""
        raise NotImplementedError()

    def get_labels(self, data_dir=None):
        """The list of labels; their order fixes the class ids."""
        raise NotImplementedError()

    @classmethod
    def _read_tsv(cls, input_file, quotechar=None):
        """All records of a TSV file as lists of fields, for ported processors."""
        return [fields for _, fields in read_delimited(input_file, "\t", quotechar)]


PROCESSORS = {}


def register_processor(name):
    """Class decorator: makes a DataProcessor subclass the task `name` (any case)."""
    key = name.strip().lower()
    if not key:
        raise ValueError("a task name must not be empty")

    def register(cls):
        if not (isinstance(cls, type) and issubclass(cls, DataProcessor)):
            raise TypeError("%r is not a DataProcessor subclass" % (cls,))
        existing = PROCESSORS.get(key)
        # The same class seen again (a re-imported module) simply replaces itself.
        same = existing is not None and (existing.__module__, existing.__qualname__) == (
            cls.__module__, cls.__qualname__)
        if existing is not None and not same:
            raise ValueError("task %r is already registered to %s" % (key, existing.__name__))
        PROCESSORS[key] = cls
        return cls

    return register


def find_processor_class(task_name, module):
    """A processor class of `module` named as Google's users name theirs: the task name
    plus "Processor", in any case ("spam" -> SpamProcessor), or None."""
    wanted = re.sub(r"[^0-9a-z]", "", str(task_name).lower()) + "processor"
    for name, value in vars(module).items():
        if name.lower() == wanted and isinstance(value, type) and all(
                hasattr(value, method) for method in ("get_train_examples",
                                                      "get_dev_examples",
                                                      "get_test_examples", "get_labels")):
            return value
    return None


def labels_of(processor, data_dir):
    """processor.get_labels(data_dir), or get_labels() for a processor written for
    Google's run_classifier.py (whose get_labels takes no data_dir)."""
    parameters = inspect.signature(processor.get_labels).parameters
    if parameters:
        return processor.get_labels(data_dir)
    return processor.get_labels()


def get_processor(task_name, **options):
    """A new processor for `task_name` (case-insensitive) built with `options`.

    Options whose value is None are left out, so a caller may pass every
    flag and unset ones fall back to the processor's defaults. Raises
    errors.InputError for an unknown task or an option the task does not take.
    """
    key = str(task_name).strip().lower()
    if key not in PROCESSORS:
        raise errors.InputError("--task_name: unknown task %s; known tasks: %s (yours: "
                                "--processor_module with a %sProcessor class)"
                                % (show(task_name), ", ".join(sorted(PROCESSORS)),
                                   re.sub(r"[^0-9a-z]", "", key).capitalize()))
    cls = PROCESSORS[key]
    options = {k: v for k, v in options.items() if v is not None}
    parameters = inspect.signature(cls).parameters.values()
    if not any(p.kind == p.VAR_KEYWORD for p in parameters):
        accepted = {p.name for p in parameters}
        unknown = sorted(set(options) - accepted)
        if unknown:
            raise errors.InputError("the %s task takes no option %s%s" % (
                key, ", ".join("--" + u for u in unknown),
                "; its options: " + ", ".join("--" + a for a in sorted(accepted))
                if accepted else ""))
    return cls(**options)


class _GlueProcessor(DataProcessor):
    """A task of fixed-layout TSV files read with quoting disabled.

    Subclasses set LABELS, FILES ({split: file name}), HEADERLESS (splits
    whose file has no header) and the columns as (header name, position), the
    position being the one Google's readers use: it serves files without
    header, and files whose header lacks the name (Google's readers read by
    position and skip the header whatever it says). TEST_COLUMNS overrides
    columns of the test files, whose layout differs in some tasks.
    """

    LABELS = ()
    FILES = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}
    HEADERLESS = frozenset()
    TEXT_A = None
    TEXT_B = None
    LABEL = None
    TEST_COLUMNS = {}
    POSITION_FALLBACK = True
    LABEL_MAP = None

    def get_train_examples(self, data_dir):
        return self._read_split(data_dir, "train")

    def get_dev_examples(self, data_dir):
        return self._read_split(data_dir, "dev")

    def get_test_examples(self, data_dir):
        return self._read_split(data_dir, "test")

    def get_labels(self, data_dir=None):
        return list(self.LABELS)

    def _column(self, spec, has_header):
        name, position = spec
        if not has_header:
            return _Column(index=position)
        return _Column(name=name, index=position if self.POSITION_FALLBACK else None)

    def _columns(self, split, has_header):
        specs = {"text_a": self.TEXT_A}
        if self.TEXT_B is not None:
            specs["text_b"] = self.TEXT_B
        if not split.startswith("test"):
            specs["label"] = self.LABEL
        else:
            specs.update(self.TEST_COLUMNS)
        return {field: self._column(spec, has_header) for field, spec in specs.items()}

    def _read_split(self, data_dir, split):
        path = os.path.join(data_dir, self.FILES[split])
        has_header = split not in self.HEADERLESS
        records = _delimited_records(path, self._columns(split, has_header), has_header, "\t")
        return _build_examples(path, split, records, labels=self.LABELS,
                               labels_origin="of the %s task" % self.task_name(),
                               empty_text_a=True, label_map=self.LABEL_MAP)

    @classmethod
    def task_name(cls):
        names = [name for name, c in PROCESSORS.items() if c is cls]
        return names[0] if names else cls.__name__


@register_processor("cola")
class ColaProcessor(_GlueProcessor):
    """CoLA: is the sentence grammatical (1) or not (0)."""
    LABELS = ("0", "1")
    HEADERLESS = frozenset(["train", "dev"])
    TEXT_A = ("sentence", 3)
    LABEL = ("label", 1)
    TEST_COLUMNS = {"text_a": ("sentence", 1)}


@register_processor("mnli")
class MnliProcessor(_GlueProcessor):
    """MultiNLI; dev and test are the matched sets."""
    LABELS = ("contradiction", "entailment", "neutral")
    FILES = {"train": "train.tsv",
             "dev": "dev_matched.tsv", "test": "test_matched.tsv",
             "dev_mismatched": "dev_mismatched.tsv", "test_mismatched": "test_mismatched.tsv"}
    TEXT_A = ("sentence1", 8)
    TEXT_B = ("sentence2", 9)
    LABEL = ("gold_label", -1)

    def get_dev_mismatched_examples(self, data_dir):
        """The dev set of the genres not in training (dev_mismatched.tsv)."""
        return self._read_split(data_dir, "dev_mismatched")

    def get_test_mismatched_examples(self, data_dir):
        """The test set of the genres not in training (test_mismatched.tsv)."""
        return self._read_split(data_dir, "test_mismatched")


@register_processor("mnli-mm")
class MnliMismatchedProcessor(MnliProcessor):
    """MultiNLI whose dev and test sets are the mismatched ones."""

    def get_dev_examples(self, data_dir):
        return self.get_dev_mismatched_examples(data_dir)

    def get_test_examples(self, data_dir):
        return self.get_test_mismatched_examples(data_dir)


@register_processor("mrpc")
class MrpcProcessor(_GlueProcessor):
    """MRPC: are the two sentences paraphrases (1) or not (0)."""
    LABELS = ("0", "1")
    TEXT_A = ("#1 String", 3)
    TEXT_B = ("#2 String", 4)
    LABEL = ("Quality", 0)


@register_processor("qqp")
class QqpProcessor(_GlueProcessor):
    """Quora Question Pairs: duplicate (1) or not (0)."""
    LABELS = ("0", "1")
    TEXT_A = ("question1", 3)
    TEXT_B = ("question2", 4)
    LABEL = ("is_duplicate", 5)
    TEST_COLUMNS = {"text_a": ("question1", 1), "text_b": ("question2", 2)}


@register_processor("sst-2")
class Sst2Processor(_GlueProcessor):
    """SST-2: positive (1) or negative (0) sentence."""
    LABELS = ("0", "1")
    TEXT_A = ("sentence", 0)
    LABEL = ("label", 1)
    TEST_COLUMNS = {"text_a": ("sentence", 1)}


@register_processor("rte")
class RteProcessor(_GlueProcessor):
    """RTE: does sentence1 entail sentence2."""
    LABELS = ("entailment", "not_entailment")
    TEXT_A = ("sentence1", 1)
    TEXT_B = ("sentence2", 2)
    LABEL = ("label", 3)


@register_processor("qnli")
class QnliProcessor(_GlueProcessor):
    """QNLI: does the sentence answer the question."""
    LABELS = ("entailment", "not_entailment")
    TEXT_A = ("question", 1)
    TEXT_B = ("sentence", 2)
    LABEL = ("label", 3)


@register_processor("xnli")
class XnliProcessor(_GlueProcessor):
    """XNLI in one `language`: machine-translated MultiNLI train, XNLI dev/test."""
    LABELS = ("contradiction", "entailment", "neutral")
    FILES = {"dev": "xnli.dev.tsv", "test": "xnli.test.tsv"}
    POSITION_FALLBACK = True
    TRAIN_COLUMNS = {"text_a": ("premise", 0), "text_b": ("hypo", 1), "label": ("label", 2)}
    EVAL_COLUMNS = {"language": ("language", 0), "text_a": ("sentence1", 6),
                    "text_b": ("sentence2", 7), "label": ("gold_label", 1)}
    # The translated training files spell one label differently.
    LABEL_MAP = {"contradictory": "contradiction"}

    def __init__(self, language="zh"):
        language = str(language).strip()
        if not language:
            raise errors.InputError("--language must not be empty (e.g. zh, de, fr)")
        self.language = language

    def _train_path(self, data_dir):
        return os.path.join(data_dir, "multinli", "multinli.train.%s.tsv" % self.language)

    def _read_split(self, data_dir, split):
        if split == "train":
            path = self._train_path(data_dir)
            specs = self.TRAIN_COLUMNS
        else:
            path = os.path.join(data_dir, self.FILES[split])
            specs = {k: v for k, v in self.EVAL_COLUMNS.items()
                     if not (k == "label" and split == "test")}
        columns = {field: self._column(spec, True) for field, spec in specs.items()}
        records = _delimited_records(path, columns, True, "\t")
        if split != "train":
            records = self._of_language(records, path)
        return _build_examples(path, split, records, labels=self.LABELS,
                               labels_origin="of the xnli task", empty_text_a=True,
                               label_map=self.LABEL_MAP)

    def _of_language(self, records, path):
        """Keeps the rows of self.language; says which languages exist if none do."""
        seen = set()
        kept = 0
        for line_number, values in records:
            language = values.pop("language").strip()
            if language == self.language:
                kept += 1
                yield line_number, values
            else:
                seen.add(language)
        if not kept:
            raise input_error(path, None, "no examples of --language=%s; languages in the "
                              "file: %s" % (self.language, show_list(sorted(seen))))


_FORMATS = ("tsv", "csv", "jsonl")
_EXTENSIONS = {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def _parse_labels(labels):
    """A tuple of labels from a comma-separated string or a sequence."""
    if isinstance(labels, str):
        labels = labels.split(",")
    parsed = tuple(str(label).strip() for label in labels)
    if not parsed or any(not label for label in parsed):
        raise errors.InputError("--labels must be a comma-separated list of non-empty "
                                "labels, got %s" % show(labels))
    duplicates = sorted({label for label in parsed if parsed.count(label) > 1})
    if duplicates:
        raise errors.InputError("--labels lists %s more than once" % show_list(duplicates))
    return parsed


@register_processor("custom")
class CustomProcessor(DataProcessor):
    """Your own tsv, csv or jsonl files, described by options (see the module doc)."""

    def __init__(self, text_a_column=None, label_column=None, text_b_column=None,
                 id_column=None, train_file=None, dev_file=None, test_file=None,
                 file_format=None, has_header=True, labels=None, multi_label=False,
                 label_separator="|", encoding="utf-8"):
        if text_a_column is None:
            raise errors.InputError("the custom task needs --text_a_column "
                                    "(a header name, 0-based index or jsonl key)")
        self._column_values = {"text_a": (text_a_column, "text_a_column"),
                               "text_b": (text_b_column, "text_b_column"),
                               "label": (label_column, "label_column"),
                               "id": (id_column, "id_column")}
        self._columns = {field: _parse_column(value, flag)
                         for field, (value, flag) in self._column_values.items()
                         if value is not None}
        self._files = {"train": train_file, "dev": dev_file, "test": test_file}
        if file_format is not None:
            file_format = str(file_format).strip().lower().lstrip(".")
            if file_format not in _FORMATS:
                raise errors.InputError("--file_format must be one of %s, got %s"
                                        % (", ".join(_FORMATS), show(file_format)))
        self._format = file_format
        self._has_header = _parse_bool(has_header, "has_header")
        self._explicit_labels = _parse_labels(labels) if labels is not None else None
        self._inferred_labels = None
        self._inferred_from = None
        self.is_multi_label = _parse_bool(multi_label, "multi_label")
        if not label_separator:
            raise errors.InputError("--label_separator must not be empty")
        self._separator = label_separator
        self._encoding = fileio.check_encoding(encoding)

    def get_train_examples(self, data_dir):
        path = self._path(data_dir, "train")
        if self._explicit_labels is not None:
            return self._read(path, "train", self._explicit_labels, "given by --labels")
        examples = self._read(path, "train", None, "")
        labels = self._labels_of(examples)
        if not labels:
            # Only possible in multi-label data where no row has any label.
            raise input_error(path, None, "no labels in the file, so there is nothing to "
                              "learn; check --label_column and --label_separator")
        self._inferred_labels = labels
        self._inferred_from = path
        return examples

    def get_dev_examples(self, data_dir):
        labels, origin = self._label_set(data_dir)
        return self._read(self._path(data_dir, "dev"), "dev", labels, origin)

    def get_test_examples(self, data_dir):
        return self._read(self._path(data_dir, "test"), "test", None, "")

    def get_labels(self, data_dir=None):
        """The label list: --labels, else inferred from the training file.

        Inferring reads the training file in `data_dir` unless
        get_train_examples has already done it.
        """
        return list(self._label_set(data_dir)[0])

    def _label_set(self, data_dir):
        """(labels, phrase saying where they come from) for messages."""
        if self._explicit_labels is not None:
            return self._explicit_labels, "given by --labels"
        if self._inferred_labels is None:
            if data_dir is None:
                raise errors.InputError("the custom task needs --labels, or a training "
                                        "file to infer them from")
            try:
                self.get_train_examples(data_dir)
            except errors.InputError as e:
                if self._has_training_file(data_dir):
                    raise  # a bad training file: its own message
                raise errors.InputError("%s (without a training file, give --labels: a "
                                        "fine-tuned model's, in its order)" % e)
        return self._inferred_labels, "found in %s" % self._inferred_from

    def _has_training_file(self, data_dir):
        try:
            return os.path.isfile(self._path(data_dir, "train"))
        except errors.InputError:  # none of train.<tsv, csv, jsonl>, or several
            return False

    def _labels_of(self, examples):
        found = set()
        for example in examples:
            found.update(example.label if self.is_multi_label else (example.label,))
        return tuple(sorted(found))

    def _path(self, data_dir, split):
        """The file of `split`: its option, else <split>.<ext> in data_dir."""
        data_dir = data_dir or ""
        if self._files[split] is not None:
            return os.path.join(data_dir, os.fspath(self._files[split]))
        if self._format is not None:
            return os.path.join(data_dir, "%s.%s" % (split, self._format))
        candidates = [os.path.join(data_dir, "%s.%s" % (split, ext)) for ext in _FORMATS]
        existing = [c for c in candidates if os.path.exists(c)]
        if len(existing) > 1:
            raise errors.InputError("%s: found %s; set --file_format or --%s_file to pick one"
                                    % (data_dir or ".", ", ".join(existing), split))
        if not existing:
            raise errors.InputError("%s: no %s; set --%s_file" % (
                data_dir or ".", " or ".join(os.path.basename(c) for c in candidates), split))
        return existing[0]

    def _file_format(self, path):
        if self._format is not None:
            return self._format
        extension = os.path.splitext(path)[1].lower()
        if extension not in _EXTENSIONS:
            raise input_error(path, None, "cannot tell the format from the extension %s; "
                              "set --file_format to tsv, csv or jsonl" % show(extension))
        return _EXTENSIONS[extension]

    def _read(self, path, split, labels, labels_origin):
        fields = ["text_a", "text_b", "id"]
        if split != "test":
            if "label" not in self._columns:
                raise input_error(path, None, "the custom task needs --label_column to "
                                  "read %s examples" % split)
            fields.append("label")
        file_format = self._file_format(path)
        if file_format == "jsonl":
            keys = {field: (str(self._column_values[field][0]).strip(),
                            self._column_values[field][1])
                    for field in fields if field in self._columns}
            self._check_distinct_keys(keys)
            records = _jsonl_records(path, keys, self._encoding)
        else:
            columns = {field: self._columns[field] for field in fields if field in self._columns}
            delimiter, quotechar = ("\t", None) if file_format == "tsv" else (",", '"')
            records = _delimited_records(path, columns, self._has_header, delimiter,
                                         quotechar, self._encoding)
        return _build_examples(path, split, records, labels=labels, labels_origin=labels_origin,
                               multi_label=self.is_multi_label,
                               label_separator=self._separator)

    @staticmethod
    def _check_distinct_keys(keys):
        owner = {}
        for field, (key, flag) in keys.items():
            if key in owner:
                raise errors.InputError("--%s and --%s name the same key %s"
                                        % (owner[key], flag, show(key)))
            owner[key] = flag


@register_processor("mlabel")
class MlabelProcessor(DataProcessor):
    """The multi-GPU fork's multi-label task (its run_custom_classifier_mlabel.py).

    train.tsv, dev.tsv and test.tsv in data_dir, tab-separated with quoting
    disabled, a header row first, then `id, text, label_0 ... label_{N-1}`,
    each label 0 or 1; test rows need only the id and the text. The label
    names are the training file's header names of its label columns (in
    column order, which is the order of test_results.tsv's probabilities).
    num_labels: N, checked against every row (None: the header's columns - 2).
    """

    is_multi_label = True

    def __init__(self, num_labels=None, encoding="utf-8"):
        if num_labels is not None and (isinstance(num_labels, bool) or
                                       not isinstance(num_labels, int) or num_labels < 1):
            raise errors.InputError("--num_labels must be a whole number >= 1, got %s"
                                    % show(num_labels))
        self._num_labels = num_labels
        self._encoding = fileio.check_encoding(encoding)

    def get_train_examples(self, data_dir):
        return self._read(os.path.join(data_dir, "train.tsv"), "train")

    def get_dev_examples(self, data_dir):
        return self._read(os.path.join(data_dir, "dev.tsv"), "dev")

    def get_test_examples(self, data_dir):
        return self._read(os.path.join(data_dir, "test.tsv"), "test")

    def get_labels(self, data_dir=None):
        """The header names of the label columns of train.tsv (else dev.tsv)."""
        paths = [os.path.join(data_dir or "", name) for name in ("train.tsv", "dev.tsv")]
        path = next((p for p in paths if os.path.isfile(p)), paths[0])
        for line_number, header in read_delimited(path, "\t", encoding=self._encoding):
            return list(self._label_names(header, path, line_number))
        raise input_error(path, None, "no header row: expected id, text, then the label "
                          "columns")

    def _label_names(self, header, path, line_number):
        names = tuple(name.strip() for name in header[2:])
        expected = self._num_labels if self._num_labels is not None else len(names)
        if not names or len(names) != expected:
            raise input_error(path, line_number, "the header has %d label column(s) after id "
                              "and text; --num_labels=%d" % (len(names), expected))
        if len(set(names)) != len(names) or not all(names):
            names = tuple("label_%d" % i for i in range(len(names)))
        return names

    def _read(self, path, split):
        rows = read_delimited(path, "\t", encoding=self._encoding)
        header = next(rows, None)
        if header is None:
            raise input_error(path, None, "no header row: expected id, text, then the label "
                              "columns")
        labelled = split != "test"
        names = self._label_names(header[1], path, header[0]) if labelled else None
        examples, ids = [], {}
        for line_number, fields in rows:
            if len(fields) < 2 or (labelled and len(fields) != 2 + len(names)):
                raise input_error(path, line_number, "expected %s fields (id, text%s), got %d"
                                  % (2 + len(names) if labelled else "at least 2",
                                     ", %d labels" % len(names) if labelled else "",
                                     len(fields)))
            guid, text = fields[0].strip(), fields[1].strip()
            if not text:
                raise input_error(path, line_number, "the text (second column) is empty")
            if guid and guid in ids:
                raise input_error(path, line_number, "id %s already used on line %d"
                                  % (show(guid), ids[guid]))
            ids[guid] = line_number
            label = None
            if labelled:
                values = [value.strip() for value in fields[2:]]
                bad = next((v for v in values if v not in ("0", "1")), None)
                if bad is not None:
                    raise input_error(path, line_number, "a label column holds %s; expected 0 "
                                      "or 1" % show(bad))
                label = tuple(name for name, value in zip(names, values) if value == "1")
            examples.append(InputExample(guid or "%s-%d" % (split, len(examples)), text,
                                         label=label))
        if not examples:
            raise input_error(path, None, "no examples: the file has only a header")
        return examples
