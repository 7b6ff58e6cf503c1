"""When no mesh of a config's slice fits in HBM: how far the least-memory mesh is over, and what would fit, each
option priced on its fastest mesh by the cost model (the enumeration and estimate everything else uses,
server/perf/enumeration.py and server/perf/estimate.py):

- the largest per_device_batch_size, halving the config's, that launches on some mesh of the slice (a fractional
  one only where the global batch still divides the mesh's batch shards, as MaxText requires: the enumeration
  rejects the others);
- a remat policy that keeps less than the config's (the one keeping the most that fits: the least recompute);
- host offload of the kept activations (MaxText's `remat_policy: custom` with `offload` per tensor, the scan's
  `decoder_layer_input` first);
- `allow_split_physical_axes: true`, when the config does not split and splitting is what makes a mesh fit;
- the smallest slice of the same generation (same number of slices) on which some mesh fits as configured.

Only what the memory model prices is offered: activation offload, not optimizer or parameter offload, which
server/perf/memory.py does not model. "Fits" is ASAP's one memory rule, `Memory.launches` (a 'tight' verdict is a
warning, not a failure). `nothing_fits` answers None whenever some mesh of the slice launches.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from server.config.resolve import Config, with_overrides
from server.config.slices import Slice, SliceError, known_names, parse_slice
from server.perf import wording
from server.perf.enumeration import Candidate, Enumeration, enumerate_meshes, one_per_mesh
from server.perf.estimate import EstimateError, Inputs, inputs
from server.perf.layout import Layout, from_check
from server.perf.memory import kept_activations, tensor_dims
from server.perf.remat import CUSTOM_KEYS, POLICIES, RematPolicy
from server.services.analysis import Analysis

log = logging.getLogger("asap")
GIB = 1024**3
STATE = ("weights", "weight_casts", "gradients", "optimizer")  # model state: no batch or remat changes it
CARRY = "decoder_layer_input"


@dataclass(frozen=True)
class FitOption:
    """One change that makes the config fit, priced on the fastest mesh that launches with it."""

    kind: str  # per_device_batch_size | remat_policy | host_offload | split_physical_axes | slice
    changes: dict[str, Any]  # the YAML keys to set besides the mesh (the mesh: ici, dcn)
    slice: str
    chips: int
    ici: dict[str, int]  # axes whose degree is not 1
    dcn: dict[str, int]
    step_s: float
    tokens_per_s: float  # tokens per second
    tokens_per_step: float
    mfu: float
    hbm_bytes: float  # per device
    usable_bytes: float
    verdict: str  # fits | tight
    basis: str
    note: str

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "changes": self.changes,
            "slice": self.slice,
            "chips": self.chips,
            "ici": self.ici,
            "dcn": self.dcn,
            "step_s": self.step_s,
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_step": self.tokens_per_step,
            "mfu": self.mfu,
            "hbm_bytes": round(self.hbm_bytes),
            "usable_bytes": round(self.usable_bytes),
            "verdict": self.verdict,
            "basis": self.basis,
            "note": self.note,
        }


@dataclass(frozen=True)
class LeastMesh:
    """The mesh of the slice that needs the least HBM per device, as configured."""

    ici: dict[str, int]
    dcn: dict[str, int]
    hbm_bytes: float
    usable_bytes: float
    state_bytes: float  # weights, their bf16 casts, gradients and optimizer state: what no batch or remat changes

    @property
    def over_bytes(self) -> float:
        return self.hbm_bytes - self.usable_bytes

    def to_json(self) -> dict[str, Any]:
        return {
            "ici": self.ici,
            "dcn": self.dcn,
            "hbm_bytes": round(self.hbm_bytes),
            "usable_bytes": round(self.usable_bytes),
            "over_bytes": round(self.over_bytes),
            "state_bytes": round(self.state_bytes),
        }


@dataclass(frozen=True)
class NothingFits:
    """No mesh of the slice launches for the config: by how much the least-memory one is over, what would fit, and
    what was tried and did not."""

    slice: str
    chips: int
    model: str
    per_device_batch_size: float
    remat_policy: str
    allow_split_physical_axes: bool
    least: LeastMesh
    options: list[FitOption] = field(default_factory=list)
    tried: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        """'No mesh of v5e-16 fits llama2-13b at per_device_batch_size 8 (remat_policy full): the smallest needs
        23.3 of 15.8 GiB per chip (7.6 GiB over; model state 12.2 GiB)'."""
        lm = self.least
        return (
            f"No mesh of {self.slice} fits {self.model} at per_device_batch_size {_number(self.per_device_batch_size)} "
            f"(remat_policy {self.remat_policy}): the smallest needs {lm.hbm_bytes / GIB:.1f} of "
            f"{wording.gib(lm.usable_bytes)} GiB usable per chip ({lm.over_bytes / GIB:.1f} GiB over; model state "
            f"{lm.state_bytes / GIB:.1f} GiB)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "slice": self.slice,
            "chips": self.chips,
            "model": self.model,
            "per_device_batch_size": _number(self.per_device_batch_size),
            "remat_policy": self.remat_policy,
            "allow_split_physical_axes": self.allow_split_physical_axes,
            "least": self.least.to_json(),
            "options": [o.to_json() for o in self.options],
            "tried": self.tried,
        }


