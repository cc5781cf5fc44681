"""weft.cuda: weft has no CUDA backend; is_available() says so (mlx.core.cuda)."""


def is_available():
    return False
