#!/usr/bin/env bash
# The multi-GPU fork's wrapper, with its options, running run_custom_classifier.py:
#
#   bash scripts/run_custom_classifier.sh -s 512 -b 8 -l 3e-5 -e 1 -g 2 -c 2,3
#
# -s max_seq_length, -g num_gpu_cores, -b train_batch_size (per GPU), -l learning_rate,
# -e num_train_epochs, -c CUDA_VISIBLE_DEVICES (as many devices as -g), -h prints the
# settings. As in the fork, it fine-tunes, evaluates, predicts and exports QQP from the
# fork's /cfs/ folders; point it elsewhere with TASK_NAME, DATA_DIR, BERT_DIR (a folder
# with vocab.txt, bert_config.json, bert_model.ckpt) and OUTPUT_DIR. USE_GPU=false runs
# -g replicas on the CPU instead of GPUs; PYTHON picks the interpreter (default python).
# Extra arguments after the options go to run_custom_classifier.py.
set -euo pipefail
cd "$(dirname "$0")/.."

max_seq_length=128
num_gpu_cores=4
train_batch_size=32
learning_rate=2e-5
num_train_epochs=3.0
CUDA_VISIBLE_DEVICES=0,1,2,3

settings() {
    echo "-s max_seq_length,        default val is: ${max_seq_length}"
    echo "-g num_gpu_cores,         default val is: ${num_gpu_cores}"
    echo "-b train_batch_size,      default val is: ${train_batch_size}"
    echo "-l learning_rate,         default val is: ${learning_rate}"
    echo "-e num_train_epochs,      default val is: ${num_train_epochs}"
    echo "-c CUDA_VISIBLE_DEVICES,  default val is: ${CUDA_VISIBLE_DEVICES}"
}

while getopts ":s:g:b:l:e:c:h" opt; do
    case $opt in
        s) echo "max_seq_length is: $OPTARG, default val is: ${max_seq_length}"
           max_seq_length=$OPTARG ;;
        g) echo "num_gpu_cores is: $OPTARG, default val is: ${num_gpu_cores}"
           num_gpu_cores=$OPTARG ;;
        b) echo "train_batch_size is: $OPTARG, default val is: ${train_batch_size}"
           train_batch_size=$OPTARG ;;
        l) echo "learning_rate is: $OPTARG, default val is: ${learning_rate}"
           learning_rate=$OPTARG ;;
        e) echo "num_train_epochs is: $OPTARG, default val is: ${num_train_epochs}"
           num_train_epochs=$OPTARG ;;
        c) echo "CUDA_VISIBLE_DEVICES is: $OPTARG, default val is: ${CUDA_VISIBLE_DEVICES}"
           CUDA_VISIBLE_DEVICES=$OPTARG ;;
        h) echo "current params setting:"
           settings
           exit 1 ;;
        :) echo "error: -$OPTARG needs a value" >&2
           exit 1 ;;
        ?) echo "error: unknown option -$OPTARG (-h lists them)" >&2
           exit 1 ;;
    esac
done
shift $((OPTIND - 1))

IFS=, read -r -a cuda_devices <<< "$CUDA_VISIBLE_DEVICES"
if [ "$num_gpu_cores" != "${#cuda_devices[@]}" ]; then
    echo "error: -g $num_gpu_cores but -c $CUDA_VISIBLE_DEVICES names ${#cuda_devices[@]}" \
         "device(s); give as many devices as GPU cores" >&2
    exit 1
fi
echo "cuda devices and gpu cores matched"
export CUDA_VISIBLE_DEVICES

TASK_NAME=${TASK_NAME:-QQP}
DATA_DIR=${DATA_DIR:-/cfs/data/glue/QQP}
BERT_DIR=${BERT_DIR:-/cfs/models/bert-large-uncased}
OUTPUT_DIR=${OUTPUT_DIR:-/cfs/outputs/bert-large-uncased-qqp}
if [ "${USE_GPU:-true}" = true ]; then
    devices=(--use_gpu=true --num_gpu_cores="$num_gpu_cores")
else
    devices=(--use_gpu=false --num_cpu_replicas="$num_gpu_cores")
fi

echo "task starts..."
"${PYTHON:-python}" run_custom_classifier.py \
    --task_name="$TASK_NAME" \
    --do_lower_case=true \
    --do_train=true \
    --do_eval=true \
    --do_predict=true \
    --save_for_serving=true \
    --data_dir="$DATA_DIR" \
    --vocab_file="$BERT_DIR/vocab.txt" \
    --bert_config_file="$BERT_DIR/bert_config.json" \
    --init_checkpoint="$BERT_DIR/bert_model.ckpt" \
    --max_seq_length="$max_seq_length" \
    --train_batch_size="$train_batch_size" \
    --learning_rate="$learning_rate" \
    --num_train_epochs="$num_train_epochs" \
    "${devices[@]}" \
    --use_fp16=false \
    --output_dir="$OUTPUT_DIR" "$@"
echo "task is done..."
