"""The frameworks' own released unit tests, run with seamscope added (see README.md here)."""
