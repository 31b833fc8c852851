"""The Task: what one fine-tuning task contributes to the shared flow (fine_tuning.py).

A task (bert_toolkit/tasks/*) turns its examples into feature rows, gives
their TFRecord spec and the head on top of BERT, and turns predictions into
its report and output files; the flow does everything else.
"""

from bert_toolkit.engine import input_pipeline


class Task(object):
    """What one fine-tuning script contributes; `run` does the rest.

    A subclass sets `name` and implements `feature_rows`, `feature_spec` and
    `head_fn`; the other methods have defaults that suit a classifier-like
    head of `output_weights` [num_labels, hidden] and `output_bias`.

    examples: split ("train", "eval", "predict") -> the split's examples, read
      and validated (a list, or a sized source a streaming task reads again).
    label_list: the label names, in label-id order.
    head_settings: flag name -> value of the flags that shape the head without
      changing its variables (e.g. pooling); recorded in output_dir, and a
      later run with other values is refused.
    """

    name = "task"                 # part of the feature cache key
    summary_keys = ("eval_loss",)  # the report entries logged after evaluation
    streamed_eval = True          # evaluate with Estimator.evaluate (distributed)
    predicts_eval_split = False   # also predict the eval split (report_from_predictions)
    int64_features = ()           # features kept int64 in prediction (e.g. large ids)
    masked_token_features = ()    # per-token features besides input_ids, input_mask and
    #                               segment_ids that are masked out past the text (e.g.
    #                               per-token labels): cut with them to a batch's longest text
    predict_keys = None           # the predictions Estimator.predict computes (None: all)
    text_inputs = ()              # the export's raw-text signature's inputs (): none
    per_example_outputs = False   # no prediction has a token axis: prediction and the
    #                               export cut each batch to its longest text, and the
    #                               encoder skips the padding in every mode
    extra_serving_inputs = {}     # name -> shape of int32 inputs the export accepts and
    #                               ignores (requests of other clients; see export.py)

    def __init__(self, examples, label_list, head_settings=None):
        self.examples = dict(examples)
        self.label_list = list(label_list)
        self.head_settings = dict(head_settings or {})

    def examples_digest(self, examples):
        """A hash of the examples and of the settings their features depend on."""
        return input_pipeline.fingerprint([repr(example) for example in examples])

    def feature_rows(self, examples, tokenizer, max_seq_length):
        """The feature dicts of `examples`: a list, or an iterator yielding exactly
        len(examples) rows (streaming tasks), in example order."""
        raise NotImplementedError

    def feature_spec(self, max_seq_length):
        """name -> tf.io.FixedLenFeature of the records training and eval read."""
        raise NotImplementedError

    def prediction_feature_spec(self, max_seq_length):
        """The records' features prediction reads (default: feature_spec's)."""
        return self.feature_spec(max_seq_length)

    def head_variable_shapes(self, hidden_size):
        """name -> shape of the head's variables (checked against checkpoints)."""
        return {"output_weights": [len(self.label_list), hidden_size],
                "output_bias": [len(self.label_list)]}

    def head_fn(self, bert_config):
        """`head_fn(model, features, mode) -> model_fn_builder.Head`, for
        model_fn_builder.build_model_fn."""
        raise NotImplementedError

    def eval_report(self, results):
        """The flat report of Estimator.evaluate's results (streamed_eval)."""
        return {"eval_loss": float(results["eval_loss"]),
                "global_step": int(results["global_step"])}

    def prediction_files(self, split, examples, predictions):
        """[(file name, lines)] written to output_dir from one split's predictions.

        predictions: an iterator of per-record dicts, in record order; lines
        may be an iterator (written as it is consumed).
        """
        return []

    def report_from_predictions(self, written):
        """Eval metrics that need whole predictions (predicts_eval_split), from the
        files prediction_files("eval", ...) wrote: name -> path."""
        return {}

    def serving_config(self):
        """Task settings a client needs, beside labels and tokenizer settings."""
        return {}

    def text_features(self, texts, vocab_tokens, do_lower_case, max_seq_length):
        """The export's `text` signature: the model's int32 features [batch,
        max_seq_length] from tf.string [batch] texts (name in text_inputs ->
        tensor), tokenized in the graph exactly as feature_rows does."""
        raise NotImplementedError
