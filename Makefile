# kubesched.scheduler: the two commands that matter are `make demo` and `make test`.
SHELL := /bin/bash
ROOT := $(abspath .)
VENV := $(ROOT)/.venv
export PATH := $(VENV)/bin:$(PATH)
# This checkout is the collection kubesched.scheduler (collections/ links back to it). The
# collections the `ansible` package brings (community.*, kubernetes.core) are found on the venv's
# sys.path, which Ansible scans by default. Nothing here may be computed from files that `make
# setup` creates: make expands these before setup runs, in the same make process.
export ANSIBLE_COLLECTIONS_PATH := $(ROOT)/collections
export PYTHONPATH := $(ROOT)

.PHONY: help setup lab-up lab-down lab-status nodes lint sanity unit integration molecule \
	test demo demo-down bench reliability soak docs clean

help:
	@echo "make demo        run the main job on a self-contained local lab (make demo-down undoes it)"
	@echo "make test        lint, sanity, unit, integration and Molecule tests (brings the lab up and down)"
	@echo "make setup       venv, collection link, Docker, base image, Kubernetes binaries"
	@echo "make lab-up | lab-down | lab-status   the local cluster on 127.0.0.1:6443 (etcd, kube-apiserver,"
	@echo "                 kube-controller-manager, kwok); make nodes COUNT=N adds N kwok nodes"
	@echo "make bench       scheduler benchmark (long); make reliability  failover and bad-input suites"
	@echo "make soak        30 minutes of overlapping faults, kubesched then kube-scheduler (SOAK_MINUTES=N)"

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

# The demo's lab serves PodGroups for its gang (a lab already running keeps its flags).
demo: export LAB_FEATURE_GATES ?= GenericWorkload=true
demo: export LAB_RUNTIME_CONFIG ?= scheduling.k8s.io/v1beta1=true
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

# Three instances of kubesched, then of kube-scheduler, each on its own private lab, under a
# steady mixed arrival and a seeded schedule of overlapping faults: SOAK_MINUTES (default 30)
# each, about twice that in all; writes tests/reliability/results/soak.json, its plot and
# docs/reliability.md. For a quiet machine.
soak: setup
	@$(VENV)/bin/python -m tests.reliability.soak $(SOAK_ARGS)

clean: lab-down
	rm -rf .cache tests/output
