"""Where Google's own ELECTRA and ALBERT checkpoints keep the variables of our graph.

Every family runs on the one graph of modeling.py, whose variables carry BERT's
names (`bert/encoder/layer_N/...`). Google released ELECTRA (google-research/electra,
model/modeling.py) and ALBERT (google-research/albert, modeling.py) as TensorFlow
checkpoints of their own layouts:

    ours                                         ELECTRA                  ALBERT
    bert/embeddings/...                          electra/embeddings/...   (the same)
    bert/embeddings_project/{kernel,bias}        electra/embeddings_project/...
                                                         bert/encoder/embedding_hidden_mapping_in/...
    bert/encoder/layer_N/...                     electra/encoder/layer_N/...
    bert/encoder/layer_0/attention/self/query    bert/encoder/transformer/group_0/inner_group_0/
                                                   attention_1/self/query (key, value alike)
             .../attention/output/dense            .../attention_1/output/dense
             .../attention/output/LayerNorm        .../LayerNorm
             .../intermediate/dense                .../ffn_1/intermediate/dense
             .../output/dense                      .../ffn_1/intermediate/output/dense
             .../output/LayerNorm                  .../LayerNorm_1

(ALBERT's one shared layer is our layer_0.) Such a checkpoint then initialises our
graph as Google's BERT checkpoints do: `--init_checkpoint` is read through these
names wherever ours are missing. No TensorFlow here: names only.
"""

ALBERT_LAYER = "bert/encoder/transformer/group_0/inner_group_0/"
_ALBERT_PROJECTION = "bert/encoder/embedding_hidden_mapping_in/"
# Our layer-0 sub-scope -> ALBERT's, longest first (attention/output/LayerNorm must not
# be taken for attention/output/dense's prefix).
_ALBERT_PARTS = (
    ("attention/output/LayerNorm/", "LayerNorm/"),
    ("attention/output/dense/", "attention_1/output/dense/"),
    ("attention/self/", "attention_1/self/"),
    ("intermediate/dense/", "ffn_1/intermediate/dense/"),
    ("output/LayerNorm/", "LayerNorm_1/"),
    ("output/dense/", "ffn_1/intermediate/output/dense/"),
)


def google_aliases(name):
    """The names under which Google's ELECTRA or ALBERT checkpoints store our variable
    `name` (e.g. "bert/encoder/layer_3/output/dense/kernel"), most likely first; [] for
    a variable they do not have under another name."""
    aliases = []
    if name.startswith("bert/") and not name.startswith("bert/pooler/"):
        aliases.append("electra/" + name[len("bert/"):])  # ELECTRA has no pooler
    if name.startswith("bert/embeddings_project/"):
        aliases.append(_ALBERT_PROJECTION + name[len("bert/embeddings_project/"):])
    layer_0 = "bert/encoder/layer_0/"
    if name.startswith(layer_0):
        rest = name[len(layer_0):]
        for ours, albert in _ALBERT_PARTS:
            if rest.startswith(ours):
                aliases.append(ALBERT_LAYER + albert + rest[len(ours):])
                break
    return aliases


def stored_name(name, stored_names):
    """The name `stored_names` (a container of a checkpoint's names) keeps our variable
    `name` under: its own, else a Google alias, else None."""
    if name in stored_names:
        return name
    for alias in google_aliases(name):
        if alias in stored_names:
            return alias
    return None


def our_name(google_name):
    """Our variable name for a name of Google's ELECTRA (`electra/...`) or ALBERT
    (its shared layer and projection) checkpoints, or None for any other name
    (google_aliases the other way round)."""
    if google_name.startswith("electra/"):
        return "bert/" + google_name[len("electra/"):]
    if google_name.startswith(_ALBERT_PROJECTION):
        return "bert/embeddings_project/" + google_name[len(_ALBERT_PROJECTION):]
    if google_name.startswith(ALBERT_LAYER):
        inner = google_name[len(ALBERT_LAYER):]
        for ours, albert in _ALBERT_PARTS:
            if inner.startswith(albert):
                return "bert/encoder/layer_0/" + ours + inner[len(albert):]
    return None
