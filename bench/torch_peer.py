"""The peer side of the fine-tuning, pre-training and inference benches: PyTorch +
transformers.

Runs under any interpreter that has torch and transformers (it imports no
TensorFlow and nothing of the toolkit but bench/benchlib.py), as a worker
driven by the controller over stdin/stdout (see benchlib).

    --mode=train   BertForSequenceClassification, torch.optim.AdamW, one
                   optimizer step per batch, dropout on.
    --mode=pretrain  BertForPreTraining (masked-LM + next-sentence losses), trained
                   the same way (pretraining_bench.py).
    --mode=infer   the same model in eval mode under torch.inference_mode.
    --mode=onnx    that model exported to ONNX (opset 17) and run by onnxruntime
                   (needs onnxruntime and onnx as well).

--precision=bf16 runs the model under torch.autocast(cpu, bfloat16), the way
transformers users get bf16 on a CPU (onnx: fp32 only). --compile wraps the
model in torch.compile (inductor, the default backend) for train and infer;
the first step, which compiles, is timed apart and reported as compile_seconds.
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

sys.path.insert(0, benchlib.REPO)  # the families' config fields (no TensorFlow)

# Our model_family -> (its transformers classifier, its pre-training model).
_HF_CLASSES = {
    "bert": ("BertForSequenceClassification", "BertForPreTraining"),
    "roberta": ("RobertaForSequenceClassification", "RobertaForMaskedLM"),
    "xlm-roberta": ("XLMRobertaForSequenceClassification", "XLMRobertaForMaskedLM"),
    "electra": ("ElectraForSequenceClassification", "ElectraForMaskedLM"),
    "distilbert": ("DistilBertForSequenceClassification", "DistilBertForMaskedLM"),
    "albert": ("AlbertForSequenceClassification", "AlbertForPreTraining"),
    "deberta-v2": ("DebertaV2ForSequenceClassification", "DebertaV2ForMaskedLM"),
    "modernbert": ("ModernBertForSequenceClassification", "ModernBertForMaskedLM"),
}


def make_model(config_name, num_labels=2, pretraining=False):
    """The family's ...ForSequenceClassification of the bench config (its pre-training
    model with `pretraining`: BERT's and ALBERT's with both losses, the others'
    masked LM), configured by the fields export_hf.py writes for the same config
    (convert/hf_families.py), so the peer is the model a user's export would be."""
    import transformers

    from bert_toolkit import families
    from bert_toolkit.convert import hf_families
    _, fields = benchlib.load_config(config_name)
    family = families.get(fields.get("model_family"))
    hf_fields = hf_families.hf_config_fields(
        fields, family, benchlib.HF_ACTIVATIONS[fields["hidden_act"]])
    hf_fields.pop("torch_dtype", None)  # the peer picks its own precision
    config = transformers.AutoConfig.for_model(num_labels=num_labels, **hf_fields)
    classifier, pretrainer = _HF_CLASSES[family.name]
    return getattr(transformers, pretrainer if pretraining else classifier)(config)


def input_filter(model):
    """A function that fits a batch to `model`'s forward: DistilBERT and ModernBERT
    take no token types, the masked-LM models no next-sentence label, ALBERT names it
    sentence_order_label."""
    name = type(model).__name__
    drop = set()
    if model.config.model_type in ("distilbert", "modernbert"):
        drop.add("token_type_ids")
    if name.endswith("ForMaskedLM"):
        drop.add("next_sentence_label")

    def fit(batch):
        batch = {k: v for k, v in batch.items() if k not in drop}
        if name == "AlbertForPreTraining" and "next_sentence_label" in batch:
            batch["sentence_order_label"] = batch.pop("next_sentence_label")
        return batch
    return fit


def measure_torch_peak(precision, n=2048, repeats=5):
    import torch
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a = torch.rand(n, n).to(dtype)
    b = torch.rand(n, n).to(dtype)
    torch.matmul(a, b)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - started)
    return 2.0 * n ** 3 / best / 1e9


