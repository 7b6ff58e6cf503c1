"""The catalog of ASAP's diagnostic codes: for each code the server emits, what it means, what the
verdict rests on (and so how sure ASAP is), how to fix it, and the knowledge-base notes that explain it.
Hovers (server/presentation/explain.py) and the code table of docs/diagnostics.md read it; a test keeps it in
step with the codes the producers emit. No editor types here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class DiagCode(StrEnum):
    """Every diagnostic code ASAP emits, by what it says; producers use these, never the bare string."""

    INVALID_YAML = "ASAP001"
    BASE_CONFIG_NOT_FOUND = "ASAP002"
    BASE_CONFIG_CYCLE = "ASAP003"
    UNKNOWN_MODEL = "ASAP004"
    UNKNOWN_SLICE = "ASAP005"
    MODEL_FILE_OVERRIDE = "ASAP006"
    DOCUMENT_TOO_LARGE = "ASAP007"
    ALIASES_EXPAND_TOO_FAR = "ASAP008"
    NUMBER_SPELLING = "ASAP009"
    NO_SLICE = "ASAP010"
    XLA_FLAGS_PROBLEM = "ASAP011"
    LAUNCH_COMMAND = "ASAP012"
    PLACEMENT_UNCHECKED = "ASAP099"
    INVALID_DEGREE = "ASAP100"
    ICI_PRODUCT_MISMATCH = "ASAP101"
    SEVERAL_FILL_AXES = "ASAP102"
    FILL_UNRESOLVED = "ASAP103"
    DCN_PRODUCT_MISMATCH = "ASAP104"
    DCN_ON_ONE_SLICE = "ASAP105"
    AXIS_NOT_PLACEABLE = "ASAP106"
    QUERY_HEADS_INDIVISIBLE = "ASAP107"
    KV_HEADS_INDIVISIBLE = "ASAP108"
    BATCH_INDIVISIBLE = "ASAP109"
    FRACTIONAL_BATCH_UNCOVERED = "ASAP110"
    IGNORED_KEY = "ASAP111"
    BAD_BATCH_SIZE = "ASAP112"
    MISSPELT_KEY = "ASAP113"
    ESTIMATE = "ASAP120"
    HBM_OVERFLOW = "ASAP121"
    HBM_TIGHT = "ASAP122"
    NO_ESTIMATE = "ASAP129"
    PROFILE_VERDICT = "ASAP200"
    PROFILE_MISSING = "ASAP201"
    PROFILE_OTHER_SLICE = "ASAP202"
    PROFILE_NOT_READ = "ASAP203"
    PROFILES_OUTSIDE_WORKSPACE = "ASAP204"
    PROFILE_NOTE = "ASAP205"
    AGENTS = "ASAP300"
    COMPILER_VERIFIED = "ASAP400"
    COMPILER_DOES_NOT_FIT = "ASAP401"
    COMPILER_DISAGREES = "ASAP402"
    COMPILER_UNAVAILABLE = "ASAP403"


@dataclass(frozen=True)
class Code:
    code: DiagCode
    title: str
    layer: str  # who rejects or reports it: YAML, MaxText pyconfig, JAX placement, estimate, profile, agents
    meaning: str
    basis: str  # what the verdict rests on: how sure ASAP is
    fix: str
    notes: tuple[str, ...] = ()  # file names under kb/docs/


_CODES = (
    # -- loading the config ------------------------------------------------------------------------------
    Code(
        DiagCode.INVALID_YAML,
        "Invalid YAML",
        "YAML",
        "The file (or a `base_config` parent) does not parse as YAML, so MaxText cannot load it and ASAP "
        "checks nothing else in it.",
        "Certain: the YAML parser's own error, at its position (for a parent: at the `base_config` line).",
        "Correct the syntax at the reported line and column (indentation, a missing `:`, an unclosed quote).",
    ),
    Code(
        DiagCode.BASE_CONFIG_NOT_FOUND,
        "base_config not found",
        "config loading",
        "The `base_config` parent cannot be read (or is not a file name). Keys it would set fall back to "
        "MaxText's defaults in ASAP's analysis.",
        "Certain for the places ASAP looks in, MaxText's: next to the file that names it, then MaxText's configs "
        "directory (the checkout the file lies in, asap.maxtextPath's, ASAP's catalog of MaxText's configs); the "
        "message lists every place looked in.",
        "Point `base_config` at an existing file (relative to this config's directory or to MaxText's configs "
        "directory), or name the MaxText checkout that has it (asap.maxtextPath, --maxtext-path).",
    ),
    Code(
        DiagCode.BASE_CONFIG_CYCLE,
        "base_config cycle",
        "config loading",
        "Following `base_config` leads back to a file already in the chain, so the chain never ends.",
        "Certain: the message lists the chain as followed.",
        "Remove the `base_config` that points back into the chain.",
    ),
    Code(
        DiagCode.UNKNOWN_MODEL,
        "Unknown model_name",
        "MaxText pyconfig",
        "No model file for this `model_name` in ASAP's catalog of MaxText's model files, in `models/` next to the "
        "config (or next to its directory), or in the MaxText checkout the `base_config` chain or "
        "`asap.maxtextPath` names. MaxText then only logs \"Model config for '<name>' not found\" and trains "
        "what the config files and base.yml give. Information when the config sets the `base_*` dimensions (the "
        "estimate prices them); a warning when it does not, because the run trains base.yml's default 1B model.",
        "Certain for the places listed: MaxText's own lookup order (pyconfig.py). The catalog is MaxText at the "
        "commit it names; a model added to MaxText later is found only in a checkout ASAP is pointed at.",
        "Fix the name (the message lists the catalog's models of the family; the quick fix 'Did you mean ...?' "
        "offers the closest known names), point `asap.maxtextPath` / "
        "`--maxtext-path` at a MaxText checkout that has the model, or set `base_emb_dim`, "
        "`base_num_query_heads`, `base_num_kv_heads`, `base_mlp_dim` and `base_num_decoder_layers`.",
    ),
    Code(
        DiagCode.UNKNOWN_SLICE,
        "Unknown slice or slice count",
        "config loading",
        "The declared TPU slice (`compile_topology`, the `# asap: slice=` comment or the `asap.defaultSlice` "
        "setting) is not a known slice name, or the slice count is not a whole number >= 1, or `num_slices` and "
        "`compile_topology_num_slices` name different counts beside `compile_topology`: MaxText takes `num_slices` "
        "first (max_utils.get_num_slices) and builds the mesh for it over the devices of "
        "`compile_topology_num_slices` slices, which fails.",
        "Certain for `compile_topology`: MaxText's accelerator map raises 'Invalid compile topology' for "
        "names it lacks, and ASAP's slice table follows that map.",
        "Use a name such as `v5e-256`, `v6e-64`, `v5p-512`, `v4-128` or `tpu7x-8`, and a slice count >= 1.",
        ("tpu-v5e.md", "tpu-v5p.md", "tpu-v6e.md", "tpu-v4.md", "tpu7x.md"),
    ),
    Code(
        DiagCode.MODEL_FILE_OVERRIDE,
        "Model file replaces a config key",
        "MaxText pyconfig",
        "The config sets a key that the model file of its `model_name` also sets, to another value. MaxText "
        "merges the model file over the config files, so the run uses the model file's value, and ASAP prices "
        "that. `override_model_config: true` does not help in a config file: it lets only command-line overrides "
        "win. Also reported for an override (`--mesh`, a proposal) of a model file's key, which MaxText refuses "
        "unless `override_model_config=true` is passed with it.",
        "Certain: MaxText's merge order (base config chain, model file, command line) and its check that a "
        "command-line override does not contradict the model file (pyconfig.py).",
        "Remove the key from the config, or to train with your value: drop `model_name` and set every dimension "
        "yourself, or pass `key=value` on MaxText's command line together with `override_model_config=true`.",
    ),
    Code(
        DiagCode.DOCUMENT_TOO_LARGE,
        "Document too large to analyse",
        "config loading",
        "The document is larger than ASAP analyses (512 KiB of UTF-8 or 10,000 lines; MaxText's own base.yml, "
        "the largest config it ships, is about 50 KB and 1,000 lines), so ASAP checks nothing in it: no other "
        "finding, hover, code lens, quick fix or agents in the editor, and only this finding from `asap check`.",
        "Certain: the document's size and line count when it was read, opened or last changed.",
        "Split the file into a `base_config` chain of smaller files, or move generated sweeps out of the config.",
    ),
    Code(
        DiagCode.ALIASES_EXPAND_TOO_FAR,
        "Aliases expand too far",
        "YAML",
        "The document's aliases (`*name`, each standing for the whole value its anchor `&name` marks) expand it "
        "past what ASAP reads: more than 100 aliases of lists or mappings, more than 1,000 values brought in by "
        "them, or more than 64 levels of nesting reached through them. Aliases of aliases multiply (ten lists of "
        "ten aliases, six deep, are a million values in a few hundred bytes: a 'billion laughs' document), so ASAP "
        "checks nothing in it: no other finding, hover, code lens, quick fix or agents.",
        "Certain: counted on the parsed document before any value is expanded, at the top-level key where a bound "
        "is crossed; YAML parsers set the same kind of bound (SnakeYAML, Symfony, go-yaml).",
        "Write the values out, or alias the few values you mean to share; a MaxText config needs no nested aliases.",
    ),
    Code(
        DiagCode.NUMBER_SPELLING,
        "Whole number written another way",
        "MaxText pyconfig",
        "A parallelism degree or slice count is not written as a plain integer, and MaxText converts it: its YAML "
        'loader (OmegaConf, YAML 1.1) and its pydantic config read 2.0, "2" and " 2 " as 2, `true`, `yes` and '
        "`on` as 1 (`false`, `no`, `off` as 0), `010` as octal 8 and `2:00` as base 60 (120). ASAP reads the same "
        "number, so nothing is refused; a hint for a float or text, a warning where the number read is not the "
        'one written (a boolean, octal, base 60). What MaxText refuses (2.5, "2.", "1e0", "0x10") is an '
        "ASAP100 or ASAP005 error instead.",
        "Certain: MaxText's own loading and pydantic's int, checked against MaxText 0.2.5's config step.",
        "Write the integer (the quick fix writes the number MaxText reads).",
    ),
    Code(
        DiagCode.NO_SLICE,
        "No TPU slice declared",
        "config loading",
        "Without a slice, device counts are unknown: the ICI/DCN products, the placement on the torus, the "
        "batch divisibility and the estimate are not checked.",
        "Certain: no slice was found in `compile_topology`, the comment or the editor setting.",
        "Add `compile_topology: v5e-256` (and `compile_topology_num_slices` for multislice), a comment "
        "`# asap: slice=v5e-256`, or set `asap.defaultSlice`.",
        ("mesh-validation-layers.md",),
    ),
    Code(
        DiagCode.XLA_FLAGS_PROBLEM,
        "XLA flags not read as written",
        "config loading",
        "A `# LIBTPU_INIT_ARGS=...` or `# XLA_FLAGS=...` comment states the run's XLA flags, and part of it is not "
        "what libtpu would read: a token that is not a flag, a value of the wrong kind (`=maybe` for a boolean), "
        "or a flag given twice (absl keeps the last value). The estimate is priced under the rest; flags ASAP does "
        "not know are kept and listed, not reported.",
        "Certain: absl's flag syntax (what libtpu parses the string with), at the token the message is about.",
        "Write each flag as `--name=value`, once, inside one quoted string; or remove the token.",
    ),
    Code(
        DiagCode.LAUNCH_COMMAND,
        "Launch command not read as MaxText reads it",
        "config loading",
        "A MaxText run of a launch file (a shell script, Makefile, Kubernetes manifest, XPK command or benchmark "
        "recipe) has an argument MaxText would refuse or read otherwise than written: an argument that is not "
        "`key=value`, a key given twice (the last is used), no config file, a benchmark recipe ASAP cannot find, "
        "or a value ASAP needs that is known only when the command runs (`${VAR}` never assigned in the file, "
        "`$(...)`).",
        "Certain for the command's syntax (MaxText's argv: the config file, then `key=value` overrides, "
        "pyconfig.initialize); a value known only at run time is left out, and MaxText's default priced instead.",
        "Write each override as `key=value` after the config file, once; assign the variable in the file or set "
        "the value literally for ASAP to check it.",
    ),
    Code(
        DiagCode.PLACEMENT_UNCHECKED,
        "Placement not checked (no JAX)",
        "JAX placement",
        "JAX could not be imported in ASAP's environment, so layer 3 (placing each mesh axis on whole physical "
        "torus axes) was skipped; the other checks ran.",
        "Nothing is claimed about placement: a mesh that passes the other checks may still fail at launch.",
        "Install `jax` in the Python environment ASAP runs from.",
        ("mesh-validation-layers.md", "physical-axis-assignment.md"),
    ),
    # -- MaxText's mesh checks (DOMAIN.md §2, layers 1 and 2) -------------------------------------------------
    Code(
        DiagCode.INVALID_DEGREE,
        "Invalid parallelism degree",
        "MaxText pyconfig",
        "A parallelism degree counts devices: it must be a whole number >= 1, or -1 for 'fill the rest'. Zero, "
        "other negatives and fractions are rejected, and so is a value MaxText's config cannot read as an integer "
        '(2.5, "2.", "1e0", "0x10", a list); 2.0, "2" and `true` are read as 2, 2 and 1 (ASAP009). A '
        "warning for a zero or negative DCN degree on a single slice (or without a declared slice) that keeps the "
        "DCN product within 1: MaxText never reads the DCN list there, so the config launches, and fails once it "
        "has more slices.",
        "Certain: a degree counts devices, and MaxText cannot build a mesh from such a value.",
        "Write a whole number >= 1, or -1 on at most one axis per list.",
        ("mesh-validation-layers.md",),
    ),
    Code(
        DiagCode.ICI_PRODUCT_MISMATCH,
        "ICI product != devices per slice",
        "MaxText pyconfig",
        "Layer 1: the `ici_*_parallelism` degrees must multiply to the devices of one slice. MaxText asserts "
        "'Number of devices per slice N does not match the product of the ICI parallelism P' at launch.",
        "Certain: the same check MaxText's `fill_unspecified_mesh_axes` makes, against the declared slice's "
        "device count (v4/v5p count TensorCores in the name, tpu7x two devices per chip).",
        "Apply the quick fix (set the fsdp axis to the missing factor, or to -1), or change another degree.",
        ("mesh-validation-layers.md",),
    ),
    Code(
        DiagCode.SEVERAL_FILL_AXES,
        "More than one -1",
        "MaxText pyconfig",
        "Layer 1: at most one axis per list (ICI, DCN) may be -1; MaxText cannot tell how to split the rest "
        "between two. MaxText fills the DCN list only when there is more than one slice, so on a single slice (or "
        "without a declared slice) a second DCN -1 is a warning: ignored there, rejected once the config has more "
        "slices. `dcn_diloco_parallelism: -1` is resolved before the fill and does not count.",
        "Certain: the assertion MaxText's `fill_unspecified_mesh_axes` makes at launch (from "
        "`maxtext_utils.create_device_mesh`, which skips the DCN list on one slice).",
        "Give all but one of the -1 axes an explicit degree.",
        ("mesh-validation-layers.md",),
    ),
    Code(
        DiagCode.FILL_UNRESOLVED,
        "-1 cannot be resolved",
        "MaxText pyconfig",
        "Layer 1: the -1 axis is filled with the target (devices per slice, or slices) divided by the product "
        "of the other axes, and that is not a whole number.",
        "Certain: the assertion MaxText's `fill_unspecified_mesh_axes` makes at launch.",
        "Make the other degrees of the list divide the target.",
        ("mesh-validation-layers.md",),
    ),
    Code(
        DiagCode.DCN_PRODUCT_MISMATCH,
        "DCN product != number of slices",
        "MaxText pyconfig",
        "Layer 1 for the DCN list: on a multislice job the `dcn_*_parallelism` degrees must multiply to the "
        "number of slices.",
        "Certain: the check MaxText makes when there is more than one slice, against the declared slice count.",
        "Apply the quick fix (set `dcn_data_parallelism`), or change the slice count.",
        ("mesh-validation-layers.md", "dcn-vs-ici-placement.md"),
    ),
    Code(
        DiagCode.DCN_ON_ONE_SLICE,
        "DCN parallelism on a single slice",
        "MaxText pyconfig",
        "Layer 2: a DCN degree above 1 needs more than one slice. On one slice MaxText multiplies the DCN degrees "
        "(`dcn_sequence_parallelism` included) and raises 'DCN parallelism requested but only one slice "
        "available.' when the product is above 1 in absolute value. A warning when a zero DCN degree keeps the "
        "product at 0: MaxText then launches, ignoring the DCN list.",
        "Certain: the same check MaxText's config types make, with the slice count from "
        "`compile_topology_num_slices`/`num_slices` (the default `dcn_data_parallelism: -1` passes).",
        "Set the DCN degree to 1, or declare the slice count (`compile_topology_num_slices: 2`).",
        ("mesh-validation-layers.md", "dcn-vs-ici-placement.md", "multislice-scaling.md"),
    ),
    # -- JAX's placement (layer 3) --------------------------------------------------------------------------
    Code(
        DiagCode.AXIS_NOT_PLACEABLE,
        "Axis cannot be placed on the torus",
        "JAX placement",
        "Layer 3: JAX must put each mesh axis on whole physical torus axes, the most network-intense (last) "
        "axes first. This degree is not a product of the physical axes left, so `create_device_mesh` raises "
        "NotImplementedError ('Failed to find assignment for logical_axis_index ...') at launch.",
        "Certain: ASAP runs JAX's own assignment routine on the slice's physical device mesh.",
        "Choose one of the degrees the message lists as possible, or set `allow_split_physical_axes: true` "
        "(collectives on a split axis are slower).",
        ("physical-axis-assignment.md", "split-physical-axes.md", "mesh-validation-layers.md"),
    ),
    # -- MaxText's sharding rules ---------------------------------------------------------------------------
    Code(
        DiagCode.QUERY_HEADS_INDIVISIBLE,
        "Query heads not divisible by tensor parallelism",
        "MaxText sharding rules",
        "MaxText shards the query heads over tensor × tensor_sequence × autoregressive; the head count does "
        "not divide by their product, so the heads cannot be split evenly across the tensor-parallel devices.",
        "Certain arithmetic on the model's head count (ASAP's model table or `base_num_query_heads`); ASAP does "
        "not compile to show how the failure surfaces.",
        "Use a tensor degree that divides the head count, and put the rest of the model parallelism on fsdp.",
        ("tensor-heads-divisibility.md", "tensor-parallel-ceiling.md"),
    ),
    Code(
        DiagCode.KV_HEADS_INDIVISIBLE,
        "KV heads not divisible by tensor parallelism",
        "MaxText sharding rules",
        "As ASAP107 for the key/value heads: with grouped-query attention (often 8 kv heads) they, not the "
        "query heads, usually cap tensor parallelism.",
        "Certain arithmetic on the model's kv head count (ASAP's model table or `base_num_kv_heads`); ASAP does "
        "not compile to show how the failure surfaces.",
        "Use a tensor degree that divides the kv heads (at most 8 for GQA Llamas); add fsdp instead.",
        ("tensor-heads-divisibility.md", "tensor-parallel-ceiling.md"),
    ),
    Code(
        DiagCode.BATCH_INDIVISIBLE,
        "Global batch not divisible by the batch shards",
        "MaxText sharding rules",
        "The global batch (per_device_batch_size × devices) is sharded over data × fsdp × fsdp_transpose × "
        "expert and must divide evenly over them.",
        "Certain arithmetic; MaxText itself asserts nothing here, so JAX's batch sharding is what rejects it.",
        "Change per_device_batch_size so that the global batch divides by the batch shards.",
        ("batch-size-and-grad-accumulation.md",),
    ),
    Code(
        DiagCode.FRACTIONAL_BATCH_UNCOVERED,
        "Fractional batch not covered",
        "MaxText sharding rules",
        "A per_device_batch_size below 1 means each sequence is shared by 1/pdbs devices, which only tensor, "
        "context or pipeline parallelism can provide; this mesh provides fewer.",
        "The rule of DOMAIN.md §1 and MaxText's examples (pdbs 0.5 on fsdp 16 × tensor 16); MaxText has no "
        "assertion for it, so the failure shows later, at compile.",
        "Raise per_device_batch_size to at least 1, or add tensor/context parallelism to cover 1/pdbs devices.",
        ("batch-size-and-grad-accumulation.md", "context-parallelism-long-sequences.md"),
    ),
    Code(
        DiagCode.IGNORED_KEY,
        "Key ignored by MaxText",
        "MaxText keys",
        "Current MaxText ignores this key: its mesh axis was removed from `mesh_axes`, so a value other than 1 "
        "is silently not applied (a value of 1 shards nothing either way and is not reported).",
        "Current MaxText's base.yml and mesh_axes (DOMAIN.md §1); configs from late 2025 and older honoured it.",
        "Comment the key out (quick fix) and shard with the axis the message names instead.",
        ("mesh-validation-layers.md",),
    ),
    Code(
        DiagCode.BAD_BATCH_SIZE,
        "per_device_batch_size not a number > 0",
        "MaxText sharding rules",
        "per_device_batch_size must be a positive number; otherwise there is no batch to train on.",
        "Certain: the value itself.",
        "Set per_device_batch_size to a number > 0 (MaxText's default is 12).",
        ("batch-size-and-grad-accumulation.md",),
    ),
    Code(
        DiagCode.MISSPELT_KEY,
        "Misspelt parallelism key",
        "MaxText keys",
        "An `ici_*`/`dcn_*` key that is not one of MaxText's parallelism keys, so the degree it sets is not applied.",
        "A name check against current MaxText's parallelism keys; the suggestion is the closest known name.",
        "Rename it to the suggested key (quick fix).",
        ("mesh-validation-layers.md",),
    ),
    # -- the performance model --------------------------------------------------------------------------------
    Code(
        DiagCode.ESTIMATE,
        "Performance estimate",
        "estimate",
        "What ASAP's performance model expects of this mesh on the declared slice: MFU, the bottleneck and HBM "
        "per device.",
        "An analytic estimate, not a measurement: roofline compute, HBM traffic and collectives priced per "
        "physical link, with chip peaks from the spec table. On 51 published MaxText runs its MFU is off by "
        "1.67 points at the median, 11.5 at worst (docs/benchmarks.md).",
        "Nothing to fix; link a profile to compare with a measurement.",
        ("mfu-definition.md", "fsdp-vs-data-parallelism.md", "fsdp-tensor-optimum.md"),
    ),
    Code(
        DiagCode.HBM_OVERFLOW,
        "Does not fit in HBM",
        "estimate",
        "The estimated memory per device (weights, gradients and optimizer state over the axes that shard "
        "them, activations under the remat policy, logits, XLA temporaries) is more than 15% over the usable HBM.",
        "An analytic estimate with an uncertainty of -10%..+15%: published runs that did run come out up to "
        "13% over in this model, so only more than 15% over is called an error. A compile for the slice gives "
        "the exact figure.",
        "Follow the message: shard model state over more devices (fsdp) when it dominates, else lower "
        "per_device_batch_size or save fewer activations (remat_policy).",
        ("out-of-memory-fixes.md", "fsdp-memory-savings.md", "remat-policies.md"),
    ),
    Code(
        DiagCode.HBM_TIGHT,
        "Tight on HBM",
        "estimate",
        "The estimated memory per device is between 10% under and 15% over the usable HBM, where the estimate "
        "cannot decide whether it fits.",
        "An analytic estimate within its own uncertainty band (-10%..+15%); a compile for the slice decides.",
        "Leave it, or make room as for ASAP121 if the run goes out of memory.",
        ("out-of-memory-fixes.md", "fsdp-memory-savings.md", "remat-policies.md"),
    ),
    Code(
        DiagCode.NO_ESTIMATE,
        "No estimate",
        "estimate",
        "The performance model cannot price an input of this config (an unknown dtype, remat policy or model "
        "dimension, a non-positive number), so there is no estimate, memory check or proposal.",
        "Certain that ASAP has no estimate; it says nothing about whether MaxText runs the config.",
        "Fix or remove the value at the key the message names.",
        ("remat-policies.md",),
    ),
    # -- the linked profile ---------------------------------------------------------------------------------
    Code(
        DiagCode.PROFILE_VERDICT,
        "Profile verdict",
        "profile",
        "The linked XProf profile's bottleneck: input-bound (waiting for input >= 20% of the step), host-bound "
        "(idle >= 20%), communication-bound (collectives >= 30%), else whichever takes the largest share, "
        "with the gap to the estimate when the profile matches the config.",
        "Measured in the linked profile (XProf's own conversion); the confidence in the message falls with few "
        "or noisy steps, missing step markers, unattributed time and CPU-only profiles.",
        "Hover the link for the full report; the bottleneck's note says what to change.",
        (
            "xprof-roofline-reading.md",
            "communication-bound-profile.md",
            "hbm-bound-profile.md",
            "input-bound-profile.md",
        ),
    ),
    Code(
        DiagCode.PROFILE_MISSING,
        "Linked profile missing",
        "profile",
        "The profile named by the `# asap: profile=` comment or the workspace link does not exist.",
        "Certain: the path was looked up on disk.",
        "Correct the path (relative to the config's directory), or relink with 'ASAP: Link profile...'.",
    ),
    Code(
        DiagCode.PROFILE_OTHER_SLICE,
        "Profile of another slice",
        "profile",
        "The profile ran on another chip generation, or its program on another device count, than this config "
        "declares, so its numbers are not this config's.",
        "Measured: the profile's device type, and the device count from its collectives' replica groups.",
        "Link the profile of a run of this config, or declare the slice the profile ran on.",
        ("xprof-roofline-reading.md",),
    ),
    Code(
        DiagCode.PROFILE_NOT_READ,
        "Profile not read",
        "profile",
        "The linked profile could not be read: empty, corrupt or truncated files, or a conversion that failed "
        "or was cancelled.",
        "Certain: the reason in the message is XProf's or the reader's.",
        "Check the files the message names; relink or reopen the config to retry.",
    ),
    Code(
        DiagCode.PROFILES_OUTSIDE_WORKSPACE,
        "Profiles outside the workspace",
        "profile",
        "Profiles of this run exist under `base_output_directory/run_name`, but outside the workspace, where "
        "ASAP does not follow a discovered link.",
        "Certain: the profile directory was found on disk.",
        "Link it explicitly: `# asap: profile=<path>` or 'ASAP: Link profile...'.",
    ),
    Code(
        DiagCode.PROFILE_NOTE,
        "Profile note",
        "profile",
        "Something that limits what the profile says (no step markers, a CPU-only profile, missing tools).",
        "Read from the profile; it lowers the verdict's confidence.",
        "Profile a few steps on the accelerator with step markers where the note asks for it.",
        ("xprof-roofline-reading.md",),
    ),
    # -- the agents -------------------------------------------------------------------------------------------
    Code(
        DiagCode.AGENTS,
        "Agents' diagnosis",
        "agents",
        "The background agents' diagnosis of the bottleneck and their ranked mesh proposals, on every key "
        "it implicates.",
        "The confidence and its basis are the agents'; every proposal is re-validated by the deterministic "
        "checks and priced by the performance model before it is offered.",
        "Apply proposal 1 as a quick fix, or keep the mesh when no proposal is clearly better.",
    ),
    # -- the TPU compiler ----------------------------------------------------------------------------------
    Code(
        DiagCode.COMPILER_VERIFIED,
        "Verified by the TPU compiler",
        "TPU compiler",
        "The train step of a reference decoder built from this config's dims, dtypes, remat policy and "
        "MaxText's sharding rules was compiled ahead of time for the declared slice (libtpu, no TPU). The "
        "message gives the per-chip memory the compiler allocates and whether it fits.",
        "The XLA TPU compiler's own memory analysis (argument + output - alias + temp + code, MaxText's "
        "formula) of a program that approximates MaxText's: exact for that program, with layers beyond the "
        "compiled ones extrapolated linearly. It runs only when asked (ASAP: Verify, or `asap.verify: auto`).",
        "Nothing to fix; re-verify after changing the mesh, batch or remat policy.",
        ("out-of-memory-fixes.md", "fsdp-memory-savings.md"),
    ),
    Code(
        DiagCode.COMPILER_DOES_NOT_FIT,
        "The TPU compiler says it does not fit",
        "TPU compiler",
        "The compiled train step needs more HBM per chip than the compiler allows on this slice, so the job "
        "would fail with an out-of-memory at launch.",
        "The XLA TPU compiler's out-of-memory report or memory analysis for ASAP's reference program; trust it "
        "over the estimate where they differ.",
        "Shard the state further (more fsdp), lower per_device_batch_size, or remat more "
        "(remat_policy: full); the proposals' quick fixes are checked the same way.",
        ("out-of-memory-fixes.md", "remat-policies.md", "fsdp-memory-savings.md"),
    ),
    Code(
        DiagCode.COMPILER_DISAGREES,
        "Estimate and compiler disagree",
        "TPU compiler",
        "ASAP's estimate of per-chip memory, of whether the mesh fits, or of the bytes a mesh axis moves per "
        "step differs from the compiled program by more than 15%.",
        "The compiled program's numbers (memory analysis; collectives from the optimized HLO, multiplied by "
        "loop trip counts); the estimate is an analytic model and the compiler is not.",
        "Trust the compiler's figure; `asap verify CONFIG --json` lists every disagreement.",
        ("mesh-validation-layers.md",),
    ),
    Code(
        DiagCode.COMPILER_UNAVAILABLE,
        "TPU compiler unavailable",
        "TPU compiler",
        "Verification was asked for but could not run: libtpu is not installed next to jax, or the compile "
        "failed or timed out.",
        "The verifier's own report (the message says which).",
        "Install the optional extra: pip install 'asap[compile]' (jax[tpu]==0.10.2 with libtpu==0.0.42.1).",
    ),
)

CODES: dict[str, Code] = {c.code: c for c in _CODES}


def lookup(code: str) -> Code | None:
    return CODES.get(code)
