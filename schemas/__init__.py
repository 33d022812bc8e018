"""The bundled JSON Schemas (data only; this file makes the folder importable for importlib.resources)."""
