# kubesched.scheduler: the two commands that matter are `make demo` and `make test`.
SHELL := /bin/bash
ROOT := $(abspath .)
VENV := $(ROOT)/.venv
export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(ROOT)/collections:$(shell ls -d $(VENV)/lib/python3*/site-packages 2>/dev/null | head -1)
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH := false
export PYTHONPATH := $(ROOT)

.PHONY: help setup lab-up lab-down lab-status nodes lint sanity unit integration molecule \
	test demo demo-down bench reliability docs clean

help:
	@echo "make demo        run the main job on a self-contained local lab (make demo-down undoes it)"
	@echo "make test        lint, sanity, unit, integration and Molecule tests (brings the lab up and down)"
	@echo "make setup       venv, collection link, Docker, base image, Kubernetes binaries"
	@echo "make lab-up | lab-down | lab-status   the local cluster on 127.0.0.1:6443 (etcd, kube-apiserver,"
	@echo "                 kube-controller-manager, kwok); make nodes COUNT=N adds N kwok nodes"
	@echo "make bench       scheduler benchmark (long); make reliability  failover and bad-input suites"

setup:
	@bash lab/setup.sh all

lab-up: setup
	@bash lab/lab.sh up

lab-down:
	@bash lab/lab.sh down

lab-status:
	@bash lab/lab.sh status

nodes:
	@$(VENV)/bin/python -m lab.fake_nodes --count $${COUNT:-3} $${STATIC:+--static}

lint:
	ruff check .
	ansible-lint --profile production --offline
	antsibull-changelog lint

sanity:
	@bash tests/sanity.sh

unit:
	pytest -q tests/unit

integration:
	pytest -q -p no:cacheprovider tests/integration

molecule:
	@bash tests/molecule.sh

# The whole suite in order; the lab is brought up first and always taken down at the end.
test: setup
	@bash tests/run-all.sh

demo: setup lab-up
	@bash lab/demo.sh up

demo-down:
	@bash lab/demo.sh down

bench: setup
	@$(VENV)/bin/python -m tests.bench $(BENCH_ARGS)

# Failover, API server restarts, races, bad input, role failure modes and security, on a
# private lab and its own container masters (about 40 minutes).
reliability: setup
	@$(VENV)/bin/python -m tests.reliability

clean: lab-down
	rm -rf .cache tests/output
