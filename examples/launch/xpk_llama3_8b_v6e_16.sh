#!/bin/bash
# Llama3-8B on one v6e-16 slice, launched with XPK the way MaxText's recipes are: the MaxText arguments and the
# XLA flags in variables, expanded into the workload's command. `asap check` reads this file statically.

export BASE_OUTPUT_DIR=""   # fill in: gs://your-bucket/runs
WORKLOAD_NAME="${USER}-llama3-8b-$(date +%H%M)"

XLA_FLAGS=" \
  --xla_tpu_scoped_vmem_limit_kib=98304 \
  --xla_tpu_enable_async_collective_fusion_fuse_all_gather=true \
  --xla_tpu_enable_data_parallel_all_reduce_opt=true"

MAXTEXT_ARGS="\
model_name=llama3-8b \
per_device_batch_size=4 \
max_target_length=8192 \
ici_fsdp_parallelism=4 \
ici_tensor_parallelism=2 \
remat_policy=full \
dataset_type=synthetic \
steps=20 \
base_output_directory=${BASE_OUTPUT_DIR} \
run_name=${WORKLOAD_NAME}"

xpk workload create \
  --cluster="${CLUSTER_NAME}" \
  --device-type=v6e-16 \
  --num-slices=1 \
  --workload="${WORKLOAD_NAME}" \
  --command="export LIBTPU_INIT_ARGS='${XLA_FLAGS}' && \
python3 -m MaxText.train MaxText/configs/base.yml ${MAXTEXT_ARGS}"
