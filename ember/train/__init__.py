"""Training: ``Learner`` (fit with metrics, display, records, resume), metrics and callbacks."""

from .callbacks import Callback as Callback
from .callbacks import EarlyStopping as EarlyStopping
from .display import PlainDisplay as PlainDisplay
from .display import SilentDisplay as SilentDisplay
from .display import TerminalDisplay as TerminalDisplay
from .display import make_display as make_display
from .errors import NonFiniteError as NonFiniteError
from .learner import Learner as Learner
from .learner import classification_step as classification_step
from .logging import MetricLog as MetricLog
from .logging import plot_curves as plot_curves
from .metrics import Accuracy as Accuracy
from .metrics import LearningRate as LearningRate
from .metrics import Loss as Loss
from .metrics import Perplexity as Perplexity
from .metrics import StepOutput as StepOutput
from .metrics import TopKAccuracy as TopKAccuracy
from .metrics import default_metrics as default_metrics
