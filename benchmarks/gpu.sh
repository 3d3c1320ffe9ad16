#!/usr/bin/env bash
# The CUDA paths, checked on a CUDA machine in one short run: PPO on Mario with 16 envs, DQN on CartPole
# and on Mario, ICM on Mario. Prints env steps/s and peak GPU memory per case; exits non-zero if a case
# fails or did not run on the GPU, and with one line (exit 2) when there is no CUDA device.
#   bash benchmarks/gpu.sh            # the budgets below (a few minutes on one GPU)
#   bash benchmarks/gpu.sh --quick    # a tenth of them: does every path run?
# Needs a CUDA build of torch and the ppo, dqn, icm and mario plugins (docker/Dockerfile.gpu has them).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python}" benchmarks/gpu_check.py "$@"
