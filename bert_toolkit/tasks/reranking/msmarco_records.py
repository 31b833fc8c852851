"""dl4marco-bert's MS MARCO records as run_reranking.py's input, beside the TSV files.

The format is what nyu-dl/dl4marco-bert's convert_msmarco_to_tfrecord.py writes
(the records in which the first BERT re-ranker's data was released, and which
its run_msmarco.py and the MS MARCO fork of bert-multi-gpu read):

  dataset_train.tf, dataset_dev.tf, dataset_eval.tf
      TFRecord files of tf.train.Example, one per query-passage pair:
        query_ids  int64 list, [CLS] query [SEP] as WordPiece ids (the query
                   cut to max_query_length - 2 pieces);
        doc_ids    int64 list, passage [SEP] (the passage cut to
                   max_seq_length - len(query_ids) - 2 pieces);
        label      one int64: 1 relevant, 0 not. Training: each triple's
                   positive, then its negative. Dev: from the qrels. Eval: 0.
  query_doc_ids_dev.txt, query_doc_ids_eval.txt
      one `query_id \\t doc_id` line per record of the dev (eval) records, in
      record order.

Dev and eval records come query by query, each query padded to num_eval_docs
records with FAKE DOCUMENTs whose doc id is 00000000; run_msmarco.py takes every
num_eval_docs consecutive records as one query's candidates and leaves the fake
ones out of its run file.

Read here: a pair is [CLS] query [SEP] passage [SEP] again (run_msmarco.py
concatenates query_ids and doc_ids), cut as run_reranking.py cuts the TSV files'
pairs (task.pair_lengths): at most --max_query_length query pieces, the passage
the rest of --max_seq_length. Records the converter wrote at the same or larger
lengths are therefore read as run_msmarco.py reads them, and records made from
TSV files give the features the TSV files give. The records are scanned once to
check and count them (one InputError line naming the file and record for a bad
one), then converted to the run's cached features as the TSV files are. Fake
documents are left out before prediction. A dev query's relevant passages are
its records labelled 1; a query without one counts 0 in MRR@10, as in
run_msmarco.py and in the official evaluation of MS MARCO (its relevant passage
is among no candidate).
"""

import dataclasses
import math
import os

import numpy as np
import tensorflow as tf

from bert_toolkit import console, fileio
from bert_toolkit.engine import input_pipeline, model_files, multi_worker, training_plan
from bert_toolkit.errors import InputError, input_error
from bert_toolkit.tasks.reranking import data

KIND = "dl4marco"
FEATURES = ("query_ids", "doc_ids", "label")
FAKE_DOC_ID = "00000000"
# split -> (records, ids file) of dl4marco-bert's names; the split's TSV flag.
FILES = {"train": ("dataset_train.tf", None),
         "eval": ("dataset_dev.tf", "query_doc_ids_dev.txt"),
         "predict": ("dataset_eval.tf", "query_doc_ids_eval.txt")}
TSV_FLAGS = {"train": "train_file", "eval": "dev_file", "predict": "test_file"}
ACTIONS = {"train": "do_train", "eval": "do_eval", "predict": "do_predict"}
# dl4marco-bert's run file of a split (its --msmarco_output), by our split.
MSMARCO_OUTPUT = {"eval": "msmarco_predictions_dev.tsv",
                  "predict": "msmarco_predictions_eval.tsv"}
RUN_FILES = {"eval": "dev_run.tsv", "predict": "test_run.tsv"}
# Records parsed at a time (tf.io.parse_example on a batch is many times faster
# than record by record).
RECORDS_PER_BATCH = 4096
# The relevant passage of a dev query none of whose records is labelled 1: it is
# somewhere outside the candidates, so the query counts (0) in MRR@10 and
# recall@k, as in the official evaluation (ranking.evaluate_ranked leaves a
# query with no relevant passage out).
RELEVANT_ELSEWHERE = "a relevant passage outside the candidates"
# Bumped when the features made from the same records change.
_FEATURE_VERSION = 1


class RecordSource(object):
    """dl4marco-bert records standing in for a split's examples (as data.PairSource
    does for the TSV files).

    path: the .tf file; ids_path: its query_doc_ids file (dev and eval), else
    None; num_records: the records read (training may keep only the first ones);
    num_pairs: the pairs they give (fake documents left out), also the len().
    """

    kind = KIND

    def __init__(self, path, num_records, num_pairs, ids_path=None):
        self.path, self.ids_path = path, ids_path
        self.num_records, self.num_pairs = num_records, num_pairs

    def __len__(self):
        return self.num_pairs

    def __repr__(self):
        return "RecordSource(%r, %d records, %d pairs)" % (self.path, self.num_records,
                                                          self.num_pairs)


