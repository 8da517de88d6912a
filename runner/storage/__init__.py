"""What a run keeps on disk: the journal and manifest, the response cache, cached sources."""
