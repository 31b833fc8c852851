"""Passage re-ranking (MS MARCO style): files, features, the head, ranking and MRR.

A query and one candidate passage are one pair, [CLS] query [SEP] passage [SEP];
the model is the 2-label classifier of classifier.py (label 1 = relevant) and a
pair's score is P(relevant). The candidates of each query are sorted by it.

Files (tab-separated, no quoting, UTF-8; a byte-order mark is skipped):
  triples     query \\t positive passage \\t negative passage: two training
              pairs, labelled 1 and 0.
  candidates  qid \\t pid \\t query \\t passage (the top-1000 files): integer
              ids; the lines of one qid are contiguous, and a pid appears at
              most once per qid.
  qrels       qid 0 pid relevance, separated by spaces or tabs; relevance > 0
              marks a relevant passage.
  run         qid \\t pid \\t rank \\t score, written here: ranks are 1-based,
              score = P(relevant); readable by the official msmarco_eval.py.

Large files are streamed: they are scanned once to validate and count, then
converted to TFRecord chunk by chunk, and the ranked run file is written one
query at a time as the predictions arrive.

Evaluation follows the official MS MARCO passage ranking script
(microsoft/MSMARCO-Passage-Ranking, ms_marco_eval.py, `compute_metrics`):
for every ranked query that has relevant passages, the reciprocal rank of the
first relevant passage among its top 10 (0 if none is there); the sum is
divided by the number of queries in the qrels, so a judged query missing
from the run counts as 0 and a ranked query without judgements is ignored.
See docs/reranking.md for the details and the one deliberate difference.
"""

import collections
import math

import numpy as np
import tensorflow as tf

import classifier
import fileio
import fine_tuning
import graph_tokenization
import input_pipeline
from errors import InputError, input_error

LABELS = ("0", "1")
MRR_DEPTH = 10
RECALL_CUTOFFS = (10, 100, 1000)
ID_FEATURES = ("query_id", "passage_id")
# Pairs tokenized at a time while converting: bounds memory on huge files.
CHUNK_PAIRS = 4096
# Bumped when the features written for the same inputs change.
_FEATURE_VERSION = 1

Candidate = collections.namedtuple("Candidate", [
    "line_number", "qid", "pid", "query", "passage"])


class PairSource(object):
    """A validated input file, standing in for a split's list of examples.

    kind: "triples" or "candidates"; num_pairs: the pairs it gives (two per
    triple), which is also its len(), so the shared flow plans the training
    steps from it; limit: the triples kept (None: all). The pairs themselves
    are read again, chunk by chunk, when the features are written.
    """

    def __init__(self, kind, path, num_pairs, limit=None):
        self.kind, self.path, self.num_pairs, self.limit = kind, path, num_pairs, limit

    def __len__(self):
        return self.num_pairs

    def __repr__(self):
        return "PairSource(%r, %r, %d pairs)" % (self.kind, self.path, self.num_pairs)


# ---------------------------------------------------------------------------
# Reading files


def parse_id(text, path, line_number, what):
    """An MS MARCO id (an integer) or a one-line InputError naming the file and line."""
    try:
        return int(text.strip())
    except ValueError:
        raise input_error(path, line_number, "%s %r is not an integer (MS MARCO ids are "
                     "integers)" % (what, text[:40]))


def read_triples(path, limit=None):
    """Yields (line_number, query, positive, negative) of a training triples file.

    limit: stop after this many triples (None: read them all).
    """
    count = 0
    for line_number, text in fileio.non_blank_lines(path):
        if limit is not None and count >= limit:
            return
        fields = text.split("\t")
        if len(fields) != 3:
            raise input_error(path, line_number, "expected 3 tab-separated fields (query, "
                         "positive passage, negative passage), got %d" % len(fields))
        count += 1
        yield line_number, fields[0], fields[1], fields[2]


