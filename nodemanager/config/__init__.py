"""provider.yaml: the schema (``schema``), durations, and loading with every error listed."""

from nodemanager.config.load import EMBEDDED_DEFAULT, embedded_default_path, load_config, parse_config
from nodemanager.config.schema import Packing, Pool, ProviderConfig

__all__ = ["EMBEDDED_DEFAULT", "Packing", "Pool", "ProviderConfig", "embedded_default_path", "load_config", "parse_config"]
