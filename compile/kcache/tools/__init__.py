"""Command-line tools: prewarm a model's regions (prewarm, aoti_prewarm)
and the small models they build (model_zoo)."""
