"""BERT on TensorFlow Estimators: fine-tune, pre-train and serve, on one device or many.

The Python API in a few names (each imported when first used, so that
`import bert_toolkit` stays light):

    import bert_toolkit as bt

    report = bt.run(bt.ClassifierOptions(
        task_name="custom", data_dir="data", text_a_column="sentence",
        label_column="label", vocab_file=..., bert_config_file=...,
        init_checkpoint=..., output_dir="runs/sentiment", do_train=True,
        do_eval=True, save_for_serving=True))
    report.eval["accuracy"], report.checkpoint, report.export_dir
    bt.predict(report.export_dir, ["a gripping story", "dull"])
    bt.export_hf("runs/sentiment", "runs/sentiment-hf")   # for transformers

`run` takes the options of any task (the command-line flags are made from the
same classes: a field is a flag), `predict` answers raw text with an export in
this process, `export_hf` writes a run's model as a Hugging Face folder, and
`register_task` adds a task of your own. See docs/api.md.
"""

from bert_toolkit import tensorflow_env  # noqa: F401  (before anything imports TensorFlow)

_API = {
    "run": "bert_toolkit.api:run",
    "predict": "bert_toolkit.api:predict",
    "export_hf": "bert_toolkit.api:export_hf",
    "register_task": "bert_toolkit.tasks.registry:register_task",
    "Report": "bert_toolkit.engine.launch:Report",
    "InputError": "bert_toolkit.errors:InputError",
    "ClassifierOptions": "bert_toolkit.tasks.classification.options:ClassifierOptions",
    "SeqLabelingOptions": "bert_toolkit.tasks.seq_labeling.options:SeqLabelingOptions",
    "SquadOptions": "bert_toolkit.tasks.squad.options:SquadOptions",
    "RerankingOptions": "bert_toolkit.tasks.reranking.options:RerankingOptions",
    "PretrainingOptions": "bert_toolkit.tasks.pretraining.options:PretrainingOptions",
    "PretrainingDataOptions":
        "bert_toolkit.tasks.pretraining.options:PretrainingDataOptions",
    "FeatureExtractionOptions":
        "bert_toolkit.tasks.features.options:FeatureExtractionOptions",
    "FineTuningOptions": "bert_toolkit.engine.options:FineTuningOptions",
}

__all__ = sorted(_API)


def __getattr__(name):
    if name not in _API:
        raise AttributeError("module 'bert_toolkit' has no attribute %r" % name)
    import importlib
    module_name, _, attribute = _API[name].partition(":")
    value = getattr(importlib.import_module(module_name), attribute)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
