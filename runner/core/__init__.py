"""The vocabulary every layer shares: records, config schemas, the registry, errors."""
