"""The official SQuAD scores, exact match and F1, written anew. No TensorFlow.

What the official evaluation scripts (v1.1 and v2.0) compute:

- An answer is normalised before comparing: lower-cased, punctuation
  (string.punctuation) removed, the articles a/an/the removed as whole words,
  whitespace collapsed to single spaces.
- exact match: 1 if the normalised prediction equals a normalised gold
  answer; F1: the harmonic mean of precision and recall of the normalised
  words shared with a gold answer (as multisets). Both take the best gold
  answer, and are averaged over questions x 100; a question without a
  prediction scores 0.
- v1.1 compares with every gold text as it is; v2.0 drops gold texts that
  normalise to nothing, and an unanswerable question's only gold answer is "" (so it scores 1
  exactly when the prediction is ""; F1 of an empty side is 1 if both are
  empty, else 0), scores split into HasAns_ and NoAns_, and, given the
  null odds (null score - best non-null score per question), the threshold
  on them that would have scored best (best_exact, best_f1 and their
  *_thresh), swept as the official script sweeps it.
"""

import collections
import re
import string

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text):
    """Lower-case, drop punctuation, drop the articles, single spaces."""
    text = "".join(char for char in text.lower() if char not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction, gold):
    """1.0 if the normalised texts are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction, gold, empty_matches_empty=True):
    """Word-overlap F1 of the normalised texts; when one is empty: 0.0, or 1.0
    if both are and `empty_matches_empty` (v2.0's rule; v1.1's gives 0.0)."""
    predicted = normalize_answer(prediction).split()
    expected = normalize_answer(gold).split()
    if not predicted or not expected:
        return float(empty_matches_empty and predicted == expected)
    shared = sum((collections.Counter(predicted) & collections.Counter(expected)).values())
    if not shared:
        return 0.0
    precision = shared / len(predicted)
    recall = shared / len(expected)
    return 2 * precision * recall / (precision + recall)


def best_over_gold(metric, prediction, gold_answers):
    """The best `metric` of `prediction` against any of `gold_answers`."""
    return max(metric(prediction, gold) for gold in gold_answers)


def gold_texts(answers):
    """The gold answers as scored: those with a normalised text, or [""] when
    none has one (an unanswerable question)."""
    texts = [text for text in answers if normalize_answer(text)]
    return texts or [""]


def raw_scores(gold, predictions, version_2=True):
    """(exact, f1): question id -> score in [0, 1] of each gold question.

    gold: id -> list of answer texts ([] for unanswerable); predictions: id ->
    predicted text (a missing id scores 0). version_2=False: v1.1's rules
    (every gold text counts, an empty one included; F1 of empty texts is 0).
    """
    exact, overlap = {}, {}
    for qid, answers in gold.items():
        if qid not in predictions:
            exact[qid] = overlap[qid] = 0.0
            continue
        texts = gold_texts(answers) if version_2 else answers
        exact[qid] = best_over_gold(exact_match, predictions[qid], texts)
        overlap[qid] = max(f1(predictions[qid], text, version_2) for text in texts)
    return exact, overlap


def _mean_percent(scores, ids):
    ids = list(ids)
    return 100.0 * sum(scores[qid] for qid in ids) / len(ids) if ids else 0.0


def best_threshold(scores, null_odds, has_answer, predictions):
    """(best score in percent, threshold): the null-odds threshold above which
    predicting "" scores best, as the official v2.0 script finds it.

    Starting with every question answered "" (all unanswerable ones right),
    questions are released in increasing order of their null odds: an
    answerable one then earns its score, an unanswerable one loses its point
    if its prediction is not "".
    """
    score = best = sum(1 for qid in scores if not has_answer[qid])
    threshold = 0.0
    for qid in sorted(null_odds, key=lambda k: null_odds[k]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            score += scores[qid]
        elif predictions.get(qid):
            score -= 1
        if score > best:
            best, threshold = score, null_odds[qid]
    return 100.0 * best / len(scores), threshold


def evaluate(gold, predictions, null_odds=None, version_2=False, best_spans=None):
    """The report written to eval_results: exact_match, f1 (percent), total;
    v2.0 also HasAns_/NoAns_ exact, f1 and total, and with `null_odds`
    best_exact, best_exact_thresh, best_f1, best_f1_thresh.

    gold: id -> list of gold answer texts ([] for unanswerable); predictions:
    id -> text; null_odds: id -> float.

    best_spans (v2.0, with null_odds): id -> the question's best non-empty
    answer. The official sweep releases the predictions as they are, so a run
    whose threshold answered "" everywhere finds no better threshold; the sweep
    over the best spans (best_span_exact, best_span_f1 and their _thresh) finds
    the threshold to re-run with.
    """
    exact, overlap = raw_scores(gold, predictions, version_2)
    report = {"exact_match": _mean_percent(exact, gold), "f1": _mean_percent(overlap, gold),
              "total": len(gold)}
    if not version_2:
        return report
    has_answer = {qid: any(normalize_answer(text) for text in answers)
                  for qid, answers in gold.items()}
    for prefix, wanted in (("HasAns_", True), ("NoAns_", False)):
        ids = [qid for qid in gold if has_answer[qid] == wanted]
        report[prefix + "exact"] = _mean_percent(exact, ids)
        report[prefix + "f1"] = _mean_percent(overlap, ids)
        report[prefix + "total"] = len(ids)
    if null_odds is not None:
        report["best_exact"], report["best_exact_thresh"] = best_threshold(
            exact, null_odds, has_answer, predictions)
        report["best_f1"], report["best_f1_thresh"] = best_threshold(
            overlap, null_odds, has_answer, predictions)
    if null_odds is not None and best_spans is not None:
        span_exact, span_overlap = raw_scores(gold, best_spans, version_2)
        report["best_span_exact"], report["best_span_exact_thresh"] = best_threshold(
            span_exact, null_odds, has_answer, best_spans)
        report["best_span_f1"], report["best_span_f1_thresh"] = best_threshold(
            span_overlap, null_odds, has_answer, best_spans)
    return report
