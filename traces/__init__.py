"""Job traces: the canonical schema, readers and writers for public formats, generators for the
published distributions, the model profile table, and small shipped samples.

Most callers need only `traces.formats.read_trace` / `write_trace`, `traces.generators.generate`
and `traces.profiles.ProfileTable`.
"""
