"""kubesched: a Kubernetes scheduler in Python with kube-scheduler's framework and plugins."""

__version__ = "0.2.0"