# -- which files a run reads -----------------------------------------------------------

def record_splits(options):
    """split -> (records path, ids path or None) of the splits the run reads from
    dl4marco-bert's records: those it needs whose TSV file (--train_file,
    --dev_file, --test_file, left at its default: a file named on the command
    line is read or missed as such) is not in data_dir while the records are."""
    defaults = {field.name: field.default for field in dataclasses.fields(options)}
    splits = {}
    for split, (records, ids) in FILES.items():
        flag = TSV_FLAGS[split]
        if not getattr(options, ACTIONS[split]) or getattr(options, flag) != defaults[flag]:
            continue
        records_path = os.path.join(options.data_dir or "", records)
        if not fileio.exists(options.data_path(flag)) and fileio.exists(records_path):
            splits[split] = (records_path,
                             os.path.join(options.data_dir or "", ids) if ids else None)
    return splits


def settle(options):
    """(options, model inputs or None, record_splits(options)).

    With records: --vocab_file defaults to the vocab.txt beside --bert_config_file
    (dl4marco-bert's commands give none), and the model's files are read here
    (model_files.load_model_inputs), since checking the records needs the
    vocabulary; the model must lay pairs out as BERT does.
    """
    splits = record_splits(options)
    if not splits:
        return options, None, splits
    if not options.vocab_file:
        vocab_file = os.path.join(os.path.dirname(options.bert_config_file), "vocab.txt")
        if not fileio.exists(vocab_file):
            raise InputError("--vocab_file is required: %s holds WordPiece ids of a vocab.txt, "
                             "and there is none beside --bert_config_file=%s"
                             % (next(iter(splits.values()))[0], options.bert_config_file))
        console.info("--vocab_file=%s (beside --bert_config_file)", vocab_file)
        options = options.replace(vocab_file=vocab_file)
    model_inputs = model_files.load_model_inputs(options)
    family = model_inputs.bert_config.family
    if family.tokenizer != "wordpiece" or family.pair_layout != "bert":
        raise InputError("%s: dl4marco-bert's records hold BERT's WordPiece pairs, but "
                         "--bert_config_file's model_family is %s"
                         % (next(iter(splits.values()))[0], family.name))
    for split, (records_path, _) in splits.items():  # FILES' order: train, eval, predict
        console.info("%s: dl4marco-bert's records %s", split, records_path)
    return options, model_inputs, splits


# -- reading records -------------------------------------------------------------------

class RecordBatch(object):
    """Consecutive records, parsed: each feature's ids laid end to end (int64
    [total]: query_values, doc_values, label_values) and its number per record
    (int64 [size]: query_lengths, doc_lengths, label_lengths); `start`: the
    index of the first record in its file (from 0)."""

    def __init__(self, start, query_values, query_lengths, doc_values, doc_lengths,
                 label_values, label_lengths):
        self.start = start
        self.query_values, self.query_lengths = query_values, query_lengths
        self.doc_values, self.doc_lengths = doc_values, doc_lengths
        self.label_values, self.label_lengths = label_values, label_lengths
        self.query_ends, self.doc_ends = np.cumsum(query_lengths), np.cumsum(doc_lengths)
        self.label_ends = np.cumsum(label_lengths)

    @property
    def size(self):
        return len(self.query_lengths)

    def query(self, index):
        """query_ids of record `index` of the batch: int64 [its length]."""
        end = int(self.query_ends[index])
        return self.query_values[end - int(self.query_lengths[index]):end]

    def doc(self, index):
        """doc_ids of record `index` of the batch: int64 [its length]."""
        end = int(self.doc_ends[index])
        return self.doc_values[end - int(self.doc_lengths[index]):end]

    def label(self, index):
        return int(self.label_values[int(self.label_ends[index]) - 1])


def _parse_spec():
    return {name: tf.io.RaggedFeature(tf.int64) for name in FEATURES}


def _first_line(error):
    return str(getattr(error, "message", error)).strip().splitlines()[0][:200]


