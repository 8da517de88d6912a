"""Reading a judge's raw text: every parser is a pure function registered by name (a rubric's ``parser:``).

- :mod:`.registry`: the :data:`~.registry.PARSERS` registry of label parsers, the reasons of an unscored verdict and
  the text helpers every parser shares; a leaf that imports no parser.
- :mod:`.labels`: pairwise labels (``[[A]]``, LLMBar's ``Output (a)``, JSON fields, regexes).
- :mod:`.tokens`: a label read from the answer's token log-probabilities (``verdict_tokens``).
- :mod:`.scores`: pointwise scores per criterion (:data:`~.scores.SCORE_PARSERS`).
- :mod:`.json_objects`: the one JSON extractor the JSON parsers read through.

Each parser module registers its parsers when it is imported; importing the package imports them all, so the
registries are complete whichever module a caller names. No parser module imports another (a test asserts there
is no import cycle in runner/).
"""

from runner.judging.parsers import labels, scores, tokens  # noqa: F401 - each registers its parsers