def read_candidates(path):
    """Yields the Candidates of a `qid \\t pid \\t query \\t passage` file, checked.

    The lines of one qid must be contiguous (as in the top-1000 files), so the
    ranking can be written query by query; a qid that comes back after another
    one, or a pid listed twice for one qid, is an error. Only the current
    query's pids and the set of finished qids are kept in memory.
    """
    finished, current_qid, current_pids = set(), None, set()
    for line_number, text in fileio.non_blank_lines(path):
        fields = text.split("\t")
        if len(fields) != 4:
            raise input_error(path, line_number, "expected 4 tab-separated fields (qid, pid, "
                         "query, passage), got %d" % len(fields))
        qid = parse_id(fields[0], path, line_number, "qid")
        pid = parse_id(fields[1], path, line_number, "pid")
        if qid != current_qid:
            if qid in finished:
                raise input_error(path, line_number, "qid %d appears again after other qids; "
                             "the candidates of one query must be on consecutive lines "
                             "(sort the file by qid)" % qid)
            if current_qid is not None:
                finished.add(current_qid)
            current_qid, current_pids = qid, set()
        if pid in current_pids:
            raise input_error(path, line_number, "pid %d is listed twice for qid %d" % (pid, qid))
        current_pids.add(pid)
        yield Candidate(line_number, qid, pid, fields[2], fields[3])


def read_qrels(path):
    """qid -> frozenset of relevant pids, from `qid 0 pid relevance` lines.

    Fields are separated by spaces or tabs; relevance > 0 is relevant. A qid
    whose judgements are all 0 is kept with an empty set: it is in the qrels
    but no ranking can score on it (see `evaluate_ranked`).
    """
    relevant = {}
    for line_number, text in fileio.non_blank_lines(path):
        fields = text.split()
        if len(fields) != 4:
            raise input_error(path, line_number, "expected 4 fields (qid 0 pid relevance) "
                         "separated by spaces or tabs, got %d" % len(fields))
        qid = parse_id(fields[0], path, line_number, "qid")
        pid = parse_id(fields[2], path, line_number, "pid")
        try:
            relevance = int(fields[3])
        except ValueError:
            raise input_error(path, line_number, "relevance %r is not an integer"
                         % fields[3][:40])
        pids = relevant.setdefault(qid, set())
        if relevance > 0:
            pids.add(pid)
    return {qid: frozenset(pids) for qid, pids in relevant.items()}


def read_run(path):
    """Yields (qid, [pid, ...] in rank order) of a `qid \\t pid \\t rank [\\t score]` file.

    The lines of one qid must be contiguous (a run file written here is), and
    within a query the ranks 1, 2, 3, ... in order.
    """
    current_qid, pids, finished = None, [], set()
    for line_number, text in fileio.non_blank_lines(path):
        fields = text.split("\t")
        if len(fields) not in (3, 4):
            raise input_error(path, line_number, "expected qid, pid, rank[, score] separated by "
                         "tabs, got %d fields" % len(fields))
        qid = parse_id(fields[0], path, line_number, "qid")
        pid = parse_id(fields[1], path, line_number, "pid")
        rank = parse_id(fields[2], path, line_number, "rank")
        if qid != current_qid:
            if qid in finished:
                raise input_error(path, line_number, "qid %d appears again after other qids"
                             % qid)
            if current_qid is not None:
                finished.add(current_qid)
                yield current_qid, pids
            current_qid, pids = qid, []
        if rank != len(pids) + 1:
            raise input_error(path, line_number, "rank %d of qid %d, expected %d (ranks are "
                         "1, 2, 3, ... in order)" % (rank, qid, len(pids) + 1))
        pids.append(pid)
    if current_qid is not None:
        yield current_qid, pids


def scan_triples(path, limit=None):
    """Reads a triples file once (so every line is checked): its PairSource."""
    count = sum(1 for _ in read_triples(path, limit))
    if not count:
        raise InputError("%s: holds no triples" % path)
    return PairSource("triples", path, 2 * count, limit)


def scan_candidates(path):
    """Reads a candidate file once (so every line is checked).

    Returns (PairSource, set of its qids).
    """
    qids, count = set(), 0
    for candidate in read_candidates(path):
        qids.add(candidate.qid)
        count += 1
    if not count:
        raise InputError("%s: holds no candidates" % path)
    return PairSource("candidates", path, count, None), qids


# ---------------------------------------------------------------------------
# Features


def pair_lengths(query_length, passage_length, max_query_length, max_seq_length):
    """Tokens kept of the query and of the passage.

    The query keeps at most `max_query_length` tokens; the passage gets what
    is left of max_seq_length after the query and [CLS], [SEP], [SEP]. So the
    passage is the one cut when the pair is too long, and a short query leaves
    more room for its passage.
    """
    kept_query = min(query_length, max_query_length)
    return kept_query, min(passage_length, max_seq_length - 3 - kept_query)