def _number(x: float) -> int | float:
    """A batch size as YAML writes it: 8, not 8.0; 0.5 stays 0.5."""
    return int(x) if float(x).is_integer() else x


def _compact(degrees: dict[str, int]) -> dict[str, int]:
    return {a: int(d) for a, d in degrees.items() if int(d) != 1}


def _state(c: Candidate) -> float:
    comps = c.estimate.memory.components
    return sum(comps.get(k, 0.0) for k in STATE)


def _enumerate(inp: Inputs, sl: Slice, split: bool) -> Enumeration | None:
    """The enumeration, or None where placing a mesh fails inside JAX (logged: a placement bug, not a verdict)."""
    try:
        return enumerate_meshes(inp, sl, split)
    except Exception as e:
        log.warning("nothing_fits: enumerating %s (split %s) failed: %s: %s", sl.name, split, type(e).__name__, e)
        return None


@dataclass(frozen=True)
class _Variant:
    """A change to try: its YAML keys, the config with them, the slice it runs on."""

    changes: dict[str, Any]
    cfg: Config
    slice: Slice


@dataclass(frozen=True)
class _Fit:
    variant: _Variant
    best: Candidate  # the fastest mesh that launches
    add_split: bool  # it needs allow_split_physical_axes, which the config does not set


def _basis(sl: Slice, offload: bool = False) -> str:
    chip = sl.chip
    limit = chip.compiler_hbm_bytes is not None
    usable = "compiler's usable limit" if limit else "capacity less the runtime reserve"
    src = chip.sources.get("compiler_hbm_bytes" if limit else "hbm_bytes", "")
    text = (
        f"estimate: every valid mesh of {sl.name} priced (ASAP's mesh enumeration); HBM per device by "
        f"{wording.MEMORY_MODEL} against the {chip.generation} {usable} ({src}); step by {wording.STEP_TIME_MODEL}; "
        "the fastest mesh that launches"
    )
    if offload:
        text += f"; host transfers at the {chip.generation} host link bandwidth ({chip.sources.get('pcie_bw', '')})"
    return text


def _option(kind: str, fit: _Fit, note: str, offload: bool = False) -> FitOption:
    est, sl = fit.best.estimate, fit.variant.slice
    changes = dict(fit.variant.changes)
    if fit.add_split:
        changes["allow_split_physical_axes"] = True
        if kind != "split_physical_axes":
            note = f"{note}; only with split physical axes" if note else "only with split physical axes"
    return FitOption(
        kind=kind,
        changes=changes,
        slice=sl.name,
        chips=sl.chips,
        ici=_compact(fit.best.layout.ici),
        dcn=_compact(fit.best.layout.dcn),
        step_s=est.time.step_s,
        tokens_per_s=est.tokens_per_s,
        tokens_per_step=est.tokens_per_step,
        mfu=est.mfu,
        hbm_bytes=est.memory.total,
        usable_bytes=est.memory.usable,
        verdict=est.memory.verdict,
        basis=_basis(sl, offload),
        note=note,
    )


