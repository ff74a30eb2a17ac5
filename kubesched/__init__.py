"""kubesched: a Kubernetes scheduler in Python with kube-scheduler's framework and plugins."""

__version__ = "0.3.0.dev0"
