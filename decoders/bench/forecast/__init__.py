"""Forecasts made before the runs they predict, and judged on them (docs/measuring.md, "Forecasts"): a gamma sweep's
(``sweep``), the dynamic tree's (``dynamic``) and the coverage of the committed forecasts' stated intervals
(``coverage``)."""