def text_pair_features(queries, passages, vocab_tokens, do_lower_case, max_query_length,
                       max_seq_length):
    """`encode_pairs` in the graph, for the export's raw-text signature.

    queries, passages: tf.string [batch]. The query keeps at most
    max_query_length ids, the passage what is left (pair_lengths); returns
    int32 input_ids, input_mask, segment_ids [batch, max_seq_length].
    """
    vocab = graph_tokenization.make_vocab(vocab_tokens)
    ids_q = graph_tokenization.encode(queries, vocab_tokens, do_lower_case)
    ids_p = graph_tokenization.encode(passages, vocab_tokens, do_lower_case)
    kept_q = tf.minimum(ids_q.row_lengths(), max_query_length)
    ids_q = graph_tokenization.first_values(ids_q, kept_q)
    ids_p = graph_tokenization.first_values(ids_p, max_seq_length - 3 - kept_q)
    return graph_tokenization.pack_features(ids_q, ids_p, vocab.cls_id, vocab.sep_id,
                                            max_seq_length)


def encode_pairs(tokenizer, queries, passages, max_query_length, max_seq_length):
    """(input_ids, input_mask, segment_ids), int32 [len(queries), max_seq_length].

    Rows are [CLS] query [SEP] passage [SEP], zero-padded; segment ids are 0
    up to the first [SEP] and 1 after it.
    """
    query_ids = tokenizer.encode_batch(queries)
    passage_ids = tokenizer.encode_batch(passages)
    cls_id, sep_id = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    shape = (len(query_ids), max_seq_length)
    input_ids = np.zeros(shape, np.int32)
    input_mask = np.zeros(shape, np.int32)
    segment_ids = np.zeros(shape, np.int32)
    for row, (query, passage) in enumerate(zip(query_ids, passage_ids)):
        len_q, len_p = pair_lengths(len(query), len(passage), max_query_length,
                                    max_seq_length)
        tokens = [cls_id] + list(query[:len_q]) + [sep_id] + list(passage[:len_p]) + [sep_id]
        input_ids[row, :len(tokens)] = tokens
        input_mask[row, :len(tokens)] = 1
        segment_ids[row, len_q + 2:len(tokens)] = 1
    return input_ids, input_mask, segment_ids


def _rows(tokenizer, pairs, max_query_length, max_seq_length):
    """Feature dicts of (query, passage, label, extra features) tuples, one chunk."""
    ids, mask, segments = encode_pairs(tokenizer, [p[0] for p in pairs],
                                       [p[1] for p in pairs], max_query_length,
                                       max_seq_length)
    for row, (_, _, label, extra) in enumerate(pairs):
        features = {"input_ids": ids[row], "input_mask": mask[row],
                    "segment_ids": segments[row], "label_ids": [label]}
        features.update(extra)
        yield features


def feature_rows(source, tokenizer, max_query_length, max_seq_length,
                 chunk_pairs=CHUNK_PAIRS):
    """Yields the TFRecord feature dicts of a PairSource, tokenizing chunk by chunk.

    Triples give two rows each (label 1 with the positive passage, then label
    0 with the negative). Candidates give one row each, carrying `query_id`
    and `passage_id` (int64) through prediction, and label 0 (unused).
    """
    if source.kind == "triples":
        pairs = ((query, passage, label, {})
                 for _, query, positive, negative in read_triples(source.path, source.limit)
                 for passage, label in ((positive, 1), (negative, 0)))
    else:
        pairs = ((c.query, c.passage, 0, {"query_id": [c.qid], "passage_id": [c.pid]})
                 for c in read_candidates(source.path))
    for chunk in fileio.chunks(pairs, chunk_pairs):
        for row in _rows(tokenizer, chunk, max_query_length, max_seq_length):
            yield row


def source_digest(source, max_query_length):
    """The cache key part of a PairSource: its file's fingerprint and our settings."""
    return input_pipeline.fingerprint({
        "kind": source.kind, "file": input_pipeline.input_fingerprint([source.path]),
        "limit": source.limit, "num_pairs": source.num_pairs,
        "max_query_length": max_query_length, "version": _FEATURE_VERSION})


def feature_spec(max_seq_length, with_ids=False):
    """name -> FixedLenFeature of the pair features (and the int64 ids if asked)."""
    lengths = {"input_ids": max_seq_length, "input_mask": max_seq_length,
               "segment_ids": max_seq_length, "label_ids": 1}
    if with_ids:
        lengths.update({name: 1 for name in ID_FEATURES})
    return input_pipeline.fixed_length_spec(lengths)


