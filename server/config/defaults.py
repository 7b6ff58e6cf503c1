"""MaxText's defaults (src/maxtext/configs/base.yml) for the keys ASAP reads.

A key that no file in the `base_config` chain (and no model file) sets takes this value, as in MaxText,
where every config inherits base.yml. Two layers, lowest first: DEFAULTS below, then base.yml's values at the
commit of ASAP's model catalog for every key a model file sets and every structural key
(`server/config/models.py`'s `base_keys()`, written by `tools/models_from_maxtext.py`). `base_defaults()` is both.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from server.config.axes import AXES

BASE_YML = "MaxText src/maxtext/configs/base.yml"

DEFAULTS: dict[str, Any] = {
    **{a.ici_key: a.ici_default for a in AXES},
    **{a.dcn_key: a.dcn_default for a in AXES},
    "model_name": "default",
    "per_device_batch_size": 12.0,
    "gradient_accumulation_steps": 1,
    "max_target_length": 2048,
    "num_slices": -1,
    "compile_topology_num_slices": -1,
    "allow_split_physical_axes": False,
    "remat_policy": "full",
    "dtype": "bfloat16",
    "weight_dtype": "float32",
    "opt_type": "adamw",
    "global_parameter_scale": 1,
}


@lru_cache(maxsize=1)
def _base_defaults() -> dict[str, Any]:
    from server.config.models import base_keys

    return {**DEFAULTS, **base_keys()}


def base_defaults() -> dict[str, Any]:
    """ASAP's DEFAULTS under base.yml's values from the model catalog (a fresh copy)."""
    return dict(_base_defaults())
