"""The slice catalog: naming rules per generation, topologies, wraparound, specs with sources."""

from __future__ import annotations

import math

import pytest

from server.config.slices import (
    CHIPS,
    SOURCES,
    TOPOLOGIES,
    SliceError,
    known_names,
    name_chips,
    name_generation,
    parse_slice,
)


@pytest.mark.parametrize(
    ("name", "chips", "devices", "topology", "wrap"),
    [
        ("v5e-256", 256, 256, (16, 16), (True, True)),
        ("v5e-128", 128, 128, (8, 16), (False, True)),
        ("v6e-16", 16, 16, (4, 4), (False, False)),
        ("v6e-8", 8, 8, (2, 4), (False, False)),
        # v4 and v5p count TensorCores: N/2 chips, one (megacore) device per chip
        ("v5p-512", 256, 256, (4, 8, 8), (True, True, True)),
        ("v5p-1024", 512, 512, (8, 8, 8), (True, True, True)),
        ("v5p-64", 32, 32, (2, 4, 4), (False, False, False)),
        ("v4-128", 64, 64, (4, 4, 4), (True, True, True)),
        # tpu7x counts devices at two per chip
        ("tpu7x-8", 4, 8, (2, 2, 1), (False, False, False)),
        ("tpu7x-128", 64, 128, (4, 4, 4), (True, True, True)),
        # explicit topology spelling, and the gcloud alias
        ("v5e:16x16", 256, 256, (16, 16), (True, True)),
        ("v5litepod-16", 16, 16, (4, 4), (False, False)),
    ],
)
def test_parse_slice_naming_rules(name, chips, devices, topology, wrap):
    sl = parse_slice(name)
    assert sl.chips == chips
    assert sl.devices_per_slice == devices
    assert sl.topology == topology
    assert sl.wrap == wrap


def test_parse_slice_multislice_counts_devices_across_slices():
    sl = parse_slice("v6e-256", num_slices=2)
    assert (sl.devices_per_slice, sl.devices, sl.num_slices) == (256, 512, 2)


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("v5p-256x", "not a TPU slice name"),
        ("v9-16", "unknown TPU generation"),
        ("v5p-7", "multiple of 2"),  # counts cores: must be even
        ("v5e-48", "valid names: v5e-1, v5e-4"),
        ("v5p-100", "not a v5p slice"),
        ("v6e:4x4x4", "2 axes"),
        ("", "not a TPU slice name"),
    ],
)
def test_parse_slice_bad_names_say_what_is_valid(name, fragment):
    with pytest.raises(SliceError, match=fragment):
        parse_slice(name)


@pytest.mark.parametrize("num_slices", [0, -2, 1.5, True])
def test_parse_slice_rejects_bad_slice_counts(num_slices):
    with pytest.raises(SliceError, match="number of slices"):
        parse_slice("v5e-16", num_slices)


@pytest.mark.parametrize("gen", list(CHIPS))
def test_every_topology_matches_its_name(gen):
    chip = CHIPS[gen]
    for chips, topo in TOPOLOGIES[gen].items():
        assert math.prod(topo) == chips
        assert len(topo) == chip.torus_rank
    for name in known_names(gen):
        assert parse_slice(name).name == name


@pytest.mark.parametrize("gen", list(CHIPS))
def test_every_spec_cites_a_known_source(gen):
    chip = CHIPS[gen]
    for fld in (
        "peak_bf16_flops",
        "hbm_bytes",
        "hbm_bw",
        "ici_link_bw",
        "ici_links",
        "topology",
        "dcn_bw",
        "pcie_bw",
        "mxu_efficiency",
    ):
        assert chip.sources[fld] in SOURCES, (gen, fld)


def test_ridge_points_match_the_domain_brief():
    # DOMAIN.md §3: HBM ridge v5e ~240, v5p ~166, v6e ~560 FLOP/byte
    assert round(CHIPS["v5e"].hbm_ridge) == 241
    assert round(CHIPS["v5p"].hbm_ridge) == 166
    assert round(CHIPS["v6e"].hbm_ridge) == 560


def test_name_generation_and_chips_follow_parse_slice_rules():
    assert name_generation("v5litepod-16") == "v5e" and name_generation("v5p:4x4x8") == "v5p"
    assert name_generation("not a slice") is None
    assert name_chips("v5e-256") == 256 and name_chips("v5p-512") == 256 and name_chips("v4-128") == 64
    assert name_chips("tpu7x-8") == parse_slice("tpu7x-8").chips == 4
    assert name_chips("v5e:16x16") == 256
    assert name_chips("v5e-7") == 7  # by the name's rule, though no such slice is in the table
    assert name_chips("v9z-16") is None and name_chips("") is None
