"""The bundled problem set: one KernelBench-style reference file per problem (see docs/PROBLEMS.md)."""
