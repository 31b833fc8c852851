"""BERT's model FLOPs and the utilisation they give (MFU). No TensorFlow.

MFU is the model's matmul FLOPs per second over the machine's matmul peak in
the precision in use: how far a run is from what the hardware can do. The
count is the usual one: 2 FLOPs per multiply-add of every dense layer of the
encoder and the pooler and of the two attention matmuls; embedding lookups,
softmax, layer norm and the task head are left out.
"""

def forward_flops_per_example(config, seq_length, dense_tokens=None):
    """Matmul FLOPs of one forward pass of the encoder + pooler on one example.

    config: bert_config fields (a dict, or an object with those attributes).
    dense_tokens: the tokens the dense layers run on (default: seq_length); fewer
      when the encoder skips padding (modeling.token_packing), the attention
      products still spanning seq_length.
    """
    field = _fields(config)
    if field("model_family") == "modernbert":
        return _modernbert_forward_flops(field, seq_length, dense_tokens)
    h, i = field("hidden_size"), field("intermediate_size")
    dense_per_token = 4 * h * h + 2 * h * i
    attention = 2 * 2 * seq_length * seq_length * h
    if field("model_family") == "deberta-v2":
        # DeBERTa's content->position and position->content products: queries and keys
        # against the 2 * seq table rows of the distances (model/relative_attention.py),
        # twice the score product each. (The rows' projections, [2 seq, h] x [h, h]
        # twice a layer, are shared by the batch and left out.)
        attention += 2 * (2 * seq_length * (2 * seq_length) * h)
    tokens = seq_length if dense_tokens is None else dense_tokens
    # Narrower embeddings (ALBERT, small ELECTRAs) are projected to the hidden size.
    projection = 2 * field("embedding_size") * h * seq_length if field("embedding_size") else 0
    return field("num_hidden_layers") * (2 * dense_per_token * tokens + attention) \
        + 2 * h * h + projection


def _modernbert_forward_flops(field, seq_length, dense_tokens=None):
    """ModernBERT's forward matmul FLOPs of one example: per token and layer the fused
    q/k/v (3 h^2), the output (h^2) and the gated feed-forward (h x 2i in, i x h out);
    the attention products over every key on global layers, over the window's
    local_attention + 1 keys (at most the sequence) on local ones; the head's dense."""
    h, i, layers = field("hidden_size"), field("intermediate_size"), field("num_hidden_layers")
    tokens = seq_length if dense_tokens is None else dense_tokens
    dense = 2 * (4 * h * h + 3 * h * i) * tokens * layers
    every = field("global_attn_every_n_layers")  # layers 0, n, 2n, ... are global
    keys = {True: seq_length, False: min(seq_length, 2 * (field("local_attention") // 2) + 1)}
    attention = sum(2 * 2 * seq_length * keys[index % every == 0] * h
                    for index in range(layers))
    return dense + attention + 2 * h * h


def _fields(config):
    """name -> value of bert_config fields (a dict, or an object with those attributes);
    None for a family field the config leaves out."""
    if isinstance(config, dict):
        return config.get
    return lambda name: getattr(config, name, None)


def training_flops_per_example(config, seq_length, dense_tokens=None):
    """Forward + backward (twice the forward) matmul FLOPs of one training example."""
    return 3 * forward_flops_per_example(config, seq_length, dense_tokens)


def utilisation(flops_per_second, peak_flops_per_second):
    """MFU as a fraction (None without a peak)."""
    return flops_per_second / peak_flops_per_second if peak_flops_per_second else None


def pretraining_flops_per_example(config, seq_length, predictions_per_example):
    """Training matmul FLOPs of one pre-training example: the encoder's, plus the
    masked-LM head's at each prediction (its transform dense layer and the tied
    output matmul over the vocabulary), forward + backward. The next-sentence
    head (a [hidden, 2] matmul) is left out."""
    field = _fields(config)
    h, vocab = field("hidden_size"), field("vocab_size")
    width = field("embedding_size") or h  # the transform's output, tied to the word table
    head = 2 * (h * width + width * vocab) * predictions_per_example
    return training_flops_per_example(config, seq_length) + 3 * head
