"""MaxText's own config and mesh step, as `train_compile` runs it before compiling anything: `pyconfig.initialize`
(the YAML chain, the model file, pydantic's types and MaxText's config validators), `train_compile.validate_config`
and `train_compile.get_topology_mesh` (the TPU topology of `compile_topology`, built on the CPU by libtpu, and
`maxtext_utils.create_device_mesh`: the ICI and DCN lists filled and checked, JAX's placement on the torus).

Run with a MaxText environment's Python (ASAP_MAXTEXT_PYTHON; MaxText needs Python >= 3.12 and `maxtext[tpu]`),
never with ASAP's: it imports MaxText and nothing of ASAP. tests/test_mesh_vs_maxtext.py drives it.

    python maxtext_mesh.py CONFIG.yml [key=value ...]     one verdict, one JSON line on stdout
    python maxtext_mesh.py --batch JOBS.json              a verdict per job of [{"config", "overrides"?}, ...]

A verdict is {"config", "accepted": true, "mesh": {axis: size}} or {"config", "accepted": false, "error": "<type>:
<message>", "step": "initialize" | "validate_config" | "get_topology_mesh"}. MaxText and libtpu log to stdout and
stderr freely: the verdicts go to the process's original stdout, and everything else to stderr.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def _message(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:600]}"


def judge(config: str, overrides: list[str], pyconfig: Any, train_compile: Any) -> dict[str, Any]:
    """MaxText's verdict on one config: train_compile's first three steps, in its order."""
    out: dict[str, Any] = {"config": config, "overrides": overrides}
    step = "initialize"
    try:
        # pyconfig.initialize minus its error handler, which logs and calls sys.exit(2) outside a test framework
        # (and writes /dev/termination-log): the same loading and validation, with the exception kept
        cfg = pyconfig.HyperParameters(pyconfig._initialize_pydantic(["train_compile", config, *overrides]))
        step = "validate_config"
        train_compile.validate_config(cfg)
        step = "get_topology_mesh"
        mesh = train_compile.get_topology_mesh(cfg)
    except Exception as e:  # every failure is the verdict: pydantic, ValueError, AssertionError, NotImplementedError
        return {**out, "accepted": False, "step": step, "error": _message(e)}
    return {**out, "accepted": True, "mesh": {str(k): int(v) for k, v in mesh.shape.items()}}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "--batch":
        with open(argv[1], encoding="utf-8") as f:
            jobs = [(j["config"], [str(o) for o in j.get("overrides", [])]) for j in json.load(f)]
    else:
        jobs = [(argv[0], argv[1:])]
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # the topology is libtpu's description; nothing runs on a TPU
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    verdicts = os.fdopen(os.dup(1), "w", buffering=1)  # the verdicts' own stream: a copy of stdout taken first,
    os.dup2(2, 1)  # then MaxText's and libtpu's prints (Python's and C's) go to stderr
    from maxtext.configs import pyconfig  # imported here: a few seconds of jax, flax and MaxText
    from maxtext.trainers.pre_train import train_compile

    for config, overrides in jobs:
        verdicts.write(json.dumps(judge(config, overrides, pyconfig, train_compile)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