def _bad_record(path, raw_records, start):
    """The InputError of the first record of `raw_records` (serialised Examples
    starting at record `start`) that does not parse as dl4marco-bert's features."""
    spec = _parse_spec()
    for index, raw in enumerate(raw_records):
        try:
            tf.io.parse_example(tf.constant([raw]), spec)
        except (tf.errors.InvalidArgumentError, ValueError) as e:
            return input_error(path, None, "record %d: not dl4marco-bert's features "
                               "(query_ids, doc_ids: int64 lists; label: one int64): %s"
                               % (start + index + 1, _first_line(e)))
    return input_error(path, None, "records %d-%d do not parse as dl4marco-bert's features"
                       % (start + 1, start + len(raw_records)))


def read_batches(path, limit=None, batch_size=RECORDS_PER_BATCH):
    """Yields the RecordBatches of a records file, in order (the first `limit`
    records only, if given). InputError naming the file for a file that is not
    TFRecord, is cut short, or holds a record without dl4marco-bert's features."""
    if not fileio.exists(path):
        raise input_error(path, None, "file not found")
    dataset = tf.data.TFRecordDataset(path)
    if limit is not None:
        dataset = dataset.take(limit)
    batches = iter(dataset.batch(batch_size))
    spec, start = _parse_spec(), 0
    while True:
        try:
            raw = next(batches)
        except StopIteration:
            return
        except tf.errors.OpError as e:
            raise input_error(path, None, "not a TFRecord file, or damaged after record %d "
                              "(%s)" % (start, _first_line(e)))
        try:
            parsed = tf.io.parse_example(raw, spec)
        except (tf.errors.InvalidArgumentError, ValueError):
            raise _bad_record(path, raw.numpy(), start)
        batch = RecordBatch(start, *[part for name in FEATURES for part in (
            parsed[name].values.numpy(), parsed[name].row_lengths().numpy())])
        yield batch
        start += batch.size


def check_batch(path, batch, layout, vocab_size):
    """InputError naming `path` and the record for the first record of `batch` that
    is not [CLS] query [SEP] / passage [SEP] ids of the vocabulary with a 0/1 label.

    layout: the tokenizer's tokenization.Layout (its [CLS] and [SEP] ids).
    """
    def fail(index, message):
        raise input_error(path, None, "record %d: %s" % (batch.start + int(index) + 1, message))

    def first(mask):
        hits = np.flatnonzero(mask)
        return hits[0] if hits.size else None

    for name, lengths, fewest, holds in (
            ("label", batch.label_lengths, 1, "one value, 1 (relevant) or 0"),
            ("query_ids", batch.query_lengths, 2, "[CLS] query [SEP]"),
            ("doc_ids", batch.doc_lengths, 1, "passage [SEP]")):
        index = first(lengths < fewest if name != "label" else lengths != 1)
        if index is not None:
            fail(index, "%s holds %d ids, expected %s" % (name, lengths[index], holds))
    index = first((batch.label_values != 0) & (batch.label_values != 1))
    if index is not None:
        fail(index, "label %d, expected 1 (relevant) or 0" % batch.label_values[index])
    query_ends, doc_ends = batch.query_ends, batch.doc_ends
    for name, ids, token in (
            ("query_ids starts", batch.query_values[query_ends - batch.query_lengths], "[CLS]"),
            ("query_ids ends", batch.query_values[query_ends - 1], "[SEP]"),
            ("doc_ids ends", batch.doc_values[doc_ends - 1], "[SEP]")):
        expected = layout.cls_id if token == "[CLS]" else layout.sep_id
        index = first(ids != expected)
        if index is not None:
            fail(index, "%s with id %d, expected %s (id %d of --vocab_file): records made "
                 "with another vocab.txt?" % (name, ids[index], token, expected))
    for name, values, ends in (("query_ids", batch.query_values, query_ends),
                               ("doc_ids", batch.doc_values, doc_ends)):
        position = first((values < 0) | (values >= vocab_size))
        if position is not None:
            fail(np.searchsorted(ends, position, side="right"),
                 "%s holds id %d, outside --vocab_file's %d ids: records made with another "
                 "vocab.txt?" % (name, values[position], vocab_size))


def count_records(path):
    """The number of records in a records file."""
    return sum(batch.size for batch in read_batches(path))


def read_ids(path):
    """Yields (line number, query id, doc id or None for a fake document) of a
    query_doc_ids file's `query_id \\t doc_id` lines."""
    for line_number, text in fileio.non_blank_lines(path):
        fields = text.split("\t")
        if len(fields) != 2:
            raise input_error(path, line_number, "expected `query_id \\t doc_id` (2 "
                              "tab-separated fields), got %d" % len(fields))
        qid = data.parse_id(fields[0], path, line_number, "query id")
        if fields[1].strip() == FAKE_DOC_ID:
            yield line_number, qid, None
        else:
            yield line_number, qid, data.parse_id(fields[1], path, line_number, "doc id")


