"""What the integer model costs in accuracy: the figures, computed; hwvit.report presents them.

- ``compare``: the float and the integer model side by side, the error at every traced point
  (accumulated, and isolated through ``isolate``), with the metrics of ``metrics``;
- ``diagnose``: the points that add the most error, the stage of each point, a suggested change;
- ``sweep``: the one-factor-at-a-time design-space sweep and its hardware cost columns;
- ``sensitivity``: per-layer precision sensitivity and a mixed-precision proposal.

Layering (tests/test_layering.py): analysis depends on the model (hwvit.quant, hwvit.intvit,
hwvit.ops); hwvit.report depends on analysis; nothing here imports hwvit.report or hwvit.cli.
"""
