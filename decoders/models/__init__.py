"""The models and what makes them: the model protocol (``protocol``, declared once) and its implementations
(``tinygpt``, ``hf``, ``gguf``, ``history``; helpers in ``base``), with the zoo of shipped and built models
(``zoo``, weights in ``weights/``), the stdlib corpus they are trained on (``corpus``) and their training
(``training``)."""
