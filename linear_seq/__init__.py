"""linear_seq: efficient sequence mixers in JAX/Flax."""

__version__ = "0.1.0"
