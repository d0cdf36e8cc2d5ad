"""Values layer: record entries, source tags, chat messages. Imports nothing but the stdlib."""
