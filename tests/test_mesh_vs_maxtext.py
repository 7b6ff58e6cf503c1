"""ASAP's mesh checks against MaxText's own: mutated configs (the ICI and DCN lists, -1s, products, one slice or
several, a few slices, `num_slices` beside `compile_topology_num_slices`, whole numbers written as floats, text,
booleans and YAML 1.1 forms) go through MaxText's config and mesh step (tests/support/maxtext_mesh.py:
pyconfig.initialize, train_compile.validate_config and get_topology_mesh, in a MaxText environment) and through
`asap check --json`.

- every config MaxText rejects has an ASAP error, except one train_compile alone rejects: a config without
  `compile_topology_num_slices` > 0 (validate_config's 'You must set compile_topology_num_slices'), which train.py
  launches on the slices it finds; ASAP says nothing of it;
- no config MaxText accepts has an ASAP error of the mesh layers (ASAP100-ASAP106): an error on a launchable
  config is worse than silence (issue 25: ASAP102 on a second DCN -1 of a single slice, which MaxText ignores);
- where both accept, ASAP's degrees (ICI x DCN per axis) are MaxText's mesh shape.

Opt-in, as the other tests of MaxText itself (tests/test_verify.py, tests/test_moe_compiler.py): MaxText is a 2.8 GB
environment of its own (Python >= 3.12, `pip install 'maxtext[tpu]'`), named by ASAP_MAXTEXT_PYTHON; without it the
test skips. About a minute with it: one MaxText process judges every config, one `asap check` reads them all.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from server.common.codes import DiagCode
from tests.support.cli import ROOT, run_asap

MAXTEXT_PYTHON = os.environ.get("ASAP_MAXTEXT_PYTHON")
DRIVER = ROOT / "tests" / "support" / "maxtext_mesh.py"
SEED = 2025  # fixed: the same configs on every run
COUNT = 130

# The layers MaxText's config and mesh step decides (DOMAIN.md §2): the sharding rules after it (heads, batch) are
# MaxText's too, but asserted later, when the model is built.
MESH_CODES = {
    DiagCode.INVALID_DEGREE,
    DiagCode.ICI_PRODUCT_MISMATCH,
    DiagCode.SEVERAL_FILL_AXES,
    DiagCode.FILL_UNRESOLVED,
    DiagCode.DCN_PRODUCT_MISMATCH,
    DiagCode.DCN_ON_ONE_SLICE,
    DiagCode.AXIS_NOT_PLACEABLE,
    DiagCode.UNKNOWN_SLICE,  # the slice counts: MaxText's config step reads them
}
# The one rejection of train_compile that train.py does not share, and ASAP does not report: no
# compile_topology_num_slices > 0 (train.py takes the slice count from num_slices, or the slices it finds)
TRAIN_COMPILE_ONLY = "You must set compile_topology_num_slices to a positive integer"

SLICES = ("v4-128", "v5e-16", "v5e-256", "v6e-64", "v5p-32")
# Axes whose degree only the mesh decides: the others (context_usp_ulysses, pipeline, ...) carry validators of their
# own in MaxText (a strategy, a layer count) that are not the mesh's.
ICI_AXES = ("data", "fsdp", "fsdp_transpose", "tensor", "tensor_sequence", "expert", "context", "autoregressive")
DCN_AXES = ("diloco", "data", "fsdp", "fsdp_transpose", "tensor", "expert", "context", "pipeline")

# A value is an int or the YAML token it is written as ('"4"', "4.0", "true"), written as it is.
# The case of issue 25, and its single-slice variants: a second -1 beside the default dcn_data_parallelism: -1
FIXED: list[dict[str, Any]] = [
    {"compile_topology": "v4-128", "compile_topology_num_slices": 1, "dcn_expert_parallelism": -1},
    {"compile_topology": "v5e-16", "compile_topology_num_slices": 1, "dcn_fsdp_parallelism": -1},
    {
        "compile_topology": "v6e-64",
        "compile_topology_num_slices": 1,
        "dcn_tensor_parallelism": -1,
        "dcn_expert_parallelism": -1,
    },
    {"compile_topology": "v4-128", "compile_topology_num_slices": 1, "dcn_fsdp_parallelism": 0},
    {"compile_topology": "v4-128", "compile_topology_num_slices": 2, "dcn_expert_parallelism": -1},
    {"compile_topology": "v5e-16", "compile_topology_num_slices": 4, "dcn_diloco_parallelism": -1},
    {"compile_topology": "v5e-16", "compile_topology_num_slices": 1, "dcn_fsdp_parallelism": 2},
]


# Issue 25: whole numbers as MaxText's YAML loader (OmegaConf, YAML 1.1) and pydantic's lax int read them. Accepted:
# 4.0, "4", true (1), 010 (octal 8) ...; refused: 4.5, "4.", "0x4", 0o4 (text in YAML 1.1) ...
ICI_SPELLINGS = (
    *("4.0", "4e0", "4.", '"4"', "' 4 '", '"4.00"', '"+4"', "!!str 4", "!!float 4", "0x4", "0b100", "04", "+4"),
    *("true", "yes", "On", "false", "no", "4.5", '"4."', '"4e0"', '"0x4"', "0o4", "[4]", ".inf", "~", '"٤"', '"0-4"'),
    "2:00",
)
ONE_SLICE = {"compile_topology": "v5e-16", "compile_topology_num_slices": 1}
SPELLED: list[dict[str, Any]] = [
    *(ONE_SLICE | {"ici_tensor_parallelism": t} for t in ICI_SPELLINGS),
    *(ONE_SLICE | {"compile_topology": "v6e-64", "ici_tensor_parallelism": t} for t in ("010", '"010"')),  # 8, 10
    *({"compile_topology": "v5e-16", "compile_topology_num_slices": 2, "dcn_data_parallelism": t}
      for t in ("2.0", '"2"', "true", "-1.0", '" -1 "', '"2."')),
    *({"compile_topology": "v5e-16", "compile_topology_num_slices": t}
      for t in ("2.0", '"2"', "2e0", "true", "010", "-1.0", "2.5", '"2."', '"+2"')),
]  # fmt: skip
# MaxText takes the slice count from num_slices before compile_topology_num_slices (max_utils.get_num_slices);
# (compile_topology_num_slices, num_slices), None: not written
SLICE_COUNTS = [
    (2, 2), (2, -1), (-1, 2), (None, 2), (2, 4), (4, 2), (1, 2), (2, 1),
    (2, '"2"'), (2, "2.0"), (2, "true"), (1, "true"),
]  # fmt: skip
SPELLED += [
    {"compile_topology": "v5e-16", **({} if ct is None else {"compile_topology_num_slices": ct}), "num_slices": ns}
    for ct, ns in SLICE_COUNTS
]


def _respelled(rnd: random.Random, v: int) -> Any:
    """Now and then a degree or count written as MaxText reads it but not as an int: 4.0, "4"."""
    return rnd.choice((f"{v}.0", f'"{v}"')) if rnd.random() < 0.1 else v


def _devices(name: str) -> int:
    from server.config.slices import parse_slice

    return parse_slice(name).devices_per_slice


def _split(rnd: random.Random, n: int, axes: tuple[str, ...], parts: int) -> dict[str, int]:
    """n as a product of powers of two over `parts` distinct axes (the rest of n on the first)."""
    chosen = rnd.sample(axes, parts)
    out = dict.fromkeys(chosen, 1)
    while n % 2 == 0 and n > 1 and rnd.random() < 0.8:
        out[rnd.choice(chosen)] *= 2
        n //= 2
    out[chosen[0]] *= n
    return out


def mutated(rnd: random.Random) -> dict[str, Any]:
    """One config's keys: a slice and slice count, then an ICI and a DCN list, each right, nearly right or wrong."""
    name = rnd.choice(SLICES)
    slices = rnd.choice((1, 1, 2, 4))
    keys: dict[str, Any] = {"compile_topology": name, "compile_topology_num_slices": slices}
    devices = _devices(name)
    ici = rnd.random()
    if ici < 0.35:  # fsdp fills the rest (the default -1) beside a few explicit axes
        for a in rnd.sample(ICI_AXES[2:], rnd.randint(1, 2)):
            keys[f"ici_{a}_parallelism"] = rnd.choice((1, 2, 4, 8))
    elif ici < 0.65:  # every axis explicit, the product exact
        keys |= {f"ici_{a}_parallelism": v for a, v in _split(rnd, devices, ICI_AXES, rnd.randint(1, 3)).items()}
        if "ici_fsdp_parallelism" not in keys:
            keys["ici_fsdp_parallelism"] = 1
    else:  # anything: -1s, zeros, odd factors, wrong products
        for a in rnd.sample(ICI_AXES, rnd.randint(1, 3)):
            keys[f"ici_{a}_parallelism"] = rnd.choice((-1, -1, 1, 2, 3, 4, 8, 16, 0))
    dcn = rnd.random()
    if dcn < 0.3:  # a second -1 beside the default dcn_data_parallelism: -1
        keys[f"dcn_{rnd.choice(DCN_AXES[2:])}_parallelism"] = -1
    elif dcn < 0.5:  # the slices spread over the DCN list, data explicit
        keys |= {f"dcn_{a}_parallelism": v for a, v in _split(rnd, slices, DCN_AXES[1:], rnd.randint(1, 2)).items()}
        keys.setdefault("dcn_data_parallelism", 1)
    elif dcn < 0.65:  # dcn_diloco_parallelism: -1, resolved by MaxText before the fill
        keys["dcn_diloco_parallelism"] = -1
        if rnd.random() < 0.5:
            keys[f"dcn_{rnd.choice(DCN_AXES[2:])}_parallelism"] = rnd.choice((-1, 1, 2))
    elif dcn < 0.9:  # anything
        for a in rnd.sample(DCN_AXES, rnd.randint(1, 2)):
            keys[f"dcn_{a}_parallelism"] = rnd.choice((-1, -1, 1, 2, 4, 0))
    # (else the default DCN list)
    if rnd.random() < 0.25:  # num_slices too: mostly the same count, sometimes -1 or another
        keys["num_slices"] = rnd.choice((slices, slices, -1, rnd.choice((1, 2, 4))))
    return {k: v if isinstance(v, str) else _respelled(rnd, v) for k, v in keys.items()}


