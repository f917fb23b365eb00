"""Operator test cases, one module per layer family; see tools/export_opcases.py."""
