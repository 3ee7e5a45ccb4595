"""The modules an environment variable names: how a team's own block kinds (HWVIT_BLOCKS) and block
arithmetics (HWVIT_VARIANTS) join hwvit's registries without editing the tree."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType


def load(env: str, prefix: str, what: str, error: type[Exception] = ValueError) -> list[ModuleType]:
    """The modules ``$env`` names (os.pathsep-separated ``.py`` paths, loaded afresh as
    ``<prefix>_<stem>``, or importable module names); ``error`` with one line for one that cannot be
    loaded, naming it (``what``: "block module") and why."""
    modules = []
    for item in filter(None, os.environ.get(env, "").split(os.pathsep)):
        try:
            if item.endswith(".py"):
                path = Path(item).resolve()
                if not path.is_file():
                    raise error(f"{env}: no such file {item}")
                name = f"{prefix}_{path.stem}"
                spec = importlib.util.spec_from_file_location(name, path)
                if spec is None or spec.loader is None:
                    raise error(f"{env}: {path} is not a Python module")
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                spec.loader.exec_module(module)
                modules.append(module)
            else:
                modules.append(importlib.import_module(item))
        except error:
            raise
        except Exception as exc:  # noqa: BLE001 - a team's module: say which one failed and why
            first = (str(exc).strip().splitlines() or [""])[0]
            raise error(f"{env}: cannot load {what} {item}: {exc.__class__.__name__}: {first}") from None
    return modules
