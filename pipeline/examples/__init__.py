"""Example jobs on the Ottla connector; see pipeline/README.md for how to run them."""
