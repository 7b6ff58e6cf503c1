"""Profile test data: synthetic TPU xplanes with known ground truth, and real CPU captures.

Importable from tests as ``profiles`` (pytest puts ``tests/`` on ``sys.path``), e.g.
``from profiles.synth import write_profile, ground_truth``.
"""
