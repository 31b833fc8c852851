#!/bin/bash
# Runs the command given (the sbatch script's srun line). When it ends with 143,
# the tasks stopped on SIGTERM (Slurm's time limit, with --signal=TERM@120, or a
# preemption) after saving the same step; this requeues the job (it needs
# --requeue), and its next start runs the same command, which resumes there.
#   scripts/slurm/run_then_requeue.sh srun .venv/bin/python run_pretraining.py ...
status=0
"$@" || status=$?
if [ "$status" -eq 143 ] && [ -n "${SLURM_JOB_ID:-}" ]; then
  echo "stopped on SIGTERM with the step saved: requeuing job $SLURM_JOB_ID to resume" >&2
  scontrol requeue "$SLURM_JOB_ID"
fi
exit "$status"
