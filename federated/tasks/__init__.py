"""What a model learns and is measured on: one task object per task."""
