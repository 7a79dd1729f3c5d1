# make test: the whole suite; make demo: a worker on a throwaway Redis.
# Both install what is missing: a virtualenv with the package, and Debian's redis-server
# (and, for make test's metrics and dashboard tests, Debian's prometheus, chromium and chromium-driver).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test interop demo bench ab chaos redis-server prometheus chromium clean

test: $(INSTALLED) redis-server prometheus chromium
	$(PY) -m pytest $(PYTEST_ARGS)

# Live interop: real go-delayed workers, producers and sweepers (interop/cmd) beside ours.
# Without Go, or if go-delayed's module does not resolve, it says so in one line and passes.
interop: $(INSTALLED) redis-server
	PY=$(PY) interop/run

demo: $(INSTALLED) redis-server
	$(PY) examples/demo.py

# The long chaos runs: 100,000 tasks through killed workers, Redis restarts and dropped connections,
# then killed go-delayed workers, and our killed workers under go-delayed's sweeper (where Go is);
# then durability, Redis SIGKILLed under producers with RDB's default snapshots, AOF everysec and
# AOF always, counting the acknowledged enqueues lost (about 2.5 minutes; CHAOS_ARGS="--scenario durability").
chaos: $(INSTALLED) redis-server
	$(PY) -m tests.chaos $(CHAOS_ARGS)

# Us and our peers side by side on one throwaway Redis; writes BENCHMARKS.md (about 14 minutes).
bench: $(INSTALLED) redis-server
	BENCH_COMMAND="make bench" $(PY) bench/run.py $(BENCH_ARGS)

# In-process A/B of the no-op and tracked drains: a git ref against the working tree, runs alternating
# (about 70 s); AB_ARGS names the ref, e.g. make ab AB_ARGS="--base fc1c7ee".
ab: $(INSTALLED) redis-server
	$(PY) bench/ab.py $(AB_ARGS)

$(INSTALLED): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
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

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache bench/.venv-*
