"""The repository's own tooling, kept out of the `sessiongen` wheel: the benchmark runner
(`bench`, behind `sessiongen bench`), the workbench that runs every notebook and builds the
site (`workbench`, behind `sessiongen workbench`), the contract's evidence tables (`evidence`,
`python -m sessiongen_tooling.evidence`) and the clause traceability (`traceability`, read by
`tests/test_contract_trace.py` and the docs hook).

It works on a checkout of the repository (it reads `benchmarks/`, `notebooks/`, `contract/`),
where `uv sync` installs it beside `sessiongen` as a workspace member.
"""
