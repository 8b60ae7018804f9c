"""Optimizers, parameter-keyed gradients, clipping and learning-rate schedules (``em.optim``).

Optimizers follow ``torch.optim``'s update rules: SGD, Adam, AdamW, RMSProp, AdaGrad, Adadelta,
Adamax, NAdam, RAdam and LBFGS (``step(lr, model, closure)``). Each takes an optional list of
parameter groups first (see ``Optimizer``) and its options as keywords; ``no_decay_groups``
builds the usual weight-decay split.

Example:
    >>> optim = em.optim.Adam()
    >>> grads = em.optim.GradientsParams.from_grads(loss.backward(), model)
    >>> model = optim.step(1e-3, model, grads)
    >>> optim = em.optim.AdamW(em.optim.no_decay_groups(model, 0.1), lr=6e-4)
    >>> model = optim.step(None, model, grads)
"""

from . import lr as lr
from .adadelta import Adadelta as Adadelta
from .adagrad import AdaGrad as AdaGrad
from .adam import Adam as Adam
from .adam import AdamW as AdamW
from .adamax import Adamax as Adamax
from .base import Optimizer as Optimizer
from .clipping import GradientClipping as GradientClipping
from .clipping import clip_grad_norm as clip_grad_norm
from .clipping import clip_grad_value as clip_grad_value
from .grads import GradientsAccumulator as GradientsAccumulator
from .grads import GradientsParams as GradientsParams
from .groups import no_decay_groups as no_decay_groups
from .lbfgs import LBFGS as LBFGS
from .nadam import NAdam as NAdam
from .radam import RAdam as RAdam
from .rmsprop import RMSProp as RMSProp
from .sgd import SGD as SGD
