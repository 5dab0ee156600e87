"""Jobs: measurements that need both ``measure`` (our decoders) and ``engines`` (serving engines), one library
call each, for the CLI and the figures above them (docs/project.md, "Layout")."""
