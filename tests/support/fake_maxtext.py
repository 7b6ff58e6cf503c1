"""A stand-in for a MaxText environment's Python (setting asap.maxtextPython, `asap verify --maxtext-python`): a shell
script that answers as MaxText's train_compile does, as far as ASAP reads it (server/compile/verify_maxtext.py): its
version probe, its milestones on stderr, its memory report on stdout (12 + 3 GiB per chip), the optimized train step
it dumps where XLA_FLAGS' --xla_dump_to says (a scheduled module: 32 loop steps of a 32768 x 32768 bf16 matmul,
HLO_STEP_S simulated on a v6e chip), and libtpu's out-of-memory message (39.8 of 31.25 GiB) for any mesh with
fsdp=16. A compile of a proposal (any mesh given on the command line) waits until the file `release` exists next to
the script, and every compile while a file `hold` exists there, so a test decides when they may finish; each compile
appends its process id to `pids` there, and its arguments as one line to `args`. Each script reports its own path as
MaxText's version, so its compiles are cached apart from every other's. Used by tests/lsp/test_verify_advice.py and
tests/test_verification.py, and usable from the e2e."""

from __future__ import annotations

from pathlib import Path

FAKE_MAXTEXT = """#!/bin/sh
here=$(dirname "$0")
if [ "$1" = "-c" ]; then
  echo '{"maxtext": "0.0-fake-'"$here"'", "jax": null, "libtpu": null}'
  exit 0
fi
echo $$ >> "$here/pids"
printf '%s\n' "$*" >> "$here/args"
echo 'Starting train_compile.py' >&2
while [ -e "$here/hold" ]; do sleep 0.05; done
case " $* " in
  *" ici_fsdp_parallelism="*) while [ ! -e "$here/release" ]; do sleep 0.05; done ;;
esac
echo 'Jitting and compiling train step' >&2
case " $* " in
  *" ici_fsdp_parallelism=16 "*)
    echo 'RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm.' \\
      'Used 39.80G of 31.25G hbm. Exceeded hbm capacity by 8.55G.' >&2
    exit 1 ;;
esac
echo 'Memory analysis: CompiledMemoryStats(argument_size_in_bytes=12884901888, output_size_in_bytes=0,' \\
  'alias_size_in_bytes=0, temp_size_in_bytes=3221225472, generated_code_size_in_bytes=0)'
dump=$(printf '%s' "$XLA_FLAGS" | sed -n 's/.*--xla_dump_to=\\([^ ]*\\).*/\\1/p')
if [ -n "$dump" ]; then
  mkdir -p "$dump"
  cat > "$dump/module_0001.jit_train_step.cl_1.after_optimizations.txt" <<'HLO'
HloModule jit_train_step, is_scheduled=true

%body (p: (s32[], bf16[32768,32768])) -> (s32[], bf16[32768,32768]) {
  %p = (s32[], bf16[32768,32768]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = bf16[32768,32768]{1,0} get-tuple-element(%p), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %y = bf16[32768,32768]{1,0} dot(%x, %x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = (s32[], bf16[32768,32768]{1,0}) tuple(%next, %y)
}

%cond (c: (s32[], bf16[32768,32768])) -> pred[] {
  %c = (s32[], bf16[32768,32768]{1,0}) parameter(0)
  %ci = s32[] get-tuple-element(%c), index=0
  %n = s32[] constant(32)
  ROOT %lt = pred[] compare(%ci, %n), direction=LT
}

ENTRY %main (a: bf16[32768,32768]) -> bf16[32768,32768] {
  %a = bf16[32768,32768]{1,0} parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], bf16[32768,32768]{1,0}) tuple(%zero, %a)
  %w = (s32[], bf16[32768,32768]{1,0}) while(%init), condition=%cond, body=%body
  ROOT %out = bf16[32768,32768]{1,0} get-tuple-element(%w), index=1
}
HLO
fi
"""


# The dumped module's step on a v6e chip as server/compile/schedule_sim.py simulates it: 32 x 2 x 32768^3 FLOPs at
# v6e's bf16 peak times its MXU efficiency (the chip table), its HBM traffic hidden under the matmuls.
HLO_STEP_S = 32 * 2 * 32768**3 / (918e12 * 0.70)


def write(directory: Path) -> Path:
    """The script as `directory`/python (the directory is created), executable."""
    directory.mkdir(parents=True, exist_ok=True)
    exe = directory / "python"
    exe.write_text(FAKE_MAXTEXT)
    exe.chmod(0o755)
    return exe


# `asap verify examples/llama3-8b-v6e-16.yml --proposals --json` answered by this stand-in: (label, status) of each
# result then each withdrawn entry. Proposal 1 (fsdp=16) gets libtpu's out-of-memory and is withdrawn; the next
# candidate in its place is the same mesh with a larger batch, which does not fit either.
DEMO_VERDICTS = [
    ("current mesh", "ok"),
    ("proposal 1", "ok"),
    ("proposal 2", "ok"),
    ("proposal 3", "ok"),
    ("proposal 1", "does-not-fit"),
    ("next candidate (fsdp=16; per_device_batch_size=4)", "does-not-fit"),
]
