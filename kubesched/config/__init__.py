"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1): decoding, defaults, validation."""

from kubesched.config.load import ConfigError, load_config, parse_config

__all__ = ["ConfigError", "load_config", "parse_config"]
