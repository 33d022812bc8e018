"""The bundled policy tests (data only; run them with `hma-policy test`)."""