def _write(path: Path, keys: dict[str, Any]) -> None:
    body = "".join(f"{k}: {v}\n" for k, v in keys.items())
    path.write_text("base_config: base.yml\nmodel_name: llama2-7b\nper_device_batch_size: 4\n" + body)


def _maxtext_verdicts(python: str, configs: list[Path], cwd: Path) -> dict[str, dict[str, Any]]:
    jobs = cwd / "jobs.json"
    jobs.write_text(json.dumps([{"config": str(p)} for p in configs]))
    # MaxText's environment, not ASAP's: no PYTHONPATH, no libtpu of ASAP's jax, no M_* key overrides
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TPU_LIBRARY_PATH") and k[:2] != "M_"}
    done = subprocess.run(
        [python, str(DRIVER), "--batch", str(jobs)], capture_output=True, text=True, cwd=cwd, env=env, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    verdicts = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(verdicts) == len(configs), done.stderr[-3000:]
    return {v["config"]: v for v in verdicts}


def _asap_reports(configs: list[Path]) -> dict[str, dict[str, Any]]:
    done = run_asap("check", *configs, "--json", timeout=900)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return {str(r["file"]): r for r in json.loads(done.stdout)}


def _asap_shape(report: dict[str, Any]) -> dict[str, int | None]:
    """ASAP's degrees per mesh axis (ICI x DCN), under MaxText's names for them (`mesh_axes`)."""
    mesh = report["mesh"]
    out: dict[str, int | None] = {}
    for axis, name in zip(mesh["ici"], mesh["mesh_axes"], strict=True):
        i, d = mesh["ici"][axis], mesh["dcn"][axis]
        out[name] = None if i is None or d is None else i * d
    return out


@pytest.mark.tpu
@pytest.mark.skipif(not MAXTEXT_PYTHON, reason="set ASAP_MAXTEXT_PYTHON to a Python 3.12 with maxtext[tpu]")
def test_mesh_checks_agree_with_maxtext(tmp_path: Path) -> None:
    assert MAXTEXT_PYTHON is not None
    rnd = random.Random(SEED)
    cases = FIXED + SPELLED + [mutated(rnd) for _ in range(COUNT)]
    configs = []
    for i, keys in enumerate(cases):
        path = tmp_path / f"c{i:03d}.yml"
        _write(path, keys)
        configs.append(path)
    maxtext = _maxtext_verdicts(MAXTEXT_PYTHON, configs, tmp_path)
    asap = _asap_reports(configs)

    missed, false_errors, other_mesh, train_compile_only = [], [], [], []
    for path, keys in zip(configs, cases, strict=True):
        verdict, report = maxtext[str(path)], asap[str(path)]
        errors = sorted({f["code"] for f in report["findings"] if f["severity"] == "error"})
        if not verdict["accepted"] and not errors and TRAIN_COMPILE_ONLY in verdict["error"]:
            assert float(str(keys.get("compile_topology_num_slices", -1)).strip("\"' ")) == -1, keys  # unset
            train_compile_only.append(keys)
        elif not verdict["accepted"] and not errors:
            missed.append((keys, verdict["error"]))
        elif verdict["accepted"] and (wrong := [c for c in errors if c in MESH_CODES]):
            false_errors.append((keys, wrong))
        elif verdict["accepted"] and _asap_shape(report) != verdict["mesh"]:
            other_mesh.append((keys, _asap_shape(report), verdict["mesh"]))
    accepted = sum(v["accepted"] for v in maxtext.values())
    print(
        f"\n{len(cases)} configs: MaxText accepts {accepted}, rejects {len(cases) - accepted} "
        f"({len(train_compile_only)} for train_compile alone: no compile_topology_num_slices); ASAP misses "
        f"{len(missed)} rejections, blocks {len(false_errors)} accepted configs, resolves {len(other_mesh)} "
        "accepted meshes differently"
    )
    assert maxtext[str(configs[0])]["accepted"], maxtext[str(configs[0])]  # issue 25's case: v4-128, two DCN -1s
    assert 0.2 * len(cases) < accepted < 0.8 * len(cases)  # both verdicts well represented
    assert not missed, missed[:5]
    assert not false_errors, false_errors[:5]
    assert not other_mesh, other_mesh[:5]
