"""What a model learns and is measured on: the Task interface (:mod:`federated.tasks.base`)
and one package per task kind, ``federated/tasks/<kind>/``, holding all of the kind
(docs/adding-a-task.md).  Imports nothing: the report reads a kind's ``spec`` module
without torch."""
