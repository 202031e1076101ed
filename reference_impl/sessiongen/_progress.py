"""The progress bar the long commands show (`workbench`, `bench`, `experiment warming`): on
`console` when it is a terminal, silent otherwise, and gone once the work is done."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


def progress_bar(console: Console, *, counted: bool = True) -> Progress:
    """`counted`: show "done/total" steps; else a percentage (for weighted totals)."""
    # startup: the command line loads only what the command it runs needs
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn() if counted else TaskProgressColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not console.is_terminal,
        transient=True,
    )
