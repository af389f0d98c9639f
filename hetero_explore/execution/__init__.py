"""Running plans: the heterogeneous executor, the reference run, subgraphs of control flow."""
