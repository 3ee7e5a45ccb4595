"""The old import path of ``hwvit.analysis.compare`` (earlier releases documented it for a bare
attention block; docs/cli.md now names the new one): a re-export, nothing more."""

from hwvit.analysis.compare import CompareResult, compare

__all__ = ["CompareResult", "compare"]