def batches(features, batch_size, pad_to_longest=False, multiple=16):
    """Endless batches (dicts of torch tensors) cycling through the examples.

    pad_to_longest: cut each batch to its longest sequence rounded up to
    `multiple`, as transformers' DataCollatorWithPadding(pad_to_multiple_of=16)
    pads in training, and its tokenizer's padding=True (multiple 1) in inference.
    """
    import torch
    count = len(features["input_ids"])
    start = 0
    while True:
        rows = np.arange(start, start + batch_size) % count
        start = (start + batch_size) % count
        length = features["input_ids"].shape[1]
        if pad_to_longest:
            longest = int(features["input_mask"][rows].sum(axis=1).max())
            length = min(length, -(-longest // multiple) * multiple)
        yield {"input_ids": torch.from_numpy(
                   features["input_ids"][rows, :length].astype(np.int64)),
               "attention_mask": torch.from_numpy(
                   features["input_mask"][rows, :length].astype(np.int64)),
               "token_type_ids": torch.from_numpy(
                   features["segment_ids"][rows, :length].astype(np.int64)),
               "labels": torch.from_numpy(features["label_ids"][rows].astype(np.int64))}


def pretraining_batches(features, batch_size):
    """Endless BertForPreTraining batches cycling through pretraining_bench's
    examples: `labels` -100 except at the masked positions (the masked_lm_ids),
    and next_sentence_label."""
    import torch
    count, seq_length = features["input_ids"].shape
    labels = np.full((count, seq_length), -100, np.int64)
    rows = np.repeat(np.arange(count), features["masked_lm_positions"].shape[1])
    real = features["masked_lm_weights"].reshape(-1) > 0
    labels[rows[real], features["masked_lm_positions"].reshape(-1)[real]] = \
        features["masked_lm_ids"].reshape(-1)[real]
    start = 0
    while True:
        rows = np.arange(start, start + batch_size) % count
        start = (start + batch_size) % count
        yield {"input_ids": torch.from_numpy(features["input_ids"][rows].astype(np.int64)),
               "attention_mask": torch.from_numpy(features["input_mask"][rows].astype(np.int64)),
               "token_type_ids": torch.from_numpy(features["segment_ids"][rows].astype(np.int64)),
               "labels": torch.from_numpy(labels[rows]),
               "next_sentence_label": torch.from_numpy(
                   features["next_sentence_labels"][rows].astype(np.int64))}


def serve(args):
    import torch
    torch.set_num_threads(os.cpu_count() or 1)
    torch.manual_seed(0)
    features = dict(np.load(args.features))
    model = make_model(args.config, pretraining=args.mode == "pretrain")
    fit = input_filter(model)
    bf16 = args.precision == "bf16"
    stream = pretraining_batches(features, args.batch) if args.mode == "pretrain" else \
        batches(features, args.batch, args.pad_to_longest, args.pad_multiple)
    if args.compile:
        model = torch.compile(model)

    if args.mode in ("train", "pretrain"):
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)

        def step():
            batch = next(stream)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = model(**fit(batch)).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    elif args.mode == "infer":
        model.eval()

        def step():
            batch = next(stream)
            batch.pop("labels")
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16,
                                                        enabled=bf16):
                model(**fit(batch)).logits.float().numpy()
    else:
        step = make_onnx_step(model, stream, args)

    ready = {"peak_gflops": measure_torch_peak(args.precision, args.peak_size)}
    if args.compile:
        started = time.perf_counter()
        step()
        ready["compile_seconds"] = time.perf_counter() - started
    benchlib.serve_steps(step, args.batch, args.warmup_steps, ready)


def make_onnx_step(model, stream, args):
    """Exports `model` to ONNX in a temporary file; a step runs one batch in onnxruntime."""
    import tempfile

    import onnxruntime
    import torch
    model.eval()
    sample = next(stream)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    path = os.path.join(tempfile.mkdtemp(prefix="onnx_peer_"), "model.onnx")
    with torch.inference_mode():
        torch.onnx.export(model, tuple(sample[n] for n in names), path, input_names=names,
                          output_names=["logits"], opset_version=17, dynamo=False,
                          dynamic_axes=dict({n: {0: "batch", 1: "sequence"} for n in names},
                                            logits={0: "batch"}))
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    def step():
        batch = next(stream)
        session.run(["logits"], {n: batch[n].numpy() for n in names})
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["train", "pretrain", "infer", "onnx"], required=True)
    parser.add_argument("--features", required=True, help="npz written by the controller.")
    parser.add_argument("--config", required=True)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--warmup_steps", type=int, default=3)
    parser.add_argument("--peak_size", type=int, default=2048)
    parser.add_argument("--pad_to_longest", action="store_true")
    parser.add_argument("--pad_multiple", type=int, default=16)
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args()
    benchlib.run_worker(lambda: serve(args))


if __name__ == "__main__":
    main()
