"""Passage re-ranking (MS MARCO style): features, the head, the Task, and `run`.

A query and one candidate passage are one pair, [CLS] query [SEP] passage [SEP]
(in the model family's layout: RoBERTa's <s> query </s></s> passage </s>);
the model is the 2-label classifier head of tasks/classification/head.py
(label 1 = relevant) and a pair's score is P(relevant). The candidates of each
query are sorted by it (ranking.py). The files are read by data.py: large
ones are scanned once to validate and count, then converted to TFRecord chunk
by chunk, and the ranked run file is written one query at a time as the
predictions arrive.

`run(options)` is what run_reranking.py does.
"""


import numpy as np
import tensorflow as tf

from bert_toolkit import fileio
from bert_toolkit.engine import base_task, fine_tuning, input_pipeline
from bert_toolkit.errors import InputError
from bert_toolkit.tasks.classification import head as classifier_head
from bert_toolkit.tasks.reranking import data, msmarco_records, ranking
from bert_toolkit.text import graph_tokenization

LABELS = ("0", "1")
ID_FEATURES = ("query_id", "passage_id")
# Pairs tokenized at a time while converting: bounds memory on huge files.
CHUNK_PAIRS = 4096
# Bumped when the features written for the same inputs change.
_FEATURE_VERSION = 1


# ---------------------------------------------------------------------------
# Reading files


# ---------------------------------------------------------------------------
# Features


def pair_lengths(query_length, passage_length, max_query_length, max_seq_length,
                 pair_specials=3):
    """Tokens kept of the query and of the passage.

    The query keeps at most `max_query_length` tokens; the passage gets what
    is left of max_seq_length after the query and the `pair_specials` special
    tokens ([CLS], [SEP], [SEP]; RoBERTa's layout has 4). So the passage is the
    one cut when the pair is too long, and a short query leaves more room for
    its passage.
    """
    kept_query = min(query_length, max_query_length)
    return kept_query, min(passage_length, max_seq_length - pair_specials - kept_query)


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


def check_query_length(tokenizer, max_query_length, max_seq_length):
    """The tokenizer's Layout; InputError when max_query_length leaves the passage no
    token beside the layout's special tokens (RoBERTa's pairs have one more than
    the options' check counts)."""
    layout = tokenizer.layout
    if max_seq_length - layout.pair_specials - max_query_length < 1:
        raise InputError("--max_query_length=%d: expected at most --max_seq_length - %d = %d "
                         "(the passage needs a token besides the %d special tokens of this "
                         "model's pairs)" % (max_query_length, layout.pair_specials + 1,
                                             max_seq_length - layout.pair_specials - 1,
                                             layout.pair_specials))
    return layout


def encode_pairs(tokenizer, queries, passages, max_query_length, max_seq_length):
    """(input_ids, input_mask, segment_ids), int32 [len(queries), max_seq_length].

    Rows are the tokenizer's layout of the pair (tokenization.Layout: BERT's
    [CLS] query [SEP] passage [SEP], the passage's segment ids 1), padded with
    its pad id. InputError when max_query_length leaves the passage no token.
    """
    layout = check_query_length(tokenizer, max_query_length, max_seq_length)
    query_ids = tokenizer.encode_batch(queries)
    passage_ids = tokenizer.encode_batch(passages)
    shape = (len(query_ids), max_seq_length)
    input_ids = np.full(shape, layout.pad_id, np.int32)
    input_mask = np.zeros(shape, np.int32)
    segment_ids = np.zeros(shape, np.int32)
    for row, (query, passage) in enumerate(zip(query_ids, passage_ids)):
        len_q, len_p = pair_lengths(len(query), len(passage), max_query_length,
                                    max_seq_length, layout.pair_specials)
        tokens, segments = layout.row(query[:len_q], passage[:len_p])
        input_ids[row, :len(tokens)] = tokens
        input_mask[row, :len(tokens)] = 1
        segment_ids[row, :len(tokens)] = segments
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
    dl4marco-bert's records (a msmarco_records.RecordSource) are read there.
    """
    if source.kind == msmarco_records.KIND:
        yield from msmarco_records.feature_rows(source, tokenizer.layout, max_query_length,
                                                max_seq_length)
        return
    if source.kind == "triples":
        pairs = ((query, passage, label, {})
                 for _, query, positive, negative in data.read_triples(source.path, source.limit)
                 for passage, label in ((positive, 1), (negative, 0)))
    else:
        pairs = ((c.query, c.passage, 0, {"query_id": [c.qid], "passage_id": [c.pid]})
                 for c in data.read_candidates(source.path))
    for chunk in fileio.chunks(pairs, chunk_pairs):
        for row in _rows(tokenizer, chunk, max_query_length, max_seq_length):
            yield row


def source_digest(source, max_query_length):
    """The cache key part of a PairSource: its file's fingerprint and our settings."""
    if source.kind == msmarco_records.KIND:
        return msmarco_records.source_digest(source, max_query_length)
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
    """classifier_head.make_head_fn's 2-label softmax head, with relevance scores added.

    Predictions gain `score` (P(relevant), float32 [batch]), `margin` (the
    logit of "relevant" minus that of "not relevant", the ranking key: it
    orders like P(relevant) but does not round to 1.0 for confident pairs)
    and the query and passage ids when the features carry them. The serving
    signature gains `scores` [batch].
    """
    classify = classifier_head.make_head_fn(len(LABELS), dropout_prob, pooling=pooling)

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