@dataclass(frozen=True)
class _Search:
    """One config that fits nowhere on its slice, and the searches for what would."""

    cfg: Config
    inp: Inputs
    slice: Slice
    split: bool  # the config's allow_split_physical_axes
    current: Layout | None  # the config's own mesh: meshes are written in its spelling of FSDP

    def fits(self, v: _Variant, split: bool) -> _Fit | None:
        """The fastest mesh of the variant's slice that launches, or None."""
        try:
            inp = inputs(v.cfg)
        except EstimateError:
            return None
        en = _enumerate(inp, v.slice, split)
        if en is None or not en.ranked:
            return None
        best = one_per_mesh(en.ranked, self.current)[0][0]
        return _Fit(v, best, best.needs_split and not self.split)

    def first_fit(self, variants: list[_Variant]) -> _Fit | None:
        """The first variant (most wanted first, least memory last) on whose slice some mesh launches, with the
        config's `allow_split_physical_axes`; failing that, with split axes (on the last variant first: if the one
        needing least memory does not fit split either, none does)."""
        for v in variants:
            hit = self.fits(v, self.split)
            if hit is not None:
                return hit
        if self.split or not variants or self.fits(variants[-1], True) is None:
            return None
        return next((hit for v in variants if (hit := self.fits(v, True)) is not None), None)

    def smallest_slice(self, variants: list[_Variant]) -> _Fit | None:
        """The first of `variants` (larger slices, smallest first) on which a mesh launches on whole physical axes;
        where the config allows split axes, the slices before it are tried split too. Split meshes of the other slices
        are not tried: placing every one of the largest slices' takes minutes."""
        for i, v in enumerate(variants):
            hit = self.fits(v, False)
            if hit is not None:
                smaller = (self.fits(w, True) for w in variants[:i]) if self.split else iter(())
                return next((h for h in smaller if h is not None), hit)
        return None

    def variant(self, changes: dict[str, Any]) -> _Variant:
        return _Variant(changes, with_overrides(self.cfg, changes), self.slice)

    # -- the options -------------------------------------------------------------------------------------------
    def split_axes(self) -> tuple[FitOption | None, str]:
        if self.split:
            return None, ""
        hit = self.fits(_Variant({}, self.cfg, self.slice), True)
        if hit is None:
            return None, "allow_split_physical_axes: true does not fit either"
        return _option(
            "split_physical_axes",
            hit,
            "JAX places the mesh over split physical axes (no wraparound link on a split axis)",
        ), ""

    def batch(self) -> tuple[FitOption | None, str]:
        sl, pdbs = self.slice, self.inp.pdbs
        sizes = []
        p = pdbs / 2
        while p * sl.devices >= 1:  # a global batch of one sequence at least
            sizes.append(_number(p))
            p /= 2
        fit = self.first_fit([self.variant({"per_device_batch_size": p}) for p in sizes])
        if fit is None:
            low = sizes[-1] if sizes else _number(pdbs)
            return None, (
                f"per_device_batch_size down to {low} (a global batch of {_number(low * sl.devices)}) does not fit"
            )
        new = fit.variant.changes["per_device_batch_size"]
        note = f"the global batch shrinks from {_number(pdbs * sl.devices)} to {_number(new * sl.devices)} sequences"
        return _option("per_device_batch_size", fit, note), ""

    def _kept(self, pol: RematPolicy) -> float:
        return kept_activations(self.inp.shape, pol, 1.0)

    def remat(self) -> tuple[FitOption | None, str]:
        now = self.inp.remat
        less = [p for p in POLICIES.values() if not p.offloaded and self._kept(p) < self._kept(now)]
        less.sort(key=lambda p: -self._kept(p))  # the most kept (the least recompute) first
        if not less:
            return None, f"remat_policy {now.name} already keeps the least of MaxText's policies without offload"
        fit = self.first_fit([self.variant({"remat_policy": p.name}) for p in less])
        if fit is None:
            return None, f"no remat_policy without offload fits (down to {less[-1].name})"
        pol = POLICIES[fit.variant.changes["remat_policy"]]
        note = f"keeps {', '.join(sorted(pol.saved))} per layer for the backward pass, which recomputes the rest"
        return _option("remat_policy", fit, note), ""

    def offload(self) -> tuple[FitOption | None, str]:
        pol = self.inp.remat
        kept = pol.saved | pol.offloaded | {CARRY}
        wants = (
            {t: "offload" if t == CARRY or t in pol.offloaded else "device" for t in kept},  # the scan's carry
            {t: "device" if t == CARRY else "offload" for t in kept},  # what the policy keeps besides the carry
            dict.fromkeys(kept, "offload"),  # both
        )
        found: dict[tuple[frozenset[str], frozenset[str]], tuple[float, _Variant]] = {}
        for want in wants:
            v = self.variant(_custom_changes(self.cfg, want))
            try:
                got = inputs(v.cfg).remat
            except EstimateError:
                continue
            key = (got.saved, got.offloaded)
            if key in found or self._kept(got) >= self._kept(pol):
                continue
            named = next((p.name for p in POLICIES.values() if (p.saved, p.offloaded) == key), None)
            if named is not None:  # one of MaxText's named policies: one key instead of custom's
                v = self.variant({"remat_policy": named})
            found[key] = (tensor_dims(self.inp.shape, got.offloaded), v)
        if not found:
            return None, "host offload: the config already offloads what the memory model can offload"
        # The least host traffic first; offloading everything the policy keeps (least HBM) last.
        fit = self.first_fit([v for _, v in sorted(found.values(), key=lambda dv: dv[0])])
        if fit is None:
            return None, "host offload of every kept activation does not fit either"
        inp = inputs(fit.variant.cfg)
        moved = RematPolicy("host", saved=inp.remat.offloaded)  # the offloaded tensors, as if kept
        host = kept_activations(inp.shape, moved, inp.pdbs * inp.seq)
        note = (
            f"offloads {', '.join(sorted(inp.remat.offloaded))} to host memory in every layer, "
            f"{host / GIB:.1f} GiB per device (host memory is not modelled; the transfers are priced, exposed where "
            "they outlast compute)"
        )
        return _option("host_offload", fit, note, offload=True), ""

    def larger_slice(self) -> tuple[FitOption | None, str]:
        """The smallest larger slice that fits at the config's per_device_batch_size; failing that, the smallest that
        fits the config's global batch (per_device_batch_size scaled down by the chips added)."""
        sl, pdbs = self.slice, self.inp.pdbs
        bigger = _larger_slices(sl)
        if not bigger:
            return None, f"{sl.name} is the largest {sl.chip.generation} slice ASAP knows"
        same = [_Variant({"compile_topology": s.name}, self.cfg, s) for s in bigger]
        fit = self.smallest_slice(same)
        if fit is not None:
            return _option("slice", fit, f"{fit.variant.slice.chips} chips a slice instead of {sl.chips}"), ""
        gen, top = sl.chip.generation, bigger[-1].name
        why = f"no larger {gen} slice, up to {top}, fits at per_device_batch_size {_number(pdbs)}"
        scaled = []
        for s in bigger:
            changes = {"compile_topology": s.name, "per_device_batch_size": _number(pdbs * sl.devices / s.devices)}
            scaled.append(_Variant(changes, with_overrides(self.cfg, changes), s))
        fit = self.smallest_slice(scaled)
        if fit is None:
            return None, f"{why}, nor at the config's global batch"
        note = (
            f"{fit.variant.slice.chips} chips a slice instead of {sl.chips}, the same global batch of "
            f"{_number(pdbs * sl.devices)} sequences ({why})"
        )
        return _option("slice", fit, note), ""


