"""One class per hop of the worker: validate, windows, cross-tier."""
