"""The model's view after a checkpoint: system prompt, recollection, recent messages (F4, F5). Pure."""
