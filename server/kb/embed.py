"""Sentence embeddings for the knowledge store: WordLlama's `l2_supercat` model (256 dimensions), whose
weights and tokenizer ship inside the `wordllama` wheel, so nothing is downloaded at run time.

Chosen after measuring the candidates that ship their weights on PyPI (docs/cli.md, "Knowledge store"):
WordLlama l2_supercat (trained with a contrastive objective on sentence pairs over Llama-3 token
embeddings; 19 MB wheel, loads in about 0.4 s, embeds a short note in well under a millisecond) and
tokenlearn-static-model (64 dimensions). Frameworks that download models at first use (fastembed,
sentence-transformers, model2vec's hub models) or need torch are out.

WordLlama 0.4.0.post1 looks for its bundled tokenizer under a `tokenizer/` folder but ships it in
`tokenizers/`, then falls back to a download; pointing its cache directory at the package itself and
disabling downloads makes it load the bundled files, and fail loudly rather than reach the network.
"""

from __future__ import annotations

import logging
import threading
from functools import cached_property
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

MODEL_NAME = "wordllama/l2_supercat"
DIM = 256


class EmbeddingError(RuntimeError):
    """The embedding model cannot be loaded; the message names the fix."""


class Embedder:
    """Loads the model once (thread-safe, lazily) and returns L2-normalised float32 vectors."""

    name = MODEL_NAME
    dim = DIM

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    @cached_property
    def version(self) -> str:
        """The model's package and version: the index is rebuilt when it changes (the same name may embed
        differently in another release)."""
        try:
            return f"wordllama {metadata.version('wordllama')}"
        except metadata.PackageNotFoundError:
            return "wordllama (not installed)"

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                root = logging.getLogger()
                handlers, level = list(root.handlers), root.level
                try:
                    import wordllama
                    from wordllama import WordLlama
                except ImportError as e:
                    raise EmbeddingError(
                        f"the knowledge store needs the wordllama package: pip install asap ({e})"
                    ) from e
                finally:
                    # wordllama's import calls logging.basicConfig(level=INFO): a stderr handler on the root logger
                    # that printed every "asap" record a second time ("WARNING:asap:..." after the CLI's own
                    # "asap: ..." line, and each info line in the editor's channel again). Undo it.
                    for h in root.handlers[:]:
                        if h not in handlers:
                            root.removeHandler(h)
                    root.setLevel(level)
                pkg = Path(wordllama.__file__).parent
                try:
                    self._model = WordLlama.load(config="l2_supercat", dim=DIM, cache_dir=pkg, disable_download=True)
                except FileNotFoundError as e:
                    raise EmbeddingError(f"wordllama's bundled l2_supercat files are missing in {pkg}: {e}") from e
            return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        vecs = np.asarray(self._load().embed(texts, norm=True), dtype=np.float32)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return vecs / np.where(norms > 0, norms, 1.0)


_DEFAULT: Embedder | None = None


def default() -> Embedder:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Embedder()
    return _DEFAULT
