"""Ready-made datasets: ``digits`` (shipped), MNIST and Fashion-MNIST (downloaded), text."""

from .digits import digits as digits
from .digits import load_digits as load_digits
from .mnist import fashion_mnist as fashion_mnist
from .mnist import mnist as mnist
from .text import CharTokenizer as CharTokenizer
from .text import RandomBlocks as RandomBlocks
from .text import TextData as TextData
from .text import load_text as load_text
from .text import shakespeare as shakespeare
