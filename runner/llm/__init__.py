"""Calls to models: the litellm client (its only importer), replicas, pacing, retries, replay."""
