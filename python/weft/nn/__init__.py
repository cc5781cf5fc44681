"""weft.nn: neural network layers with mlx.nn's API (import weft.nn as nn)."""
from . import init, losses  # noqa: F401
from .activations import (  # noqa: F401
    CELU, ELU, GELU, GLU, SELU, HardShrink, Hardswish, HardTanh, LeakyReLU, LogSigmoid,
    LogSoftmax, Mish, PReLU, ReLU, ReLU2, ReLU6, Sigmoid, SiLU, Softmax, Softmin, Softplus,
    Softshrink, Softsign, Step, Tanh, celu, elu, gelu, gelu_approx, gelu_fast_approx, glu,
    hard_shrink, hard_tanh, hardswish, leaky_relu, log_sigmoid, log_softmax, mish, prelu, relu,
    relu2, relu6, selu, sigmoid, silu, softmax, softmin, softplus, softshrink, softsign, step,
    tanh,
)
from .conv import (  # noqa: F401
    Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
)
from .layers import (  # noqa: F401
    BatchNorm, Bilinear, Dropout, Dropout2d, Dropout3d, Embedding, GroupNorm, Identity,
    InstanceNorm, LayerNorm, Linear, RMSNorm, Sequential,
)
from .distributed import (  # noqa: F401
    AllToShardedLinear, FullyShardedModule, QuantizedAllToShardedLinear,
    QuantizedShardedToAllLinear, ShardedToAllLinear, fully_shard, shard_inplace, shard_linear,
)
from .module import Module  # noqa: F401
from .pooling import (  # noqa: F401
    AvgPool1d, AvgPool2d, AvgPool3d, MaxPool1d, MaxPool2d, MaxPool3d, Upsample,
    upsample_cubic, upsample_linear, upsample_nearest,
)
from .quantized import QQLinear, QuantizedEmbedding, QuantizedLinear, quantize  # noqa: F401
from .recurrent import GRU, LSTM, RNN  # noqa: F401
from .transformer import (  # noqa: F401
    ALiBi, MultiHeadAttention, RoPE, SinusoidalPositionalEncoding, Transformer,
    TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer,
)
from .utils import average_gradients, checkpoint, value_and_grad  # noqa: F401
