"""The mathematics of the laws, no bundles: the two score laws, the 2-D toy geometry and the theorems'
numerical witnesses, the hull census and the rounding bound of a float16 export."""
