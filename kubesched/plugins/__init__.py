"""In-tree scheduling plugins, one per file, named as kube-scheduler names them.

registry.REGISTRY maps each plugin's name to its class (the configuration knows the plugins
by name only: config/default_plugins.py). helper/ holds what several plugins share, one file
per concern. Each plugin implements only the extension points upstream's does.
"""
