"""The built-in parts a job is made of: models, datasets (with their downloaders), tasks and
optimizers, declared into ``engine.registry``. Torch-free to import: builders import torch
inside themselves.
"""
