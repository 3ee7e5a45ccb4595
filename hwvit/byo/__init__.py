"""Bring your own block: check a team's Verilog against hwvit vector sets through a bind file.

- ``bind``: the bind file format (load, validate, check against the elaborated ports);
- ``kinds``: each streaming kind's logical interface (fields, config ports, tables, row ends);
- ``elaborate``: the team's top module's ports, as yosys elaborates it;
- ``run``: build the team's RTL and run sim/byotb.py on a set;
- ``template``: the commented starting bind file of a kind.
"""

from hwvit.byo.bind import Bind, BindError, load

__all__ = ["Bind", "BindError", "load"]
