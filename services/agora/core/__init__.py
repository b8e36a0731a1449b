"""Pure domain core: models and algorithms. Imports nothing from Dapr."""
