# raftka — every target creates the virtualenv on demand from the lock file.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# make fuzz N=1000000 SEED=42 KINDS=protocol (KINDS=all adds CRC-valid malformed batches)
N     ?= 100000
SEED  ?=
KINDS ?= all

.PHONY: install run test bench fuzz lint lock clean

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/raftka cluster up --nodes 3

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m bench

# The protocol fuzzer (tests/fuzz/) against a fresh broker: N frames, the seed printed.
fuzz: $(STAMP)
	$(PY) -m tests.fuzz --frames $(N) --kinds $(KINDS) $(if $(SEED),--seed $(SEED))

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# Re-resolve the lock: the newest versions pyproject.toml's ranges allow, pinned exactly.
lock: $(STAMP)
	$(PY) -m pip install --quiet --upgrade -e '.[spark,spark-connect,chaos,dev]'
	( echo '# Locked, transitive pins for Python 3.11 (regenerate: make lock). pyproject.toml holds the direct ranges.'; \
	  $(PY) -m pip freeze --all --exclude-editable --exclude pip ) > requirements.lock

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
