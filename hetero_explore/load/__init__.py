"""Loading as passes: read, validate, bind, infer, complete op shapes, fold, optimise, arrays."""
