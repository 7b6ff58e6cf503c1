"""The knowledge store: kb/ notes and optimization records, indexed for hybrid search (FTS5 + sqlite-vec)."""
