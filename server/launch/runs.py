"""The MaxText runs of a launch file: which commands start a MaxText training or compile, with what.

A run is one of:
- `train`: `python3 -m MaxText.train CONFIG key=value ...` (also `maxtext.train`, `maxtext.trainers.pre_train.train`,
  the `train_compile` forms and the script paths), MaxText's argv being the config file then `key=value` overrides
  (src/maxtext/configs/pyconfig.py `initialize`, @e591f30cb);
- `benchmark_runner`: `python3 -m benchmarks.benchmark_runner xpk|on-device --model_name=RECIPE --device_type=...`;
- `xpk`: `xpk workload create --tpu-type|--device-type=... --num-slices=N --command "..."`, the command's own
  MaxText invocation being the run (a benchmark_runner inside an XPK command stays a benchmark_runner run).

The slice comes from `compile_topology` when the command sets it (the config pipeline reads it), else from XPK's or
the benchmark runner's device type and slice count, else from a Kubernetes pod's GKE node selector and its JobSet's
replicas. The XLA flags come from LIBTPU_INIT_ARGS in the command's environment (the script's `export`, the
container's env). Nothing is executed; every value keeps where it was written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from server.launch.located import Located
from server.launch.shell import Command
from server.launch.sources import GKE_ACCELERATORS, Found, commands_in, nested

# `src.` when run from the checkout's root without installing (`python3 -m src.maxtext.trainers.pre_train.train`,
# tpu-recipes' Ironwood DeepSeek GCS and Lustre recipes).
TRAIN_MODULES = re.compile(r"^(?:src\.)?(?:MaxText|maxtext)(?:\.trainers\.pre_train)?\.train(?:_compile)?$")
TRAIN_SCRIPTS = re.compile(r"(?:^|/)(?:MaxText|maxtext)/(?:trainers/pre_train/)?train(?:_compile)?\.py$")
RUNNER_MODULE = "benchmarks.benchmark_runner"
RUNNER_SCRIPT = re.compile(r"(?:^|/)benchmarks/benchmark_runner\.py$")
_PYTHON = re.compile(r"^python(?:\d+(?:\.\d+)?)?$")
_KEY = re.compile(r"^[A-Za-z_][\w.]*$")
# MaxText's package since its 2025 layout (`maxtext.trainers.pre_train.train`, src/maxtext/...) takes its first
# argument as the config only when it ends in `.yml`; otherwise it trains with the module's default config (base.yml
# for train and train_compile) and reads every argument as an override (pyconfig._resolve_or_infer_config,
# _CONFIG_FILE_MAPPING, @e591f30cb). The older `MaxText.train` always took its first argument as the config.
_INFERS_CONFIG = re.compile(r"(?:^|[./])maxtext[./]")
# absl's help flags: MaxText's trainers run under absl's app.run, which prints the flags' help and exits on these.
_ABSL_HELP = frozenset({"--help", "-?", "--helpshort", "--helpfull", "--helpxml"})
# Commands that run the rest of their argv: `env K=V cmd`, `nohup cmd`, `timeout 3h cmd`, `uv run cmd`.
_WRAPPERS = {"env", "nohup", "time", "exec", "sudo", "command", "stdbuf", "nice", "ionice"}
# An option's value for numactl or taskset: nodes, CPUs or a mask (`0`, `0-3,8`, `all`, `0x3`).
_CPU_LIST = re.compile(r"^(?:[\d,.:+!-]+|all|0x[0-9a-f]+)$", re.IGNORECASE)
# Python options taking a value (`-X dev`, `-W error`); the others are single letters that may be combined.
_PY_VALUE_OPTS = ("-X", "-W", "-Q")
# The options that name a slice, as XPK (xpk workload create) and MaxText's benchmark runner spell them.
XPK_DEVICE_OPTS = ("--tpu-type", "--device-type")
XPK_SLICES_OPTS = ("--num-slices",)
RUNNER_DEVICE_OPTS = ("--device_type",)
RUNNER_SLICES_OPTS = ("--num_slices",)


@dataclass(frozen=True)
class Override:
    """A `key=value` argument: the whole token and its two halves, each where it is written."""

    key: str
    value: str
    token: Located
    key_loc: Located
    value_loc: Located
    written: bool = True  # False: a value the command implies (a benchmark recipe's), written nowhere in the file

    @property
    def symbolic(self) -> bool:
        return self.value_loc.is_symbolic


@dataclass(frozen=True)
class Setting:
    """A value a run takes from outside MaxText's argv: its text, where it is written, and how the file names it
    (an option, a node-selector label, an environment variable)."""

    value: str
    loc: Located
    label: str


@dataclass
class Run:
    kind: str  # "train", "benchmark_runner", "xpk"
    source: Located  # the outermost command of the run (the XPK or runner command when there is one)
    module: str  # what python runs: the module or the script
    config: Located | None = None  # MaxText's config argument (train), None for a benchmark recipe
    overrides: list[Override] = field(default_factory=list)
    device: Setting | None = None  # the slice: "v6e-256", "tpu7x:4x4x8"
    num_slices: Setting | None = None
    flags: Setting | None = None  # LIBTPU_INIT_ARGS
    recipe: Setting | None = None  # benchmark_runner's --model_name
    found_recipe: Any = None  # the recipe it names, as read (server/launch/recipes.py Recipe), once resolved
    runner_args: dict[str, Setting] = field(default_factory=dict)  # benchmark_runner's --options
    problems: list[tuple[str, Located]] = field(default_factory=list)  # what MaxText would refuse, located
    notes: list[tuple[str, Located]] = field(default_factory=list)  # what ASAP leaves out of the run, and why
    shell: bool = True  # written as a shell command (False: a container's argv list, one item per argument)


def runs_in(path: Path | None, text: str, language_id: str | None = None) -> list[Run]:
    """Every MaxText run of the file, in file order."""
    out: list[Run] = []
    for found in commands_in(path, text, language_id):
        out.extend(_runs(found, None))
    return out


def _runs(found: Found, xpk: Run | None) -> list[Run]:
    words = _unwrap(found.command.words)
    if not words:
        return []
    name = Path(words[0].text).name
    launched = _module(words) if _PYTHON.match(name) else None
    if name in ("xpk", "xpk.py") or (launched is not None and Path(launched[0]).name in ("xpk", "xpk.py")):
        return _xpk(found, words)  # `xpk`, `python3 -m xpk`, `python3 xpk/xpk.py` (MaxText's docs)
    if _PYTHON.match(name):
        if launched is None:
            return []
        module, rest = launched
        if TRAIN_MODULES.match(module) or TRAIN_SCRIPTS.search(module):
            if any(w.text in _ABSL_HELP for w in words[rest:]):
                return []  # absl answers with the help text: nothing trains
            return [_train(found, words[rest:], module, xpk)]
        if module == RUNNER_MODULE or RUNNER_SCRIPT.search(module):
            return [_runner(found, words[rest:], module, xpk)]
    if name in ("bash", "sh") and len(words) > 2:
        from server.launch.sources import shell_script

        script = shell_script(words)
        if script is not None:
            return [r for f in nested(found, script) for r in _runs(f, xpk)]
    return []


def _unwrap(words: list[Located]) -> list[Located]:
    """The argv after wrapper commands and their options (`env -u X K=V`, `timeout 3h`, `uv run`)."""
    i = 0
    while i < len(words):
        name = Path(words[i].text).name
        if name in _WRAPPERS:
            i += 1
            while i < len(words) and (words[i].text.startswith("-") or "=" in words[i].text):
                i += 1
            continue
        if words[i].is_symbolic and i + 1 < len(words) and _PYTHON.match(Path(words[i + 1].text).name):
            # `$cmd python3 -m ...`: a prefix unknown statically (empty, `echo` in a dry run, a wrapper) before python
            i += 1
            continue
        if name in ("numactl", "taskset"):  # `numactl --membind 0 --cpunodebind=0 python3 ...` (MaxText's PREFLIGHT.md)
            i += 1
            while i < len(words) and (words[i].text.startswith("-") or _CPU_LIST.match(words[i].text)):
                i += 1
            continue
        if name == "timeout":
            i += 1
            while i < len(words) and words[i].text.startswith("-"):
                i += 1
            i += 1  # the duration
            continue
        if name in ("uv", "poetry", "pipenv", "pdm") and i + 1 < len(words) and words[i + 1].text == "run":
            i += 2
            while i < len(words) and words[i].text.startswith("-"):
                i += 1
            continue
        break
    return words[i:]


def _module(words: list[Located]) -> tuple[str, int] | None:
    """What `python ...` runs (a module's name or a script's path) and the index of its first argument."""
    i = 1
    while i < len(words):
        w = words[i].text
        if w == "-m" and i + 1 < len(words):
            return words[i + 1].text, i + 2
        if w.startswith("-m") and len(w) > 2:
            return w[2:], i + 1
        if w in _PY_VALUE_OPTS:
            i += 2
            continue
        if w.startswith("-c") or w == "-":
            return None
        if w.startswith("-"):
            i += 1
            continue
        return w, i + 1
    return None


def _env_flags(cmd: Command, found: Found) -> Setting | None:
    """LIBTPU_INIT_ARGS as the command's environment holds it, else the container's env entry."""
    v = cmd.env.get("LIBTPU_INIT_ARGS")
    if v is not None:
        return Setting(v.text, v, "LIBTPU_INIT_ARGS")
    if found.context.flags is not None:
        return Setting(found.context.flags.text, found.context.flags, "LIBTPU_INIT_ARGS")
    return None


def _pod_slice(run: Run, found: Found) -> None:
    """The slice of a Kubernetes pod: its node selector's accelerator and topology, its JobSet's replicas."""
    ctx = found.context
    if run.device is None and ctx.accelerator is not None and ctx.topology is not None:
        gen = GKE_ACCELERATORS.get(ctx.accelerator.text.strip())
        name = f"{gen}:{ctx.topology.text.strip()}" if gen else f"{ctx.accelerator.text}:{ctx.topology.text}"
        run.device = Setting(name, ctx.topology, f"node selector {ctx.accelerator.text} {ctx.topology.text}")
    if run.num_slices is None and ctx.replicas is not None and run.device is not None:
        run.num_slices = Setting(ctx.replicas.text.strip(), ctx.replicas, "JobSet replicas")


def _train(found: Found, args: list[Located], module: str, xpk: Run | None) -> Run:
    run = Run("xpk" if xpk else "train", xpk.source if xpk else found.command.source, module)
    run.shell = not found.argv_only
    if xpk is not None:
        run.device, run.num_slices = xpk.device, xpk.num_slices
    rest = args
    infers = bool(_INFERS_CONFIG.search(module))
    first = rest[0] if rest else None
    if first is not None and "=" not in first.text and (not infers or first.is_symbolic or first.text.endswith(".yml")):
        run.config, rest = first, rest[1:]
    elif not infers:
        run.problems.append(
            ("MaxText's first argument is its config file (e.g. MaxText/configs/base.yml)", found.command.source)
        )
    # else: no config argument, MaxText's base.yml (run.config None)
    for i, w in enumerate(rest):
        o = split_override(w)
        if o is None and infers and i == 0 and first is not None and run.config is None and "=" not in w.text:
            run.problems.append(
                (f"'{w.text}' does not end in .yml, so MaxText reads it as an override, and it is not key=value", w)
            )
        elif o is None:
            run.problems.append((f"'{w.text}' is not key=value: MaxText's overrides are key=value", w))
        else:
            run.overrides.append(o)
    run.flags = _env_flags(found.command, found)
    _pod_slice(run, found)
    return run


def split_override(w: Located) -> Override | None:
    parts = w.split("=", 1)
    if len(parts) != 2 or not _KEY.match(parts[0].text):
        return None
    return Override(parts[0].text, parts[1].text, w, parts[0], parts[1])


def _options(args: list[Located]) -> dict[str, Setting]:
    """`--name=value` and `--name value` options (a bare `--flag` is "true")."""
    out: dict[str, Setting] = {}
    i = 0
    while i < len(args):
        w = args[i]
        if w.text.startswith("--"):
            if "=" in w.text:
                name, value = w.split("=", 1)
                out[name.text] = Setting(value.text, value, name.text)
            elif i + 1 < len(args) and not args[i + 1].text.startswith("--"):
                out[w.text] = Setting(args[i + 1].text, args[i + 1], w.text)
                i += 1
            else:
                out[w.text] = Setting("true", w, w.text)
        i += 1
    return out


def _pick(opts: dict[str, Setting], names: tuple[str, ...]) -> Setting | None:
    return next((opts[n] for n in names if n in opts), None)


def _runner(found: Found, args: list[Located], module: str, xpk: Run | None) -> Run:
    run = Run("benchmark_runner", xpk.source if xpk else found.command.source, module)
    opts = _options(args)
    run.runner_args = opts
    run.recipe = opts.get("--model_name")
    run.device = _pick(opts, RUNNER_DEVICE_OPTS) or (xpk.device if xpk else None)
    run.num_slices = _pick(opts, RUNNER_SLICES_OPTS) or (xpk.num_slices if xpk else None)
    if run.device is not None and "-" in run.device.value:
        run.device = _device(run.device)
    # no --model_name: the runner's argparse default, the first recipe of trillium_model_dict (benchmark_runner.py:135,
    # 216 @e591f30cb), which the analysis looks up where the recipes are read
    run.flags = _env_flags(found.command, found)
    _pod_slice(run, found)
    return run


_TPU_DEVICE = re.compile(r"^(?:v\d|tpu)", re.IGNORECASE)  # v4-8, v5litepod-16, v5p-8, v6e-256, tpu7x-4x4x4
_XPK_TOPOLOGY = re.compile(r"^(?P<gen>[a-z0-9]+)-(?P<topo>\d+x\d+(?:x\d+)?)$", re.I)


def _device(s: Setting) -> Setting:
    """XPK's device type as a slice name ASAP reads: `tpu7x-4x4x8` is `tpu7x:4x4x8`; `v6e-256` stays."""
    m = _XPK_TOPOLOGY.match(s.value.strip())
    return Setting(f"{m['gen']}:{m['topo']}", s.loc, s.label) if m else s


def _xpk(found: Found, words: list[Located]) -> list[Run]:
    """`xpk workload create ... --command "..."`: the runs of its command, on XPK's slice."""
    opts = _options(words[1:])
    command = opts.get("--command")
    if command is None:
        return []
    launcher = Run("xpk", found.command.source, "xpk")
    device = _pick(opts, XPK_DEVICE_OPTS)
    launcher.device = _device(device) if device is not None else None
    launcher.num_slices = _pick(opts, XPK_SLICES_OPTS)
    note: tuple[str, Located] | None = None
    if (
        device is not None
        and device.label == "--device-type"
        and not device.loc.is_symbolic
        and not _TPU_DEVICE.match(device.value.strip())
    ):
        # XPK's --device-type also names GPUs and CPUs (h100-80gb-8, n2-standard-32-4): not a slice ASAP models
        note = (
            f"{device.label}={device.value} is not a TPU: ASAP models TPU slices only; no slice, no estimate",
            device.loc,
        )
        launcher.device = launcher.num_slices = None
    out: list[Run] = []
    for f in nested(found, command.loc):
        out.extend(_runs(f, launcher))
    if note is not None:
        for run in out:
            run.notes.append(note)
    return out
