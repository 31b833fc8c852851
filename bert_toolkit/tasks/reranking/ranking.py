"""Ranking candidates by their scores, the run file, and MRR@10 and recall@k.

Evaluation follows the official MS MARCO passage ranking script
(microsoft/MSMARCO-Passage-Ranking, ms_marco_eval.py, `compute_metrics`):
for every ranked query that has relevant passages, the reciprocal rank of the
first relevant passage among its top 10 (0 if none is there); the sum is
divided by the number of queries in the qrels, so a judged query missing
from the run counts as 0 and a ranked query without judgements is ignored.
See docs/reranking.md for the details and the one deliberate difference.
No TensorFlow.
"""

import collections
import math

MRR_DEPTH = 10


RECALL_CUTOFFS = (10, 100, 1000)


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


def format_report(report):
    """The one log line of an evaluation report."""
    return ", ".join("%s %s" % (k, ("%.4f" % v) if isinstance(v, float) and
                                not math.isnan(v) else v)
                     for k, v in sorted(report.items()))
