"""weft.metal: weft has no Metal backend; is_available() says so (mlx.core.metal)."""


def is_available():
    return False
