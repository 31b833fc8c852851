"""run_reranking.py's settings: the MS MARCO files and the query's share of a pair.

The data are the TSV files (data.py) or, where data_dir holds them instead,
dl4marco-bert's records (msmarco_records.py), whose flags that mean the same
are accepted: --max_query_length, --num_eval_docs, --msmarco_output,
--num_train_steps and --num_warmup_steps.
"""

import dataclasses
from typing import Optional

from bert_toolkit.engine.options import FineTuningOptions, ModelOptions, PoolingOptions
from bert_toolkit.errors import InputError
from bert_toolkit.options import inherit, option


@dataclasses.dataclass(frozen=True)
class RerankingOptions(FineTuningOptions, PoolingOptions):
    max_seq_length: int = inherit(ModelOptions, "max_seq_length", 512)
    max_query_length: int = option(
        64, "Most query tokens kept; the passage gets the rest of max_seq_length after the "
        "query and [CLS], [SEP], [SEP].")
    train_file: str = option(
        "triples.train.small.tsv", "Training triples `query \\t positive \\t negative` (in "
        "data_dir). Without it, data_dir's dataset_train.tf (dl4marco-bert's records).")
    max_train_triples: int = option(
        0, "Use only the first N triples (0: all); of dl4marco-bert's records, the first 2N.",
        minimum=0)
    dev_file: str = option(
        "top1000.dev", "Dev candidates `qid \\t pid \\t query \\t passage` (in data_dir). "
        "Without it, data_dir's dataset_dev.tf and query_doc_ids_dev.txt (dl4marco-bert's "
        "records, labelled from the qrels).")
    dev_qrels_file: str = option(
        "qrels.dev.tsv", "Dev relevance judgements `qid 0 pid relevance` (in data_dir).")
    test_file: str = option(
        "top1000.eval", "Candidates ranked by --do_predict (in data_dir). Without it, "
        "data_dir's dataset_eval.tf and query_doc_ids_eval.txt (dl4marco-bert's records).")
    num_eval_docs: int = option(
        1000, "dl4marco-bert's dev and eval records: every num_eval_docs consecutive records "
        "are one query's candidates (padded with fake documents, doc id 00000000), as "
        "convert_msmarco_to_tfrecord.py wrote them.", minimum=1)
    msmarco_output: Optional[bool] = option(
        None, "Also write dl4marco-bert's run files, `query_id \\t doc_id \\t rank`: "
        "msmarco_predictions_dev.tsv (--do_eval) and msmarco_predictions_eval.tsv "
        "(--do_predict). Default: when dl4marco-bert's records are read.")
    num_train_steps: Optional[int] = option(
        None, "Optimizer steps to train (dl4marco-bert's flag), instead of "
        "--num_train_epochs (turned into the epochs that plan exactly these steps).",
        minimum=1)
    num_warmup_steps: Optional[int] = option(
        None, "Optimizer steps of learning-rate warmup (dl4marco-bert's flag), instead of "
        "--warmup_proportion.", minimum=0)

    def check(self):
        if not 1 <= self.max_query_length <= self.max_seq_length - 4:
            raise InputError("--max_query_length=%d: expected 1 to --max_seq_length - 4 = %d "
                             "(the passage needs a token besides [CLS], [SEP], [SEP])"
                             % (self.max_query_length, self.max_seq_length - 4))
