"""The Explorer (the only state), the demo, the warm-up, the generated models."""
