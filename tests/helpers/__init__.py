"""Shared test utilities (importable as ``helpers`` because tests/ is on ``sys.path``)."""
