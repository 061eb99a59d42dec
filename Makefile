# raftka — every target creates the virtualenv on demand from the lock files:
# requirements.lock (the runtime only: `make run`, `make install`) and requirements-dev.lock
# (plus the [spark], [chaos] and [dev] extras: `make test`, `make bench`, `make lint`).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
DEV_STAMP := $(VENV)/.installed-dev-stamp
# -n 4 on 2 cores: the suite mostly waits (clusters, elections, JVMs); tests/conftest.py orders
# the work (longest first) and groups it in work units (a module: its clusters start once).
PYTEST_ARGS ?= -n 4 --dist loadscope --no-loadscope-reorder --durations=25
# make fuzz N=1000000 SEED=42 KINDS=protocol (KINDS=all adds CRC-valid malformed batches)
N     ?= 100000
SEED  ?=
KINDS ?= all
# make simulate SEEDS=100000 FIRST_SEED=0: the quorum simulation; exits 1 at the first failing seed
# (JOBS=2: worker processes over chunks of seeds; still the first failing seed in seed order)
SEEDS      ?= 1000
FIRST_SEED ?= 0
JOBS       ?= 1

.PHONY: install install-dev run test compat bench fuzz simulate lint lock clean

install: $(STAMP)

install-dev: $(DEV_STAMP)

$(STAMP): requirements.lock pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $(STAMP)

$(DEV_STAMP): $(STAMP) requirements-dev.lock
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.lock
	@touch $(DEV_STAMP)

# make run PORT_BASE=19092: another port base when 9092-9294 are taken
run: $(STAMP)
	$(VENV)/bin/raftka cluster up --nodes 3 $(if $(PORT_BASE),--port-base $(PORT_BASE))

test: $(DEV_STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

# The differential suite against Apache Kafka 4.4 (tests/differential/), every scenario: Kafka's
# jars come from Maven Central once (~/.cache/raftka/kafka-4.4.0, or $$RAFTKA_KAFKA_CACHE); needs
# java 17 and mvn. `make test` runs its bounded part. Prints the same/wording/differs figures;
# REPORT=compat.json also writes every step's outcomes on both clusters.
REPORT ?=
# Also the heavy third-party-client runs marked compat_full elsewhere (franz-go's own tests,
# Kafka's Java consumer and share consumer on 3-node clusters, Kafka's Java producer's
# transaction.version 2 through the documented layout's restarts).
COMPAT_FULL_ELSEWHERE = tests/compat/test_franz_go_kip848.py tests/compat/test_kip848_java.py \
	tests/integration/test_share_java_consumer.py tests/compat/test_readme_layout_txn_v2.py
compat: $(DEV_STAMP)
	$(PY) -m pytest tests/differential $(COMPAT_FULL_ELSEWHERE) --compat-full -n 0 $(if $(REPORT),--compat-report $(REPORT))

bench: $(DEV_STAMP)
	$(PY) -m bench

# The protocol fuzzer (tests/fuzz/) against a fresh broker: N frames, the seed printed.
fuzz: $(DEV_STAMP)
	$(PY) -m tests.fuzz --frames $(N) --kinds $(KINDS) $(if $(SEED),--seed $(SEED))

simulate: $(STAMP)
	$(PY) -m raftka.raft_meta.quorum.simulation --seeds $(SEEDS) --first-seed $(FIRST_SEED) --jobs $(JOBS)

# ruff, then mypy over the installed layout (tests/typecheck.py): strict on the pure cores and the
# wire codec, mypy's default level on the rest (pyproject.toml's [tool.mypy]).
lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m tests.typecheck

# Re-resolve both locks in a scratch venv: the newest versions pyproject.toml's ranges allow,
# pinned exactly; the runtime lock from `pip install .`, the dev lock with every extra.
LOCK_VENV := .lock-venv
lock:
	rm -rf $(LOCK_VENV) && $(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install --quiet --upgrade setuptools wheel
	$(LOCK_VENV)/bin/pip install --quiet .
	( echo "# Locked, transitive pins for Python 3.11 of raftka's runtime dependencies only (\`make run\`, \`make install\`); setuptools and wheel build the editable install. The extras' pins are in requirements-dev.lock. Regenerate both: make lock."; \
	  $(LOCK_VENV)/bin/pip freeze --all --exclude pip --exclude raftka ) > requirements.lock
	$(LOCK_VENV)/bin/pip install --quiet '.[spark,spark-connect,chaos,dev]'
	( echo "# Locked, transitive pins for Python 3.11 of raftka with its [spark,spark-connect,chaos,dev] extras: \`make test\`, \`make bench\`, \`make lint\`. Regenerate both locks: make lock."; \
	  $(LOCK_VENV)/bin/pip freeze --all --exclude pip --exclude raftka ) > requirements-dev.lock
	rm -rf $(LOCK_VENV)

clean:
	rm -rf $(VENV) $(LOCK_VENV) .pytest_cache build *.egg-info
