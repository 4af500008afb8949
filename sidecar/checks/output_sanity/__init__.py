"""The output-sanity verdict: scores and classes a model returns, against what is plausible."""
