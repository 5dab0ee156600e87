"""The models: the model protocol (``protocol``, declared once) and its implementations (``tinygpt``, ``hf``,
``gguf``, ``history``; helpers in ``base``), the stdlib corpus they are trained on (``corpus``) and the shipped
weights (``weights/``). The lowest layer of the decoders: nothing here imports a decoder; the zoo of shipped and
built models (``decoders.zoo``), their training (``decoders.training``) and the drafts' registry
(``decoders.drafts``) sit above, beside the decoders they use."""