# ---------------------------------------------------------------------------
# The head


def make_head_fn(dropout_prob, pooling="pooler"):
    """classifier.make_head_fn's 2-label softmax head, with relevance scores added.

    Predictions gain `score` (P(relevant), float32 [batch]), `margin` (the
    logit of "relevant" minus that of "not relevant", the ranking key: it
    orders like P(relevant) but does not round to 1.0 for confident pairs)
    and the query and passage ids when the features carry them. The serving
    signature gains `scores` [batch].
    """
    classify = classifier.make_head_fn(len(LABELS), dropout_prob, pooling=pooling)

    def head_fn(model, features, mode):
        head = classify(model, features, mode)
        logits = head.serving_outputs["logits"]  # float32 [batch, 2]
        scores = head.predictions["probabilities"][:, 1]
        predictions = dict(head.predictions, score=scores,
                           margin=logits[:, 1] - logits[:, 0])
        for name in ID_FEATURES:
            if name in features:
                predictions[name] = tf.reshape(features[name], [-1])
        serving = dict(head.serving_outputs, scores=scores)
        return head._replace(predictions=predictions, serving_outputs=serving)

    return head_fn


# ---------------------------------------------------------------------------
# Ranking and metrics (pure functions, no TensorFlow)


def rank(pids, keys):
    """Indices of the candidates best first: `keys` descending, ties in input order.

    The input order is the candidate file's order, so equal scores keep the
    first-stage (e.g. BM25) ranking; the sort is stable, hence deterministic.
    """
    return sorted(range(len(pids)), key=lambda i: -keys[i])


def group_by_query(predictions):
    """Yields (qid, pids, scores, margins) per query from a stream of predictions.

    predictions: dicts with query_id, passage_id, score, margin, in candidate
    file order (the lines of a qid are contiguous: read_candidates checks).
    """
    current, pids, scores, margins, finished = None, [], [], [], set()
    for prediction in predictions:
        qid = int(prediction["query_id"])
        if qid != current:
            if qid in finished:
                raise ValueError("qid %d reappears in the prediction stream" % qid)
            if current is not None:
                finished.add(current)
                yield current, pids, scores, margins
            current, pids, scores, margins = qid, [], [], []
        pids.append(int(prediction["passage_id"]))
        scores.append(float(prediction["score"]))
        margins.append(float(prediction["margin"]))
    if current is not None:
        yield current, pids, scores, margins


def run_lines(qid, pids, scores, keys):
    """The ranked `qid \\t pid \\t rank \\t score` lines of one query."""
    return ["%d\t%d\t%d\t%.8g" % (qid, pids[i], position + 1, scores[i])
            for position, i in enumerate(rank(pids, keys))]


def run_file_lines(predictions):
    """The ranked run file's lines, query by query, from a stream of predictions."""
    for qid, pids, scores, margins in group_by_query(predictions):
        for line in run_lines(qid, pids, scores, margins):
            yield line


def reciprocal_rank(ranked_pids, relevant, depth=MRR_DEPTH):
    """1 / position of the first relevant pid among the first `depth`, else 0."""
    for position, pid in enumerate(ranked_pids[:depth]):
        if pid in relevant:
            return 1.0 / (position + 1)
    return 0.0


def relevant_found(ranked_pids, relevant, cutoff):
    """How many relevant pids are among the first `cutoff`."""
    return sum(1 for pid in ranked_pids[:cutoff] if pid in relevant)