# -- scanning: checked and counted before anything is written ---------------------------

def scan_train(path, tokenizer, limit=None):
    """The RecordSource of training records, every record checked.

    limit: the triples kept (--max_train_triples): the first 2 x limit records.
    """
    count = 0
    for batch in read_batches(path, None if limit is None else 2 * limit):
        check_batch(path, batch, tokenizer.layout, len(tokenizer.vocab))
        count += batch.size
    if not count:
        raise input_error(path, None, "holds no records")
    return RecordSource(path, count, count)


class _QueryGroups(object):
    """Checks that the records of a ranked split come as dl4marco-bert writes them:
    every num_eval_docs consecutive records one query's, each doc id at most once
    per query, no query twice; collects each query's relevant doc ids."""

    def __init__(self, ids_path, num_eval_docs):
        self.ids_path, self.num_eval_docs = ids_path, num_eval_docs
        self.finished, self.relevant = set(), {}
        self.qid = self.first_line = None
        self.pids = set()
        self.pairs = 0

    def add(self, index, line_number, qid, pid, label):
        if index % self.num_eval_docs == 0:
            if qid in self.finished or qid == self.qid:
                raise input_error(self.ids_path, line_number, "query %d again, after its "
                                  "%d records (--num_eval_docs=%d: every %d consecutive "
                                  "records are one query's candidates)" % (
                                      qid, self.num_eval_docs, self.num_eval_docs,
                                      self.num_eval_docs))
            if self.qid is not None:
                self.finished.add(self.qid)
            self.qid, self.first_line, self.pids = qid, line_number, set()
            self.relevant[qid] = set()
        elif qid != self.qid:
            raise input_error(self.ids_path, line_number, "query %d among the candidates of "
                              "query %d (line %d): every %d consecutive records are one "
                              "query's (--num_eval_docs=%d; is that what the records were "
                              "written with?)" % (qid, self.qid, self.first_line,
                                                  self.num_eval_docs, self.num_eval_docs))
        if pid is None:
            return False
        if pid in self.pids:
            raise input_error(self.ids_path, line_number, "doc %d is listed twice for query %d"
                              % (pid, qid))
        self.pids.add(pid)
        self.pairs += 1
        if label:
            self.relevant[qid].add(pid)
        return True


def scan_ranked(path, ids_path, tokenizer, num_eval_docs):
    """(RecordSource, relevant) of dev or eval records and their query_doc_ids
    file, every record and line checked; relevant: query id -> set of the doc
    ids labelled 1 (empty for a query with none)."""
    ids = read_ids(ids_path)
    groups = _QueryGroups(ids_path, num_eval_docs)
    count = 0
    for batch in read_batches(path):
        check_batch(path, batch, tokenizer.layout, len(tokenizer.vocab))
        for index in range(batch.size):
            entry = next(ids, None)
            if entry is None:
                raise _count_mismatch(path, ids_path)
            groups.add(count, entry[0], entry[1], entry[2], batch.label(index))
            count += 1
    if next(ids, None) is not None:
        raise _count_mismatch(path, ids_path)
    if not count:
        raise input_error(path, None, "holds no records")
    if count % num_eval_docs:
        raise input_error(path, None, "%d records, not a multiple of --num_eval_docs=%d (each "
                          "query has num_eval_docs records, padded with fake documents)"
                          % (count, num_eval_docs))
    return RecordSource(path, count, groups.pairs, ids_path), groups.relevant


def _count_mismatch(path, ids_path):
    return input_error(ids_path, None, "%d lines, but %s holds %d records: expected one "
                       "`query_id \\t doc_id` line per record, in record order"
                       % (sum(1 for _ in fileio.non_blank_lines(ids_path)), path,
                          count_records(path)))


def scan_dev(path, ids_path, tokenizer, num_eval_docs):
    """scan_ranked for evaluation: (RecordSource, qrels), qrels: query id ->
    frozenset of the doc ids labelled 1, or of RELEVANT_ELSEWHERE for a query
    with none (ranking.evaluate_ranked's input). InputError if no record is
    labelled 1 (eval records, whose labels are all 0, given as dev?)."""
    source, relevant = scan_ranked(path, ids_path, tokenizer, num_eval_docs)
    if not any(relevant.values()):
        raise input_error(path, None, "no record is labelled 1 (relevant), so MRR@10 cannot "
                          "be measured: dl4marco-bert's dev records carry the qrels' labels, "
                          "its eval records none")
    return source, {qid: frozenset(pids or [RELEVANT_ELSEWHERE])
                    for qid, pids in relevant.items()}


