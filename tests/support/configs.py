"""Configs shared by the tests of the verifier (tests/test_verify.py, tests/lsp/test_verify.py) and of the
closed loop (tests/test_experiments.py, tests/lsp/test_outcome.py)."""

# A 20M-parameter decoder (d=256, 2 layers) on v5e-16: compiles for the slice in seconds.
SMALL = """\
# asap: slice=v5e-16
base_emb_dim: 256
base_num_query_heads: 4
base_num_kv_heads: 4
base_mlp_dim: 1024
base_num_decoder_layers: 2
head_dim: 64
vocab_size: 1024
per_device_batch_size: 1
max_target_length: 256
ici_fsdp_parallelism: -1
"""

# 1.6B parameters replicated 16 ways (data parallelism): 19.5 GB of weights and Adam moments per v5e chip.
OVERSIZED = """\
# asap: slice=v5e-16
base_emb_dim: 8192
base_num_query_heads: 64
base_num_kv_heads: 8
base_mlp_dim: 16384
base_num_decoder_layers: 1
head_dim: 128
vocab_size: 65536
per_device_batch_size: 1
max_target_length: 128
ici_data_parallelism: 16
ici_fsdp_parallelism: 1
"""

# MaxText's 1.2B `default` model with tensor parallelism over a whole v5e-4 slice, linked to runs/before:
# communication-bound in the synthetic "comm" profile; proposal 1 moves it to fsdp.
LOOP_CONFIG = """\
# asap: profile=runs/before
compile_topology: v5e-4
model_name: default
per_device_batch_size: 2
max_target_length: 2048
ici_fsdp_parallelism: 1
ici_tensor_parallelism: 4   # tensor parallelism over the whole slice
"""
