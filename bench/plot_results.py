"""Draws the throughput chart of docs/performance.md from the benches' --json files.

    python bench/plot_results.py --output docs/performance.png results/*.json

One panel per kind of work (fine-tuning, pre-training, inference; rows) and
BERT config (columns), one bar per side (ours and the peers at each precision;
ours in blues, hatched for two CPU replicas, dotted under a second TensorFlow),
examples/s written on each bar, each panel on a linear scale from zero so bar
heights compare honestly.
Needs matplotlib (requirements-bench.txt).
"""

import argparse
import collections
import json
import os
import re

# Ours in blues, the peers in warm colours; the same side has the same colour
# in every panel.
COLOURS = {
    "ours fp32": "#9ecae1", "ours bf16": "#2171b5",
    "ours SavedModel fp32": "#9ecae1", "ours SavedModel bf16": "#2171b5",
    "torch fp32 eager": "#fdae6b", "torch bf16 autocast": "#e6550d",
    "torch fp32 compile": "#fdd0a2", "torch bf16 compile": "#a63603",
    "onnxruntime fp32": "#a1d99b",
}
CONFIG_NAMES = {"minilm": "all-MiniLM-L6-v2", "base": "BERT-base"}


def load(paths):
    """(kind, config) -> OrderedDict side -> examples/s, and each file's batch."""
    table = collections.OrderedDict()
    batches = {}
    for path in paths:
        with open(path) as f:
            payload = json.load(f)
        data = payload["args"].get("data", "synthetic")
        kind = payload["bench"] + ("" if data == "synthetic" else ", %s" % data)
        key = (kind, payload["args"]["config"])
        batches[key] = payload["args"]["batch"]
        sides = table.setdefault(key, collections.OrderedDict())
        for result in payload["results"]:
            sides[result["side"]] = result["examples_per_second"]
    return table, batches


def colour(side):
    """Ours in blues, the peers in warm colours and green, the same side alike everywhere."""
    if side in COLOURS:
        return COLOURS[side]
    base = re.sub(r" (x2 replicas|adamw|lamb|TF [\d.]+)", "", side)
    return COLOURS.get(base, "#bdbdbd")


def plot(table, batches, output, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(collections.OrderedDict.fromkeys(kind for kind, _ in table))
    configs = list(collections.OrderedDict.fromkeys(config for _, config in table))
    figure, axes = plt.subplots(len(kinds), len(configs), squeeze=False,
                                figsize=(5.2 * len(configs), 3.9 * len(kinds)))
    for row, kind in enumerate(kinds):
        for column, config in enumerate(configs):
            axis = axes[row][column]
            sides = table.get((kind, config))
            if not sides:
                axis.set_visible(False)
                continue
            names = list(sides)
            values = [sides[name] for name in names]
            bars = axis.bar(range(len(names)), values, 0.7,
                            color=[colour(name) for name in names], edgecolor="#333333",
                            linewidth=0.5)
            for bar, name in zip(bars, names):
                if "replicas" in name:
                    bar.set_hatch("//")
                if " TF 2.2" in name:
                    bar.set_hatch("..")
            for bar, value in zip(bars, values):
                axis.annotate("%.1f" % value if value >= 10 else "%.2f" % value,
                              (bar.get_x() + bar.get_width() / 2, value),
                              ha="center", va="bottom", fontsize=8, xytext=(0, 2),
                              textcoords="offset points")
            axis.set_xticks(range(len(names)))
            axis.set_xticklabels([name.replace("ours SavedModel", "ours").replace(
                " replicas", "\nreplicas").replace(" autocast", "\nautocast").replace(
                " eager", "\neager").replace("onnxruntime ", "onnxruntime\n").replace(
                " compile", "\ncompile").replace(" TF ", "\nTF ").replace(
                " adamw", "\nadamw").replace(" lamb", "\nlamb")
                for name in names], fontsize=8)
            axis.set_ylim(0, max(values) * 1.18)
            axis.set_ylabel("examples/s (higher is better)", fontsize=9)
            axis.set_title("%s, %s, batch %d" % (kind, CONFIG_NAMES.get(config, config),
                                                 batches[(kind, config)]), fontsize=10)
            axis.grid(axis="y", alpha=0.3)
            axis.set_axisbelow(True)
    figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    figure.savefig(output, dpi=100)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+", help="--json files of finetune/inference benches")
    parser.add_argument("--output", default="docs/performance.png")
    parser.add_argument("--title", default="Sequence length 128, 2 CPU cores "
                        "(AVX-512 BF16), no GPU")
    args = parser.parse_args()
    table, batches = load(args.results)
    plot(table, batches, args.output, args.title)
    print(os.path.abspath(args.output))


if __name__ == "__main__":
    main()
