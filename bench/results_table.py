"""Prints a markdown table of examples/s from the benches' --json files, as
docs/performance.md shows them.

    python bench/results_table.py bench/results/fp32_finetune_minilm.json ...

One row per kind of our side in each file (its precision and optimizer), with
our examples/s under each TensorFlow (and the MFU, in brackets), each peer's
(torch: eager in fp32 rows, autocast in bf16 rows), and ours against each peer:
"1.53x / 1.58x" reads TensorFlow 2.15.1, then 2.21.
"""

import argparse
import collections
import json
import re

from plot_results import CONFIG_NAMES

# torch runs eager in fp32 and under autocast in bf16: one column for both.
PEER_COLUMNS = (("torch", ("eager", "autocast")),
                ("torch.compile", ("compile",)),
                ("onnxruntime fp32", ("onnxruntime",)))
TF_SUFFIX = re.compile(r" TF (\d+\.\d+\.\d+)$")


def rows_of(payload):
    """One bench's JSON -> (label, {TF version or "": (examples/s, mfu)}, {peer column: examples/s})
    per kind of our side."""
    args = payload["args"]
    peers = {}
    ours = collections.OrderedDict()
    for result in payload["results"]:
        side = result["side"]
        if not side.startswith("ours"):
            column = next(name for name, words in PEER_COLUMNS if any(w in side for w in words))
            peers[column] = result["examples_per_second"]
            continue
        version = TF_SUFFIX.search(side)
        kind = TF_SUFFIX.sub("", side)[len("ours "):].replace("SavedModel ", "")
        ours.setdefault(kind, {})[version.group(1) if version else ""] = (
            result["examples_per_second"], result.get("mfu"))
    data = "" if args.get("data", "synthetic") == "synthetic" else ", %s" % args["data"]
    where = "%s %s, seq %d, batch %d%s" % (payload["bench"],
                                           CONFIG_NAMES.get(args["config"], args["config"]),
                                           args["seq_length"], args["batch"], data)
    return [("%s, %s" % (where, kind), by_version, peers) for kind, by_version in ours.items()]


def rounded(examples_per_second):
    """Four significant figures at most: 3.65, 27.37, 291.9."""
    return "%.*f" % (2 if examples_per_second < 100 else 1, examples_per_second)


def table(paths):
    """The markdown table (a string) of every row of every file, in order."""
    rows = []
    for path in paths:
        with open(path) as f:
            rows.extend(rows_of(json.load(f)))
    versions = sorted({v for _, by_version, _ in rows for v in by_version})
    peer_columns = [name for name, _ in PEER_COLUMNS if any(name in p for _, _, p in rows)]
    header = (["bench run"] + ["ours TF %s" % v if v else "ours" for v in versions]
              + peer_columns + ["vs %s" % name for name in peer_columns])
    lines = ["| " + " | ".join(header) + " |",
             "|---|" + "---:|" * (len(header) - 1)]
    for label, by_version, peers in rows:
        cells = [label]
        for version in versions:
            speed, mfu = by_version.get(version, (None, None))
            cells.append("" if speed is None else
                         rounded(speed) + (" (%.0f%%)" % (100 * mfu) if mfu else ""))
        cells += [rounded(peers[name]) if name in peers else "" for name in peer_columns]
        for name in peer_columns:
            ratios = ["%.2fx" % (by_version[v][0] / peers[name])
                      for v in versions if v in by_version and name in peers]
            cells.append(" / ".join(ratios))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="+", help="--json files of finetune, pretraining "
                                                "and inference benches")
    print(table(parser.parse_args().json))


if __name__ == "__main__":
    main()