def evaluate_ranked(ranked_queries, qrels, cutoffs=RECALL_CUTOFFS):
    """MRR@10 and recall@k of ranked queries against the qrels, as msmarco_eval does.

    Args:
      ranked_queries: iterable of (qid, [pid, ...] best first), e.g. read_run.
      qrels: qid -> set of relevant pids (read_qrels).
    Returns:
      dict: "mrr@10" = sum over ranked queries with relevant passages of the
      reciprocal rank of the first relevant one in the top 10, divided by the
      number of qrels queries that have relevant passages (a judged query the
      run lacks counts 0; a ranked query without judgements is ignored);
      "recall@k" = the mean over the same queries of the share of relevant
      pids in the top k, for each cutoff the rankings reach (k = cutoffs[0]
      always; a deeper k only if some query ranked more than the previous
      cutoff, else it would repeat it); and the query counts.
    Raises:
      ValueError: no ranked query is in the qrels (as the official script,
      which suspects the wrong evaluation set).
    """
    judged = {qid: pids for qid, pids in qrels.items() if pids}
    reciprocal_sum, found = 0.0, collections.Counter()
    ranked = matched = deepest = 0
    for qid, pids in ranked_queries:
        ranked += 1
        deepest = max(deepest, len(pids))
        relevant = judged.get(qid)
        if relevant is None:
            continue
        matched += 1
        reciprocal_sum += reciprocal_rank(pids, relevant)
        for cutoff in cutoffs:
            found[cutoff] += relevant_found(pids, relevant, cutoff) / float(len(relevant))
    if not matched:
        raise ValueError("no ranked query has relevant passages in the qrels")
    report = {"mrr@%d" % MRR_DEPTH: reciprocal_sum / len(judged),
              "queries_ranked": ranked, "queries_judged": len(judged),
              "queries_ranked_and_judged": matched}
    for index, cutoff in enumerate(cutoffs):
        if index == 0 or deepest > cutoffs[index - 1]:
            report["recall@%d" % cutoff] = found[cutoff] / len(judged)
    return report


def check_candidates_match_qrels(candidates_path, qids, qrels_path, qrels):
    """InputError (before anything is written) if no candidate query has relevant pids."""
    if not any(qrels.get(qid) for qid in qids):
        raise InputError("%s: none of its %d queries has a relevant passage in %s (are "
                         "candidates and qrels from the same set?)"
                         % (candidates_path, len(qids), qrels_path))


def format_report(report):
    """The one log line of an evaluation report."""
    return ", ".join("%s %s" % (k, ("%.4f" % v) if isinstance(v, float) and
                                not math.isnan(v) else v)
                     for k, v in sorted(report.items()))


def serving_config(max_query_length):
    """Settings a client needs to build pairs as training did (beside the export)."""
    return {"task": "reranking", "sentence_pairs": True,
            "max_query_length": max_query_length,
            "pair_layout": "[CLS] query [SEP] passage [SEP]; the passage is truncated "
                           "first", "score": "scores = P(relevant) = probabilities[:, 1]"}


class RerankingTask(fine_tuning.Task):
    """Passage re-ranking: classifier.py's 2-label head on query-passage pairs.

    examples: split -> PairSource (triples to train on, candidates to rank);
    qrels: the dev relevance judgements (for --do_eval). Evaluation ranks the
    dev candidates into dev_run.tsv and scores the ranking (MRR@10, recall@k);
    prediction writes test_run.tsv.
    """

    name = "reranking"
    text_inputs = ("text_a", "text_b")  # query, passage
    summary_keys = ("mrr@10", "recall@10", "recall@100", "recall@1000")
    streamed_eval = False
    predicts_eval_split = True
    int64_features = ID_FEATURES
    predict_keys = ["score", "margin"] + list(ID_FEATURES)
    RUN_FILES = {"eval": "dev_run.tsv", "predict": "test_run.tsv"}

    def __init__(self, examples, max_query_length, pooling="pooler", qrels=None):
        super().__init__(examples, LABELS, {"pooling": pooling})
        self.max_query_length = max_query_length
        self.qrels = qrels

    def examples_digest(self, source):
        return source_digest(source, self.max_query_length)

    def feature_rows(self, source, tokenizer, max_seq_length):
        return feature_rows(source, tokenizer, self.max_query_length, max_seq_length)

    def feature_spec(self, max_seq_length):
        return feature_spec(max_seq_length)

    def prediction_feature_spec(self, max_seq_length):
        return feature_spec(max_seq_length, with_ids=True)

    def head_fn(self, bert_config):
        return make_head_fn(bert_config.hidden_dropout_prob, self.head_settings["pooling"])

    def prediction_files(self, split, source, predictions):
        return [(self.RUN_FILES[split], run_file_lines(predictions))]

    def report_from_predictions(self, written):
        return evaluate_ranked(read_run(written[self.RUN_FILES["eval"]]), self.qrels)

    def serving_config(self):
        return serving_config(self.max_query_length)

    def text_features(self, texts, vocab_tokens, do_lower_case, max_seq_length):
        return text_pair_features(texts["text_a"], texts["text_b"], vocab_tokens,
                                  do_lower_case, self.max_query_length, max_seq_length)
