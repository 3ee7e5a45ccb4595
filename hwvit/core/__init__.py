"""The ViT accelerator core (rtl/vit_core.v): compiler, cycle model and RTL driver.

- ``hwvit.core.isa``: instruction encoding and the address generators' Python twin;
- ``hwvit.core.compile``: an IntViT -> program + memory images + manifest (a core directory);
- ``hwvit.core.cycles``: the cycle model (exact against the RTL) and estimates for large models;
- ``hwvit.core.run``: images through the RTL core on Icarus or Verilator, compared bit for bit.
"""
