"""The MS MARCO fork of bert-multi-gpu's run_multi_gpu.py: edit the settings, then run
`python run_multi_gpu.py`.

The settings are the fork's, under its names and with its defaults (BERT-large, as
its main trains): dl4marco-bert's records in data_dir (dataset_train.tf), num_gpu
replicas (CPU replicas on a machine without GPUs), train_batch_size the global batch.
Training is run_reranking.py's (bert_toolkit/tasks/reranking/multi_gpu_fork.py says
what each setting becomes); output_dir gets the fork's loss.txt and bert-model.ckpt
beside our checkpoints, and a re-run resumes. See docs/migration.md.
"""

# hyperparameters
data_dir = '../MSMARCO_tfrecord/'
bert_config_file = '../uncased_L-12_H-768_A-12/bert_config.json'
bert_config_file_large = '../uncased_L-24_H-1024_A-16/bert_config.json'
init_checkpoint = '../uncased_L-12_H-768_A-12/bert_model.ckpt'
init_checkpoint_large = '../uncased_L-24_H-1024_A-16/bert_model.ckpt'
output_dir = './model_dense_multi_GPU/'

num_gpu = 1
is_training = True
is_fine_tuning = False

num_labels = 2
max_seq_length = 512
query_length = 64
document_length = 448  # 512 - 64 = 448
train_batch_size = 8
learning_rate = 1e-5
num_train_steps = 400000
num_warmup_steps = 0
save_checkpoints_steps = 500
iterations_per_loop = 1000

num_warmup_steps = num_warmup_steps * iterations_per_loop
num_train_steps = num_train_steps * iterations_per_loop

# Ours, beside the fork's (these values do what the fork did).
vocab_file = None    # None: the vocab.txt beside bert_config_file_large
do_eval = False      # True: after training, rank dataset_dev.tf (query_doc_ids_dev.txt): MRR@10
num_eval_docs = 1000  # candidates per query in dataset_dev.tf, as dl4marco-bert wrote them

if __name__ == "__main__":
    from bert_toolkit.cli import flags
    from bert_toolkit.tasks.reranking import multi_gpu_fork

    flags.run_guarded(multi_gpu_fork.run, dict(globals()), __file__)
