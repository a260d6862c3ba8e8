"""attngeom: reproduce and verify the claims of "The Geometry of Attention Is a Choice of Kernel"."""

__version__ = "0.1.0"
