"""The bundled rule files (data only; this file makes the folder importable for importlib.resources)."""
