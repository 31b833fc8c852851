"""The BERT graph (modeling), its bf16 kernels (fused), optimizers and FLOP counts.

POOLING_MODES lives here rather than in modeling so that the options classes can
offer it as a flag's choices without importing TensorFlow: create_pretraining_data
never loads TensorFlow, and its worker processes fork from a process without it.
"""

# How a sentence (pair) becomes one vector for a classification head
# (modeling.sentence_vector): "pooler" is Google's tanh(dense([CLS])); "mean"
# averages the real tokens' final states, as sentence-transformers models (e.g.
# all-MiniLM-L6-v2) were trained, whose pooler layer was never trained.
POOLING_MODES = ("pooler", "mean")
