"""Distribution-preservation audits: exact enumeration of the decoders' random choices (``exact``),
statistical audits of black-box samplers (``statistical``) and planted-bug decoders they must catch
(``mutants``)."""
