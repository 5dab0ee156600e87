"""Jobs: measurements that need both ``decoders.bench`` (our decoders) and ``decoders.engines`` (serving engines), one
library call each, for the CLI and the figures above them (docs/project.md, "Layout")."""
