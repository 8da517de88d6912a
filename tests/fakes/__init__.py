"""Test doubles: in-process fakes of external services (OpenAI-compatible server)."""
