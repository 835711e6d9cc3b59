"""URL handling: normalization of seeds, outlinks and redirect targets."""