# -- features ----------------------------------------------------------------------------

def _ranks(lengths):
    """Each element's index within its row, for ragged rows of `lengths` (flat)."""
    return np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def pack_batch(batch, layout, max_query_length, max_seq_length):
    """(input_ids, input_mask, segment_ids), int32 [batch.size, max_seq_length], of
    a batch of records, built at once in numpy.

    A record's query_ids are [CLS] query [SEP] and its doc_ids passage [SEP]; the
    row is [CLS] query [SEP] passage [SEP] in BERT's layout (`layout`, a
    tokenization.Layout with one [SEP] between the texts), the query keeping at
    most max_query_length pieces and the passage the rest, as task.pair_lengths
    cuts the TSV files' pairs.
    """
    rows = np.arange(batch.size)
    query_starts = batch.query_ends - batch.query_lengths
    doc_starts = batch.doc_ends - batch.doc_lengths
    kept_query = np.minimum(batch.query_lengths - 2, max_query_length)
    kept_doc = np.minimum(batch.doc_lengths - 1,
                          max_seq_length - layout.pair_specials - kept_query)
    input_ids = np.full((batch.size, max_seq_length), layout.pad_id, np.int32)
    input_ids[:, 0] = layout.cls_id
    query_rows, query_ranks = np.repeat(rows, kept_query), _ranks(kept_query)
    input_ids[query_rows, 1 + query_ranks] = batch.query_values[
        query_starts[query_rows] + 1 + query_ranks]
    input_ids[rows, kept_query + 1] = layout.sep_id
    doc_rows, doc_ranks = np.repeat(rows, kept_doc), _ranks(kept_doc)
    input_ids[doc_rows, kept_query[doc_rows] + 2 + doc_ranks] = batch.doc_values[
        doc_starts[doc_rows] + doc_ranks]
    input_ids[rows, kept_query + kept_doc + 2] = layout.sep_id
    columns = np.arange(max_seq_length)
    input_mask = (columns < (kept_query + kept_doc + 3)[:, None]).astype(np.int32)
    segment_ids = ((columns >= (kept_query + 2)[:, None]) * input_mask
                   * layout.segment_b).astype(np.int32)
    return input_ids, input_mask, segment_ids


def feature_rows(source, layout, max_query_length, max_seq_length):
    """Yields the TFRecord feature dicts of a RecordSource, as data.PairSource's
    rows are (task.feature_rows): the pair, label_ids, and for dev and eval
    records query_id and passage_id (int64); fake documents are left out."""
    if layout.seps_between != 1:
        raise ValueError("dl4marco-bert's records are BERT pairs (see settle)")
    ids = read_ids(source.ids_path) if source.ids_path else None
    for batch in read_batches(source.path, source.num_records):
        input_ids, input_mask, segment_ids = pack_batch(batch, layout, max_query_length,
                                                        max_seq_length)
        labels = batch.label_values[batch.label_ends - 1]
        for index in range(batch.size):
            row = {"input_ids": input_ids[index], "input_mask": input_mask[index],
                   "segment_ids": segment_ids[index], "label_ids": labels[index:index + 1]}
            if ids is not None:
                _, qid, pid = next(ids)
                if pid is None:
                    continue
                row["query_id"], row["passage_id"] = [qid], [pid]
            yield row


def source_digest(source, max_query_length):
    """The cache key part of a RecordSource: its files' fingerprint and our settings."""
    return input_pipeline.fingerprint({
        "kind": KIND, "files": input_pipeline.input_fingerprint(
            [source.path] + ([source.ids_path] if source.ids_path else [])),
        "num_records": source.num_records, "num_pairs": source.num_pairs,
        "max_query_length": max_query_length, "version": _FEATURE_VERSION})


# -- dl4marco-bert's steps and run files -------------------------------------------------

