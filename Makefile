# make test: the whole suite, then the tests of our use of redis-py on the oldest redis-py we support;
# make demo: a worker on a throwaway Redis.
# Both install what is missing: a virtualenv with the package, and Debian's redis-server
# (and, for make test's metrics and dashboard tests, Debian's prometheus, chromium and chromium-driver; for
# its scheduler replica with a fast clock, Debian's faketime).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
# The oldest redis-py setup.cfg allows (tests/test_redispy.py checks they agree); make test runs
# the tests that exercise redis-py's API on it too, in a virtualenv of its own (about 70 s more).
REDIS_OLDEST := 6.1.0
OLDEST_VENV := .venv-oldest
OLDEST_PY := $(OLDEST_VENV)/bin/python
OLDEST_INSTALLED := $(OLDEST_VENV)/.installed-$(REDIS_OLDEST)
# Left out there: the cluster's restart-and-failover test (it tests our test servers, not redis-py, in 20 s).
OLDEST_TESTS := tests/test_redispy.py tests/test_client_retries.py tests/test_connections.py tests/test_queue.py \
	tests/test_worker.py tests/test_kill_points.py tests/test_cluster.py tests/test_tracking.py \
	--deselect tests/test_cluster.py::test_a_clean_failover_right_after_a_restart_is_heard
# Test files run in PYTEST_JOBS processes at once (pytest-xdist, a file to a process): the suite waits
# on servers and subprocesses half the time, so two processes on two cores take about 40% less time.
PYTEST_JOBS ?= 2
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Bytecode for our own modules, written before the tests start the hundreds of processes that import
# them: with PYTHONDONTWRITEBYTECODE set (as on our CI machine), each would compile the package again,
# a quarter of a second apiece. Stale files are only ignored, never wrong.
BYTECODE := $(PY) -m compileall -q delayed tests interop examples bench

.PHONY: test go-test go-lua interop demo docs docs-serve bench ab chaos redis-server prometheus chromium faketime clean

test: $(INSTALLED) $(OLDEST_INSTALLED) redis-server prometheus chromium faketime
	@$(BYTECODE)
	$(PY) -m pytest -n $(PYTEST_JOBS) --dist loadfile $(PYTEST_ARGS)
	@$(OLDEST_PY) -c 'import redis; print("The tests of our use of redis-py again, on the oldest we support: redis-py", redis.__version__)'
	$(OLDEST_PY) -m pytest -q -n $(PYTEST_JOBS) --dist loadfile $(OLDEST_TESTS)

# Live interop: real go-delayed workers, producers and sweepers (interop/cmd) beside ours.
# Without Go, or if go-delayed's module does not resolve, it says so in one line and passes.
interop: $(INSTALLED) redis-server
	@$(BYTECODE)
	PY=$(PY) interop/run

# The Go modules (go/, and go/delayedotel/, the OpenTelemetry tracing that is a module of its own): gofmt,
# go vet and go test -race against redis-servers their tests start. Without Go it says so in one line and
# passes (as make interop does).
go-test: redis-server
	@command -v go >/dev/null || { echo "!!!!!!!! GO TESTS DID NOT RUN: no go command on PATH !!!!!!!!"; exit 0; }; \
	cd go && unformatted=$$(gofmt -l .) && { [ -z "$$unformatted" ] || { echo "gofmt would change: $$unformatted"; exit 1; }; } && \
	go vet ./... && go test -race -count=1 ./... && \
	cd delayedotel && go vet ./... && go test -race -count=1 ./...

# go/delayed/lua/ is a copy of delayed/protocol/lua/ (go:embed reads only inside its module); the tests
# of both languages fail until this copies a changed script again.
go-lua:
	rm -f go/delayed/lua/*.lua && cp delayed/protocol/lua/*.lua go/delayed/lua/

demo: $(INSTALLED) redis-server
	$(PY) examples/demo.py

# The documentation site (mkdocs.yml, docs/): built strictly into site/, so a broken link, a missing page or
# a reference that fails to render fails the build; docs-serve previews it on http://127.0.0.1:8000.
# (NO_MKDOCS_2_WARNING quiets mkdocs-material's banner about its successor.)
docs: $(INSTALLED)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

docs-serve: $(INSTALLED)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve

# The long chaos runs: 100,000 tasks through killed workers, Redis restarts and dropped connections,
# then killed go-delayed workers, and our killed workers under go-delayed's sweeper (where Go is);
# then durability, Redis SIGKILLed under producers with RDB's default snapshots, AOF everysec and
# AOF always, counting the acknowledged enqueues lost (about 2.5 minutes; CHAOS_ARGS="--scenario durability").
chaos: $(INSTALLED) redis-server
	$(PY) -m tests.chaos $(CHAOS_ARGS)

# Us and our peers side by side on one throwaway Redis; writes BENCHMARKS.md (about 20 minutes).
bench: $(INSTALLED) redis-server
	BENCH_COMMAND="make bench" $(PY) bench/run.py $(BENCH_ARGS)

# In-process A/B of the no-op and tracked drains: a git ref against the working tree, runs alternating
# (about 70 s); AB_ARGS names the ref, e.g. make ab AB_ARGS="--base fc1c7ee".
ab: $(INSTALLED) redis-server
	$(PY) bench/ab.py $(AB_ARGS)

$(INSTALLED): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,docs]'
	touch $@

$(OLDEST_INSTALLED): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_PY) -m pip install --quiet --upgrade pip
	$(OLDEST_PY) -m pip install --quiet -e '.[test]' 'redis[hiredis]==$(REDIS_OLDEST)'
	touch $@

redis-server:
	@command -v redis-server >/dev/null || { \
		echo "installing Debian's redis-server"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq redis-server; }

prometheus:
	@command -v prometheus >/dev/null || { \
		echo "installing Debian's prometheus"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends prometheus; }

chromium:
	@{ command -v chromium >/dev/null && command -v chromedriver >/dev/null; } || { \
		echo "installing Debian's chromium and chromium-driver"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium chromium-driver; }

faketime:
	@command -v faketime >/dev/null || { \
		echo "installing Debian's faketime"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends faketime; }

clean:
	rm -rf $(VENV) $(OLDEST_VENV) *.egg-info .pytest_cache bench/.venv-* site
