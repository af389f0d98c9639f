"""The one run loop: a node sequence on one provider as a compiled program (arena + replay)."""
