"""Entity spans and their precision, recall and F1, counted exactly as conlleval counts.

conlleval is the CoNLL shared tasks' scoring script: a chunk is a maximal run
of words of one entity type started as its B-/I-/E-/S- tags say, and a
predicted chunk counts as correct only when a true chunk has the same first
word, end and type. The BIOES extension (E-, S-) follows its later versions;
BMES tags (M- for a middle word, as the multi-GPU fork's NAMED_ENTITY task has
them) read as BIOES, M- being I-. No TensorFlow.
"""

from bert_toolkit.engine import scores

_BIOES_PREFIXES = ("B", "I", "E", "S")


def split_tag(label):
    """(prefix, type) of a chunk tag as conlleval splits it: "B-geo-loc" -> ("B",
    "geo-loc"), "O" -> ("O", ""); BMES's middle "M-o" -> ("I", "o")."""
    prefix, _, entity_type = label.partition("-")
    return ("I" if prefix == "M" else prefix), entity_type


def is_bioes_tag(label):
    """Whether `label` is O or one of B-, I- (or M-), E-, S- followed by an entity type."""
    prefix, entity_type = split_tag(label)
    return label == "O" or (prefix in _BIOES_PREFIXES and bool(entity_type))


def chunk_ends(prev_tag, tag, prev_type, entity_type):
    """Whether a chunk ends between a word tagged (prev_tag, prev_type) and the
    next (tag, entity_type): conlleval's endOfChunk with the common BIOES
    extension (the original script has no S, and would join S-X S-X)."""
    if prev_tag in ("E", "S"):
        return True
    if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev_tag != "O" and prev_type != entity_type


def chunk_starts(prev_tag, tag, prev_type, entity_type):
    """Whether a chunk starts at a word tagged (tag, entity_type) after one tagged
    (prev_tag, prev_type): conlleval's startOfChunk with the BIOES extension. An
    I- or E- after O, E- or S- starts a chunk; so does a change of type."""
    if tag in ("B", "S"):
        return True
    if tag in ("I", "E") and prev_tag in ("O", "E", "S"):
        return True
    return tag != "O" and prev_type != entity_type


def entity_spans(labels):
    """The chunks of one sentence's tags: [(first word, end word, type)].

    A sentence starts and ends as if next to an O, as conlleval treats the
    blank line between sentences.
    """
    spans = []
    start = None
    prev_tag, prev_type = "O", ""
    for position, label in enumerate(list(labels) + ["O"]):
        tag, entity_type = split_tag(label)
        if start is not None and chunk_ends(prev_tag, tag, prev_type, entity_type):
            spans.append((start, position, prev_type))
            start = None
        if chunk_starts(prev_tag, tag, prev_type, entity_type):
            start = position
        prev_tag, prev_type = tag, entity_type
    return spans


def entity_counts(true_sentences, predicted_sentences):
    """type -> [correct, true, predicted] chunk counts over sentences of tags.

    A predicted chunk is correct when a true chunk has the same first word,
    end and type (conlleval's exact match).
    """
    counts = {}
    for true_labels, predicted_labels in zip(true_sentences, predicted_sentences):
        if len(true_labels) != len(predicted_labels):
            raise ValueError("%d true but %d predicted labels"
                             % (len(true_labels), len(predicted_labels)))
        true_spans = entity_spans(true_labels)
        predicted_spans = entity_spans(predicted_labels)
        for _, _, entity_type in true_spans:
            counts.setdefault(entity_type, [0, 0, 0])[1] += 1
        for _, _, entity_type in predicted_spans:
            counts.setdefault(entity_type, [0, 0, 0])[2] += 1
        for _, _, entity_type in set(true_spans) & set(predicted_spans):
            counts[entity_type][0] += 1
    return counts


def entity_report(counts, entity_types=()):
    """Overall and per-type entity precision, recall, F1 and counts (a flat dict).

    counts: type -> [correct, true, predicted]; entity_types: types reported
    even when they occur nowhere (e.g. every type of the label set).
    """
    totals = [sum(c[i] for c in counts.values()) for i in range(3)]
    precision, recall, f1 = scores.precision_recall_f1(*totals)
    report = {"entity_precision": precision, "entity_recall": recall, "entity_f1": f1,
              "num_entities": totals[1], "num_predicted_entities": totals[2],
              "num_correct_entities": totals[0]}
    for entity_type in sorted(set(entity_types) | set(counts)):
        correct, true, predicted = counts.get(entity_type, (0, 0, 0))
        precision, recall, f1 = scores.precision_recall_f1(correct, true, predicted)
        report["entity_precision[%s]" % entity_type] = precision
        report["entity_recall[%s]" % entity_type] = recall
        report["entity_f1[%s]" % entity_type] = f1
        report["num_entities[%s]" % entity_type] = true
    return report


def entity_types(label_list):
    """The entity types of a BIO/BIOES label list."""
    return sorted({split_tag(label)[1] for label in label_list if label != "O"})
