"""Build step: the reference RTL, the testbenches and their docs travel inside the wheel.

The checkout keeps them at the top level (rtl/, sim/, docs/), where they are edited; building the
wheel copies them into ``hwvit/_hdl/`` of the build tree, where hwvit.toolchain finds them through
importlib.resources. An editable install has no copy: it uses the checkout's directories.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# (directory in the checkout, file patterns) copied to hwvit/_hdl/<directory>/.
HDL = {"rtl": ("*.v", "*.vh"), "sim": ("*.py", "*.v"), "docs": ("rtl.md", "arithmetic.md")}


class BuildWithHdl(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the checkout's rtl/ and sim/ directly
        dest = Path(self.build_lib) / "hwvit" / "_hdl"
        for folder, patterns in HDL.items():
            target = dest / folder
            target.mkdir(parents=True, exist_ok=True)
            for pattern in patterns:
                for src in sorted((HERE / folder).glob(pattern)):
                    shutil.copy2(src, target / src.name)


setup(cmdclass={"build_py": BuildWithHdl})
