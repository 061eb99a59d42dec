"""Node and topic configuration: the broker/controller config (`node_config`), the security
config, the topic config table, synonyms and the generated reference (docs/configuration.md)."""
