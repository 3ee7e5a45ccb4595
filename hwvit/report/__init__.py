"""Presentation of the figures hwvit.analysis computes: tables, plots and report directories.

``write`` (the compare report), ``sweep_write``, ``sensitivity_write``, ``plots`` and ``publish``
(atomic output directories). ``compare`` is the old home of ``hwvit.analysis.compare``, kept as a
re-export for the scripts that import it from there.
"""
