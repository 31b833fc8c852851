"""run_reranking.py's settings: the MS MARCO files and the query's share of a pair."""

import dataclasses

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
        "data_dir).")
    max_train_triples: int = option(0, "Use only the first N triples (0: all).", minimum=0)
    dev_file: str = option(
        "top1000.dev", "Dev candidates `qid \\t pid \\t query \\t passage` (in data_dir).")
    dev_qrels_file: str = option(
        "qrels.dev.tsv", "Dev relevance judgements `qid 0 pid relevance` (in data_dir).")
    test_file: str = option("top1000.eval", "Candidates ranked by --do_predict (in data_dir).")

    def check(self):
        if not 1 <= self.max_query_length <= self.max_seq_length - 4:
            raise InputError("--max_query_length=%d: expected 1 to --max_seq_length - 4 = %d "
                             "(the passage needs a token besides [CLS], [SEP], [SEP])"
                             % (self.max_query_length, self.max_seq_length - 4))
