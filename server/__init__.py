"""ASAP: an agentic performance advisor for MaxText/JAX training on TPU slices."""

__version__ = "0.1.0"
