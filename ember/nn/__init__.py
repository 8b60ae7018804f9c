"""Neural-network modules (``em.nn``): ``Module``, ``Param``, layers, initialisers, functional ops.

Example:
    >>> model = em.nn.Sequential(em.nn.Linear(4, 8), em.nn.ReLU(), em.nn.Linear(8, 2))
    >>> model.num_params()
    58
"""

from . import functional as functional
from . import init as init
from .layers import ELU as ELU
from .layers import GELU as GELU
from .layers import GRU as GRU
from .layers import LSTM as LSTM
from .layers import RNN as RNN
from .layers import AdaptiveAvgPool2d as AdaptiveAvgPool2d
from .layers import AvgPool1d as AvgPool1d
from .layers import AvgPool2d as AvgPool2d
from .layers import BatchNorm1d as BatchNorm1d
from .layers import BatchNorm2d as BatchNorm2d
from .layers import Conv1d as Conv1d
from .layers import Conv2d as Conv2d
from .layers import ConvTranspose2d as ConvTranspose2d
from .layers import Dropout as Dropout
from .layers import Embedding as Embedding
from .layers import Flatten as Flatten
from .layers import GroupNorm as GroupNorm
from .layers import GRUCell as GRUCell
from .layers import Hardsigmoid as Hardsigmoid
from .layers import Hardswish as Hardswish
from .layers import Identity as Identity
from .layers import InstanceNorm1d as InstanceNorm1d
from .layers import InstanceNorm2d as InstanceNorm2d
from .layers import InstanceNorm3d as InstanceNorm3d
from .layers import LayerNorm as LayerNorm
from .layers import LeakyReLU as LeakyReLU
from .layers import Linear as Linear
from .layers import LSTMCell as LSTMCell
from .layers import MaxPool1d as MaxPool1d
from .layers import MaxPool2d as MaxPool2d
from .layers import MaxUnpool1d as MaxUnpool1d
from .layers import MaxUnpool2d as MaxUnpool2d
from .layers import Mish as Mish
from .layers import ModuleDict as ModuleDict
from .layers import ModuleList as ModuleList
from .layers import MultiHeadAttention as MultiHeadAttention
from .layers import MultiheadAttention as MultiheadAttention
from .layers import PixelShuffle as PixelShuffle
from .layers import PixelUnshuffle as PixelUnshuffle
from .layers import ReLU as ReLU
from .layers import RmsNorm as RmsNorm
from .layers import RNNCell as RNNCell
from .layers import RotaryEncoding as RotaryEncoding
from .layers import Sequential as Sequential
from .layers import Sigmoid as Sigmoid
from .layers import SiLU as SiLU
from .layers import Softplus as Softplus
from .layers import Tanh as Tanh
from .layers import TransformerBlock as TransformerBlock
from .layers import TransformerDecoder as TransformerDecoder
from .layers import TransformerDecoderLayer as TransformerDecoderLayer
from .layers import TransformerEncoder as TransformerEncoder
from .layers import TransformerEncoderLayer as TransformerEncoderLayer
from .layers import Upsample as Upsample
from .module import Module as Module
from .param import Param as Param
from .param import ParamId as ParamId
