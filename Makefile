# Kadence — the two commands a newcomer needs:
#   make run    local Kafka broker + every Kadence process (embedded single-node default)
#   make test   installs everything, starts the broker, runs lint, types and the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# the suite runs on PYTEST_WORKERS pytest-xdist workers (0: serially, in this process). Most of
# its time is live tests waiting on the broker and on child processes, so on 2 cores 3 workers
# overlap that waiting; more would crowd the CPUs that the tests' p99-lateness checks share.
PYTEST_WORKERS ?= 3
# longest tests first (tests/balance.py), a module's shared stack on one worker (loadgroup)
XDIST := -n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder

# faust-streaming, for the test of a tenant's faust agent (tests/integration/test_faust_live.py),
# is installed without its own pins: through mode-streaming it pins croniter < 6, and Kadence
# needs croniter >= 6 (CroniterError). Only faust's and mode's crontab timers (`@app.crontab`)
# call croniter, and the test's agent has none. Not in the dev extra, where pip would resolve
# the pin by taking Kadence's croniter back to 5 (which breaks Kadence's own cron parser).
FAUST := faust-streaming==0.15.3 mode-streaming==0.7.1
FAUST_DEPS := aiokafka aiohttp aiohttp_cors 'click>=6.7,<8.4' colorlog intervaltree \
	mypy_extensions six terminaltables venusian==3.1.0 yarl

.PHONY: run test deps broker broker-stop broker-status cluster cluster-stop bench-cluster lint typecheck schemas clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Kadence needs Python >= 3.11 (found " + sys.version.split()[0] + ")")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	$(BIN)/python -m pip install -q --no-deps $(FAUST)
	$(BIN)/python -m pip install -q $(FAUST_DEPS)
	@touch $(STAMP)

deps: $(STAMP)

broker: deps
	$(BIN)/python -m infra.kafka.kafkactl start

broker-stop: deps
	$(BIN)/python -m infra.kafka.kafkactl stop

# three local KRaft nodes (ports 29092, 29102, 29112; infra/kafka/cluster.py)
cluster: deps
	$(BIN)/python -m infra.kafka.kafkactl cluster-start

cluster-stop: deps
	$(BIN)/python -m infra.kafka.kafkactl cluster-stop

# failover on a three-node cluster of its own: a broker, then the leader of executions, killed -9
# under a steady load (bench/cluster.py; figures in docs/benchmarks-history.md)
bench-cluster: deps
	$(BIN)/python -m bench.cluster

broker-status: deps
	$(BIN)/python -m infra.kafka.kafkactl status

lint: deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: deps
	$(BIN)/mypy

schemas: deps
	$(BIN)/python -m kadence.schemagen check

test: deps broker lint typecheck schemas
	$(BIN)/pytest $(XDIST) $(PYTEST_ARGS)

# line and branch coverage of the whole suite, child processes (and xdist workers) included
# (slower than `make test`)
.PHONY: coverage
coverage: deps broker
	rm -f .coverage .coverage.*
	$(BIN)/coverage run -m pytest $(XDIST) $(PYTEST_ARGS)
	$(BIN)/coverage combine -q
	$(BIN)/coverage report --format=total | sed 's/^/coverage: line+branch total %: /'

run: deps
	$(BIN)/python -m apps.stack

clean: broker-stop
	rm -rf .run .mypy_cache .ruff_cache .pytest_cache .hypothesis .coverage .coverage.*

# --- benchmarks (figures go to bench/results/, not into tests) --------------------------------
.PHONY: bench-time
bench-time: deps
	$(BIN)/python -m bench.time_engine

# a job's cost by age: fresh per-second jobs against jobs with 1 100 settled runs, CPU per fire
# and outcome, stored bytes, changelog bytes per execution; this build and a963da1 (state v2)
# side by side, in process, no broker (bench/state_age.py)
.PHONY: bench-state-age
bench-state-age: deps
	$(BIN)/python -m bench.state_age --jobs 10 --age 1100 --seconds 60 --compare-with a963da1

