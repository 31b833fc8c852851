"""The PyTorch reference for the README's measured SQuAD run.

Fine-tunes a Hugging Face BERT checkpoint (all-MiniLM-L6-v2 by default) for
extractive question answering with transformers' own recipe
(BertForQuestionAnswering; the fast tokenizer cuts a context into windows with
`stride` tokens of overlap and offsets back into the context), with the
optimizer run_squad.py uses: AdamW, weight decay 0.01 except on biases and
LayerNorm, linear warm-up over 10% of the steps then linear decay, gradient
norm clipped at 1.0. It answers the predict file (best start + end logit over
a question's windows, n-best 20, at most 30 tokens; v2.0: "" when the null
score beats the best span by more than --null_score_diff_threshold), writes
predictions.json (and null_odds.json) and scores them with the toolkit's
official SQuAD metrics (bert_toolkit/tasks/squad/evaluation.py), into
eval_results.json with the training examples/s.

Runs under any interpreter with torch and transformers (no TensorFlow):

    .venv-bench/bin/python bench/squad_torch_reference.py \
        --train_file=../shared/data/squad/train-v1.1.json \
        --predict_file=../shared/data/squad/dev-v1.1.json --output_dir=runs/squad_torch
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bert_toolkit.tasks.squad import evaluation as squad_eval  # noqa: E402


def read_questions(path):
    """[(id, question, context, answers)] of a SQuAD JSON file; answers is a
    list of (text, answer_start), empty for an unanswerable question."""
    with open(path, encoding="utf-8") as handle:
        articles = json.load(handle)["data"]
    questions = []
    for article in articles:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [] if qa.get("is_impossible") else [
                    (answer["text"], answer["answer_start"]) for answer in qa["answers"]]
                questions.append((qa["id"], qa["question"], paragraph["context"], answers))
    return questions


def cut_windows(tokenizer, questions, max_seq_length, stride):
    """The tokenizer's windows of every (question, context): a BatchEncoding
    with input_ids etc. [windows, max_seq_length], offset_mapping and
    overflow_to_sample_mapping (window -> question index)."""
    return tokenizer([q[1].lstrip() for q in questions], [q[2] for q in questions],
                     truncation="only_second", max_length=max_seq_length, stride=stride,
                     return_overflowing_tokens=True, return_offsets_mapping=True,
                     padding="max_length")


def answer_positions(windows, questions):
    """(start, end) token positions of the first answer in each window, (0, 0)
    (the [CLS] token) where the window does not hold all of it."""
    starts, ends = [], []
    for window, question_index in enumerate(windows["overflow_to_sample_mapping"]):
        answers = questions[question_index][3]
        start = end = 0
        if answers:
            text, start_char = answers[0]
            end_char = start_char + len(text)
            sequence_ids = windows.sequence_ids(window)
            offsets = windows["offset_mapping"][window]
            context = [i for i, s in enumerate(sequence_ids) if s == 1]
            first, last = context[0], context[-1]
            if offsets[first][0] <= start_char and offsets[last][1] >= end_char:
                start = first
                while start <= last and offsets[start][1] <= start_char:
                    start += 1
                end = last
                while end >= first and offsets[end][0] >= end_char:
                    end -= 1
        starts.append(start)
        ends.append(end)
    return np.array(starts), np.array(ends)


def best_answers(windows, questions, start_logits, end_logits, n_best=20, max_answer_length=30):
    """(answers, null odds): id -> answer text cut from the context, id ->
    null score - best span score."""
    by_question = {}
    for window, question_index in enumerate(windows["overflow_to_sample_mapping"]):
        by_question.setdefault(question_index, []).append(window)
    answers, null_odds = {}, {}
    for question_index, window_list in by_question.items():
        qid, _, context, _ = questions[question_index]
        best_score, best_text, null_score = -math.inf, "", math.inf
        for window in window_list:
            starts, ends = start_logits[window], end_logits[window]
            null_score = min(null_score, starts[0] + ends[0])
            sequence_ids = windows.sequence_ids(window)
            offsets = windows["offset_mapping"][window]
            for start in np.argsort(starts)[::-1][:n_best]:
                for end in np.argsort(ends)[::-1][:n_best]:
                    if (sequence_ids[start] != 1 or sequence_ids[end] != 1 or end < start
                            or end - start + 1 > max_answer_length):
                        continue
                    score = starts[start] + ends[end]
                    if score > best_score:
                        best_score = score
                        best_text = context[offsets[start][0]:offsets[end][1]]
        answers[qid] = best_text
        null_odds[qid] = float(null_score - best_score)
    return answers, null_odds


def no_decay(name):
    return name.endswith("bias") or "LayerNorm" in name


def train(model, windows, starts, ends, args):
    """One pass of fine-tuning; returns (seconds, examples)."""
    import torch
    parameters = list(model.named_parameters())
    optimizer = torch.optim.AdamW(
        [{"params": [p for n, p in parameters if not no_decay(n)], "weight_decay": 0.01},
         {"params": [p for n, p in parameters if no_decay(n)], "weight_decay": 0.0}],
        lr=args.learning_rate, betas=(0.9, 0.999), eps=1e-6)
    count = len(starts)
    total_steps = int(count * args.num_train_epochs) // args.train_batch_size
    warmup = int(total_steps * args.warmup_proportion)

    def scale(step):
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, scale)
    order = np.random.default_rng(args.seed).permutation(
        np.tile(np.arange(count), math.ceil(args.num_train_epochs)))
    tensors = {key: torch.tensor(np.array(windows[key]))
               for key in ("input_ids", "token_type_ids", "attention_mask")}
    starts, ends = torch.tensor(starts), torch.tensor(ends)
    model.train()
    started = time.perf_counter()
    for step in range(total_steps):
        rows = torch.tensor(order[step * args.train_batch_size:(step + 1) * args.train_batch_size])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = model(**{key: value[rows] for key, value in tensors.items()},
                         start_positions=starts[rows], end_positions=ends[rows]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        if (step + 1) % 10 == 0 or step + 1 == total_steps:
            elapsed = time.perf_counter() - started
            rate = (step + 1) * args.train_batch_size / elapsed
            print(f"step {step + 1}/{total_steps}, {rate:.2f} examples/s, {elapsed:.0f} s elapsed,"
                  f" loss {loss.item():.3f}", flush=True)
    return time.perf_counter() - started, total_steps * args.train_batch_size


def predict(model, windows, args):
    """(start logits, end logits): float arrays [windows, max_seq_length]."""
    import torch
    model.eval()
    starts, ends = [], []
    with torch.inference_mode():
        for begin in range(0, len(windows["input_ids"]), args.predict_batch_size):
            rows = slice(begin, begin + args.predict_batch_size)
            batch = {key: torch.tensor(np.array(windows[key][rows]))
                     for key in ("input_ids", "token_type_ids", "attention_mask")}
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
                out = model(**batch)
            starts.append(out.start_logits.float().numpy())
            ends.append(out.end_logits.float().numpy())
    return np.concatenate(starts), np.concatenate(ends)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train_file", required=True)
    parser.add_argument("--predict_file", required=True)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--model_dir", default=None,
                        help="a Hugging Face BERT folder (default: all-MiniLM-L6-v2, "
                             "fetched by bert_toolkit/assets.py)")
    parser.add_argument("--max_seq_length", type=int, default=256)
    parser.add_argument("--doc_stride", type=int, default=128,
                        help="tokens of overlap between a context's windows (transformers' stride)")
    parser.add_argument("--train_batch_size", type=int, default=32)
    parser.add_argument("--predict_batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--num_train_epochs", type=float, default=1.0)
    parser.add_argument("--warmup_proportion", type=float, default=0.1)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--version_2_with_negative", action="store_true")
    parser.add_argument("--null_score_diff_threshold", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()

    import torch
    import transformers
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model_dir = args.model_dir
    if model_dir is None:
        sys.path.insert(0, ROOT)
        from bert_toolkit import assets
        model_dir = assets.minilm_dir()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForQuestionAnswering.from_pretrained(model_dir)
    os.makedirs(args.output_dir, exist_ok=True)

    train_questions = [q for q in read_questions(args.train_file)
                       if q[3] or args.version_2_with_negative]
    train_windows = cut_windows(tokenizer, train_questions, args.max_seq_length, args.doc_stride)
    starts, ends = answer_positions(train_windows, train_questions)
    print(f"train: {len(train_questions)} questions, {len(starts)} windows", flush=True)
    seconds, examples = train(model, train_windows, starts, ends, args)

    predict_questions = read_questions(args.predict_file)
    predict_windows = cut_windows(tokenizer, predict_questions, args.max_seq_length,
                                  args.doc_stride)
    started = time.perf_counter()
    start_logits, end_logits = predict(model, predict_windows, args)
    predict_seconds = time.perf_counter() - started
    answers, null_odds = best_answers(predict_windows, predict_questions, start_logits, end_logits)
    if args.version_2_with_negative:
        answers = {qid: "" if null_odds[qid] > args.null_score_diff_threshold else text
                   for qid, text in answers.items()}
    gold = {q[0]: [text for text, _ in q[3]] for q in predict_questions}
    report = squad_eval.evaluate(gold, answers, null_odds if args.version_2_with_negative else None,
                                 version_2=args.version_2_with_negative)
    report.update({
        "train_windows": len(starts), "train_seconds": round(seconds, 1),
        "train_examples_per_second": round(examples / seconds, 3),
        "predict_windows": len(start_logits),
        "predict_examples_per_second": round(len(start_logits) / predict_seconds, 3),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "precision": args.precision, "threads": args.threads})
    with open(os.path.join(args.output_dir, "predictions.json"), "w", encoding="utf-8") as out:
        json.dump(answers, out, indent=2, ensure_ascii=False)
    if args.version_2_with_negative:
        with open(os.path.join(args.output_dir, "null_odds.json"), "w", encoding="utf-8") as out:
            json.dump(null_odds, out, indent=2)
    with open(os.path.join(args.output_dir, "eval_results.json"), "w", encoding="utf-8") as out:
        json.dump(report, out, indent=2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
