"""Re-ranking files: training triples, candidate lists, relevance judgements, run files.

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

Large files are streamed: scanned once to validate and count (a PairSource
stands in for the split's examples), then read again chunk by chunk when
converted. No TensorFlow.
"""

import collections

from bert_toolkit import fileio
from bert_toolkit.errors import InputError, input_error

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


def check_candidates_match_qrels(candidates_path, qids, qrels_path, qrels):
    """InputError (before anything is written) if no candidate query has relevant pids."""
    if not any(qrels.get(qid) for qid in qids):
        raise InputError("%s: none of its %d queries has a relevant passage in %s (are "
                         "candidates and qrels from the same set?)"
                         % (candidates_path, len(qids), qrels_path))
