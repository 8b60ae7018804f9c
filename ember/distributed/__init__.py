"""Training on several devices (SEMANTICS §10).

``DataParallel`` runs forked replicas in worker threads of one process and combines their
gradients on the main device; ``em.train.Learner(..., devices=[...])`` uses it.
"""

from .replicas import DataParallel as DataParallel
from .replicas import ParallelStep as ParallelStep
from .replicas import split_batch as split_batch