.PHONY: bench-burst bench-restore bench-execution
bench-burst: deps broker
	$(BIN)/python -m bench.scheduler burst --jobs 100000

# B5: RESTORE_JOBS=10000000 for the seeds' scale (about an hour on 2 cores)
RESTORE_JOBS ?= 1000000
bench-restore: deps broker
	$(BIN)/python -m bench.scheduler restore --jobs $(RESTORE_JOBS)

bench-execution: deps broker
	$(BIN)/python -m bench.execution throughput --jobs 20000
	$(BIN)/python -m bench.execution recovery --jobs 200

# the midnight suite (issue #8): B1 burst at three sizes, B2 sustained rates, B3 noisy
# neighbour with and without tenant fairness, B4 failover, the peers on the same machine
# (needs Debian's redis-server and PostgreSQL), the plots
.PHONY: bench-b1 bench-sustained bench-noisy bench-flood bench-failover bench-peers bench-peers-sustained bench-plots peers-deps
bench-b1: deps broker
	for n in 10000 100000 250000; do $(BIN)/python -m bench.scheduler burst --jobs $$n || exit 1; done

bench-sustained: deps broker
	$(BIN)/python -m bench.sustained --rates 100,200,400,600 --seconds 60

# B7: 10 000 webhooks due at one second against a sink that answers 200 ms late, and the HTTP
# sustained knee against a keep-alive sink (bench/webhooks.py, bench/sustained.py)
.PHONY: bench-webhooks
bench-webhooks: deps broker
	$(BIN)/python -m bench.webhooks --jobs 10000 --delay-ms 200
	$(BIN)/python -m bench.sustained --target http --rates 1000,2000,3000 --seconds 45

bench-failover: deps broker
	$(BIN)/python -m bench.failover --fault all --jobs 50 --seconds 60

# B6: one tenant with 10 000 per-second jobs beside twenty small ones: with no cap, with the
# default caps, with a cap of 300 a second for the flooding tenant (bench/tenant_flood.py)
bench-flood: deps broker
	$(BIN)/python -m bench.tenant_flood

bench-noisy: deps broker
	$(BIN)/python -m bench.execution noisy --jobs 100000 --small 50 --each 20 --lead 150 --concurrency 128
	$(BIN)/python -m bench.execution noisy --jobs 100000 --small 50 --each 20 --lead 150 --concurrency 64
	$(BIN)/python -m bench.execution noisy --jobs 100000 --small 50 --each 20 --lead 150 --concurrency 64 --fairness fifo

peers-deps: deps
	$(BIN)/python -m pip install -q -e '.[dev,peers]'
	command -v redis-server >/dev/null || apt-get install -y -q redis-server
	test -x /usr/lib/postgresql/15/bin/initdb || apt-get install -y -q postgresql-15
	command -v mvn >/dev/null || apt-get install -y -q maven

bench-peers: peers-deps broker
	$(BIN)/python -m bench.execution throughput --jobs 10000 --lead 60
	$(BIN)/python -m bench.peers all --jobs 10000

# db-scheduler under B2's open-loop load (no Kafka), its usual 500 ms polling and 100 ms
bench-peers-sustained: peers-deps
	$(BIN)/python -m bench.peers dbscheduler-sustained --rates 1000,2000,2500,3000 --seconds 60
	$(BIN)/python -m bench.peers dbscheduler-sustained --rates 3000,4000,5000,6000 --seconds 60 --poll-ms 100

bench-plots: peers-deps
	$(BIN)/python -m bench.plots

# the summary at the top of docs/benchmarks.md and its plot, from bench/summary.json (runs nothing)
.PHONY: bench-summary
bench-summary: deps
	$(BIN)/python -m bench.summary --write

.PHONY: chaos soak
SEED ?= 1
chaos: deps broker
	$(BIN)/python -m testkit.chaos --seed $(SEED) $(if $(SCENARIO),--scenario $(SCENARIO)) $(if $(filter 0,$(BATCHES)),--no-batches)

soak: deps broker
	$(BIN)/python -m testkit.chaos --soak --seed $(SEED)
