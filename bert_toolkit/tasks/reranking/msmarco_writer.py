"""dl4marco-bert's MS MARCO records written from run_reranking.py's TSV files.

What nyu-dl/dl4marco-bert's convert_msmarco_to_tfrecord.py makes of MS MARCO's
files (the format: msmarco_records.py), made from the files run_reranking.py
reads (data.py: triples, candidates, qrels), so that records can be made from
any ranking task and compared with its TSV files: bench/write_dl4marco_records.py
is the command. As the converter does:

  - a query is [CLS] + its first max_query_length - 2 pieces + [SEP], a passage
    its first max_seq_length - len(query record) - 2 pieces + [SEP];
  - training records are each triple's positive (label 1), then its negative;
  - dev and eval records come query by query, each query padded to
    num_eval_docs records with FAKE DOCUMENTs (doc id 00000000, label 0);
    a dev record's label is 1 when the qrels judge its pair relevant;
  - query_doc_ids_{dev,eval}.txt has one `query_id \\t doc_id` line per record.

Differences, deliberate: the candidates of a query are found by its qid (the
converter grouped them by the query's text), and a query with more than
num_eval_docs candidates is one InputError line (the converter stopped on an
assertion). Every file is written atomically.
"""

import os

from bert_toolkit import console, fileio
from bert_toolkit.engine import input_pipeline
from bert_toolkit.errors import InputError, input_error
from bert_toolkit.tasks.reranking import data, msmarco_records

FAKE_DOCUMENT = "FAKE DOCUMENT"
# Pairs tokenized at a time: bounds memory on large files.
CHUNK_PAIRS = 4096


def query_record(layout, query_ids, max_query_length):
    """[CLS] query [SEP], the query cut to max_query_length - 2 pieces."""
    return [layout.cls_id] + list(query_ids[:max(max_query_length - 2, 0)]) + [layout.sep_id]


def doc_record(layout, doc_ids, max_seq_length, query_record_length):
    """passage [SEP], the passage cut to max_seq_length - query_record_length - 2
    pieces (the converter's arithmetic: its pairs end one short of max_seq_length)."""
    keep = max(max_seq_length - query_record_length - 2, 0)
    return list(doc_ids[:keep]) + [layout.sep_id]


def _record(query, doc, label):
    return {"query_ids": query, "doc_ids": doc, "label": [label]}


def train_rows(tokenizer, triples_path, max_query_length, max_seq_length, limit=None):
    """Yields the feature dicts of the training records of a triples file."""
    layout = tokenizer.layout
    for chunk in fileio.chunks(data.read_triples(triples_path, limit), CHUNK_PAIRS // 2):
        queries = tokenizer.encode_batch([triple[1] for triple in chunk])
        docs = tokenizer.encode_batch([text for triple in chunk for text in triple[2:]])
        for index, query_ids in enumerate(queries):
            query = query_record(layout, query_ids, max_query_length)
            for offset, label in ((0, 1), (1, 0)):
                yield _record(query, doc_record(layout, docs[2 * index + offset],
                                                max_seq_length, len(query)), label)


def _padded_queries(candidates_path, num_eval_docs):
    """Yields (qid, query, [(pid or None, passage)] of num_eval_docs) query by
    query, a fake document (None, FAKE_DOCUMENT) filling the rest."""
    current, query, docs = None, None, []
    for candidate in data.read_candidates(candidates_path):
        if candidate.qid != current:
            if current is not None:
                yield current, query, docs + [(None, FAKE_DOCUMENT)] * (num_eval_docs - len(docs))
            current, query, docs = candidate.qid, candidate.query, []
        if len(docs) == num_eval_docs:
            raise input_error(candidates_path, candidate.line_number, "query %d has more than "
                              "--num_eval_docs=%d candidates" % (candidate.qid, num_eval_docs))
        docs.append((candidate.pid, candidate.passage))
    if current is not None:
        yield current, query, docs + [(None, FAKE_DOCUMENT)] * (num_eval_docs - len(docs))


def ranked_rows(tokenizer, candidates_path, qrels, max_query_length, max_seq_length,
                num_eval_docs):
    """Yields (feature dict, `query_id \\t doc_id` line) of the dev or eval records
    of a candidates file; qrels: qid -> relevant pids (None: labels 0)."""
    layout = tokenizer.layout
    queries_per_chunk = max(1, CHUNK_PAIRS // num_eval_docs)
    for chunk in fileio.chunks(_padded_queries(candidates_path, num_eval_docs),
                               queries_per_chunk):
        queries = tokenizer.encode_batch([query for _, query, _ in chunk])
        docs = tokenizer.encode_batch([text for _, _, pairs in chunk for _, text in pairs])
        for index, (qid, _, pairs) in enumerate(chunk):
            query = query_record(layout, queries[index], max_query_length)
            relevant = (qrels or {}).get(qid, ())
            for position, (pid, _) in enumerate(pairs):
                doc_ids = docs[index * num_eval_docs + position]
                doc = doc_record(layout, doc_ids, max_seq_length, len(query))
                line = "%d\t%s" % (qid, msmarco_records.FAKE_DOC_ID if pid is None
                                   else "%d" % pid)
                yield _record(query, doc, int(pid is not None and pid in relevant)), line


def write_ranked(path, ids_path, rows):
    """Writes (feature dict, ids line) rows to a records file and its ids file;
    returns the number of records."""
    with fileio.atomic_path(ids_path) as temporary:
        with fileio.open_file(temporary, "w") as ids_file:
            def records():
                for row, line in rows:
                    ids_file.write(line + "\n")
                    yield row
            return input_pipeline.write_tfrecord(path, records())


def write_dataset(output_folder, tokenizer, train_file=None, dev_file=None,
                  dev_qrels_file=None, eval_file=None, max_seq_length=512,
                  max_query_length=64, num_eval_docs=1000, max_train_triples=None):
    """Writes dataset_train.tf, dataset_dev.tf + query_doc_ids_dev.txt and
    dataset_eval.tf + query_doc_ids_eval.txt into output_folder from the files
    given (triples, candidates + qrels, candidates); returns file name -> records.

    tokenizer: the model's tokenization.FullTokenizer (BERT's layout).
    """
    if dev_file and not dev_qrels_file:
        raise InputError("--dev_qrels_path is required with --dev_dataset_path: the dev "
                         "records' labels come from the qrels")
    if max_query_length < 3 or max_seq_length < max_query_length + 3:
        raise InputError("--max_query_length=%d, --max_seq_length=%d: expected a query of at "
                         "least one piece ([CLS] query [SEP]) and room for a passage"
                         % (max_query_length, max_seq_length))
    fileio.makedirs(output_folder)
    written = {}
    if train_file:
        name = msmarco_records.FILES["train"][0]
        written[name] = input_pipeline.write_tfrecord(
            os.path.join(output_folder, name),
            train_rows(tokenizer, train_file, max_query_length, max_seq_length,
                       max_train_triples))
    for split, candidates in (("eval", dev_file), ("predict", eval_file)):
        if not candidates:
            continue
        qrels = data.read_qrels(dev_qrels_file) if split == "eval" else None
        name, ids_name = msmarco_records.FILES[split]
        written[name] = write_ranked(
            os.path.join(output_folder, name), os.path.join(output_folder, ids_name),
            ranked_rows(tokenizer, candidates, qrels, max_query_length, max_seq_length,
                        num_eval_docs))
    for name, count in sorted(written.items()):
        console.info("%s: %d records", os.path.join(output_folder, name), count)
    return written