def epochs_for_steps(num_train_steps, plan_of):
    """The num_train_epochs whose plan (`plan_of(epochs)`, a TrainingPlan) makes
    exactly num_train_steps optimizer steps.

    The plan rounds (training_plan.plan_training): the float nearest to
    steps x global batch / examples is nudged until the plan agrees.
    """
    plan = plan_of(1.0)
    epochs = num_train_steps * plan.global_batch_size / float(plan.num_examples)
    for _ in range(64):
        steps = plan_of(epochs).num_train_steps
        if steps == num_train_steps:
            return epochs
        epochs = math.nextafter(epochs, math.inf if steps < num_train_steps else 0.0)
    raise ValueError("no epochs give %d steps" % num_train_steps)


def warmup_for_steps(num_warmup_steps, num_train_steps):
    """The warmup_proportion that training_plan turns into num_warmup_steps of
    num_train_steps (all of them at most)."""
    if num_warmup_steps >= num_train_steps:
        return 1.0
    proportion = num_warmup_steps / float(num_train_steps)
    while int(num_train_steps * proportion) < num_warmup_steps:
        proportion = math.nextafter(proportion, 1.0)
    return proportion


def cluster_workers(options, environ=None):
    """The workers the run's --cluster will have, as multi_worker.resolve_cluster
    picks them (from --cluster_world_size, TF_CONFIG or the Slurm step), without
    joining it; 1 for one process."""
    environ = os.environ if environ is None else environ
    mode = options.cluster
    if mode.startswith("tcp://"):
        return max(1, getattr(options, "cluster_world_size", 1))
    tasks = environ.get("SLURM_STEP_NUM_TASKS") or environ.get("SLURM_NTASKS") or "1"
    if mode in ("auto", "tf_config"):
        cluster = multi_worker.parse_tf_config(environ.get("TF_CONFIG"))
        if cluster is not None:
            return max(1, cluster.num_workers)
    if mode == "slurm" or (mode == "auto" and environ.get("SLURM_JOB_ID")):
        return int(tasks) if tasks.isdigit() else 1
    return 1


def replicas(options):
    """The replicas that train together: each process's devices
    (engine/distribution.py's replica_devices) times the workers."""
    per_process = options.num_gpu_cores if options.use_gpu else options.num_cpu_replicas
    return per_process * cluster_workers(options)


def in_epochs(options, num_examples):
    """`options` with --num_train_steps and --num_warmup_steps (dl4marco-bert's)
    given as the epochs and warmup proportion fine-tuning plans with (for the
    replicas of the run, `replicas`); unchanged without them."""
    if not options.do_train or (options.num_train_steps is None
                                and options.num_warmup_steps is None):
        return options

    num_replicas = replicas(options)

    def plan_of(epochs):
        return training_plan.plan_training(
            num_examples, epochs, options.train_batch_size, num_replicas,
            options.gradient_accumulation_steps, 0.0)

    changes = {}
    steps = plan_of(options.num_train_epochs).num_train_steps
    if options.num_train_steps is not None:
        steps = options.num_train_steps
        changes["num_train_epochs"] = epochs_for_steps(steps, plan_of)
    if options.num_warmup_steps is not None:
        if options.num_warmup_steps > steps:
            console.warning("--num_warmup_steps=%d is more than the %d training steps: the "
                            "learning rate warms up over all of them",
                            options.num_warmup_steps, steps)
        changes["warmup_proportion"] = warmup_for_steps(options.num_warmup_steps, steps)
    return options.replace(**changes)


def msmarco_output_lines(run_path):
    """dl4marco-bert's run file lines (`query_id \\t doc_id \\t rank`) of one of
    ours (`qid \\t pid \\t rank \\t score`)."""
    for qid, pids in data.read_run(run_path):
        for rank, pid in enumerate(pids, 1):
            yield "%d\t%d\t%d" % (qid, pid, rank)


def write_msmarco_output(options, report, with_records):
    """Writes msmarco_predictions_dev.tsv / _eval.tsv beside dev_run.tsv and
    test_run.tsv when --msmarco_output (default: when records were read) and
    this process evaluated or predicted."""
    wanted = options.msmarco_output if options.msmarco_output is not None else with_records
    if not wanted:
        return
    done = {"eval": report.eval is not None, "predict": bool(report.prediction_files)}
    for split, name in MSMARCO_OUTPUT.items():
        run_path = os.path.join(options.output_dir, RUN_FILES[split])
        if not done[split] or not fileio.exists(run_path):
            continue
        path = os.path.join(options.output_dir, name)
        with fileio.atomic_path(path) as temporary:
            with fileio.open_file(temporary, "w") as f:
                for line in msmarco_output_lines(run_path):
                    f.write(line + "\n")
        console.info("dl4marco-bert's run file: %s", path)
