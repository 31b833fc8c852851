"""Sentence (pair) classification: the Task, and `run` from ClassifierOptions.

`run(options)` is what run_classifier.py and run_custom_classifier.py do:
pick the data processor (--task_name, a GLUE task, `custom` or one of yours
through --processor_module), read and check every split the run needs, then
fine-tune, evaluate, predict and export through the shared flow
(engine/fine_tuning.py). The head is head.py, the features features.py, the
result files outputs.py, the readers data.py.
"""

from bert_toolkit import console
from bert_toolkit.engine import base_task, fine_tuning, run_folder
from bert_toolkit.errors import InputError
from bert_toolkit.tasks import registry
from bert_toolkit.tasks.classification import data, features, head, outputs
from bert_toolkit.tasks.classification.options import FORK_SERVING_INPUTS
from bert_toolkit.text import graph_tokenization


def run(options):
    """Fine-tunes, evaluates, predicts and exports as ClassifierOptions say; returns
    the launch.Report (the evaluation dict, checkpoints, export, prediction files)."""
    processor = make_processor(options)
    multi_label = getattr(processor, "is_multi_label", False)
    label_list = run_folder.choose_label_list(
        options.output_dir, options.do_train,
        lambda: data.labels_of(processor, options.data_dir))
    examples = read_examples(processor, label_list, options)
    stride = options.window_stride
    task = ClassifierTask(
        examples, label_list,
        multi_label=multi_label, threshold=options.multi_label_threshold,
        pooling=options.pooling, label_separator=options.label_separator or "|",
        task_name=options.task_name, serving_compat=options.serving_compat,
        label_weights=label_weights(examples, label_list, options, multi_label),
        long_text=options.long_text, doc_stride=stride,
        window_aggregation=options.window_aggregation)
    return fine_tuning.run(task, options)


def make_processor(options):
    """The DataProcessor of --task_name: a registered one (after importing
    --processor_module, which may register its own), or the module's class named
    as Google's users name theirs (the task name plus "Processor")."""
    if options.processor_module:
        module = registry.import_user_module(options.processor_module, "processor_module")
        key = options.task_name.strip().lower()
        found = data.find_processor_class(key, module)
        if key not in data.PROCESSORS and found is not None:
            data.PROCESSORS[key] = found  # its base may be a copy of Google's DataProcessor
    return data.get_processor(options.task_name, **options.processor_settings())


def read_examples(processor, label_list, options):
    """Every split the run needs, read (and so validated) before anything is written."""
    multi_label = getattr(processor, "is_multi_label", False)
    wanted = {"train": options.do_train, "eval": options.do_eval,
              "predict": options.do_predict}
    if not options.data_dir and any(wanted.values()):
        raise InputError("--data_dir is required with --do_train/--do_eval/--do_predict")
    readers = {"train": processor.get_train_examples, "eval": processor.get_dev_examples,
               "predict": processor.get_test_examples}
    examples = {split: readers[split](options.data_dir) for split in readers if wanted[split]}
    for split, split_examples in examples.items():
        if not split_examples:
            raise InputError("--data_dir=%s: the %s file holds no examples"
                             % (options.data_dir, split))
        if split != "predict":
            unknown = {label for e in split_examples
                       for label in (e.label if multi_label else (e.label,))
                       if label not in label_list}
            if unknown:
                raise InputError("--data_dir=%s: %s labels %s are not in the label list %s"
                                 % (options.data_dir, split, sorted(unknown), label_list))
    if "train" in examples and not multi_label:
        check_labels_vary(examples["train"], options.data_dir)
    return examples


def check_labels_vary(train_examples, data_dir):
    """InputError if every training example has one label: the classifier would
    learn to answer it always, and report accuracy 1.0 on a dev set like it."""
    found = {example.label for example in train_examples}
    if len(found) == 1:
        raise InputError("--data_dir=%s: every training example has the label %r; a "
                         "classifier needs examples of at least two labels (check "
                         "--label_column)" % (data_dir, found.pop()))


def label_weights(examples, label_list, options, multi_label):
    """The --class_weights of a training run (None: unweighted), logged."""
    if not options.class_weights:
        return None
    if not options.do_train or multi_label:
        raise InputError("--class_weights weighs the training loss of a single-label "
                         "task: %s" % ("it needs --do_train" if not options.do_train
                                       else "this task is multi-label"))
    weights = head.class_weights(options.class_weights,
                                 [e.label for e in examples["train"]], label_list)
    console.info("class weights: %s", ", ".join(
        "%s %.4g" % (label, weight) for label, weight in zip(label_list, weights)))
    return weights


