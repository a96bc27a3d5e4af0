"""The segmentation kind, one package (docs/adding-a-task.md): its task, targets, folder
reader, models and torch-free report spec.  Imports nothing: the report reads ``spec``
without torch."""
