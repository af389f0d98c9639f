"""The command line (``hetero-explore``)."""
