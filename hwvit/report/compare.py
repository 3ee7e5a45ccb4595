"""The old import path of ``hwvit.analysis.compare`` (the README's example for a bare attention
block uses it): a re-export, nothing more."""

from hwvit.analysis.compare import CompareResult, compare

__all__ = ["CompareResult", "compare"]
