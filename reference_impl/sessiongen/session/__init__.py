"""The durable Session engine, one module per part of the plan's pipeline.

A turn: `admission` (a prompt becomes a pending input) -> `runner` (the Drain: promote,
`context.select` a read-only snapshot, `compaction` when the history would not fit,
`request.SessionModelRequest.prepare`, one provider stream, `settlement`, tools, repeat up to
the step limit). `generate` is session.generate on the same `prepare`, appending one transient
prompt and writing nothing. `instructions` resolves and commits the instruction files,
`transcript` lowers Session History to provider messages, `store` is the event-sourced
SQLite store, and `engine.SessionEngine` wires them.

Prototypes import the public names from `sessiongen` (which reports them as its own); the
modules here are the engine's parts, importable for tests and tools, and may change.
"""