class ClassifierTask(base_task.Task):
    """Sentence (pair) classification, single- or multi-label (see the module docstring).

    examples: split -> [data.InputExample]; pooling: one of
    modeling.POOLING_MODES; task_name: recorded for clients; serving_compat:
    None (our export) or 'bert_multi_gpu' (options.FORK_SERVING_INPUTS).
    """

    summary_keys = ("accuracy", "micro_f1", "eval_loss")
    per_example_outputs = True

    def __init__(self, examples, label_list, multi_label=False, threshold=0.5,
                 pooling="pooler", label_separator="|", task_name="custom",
                 serving_compat=None, label_weights=None, long_text="truncate",
                 doc_stride=None, window_aggregation="mean"):
        settings = {"pooling": pooling}
        if "train" in examples:
            # Recorded when training, so a resume with other weights is refused.
            settings["class_weights"] = label_weights
        super().__init__(examples, label_list, settings)
        self.label_weights = label_weights
        self.windows = long_text == "windows"
        if self.windows and multi_label:
            raise InputError("--long_text=windows: single-label tasks only")
        self.doc_stride = doc_stride
        self.window_aggregation = window_aggregation
        # Metrics count documents: computed from the aggregated predictions.
        self.streamed_eval = not self.windows
        self.predicts_eval_split = self.windows
        self.multi_label = multi_label
        self.threshold = threshold
        self.label_separator = label_separator
        self.task_name = task_name
        self.name = "classification" + ("-multi-label" if multi_label else "")
        self.serving_compat = serving_compat
        self.extra_serving_inputs = FORK_SERVING_INPUTS if serving_compat else {}

    def examples_digest(self, examples):
        digest = features.examples_digest(examples)
        return digest + ("-windows-%d" % self.doc_stride if self.windows else "")

    def feature_rows(self, examples, tokenizer, max_seq_length):
        if self.windows:
            return list(features.window_feature_rows(examples, tokenizer, max_seq_length,
                                            self.doc_stride, self.label_list,
                                            self.multi_label))
        return list(features.feature_rows(examples, tokenizer, max_seq_length, self.label_list,
                                 self.multi_label))

    def feature_spec(self, max_seq_length):
        return features.feature_spec(max_seq_length, len(self.label_list), self.multi_label,
                            self.windows)

    def head_fn(self, bert_config):
        return head.make_head_fn(len(self.label_list), bert_config.hidden_dropout_prob,
                            self.multi_label, self.threshold, self.head_settings["pooling"],
                            probabilities_only=self.serving_compat is not None,
                            label_weights=self.label_weights)

    def eval_report(self, results):
        return head.eval_report(results, self.label_list, self.multi_label)

    def prediction_files(self, split, examples, predictions):
        if self.windows:
            predictions = outputs.per_document(predictions, len(examples), self.label_list,
                                       self.multi_label, self.threshold,
                                       self.window_aggregation)
        predictions = list(predictions)  # read by both files
        if split == "eval":
            return [(outputs.DEV_PREDICTIONS_FILE,
                     outputs.dev_prediction_lines(examples, predictions, self.label_list))]
        return [(outputs.GOOGLE_RESULTS_FILE, outputs.google_result_lines(predictions)),
                (outputs.PREDICTIONS_FILE, outputs.prediction_lines(
                    examples, predictions, self.label_list, self.multi_label,
                    self.label_separator))]

    def report_from_predictions(self, written):
        return outputs.document_report(written[outputs.DEV_PREDICTIONS_FILE], self.label_list)

    @property
    def text_inputs(self):
        if self.windows:
            return ()  # one text is several rows: serving_client cuts and aggregates
        return ("text_a", "text_b") if self.sentence_pairs else ("text_a",)

    @property
    def sentence_pairs(self):
        return any(e.text_b is not None for split in self.examples.values() for e in split)

    def text_features(self, texts, vocab_tokens, do_lower_case, max_seq_length):
        return graph_tokenization.text_features(texts["text_a"], texts.get("text_b"),
                                                vocab_tokens, do_lower_case, max_seq_length)

    def serving_config(self):
        return {"task": "classification", "task_name": self.task_name,
                "serving_compat": self.serving_compat,
                "multi_label": self.multi_label,
                "multi_label_threshold": self.threshold,
                "sentence_pairs": self.sentence_pairs,
                "long_text": "windows" if self.windows else "truncate",
                "doc_stride": self.doc_stride, "window_aggregation": self.window_aggregation}
