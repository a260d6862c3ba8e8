"""attngeom: reproduce and verify the claims of "The Geometry of Attention Is a Choice of Kernel".

Array names end in their axes, one letter each (`q_LHTD`): L layers, H heads, N heads on any leading axes flattened, T query positions, S key positions, D head dimension, C model width, V vocabulary, B batch rows, I steps of one device call, E validation batches, M corpus tokens, W windows, R scorable rows, P points, A points still in play, K keys (bodies) of the toy, U directions; 1 and 2 are literal sizes.
"""

__version__ = "0.1.0"
