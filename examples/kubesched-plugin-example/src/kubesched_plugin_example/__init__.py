"""An example out-of-tree kubesched plugin (see docs/plugins.md in kubesched.scheduler)."""
