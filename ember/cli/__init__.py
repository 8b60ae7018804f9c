"""The ``ember`` command line: ``train``, ``eval``, ``generate``, ``info`` and ``bench``."""
