"""One script per figure or table of the papers, regenerated from the toolkit.

Each module's docstring is its caption and ``make(out, results)`` writes its files (PNG and PDF, or
Markdown and CSV for tables) into ``out``, reading cached measurements from ``results`` where it needs
them. ``style`` holds the shared look; ``paper_data`` the papers' printed numbers that figures overlay.
"""