def _custom_changes(cfg: Config, want: dict[str, str]) -> dict[str, Any]:
    """The keys that make MaxText's `custom` policy keep ('device'), offload or rematerialise each tensor as `want`
    says (the rest: 'remat'), changing only those the config has otherwise (the first of a tensor's keys that is set
    wins, as server/perf/remat.py `resolve` reads them)."""
    out: dict[str, Any] = {"remat_policy": "custom"}
    for tensor, keys in CUSTOM_KEYS.items():
        values = [cfg.get(k) for k in keys if cfg.get(k) is not None]
        target = want.get(tensor, "remat")
        if (values[0] if values else "remat") != target:
            out[keys[0]] = target
    return out


def _larger_slices(sl: Slice) -> list[Slice]:
    """The slices of `sl`'s generation with more chips, with as many slices, smallest first."""
    try:
        names = known_names(sl.chip.generation)
    except KeyError:  # the measured cpu slice has no sizes
        return []
    out = []
    for n in names:
        try:
            s = parse_slice(n, sl.num_slices)
        except SliceError:
            continue
        if s.chips > sl.chips:
            out.append(s)
    return sorted(out, key=lambda s: s.chips)


def nothing_fits(cfg: Config, sl: Slice, current: Layout | None = None) -> NothingFits | None:
    """What would fit when no mesh of `sl` launches for `cfg` (honouring its `allow_split_physical_axes`); None when
    one does, when no mesh is valid at all (that is not a memory question), or when the config cannot be priced.
    `current`: the config's own mesh, whose spelling of FSDP the meshes shown follow."""
    try:
        inp = inputs(cfg)
    except EstimateError:
        return None
    split = bool(cfg.get("allow_split_physical_axes", False))
    en = _enumerate(inp, sl, split)
    if en is None or en.ranked or not en.too_big:
        return None
    least = one_per_mesh(en.too_big, current)[0][0]  # too_big is sorted by HBM per device
    mem = least.estimate.memory
    search = _Search(cfg, inp, sl, split, current)
    options: list[FitOption] = []
    tried: list[str] = []
    for find in (search.split_axes, search.batch, search.remat, search.offload, search.larger_slice):
        opt, why = find()
        if opt is not None:
            options.append(opt)
        elif why:
            tried.append(why)
    return NothingFits(
        slice=sl.name,
        chips=sl.chips,
        model=inp.shape.name,
        per_device_batch_size=inp.pdbs,
        remat_policy=inp.remat.name,
        allow_split_physical_axes=split,
        least=LeastMesh(_compact(least.layout.ici), _compact(least.layout.dcn), mem.total, mem.usable, _state(least)),
        options=options,
        tried=tried,
    )


def for_analysis(an: Analysis) -> NothingFits | None:
    """`nothing_fits` for an analysed config on its slice; None at once when its own mesh launches."""
    sl = an.check.slice
    if sl is None or not an.config.is_maxtext:
        return None
    if an.estimate is not None and an.estimate.memory.launches:
        return None
    return nothing_fits(an.config, sl, from_check(an.check))
