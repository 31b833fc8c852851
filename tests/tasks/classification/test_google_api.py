"""Google's run_classifier.py as a module: code and processors written for it run here.

One test drives Google's functions the way its run_classifier_with_tfhub.py
does (processors, convert_examples_to_features, input_fn_builder,
file_based_convert_examples_to_features, file_based_input_fn_builder and an
Estimator of model_fn_builder, with params["batch_size"]); the other runs a
processor file written in Google's style (it imports run_classifier and
tokenization from the root, defines SpamProcessor and registers nothing)
through --processor_module.
"""

import os
import random
import textwrap

import numpy as np

import run_classifier
from bert_toolkit.estimator_compat import tf_estimator

import modeling
import script_runs
import tokenization
from tiny import REPO, TINY_WORDS, write_tiny_model

GOOGLE_STYLE_PROCESSOR = textwrap.dedent('''
    import os

    import run_classifier
    import tokenization


    class SpamProcessor(run_classifier.DataProcessor):
        """Spam or ham, label first: as a Google-era tutorial writes a processor."""

        def get_train_examples(self, data_dir):
            return self._create_examples(
                self._read_tsv(os.path.join(data_dir, "train.tsv")), "train")

        def get_dev_examples(self, data_dir):
            return self._create_examples(
                self._read_tsv(os.path.join(data_dir, "dev.tsv")), "dev")

        def get_test_examples(self, data_dir):
            return self._create_examples(
                self._read_tsv(os.path.join(data_dir, "test.tsv")), "test")

        def get_labels(self):
            return ["ham", "spam"]

        def _create_examples(self, lines, set_type):
            examples = []
            for (i, line) in enumerate(lines):
                if i == 0:
                    continue
                guid = "%s-%s" % (set_type, i)
                text_a = tokenization.convert_to_unicode(line[1])
                label = "ham" if set_type == "test" else tokenization.convert_to_unicode(line[0])
                examples.append(
                    run_classifier.InputExample(guid=guid, text_a=text_a, text_b=None,
                                                label=label))
            return examples
''')


def write_mrpc(folder, rng):
    """MRPC's layout: Quality, #1 ID, #2 ID, #1 String, #2 String."""
    os.makedirs(folder, exist_ok=True)
    for split, count in (("train", 24), ("dev", 8), ("test", 6)):
        with open(os.path.join(folder, split + ".tsv"), "w") as f:
            f.write("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
            for i in range(count):
                a = " ".join(rng.choice(TINY_WORDS[:15]) for _ in range(5))
                b = a if i % 2 else " ".join(rng.choice(TINY_WORDS[:15]) for _ in range(4))
                f.write("\t".join([str(i % 2), str(i), str(i + 100), a, b]) + "\n")


def test_googles_functions_as_run_classifier_with_tfhub_uses_them(tmp_path):
    model = write_tiny_model(str(tmp_path / "model"))
    data_dir = str(tmp_path / "MRPC")
    write_mrpc(data_dir, random.Random(1))
    processor = run_classifier.MrpcProcessor()
    label_list = processor.get_labels()
    tokenizer = tokenization.FullTokenizer(vocab_file=model["vocab_file"], do_lower_case=True)
    train_examples = processor.get_train_examples(data_dir)
    num_train_steps = int(len(train_examples) / 8 * 2.0)
    model_fn = run_classifier.model_fn_builder(
        bert_config=modeling.BertConfig.from_json_file(model["bert_config_file"]),
        num_labels=len(label_list), init_checkpoint=model["init_checkpoint"],
        learning_rate=5e-5, num_train_steps=num_train_steps,
        num_warmup_steps=int(num_train_steps * 0.1), use_tpu=False,
        use_one_hot_embeddings=False)
    estimator = tf_estimator.Estimator(model_fn=model_fn, model_dir=str(tmp_path / "out"),
                                       params={"batch_size": 8})

    train_features = run_classifier.convert_examples_to_features(
        train_examples, label_list, 32, tokenizer)
    first = train_features[0]
    assert isinstance(first, run_classifier.InputFeatures) and len(first.input_ids) == 32
    single = run_classifier.convert_single_example(0, train_examples[0], label_list, 32,
                                                   tokenizer)
    assert single.input_ids == first.input_ids and single.label_id == first.label_id
    tokens = ["[CLS]"] + tokenizer.tokenize(train_examples[0].text_a) + ["[SEP]"]
    assert first.input_ids[:len(tokens)] == tokenizer.convert_tokens_to_ids(tokens)
    padding = run_classifier.convert_single_example(
        1, run_classifier.PaddingInputExample(), label_list, 32, tokenizer)
    assert padding.input_ids == [0] * 32 and padding.is_real_example is False
    estimator.train(input_fn=run_classifier.input_fn_builder(
        features=train_features, seq_length=32, is_training=True, drop_remainder=True),
        max_steps=num_train_steps)
    assert estimator.get_variable_value("global_step") == num_train_steps

    eval_features = run_classifier.convert_examples_to_features(
        processor.get_dev_examples(data_dir), label_list, 32, tokenizer)
    result = estimator.evaluate(input_fn=run_classifier.input_fn_builder(
        features=eval_features, seq_length=32, is_training=False, drop_remainder=False))
    assert {"eval_accuracy", "eval_loss", "global_step", "loss"} <= set(result)
    assert 0.0 <= result["eval_accuracy"] <= 1.0

    predict_examples = processor.get_test_examples(data_dir)
    predict_file = str(tmp_path / "predict.tf_record")
    run_classifier.file_based_convert_examples_to_features(
        predict_examples, label_list, 32, tokenizer, predict_file)
    predict_input_fn = run_classifier.file_based_input_fn_builder(
        input_file=predict_file, seq_length=32, is_training=False, drop_remainder=False)
    probabilities = np.array([prediction["probabilities"]
                              for prediction in estimator.predict(input_fn=predict_input_fn)])
    assert probabilities.shape == (len(predict_examples), 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)


def test_a_google_style_processor_file_runs_through_processor_module(tmp_path):
    model = write_tiny_model(str(tmp_path / "model"))
    (tmp_path / "my_tasks.py").write_text(GOOGLE_STYLE_PROCESSOR)
    data = tmp_path / "spam"
    data.mkdir()
    rng = random.Random(2)
    for split, count in (("train", 16), ("dev", 6), ("test", 4)):
        with open(str(data / (split + ".tsv")), "w") as f:
            f.write("label\ttext\n")
            for i in range(count):
                label = ("ham", "spam")[i % 2]
                f.write("%s\t%s\n" % (label, " ".join(rng.choice(TINY_WORDS[:15])
                                                     for _ in range(4))))
    result = script_runs.run(
        [os.path.join(REPO, "run_classifier.py"), "--task_name=spam",
         "--processor_module=my_tasks", "--data_dir=spam", "--output_dir=out",
         "--vocab_file=" + model["vocab_file"], "--bert_config_file=" +
         model["bert_config_file"], "--init_checkpoint=" + model["init_checkpoint"],
         "--max_seq_length=16", "--train_batch_size=4", "--num_train_epochs=1",
         "--do_train", "--do_eval", "--do_predict"],
        cwd=str(tmp_path), env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert np.loadtxt(str(tmp_path / "out" / "test_results.tsv")).shape == (4, 2)
    with open(str(tmp_path / "out" / "label_list.json")) as f:
        assert f.read().strip() == '["ham", "spam"]'
