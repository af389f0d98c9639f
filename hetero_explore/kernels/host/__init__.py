"""Host-value ops without numba kernels (sequences, optionals, maps, images): kept in their own
folder so that editing them does not change the kernel-source hash (see ``kernels.target``)."""
