"""run_squad.py's settings: Google's SQuAD flags, with its defaults."""

import dataclasses
from typing import Optional

from bert_toolkit.engine.options import FineTuningOptions, ModelOptions, RunOptions
from bert_toolkit.errors import InputError
from bert_toolkit.options import inherit, option
from bert_toolkit.tasks.squad import features as squad_features


@dataclasses.dataclass(frozen=True)
class SquadOptions(FineTuningOptions):
    max_seq_length: int = inherit(ModelOptions, "max_seq_length", 384)
    eval_batch_size: Optional[int] = inherit(
        RunOptions, "eval_batch_size", None,
        help="Examples per replica when a predict file with answers is scored (default: "
        "--predict_batch_size).")
    train_file: Optional[str] = option(
        None, "SQuAD JSON to train on (e.g. train-v1.1.json); relative to --data_dir if "
        "given.")
    predict_file: Optional[str] = option(
        None, "SQuAD JSON to answer with --do_predict (e.g. dev-v1.1.json); when its "
        "questions have answers, the predictions are also scored (eval_results.txt).")
    doc_stride: int = option(
        128, "Context pieces between the starts of a question's windows when the context "
        "does not fit one window.")
    max_query_length: int = option(64, "Question pieces kept (longer questions are cut).")
    n_best_size: int = option(
        20, "Answers listed per question in nbest_predictions.json (and start/end "
        "candidates per window).")
    max_answer_length: int = option(30, "Longest answer, in WordPiece tokens.")
    version_2_with_negative: bool = option(
        False, "SQuAD 2.0: questions may be unanswerable (is_impossible); the null answer "
        "competes with the spans.")
    null_score_diff_threshold: float = option(
        0.0, "v2.0: predict no answer when the null score minus the best span's score is "
        "above this.")
    verbose_logging: bool = option(False, "Accepted for Google's command lines; no effect.")

    def check(self):
        for name in ("n_best_size", "max_answer_length"):
            if getattr(self, name) < 1:
                raise InputError("--%s=%d: expected at least 1" % (name, getattr(self, name)))
        squad_features.check_window_settings(self.max_seq_length, self.doc_stride,
                                         self.max_query_length)
        if self.do_train and not self.train_file:
            raise InputError("--train_file is required with --do_train")
        if (self.do_predict or self.do_eval) and not self.predict_file:
            raise InputError("--predict_file is required with --do_predict (and --do_eval, "
                             "which scores it)")
