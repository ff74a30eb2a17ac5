"""The scheduler benchmark: kubesched, kube-scheduler and a raw binder on one API server."""
