"""AOTInductor regions: a model's stages exported and compiled ahead of
time (docs/aoti.md)."""