def serving_config(max_query_length):
    """Settings a client needs to build pairs as training did (beside the export)."""
    return {"task": "reranking", "sentence_pairs": True,
            "max_query_length": max_query_length,
            "pair_layout": "[CLS] query [SEP] passage [SEP]; the passage is truncated "
                           "first", "score": "scores = P(relevant) = probabilities[:, 1]"}


class RerankingTask(base_task.Task):
    """Passage re-ranking: the classifier's 2-label head on query-passage pairs.

    examples: split -> PairSource (triples to train on, candidates to rank);
    qrels: the dev relevance judgements (for --do_eval). Evaluation ranks the
    dev candidates into dev_run.tsv and scores the ranking (MRR@10, recall@k);
    prediction writes test_run.tsv.
    """

    name = "reranking"
    text_inputs = ("text_a", "text_b")  # query, passage
    per_example_outputs = True
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
        # Checked now: the rows stream out only once output_dir is the run's.
        check_query_length(tokenizer, self.max_query_length, max_seq_length)
        return feature_rows(source, tokenizer, self.max_query_length, max_seq_length)

    def feature_spec(self, max_seq_length):
        return feature_spec(max_seq_length)

    def prediction_feature_spec(self, max_seq_length):
        return feature_spec(max_seq_length, with_ids=True)

    def head_fn(self, bert_config):
        return make_head_fn(bert_config.hidden_dropout_prob, self.head_settings["pooling"])

    def prediction_files(self, split, source, predictions):
        return [(self.RUN_FILES[split], ranking.run_file_lines(predictions))]

    def report_from_predictions(self, written):
        return ranking.evaluate_ranked(data.read_run(written[self.RUN_FILES["eval"]]), self.qrels)

    def serving_config(self):
        return serving_config(self.max_query_length)

    def text_features(self, texts, vocab_tokens, do_lower_case, max_seq_length):
        return text_pair_features(texts["text_a"], texts["text_b"], vocab_tokens,
                                  do_lower_case, self.max_query_length, max_seq_length)


# -- the run --------------------------------------------------------------------------

def run(options):
    """Fine-tunes, ranks, scores and exports as RerankingOptions say; returns the
    launch.Report. A split whose TSV file data_dir lacks reads dl4marco-bert's
    records there instead (msmarco_records.py)."""
    options, model_inputs, records = msmarco_records.settle(options)
    sources, qrels = scan_inputs(options, records, model_inputs)
    options = msmarco_records.in_epochs(options, len(sources.get("train", ())))
    report = fine_tuning.run(RerankingTask(sources, options.max_query_length, options.pooling,
                                           qrels), options, model_inputs)
    msmarco_records.write_msmarco_output(options, report, bool(records))
    return report


def scan_inputs(options, records=None, model_inputs=None):
    """Every split the run needs, validated and counted; the dev qrels (or None).

    records: split -> (records path, ids path) of the splits read from
    dl4marco-bert's records (msmarco_records.settle), checked against
    model_inputs' tokenizer.
    """
    sources, qrels, records = {}, None, records or {}
    tokenizer = model_inputs.tokenizer if model_inputs else None
    if options.do_train and "train" in records:
        sources["train"] = msmarco_records.scan_train(records["train"][0], tokenizer,
                                                      options.max_train_triples or None)
    elif options.do_train:
        sources["train"] = data.scan_triples(options.data_path("train_file"),
                                             options.max_train_triples or None)
    if options.do_eval and "eval" in records:
        sources["eval"], qrels = msmarco_records.scan_dev(*records["eval"], tokenizer,
                                                          options.num_eval_docs)
    elif options.do_eval:
        sources["eval"], qids = data.scan_candidates(options.data_path("dev_file"))
        qrels = data.read_qrels(options.data_path("dev_qrels_file"))
        data.check_candidates_match_qrels(options.data_path("dev_file"), qids,
                                          options.data_path("dev_qrels_file"), qrels)
    if options.do_predict and "predict" in records:
        sources["predict"], _ = msmarco_records.scan_ranked(*records["predict"], tokenizer,
                                                            options.num_eval_docs)
    elif options.do_predict:
        sources["predict"], _ = data.scan_candidates(options.data_path("test_file"))
    return sources, qrels
