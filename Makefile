# PinPoint's two commands:  make app   (set up and start the app)   ·   make test   (set up and run the tests)
PYTHON ?= python3
VENV := .venv
# The tests run shuffled (pytest-randomly) in the order this seed gives, so CI's order is one that was checked;
# `make test TEST_ORDER_SEED=default` shuffles anew (the header prints the seed to run that order again).
TEST_ORDER_SEED ?= 20261128
BIN := $(VENV)/bin

.PHONY: app test lint gpu-test clean

$(BIN)/python:
	@echo "creating $(VENV) (a virtual environment for PinPoint)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Live mode needs PyCUDA, which builds against the CUDA toolkit: install it only where a GPU and nvcc exist.
# pip speaks (one line per package, its download bars): a first install takes a minute or two, not in silence.
$(VENV)/.app: requirements.txt requirements-gpu.txt | $(BIN)/python
	@echo "installing PinPoint's packages (requirements.txt) into $(VENV): a minute or two the first time"
	$(BIN)/pip install --progress-bar on -r requirements.txt
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && command -v nvcc >/dev/null 2>&1; then \
	  echo "GPU found: installing the GPU extra (PyCUDA builds against CUDA; this can take a few minutes)"; \
	  $(BIN)/pip install --progress-bar on -r requirements-gpu.txt; \
	else echo "No usable GPU (nvidia-smi + nvcc): PinPoint will replay recorded runs."; fi
	touch $@

$(VENV)/.dev: requirements.txt requirements-dev.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@

# serve.py prints "PinPoint is ready: <address>" once the server answers; Streamlit's own banner, printed seconds
# before that, is hidden.
app: $(VENV)/.app
	@echo "starting PinPoint (it prints its address once it answers)"
	STREAMLIT_LOGGER_HIDE_WELCOME_MESSAGE=true $(BIN)/streamlit run serve.py

# The browser test needs Debian's chromium, the store tests a PostgreSQL server and the fleet's Slurm test a one-node
# Slurm (slurm-wlm, munge); install them when we can (root), otherwise those tests are skipped with the reason.
test: $(VENV)/.dev
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing chromium for the browser test"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; fi
	@if ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] \
	  && command -v apt-get >/dev/null; then echo "installing postgresql for the store's PostgreSQL tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; fi
	@if ! command -v slurmctld >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing slurm-wlm and munge for the fleet's one-node Slurm test"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null; fi
	$(BIN)/ruff check .
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet  # the docs site, into out/site (git-ignored)
	$(BIN)/python -m pytest -p randomly --randomly-seed=$(TEST_ORDER_SEED)

# On the GPU machine (docs/contributing/testing.md): the GPU tests only.
gpu-test:
	python3 -m pytest -m gpu -v -s

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache out/site build *.egg-info
