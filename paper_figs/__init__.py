"""One script per figure or table of the papers, regenerated from the toolkit (issue: figures).

Empty for now.
"""
