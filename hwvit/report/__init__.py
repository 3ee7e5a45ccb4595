"""Float vs fixed-point: per-layer metrics, end-to-end accuracy, written reports and sweeps."""
